"""``transport.engine: tcp`` in a real local cluster: the synchronous strategies train to the same parameters as
``local`` (ps and wfbp also as on the gRPC engine: the ``equivalence_runs`` of conftest), every data-plane stream on
the tcp engine."""

import csv

import pytest
import torch

from support.cluster import FAST, run_spec, summary

pytestmark = pytest.mark.slow

# each strategy's own knobs as its gRPC equivalence test sets them (tests/integration/strategies)
STRATEGIES = {"ps": [], "wfbp": [], "p3": ["strategy.slice_params=20000"], "synceasgd": [],
              "mgwfbp": ["strategy.profile_iterations=3", "strategy.fit_repeats=3"]}
PS_BASED = {"ps", "p3"}


@pytest.fixture(scope="module")
def tcp_runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("tcp-engine")
    runs = {}
    for strategy, extra in STRATEGIES.items():
        out = base / strategy
        r = run_spec(out, *FAST, f"strategy.name={strategy}", "run.check_params=true", "cluster.workers=2",
                     "cluster.ps_shards=2", "transport.engine=tcp", *extra)
        assert r.returncode == 0, f"{strategy} failed:\n{r.stdout}\n{r.stderr}"
        runs[strategy] = out
    return runs


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_tcp_engine_trains_like_local_and_like_grpc(tcp_runs, equivalence_runs, strategy):
    got = torch.load(tcp_runs[strategy] / "params.pt")
    for ref_name in ("local", *([strategy] if strategy in equivalence_runs else [])):
        ref = torch.load(equivalence_runs[ref_name] / "params.pt")
        assert ref.keys() == got.keys()
        for k in ref:
            assert torch.allclose(ref[k], got[k], rtol=1e-5, atol=1e-6), f"{strategy} (tcp) vs {ref_name}: {k}"
    s = summary(tcp_runs[strategy])
    assert s["final_loss"] != s["initial_loss"]
    by_it = {}
    for row in csv.DictReader((tcp_runs[strategy] / "iterations.csv").open()):
        by_it.setdefault(int(row["iteration"]), set()).add(row["params_checksum"])
    assert all(len(v) == 1 and "" not in v for v in by_it.values()), by_it


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_every_data_plane_node_used_the_tcp_engine(tcp_runs, strategy):
    logs = {p.stem: p.read_text(errors="replace") for p in (tcp_runs[strategy] / "logs").glob("*.log")}
    nodes = ["worker0", "worker1", *(["ps0", "ps1"] if strategy in PS_BASED else [])]
    for n in nodes:
        assert "tcp data-plane engine listening" in logs[n], f"{n} did not serve the tcp engine"
