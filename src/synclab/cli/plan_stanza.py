"""``synclab plan stanza``: Stanza's node assignment and the PS baseline's, from a model profile, no cluster.

Stanza (Wu et al.): n_f maximising throughput_s = n_c K / t_s (eq. 4) with
t_s from eq. 2–3, subject to n_c + n_f = N (eq. 5) and n_f <= n_c — the same
search the ``stanza`` strategy runs (:func:`synclab.plans.stanza.choose_fc_workers`); ``--reading
as-printed`` reads eq. 3 and 5 as printed (ceil(log2 n_c) + 2 rounds, any n_f).
PS: n_s maximising throughput_ps = n_w K / t_ps (eq. 6–7) subject to
n_w + n_s = N (§7.1). Values are 4 bytes; ``--bandwidth`` is B, each node's link.
The profile is read by :func:`synclab.compute.profile.load_model_profile`: a
whole profile, or with ``--partial`` one holding only ``batch_size`` and
``boundary`` (e.g. a paper's constants written by hand).
"""

from __future__ import annotations

import json
from pathlib import Path

import typer


def stanza_answer(profile_path: Path, nodes: int, bandwidth_bps: float, *, partial: bool = False,
                  reading: str = "algorithm") -> dict:
    """The ``--json`` answer; raises ``ModelProfileError`` (a ``ValueError``) naming the file and a bad field."""
    from synclab.plans.stanza import (
        choose_fc_workers,
        choose_ps_servers,
        ps_iteration_time,
        ps_throughput,
        stanza_iteration_time,
        stanza_throughput,
    )
    from synclab.strategies.stanza import read_profile

    boundary = read_profile(profile_path, partial=partial)
    stanza, ps = boundary.stanza(bandwidth_bps), boundary.ps(bandwidth_bps)
    n_f = choose_fc_workers(nodes, stanza, reading=reading)
    n_c = nodes - n_f
    n_s = choose_ps_servers(nodes, ps)
    n_w = nodes - n_s
    return {
        "conv_workers": n_c,
        "fc_workers": n_f,
        "reading": reading,
        "iteration_seconds": stanza_iteration_time(n_c, n_f, stanza, reading),
        "throughput_samples_per_s": stanza_throughput(n_c, n_f, stanza, reading),
        "ps": {
            "workers": n_w,
            "servers": n_s,
            "iteration_seconds": ps_iteration_time(n_w, n_s, ps),
            "throughput_samples_per_s": ps_throughput(n_w, n_s, ps),
        },
    }


def _partial_hint(profile_path: Path) -> str:
    """Said when a profile is refused whole but would be read with ``--partial``: the flag stays explicit."""
    from synclab.strategies.stanza import read_profile

    try:
        read_profile(profile_path, partial=True)
    except ValueError:
        return ""
    return " (it holds batch_size and boundary: --partial plans from those alone)"


def _refuse(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def plan_stanza(
    profile: Path = typer.Option(..., "--profile", help="Model profile JSON (its 'boundary' and 'batch_size')."),
    nodes: int = typer.Option(..., "--nodes", help="N: nodes to split into CONV/FC workers (and PS workers/servers)."),
    bandwidth: str = typer.Option(..., "--bandwidth", help="B: each node's link rate, e.g. 10gbit."),
    as_json: bool = typer.Option(False, "--json", help="Print the answer as JSON."),
    partial: bool = typer.Option(False, "--partial",
                                 help="Accept a profile holding only batch_size and boundary (e.g. a paper's "
                                      "constants); the fields present are still checked."),
    reading: str = typer.Option("algorithm", "--reading",
                                help="algorithm (floor(log2 n_c)+2 rounds, n_f <= n_c) or as-printed (eq. 3 and 5 "
                                     "as printed: ceil(log2 n_c)+2 rounds, any n_f)"),
) -> None:
    """Stanza's CONV/FC split (eq. 2–5) and the PS worker/server split (eq. 6–7) for N nodes."""
    from synclab.plans.stanza import READINGS
    from synclab.units import parse_rate_bps

    if nodes < 2:
        _refuse(f"--nodes must be at least 2 (a CONV and an FC worker), got {nodes}")
    if reading not in READINGS:
        _refuse(f"--reading must be one of {', '.join(READINGS)}, got {reading!r}")
    try:
        bandwidth_bps = parse_rate_bps(bandwidth)
    except ValueError as e:
        _refuse(f"--bandwidth: {e}")
    if bandwidth_bps <= 0:
        _refuse(f"--bandwidth must be > 0, got {bandwidth!r}")
    try:
        answer = stanza_answer(profile, nodes, bandwidth_bps, partial=partial, reading=reading)
    except ValueError as e:  # ModelProfileError names the file and the field
        _refuse(f"{e}{'' if partial else _partial_hint(profile)}")
    if as_json:
        typer.echo(json.dumps(answer, indent=2))
        return
    ps = answer["ps"]
    typer.echo(f"stanza  {answer['conv_workers']} CONV + {answer['fc_workers']} FC workers: "
               f"{answer['iteration_seconds']:.6g} s/iteration, {answer['throughput_samples_per_s']:.6g} samples/s")
    typer.echo(f"ps      {ps['workers']} workers + {ps['servers']} servers: "
               f"{ps['iteration_seconds']:.6g} s/iteration, {ps['throughput_samples_per_s']:.6g} samples/s")
