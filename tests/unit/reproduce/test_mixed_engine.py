"""Per-point engines (``when.engine``): a target whose small clusters are emulated and large ones simulated
(P3 Fig. 10). The schema accepts and checks it, every point knows its engine, only emulated points get a
dilation, the runner dispatches each point to its engine's runner and records which engine gave it."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from synclab.reproduce import points as points_mod
from synclab.reproduce.doc import _time_note
from synclab.reproduce.points import expand
from synclab.reproduce.runner import run_target
from synclab.reproduce.schema import TargetError, load_target

ROOT = Path(__file__).resolve().parents[3]

TARGET = {
    "id": "mixed-fig", "paper": "Paper", "figure": "Fig. 1", "title": "a toy", "compares": "x vs y",
    "setting": "none", "engine": "emulate", "spec": "examples/quickstart.yaml",
    "set": ["network.rate=10gbit", "cluster.ps_shards=1"],
    "when": [{"where": {"cluster.workers": 8}, "engine": "simulate"}],
    "quick": {"axes": {"cluster.workers": [2, 8], "strategy.name": ["ps", "p3"]}, "estimate_s": 1},
    "full": {"axes": {"cluster.workers": [2, 8], "strategy.name": ["ps", "p3"]}, "estimate_s": 2},
    "plot": {"layout": "lines", "x": "cluster.workers", "y": "throughput", "series": "strategy.name"},
    "claims": [{"id": "p3-over-ps", "quote": "p3 is twice ps", "source": "§1", "paper_value": 2.0, "kind": "ratio",
                "num": {"where": {"cluster.workers": 8, "strategy.name": "p3"}, "metric": "throughput"},
                "den": {"where": {"cluster.workers": 8, "strategy.name": "ps"}, "metric": "throughput"}}],
}


def _load(tmp_path: Path, data: dict):
    path = tmp_path / f"{data['id']}.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_target(path)


def test_engine_of_takes_the_matching_when(tmp_path):
    t = _load(tmp_path, TARGET)
    assert t.mixed
    assert t.engine_of({"cluster.workers": 2, "strategy.name": "ps"}) == "emulate"
    assert t.engine_of({"cluster.workers": 8, "strategy.name": "p3"}) == "simulate"


def test_a_when_with_neither_set_nor_engine_is_refused(tmp_path):
    data = copy.deepcopy(TARGET)
    data["when"] = [{"where": {"cluster.workers": 8}}]
    with pytest.raises(TargetError, match="needs 'set'"):
        _load(tmp_path, data)


def test_engine_model_takes_no_when_engine(tmp_path):
    data = copy.deepcopy(TARGET)
    data.update(engine="model", calibration_gpu="v100")
    with pytest.raises(TargetError, match="when.engine"):
        _load(tmp_path, data)


def test_an_unknown_when_engine_is_refused(tmp_path):
    data = copy.deepcopy(TARGET)
    data["when"] = [{"where": {"cluster.workers": 8}, "engine": "model"}]
    with pytest.raises(TargetError, match="when.0.engine"):
        _load(tmp_path, data)


def test_only_emulated_points_get_a_dilation(tmp_path):
    t = _load(tmp_path, TARGET)
    pts = expand(t, ROOT, quick=True, scale=None)
    by = {(p.values["cluster.workers"], p.values["strategy.name"]): p for p in pts}
    assert by[2, "ps"].engine == "emulate" and by[2, "ps"].dilation == 32  # 2 workers + 1 shard x 10 Gbit/s = 30 Gbit/s
    assert any(o == "run.dilation=32" for o in by[2, "ps"].overrides)
    assert by[8, "p3"].engine == "simulate" and by[8, "p3"].dilation == 1
    assert not any(o.startswith("run.dilation") for o in by[8, "p3"].overrides)
    assert "engine: simulate" in by[8, "p3"].notes


def test_runner_dispatches_each_point_to_its_engine(tmp_path, monkeypatch):
    calls = []

    def fake(engine):
        def run(target, root, point, run_dir, log):
            calls.append((engine, point.id))
            w, s = point.values["cluster.workers"], point.values["strategy.name"]
            return {"metrics": {"throughput": float(w) * (2.0 if s == "p3" else 1.0)}, "extra": {}}
        return run

    monkeypatch.setitem(points_mod.RUNNERS, "emulate", fake("emulate"))
    monkeypatch.setitem(points_mod.RUNNERS, "simulate", fake("simulate"))
    t = _load(tmp_path, TARGET)
    v = run_target(t, ROOT, tmp_path / "out", quick=True, console=Console(quiet=True))
    assert sorted(e for e, _ in calls) == ["emulate", "emulate", "simulate", "simulate"]
    assert all(e == ("simulate" if "workers=8" in pid else "emulate") for e, pid in calls)
    assert v["engine"] == "mixed"
    assert v["engines"] == {"workers=2_name=ps": "emulate", "workers=2_name=p3": "emulate",
                            "workers=8_name=ps": "simulate", "workers=8_name=p3": "simulate"}
    assert v["claims"][0]["synclab_value"] == 2.0
    note = _time_note(v)
    assert "D = 32" in note and "`workers=8_name=ps`" in note and "workers=2" not in note


def test_list_names_both_engines_of_a_mixed_target(monkeypatch):
    from typer.testing import CliRunner

    from synclab.cli import app

    monkeypatch.chdir(ROOT)
    r = CliRunner().invoke(app, ["reproduce", "--list"])
    assert r.exit_code == 0, r.output
    row = next(line for line in r.output.splitlines() if "p3-fig10-vgg19" in line)
    assert "emulate+simulate" in row
    row = next(line for line in r.output.splitlines() if "p3-fig7-vgg19" in line)
    assert "emulate+simulate" not in row and "emulate" in row


def test_the_figure_marks_simulated_points(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from synclab.reproduce.figure import _lines

    t = _load(tmp_path, TARGET)
    records = [{"values": {"cluster.workers": w, "strategy.name": s}, "engine": "simulate" if w == 8 else "emulate",
                "metrics": {"throughput": float(w)}} for w in (2, 8) for s in ("ps", "p3")]
    fig, ax = plt.subplots()
    _lines(ax, t, records)
    marked = [ln for ln in ax.get_lines() if ln.get_marker() == "D"]
    assert len(marked) == 2  # one per series, only at the simulated x
    assert all(list(ln.get_xdata()) == [8.0] for ln in marked)
    assert [ln.get_label() for ln in marked].count("simulated point (synclab.sim)") == 1
    plt.close(fig)


def test_max_dilation_caps_the_rule_and_says_so(tmp_path):
    pts = expand(_load(tmp_path, TARGET), ROOT, quick=True, scale=None, max_dilation=8)
    capped = next(p for p in pts if p.engine == "emulate" and p.values["cluster.workers"] == 2)
    assert capped.dilation == 8 and capped.overrides[-1] == "run.dilation=8"
    assert not any(o == "run.dilation=32" for o in capped.overrides)
    assert any("capped at 8" in n and "rule's 32" in n for n in capped.notes)


def test_the_doc_says_when_a_run_capped_the_dilation():
    v = {"engine": "emulate", "dilation": {"a": 8}, "max_dilation": 8}
    assert "capped at 8" in _time_note(v) and "not to be trusted" in _time_note(v)
    assert "capped" not in _time_note({**v, "max_dilation": None})
