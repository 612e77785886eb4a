"""Each strategy's largest legitimate message: the base of every node's message limit (wire.frames)."""

import pytest

from synclab.core import param_layout
from synclab.models import build_model
from synclab.strategies import registry

BATCH = 32


@pytest.fixture(scope="module")
def params():
    infos, _, _ = param_layout(build_model("smallcnn"))
    return infos


def _bound(name, params, workers=4, shards=2, **options):
    cls = registry.get(name)
    opts = cls.Options(**options)
    plan = cls.make_plan(params, ps_shards=shards, workers=workers, seed=0, options=opts)
    return cls.max_payload_bytes(plan, params, batch_size=BATCH, options=opts), plan


@pytest.mark.parametrize("name", ["wfbp", "synceasgd", "local"])
def test_allreduce_strategies_accept_the_whole_model_in_one_buffer(name, params):
    assert _bound(name, params)[0] == sum(p.numel for p in params) * 4


@pytest.mark.parametrize("name", ["ps", "asgd", "ssdsgd", "p3", "p3-slicing"])
def test_ps_strategies_accept_their_largest_partition(name, params):
    bound, plan = _bound(name, params)
    assert bound == max(p.length for p in plan.partitions) * 4
    assert bound <= max(p.numel for p in params) * 4  # a slice never exceeds its tensor


def test_mgwfbp_covers_merged_buckets_and_the_cost_model_fit(params):
    total = sum(p.numel for p in params)
    assert _bound("mgwfbp", params)[0] >= total * 4
    assert _bound("mgwfbp", params, fit_sizes_params=[256, 10 * total])[0] == 10 * total * 4


def test_stanza_covers_a_conv_workers_batch_of_activations(params):
    bound, plan = _bound("stanza", params, fc_workers=1)
    first_fc = next(p for p in params[plan.boundary:] if len(p.shape) == 2)
    assert bound >= BATCH * first_fc.shape[1] * 4
    assert bound >= sum(p.numel for p in params) * 4
