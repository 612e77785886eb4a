"""A strategy from outside the package, as a researcher installs one: ``plugins/localsgd`` (its own package, an
entry point in the group ``synclab.strategies``) installed with ``pip install -e`` into a fresh virtual
environment that sees this interpreter's packages (SyncLab included) through a .pth file, so nothing is
downloaded. Then ``synclab strategies`` lists it, ``synclab simulate`` and ``synclab run`` run it on the quick
start (the plugin's own tests make the runs), the plugin's own tests pass, and ``pip uninstall`` removes it again (``simulate`` then refuses the name)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from support.cluster import REPO
from support.venv import fresh_venv

pytestmark = pytest.mark.slow

PLUGIN = REPO / "plugins" / "localsgd"
FAST = ["model.name=mlp", "model.batch_size=16", "network.rate=null", "run.iterations=4", "run.warmup=1",
        "strategy.name=localsgd", "strategy.period=2"]


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """(python of a fresh venv with the plugin installed editable, its environment, a work directory)."""
    base = tmp_path_factory.mktemp("plugin")
    root = base / "venv"
    py = fresh_venv(root, process_pth=True)  # SyncLab's editable install there is itself a .pth to process
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = f"{root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps",
                        "--no-build-isolation", "-q", "-e", str(PLUGIN)], capture_output=True, text=True, timeout=300,
                       env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    work = base / "work"
    work.mkdir()
    return py, env, work


def _synclab(venv, *args, check=True, timeout=300):
    py, env, work = venv
    r = subprocess.run([str(py), "-m", "synclab", *map(str, args)], cwd=work, env=env, capture_output=True,
                       text=True, timeout=timeout)
    assert not check or r.returncode == 0, f"synclab {' '.join(map(str, args))} exited {r.returncode}:\n" \
                                           f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


def _sets(*overrides: str) -> list[str]:
    return [a for o in overrides for a in ("--set", o)]


def test_installed_plugin_is_listed_simulated_run_and_tested_then_uninstalled(venv):
    py, env, work = venv
    assert "localsgd" in _synclab(venv, "strategies").stdout

    sim = _synclab(venv, "simulate", "quickstart", "--out", work / "sim", *_sets(*FAST))
    assert "localsgd" in sim.stdout + sim.stderr

    # its own tests run it with `python -m synclab run` on the quick start (this venv's python: the entry point)
    tests = subprocess.run([str(py), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                            str(PLUGIN / "tests")], cwd=work, env=env, capture_output=True, text=True, timeout=900)
    assert tests.returncode == 0, tests.stdout[-4000:] + tests.stderr[-2000:]

    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "uninstall", "-y", "-q",
                        "synclab-localsgd"], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "localsgd" not in _synclab(venv, "strategies").stdout
    refused = _synclab(venv, "simulate", "quickstart", "--out", work / "sim2", *_sets(*FAST), check=False)
    assert refused.returncode != 0 and "localsgd" in refused.stdout + refused.stderr
