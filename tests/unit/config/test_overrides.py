"""``dotted.key=value`` overrides: one parser for ``synclab run --set`` and the container's variables."""

import pytest

from synclab.config import SpecError, load_spec, parse_override, parse_spec


@pytest.mark.parametrize("item, pair", [
    ("cluster.workers=3", ("cluster.workers", 3)),
    ("optimizer.lr=0.1", ("optimizer.lr", 0.1)),
    ("network.profile=null", ("network.profile", None)),
    ("network.rate=4gbit", ("network.rate", "4gbit")),
    (" run.events =false", ("run.events", False)),
    ("name=", ("name", "")),
    ("name=a=b", ("name", "a=b")),
])
def test_values_are_yaml_scalars(item, pair):
    assert parse_override(item) == pair


@pytest.mark.parametrize("item, message", [
    ("cluster.workers", "must look like dotted.key=value"),
    (".workers=1", "malformed"),
    ("cluster..workers=1", "malformed"),
    ("model.name=[1", "not valid YAML"),
])
def test_bad_overrides_are_refused(item, message):
    with pytest.raises(SpecError, match=message):
        parse_override(item)


def test_typed_and_text_overrides_agree():
    text = parse_spec({}, ["cluster.workers=3", "strategy.name=wfbp", "network.rate=4gbit"])
    typed = parse_spec({}, [("cluster.workers", 3), ("strategy.name", "wfbp"), ("network.rate", "4gbit")])
    assert text == typed and text.cluster.workers == 3
    with pytest.raises(SpecError, match="model.name.x: 'name' is not a section"):
        parse_spec({"model": {"name": "mlp"}}, [("model.name.x", 1)])


def test_load_spec_names_the_file_and_the_key(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("cluster:\n  workers: 2\n")
    assert load_spec(path, ["cluster.workers=4"]).cluster.workers == 4
    with pytest.raises(SpecError) as e:
        load_spec(path, ["cluster.workers=0"])
    assert str(path) in str(e.value) and "cluster.workers" in str(e.value)
