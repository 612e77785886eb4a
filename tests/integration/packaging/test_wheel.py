"""The wheel carries everything a user needs outside a checkout: built from pyproject.toml, README.md and
src/ alone, installed into a fresh virtual environment (its dependencies seen through a .pth file onto this
interpreter's site-packages, so nothing is downloaded), and run from a directory outside the checkout with
no PYTHONPATH: the packaged reproduction targets, link profiles and examples are found, an example runs by
name, and a simulated reproduction target runs its quick form."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.cluster import REPO
from support.venv import HERE_SITE, fresh_venv

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(synclab executable, its environment, a working directory outside the checkout)."""
    base = tmp_path_factory.mktemp("wheel")
    tree = base / "tree"
    tree.mkdir()
    for f in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / f, tree / f)
    shutil.copytree(REPO / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    wheels = base / "wheels"
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", str(tree), "-w", str(wheels), "--no-deps",
                        "--no-build-isolation", "-q"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    (wheel,) = wheels.glob("synclab-*.whl")

    venv = base / "venv"
    py = fresh_venv(venv, process_pth=False)  # the checkout's editable install there stays out of sight
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "-q", str(wheel)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SYNCLAB_PROFILES",
                                                            "SYNCLAB_PROFILES_DIR", "SYNCLAB_MODEL_PROFILES_DIR")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    work = base / "work"
    work.mkdir()
    return venv / "bin" / "synclab", env, work


def _run(installed, *args, timeout=300):
    exe, env, work = installed
    r = subprocess.run([str(exe), *args], cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"synclab {' '.join(args)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}"
    return r.stdout + r.stderr


def test_the_installed_package_is_the_wheel_not_the_checkout(installed):
    exe, env, work = installed
    r = subprocess.run([str(exe.parent / "python"), "-c", "import json, sys, synclab; "
                        "print(json.dumps([synclab.__file__, sys.path]))"],
                       cwd=work, env=env, capture_output=True, text=True, check=True)
    where, path = json.loads(r.stdout)
    assert Path(where).is_relative_to(exe.parent.parent), where
    # The dependencies come through the .pth onto this interpreter's site-packages, which may lie inside the
    # checkout (CI's .venv does); nothing else of the checkout may be on the path, its src/ least of all.
    deps = Path(HERE_SITE).resolve()
    from_checkout = [p for p in path if p and Path(p).resolve() != deps and Path(p).resolve().is_relative_to(REPO)]
    assert not from_checkout, from_checkout


def test_packaged_targets_profiles_and_examples_are_found(installed):
    listing = _run(installed, "reproduce", "--list")
    assert "mgwfbp-fig10" in listing and "stanza-table6" in listing
    assert "4gbit" in _run(installed, "profiles")
    examples = _run(installed, "examples")
    for name in ("quickstart", "p3-vs-ps-resnet50-4gbit", "mgwfbp-16-workers-sim", "stanza-alexnet"):
        assert name in examples


def test_a_packaged_example_runs_by_name(installed):
    out = installed[2] / "quickstart"
    _run(installed, "run", "quickstart", "--out", str(out), "--set", "run.iterations=4", "--set", "run.warmup=1",
         "--no-report", timeout=600)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "ok" and summary["measured_iterations"] == 3


def test_a_simulated_target_reproduces_from_outside_the_checkout(installed):
    text = _run(installed, "reproduce", "mgwfbp-fig10", "--quick", timeout=600)
    verdict = json.loads((installed[2] / "runs" / "reproduce" / "mgwfbp-fig10-quick" / "verdict.json").read_text())
    assert verdict["target"] == "mgwfbp-fig10" and verdict["points"] == 9, text
    assert any(c["verdict"] == "reproduced" for c in verdict["claims"])
