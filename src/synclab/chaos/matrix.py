"""``synclab chaos --matrix``: every fault of a matrix YAML on one strategy of each strategy family.

The matrix (the packaged ``synclab/chaos/matrix.yaml`` unless a file is given) names a base spec and its
settings, the families (each a list of ``--set`` overrides, the strategy among them: which strategy stands
for a family is data, not code) and the faults. Each family's undisturbed run is made once and compared
against by all of its cells. A cell whose role the family lacks (``kill:ps`` on a ring job) is ``n/a``
without a run when the spec shows it has no such node (a fault on ``ps`` and no PS shards); ``kill:fc``
learns it from the job.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import yaml

from synclab.chaos.faults import Fault, FaultError, parse_fault

PACKAGED = Path(__file__).with_name("matrix.yaml")


class MatrixError(ValueError):
    """A matrix YAML that cannot be used (names the file and the problem)."""


@dataclass(frozen=True)
class Matrix:
    path: Path
    spec: str
    settings: list[str]
    families: dict[str, list[str]]
    faults: list[Fault]


def load_matrix(path: str | Path | None = None, *, extra_faults: list[Fault] = (),
                extra_settings: list[str] = ()) -> Matrix:
    """The matrix in ``path`` (default: the packaged one); ``extra_faults`` replace its faults when given,
    ``extra_settings`` go after every family's settings."""
    p = Path(path) if path else PACKAGED
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise MatrixError(f"{p}: cannot read the matrix: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("families"), dict) or not data["families"]:
        raise MatrixError(f"{p}: a matrix is a mapping with 'families' (name -> {{settings: [...]}}) and 'faults'")
    try:
        faults = list(extra_faults) or [parse_fault(str(f)) for f in data.get("faults") or []]
    except FaultError as e:
        raise MatrixError(f"{p}: {e}") from None
    if not faults:
        raise MatrixError(f"{p}: no faults")
    families = {}
    for name, fam in data["families"].items():
        settings = (fam or {}).get("settings") if isinstance(fam, dict) else None
        if not isinstance(settings, list) or not all(isinstance(s, str) for s in settings):
            raise MatrixError(f"{p}: family {name!r} needs 'settings', a list of dotted.key=value strings")
        families[str(name)] = [*settings, *extra_settings]
    base = data.get("settings") or []
    if not isinstance(base, list):
        raise MatrixError(f"{p}: 'settings' must be a list of dotted.key=value strings")
    return Matrix(p, str(data.get("spec") or "quickstart"), [str(s) for s in base], families, faults)


def selected(family: str, fault: Fault, only: list[str]) -> bool:
    """Whether ``--only`` (FAMILY/FAULT, FAMILY or FAULT; empty: all) picks this cell."""
    return not only or any(o in (family, fault.label, f"{family}/{fault.label}") for o in only)


def _has_ps(spec: str, settings: list[str]) -> bool:
    from synclab.config import load_spec
    from synclab.resources import spec_path

    return load_spec(spec_path(spec), settings).n_ps > 0


def run_matrix(m: Matrix, out: Path, *, only: list[str] = (), heartbeat_timeout_s: float = 10.0,
               on_cell: Callable[[str, dict], None] | None = None) -> list[dict]:
    """Run the selected cells into ``out/FAMILY/FAULT``; their records, each with ``family`` added. A cell
    that cannot run (its family's undisturbed run failed, say) is an ``ERROR: ...`` record, not the end."""
    records = []
    for family, fam_settings in m.families.items():
        settings = [*m.settings, *fam_settings]
        cells = [f for f in m.faults if selected(family, f, list(only))]
        for fault in cells:
            try:
                record = _cell(m, family, settings, fault, out, cells, heartbeat_timeout_s)
            except Exception as e:
                record = {"fault": fault.label, "outcome": f"ERROR: {type(e).__name__}: {e}", "reason": str(e)}
            record.update(family=family, settings=settings, matrix=str(m.path), recorded=time.strftime(
                "%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
            records.append(record)
            if on_cell:
                on_cell(family, record)
    return records


def _cell(m: Matrix, family: str, settings: list[str], fault: Fault, out: Path, cells: list[Fault],
          heartbeat_timeout_s: float) -> dict:
    from synclab.chaos.cell import chaos_overrides, default_isolation, run_cell, run_job

    if fault.target == "ps" and not _has_ps(m.spec, settings):
        return {"fault": fault.label, "outcome": "n/a", "reason": "the job has no PS shard"}
    baseline = out / family / "baseline"
    done = baseline / "chaos-run.json"
    if not done.exists():  # once per family; every cell of the family runs with the same isolation
        iso = "netns" if any(f.needs_netns for f in cells) else default_isolation()
        base = run_job(m.spec, chaos_overrides(m.spec, settings, heartbeat_timeout_s=heartbeat_timeout_s,
                                               checkpoint_every=5, isolation=iso), baseline)
        done.write_text(json.dumps(base, indent=2) + "\n")
    base = json.loads(done.read_text())
    if base["status"] != "ok":
        raise RuntimeError(f"the undisturbed run failed: {base['reason']} (records in {baseline})")
    return run_cell(m.spec, settings, fault, out / family / fault.label.replace(":", "-"),
                    heartbeat_timeout_s=heartbeat_timeout_s, baseline=baseline)
