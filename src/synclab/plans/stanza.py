"""Stanza's performance models and node assignment (Wu et al., Stanza, §4.2 and §7.1).

Stanza splits the N nodes into n_c CONV workers (data-parallel CONV layers)
and n_f FC workers (the FC layers). Its per-iteration time (eq. 2-3) and
throughput (eq. 4) decide the split (eq. 5); the PS baseline has its own
model (eq. 6-7). All of it is the paper's "ideal case" model (§4.2.1): no
synchronisation or parallelisation overheads.

Units. The paper divides value counts by the bandwidth B. Here counts stay
counts (activations, parameters) and the link is ``bandwidth_bps`` in bits
per second, so a count of ``x`` values takes ``x * bytes_per_value * 8 /
bandwidth_bps`` seconds; with B in values per second the formulas are the
paper's verbatim.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "READINGS",
    "PsProfile",
    "StanzaProfile",
    "choose_fc_workers",
    "choose_ps_servers",
    "conv_allreduce_rounds",
    "ps_iteration_time",
    "ps_throughput",
    "stanza_compute_time",
    "stanza_iteration_time",
    "stanza_throughput",
]


def _check_positive(owner: str, **values: float) -> None:
    for name, value in values.items():
        if not math.isfinite(value) or value <= 0:
            raise ValueError(f"{owner}.{name} must be finite and > 0, got {value!r}")


def _check_non_negative(owner: str, **values: float) -> None:
    for name, value in values.items():
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"{owner}.{name} must be finite and >= 0, got {value!r}")


def _check_count(name: str, value: int, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


@dataclass(frozen=True)
class StanzaProfile:
    """The known constants of Stanza's model (Table 3).

    - ``conv_time_s`` T_c: one CONV worker's CONV forward+backward per iteration.
    - ``fc_time_s`` T_f: one FC worker's FC forward+backward for one CONV
      worker's activations.
    - ``activations`` A: activations of the last CONV layer per sample.
    - ``batch_size`` K: per-node batch size.
    - ``conv_params`` P_c: parameters in all CONV layers.
    - ``bandwidth_bps`` B: each node's bandwidth, bits per second.
    - ``bytes_per_value``: 4 for fp32 (the paper's footnote 5 uses 4).
    """

    conv_time_s: float
    fc_time_s: float
    activations: int
    batch_size: int
    conv_params: int
    bandwidth_bps: float
    bytes_per_value: int = 4

    def __post_init__(self) -> None:
        _check_non_negative(
            "StanzaProfile", conv_time_s=self.conv_time_s, fc_time_s=self.fc_time_s
        )
        _check_positive("StanzaProfile", bandwidth_bps=self.bandwidth_bps)
        _check_count("StanzaProfile.activations", self.activations, 0)
        _check_count("StanzaProfile.batch_size", self.batch_size)
        _check_count("StanzaProfile.conv_params", self.conv_params, 0)
        _check_count("StanzaProfile.bytes_per_value", self.bytes_per_value)

    def transfer_s(self, values: float) -> float:
        """Seconds to move ``values`` values over one node's link: values / B."""
        return values * self.bytes_per_value * 8 / self.bandwidth_bps


READINGS = ("algorithm", "as-printed")
"""How eq. 3 and eq. 5 are read. ``algorithm`` (the default): the rounds §4.1.2's algorithm takes
(floor(log2 n_c) + 2 off powers of two) and n_f <= n_c (§4.1.3 gives every FC worker an equal share
of the CONV workers, so an FC worker with none would idle while eq. 2 counts it). ``as-printed``: eq. 3
as printed, ceil(log2 n_c) + 2 rounds off powers of two, and eq. 5's search over every n_f in 1..N-1."""


def _check_reading(reading: str) -> None:
    if reading not in READINGS:
        raise ValueError(f"unknown reading {reading!r} of Stanza's eq. 3/5; choose one of {', '.join(READINGS)}")


def conv_allreduce_rounds(n_c: int, reading: str = "algorithm") -> int:
    """Rounds of Stanza's recursive-doubling all-reduce among n_c CONV workers (§4.1.2).

    log2(n_c) when n_c is a power of two (0 for a single worker); otherwise
    floor(log2 n_c) + 2: one round folding the surplus nodes in, floor(log2
    n_c) rounds of recursive doubling, one round sending the result back.
    Eq. 3 prints ceil(log2 n_c) + 2, one round more than that algorithm
    takes (ceil = floor + 1 off powers of two); the text of §4.1.2 and
    ``synclab.collective.schedules.recursive_doubling_schedule`` agree on
    floor(log2 n_c) + 2, the ``algorithm`` reading; ``as-printed`` gives eq. 3's.
    """
    _check_count("n_c", n_c)
    _check_reading(reading)
    core = n_c.bit_length() - 1  # floor(log2 n_c)
    if n_c == 1 << core:
        return core
    return core + 2 if reading == "algorithm" else core + 3


def stanza_compute_time(n_c: int, n_f: int, profile: StanzaProfile) -> float:
    """t_s^c = T_c + (n_c / n_f) * T_f (eq. 2).

    n_c / n_f is kept fractional as in the paper, although §4.1.3 gives each
    FC worker an equal number of CONV workers.
    """
    _check_count("n_c", n_c)
    _check_count("n_f", n_f)
    return profile.conv_time_s + n_c / n_f * profile.fc_time_s


def stanza_iteration_time(n_c: int, n_f: int, profile: StanzaProfile, reading: str = "algorithm") -> float:
    """t_s = t_s^c + 2 n_c A K / (n_f B) + P_c * rounds(n_c) / B (eq. 3).

    The second term is the activations to the FC workers and their gradients
    back (§4.1.1); the third is the CONV gradient all-reduce, each round
    moving P_c values. The FC workers' own all-reduce overlaps the CONV one
    (§4.1.3) and is not counted. Rounds as ``conv_allreduce_rounds`` reads them.
    """
    compute = stanza_compute_time(n_c, n_f, profile)
    conv_fc = profile.transfer_s(2 * n_c * profile.activations * profile.batch_size) / n_f
    conv_allreduce = profile.transfer_s(profile.conv_params) * conv_allreduce_rounds(n_c, reading)
    return compute + conv_fc + conv_allreduce


def stanza_throughput(n_c: int, n_f: int, profile: StanzaProfile, reading: str = "algorithm") -> float:
    """throughput_s = n_c K / t_s, samples per second (eq. 4)."""
    return n_c * profile.batch_size / stanza_iteration_time(n_c, n_f, profile, reading)


def choose_fc_workers(total_nodes: int, profile: StanzaProfile, *, max_conv_per_fc: int | None = None,
                      reading: str = "algorithm") -> int:
    """n_f maximising eq. 4 subject to n_c + n_f = N, n_c, n_f > 0 (eq. 5), read as ``reading`` says
    (:data:`READINGS`: ``algorithm`` also keeps n_f <= n_c).

    Exhaustive search, as §4.2.2 suggests. Ties go to the fewest FC workers.
    ``max_conv_per_fc`` optionally bounds n_c / n_f from above - the GPU-memory
    limit of footnotes 4 and 6 (one FC worker served 10 CONV workers in their
    testbed); the paper's program has no such term.
    """
    _check_count("total_nodes", total_nodes, 2)
    _check_reading(reading)
    if max_conv_per_fc is not None:
        _check_count("max_conv_per_fc", max_conv_per_fc)
    last = total_nodes // 2 if reading == "algorithm" else total_nodes - 1
    best_n_f, best = 0, -math.inf
    for n_f in range(1, last + 1):
        n_c = total_nodes - n_f
        if max_conv_per_fc is not None and n_c > max_conv_per_fc * n_f:
            continue
        throughput = stanza_throughput(n_c, n_f, profile, reading)
        if throughput > best:
            best_n_f, best = n_f, throughput
    if best_n_f == 0:
        raise ValueError(f"no split of {total_nodes} nodes keeps n_c <= {max_conv_per_fc} x n_f with n_f <= n_c")
    return best_n_f


@dataclass(frozen=True)
class PsProfile:
    """The known constants of the PS model (§7.1).

    - ``compute_time_s`` T_ps: one worker's forward+backward on its batch.
    - ``params`` P: parameters of the whole model.
    - ``batch_size`` K, ``bandwidth_bps`` B, ``bytes_per_value`` as for Stanza.
    """

    compute_time_s: float
    params: int
    batch_size: int
    bandwidth_bps: float
    bytes_per_value: int = 4

    def __post_init__(self) -> None:
        _check_non_negative("PsProfile", compute_time_s=self.compute_time_s)
        _check_positive("PsProfile", bandwidth_bps=self.bandwidth_bps)
        _check_count("PsProfile.params", self.params, 0)
        _check_count("PsProfile.batch_size", self.batch_size)
        _check_count("PsProfile.bytes_per_value", self.bytes_per_value)

    def transfer_s(self, values: float) -> float:
        """Seconds to move ``values`` values over one node's link: values / B."""
        return values * self.bytes_per_value * 8 / self.bandwidth_bps


def ps_iteration_time(n_w: int, n_s: int, profile: PsProfile) -> float:
    """t_ps = 2 n_w P / (n_s B) + T_ps (eq. 6).

    Each of the n_s servers receives P/n_s gradients from each of the n_w
    workers and sends P/n_s parameters back to each, through its one link.
    """
    _check_count("n_w", n_w)
    _check_count("n_s", n_s)
    return profile.transfer_s(2 * n_w * profile.params) / n_s + profile.compute_time_s


def ps_throughput(n_w: int, n_s: int, profile: PsProfile) -> float:
    """throughput_ps = n_w K / t_ps, samples per second (eq. 7)."""
    return n_w * profile.batch_size / ps_iteration_time(n_w, n_s, profile)


def choose_ps_servers(total_nodes: int, profile: PsProfile) -> int:
    """n_s maximising eq. 7 subject to n_w + n_s = N (§7.2: PS "uses the model in
    §7.1 to obtain the throughput-maximizing node assignment"). Ties go to the
    fewest servers."""
    _check_count("total_nodes", total_nodes, 2)
    best_n_s, best = 0, -math.inf
    for n_s in range(1, total_nodes):
        throughput = ps_throughput(total_nodes - n_s, n_s, profile)
        if throughput > best:
            best_n_s, best = n_s, throughput
    return best_n_s
