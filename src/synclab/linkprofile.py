"""Link profiles as data: what a link should look like (rate, burst, queue, delay, jitter, loss, direction).

A profile is a small YAML file (``netem/profiles/NAME.yaml``, found by
:mod:`synclab.netem.profile`) or an inline mapping in a spec. Human units are
parsed once, here ("4gbit", "100mbit", "20ms", "1%", "1.5MB"); everything past
this module sees :class:`LinkProfile` with base units in the names
(``rate_bps``, ``burst_bytes``, ``delay_s``, ``loss_pct``).

This module is the bottom layer's vocabulary for links and imports nothing
above it: how a shaper sizes its bucket from a profile is the shaper's rule
(:func:`synclab.transport.shaper.bucket_for`), how a profile is stretched under
time dilation is :func:`synclab.netem.dilation.dilate`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from synclab.units import parse_duration_s, parse_percent, parse_rate_bps, parse_size_bytes

KNOWN_ROLES = ("coordinator", "worker", "ps")

MAX_RATE_BPS = 10**13  # 10 Tbit/s: anything above is a typo
MAX_DURATION_S = 60.0
MAX_SIZE_BYTES = 1 << 30


class ProfileError(ValueError):
    """A profile that cannot be found or is invalid; the message names the file and field."""


def parse_rate(v: Any) -> int:
    """'4gbit' -> 4_000_000_000; bare numbers are bits/s; must be positive and at most 10 Tbit/s."""
    bps = parse_rate_bps(v, "rate")
    if bps <= 0:
        raise ValueError(f"rate must be positive, got {v!r} (leave it out, or null, for no rate limit)")
    if bps > MAX_RATE_BPS:
        raise ValueError(f"rate {v!r} is above 10tbit")
    return bps


def parse_duration(v: Any, what: str) -> float:
    """'20ms' -> 0.02; bare numbers are seconds; 0 to 60 s."""
    s = parse_duration_s(v, what)
    if s > MAX_DURATION_S:
        raise ValueError(f"{what} {v!r} is above {MAX_DURATION_S:g} s")
    return s


def parse_size(v: Any, what: str) -> int:
    """'1.5MB' -> 1_500_000, '64KiB' -> 65536; bare numbers are bytes; 1 B to 1 GiB."""
    n = parse_size_bytes(v, what)
    if n <= 0:
        raise ValueError(f"{what} must be positive, got {v!r}")
    if n > MAX_SIZE_BYTES:
        raise ValueError(f"{what} {v!r} is above 1GiB")
    return n


def parse_loss(v: Any) -> float:
    """'1%' -> 1.0, 0.5 -> 0.5 (bare numbers are percent); 0 to 100."""
    pct = parse_percent(v, "loss")
    if pct > 100:
        raise ValueError(f"loss must be at most 100%, got {v!r}")
    return pct


def format_rate(rate_bps: int | None) -> str:
    """4_000_000_000 -> '4gbit' (the shortest exact tc-style spelling); None -> 'unlimited'."""
    if rate_bps is None:
        return "unlimited"
    for unit, scale in (("tbit", 10**12), ("gbit", 10**9), ("mbit", 10**6), ("kbit", 10**3)):
        if rate_bps >= scale and rate_bps % (scale // 1000) == 0:
            return f"{rate_bps / scale:.3f}".rstrip("0").rstrip(".") + unit
    return f"{rate_bps}bit"


def format_duration(s: float) -> str:
    """0.02 -> '20ms'."""
    if s == 0:
        return "0"
    if s >= 1:
        return f"{s:g}s"
    if s >= 1e-3:
        return f"{s * 1e3:g}ms"
    return f"{s * 1e6:g}us"


def format_size(n: int) -> str:
    """1_500_000 -> '1.5MB', 65536 -> '64KiB'."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= scale:
            return f"{n / scale:g}{unit}"
    return f"{n}B"


class _LinkParams(BaseModel):
    """The shaping values shared by a profile and a per-role override."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    rate_bps: int | None = Field(None, validation_alias=AliasChoices("rate", "rate_bps"))
    burst_bytes: int | None = Field(None, validation_alias=AliasChoices("burst", "burst_bytes"))
    queue_bytes: int | None = Field(None, validation_alias=AliasChoices("queue", "queue_bytes"))
    delay_s: float = Field(0.0, validation_alias=AliasChoices("delay", "delay_s"))
    jitter_s: float = Field(0.0, validation_alias=AliasChoices("jitter", "jitter_s"))
    loss_pct: float = Field(0.0, validation_alias=AliasChoices("loss", "loss_pct"))
    direction: Literal["egress", "ingress", "both"] = "egress"

    @field_validator("rate_bps", mode="before")
    @classmethod
    def _rate(cls, v):
        return None if v is None else parse_rate(v)

    @field_validator("burst_bytes", mode="before")
    @classmethod
    def _burst(cls, v):
        return None if v is None else parse_size(v, "burst")

    @field_validator("queue_bytes", mode="before")
    @classmethod
    def _queue(cls, v):
        return None if v is None else parse_size(v, "queue")

    @field_validator("delay_s", mode="before")
    @classmethod
    def _delay(cls, v):
        return 0.0 if v is None else parse_duration(v, "delay")

    @field_validator("jitter_s", mode="before")
    @classmethod
    def _jitter(cls, v):
        return 0.0 if v is None else parse_duration(v, "jitter")

    @field_validator("loss_pct", mode="before")
    @classmethod
    def _loss(cls, v):
        return 0.0 if v is None else parse_loss(v)


class RoleOverride(_LinkParams):
    """Values that replace the profile's for one role (``roles: {ps: {rate: 2gbit}}``); unset keys inherit."""


class LinkProfile(_LinkParams):
    """One link's shaping, validated; ``None`` rate means no rate limit.

    ``delay``, ``jitter`` and ``loss`` act where the profile's ``direction`` shapes
    (egress: on the node's outgoing packets, so one-way latency between two nodes
    is the sender's delay). ``burst``/``queue`` are derived from the rate when absent
    (see :func:`synclab.transport.shaper.bucket_for`).
    """

    name: str = ""
    description: str = ""
    roles: dict[str, RoleOverride] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _consistent(self):
        if self.jitter_s > 0 and self.delay_s == 0:
            raise ValueError("jitter needs a delay: set delay as well (jitter varies it)")
        if self.jitter_s > self.delay_s > 0:
            raise ValueError(f"jitter ({format_duration(self.jitter_s)}) must not exceed delay "
                             f"({format_duration(self.delay_s)})")
        if (self.burst_bytes or self.queue_bytes) and self.rate_bps is None:
            raise ValueError("burst/queue need a rate")
        for role in self.roles:
            if role not in KNOWN_ROLES:
                raise ValueError(f"roles: unknown role {role!r}; known: {', '.join(KNOWN_ROLES)}")
            try:
                resolve_for_role(self, role)
            except ValidationError as e:
                raise ValueError(f"roles.{role}: {_describe(e)}") from None
        return self

    @field_validator("roles", mode="before")
    @classmethod
    def _roles(cls, v):
        return {} if v is None else v

    @property
    def shapes_anything(self) -> bool:
        """True when the profile asks for any rate, delay, jitter or loss."""
        return bool(self.rate_bps or self.delay_s or self.jitter_s or self.loss_pct)

    @property
    def needs_netem(self) -> bool:
        """True when the profile asks for something only netem can do in the kernel (delay, jitter, loss)."""
        return bool(self.delay_s or self.jitter_s or self.loss_pct)

    @property
    def shapes_egress(self) -> bool:
        return self.direction in ("egress", "both")

    @property
    def shapes_ingress(self) -> bool:
        return self.direction in ("ingress", "both")


def resolve_for_role(profile: LinkProfile, role: str | None) -> LinkProfile:
    """The profile as it applies to ``role``: its override's keys replace the profile's; ``roles`` dropped.

    A role without an override (or ``None``) gets the profile itself, minus ``roles``.
    """
    base = profile.model_dump(exclude={"roles"})
    override = profile.roles.get(role) if role is not None else None
    if override is not None:
        base.update(override.model_dump(include=override.model_fields_set))
        base["name"] = f"{profile.name}[{role}]" if profile.name else ""
    return LinkProfile.model_validate(base)


def profile_from_mapping(data: Any, *, name: str = "", source: str = "profile") -> LinkProfile:
    """Validate an inline profile mapping; :class:`ProfileError` names ``source`` and the field(s)."""
    if not isinstance(data, dict):
        raise ProfileError(f"{source}: a profile must be a mapping of fields, got {type(data).__name__}")
    data = dict(data)
    if name and not data.get("name"):
        data["name"] = name
    try:
        return LinkProfile.model_validate(data)
    except ValidationError as e:
        raise ProfileError(f"{source}: {_describe(e)}") from None


def _describe(err: ValidationError) -> str:
    parts = []
    for item in err.errors():
        loc = ".".join(str(p) for p in item["loc"])
        msg = item["msg"].removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            msg = "unknown field"
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)
