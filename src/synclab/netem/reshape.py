"""Which link changes each shaping backend can make while a job runs (``synclab shape``)."""

from __future__ import annotations

from synclab.linkprofile import KNOWN_ROLES, LinkProfile, resolve_for_role

# What each backend can change on links that are already shaped and carrying a job. netem's qdisc takes a new
# rate, delay, jitter and loss in place; tbf/htb have no delay or loss (this kernel lacks sch_netem), and the
# app backend's delay line is fixed when a stream opens, so on those only the rate moves.
RESHAPEABLE = {"netem": ("rate", "delay", "jitter", "loss"), "htb": ("rate",), "tbf": ("rate",),
               "app": ("rate",), "none": ()}
_FIELDS = {"rate": "rate_bps", "delay": "delay_s", "jitter": "jitter_s", "loss": "loss_pct"}


def reshape_refusal(backend: str, current: LinkProfile | None, new: LinkProfile,
                    roles: tuple[str, ...] = KNOWN_ROLES) -> str | None:
    """Why ``backend`` cannot move running links from ``current`` to ``new``; None when it can.

    Compared per role (overrides resolved); a value that stays as it is needs no
    change, so a rate-only reshape on tbf is fine, and so is one that keeps a
    delay the job started with.
    """
    if backend not in RESHAPEABLE:  # "auto" at a coordinator of hand-started nodes: each node checks for itself
        return None
    can = RESHAPEABLE[backend]
    empty = LinkProfile()
    missing: dict[str, tuple] = {}
    for role in roles:
        old = resolve_for_role(current or empty, role)
        nxt = resolve_for_role(new, role)
        for what, attr in _FIELDS.items():
            if what not in can and getattr(old, attr) != getattr(nxt, attr) and what not in missing:
                missing[what] = (role, getattr(old, attr), getattr(nxt, attr))
    if not missing:
        return None
    changes = ", ".join(f"{what} of {role} links from {a} to {b} ({attr})"
                        for what, (role, a, b) in missing.items() for attr in [_FIELDS[what]])
    return (f"the running backend {backend!r} cannot change {changes}: it changes only "
            f"{', '.join(can) or 'nothing'} while a job runs. Nothing was applied; restart the job with "
            f"network.profile={new.name or 'the new profile'} (delay and loss need the netem backend)")
