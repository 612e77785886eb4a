"""Every checked-in target's points are valid runs before anything is launched: each point of the quick and
the full form, with all its overrides (target ``set``, form ``set``, axis values, ``when`` entries,
compute.scale), loads as a spec and gets its dilation. A key that one of a form's strategies does not take
(e.g. ``strategy.fit_repeats`` beside ``wfbp``) fails here, not minutes into a run.

MG-WFBP Fig. 9's link rates come from Fig. 4's b by Table 2's ring formula, b = 2(N-1)/N x 8/R (bits per
byte over bit/s); a rate off by a factor (the drafts had R = 6/b at N = 4) fails the second test."""

from __future__ import annotations

from pathlib import Path

import pytest

from synclab.config import load_spec, parse_override
from synclab.reproduce.calibration import compute_scale, load_calibration
from synclab.reproduce.points import expand
from synclab.reproduce.schema import load_target, load_targets
from synclab.resources import locate, packaged, targets_dir
from synclab.sim.run import load_for_simulation
from synclab.units import parse_rate_bps

ROOT = Path(__file__).resolve().parents[3]


# known bad points, each named with its reason (strict: the test fails once the target is fixed, so this goes)
KNOWN_BAD: dict[str, str] = {}


@pytest.mark.parametrize("target", [pytest.param(t, marks=pytest.mark.xfail(reason=KNOWN_BAD[t.id], strict=True))
                                    if t.id in KNOWN_BAD else t for t in load_targets()], ids=lambda t: t.id)
def test_every_point_of_both_forms_is_a_valid_spec(target):
    scale = None
    if target.calibration is not None:
        c = target.calibration
        scale = compute_scale(load_calibration(packaged("profiles/calibration.yaml")).find(c.model, c.gpu,
                                                                                             c.batch_size))
    for quick in (True, False):
        points = expand(target, ROOT, quick, scale)
        assert points, f"{target.id}: no points"
        if target.engine == "model":
            continue
        for p in points:
            if p.engine == "simulate":  # the simulator takes clusters past a launched one's 1024 workers
                load_for_simulation(locate(target.spec), p.overrides)
            else:
                load_spec(locate(target.spec), [parse_override(o) for o in p.overrides])


@pytest.mark.parametrize("name", ["mgwfbp-fig9-resnet152", "mgwfbp-fig9-densenet161"])
def test_fig9_rates_give_the_papers_b_by_the_ring_formula(name):
    target = load_target(targets_dir() / f"{name}.yaml")
    n = 4
    checked = 0
    for claim in target.claims:
        if claim.kind != "value" or claim.value.metric != "fit_b_s_per_byte":
            continue
        rate_bps = parse_rate_bps(str(claim.value.where["network.rate"]))
        assert 2 * (n - 1) / n * 8 / rate_bps == pytest.approx(claim.paper_value, rel=1e-3), claim.id
        checked += 1
    assert checked == 2  # clusters 2 and 3


def _selectors(claim):
    """(selector, axis added per point) of a claim: what verdict.read must find at most one point for."""
    if claim.kind in ("argmax",):
        return []  # over many points by design
    if claim.kind == "max_ratio":
        return [(claim.num, claim.over), (claim.den, claim.over)]
    return [(s, None) for s in (claim.value, claim.num, claim.den, claim.base_num, claim.base_den) if s is not None]


@pytest.mark.parametrize("target", load_targets(), ids=lambda t: t.id)
def test_every_claim_names_at_most_one_point_of_either_form(target):
    """A selector that matches two points of a form is judged 'not run' ("name more axis values"): seen when
    MG-WFBP Fig. 4's full form added 8 workers beside claims that named only the rate."""
    for quick in (True, False):
        values = [p.values for p in expand(target, ROOT, quick, None)]
        for claim in target.claims:
            for sel, over in _selectors(claim):
                groups = {str(v.get(over)) for v in values} if over else {None}
                for g in groups:
                    hits = [v for v in values if all(str(v.get(k)) == str(w) for k, w in sel.where.items())
                            and (over is None or str(v.get(over)) == g)]
                    assert len(hits) <= 1, (f"{target.id} ({'quick' if quick else 'full'}): claim {claim.id} "
                                            f"selector {sel.where} matches {len(hits)} points")


QUICK_BUDGET_S = 600  # issue 13 item 7: every quick form within 10 minutes on a 2-core VM


@pytest.mark.parametrize("target", load_targets(), ids=lambda t: t.id)
def test_every_quick_form_is_estimated_within_ten_minutes(target):
    """The estimate the `--list` prints is the budget a user plans with; a quick form that needs more is split
    (the 15 Gbit/s points of P3 Fig. 7(c) at D = 64 made 14.6 host minutes and moved to the full form)."""
    assert target.quick.estimate_s <= QUICK_BUDGET_S, (
        f"{target.id}: quick form estimated at {target.quick.estimate_s} s, over {QUICK_BUDGET_S} s")
