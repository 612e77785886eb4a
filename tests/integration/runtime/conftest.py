import pytest

from support.cluster import FAST, run_spec


@pytest.fixture(scope="session")
def equivalence_runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("equiv")
    runs = {}
    for strategy in ("local", "ps", "wfbp"):
        out = base / strategy
        r = run_spec(out, *FAST, f"strategy.name={strategy}", "run.check_params=true", "cluster.workers=2",
                     "cluster.ps_shards=2")
        assert r.returncode == 0, f"{strategy} failed:\n{r.stdout}\n{r.stderr}"
        runs[strategy] = out
    return runs
