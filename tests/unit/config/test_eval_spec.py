"""data.name: digits and run.eval_every at the edge: what fits is accepted, the rest refused naming the key."""

from __future__ import annotations

import pytest

from synclab.config import SpecError, parse_spec

DIGITS = {"data": {"name": "digits"}, "model": {"name": "mlp", "options": {"input_dim": 64, "num_classes": 10}}}


def spec(**sections):
    data = {k: dict(v) for k, v in DIGITS.items()}
    for k, v in sections.items():
        data[k] = {**data.get(k, {}), **v}
    return parse_spec(data)


def test_digits_with_eval_is_accepted():
    s = spec(run={"eval_every": 10, "iterations": 50}, strategy={"name": "ssdsgd", "k": 3})
    assert s.run.eval_every == 10 and s.data.name == "digits" and s.data.size is None
    assert parse_spec({}).run.eval_every == 0  # off by default


@pytest.mark.parametrize("sections,words", [
    ({"data": {"name": "synthetic"}}, ["run.eval_every", "held-out split", "synthetic"]),
    ({"compute": {"mode": "replay"}}, ["run.eval_every", "compute.mode: real"]),
])
def test_eval_every_refused_where_it_cannot_work(sections, words):
    data = {"run": {"eval_every": 5}, **{k: dict(v) for k, v in DIGITS.items()}}
    for k, v in sections.items():
        data[k] = v
    with pytest.raises(SpecError) as e:
        parse_spec(data)
    for w in words:
        assert w in str(e.value)


def test_stanza_cannot_evaluate_mid_run():
    with pytest.raises(SpecError, match="stanza"):
        spec(run={"eval_every": 5}, strategy={"name": "stanza", "fc_workers": 1})


def test_digits_refuses_a_model_it_does_not_fit():
    with pytest.raises(SpecError, match="data.name 'digits'"):
        parse_spec({"data": {"name": "digits"}})  # smallcnn takes 3x32x32 images
    with pytest.raises(SpecError, match="data.name 'digits'"):
        spec(model={"options": {"input_dim": 256}})


def test_negative_eval_every_names_the_key():
    with pytest.raises(SpecError, match="run.eval_every"):
        spec(run={"eval_every": -1})
