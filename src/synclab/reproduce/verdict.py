"""Judging a target's claims against its measured points: ``verdict.json``.

Each claim's SyncLab value is read from the points (a metric at one point, or the ratio of two),
compared with the paper's number by the claim's judge, and explained by the measured numbers and
the caveat written down before the run. A claim whose points were not part of this form (quick)
says so ("not run") instead of guessing.
"""

from __future__ import annotations

import math
from typing import Any

from synclab.reproduce.schema import Claim, Selector

REPRODUCED, PARTLY, NOT, NOT_RUN = "reproduced", "partly", "not", "not run"
TIE = "tie"  # a comparison inside the noise margin: no direction, reported as such (issue 51)
VERDICTS = (REPRODUCED, PARTLY, NOT, TIE, NOT_RUN)  # a claim's verdicts, in the order they are counted

DEFAULT_MARGIN = 0.03
"""The smallest noise margin of any comparison: a difference under 3 % is a tie, never a direction (issue 51)."""


def noise_margin(claim: Claim, spread: float | None = None) -> float:
    """The margin a claim is judged with: the largest of its judge's ``margin``, :data:`DEFAULT_MARGIN` and
    ``spread``, the relative spread (max - min) / mean of its value over repeated runs (None: not repeated)."""
    return max(claim.judge.margin, DEFAULT_MARGIN, spread or 0.0)


def _match(row: dict[str, Any], where: dict[str, Any]) -> bool:
    return all(str(row.get(k)) == str(v) for k, v in where.items())


def reads(claim: Claim, row: dict[str, Any]) -> bool:
    """Whether ``row`` (a point's axis values) is one of the points ``claim`` reads: any of its selectors names it."""
    sels = (claim.value, claim.num, claim.den, claim.base_num, claim.base_den)
    return any(s is not None and _match(row, s.where) for s in sels)


def read(rows: list[dict[str, Any]], sel: Selector) -> float | None:
    """The metric at the one point ``sel.where`` names (None when that point is not in ``rows``)."""
    hits = [r for r in rows if _match(r, sel.where)]
    if len(hits) > 1:
        raise ValueError(f"selector {sel.where} matches {len(hits)} points; name more axis values")
    if not hits:
        return None
    v = hits[0].get(sel.metric)
    if v is None or v == "":
        raise ValueError(f"metric {sel.metric!r} missing at point {sel.where}")
    return float(v)


def argmax(rows: list[dict[str, Any]], sel: Selector, over: str) -> tuple[float, float] | None:
    """(value of axis ``over`` where ``sel.metric`` peaks, the peak's lead over the next best point as a
    share of the peak) among the points ``sel.where`` names; None with fewer than three such points (no
    peak can be told from two)."""
    hits = [r for r in rows if _match(r, sel.where) and r.get(sel.metric) not in (None, "")]
    if len({str(r.get(over)) for r in hits}) < 3:
        return None
    ranked = sorted(hits, key=lambda r: float(r[sel.metric]), reverse=True)
    best, second = float(ranked[0][sel.metric]), float(ranked[1][sel.metric])
    return float(ranked[0][over]), (best - second) / best if best else 0.0


def ratios_over(rows: list[dict[str, Any]], num: Selector, den: Selector, over: str) -> dict[str, float]:
    """num/den at every value of axis ``over`` where both points were run (str(axis value) -> ratio)."""
    out = {}
    for v in dict.fromkeys(str(r[over]) for r in rows if over in r):  # in the order the points ran
        n = read(rows, Selector(where={**num.where, over: v}, metric=num.metric))
        d = read(rows, Selector(where={**den.where, over: v}, metric=den.metric))
        if n is not None and d is not None:
            if d == 0:
                raise ValueError(f"metric {den.metric!r} is 0 at {den.where} {over}={v}; no ratio")
            out[v] = n / d
    return out


def max_ratio(claim: Claim, ratios: dict[str, float]) -> tuple[float | None, str]:
    """The largest of ``ratios`` (num/den by value of ``claim.over``: P3 §5.2 "the maximum speed up"), or with
    ``claim.at`` the ratio at that value as a share of the largest; with the values it was taken over."""
    if not ratios:
        return None, ""
    best = max(ratios, key=ratios.get)
    listed = ", ".join(f"{v}: {r:.3g}" for v, r in ratios.items())
    how = f"ratio by {claim.over} ({listed}); maximum {ratios[best]:.3g} at {best}"
    if len(ratios) == 1:
        how += " (one value only: the maximum over a sweep of one point)"
    if claim.at is None:
        return ratios[best], how
    at = str(claim.at)
    if at not in ratios or len(ratios) < 2:
        return None, how
    return ratios[at] / ratios[best], how + f"; at {at} it is {ratios[at] / ratios[best]:.3g} of the maximum"


def _fmt(v: float) -> str:
    return f"{v:.3g}"


def judge(claim: Claim, rows: list[dict[str, Any]], spread: float | None = None) -> dict[str, Any]:
    """One claim's entry of verdict.json; ``spread``: its value's relative spread over repeats (see
    :func:`noise_margin`)."""
    margin = noise_margin(claim, spread)
    out: dict[str, Any] = {"id": claim.id, "quote": claim.quote, "source": claim.source,
                           "paper_value": claim.paper_value, "unit": claim.unit, "synclab_value": None}
    if claim.kind == "value":
        value = read(rows, claim.value)
    elif claim.kind == "argmax":
        found = argmax(rows, claim.value, claim.over)
        value, lead = found if found is not None else (None, None)
        if found is not None and lead < margin:
            out.update(synclab_value=value, verdict=NOT, margin=margin,
                       why=f"no peak: the best point ({claim.over} = {_fmt(value)}) leads the next by {lead:.1%}, "
                           f"under the {margin:.0%} that tells a peak from run-to-run noise; the "
                           f"curve is flat here" + (f". Known difference: {claim.caveat.strip()}" if claim.caveat
                                                     else ""))
            return out
    elif claim.kind == "ratio_growth":
        parts = [read(rows, sel) for sel in (claim.num, claim.den, claim.base_num, claim.base_den)]
        value = None if None in parts else (parts[0] / parts[1]) / (parts[2] / parts[3])
    elif claim.kind == "max_ratio":
        ratios = ratios_over(rows, claim.num, claim.den, claim.over)
        value, how = max_ratio(claim, ratios)
        if how:
            out["over_values"] = how
    else:
        num, den = read(rows, claim.num), read(rows, claim.den)
        value = None if num is None or den is None else num / den
    if value is None:
        out.update(verdict=NOT_RUN, why="the points this claim needs are not in this form (run the full form)")
        return out
    value *= claim.scale
    out["synclab_value"] = value
    out["margin"] = margin
    p, j = claim.paper_value, claim.judge
    carried = ""
    if claim.table2 is not None:
        p, carried = _table2(claim)
        out["paper_value_compared"] = p
    rel = value / p - 1 if p else math.inf
    out["relative_difference"] = rel
    factor = max(value / p, p / value) if value > 0 and p > 0 else math.inf
    if j.direction is not None:
        verdict, why = _judge_direction(value, p, j.direction, margin, claim.unit)
    elif claim.kind in RATIO_KINDS or j.same_side_of_one:
        verdict, why = _judge_gain(value, p, j, margin, claim.unit)
    elif abs(rel) <= j.within:
        verdict = REPRODUCED
        why = f"SyncLab {_fmt(value)} vs paper {_fmt(p)} {claim.unit}: {rel:+.0%}, within ±{j.within:.0%}"
    else:
        near = j.partly_factor is not None and factor <= j.partly_factor
        verdict = PARTLY if near else NOT
        why = f"SyncLab {_fmt(value)} vs paper {_fmt(p)} {claim.unit}: {rel:+.0%} (x{factor:.2g} apart)"
        if near:
            why += f"; within the factor {j.partly_factor:g} counted as partly"
    if claim.kind == "max_ratio" and claim.peak_at is not None:
        verdict, why = _judge_peak_place(claim, ratios, verdict, why, margin)
    if carried:
        why = f"{carried}. {why}"
    if out.get("over_values"):
        why += f" [{out['over_values']}]"
    if claim.caveat:
        why += f". Known difference: {claim.caveat.strip()}"
    out.update(verdict=verdict, why=why)
    return out


def _table2(claim: Claim) -> tuple[float, str]:
    """The paper's number carried from its worker count to the point's by MG-WFBP Table 2, and how."""
    from synclab.reproduce.table2 import carry

    t = claim.table2
    n = int(claim.value.where[t.n_axis])
    p = carry(claim.paper_value, t.algorithm, t.term, t.n_paper, n, b=t.b, size=t.size)
    law = {"ring": {"a": "a = 2(N-1)α", "b": "b = (N-1)/N (2β+γ)"}}.get(t.algorithm, {}).get(t.term, "")
    term = "T(M) = a + b·M, each term by its formula" if t.term == "time" else law or f"its {t.term}"
    return p, (f"the paper's {_fmt(claim.paper_value)} {claim.unit} is for N = {t.n_paper}; MG-WFBP Table 2's "
               f"{t.algorithm.replace('_', ' ')} ({term}) puts it at {_fmt(p)} {claim.unit} for SyncLab's N = {n}, "
               f"the value compared")


RATIO_KINDS = ("ratio", "max_ratio", "ratio_growth")
PARTLY_SHARE = 1 / 3
"""``same_side_of_one``: a gain on the paper's side of 1 is partly only from this share of the paper's gain (a 4 %
gain against the paper's 61 % is not a partial reproduction of it; issue 51)."""


def _judge_gain(value: float, p: float, j, margin: float, unit: str) -> tuple[str, str]:
    """A ratio judged on the gain it states, ratio - 1 (issue 51): a ratio's own relative difference hides
    how far a gain is off when both are near 1 (1.04 is within 10 % of 1.10, yet its 4 % gain is 40 % of the
    paper's 10 %).

    A paper ratio of exactly 1 ("similar"): reproduced when SyncLab's gain is within ``within`` (or the noise
    margin) of 0. Otherwise a SyncLab gain inside the noise ``margin`` is a tie (no direction, whichever side of
    1 it falls); reproduced when it differs from the paper's by at most ``within`` of the paper's gain (never
    less than the margin); partly when on the paper's side of 1 with at least a third of the paper's gain
    (``same_side_of_one``, :data:`PARTLY_SHARE`) or within ``partly_factor`` of the paper's gain; else not."""
    g, gp = value - 1, p - 1
    stated = f"SyncLab {_fmt(value)} vs paper {_fmt(p)} {unit}: gain {g:+.1%} vs {gp:+.1%}"
    if gp == 0:
        tol = max(j.within, margin)
        if abs(g) <= tol:
            return REPRODUCED, f"{stated}, within ±{tol:.1%} of no difference"
        factor = max(value / p, p / value) if value > 0 else math.inf
        if j.partly_factor is not None and factor <= j.partly_factor:
            return PARTLY, f"{stated}: beyond ±{tol:.1%}, within the factor {j.partly_factor:g} counted as partly"
        return NOT, f"{stated}: beyond ±{tol:.1%} of no difference"
    if abs(g) <= margin:
        return TIE, f"{stated}: a tie, inside the {margin:.1%} noise margin of no difference (no direction)"
    tol = max(j.within * abs(gp), margin)
    if abs(g - gp) <= tol:
        return REPRODUCED, f"{stated}: {g - gp:+.1%} apart, within ±{tol:.1%} (±{j.within:.0%} of the paper's gain)"
    apart = f"{stated}: {g - gp:+.1%} apart, beyond ±{tol:.1%}"
    if g * gp < 0:
        return NOT, f"{apart}; opposite direction to the paper"
    gain_factor = max(g / gp, gp / g)
    if j.same_side_of_one and abs(g) >= abs(gp) * PARTLY_SHARE:
        return PARTLY, (f"{apart}; same direction as the paper and at least a third of its gain "
                        f"({g / gp:.3g} of it), different size")
    if j.same_side_of_one and not (j.partly_factor is not None and gain_factor <= j.partly_factor):
        return NOT, f"{apart}; same direction but under a third of the paper's gain ({g / gp:.3g} of it)"
    if j.partly_factor is not None and gain_factor <= j.partly_factor:
        return PARTLY, f"{apart}; gain within the factor {j.partly_factor:g} counted as partly"
    return NOT, f"{apart} (gain x{gain_factor:.2g} apart)"


def _judge_peak_place(claim: Claim, ratios: dict[str, float], verdict: str, why: str,
                      margin: float) -> tuple[str, str]:
    """A maximum the paper places (``peak_at``): SyncLab's ratio there must be the maximum, or within the
    noise ``margin`` of it; otherwise the claim is at best partly (the size may agree, the place does not)."""
    place = str(claim.peak_at)
    best = max(ratios, key=ratios.get)
    if place not in ratios:
        return verdict, why + f"; the paper's maximum is at {claim.over} = {place}, not among the points run"
    short = 1 - ratios[place] / ratios[best]
    if short <= margin:
        return verdict, why + f"; at the paper's {place} too (within {margin:.0%} of the maximum)"
    why += (f"; but the maximum is at {best}, not at the paper's {place}, where the ratio is "
            f"{_fmt(ratios[place])} ({short:.0%} below the maximum, beyond the {margin:.0%} noise margin)")
    return (PARTLY if verdict == REPRODUCED else verdict), why


def _judge_direction(value: float, ref: float, direction: str, margin: float, unit: str) -> tuple[str, str]:
    """A claim the paper states only as a direction against ``ref`` (see :class:`Judge`): within the noise
    ``margin`` of the reference either way it is a tie, not a direction."""
    sign = 1 if direction == "above" else -1
    beyond = sign * (value - ref) / (abs(ref) or 1.0)  # a share of the reference (absolute when it is 0)
    stated = f"SyncLab {_fmt(value)}{' ' + unit if unit else ''}, paper: {direction} {_fmt(ref)}"
    if beyond > margin:
        return REPRODUCED, f"{stated}: {beyond:.1%} {direction} it, more than the {margin:.1%} noise margin"
    if beyond >= -margin:
        return TIE, (f"{stated}: {abs(beyond):.1%} from it, inside the {margin:.1%} noise margin: a tie "
                     f"(no direction told apart from noise)")
    return NOT, f"{stated}: on the other side ({-beyond:.1%}), opposite to the paper"


def summarize(judged: list[dict[str, Any]]) -> str:
    """Target-level verdict: reproduced only if every run claim is; a tie if every run claim is; not if none is
    at least partly."""
    run = [c["verdict"] for c in judged if c["verdict"] != NOT_RUN]
    if not run:
        return NOT_RUN
    if all(v == REPRODUCED for v in run):
        return REPRODUCED
    if all(v == TIE for v in run):
        return TIE
    if all(v in (NOT, TIE) for v in run):
        return NOT
    return PARTLY


def verdict_of(claims: list[dict[str, Any]], checks: list[dict[str, Any]]) -> str:
    """A target's verdict from its claims (:func:`summarize`); calibration checks do not count, except in a target
    that has nothing else (then its verdict is theirs, marked ``calibration:``)."""
    if claims or not checks:
        return summarize(claims)
    return f"calibration: {summarize(checks)}"
