"""A snapshot's answers kept: written as CSV and JSON (:func:`write_data`), and answered from again later
(:class:`SavedAnswers`) to draw a dashboard after the Prometheus that answered is gone."""

from __future__ import annotations

import csv
import json
import math
from datetime import datetime, timezone
from pathlib import Path

from synclab.dashboards.renderer.model import Dashboard, DashboardError, _read_json
from synclab.dashboards.renderer.query import _LABEL_VALUES, Snapshot
from synclab.fileio import write_atomic


def write_data(snapshot: Snapshot, stem: Path) -> tuple[Path, Path]:
    """``STEM.csv`` (one row per sample) and ``STEM.json`` (queries, labels and samples) of a snapshot."""
    csv_path, json_path = stem.with_suffix(".csv"), stem.with_suffix(".json")
    with csv_path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["panel", "ref_id", "series", "time_s", "time_utc", "value"])
        for p in snapshot.panels:
            for t in p.targets:
                for s in t.series:
                    for ts, v in zip(s.times, s.values):
                        w.writerow([p.title, t.target.ref_id, s.name, f"{ts:.3f}", _utc(ts),
                                    "" if math.isnan(v) else repr(v)])
    doc = {
        "rendered_by": "synclab dashboards render (the dashboard's own PromQL; not a Grafana screenshot)",
        "dashboard": {"file": str(snapshot.dashboard.path), "uid": snapshot.dashboard.uid,
                      "title": snapshot.dashboard.title},
        "prometheus": snapshot.source, "start": snapshot.start, "end": snapshot.end,
        "start_utc": _utc(snapshot.start), "end_utc": _utc(snapshot.end), "step_s": snapshot.step_s,
        "scrape_interval_s": snapshot.scrape_interval_s,
        "variables": {k: {"text": v.text, "values": list(v.values), "all": v.all}
                      for k, v in snapshot.variables.items()},
        "no_data": [p.title for p in snapshot.empty_panels],
        "panels": [{
            "title": p.title, "type": p.panel.type, "unit": p.panel.unit,
            "gridPos": {"x": p.cell.x, "y": p.cell.y, "w": p.cell.w, "h": p.cell.h},
            "variables": p.variables, "has_data": p.has_data,
            "targets": [{"refId": t.target.ref_id, "expr": t.target.expr, "query": t.query,
                         "instant": t.target.instant, "has_data": t.has_data,
                         "series": [{"name": s.name, "labels": s.labels,
                                     "values": [[ts, None if math.isnan(v) else v] for ts, v in zip(s.times, s.values)]}
                                    for s in t.series]} for t in p.targets],
        } for p in snapshot.panels],
    }
    write_atomic(json_path, json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    return csv_path, json_path


def _utc(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"


class SavedAnswers:
    """A :class:`Source` that answers from the JSON :func:`write_data` wrote: draw a dashboard again
    (another size, a newer drawing) after the Prometheus that answered is gone. Every query must
    be one the saved snapshot asked; the dashboard's variables take the values they had then."""

    def __init__(self, doc: dict, dashboard: Dashboard, path: Path):
        self.doc, self.dashboard, self.path = doc, dashboard, path
        self.answers: dict[tuple[str, bool], list[dict]] = {}
        try:
            for p in doc["panels"]:
                for t in p["targets"]:
                    self.answers[(t["query"], bool(t["instant"]))] = t["series"]
            self.start, self.end = float(doc["start"]), float(doc["end"])
            self.step_s, self.scrape_interval_s = float(doc["step_s"]), float(doc["scrape_interval_s"])
            self.variables = {k: v for k, v in doc["variables"].items()}
        except (KeyError, TypeError, ValueError) as e:
            raise DashboardError(f"{path}: not a snapshot written by synclab dashboards render ({e!r} missing "
                                 "or malformed)") from None

    def given(self) -> dict[str, list[str]]:
        """The variables that were not at All, as ``--var`` would give them."""
        return {k: list(v["values"]) or [v["text"]] for k, v in self.variables.items() if not v.get("all")}

    def _series(self, expr: str, instant: bool) -> list[dict]:
        if (expr, instant) not in self.answers:
            raise DashboardError(f"{self.path}: no saved answer to {expr!r} (did {self.dashboard.path.name} "
                                 "change since the snapshot was taken?)")
        return self.answers[(expr, instant)]

    def query_range(self, expr: str, start: float, end: float, step_s: float) -> list[dict]:
        return [{"metric": s["labels"], "values": [[t, "NaN" if v is None else repr(v)] for t, v in s["values"]]}
                for s in self._series(expr, False)]

    def query(self, expr: str, at: float) -> list[dict]:
        out = []
        for s in self._series(expr, True):
            t, v = s["values"][-1]
            out.append({"metric": s["labels"], "value": [t, "NaN" if v is None else repr(v)]})
        return out

    def label_values(self, label: str, match: str | None, start: float, end: float) -> list[str]:
        for v in self.dashboard.variables:
            m = _LABEL_VALUES.match(v.query)
            if m and m.group(2) == label and v.name in self.variables:
                return list(self.variables[v.name]["values"])
        raise DashboardError(f"{self.path}: no saved values of label {label!r}")


def load_saved(path: Path, dashboard: Dashboard) -> SavedAnswers:
    doc = _read_json(path, " the saved snapshot")
    if not isinstance(doc, dict):
        raise DashboardError(f"{path}: not a snapshot written by synclab dashboards render")
    saved = SavedAnswers(doc, dashboard, Path(path))
    uid = (doc.get("dashboard") or {}).get("uid")
    if uid and dashboard.uid and uid != dashboard.uid:
        raise DashboardError(f"{path}: is a snapshot of dashboard {uid!r}, not {dashboard.uid!r}")
    return saved
