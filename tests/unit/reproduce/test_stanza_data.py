"""Stanza Fig. 6b/c byte metrics and Fig. 7's eq. 3/6 of a run (synclab.reproduce.stanza_data), the per-point
calibration (calibration_gpu on a cluster target) and the stanza-fig6-7 target's points."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from synclab.reproduce.schema import TargetError, load_target
from synclab.reproduce.stanza_data import IMAGENET12_TRAIN_IMAGES, data_metrics, model_metrics
from synclab.resources import targets_dir

ROOT = Path(__file__).resolve().parents[3]
# AlexNet's counts (Stanza Table 2 / §3.2, the zoo's), CPU seconds of the checked-in b128 profile's split
ALEXNET = SimpleNamespace(activations_per_sample=9216, conv_params=2_469_696, fc_params=58_631_144,
                          conv_seconds=5.641715621, fc_seconds=0.487708113)
P = ALEXNET.conv_params + ALEXNET.fc_params


def _row(rank: int, sent: int, received: int, samples: int = 128) -> SimpleNamespace:
    return SimpleNamespace(rank=rank, bytes_sent=sent, bytes_received=received, samples=samples)


def _ps_run(n: int = 2, iterations: int = 3, skew: int = 10_000_000):
    """n workers pushing P x 4 B per iteration, one shard sending n x P x 4 B; the first row of a worker
    counts part of the next iteration's push (what iterations.csv shows), the sums stay exact."""
    rows = []
    for it in range(iterations):
        for r in range(n):
            extra = skew if it == 0 else (-skew if it == 1 else 0)
            rows.append(_row(r, 4 * P + extra, 4 * P))
    summary = {"strategy": "ps", "iterations": iterations, "workers": n, "ps_shards": 1, "batch_size": 128,
               "bytes_sent": {"ps0": iterations * n * 4 * P, "worker0": (iterations + 1) * 4 * P},
               "compute_mode": "replay", "compute_scale": 0.07, "compute_replay_seconds": 0.43,
               "link_rate_bps": 10e9}
    return rows, summary


def test_ps_bytes_per_iteration_and_epoch():
    rows, summary = _ps_run(n=2)
    m = data_metrics(rows, summary, None, ALEXNET)
    assert m["data_mb_per_iteration"] == pytest.approx(2 * 2 * P * 4 / 1e6)  # 2 n P x 4 B, skew cancelled
    assert m["global_batch"] == 256
    assert m["total_data_mb_per_epoch"] == pytest.approx(4 * P * 4 / 1e6 * (IMAGENET12_TRAIN_IMAGES // 256))
    assert m["fc_data_mb_per_iteration"] == pytest.approx(2 * 2 * ALEXNET.fc_params * 4 / 1e6)


def test_ps_total_data_per_epoch_does_not_depend_on_workers():
    small = data_metrics(*_ps_run(n=2)[:2], None, ALEXNET)["total_data_mb_per_epoch"]
    big = data_metrics(*_ps_run(n=4)[:2], None, ALEXNET)["total_data_mb_per_epoch"]
    assert big / small == pytest.approx(1.0, abs=0.01)


def _stanza_run(n_c: int = 2, iterations: int = 3):
    act = 128 * ALEXNET.activations_per_sample * 4
    rows = []
    for _ in range(iterations):
        for r in range(n_c):  # CONV: activations out + one all-reduce round of P_c each way (n_c = 2)
            rows.append(_row(r, act + 1024 + 4 * ALEXNET.conv_params, act + 4 * ALEXNET.conv_params))
        rows.append(_row(n_c, n_c * (act + 4), n_c * (act + 1024), samples=0))  # FC worker
    plan = {"conv_workers": n_c, "fc_workers": 1,
            "roles": {**{f"worker{r}": "conv" for r in range(n_c)}, f"worker{n_c}": "fc"}}
    summary = {"strategy": "stanza", "iterations": iterations, "workers": n_c + 1, "ps_shards": 0,
               "batch_size": 128, "bytes_sent": {f"worker{r}": 1 for r in range(n_c + 1)},
               "compute_mode": "replay", "compute_scale": 0.43 / (ALEXNET.conv_seconds + ALEXNET.fc_seconds),
               "compute_replay_seconds": 0.43, "link_rate_bps": 10e9}
    return rows, summary, plan


def test_stanza_fc_data_is_what_the_fc_worker_moves():
    rows, summary, plan = _stanza_run()
    m = data_metrics(rows, summary, plan, ALEXNET)
    act = 128 * ALEXNET.activations_per_sample * 4
    assert m["fc_data_mb_per_iteration"] == pytest.approx((2 * (act + 4) + 2 * (act + 1024)) / 1e6)
    assert m["global_batch"] == 256  # the FC worker counts no samples
    ps = data_metrics(*_ps_run(n=2)[:2], None, ALEXNET)
    assert 45 < ps["fc_data_mb_per_iteration"] / m["fc_data_mb_per_iteration"] < 55  # 58.6 M / 1.18 M


def test_stanza_without_fc_role_is_refused():
    rows, summary, plan = _stanza_run()
    plan["roles"] = {}
    with pytest.raises(ValueError, match="no FC worker"):
        data_metrics(rows, summary, plan, ALEXNET)


def test_no_samples_or_no_iterations_is_refused():
    rows, summary = _ps_run()
    with pytest.raises(ValueError, match="no samples"):
        data_metrics([_row(0, 1, 1, samples=0)], summary, None, ALEXNET)
    with pytest.raises(ValueError, match="iterations"):
        data_metrics(rows, {**summary, "iterations": 0}, None, ALEXNET)


def test_model_metrics_are_eq6_and_eq3():
    _, summary = _ps_run(n=2)
    ps = model_metrics(summary, None, ALEXNET)["model_iteration_s"]
    assert ps == pytest.approx(2 * 2 * P * 4 * 8 / 10e9 + 0.43)  # eq. 6, n_s = 1
    _, summary, plan = _stanza_run(n_c=2)
    st = model_metrics(summary, plan, ALEXNET)
    t_c = ALEXNET.conv_seconds * summary["compute_scale"]
    t_f = ALEXNET.fc_seconds * summary["compute_scale"]
    expected = t_c + 2 * t_f + (2 * 2 * 128 * 9216 + ALEXNET.conv_params) * 4 * 8 / 10e9  # eq. 2-3, 1 round
    assert st["model_iteration_s"] == pytest.approx(expected)
    assert st["model_printed_iteration_s"] == pytest.approx(expected)  # readings agree at powers of two


def test_model_readings_differ_off_powers_of_two():
    _, summary, plan = _stanza_run(n_c=3)
    st = model_metrics(summary, plan, ALEXNET)
    one_round = ALEXNET.conv_params * 4 * 8 / 10e9
    assert st["model_printed_iteration_s"] - st["model_iteration_s"] == pytest.approx(one_round)


def test_model_needs_a_shaped_replayed_run():
    _, summary = _ps_run()
    with pytest.raises(ValueError, match="replayed run"):
        model_metrics({**summary, "link_rate_bps": None}, None, ALEXNET)
    assert model_metrics({**summary, "strategy": "wfbp"}, None, ALEXNET) == {}


def test_fig6_7_points_take_each_models_own_calibration():
    from synclab.reproduce.points import expand

    target = load_target(targets_dir() / "stanza-fig6-7.yaml")
    points = expand(target, ROOT, False, None)
    scales = {p.values["model.name"]: [o for o in p.overrides if o.startswith("compute.scale=")] for p in points}
    assert scales["alexnet"] == ["compute.scale=0.0701534"]  # 0.43 s / 6.129 s CPU (Table 1 difference)
    assert scales["vgg16"] == ["compute.scale=0.0189474"]  # 1.40 s / 73.89 s CPU
    first = expand(target, ROOT, True, None)[0]
    assert first.values == {"model.name": "alexnet", "cluster.workers": 2, "strategy.name": "stanza"}
    assert first.dilation == 32 and "cluster.workers=3" in first.overrides  # n CONV workers + 1 FC worker
    assert any(n.startswith("calibration: alexnet b128 on v100") for n in first.notes)


def test_calibration_and_calibration_gpu_exclude_each_other(tmp_path):
    data = yaml.safe_load((targets_dir() / "stanza-fig6-7.yaml").read_text())
    data["calibration"] = {"model": "alexnet", "gpu": "v100", "batch_size": 128}
    path = tmp_path / "stanza-fig6-7.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    with pytest.raises(TargetError, match="exclude each other"):
        load_target(path)


def test_plot_also_only_for_lines(tmp_path):
    data = yaml.safe_load((targets_dir() / "stanza-fig6-7.yaml").read_text())
    data["plot"]["layout"] = "fit"
    path = tmp_path / "stanza-fig6-7.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    with pytest.raises(TargetError, match="'also' is for layout 'lines' only"):
        load_target(path)


def test_plot_also_draws_the_extra_metric(tmp_path):
    from synclab.reproduce.figure import draw

    target = load_target(targets_dir() / "stanza-fig6-7.yaml")
    records = [{"values": {"model.name": "alexnet", "cluster.workers": n, "strategy.name": s},
                "metrics": {"iteration_s": 1.0 + n, "model_iteration_s": 0.9 + n}}
               for n in (2, 3) for s in ("ps", "stanza")]
    png = draw(target, records, tmp_path / "f.png", quick=True)
    assert png.stat().st_size > 0


def test_verdict_names_every_models_calibration_row(tmp_path):
    from rich.console import Console

    from synclab.reproduce.runner import run_target

    target = load_target(targets_dir() / "stanza-fig6-7.yaml")
    target = target.model_copy(update={"quick": target.full.model_copy(
        update={"axes": {"model.name": ["alexnet", "vgg16"], "cluster.workers": [2], "strategy.name": ["ps"]}})})

    def fake(target, root, point, run_dir, log):
        return {"metrics": {"iteration_s": 1.0}, "extra": {}}

    v = run_target(target, ROOT, tmp_path / "out", quick=True, run_point=fake, console=Console(quiet=True))
    c = v["calibration"]
    assert "alexnet b128 on v100: 0.430 s" in c["describe"] and "vgg16 b64 on v100: 1.400 s" in c["describe"]
    assert c["scale"] is None and c["kind"] == "derived" and "Table 1" in c["source"]
