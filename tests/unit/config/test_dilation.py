"""The dilation a job runs at when its spec leaves run.dilation open (synclab.config.dilation)."""

import pytest

from synclab.config import Spec, load_spec
from synclab.config.dilation import HOST_BUDGET_BPS, choose_dilation, dilation_explicit, dilation_for
from synclab.resources import spec_path

PS_REPLAY = {"cluster": {"workers": 4, "ps_shards": 2}, "network": {"rate": "1gbit"}, "strategy": {"name": "ps"},
             "model": {"name": "smallcnn"}, "compute": {"mode": "replay"}}


def _spec(**sections) -> Spec:
    data = {k: dict(v) for k, v in PS_REPLAY.items()}
    for key, value in sections.items():
        data.setdefault(key, {}).update(value)
    return Spec.model_validate(data)


def test_four_workers_two_shards_at_1gbit_replayed_pick_d4():
    choice = choose_dilation(_spec())
    assert (choice.dilation, choice.source) == (4, "rule")  # 6 links x 1 Gbit/s = 6 > 1.5, 6 / 4 <= 1.5
    assert "6 link(s) x 1 Gbit/s = 6 Gbit/s" in choice.reason and "D = 4" in choice.reason
    assert choice.describe().startswith("dilation D = 4 (rule): ")


def test_colocated_shards_share_their_worker_link():
    spec = _spec(cluster={"workers": 4, "ps_shards": 4, "colocate_ps": True}, network={"rate": "4gbit"})
    assert choose_dilation(spec).dilation == 16  # 4 links x 4 Gbit/s


def test_an_explicit_dilation_wins_even_when_it_is_one():
    spec = _spec(run={"dilation": 1})
    assert dilation_explicit(spec) and not dilation_explicit(_spec())
    assert (choose_dilation(spec).dilation, choose_dilation(spec).source) == (1, "spec")
    assert choose_dilation(_spec(run={"dilation": 2})).dilation == 2


def test_real_compute_and_unshaped_links_stay_undilated():
    real = _spec(compute={"mode": "real"})
    assert (choose_dilation(real).dilation, choose_dilation(real).source) == (1, "real compute")
    assert "host_cpu" in choose_dilation(real).reason
    unshaped = _spec(network={"rate": None})
    assert (choose_dilation(unshaped).dilation, choose_dilation(unshaped).source) == (1, "unshaped")
    small = _spec(cluster={"workers": 1, "ps_shards": 0}, strategy={"name": "wfbp"})
    assert (choose_dilation(small).dilation, choose_dilation(small).source) == (1, "rule")


def test_the_rule_is_the_smallest_power_of_two_under_the_budget():
    assert [dilation_for(x * HOST_BUDGET_BPS) for x in (0.5, 1, 1.01, 2, 3, 8.5)] == [1, 1, 2, 2, 4, 16]
    with pytest.raises(ValueError, match="too big"):
        dilation_for(2000 * HOST_BUDGET_BPS)


def test_resolve_job_runs_at_the_chosen_d_and_the_chunk_size_follows(tmp_path):
    from synclab.roles.job import resolve_job

    path = tmp_path / "spec.yaml"
    path.write_text(spec_path("quickstart").read_text())
    sets = ["compute.mode=replay", "network.rate=10gbit", "strategy.name=wfbp", "cluster.ps_shards=0",
            "network.isolation=none"]
    undilated = load_spec(path, sets)
    assert undilated.run.dilation == 1 and undilated.transport.chunk_bytes == 4 << 20  # 10 Gbit/s: 4 MiB
    job = resolve_job(path, sets, kernel_available=frozenset(), netns_unavailable="not in a unit test")
    assert job.spec.run.dilation == 16 and job.dilation.source == "rule"  # 2 x 10 Gbit/s over 1.5
    assert job.spec.transport.chunk_bytes == 1 << 20  # 10 Gbit/s / 16 is a slow link: 1 MiB
    pinned = resolve_job(path, [*sets, "run.dilation=1"], kernel_available=frozenset(),
                         netns_unavailable="not in a unit test")
    assert pinned.spec.run.dilation == 1 and pinned.dilation.source == "spec"
    advice = resolve_job(path, sets, kernel_available=frozenset(), netns_unavailable="not in a unit test",
                         auto_dilation=False)  # the compose coordinator: D stays, the rule's D is advice
    assert advice.spec.run.dilation == 1 and advice.dilation.dilation == 16
