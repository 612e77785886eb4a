"""Stanza as real processes: 2 CONV workers and 1 FC worker train exactly what ``local`` trains on 2 × batch."""

import csv
import json

import pytest
import torch

from support.cluster import FAST, run_spec, summary

pytestmark = pytest.mark.slow

CNN = [*FAST, "model.name=smallcnn"]  # stanza needs a CONV part; FAST's mlp has none


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("stanza")
    out = {"stanza": base / "stanza", "local": base / "local"}
    r = run_spec(out["stanza"], *CNN, "strategy.name=stanza", "strategy.fc_workers=1", "cluster.workers=3")
    assert r.returncode == 0, f"stanza failed:\n{r.stdout}\n{r.stderr}"
    # local's global batch is cluster.workers × batch: n_c × batch
    r = run_spec(out["local"], *CNN, "strategy.name=local", "cluster.workers=2")
    assert r.returncode == 0, f"local failed:\n{r.stdout}\n{r.stderr}"
    return out


def test_same_final_params_as_local_on_the_global_batch(runs):
    ref = torch.load(runs["local"] / "params.pt")
    got = torch.load(runs["stanza"] / "params.pt")
    assert ref.keys() == got.keys()
    for k in ref:
        assert torch.allclose(ref[k], got[k], rtol=1e-5, atol=1e-6), k
    s = summary(runs["stanza"])
    assert s["final_loss"] != s["initial_loss"]
    assert s["final_loss"] == pytest.approx(summary(runs["local"])["final_loss"], rel=1e-4)


def test_plan_and_records(runs):
    out = runs["stanza"]
    plan = json.loads((out / "plan.json").read_text())
    assert (plan["conv_workers"], plan["fc_workers"]) == (2, 1)
    assert plan["roles"] == {"worker0": "conv", "worker1": "conv", "worker2": "fc"}
    rows = list(csv.DictReader((out / "iterations.csv").open()))
    assert {int(r["iteration"]) for r in rows} == set(range(1, 7))
    samples = {int(r["rank"]): int(r["samples"]) for r in rows}
    assert samples == {0: 16, 1: 16, 2: 0}  # only CONV workers read data
    s = summary(out)
    assert s["workers"] == 3 and s["ps_shards"] == 0
    # CONV workers exchange activations and CONV gradients, never FC parameters, until the end:
    # per iteration a CONV worker sends far less than the FC part (~2.2 M values) would take
    n_fc = sum(v.numel() for k, v in torch.load(out / "params.pt").items() if k.startswith("classifier."))
    assert s["bytes_sent"]["worker1"] < 6 * n_fc * 4 / 2
