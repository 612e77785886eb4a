"""``synclab dashboards render``: draw the Grafana dashboards from a live Prometheus, without Grafana.

Every panel's PromQL is read from the dashboard JSON (grafana/dashboards/*.json), expanded as
Grafana would (variables at All, one copy of a repeated panel per value, ``$__rate_interval``
for the step) and run against Prometheus' HTTP API; one PNG per dashboard follows the
dashboard's grid, and the series go beside it as CSV and JSON.

``--replay DIR`` draws again from the answers an earlier render saved (its JSON files), for
another drawing of the same run once its Prometheus is gone.

Exit codes: 0 drawn; 1 some panel had no data and ``--require-data`` was given; 2 the
dashboards or the options are wrong, or Prometheus cannot be reached or refuses a query.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape

console = Console(stderr=True, soft_wrap=True)

DEFAULT_DASHBOARDS = Path("grafana/dashboards")


def _fail(message: str, code: int = 2) -> None:
    console.print(f"[bold red]error:[/] {escape(message)}")
    raise typer.Exit(code)


def _dashboard_files(paths: list[Path]) -> list[Path]:
    files = []
    for p in paths or [DEFAULT_DASHBOARDS]:
        if p.is_dir():
            found = sorted(p.glob("*.json"))
            if not found:
                _fail(f"no dashboard files (*.json) in {p}")
            files.extend(found)
        elif p.is_file():
            files.append(p)
        else:
            hint = " (run from the repository root, or name the dashboard files)" if p == DEFAULT_DASHBOARDS else ""
            _fail(f"{p}: no such dashboard file or directory{hint}")
    return files


def _variables(items: list[str]) -> dict[str, list[str]]:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name or not value:
            _fail(f"--var {item!r} must look like name=value (several values: name=a,b)")
        out[name] = [v for v in value.split(",") if v]
    return out


def render(dashboards: list[Path] = typer.Argument(None, help="Dashboard JSON files or directories "
                                                           "(default: grafana/dashboards)."),
           prometheus: str = typer.Option("http://127.0.0.1:9090", "--prometheus", envvar="SYNCLAB_PROMETHEUS_URL",
                                          show_envvar=True, help="Base URL of the Prometheus to query."),
           out: Path = typer.Option(Path("runs/dashboards"), "--out", help="Directory for the PNG, CSV and JSON."),
           time_from: Optional[str] = typer.Option(None, "--from", help="Start: now-5m, unix seconds or ISO time "
                                                                       "(default: the dashboard's own range)."),
           time_to: Optional[str] = typer.Option(None, "--to", help="End (default: the dashboard's, usually now)."),
           step: Optional[str] = typer.Option(None, "--step", help="Query step = $__interval (default: Grafana's "
                                                                  "choice for the range, at least the scrape interval)."),
           scrape_interval: str = typer.Option("1s", "--scrape-interval",
                                               help="The datasource's scrape interval (timeInterval): $__rate_interval "
                                                    "is max(4 × it, $__interval + it)."),
           var: list[str] = typer.Option([], "--var", help="Set a variable: name=value or name=a,b (repeatable); "
                                                           "default: the dashboard's selection (All)."),
           prefix: str = typer.Option("", "--prefix", help="Prefix of the output file names (e.g. p3-)."),
           caption: str = typer.Option("", "--caption", help="A line under the title: what run this shows."),
           dpi: int = typer.Option(90, "--dpi", min=30, max=300, help="PNG resolution (16 in wide)."),
           require_data: bool = typer.Option(False, "--require-data",
                                             help="Exit 1 when any panel has no data."),
           replay: Optional[Path] = typer.Option(None, "--replay", help="Draw again from the answers an earlier "
                                                                      "render saved (DIR/<prefix><name>.json) instead "
                                                                      "of asking Prometheus; its range, step and "
                                                                      "variables apply."),
           timeout: float = typer.Option(30.0, "--timeout", help="Seconds per Prometheus request.")):
    """Render every dashboard's panels from Prometheus into one PNG each (+ CSV and JSON of the series)."""
    from synclab.dashboards.renderer.figure import draw
    from synclab.dashboards.renderer.model import DashboardError, load_dashboard
    from synclab.dashboards.renderer.prometheus import Prometheus, PrometheusError
    from synclab.dashboards.renderer.query import parse_time, take_snapshot
    from synclab.dashboards.renderer.saved import load_saved, write_data
    from synclab.units import parse_prometheus_duration_s

    files = _dashboard_files(dashboards or [])
    given = _variables(var)
    try:
        scrape_s = parse_prometheus_duration_s(scrape_interval, "--scrape-interval")
        step_s = parse_prometheus_duration_s(step, "--step") if step else None
    except ValueError as e:
        _fail(str(e))
    if scrape_s <= 0 or (step_s is not None and step_s <= 0):
        _fail("--step and --scrape-interval must be positive")
    try:
        boards = [load_dashboard(f) for f in files]
    except DashboardError as e:
        _fail(str(e))
    if replay is not None:
        if time_from or time_to or step or var:
            _fail("--replay draws the saved range, step and variables: drop --from, --to, --step and --var")
        if not replay.is_dir():
            _fail(f"--replay {replay}: not a directory of saved snapshots")
        try:
            saved = {b.path: load_saved(replay / f"{prefix}{b.path.stem}.json", b) for b in boards}
        except DashboardError as e:
            _fail(str(e))
    else:
        try:
            source = Prometheus(prometheus, timeout_s=timeout)
        except PrometheusError as e:
            _fail(str(e))
    out.mkdir(parents=True, exist_ok=True)
    now = time.time()
    empty_total = []
    for board in boards:
        if replay is not None:
            s = saved[board.path]
            source, start, end, step_s, scrape_s, own = s, s.start, s.end, s.step_s, s.scrape_interval_s, s.given()
            source_name = f"{s.doc.get('prometheus', '?')} (re-drawn from its answers saved in {s.path.name})"
        else:
            try:
                start = parse_time(time_from or board.time_from, now)
                end = parse_time(time_to or board.time_to, now)
            except ValueError as e:
                _fail(str(e))
            if end <= start:
                _fail(f"the time range is empty: --from {time_from or board.time_from} is not before "
                      f"--to {time_to or board.time_to}")
            own = {k: v for k, v in given.items() if k in {v.name for v in board.variables}}
            source_name = prometheus
        try:
            snap = take_snapshot(board, source, start, end, step_s=step_s, scrape_interval_s=scrape_s, given=own,
                                 source_name=source_name)
        except (DashboardError, PrometheusError) as e:
            _fail(str(e))
        stem = out / f"{prefix}{board.path.stem}"
        png = draw(snap, stem.with_suffix(".png"), caption=caption, dpi=dpi)
        if replay is None:
            csv_path, json_path = write_data(snap, stem)
            data = f"data: {csv_path.name}, {json_path.name}"
        else:
            data = f"drawn from {saved[board.path].path}"
        empty = snap.empty_panels
        typer.echo(f"{png}  ({len(snap.panels) - len(empty)}/{len(snap.panels)} panels with data; {data})")
        for p in empty:
            console.print(f"no data: {escape(board.path.name)} / {escape(p.title)}: "
                          + "; ".join(escape(t.query) for t in p.targets))
        for p in snap.panels:
            for t in p.targets:
                if p.has_data and not t.has_data:
                    console.print(f"note: {escape(board.path.name)} / {escape(p.title)} / {t.target.ref_id} "
                                  f"returned no data: {escape(t.query)}")
        empty_total += [f"{board.path.name} / {p.title}" for p in empty]
    if empty_total and require_data:
        _fail(f"{len(empty_total)} panel(s) without data (--require-data): {', '.join(empty_total)}", 1)
