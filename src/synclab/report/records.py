"""Reading a run directory: ``summary.json``, ``iterations.csv`` and ``traffic-<node>.csv`` (DESIGN.md "Run records").

Rows are parsed once, here, into typed objects; a malformed file is refused
with its name, line and column.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from synclab.fileio import read_csv_rows, read_text
from synclab.metrics.sampler import COLUMNS as TRAFFIC_COLUMNS

SUMMARY_FILE = "summary.json"
ITERATIONS_FILE = "iterations.csv"
ITERATION_COLUMNS = ("iteration", "rank", "start_s", "iteration_s", "compute_s", "comm_wait_s", "loss", "samples",
                     "bytes_sent", "bytes_received")

OPTIONAL_COLUMNS = ("comm_span_s", "schedule_error_s")

_INT_COLUMNS = frozenset({"iteration", "rank", "samples", "bytes_sent", "bytes_received"})

# What an iteration was for (the ``phase`` column writers add to iterations.csv): ``calibration``, a strategy
# measuring before it plans (Strategy.calibration_iterations: MG-WFBP's profiling, §5.1); ``warmup``, the
# run's first run.warmup iterations; ``steady``, the rest, the only ones summary figures cover.
PHASES = ("warmup", "calibration", "steady")


def iteration_phases(iterations: Iterable[int], warmup: int = 0, calibration: int = 0) -> dict[int, str]:
    """The phase of each iteration number in ``iterations`` (see :data:`PHASES`).

    Iterations 1..``calibration`` are calibration (a strategy counts them from the run's first iteration);
    the first ``warmup`` iteration numbers present are warm-up unless already calibration; every other one is
    steady. The two overlap rather than add up: ``run.warmup`` keeps meaning "the run's first iterations".
    """
    if warmup < 0 or calibration < 0:
        raise ValueError(f"warmup and calibration must be >= 0, got {warmup} and {calibration}")
    present = sorted(set(iterations))
    warm = set(present[:warmup])
    return {i: "calibration" if 0 < i <= calibration else "warmup" if i in warm else "steady" for i in present}


def measured_iterations(iterations: Iterable[int], warmup: int = 0, calibration: int = 0) -> tuple[list[int], str]:
    """The iterations summary figures cover and which phase they are: the steady ones (``"steady"``), or,
    where calibration leaves none (a run no longer than its calibration), the calibration iterations after
    the warm-up (``"calibration"``); empty when warm-up leaves nothing."""
    phases = iteration_phases(iterations, warmup, calibration)
    steady = [i for i, p in phases.items() if p == "steady"]
    if steady:
        return steady, "steady"
    warm = set(sorted(phases)[:warmup])
    return [i for i, p in phases.items() if p == "calibration" and i not in warm], "calibration"


def summary_calibration(summary: Mapping[str, Any]) -> int:
    """How many calibration iterations a ``summary.json`` records (0 for runs recorded before the field)."""
    return len((summary.get("calibration") or {}).get("iterations") or ())


def traffic_file(node: str) -> str:
    return f"traffic-{node}.csv"


def _int(value: Any) -> int:
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            f = float(value)
    else:
        f = value
    if isinstance(f, float) and not f.is_integer():
        raise ValueError(f"{value!r} is not an integer")
    return int(f)


def _float(value: Any) -> float:
    return math.nan if value in ("", None) else float(value)


@dataclass(frozen=True)
class IterationRow:
    """One worker's record of one iteration (times in seconds, start_s relative to the job start)."""

    iteration: int
    rank: int
    start_s: float
    iteration_s: float
    compute_s: float
    comm_wait_s: float  # non-overlapped communication
    loss: float
    samples: int
    bytes_sent: int
    bytes_received: int
    comm_span_s: float | None = None  # first gradient → all params fresh (optional column)
    schedule_error_s: float | None = None  # replay: compute time beyond the profiled time (optional column)

    @classmethod
    def from_mapping(cls, row: Mapping[str, Any]) -> IterationRow:
        """Parse a CSV row or a coordinator dict; extra keys are ignored, a missing or bad one is named.

        ``loss`` may be empty (NaN: a replayed model has none); ``comm_span_s`` and
        ``schedule_error_s`` may be absent or empty (the latter is NaN for real compute: absent).
        """
        values: dict[str, Any] = {}
        for name in ITERATION_COLUMNS + OPTIONAL_COLUMNS:
            raw = row.get(name)
            if name in OPTIONAL_COLUMNS and (raw in (None, "") or (isinstance(raw, float) and math.isnan(raw))):
                continue
            if raw is None:
                raise ValueError(f"column {name!r} is missing")
            try:
                if name in _INT_COLUMNS:
                    values[name] = _int(raw)
                elif name == "loss":
                    values[name] = _float(raw)
                else:
                    values[name] = float(raw)
            except (TypeError, ValueError) as e:
                raise ValueError(f"column {name!r}: {raw!r} is not a number") from e
        return cls(**values)


@dataclass(frozen=True)
class TrafficTrace:
    """A node's ``traffic-<node>.csv`` as columns (numpy arrays; NaN where a cell is empty)."""

    node: str
    t_s: np.ndarray
    wall_time: np.ndarray
    tx_bytes: np.ndarray
    rx_bytes: np.ndarray
    tx_bps: np.ndarray
    rx_bps: np.ndarray
    if_tx_bytes: np.ndarray
    if_rx_bytes: np.ndarray

    def __len__(self) -> int:
        return len(self.t_s)

    @property
    def has_wire(self) -> bool:
        return bool(len(self)) and not np.isnan(self.if_tx_bytes).all()

    def wire_bps(self) -> tuple[np.ndarray, np.ndarray]:
        """Wire-level (tx, rx) bits per second per bin from the interface counters; NaN for the first bin."""
        dt = np.diff(self.t_s)
        with np.errstate(divide="ignore", invalid="ignore"):
            tx = np.concatenate(([np.nan], np.diff(self.if_tx_bytes) * 8 / dt))
            rx = np.concatenate(([np.nan], np.diff(self.if_rx_bytes) * 8 / dt))
        return tx, rx


@dataclass
class RunRecords:
    run_dir: Path
    summary: dict[str, Any]
    iterations: list[IterationRow]
    traffic: dict[str, TrafficTrace] = field(default_factory=dict)

    @property
    def ranks(self) -> list[int]:
        return sorted({r.rank for r in self.iterations})

    @property
    def workers(self) -> list[str]:
        """Worker nodes with a traffic trace, in natural order (worker2 before worker10)."""
        return sorted((n for n in self.traffic if n.startswith("worker")), key=natural_key)


def natural_key(name: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def _read_csv(path: Path, required: tuple[str, ...]) -> list[dict[str, str]]:
    """The rows of a record's CSV; :class:`~synclab.fileio.InputFileError` (a ``ValueError``) names the file."""
    return read_csv_rows(path, "run record", required)


def read_iterations(path: Path) -> list[IterationRow]:
    rows = []
    for line, raw in enumerate(_read_csv(path, ITERATION_COLUMNS), start=2):
        try:
            rows.append(IterationRow.from_mapping(raw))
        except ValueError as e:
            raise ValueError(f"{path} line {line}: {e}") from e
    return rows


def read_traffic(path: Path, node: str) -> TrafficTrace:
    raw = _read_csv(path, TRAFFIC_COLUMNS)
    cols: dict[str, np.ndarray] = {}
    for c in TRAFFIC_COLUMNS:
        try:
            cols[c] = np.array([_float(r[c]) for r in raw], dtype=float)
        except ValueError as e:
            raise ValueError(f"{path}: column {c!r}: {e}") from e
    return TrafficTrace(node, **cols)


def load_run(run_dir: str | Path) -> RunRecords:
    """Read a finished run directory. ``summary.json`` and ``iterations.csv`` are required; traffic traces optional."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"run directory {run_dir} does not exist")
    for name in (SUMMARY_FILE, ITERATIONS_FILE):
        if not (run_dir / name).is_file():
            what = "is a folder, not a file" if (run_dir / name).is_dir() else "is missing"
            raise FileNotFoundError(f"{run_dir / name} {what}: is {run_dir} a finished SyncLab run directory?")
    try:
        summary = json.loads(read_text(run_dir / SUMMARY_FILE, "run summary"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{run_dir / SUMMARY_FILE}: not valid JSON ({e})") from e
    if not isinstance(summary, dict):
        raise ValueError(f"{run_dir / SUMMARY_FILE}: expected a JSON object")
    iterations = read_iterations(run_dir / ITERATIONS_FILE)
    traffic = {}
    for p in sorted(run_dir.glob("traffic-*.csv")):
        node = p.name[len("traffic-"):-len(".csv")]
        traffic[node] = read_traffic(p, node)
    return RunRecords(run_dir, summary, iterations, traffic)
