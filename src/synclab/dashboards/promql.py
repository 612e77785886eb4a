"""Read the PromQL back out of generated dashboards and expand Grafana's variables.

What Grafana would send for one panel is what :func:`expand` returns, so a test
can ask a live Prometheus whether every panel shows data. Needs no Grafana SDK.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

_VAR = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)")


@dataclass(frozen=True)
class PanelQuery:
    dashboard: str
    panel: str
    ref_id: str
    expr: str
    repeat: str | None  # the variable the panel is repeated over (one copy per value)


def panel_queries(dashboard: dict) -> list[PanelQuery]:
    out = []
    panels = list(dashboard.get("panels", []))
    while panels:
        p = panels.pop(0)
        panels[:0] = p.get("panels", [])  # rows nest their panels
        for t in p.get("targets", []):
            if t.get("expr"):
                out.append(PanelQuery(dashboard.get("uid", ""), p.get("title", ""), t.get("refId", ""),
                                      t["expr"], p.get("repeat")))
    return out


def load_queries(directory: Path) -> list[PanelQuery]:
    return [q for f in sorted(directory.glob("*.json")) for q in panel_queries(json.loads(f.read_text()))]


def expand(expr: str, variables: dict[str, str], scrape_interval_s: float = 1.0,
           interval_s: float | None = None, range_s: float = 300.0) -> str:
    """Substitute ``$var``/``${var}`` and Grafana's interval macros as Grafana would.

    ``$__interval`` is the query step (at least the scrape interval, the datasource's
    ``timeInterval``); ``$__rate_interval`` is max(4 × scrape interval, $__interval + scrape
    interval), so 4 × scrape interval at a step of one scrape interval; ``$__range`` is the
    dashboard's time range.
    """
    interval_s = max(interval_s or scrape_interval_s, scrape_interval_s)
    rate_interval_s = max(4 * scrape_interval_s, interval_s + scrape_interval_s)
    macros = {"__rate_interval": _ms(rate_interval_s), "__interval": _ms(interval_s),
              "__interval_ms": str(int(round(interval_s * 1000))), "__range": _ms(range_s),
              "__range_s": str(int(round(range_s))), "__range_ms": str(int(round(range_s * 1000)))}

    def sub(m: re.Match) -> str:
        name = m.group(1) or m.group(2)
        if name in macros:
            return macros[name]
        if name not in variables:
            raise KeyError(f"no value for ${name} in {expr!r}")
        return variables[name]

    return _VAR.sub(sub, expr)


def _ms(seconds: float) -> str:
    return f"{int(round(seconds * 1000))}ms"
