"""Engine ``model`` (Stanza eq. 2-7 at a point's inputs): inputs checked, the splits maximise throughput, the
target file rules for ``calibration_gpu``, and the stanza-fig8 target's points run without a cluster."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from synclab.compute.profile import Boundary
from synclab.plans.stanza import PsProfile, ps_throughput
from synclab.reproduce.perfmodel import evaluate, parse_inputs
from synclab.reproduce.schema import TargetError, load_target
from synclab.resources import targets_dir

ROOT = Path(__file__).resolve().parents[3]
BASE = ["model.name=alexnet", "model.batch_size=128", "network.rate=40gbit", "nodes=80", "strategy.name=ps"]
# AlexNet's counts (Stanza Table 2; the zoo matches) with a 92 : 8 CONV : FC time split
ALEXNET = Boundary(activations_per_sample=9216, conv_params=2_469_696, fc_params=58_631_144,
                   conv_seconds=0.92, fc_seconds=0.08)


def test_inputs_read_and_later_override_wins():
    got = parse_inputs([*BASE, "nodes=40", "strategy.name=stanza"])
    assert (got.model, got.batch_size, got.bandwidth_bps, got.nodes, got.strategy, got.reading) == \
        ("alexnet", 128, 40e9, 40, "stanza", "algorithm")


@pytest.mark.parametrize("extra, match", [
    (["cluster.workers=4"], "'cluster.workers' is not an input"),
    (["strategy.name=wfbp"], "strategy.name must be one of ps, stanza"),
    (["nodes=1"], "nodes must be an integer >= 2"),
    (["strategy.reading=sideways"], "strategy.reading must be one of"),
])
def test_bad_inputs_are_refused(extra, match):
    with pytest.raises(ValueError, match=match):
        parse_inputs([*BASE, *extra])


def test_missing_input_is_named():
    with pytest.raises(ValueError, match="does not set network.rate"):
        parse_inputs([o for o in BASE if not o.startswith("network.")])


def test_ps_split_is_the_best_of_every_split():
    inputs = parse_inputs(BASE)
    m = evaluate(inputs, 0.43, ALEXNET)
    ps = PsProfile(compute_time_s=0.43, params=61_100_840, batch_size=128, bandwidth_bps=40e9)
    best = max(ps_throughput(80 - s, s, ps) for s in range(1, 80))
    assert m["throughput"] == pytest.approx(best)
    assert m["workers"] + m["servers"] == 80 and m["servers"] > 1


def test_stanza_beats_ps_and_its_gain_shrinks_with_bandwidth():
    def ratio(rate: str) -> float:
        ins = [*BASE, f"network.rate={rate}"]
        stanza = evaluate(parse_inputs([*ins, "strategy.name=stanza"]), 0.43, ALEXNET)
        ps = evaluate(parse_inputs(ins), 0.43, ALEXNET)
        return stanza["throughput"] / ps["throughput"]

    assert ratio("25gbit") > ratio("100gbit") > 1


def test_compute_time_must_be_positive():
    with pytest.raises(ValueError, match="compute_s must be > 0"):
        evaluate(parse_inputs(BASE), 0.0, ALEXNET)


def _fig8() -> dict:
    return yaml.safe_load((targets_dir() / "stanza-fig8.yaml").read_text())


def test_engine_model_needs_calibration_gpu(tmp_path):
    data = _fig8()
    del data["calibration_gpu"]
    path = tmp_path / "stanza-fig8.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    with pytest.raises(TargetError, match="engine 'model' takes 'calibration_gpu'"):
        load_target(path)


def test_calibration_gpu_and_calibration_exclude_each_other(tmp_path):
    data = _fig8()
    data["engine"] = "simulate"
    data["calibration"] = {"model": "alexnet", "gpu": "v100", "batch_size": 128}
    path = tmp_path / "stanza-fig8.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    with pytest.raises(TargetError, match="exclude each other"):
        load_target(path)


def test_fig8_point_runs_from_calibration_and_profile(tmp_path):
    from synclab.reproduce.points import expand, run_modelled

    target = load_target(targets_dir() / "stanza-fig8.yaml")
    point = expand(target, ROOT, True, None)[0]
    out = run_modelled(target, ROOT, point, tmp_path, print)
    assert out["extra"]["calibration"]["seconds"] == pytest.approx(1.99 - 1.56)  # Stanza Table 1, AlexNet
    assert out["metrics"]["compute_s"] == pytest.approx(0.43)
    assert (tmp_path / "model.json").exists()


def test_figure_series_of_two_axis_keys_draws_one_line_per_combination():
    from matplotlib.figure import Figure

    from synclab.reproduce.figure import _lines

    target = load_target(targets_dir() / "stanza-fig8.yaml")
    records = [{"values": {"nodes": n, "strategy.name": s, "network.rate": r}, "metrics": {"throughput": n * 10.0}}
               for n in (40, 80) for s in ("ps", "stanza") for r in ("25gbit", "100gbit")]
    ax = Figure().subplots()
    _lines(ax, target, records)
    labels = sorted(line.get_label() for line in ax.get_lines())
    assert labels == ["ps 100gbit (SyncLab)", "ps 25gbit (SyncLab)", "stanza 100gbit (SyncLab)",
                      "stanza 25gbit (SyncLab)"]
