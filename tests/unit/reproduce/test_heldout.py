"""The held-out check of the compute calibration: each paper-given time predicted from another through profile
ratios (issue 51 item 1)."""

import json

import pytest

from synclab.reproduce.heldout import ANCHORS, Anchor, predictions, profile_seconds, render, same_model_spread


def _write(d, model, batch, device, fwd, bwd, plain=None):
    d.mkdir(parents=True, exist_ok=True)
    meta = {"plain_iteration_seconds": {"median": plain}} if plain is not None else {}
    (d / f"{model}-b{batch}-{device}.json").write_text(json.dumps(
        {"forward_seconds": fwd, "backward_seconds": bwd, "meta": meta}))


def test_a_time_is_carried_by_each_methods_ratio(tmp_path):
    cpu, gpu = tmp_path / "p", tmp_path / "p" / "gpu"
    _write(gpu, "a", 32, "cuda", 0.01, 0.02, plain=0.025)
    _write(gpu, "b", 32, "cuda", 0.03, 0.03, plain=0.05)
    _write(cpu, "a", 32, "cpu", 1.0, 2.0)
    anchors = (Anchor("a", 32, "V100", 0.1, "P", "s"), Anchor("b", 32, "V100", 0.3, "P", "s"),
               Anchor("c", 32, "V100", 0.5, "P", "s"), Anchor("a", 32, "K80", 9.0, "P", "s"))
    preds = {(p.target.model, p.anchor.model): p for p in predictions(cpu, gpu, anchors)}
    b_from_a = preds[("b", "a")]
    assert b_from_a.predicted["gpu"] == pytest.approx(0.1 * 0.05 / 0.025)        # 0.2
    assert b_from_a.error("gpu") == pytest.approx(0.2 / 0.3 - 1)
    assert b_from_a.predicted["gpu_synced"] == pytest.approx(0.1 * 0.06 / 0.03)
    assert b_from_a.predicted["cpu"] is None and b_from_a.error("cpu") is None  # no CPU profile of b
    assert preds[("c", "a")].predicted == {"gpu": None, "gpu_synced": None, "cpu": None}
    assert all(p.anchor.gpu == p.target.gpu for p in preds.values())            # the K80 one is never used
    assert profile_seconds(cpu, gpu, "a", 32) == {"gpu": 0.025, "gpu_synced": pytest.approx(0.03), "cpu": 3.0}


def test_the_papers_own_times_are_there_with_their_sources():
    keyed = {(a.model, a.batch, a.gpu, a.seconds) for a in ANCHORS}
    assert ("resnet50", 32, "V100", 0.140) in keyed and ("alexnet", 128, "V100", 0.43) in keyed
    assert ("vgg16-cifar10", 128, "K80", 0.436) in keyed and all(a.source for a in ANCHORS)
    [(a, b, d)] = same_model_spread()
    assert (a.seconds, b.seconds) == (0.436, 0.469) and d == pytest.approx(0.469 / 0.436 - 1)


def test_the_checked_in_profiles_render_a_table():
    from synclab.resources import model_profiles_dir

    d = model_profiles_dir()
    text = render(d, d / "gpu-h100")
    assert "| resnet50 b64 (SSD-SGD) 0.278 s | resnet50 b32 (SSD-SGD) 0.14 s |" in text
    assert "## Summary: median absolute error" in text


def test_the_cli_writes_the_check_into_the_checkout(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from synclab.cli import app

    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "docs").mkdir()
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(app, ["reproduce", "--calibration-check"])
    assert r.exit_code == 0, r.output
    assert "# Held-out check" in (tmp_path / "docs" / "results" / "calibration-check.md").read_text()
