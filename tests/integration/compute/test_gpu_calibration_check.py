"""``synclab calibrate gpu-check`` run as a command:
the report from the checked-in profiles and its clear errors."""

import subprocess
import sys

from support.scripts import REPO

CMD = [sys.executable, "-m", "synclab", "calibrate", "gpu-check"]


def test_the_report_is_made_from_the_checked_in_profiles(tmp_path):
    out = tmp_path / "check.md"
    r = subprocess.run([*CMD, "--no-sim",
                        "--out", str(out)], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    text = out.read_text()
    # every GPU profile has its row, and every calibration row with a GPU profile is set against it
    for f in (REPO / "profiles" / "gpu-h100").glob("*.json"):
        model, batch = f.name.rsplit("-b", 1)[0], f.name.rsplit("-b", 1)[1].split("-")[0]
        assert f"| {model} | {batch} |" in text
    assert "| resnet50 | v100 | 32 | 0.14 | derived |" in text


def test_no_gpu_profiles_is_a_clear_error(tmp_path):
    r = subprocess.run([*CMD, "--no-sim",
                        "--gpu-dir", str(tmp_path), "--out", str(tmp_path / "x.md")],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode != 0 and "no GPU profiles" in " ".join(r.stderr.split())


def test_another_gpus_profiles_are_set_beside_these(tmp_path):
    out = tmp_path / "check.md"
    r = subprocess.run([*CMD, "--no-sim",
                        "--compare-dir", "profiles/gpu-h200", "--out", str(out)],  # relative to the repository
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    part5 = out.read_text().split("## 5. Against another GPU: the H200")[1]
    both = {f.name for f in (REPO / "profiles" / "gpu-h100").glob("*.json")} & {
        f.name for f in (REPO / "profiles" / "gpu-h200").glob("*.json")}
    assert both
    for name in both:
        model, batch = name.rsplit("-b", 1)[0], name.rsplit("-b", 1)[1].split("-")[0]
        assert f"\n| {model} | {batch} |" in part5
    # the reference model's ratio to itself is 1 on both GPUs
    assert "| 1.000 | 1.000 | +0.0% |" in part5.split("\n| resnet50 | 32 |")[1].split("\n")[0]


def test_an_empty_comparison_folder_is_a_clear_error(tmp_path):
    r = subprocess.run([*CMD, "--no-sim",
                        "--compare-dir", str(tmp_path), "--out", str(tmp_path / "x.md")],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode != 0 and f"no GPU profiles in {tmp_path}" in " ".join(r.stderr.split())  # rich wraps
