"""The emulator's ring goodput as the simulator takes it: what share of a link's rate carries message bytes,
and the measured share of it a SyncLab ring all-reduce achieves on the emulator's host
(``synclab simulate --ring-goodput``; measured by ``synclab calibrate ring-goodput`` or
``benchmarks/allreduce_vs_gloo.py``). Pure parsing and look-up; the ring itself is simulated in
:mod:`synclab.sim.run` (:func:`~synclab.sim.run.simulate_ring`)."""

from __future__ import annotations

from pathlib import Path

# The share of a link's rate that carries message bytes. The profiles' rate is the wire rate in L2 bytes
# (netem/profiles/*.yaml: "wire rate, L2 bytes; TCP goodput ~0.957x"; tbf counts whole frames): a full
# 1514-byte frame carries 1448 payload bytes (1500 MTU - 20 IP - 32 TCP with timestamps). CHANGELOG.md
# "The data plane beside gloo": `synclab netbench` measured SyncLab's stream at 0.956 Gbit/s on the
# 1gbit profile, = iperf3. 1448 / 1514 = 0.9564.
PAYLOAD_SHARE = 1448 / 1514

GoodputTable = dict[int, list[tuple[int, float]]]  # ranks -> [(segment bytes, share)], segment 0: any size


def ring_goodput_for(table: GoodputTable | None, world: int) -> list[tuple[int, float]]:
    """The measured ring goodput of ``world`` ranks, as (segment bytes, share) points: those of the largest
    measured ring size not above ``world`` (a larger ring on the same host does no better); ``[]`` (the full
    goodput) without one."""
    sizes = [n for n in (table or {}) if n <= world]
    return list(table[max(sizes)]) if sizes else []


def parse_ring_goodput(text: str) -> GoodputTable:
    """The emulator's ring goodput, measured alone, from ``N:SHARE`` (any segment size), ``N:SEGMENT:SHARE``
    (segment in bytes, e.g. ``16:150562:0.61``), ``ring-goodput.csv`` files of ``synclab calibrate ring-goodput``
    (ranks, segment_bytes, share: the share calibrated against the simulated ring alone) or ``allreduce.csv``
    files of
    ``benchmarks/allreduce_vs_gloo.py`` (each row: ranks, MB all-reduced, the ring bound at the wire rate and
    SyncLab's time; segment = bytes / ranks, share = bound / time / :data:`PAYLOAD_SHARE`, i.e. of the TCP
    goodput the simulator's links already carry, at most 1), comma-separated. A (ranks, segment) given more
    than once (repeated measurements) gets the mean of its shares. A ring size takes entries with a segment
    size or one without, not both."""
    import csv
    import statistics

    found: dict[int, dict[int, list[float]]] = {}
    for item in (t.strip() for t in text.split(",") if t.strip()):
        if item.endswith(".csv"):
            try:
                rows = list(csv.DictReader(Path(item).open()))
            except OSError as e:
                raise ValueError(f"--ring-goodput: cannot read {item}: {e}") from None
            if rows and "share" in rows[0] and "segment_bytes" in rows[0]:  # synclab calibrate ring-goodput's
                for r in rows:
                    try:
                        found.setdefault(int(r["ranks"]), {}).setdefault(int(r["segment_bytes"]), []).append(
                            float(r["share"]))
                    except ValueError:
                        raise ValueError(f"--ring-goodput: {item}: bad row {r}") from None
                continue
            for r in rows:
                try:
                    n, bound, took = int(r["ranks"]), float(r["ring_bound_s"]), float(r["synclab_s"])
                    segment = round(float(r["mbytes"]) * 1e6 / n)
                except (KeyError, ValueError, ZeroDivisionError):
                    raise ValueError(f"--ring-goodput: {item} is not an allreduce.csv of benchmarks/"
                                     f"allreduce_vs_gloo.py (ranks, mbytes, ring_bound_s, synclab_s)") from None
                found.setdefault(n, {}).setdefault(segment, []).append(min(1.0, bound / took / PAYLOAD_SHARE))
            continue
        parts = item.split(":")
        try:
            if len(parts) not in (2, 3):
                raise ValueError
            n, share = int(parts[0]), float(parts[-1])
            segment = int(parts[1]) if len(parts) == 3 else 0
        except ValueError:
            raise ValueError(f"--ring-goodput: {item!r} must be RANKS:SHARE (e.g. 8:0.84), RANKS:SEGMENT_BYTES:SHARE "
                             f"or an allreduce.csv") from None
        if len(parts) == 3 and segment < 1:
            raise ValueError(f"--ring-goodput: {item!r}: the segment must be >= 1 byte")
        found.setdefault(n, {}).setdefault(segment, []).append(share)
    if not found:
        raise ValueError("--ring-goodput: no entries")
    table: GoodputTable = {}
    for n, by_size in found.items():
        shares = [x for v in by_size.values() for x in v]
        if n < 2 or not all(0 < x <= 1 for x in shares):
            raise ValueError(f"--ring-goodput: {n} ranks at {shares}: ranks must be >= 2, the share in (0, 1]")
        if 0 in by_size and len(by_size) > 1:
            raise ValueError(f"--ring-goodput: {n} ranks has entries with and without a segment size; give "
                             f"every entry a size (N:SEGMENT:SHARE) or none")
        table[n] = sorted((seg, statistics.fmean(v)) for seg, v in by_size.items())
    return table
