"""Time dilation of a link profile: the link a host shapes so that a run D times slower sees the emulated one.

``run.dilation`` = D stretches every clock of a run (compute replay, links,
timeouts) by D so that a host too small for the emulated cluster can still run
it; this module is the links' part of that.
"""

from __future__ import annotations

import math

from synclab.linkprofile import LinkProfile, resolve_for_role
from synclab.transport.shaper import bucket_for, profile_bucket


def dilate(profile: LinkProfile, dilation: float) -> LinkProfile:
    """The link a host must shape to emulate ``profile`` under time dilation D (``run.dilation``).

    Everything runs D times slower: rates are divided by D, delay and jitter
    multiplied by D; loss is a probability and stays.

    The queue keeps the *bytes* of the emulated link (configured or derived from
    the undilated rate), so TCP sees the same buffers; deriving it from the
    dilated rate would shrink it D-fold and turn many-to-one traffic into incast
    collapse.

    The burst is not a property of the emulated link but of the shaper that
    must reach a rate: a *derived* burst is left to :func:`~synclab.transport.shaper.bucket_for` at the
    host rate R/D (``burst_bytes`` stays None), so a full bucket passes 4–8 ms
    of *host* time at line speed, 4/D–8/D ms emulated. Keeping the 8 ms of the
    emulated rate in bytes instead let every message up to that size through
    for free (MG-WFBP Fig. 4's fit at 10 Gbit/s, D = 32, gave a = 16 µs). A
    *configured* burst keeps its bytes, raised where needed to what the host
    rate needs (:func:`bucket_for` at R/D with ``kernel=True``): a 64 KiB
    bucket at 312 Mbit/s, below rate/HZ, held the same fit 36–47 % under its
    rate. Per-role overrides are dilated the same way. D = 1 returns
    ``profile`` itself.
    """
    if dilation == 1:
        return profile
    if not (dilation > 0 and math.isfinite(dilation)):
        raise ValueError(f"dilation must be a finite number > 0, got {dilation!r}")

    def scaled(values: dict, link: LinkProfile) -> dict:
        out = dict(values)
        if out.get("rate_bps"):
            out["rate_bps"] = max(1, round(out["rate_bps"] / dilation))
            if link.burst_bytes is not None:
                out["burst_bytes"] = max(link.burst_bytes, bucket_for(out["rate_bps"], kernel=True).burst_bytes)
            out["queue_bytes"] = profile_bucket(link).queue_bytes
        for key in ("delay_s", "jitter_s"):
            if out.get(key):
                out[key] = out[key] * dilation
        return out

    data = scaled(profile.model_dump(exclude={"roles"}), profile)
    data["roles"] = {r: scaled(o.model_dump(include=o.model_fields_set), resolve_for_role(profile, r))
                     for r, o in profile.roles.items()}
    return LinkProfile.model_validate(data)
