"""The container entrypoint's package (synclab.roles.container) read as one namespace, its state under tmp_path,
and a run directory a restart reads: shared by tests/unit/services and tests/integration/services."""

import json
import os
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SHIM = ROOT / "services" / "entrypoint.py"
COMPOSE_SPEC = ROOT / "services" / "specs" / "compose.yaml"


class Entrypoint:
    """The modules of :mod:`synclab.roles.container` (and the restart policy) read as one namespace:
    ``entrypoint.supervise(...)``, ``entrypoint.STATE_DIR``; state paths are patched on ``entrypoint.host``."""

    def __init__(self):
        from synclab.roles import restart
        from synclab.roles.container import bootstrap, health, host, jobs, launch, supervise

        self.host = host
        self._modules = (host, jobs, bootstrap, supervise, launch, health, restart)

    def main(self, argv: list[str]) -> int:
        from synclab.roles.container.main import main

        return main(argv, str(SHIM))

    def __getattr__(self, name):
        for module in self._modules:
            if hasattr(module, name):
                return getattr(module, name)
        raise AttributeError(name)


@pytest.fixture(name="entrypoint")
def entrypoint_fixture(tmp_path, monkeypatch):
    """The entrypoint's package, its state files under tmp_path."""
    module = Entrypoint()
    state = tmp_path / "state"
    for name in ("SHAPING_FILE", "JOB_SPEC_FILE", "JOB_STARTED_FILE", "HEALTH_FILE"):
        monkeypatch.setattr(module.host, name, state / getattr(module.host, name).name)
    monkeypatch.setattr(module.host, "STATE_DIR", state)
    for var in [v for v in os.environ if v.startswith("SYNCLAB_")]:
        monkeypatch.delenv(var)
    return module


def restart_run_dir(tmp_path: Path, restart: str = "on-failure", latest: int | None = 10) -> Path:
    run_dir = tmp_path / "run"
    run_dir.mkdir(parents=True)
    spec = yaml.safe_load(COMPOSE_SPEC.read_text())
    spec["run"].update(iterations=40, checkpoint_every=5, restart=restart, max_restarts=2, resume_from=0)
    (run_dir / "spec.yaml").write_text(yaml.safe_dump(spec))
    (run_dir / "failure.json").write_text(json.dumps({"status": "failed", "reason": "no heartbeat from worker0"}))
    if latest is not None:
        (run_dir / "checkpoint").mkdir()
        (run_dir / "checkpoint" / "LATEST").write_text(f"{latest}\n")
    return run_dir
