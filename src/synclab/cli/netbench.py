"""``synclab netbench``: bulk transfer over one shaped link against TCP and iperf3."""

from __future__ import annotations

import typer
from rich.console import Console

from synclab.cli._common import console, fail


def netbench(profile: str = typer.Option(..., "--profile", help="Profile name or YAML file."),
             isolation: str = typer.Option("auto", "--isolation", help="netns | none | auto"),
             duration: float = typer.Option(3.0, "--duration", help="Seconds per transfer."),
             as_json: bool = typer.Option(False, "--json")):
    """Bulk transfer over one shaped link: SyncLab transport vs TCP vs iperf3, against the configured rate."""
    import json as _json

    from rich.table import Table

    from synclab.linkprofile import ProfileError
    from synclab.netem.netbench import run_netbench
    from synclab.netem.netns import netns_unavailable_reason
    from synclab.netem.profile import load_profile

    if isolation not in ("auto", "netns", "none"):
        fail(f"--isolation must be netns, none or auto, got {isolation!r}")
    try:
        p = load_profile(profile)
    except ProfileError as e:
        fail(str(e))
    reason = netns_unavailable_reason()
    if isolation == "netns" and reason:
        fail(reason)
    iso = isolation if isolation != "auto" else ("none" if reason else "netns")
    with console.status(f"measuring {p.name} ({iso})..."):
        result = run_netbench(p, iso, duration_s=duration)
    if as_json:
        typer.echo(_json.dumps(result, indent=2, default=str))
        return
    t = Table(title=f"netbench {p.name}: backend {result['backend']}, isolation {iso}, "
                    f"RTT {result['rtt_s'] * 1e3:.2f} ms")
    for col in ("tool", "goodput", "÷ configured rate", "÷ iperf3"):
        t.add_column(col, justify="right")
    for tool in ("synclab", "tcp", "iperf3"):
        if tool in result:
            r = result[tool]
            t.add_row(tool, f"{r['goodput_bps'] / 1e9:.3f} Gbit/s", f"{r.get('ratio_to_rate', float('nan')):.3f}",
                      f"{r['ratio_to_iperf3']:.3f}" if "ratio_to_iperf3" in r else "")
    Console().print(t)
    for n in result.get("notes", []):
        console.print(f"note: {n}")
