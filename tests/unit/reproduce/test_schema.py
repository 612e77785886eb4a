"""Target files: the checked-in ones validate; a bad key is refused with the file and the dotted key named."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from synclab.reproduce.calibration import compute_scale, dilation_for, load_calibration
from synclab.reproduce.schema import TargetError, load_target, load_targets
from synclab.resources import packaged, targets_dir

ROOT = Path(__file__).resolve().parents[3]


def _good() -> dict:
    return yaml.safe_load((targets_dir() / "mgwfbp-fig10.yaml").read_text())


def _write(tmp_path: Path, data: dict, name: str = "mgwfbp-fig10") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    return path


def test_checked_in_targets_validate():
    ids = [t.id for t in load_targets()]
    assert {"mgwfbp-fig4", "mgwfbp-fig10", "p3-fig7-resnet50"} <= set(ids)


def test_unknown_top_level_key_names_file_and_key(tmp_path):
    data = _good()
    data["sweeep"] = {}
    path = _write(tmp_path, data)
    with pytest.raises(TargetError, match=r"mgwfbp-fig10\.yaml: sweeep: Extra inputs"):
        load_target(path)


def test_nested_bad_key_is_dotted(tmp_path):
    data = _good()
    data["claims"][1]["judge"]["whithin"] = 0.1
    with pytest.raises(TargetError, match=r"claims\.1\.judge\.whithin"):
        load_target(_write(tmp_path, data))


def test_ratio_claim_needs_both_selectors(tmp_path):
    data = _good()
    del data["claims"][0]["den"]
    with pytest.raises(TargetError, match=r"claims\.0: Value error, kind 'ratio' needs 'num' and 'den'"):
        load_target(_write(tmp_path, data))


def test_id_must_match_file_name(tmp_path):
    with pytest.raises(TargetError, match="must equal the file name"):
        load_target(_write(tmp_path, _good(), name="other"))


def test_not_a_mapping(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("- 1\n- 2\n")
    with pytest.raises(TargetError, match=r"x\.yaml: a target file is a mapping"):
        load_target(path)


def test_calibration_scale_is_target_over_profile():
    table = load_calibration(packaged("profiles/calibration.yaml"))
    s = compute_scale(table.find("resnet50", "v100", 32))
    assert s.scale == pytest.approx(0.140 / s.profile_seconds)
    assert 0.008 < s.scale < 0.011  # reproduction-targets.md §1: ~0.0095 against the 14.69 s CPU profile
    with pytest.raises(KeyError, match="no calibration for vgg19 on k80"):
        table.find("vgg19", "k80", 64)


@pytest.mark.parametrize(("bps", "d"), [(1e9, 1), (4e9, 4), (40e9, 32), (10.668e9, 8), (80e9, 64)])
def test_dilation_rule(bps, d):
    assert dilation_for(bps) == d
    assert bps / d <= 1.5e9 and (d == 1 or bps / (d // 2) > 1.5e9)


def test_label_axis_value_without_when_is_refused(tmp_path):
    data = _good()
    data["quick"]["axes"] = {"delay_steps": [0, 5]}
    data["when"] = [{"where": {"delay_steps": 0}, "set": ["strategy.name=ps"]}]
    with pytest.raises(TargetError, match=r"quick\.axes\.delay_steps: label value\(s\) \[5\]"):
        load_target(_write(tmp_path, data))


def test_calibration_without_profile_at_its_batch_scales_replays_fallback():
    """ResNet-152 b128 on V100 (MG-WFBP Table 4's batch) has only a b32 CPU profile: the scale is taken against
    the profile replay itself falls back to, so a run at batch 128 replays the calibrated seconds."""
    from synclab.compute.profile import find_default_profile, load_model_profile
    from synclab.reproduce.calibration import CalibrationEntry

    table = load_calibration(packaged("profiles/calibration.yaml"))
    s = compute_scale(table.find("resnet152", "v100", 128))
    path, _ = find_default_profile("resnet152", 128)
    assert s.profile == path.name == "resnet152-b32-cpu.json"
    assert s.scale * load_model_profile(path).iteration_seconds == pytest.approx(1.667)
    assert "another batch" in s.describe()
    assert "another batch" not in compute_scale(table.find("resnet50", "v100", 32)).describe()
    with pytest.raises(KeyError, match="no checked-in CPU profile of nosuchmodel"):
        compute_scale(CalibrationEntry(model="nosuchmodel", gpu="v100", batch_size=32, seconds=1.0,
                                       kind="derived", source="test"))


def test_a_row_that_names_its_profile_is_replayed_from_it():
    """SSD-SGD Fig. 7's AlexNet and VGG-11 rows name an H100 profile: the scale is taken against it, the point
    replays it (compute.profile), and a row naming a missing or another model's profile is refused."""
    from synclab.compute.profile import load_model_profile
    from synclab.reproduce.calibration import CalibrationEntry
    from synclab.reproduce.points import expand

    table = load_calibration(packaged("profiles/calibration.yaml"))
    s = compute_scale(table.find("alexnet", "v100", 32))
    assert s.profile_path == packaged("profiles/gpu-h100/alexnet-b32-cuda.json")
    assert s.scale * load_model_profile(s.profile_path).iteration_seconds == pytest.approx(0.0183)
    assert compute_scale(table.find("resnet50", "v100", 32)).profile_path is None
    row = dict(model="alexnet", gpu="v100", batch_size=32, seconds=1.0, kind="derived", source="test")
    with pytest.raises(KeyError, match="does not exist"):
        compute_scale(CalibrationEntry(**row, profile="profiles/gpu-h100/nosuch.json"))
    with pytest.raises(KeyError, match="a profile of vgg11 at batch 32"):
        compute_scale(CalibrationEntry(**row, profile="profiles/gpu-h100/vgg11-b32-cuda.json"))
    points = expand(load_target(targets_dir() / "ssdsgd-fig7.yaml"), ROOT, False, None)
    by = {(p.values["model.name"], p.values["model.batch_size"]): p.overrides for p in points}
    assert f"compute.profile={packaged('profiles/gpu-h100/vgg11-b64-cuda.json')}" in by[("vgg11", 64)]
    assert not any(o.startswith("compute.profile=") for o in by[("resnet50", 32)])
