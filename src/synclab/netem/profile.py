"""Link profiles: what a link should look like (rate, burst, queue, delay, jitter, loss, direction).

A profile is a small YAML file (``netem/profiles/NAME.yaml``) or an inline mapping
in a spec. Human units are parsed once, here ("4gbit", "100mbit", "20ms", "1%",
"1.5MB"); everything past this module sees :class:`LinkProfile` with base units
in the names (``rate_bps``, ``burst_bytes``, ``delay_s``, ``loss_pct``).

Sizing rule: one function, :func:`bucket_for`, sizes every shaper — the tc
builders (tbf, htb) and the ``app`` token bucket in ``synclab.transport.shaper``
alike; where they differ it is through its explicit arguments:

* burst = max(4 ms of the rate, 64 KiB). 4 ms is rate/HZ for HZ=250 (Debian's
  kernels), the least tbf needs to keep up, and was measured accurate from
  100 Mbit/s to 5 Gbit/s under tbf; 64 KiB lets one GSO super-packet or one
  transport chunk header through at low rates without stalling.
* ``kernel=True`` (tbf; htb for both ``burst`` and ``cburst``): a floor of 8 ms
  of the rate above 1 Gbit/s: with 4 ms both under-shot at 2 Gbit/s on a 2-core
  host (tbf 0.938, htb 0.962 of the rate, measured side by side); and a floor of
  96 KiB: tbf cuts a GSO super-packet longer than its bucket into MTU-sized
  packets and queues them one by one (the kernel's ``tbf_segment``), and a 64 KiB
  super-packet with its segments' headers (~68.5 kB as the qdisc counts it) does
  not fit 64 KiB. Measured (session 18, 2-rank ring alone, 125 Mbit/s): 64 KiB
  bucket 20.7 CPU s/GB (gloo 6.9), 128 KB bucket 3.1 (gloo 1.1), the same
  throughput; above ~200 Mbit/s 4 ms of the rate is larger anyway. htb also gets
  an explicit ``quantum`` of min(rate/10 per s, 200 000) bytes so it does not
  warn or fall back to r2q.
* ``chunk_bytes`` (the ``app`` bucket, charged a whole transport chunk at once):
  the 64 KiB floor grows by one chunk, so a chunk always fits in the bucket.
* queue (tbf/bfifo limit) = max(2 × burst, 25 ms of the rate), capped at 2 GiB
  (tc's limits are 32-bit); where the kernel itself delays packets (netem) its
  limit adds 2 × rate × (delay + jitter) so the delay line never drops.
* a profile's ``burst``/``queue``, when set, are used as given by tc (the
  ``app`` bucket is built from the rate and the chunk size alone); a profile's
  *derived* values (:attr:`LinkProfile.effective_burst_bytes`, what
  ``synclab profiles`` shows and what :func:`dilate` keeps in bytes) are the
  rule without either argument.

Where profiles are found (first hit wins): the ``search_dirs`` argument; the
directories in ``$SYNCLAB_PROFILES`` then ``$SYNCLAB_PROFILES_DIR`` (each
``os.pathsep``-separated: a user's own profiles); the stock profiles shipped in the
package (``synclab/netem/profiles``, read through :mod:`synclab.resources`; a
checkout's ``netem/profiles`` links to that one copy), so an installed wheel has them.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from synclab.config.units import parse_duration_s, parse_percent, parse_rate_bps, parse_size_bytes
from synclab.resources import link_profiles_dir

KNOWN_ROLES = ("coordinator", "worker", "ps")
PROFILES_ENV = "SYNCLAB_PROFILES"
PROFILES_ENV_OLD = "SYNCLAB_PROFILES_DIR"  # the earlier name, still read after PROFILES_ENV

BURST_S = 0.004  # 4 ms of the rate
KERNEL_BURST_S = 0.008  # tbf and htb above KERNEL_BIG_RATE_BPS
KERNEL_BIG_RATE_BPS = 1_000_000_000
MIN_BURST_BYTES = 64 << 10
KERNEL_MIN_BURST_BYTES = 96 << 10  # tbf and htb: a GSO super-packet with its segments' headers fits (see bucket_for)
QUEUE_S = 0.025
MAX_QUEUE_BYTES = 2 << 30
MAX_RATE_BPS = 10**13  # 10 Tbit/s: anything above is a typo
MAX_DURATION_S = 60.0
MAX_SIZE_BYTES = 1 << 30
HTB_MAX_QUANTUM = 200_000


class ProfileError(ValueError):
    """A profile that cannot be found or is invalid; the message names the file and field."""


@dataclass(frozen=True)
class Bucket:
    """A shaper's token-bucket depth and queue limit, in bytes."""

    burst_bytes: int
    queue_bytes: int


def bucket_for(rate_bps: float, *, burst_bytes: int | None = None, queue_bytes: int | None = None,
               kernel: bool = False, chunk_bytes: int = 0) -> Bucket:
    """The one sizing rule for every shaper of a ``rate_bps`` link (see the module docstring).

    A configured ``burst_bytes``/``queue_bytes`` is kept as given; otherwise
    burst = max(4 ms of the rate, 64 KiB + ``chunk_bytes``) and queue =
    max(2 × burst, 25 ms of the rate), capped at 2 GiB.

    ``kernel``: the shaper is tbf or htb, which also get 8 ms of the rate above
    1 Gbit/s (they under-shoot with 4 ms there) and at least 96 KiB (a GSO
    super-packet fits; a smaller tbf bucket segments it, 4-7x the host's CPU per
    byte). The ``app`` token bucket leaves both out: it credits time lost to the
    CPU scheduler back itself and is charged whole chunks.
    ``chunk_bytes``: the shaper releases whole chunks of this size (the ``app``
    bucket, which is charged a transport chunk at once), so the floor must hold
    one on top of the 64 KiB; a bucket shallower than a chunk loses the tokens
    that accrue while the chunk is written and the link undershoots its rate.
    """
    if burst_bytes is None:
        burst_bytes = max(MIN_BURST_BYTES + chunk_bytes, int(rate_bps / 8 * BURST_S))
        if kernel:
            burst_bytes = max(burst_bytes, KERNEL_MIN_BURST_BYTES)
            if rate_bps > KERNEL_BIG_RATE_BPS:
                burst_bytes = max(burst_bytes, int(rate_bps / 8 * KERNEL_BURST_S))
    if queue_bytes is None:
        queue_bytes = min(MAX_QUEUE_BYTES, max(2 * burst_bytes, int(rate_bps / 8 * QUEUE_S)))
    return Bucket(burst_bytes, queue_bytes)


def htb_quantum_bytes_for(rate_bps: int) -> int:
    """htb's DRR quantum: rate/10 bytes (r2q = 10), kept inside [1600, 200 000] so tc does not warn."""
    return min(HTB_MAX_QUANTUM, max(1600, rate_bps // 8 // 10))


def delay_line_bytes_for(rate_bps: int, delay_s: float, jitter_s: float) -> int:
    """What a kernel delay line (netem) holds at full rate, doubled: 2 × rate × (delay + jitter)."""
    return int(2 * rate_bps / 8 * (delay_s + jitter_s))


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
    (see the module docstring for the rule).
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

    def bucket(self, *, kernel: bool = False) -> Bucket | None:
        """:func:`bucket_for` this profile's rate, burst and queue; None without a rate."""
        if self.rate_bps is None:
            return None
        return bucket_for(self.rate_bps, burst_bytes=self.burst_bytes, queue_bytes=self.queue_bytes, kernel=kernel)

    @property
    def effective_burst_bytes(self) -> int | None:
        """The configured burst, else the one derived by :func:`bucket_for`; None without a rate."""
        b = self.bucket()
        return None if b is None else b.burst_bytes

    @property
    def effective_queue_bytes(self) -> int | None:
        """The configured queue, else the one derived by :func:`bucket_for`; None without a rate."""
        b = self.bucket()
        return None if b is None else b.queue_bytes

    def human(self) -> dict[str, Any]:
        """The profile in human units, as a profile file would spell it (derived values marked)."""
        out: dict[str, Any] = {"name": self.name, "rate": format_rate(self.rate_bps)}
        if self.rate_bps is not None:
            out["burst"] = format_size(self.effective_burst_bytes or 0) + ("" if self.burst_bytes else " (derived)")
            out["queue"] = format_size(self.effective_queue_bytes or 0) + ("" if self.queue_bytes else " (derived)")
        out.update(delay=format_duration(self.delay_s), jitter=format_duration(self.jitter_s),
                   loss=f"{self.loss_pct:g}%", direction=self.direction)
        if self.roles:
            out["roles"] = {r: {k: v for k, v in resolve_for_role(self, r).human().items()
                                if k in _human_keys(o)} for r, o in self.roles.items()}
        out["description"] = self.description
        return out


def _human_keys(o: RoleOverride) -> set[str]:
    names = {"rate_bps": "rate", "burst_bytes": "burst", "queue_bytes": "queue", "delay_s": "delay",
             "jitter_s": "jitter", "loss_pct": "loss", "direction": "direction"}
    return {names[f] for f in o.model_fields_set}


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


def dilate(profile: LinkProfile, dilation: float) -> LinkProfile:
    """The link a host must shape to emulate ``profile`` under time dilation D (``run.dilation``).

    Everything runs D times slower: rates are divided by D, delay and jitter
    multiplied by D; loss is a probability and stays.

    The queue keeps the *bytes* of the emulated link (configured or derived from
    the undilated rate), so TCP sees the same buffers; deriving it from the
    dilated rate would shrink it D-fold and turn many-to-one traffic into incast
    collapse.

    The burst is not a property of the emulated link but of the shaper that
    must reach a rate: a *derived* burst is left to :func:`bucket_for` at the
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
            out["queue_bytes"] = link.effective_queue_bytes
        for key in ("delay_s", "jitter_s"):
            if out.get(key):
                out[key] = out[key] * dilation
        return out

    data = scaled(profile.model_dump(exclude={"roles"}), profile)
    data["roles"] = {r: scaled(o.model_dump(include=o.model_fields_set), resolve_for_role(profile, r))
                     for r, o in profile.roles.items()}
    return LinkProfile.model_validate(data)


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


def package_profiles_dir() -> Path:
    """The stock profiles shipped inside the package (the one copy; ``netem/profiles`` links to it)."""
    return link_profiles_dir()


def default_search_dirs(env: dict[str, str] | None = None) -> list[Path]:
    """``$SYNCLAB_PROFILES`` entries, then ``$SYNCLAB_PROFILES_DIR`` ones, then the packaged stock profiles."""
    env = os.environ if env is None else env
    dirs = [Path(p) for var in (PROFILES_ENV, PROFILES_ENV_OLD) for p in env.get(var, "").split(os.pathsep) if p]
    return dirs + [package_profiles_dir()]


def _profile_files(search_dirs: Iterable[Path]) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for d in search_dirs:
        d = Path(d)
        if not d.is_dir():
            continue
        for p in sorted(d.iterdir()):
            if p.suffix in (".yaml", ".yml") and p.is_file():
                found.setdefault(p.stem, p)
    return found


def load_profile_file(path: Path) -> LinkProfile:
    """Read and validate one profile file; its name is the file's stem."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as e:
        raise ProfileError(f"{path}: cannot read profile: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        raise ProfileError(f"{path}: not valid YAML: {e}") from None
    return profile_from_mapping(data, name=path.stem, source=str(path))


def load_profile(name_or_path: str | Path, search_dirs: Sequence[Path] | None = None) -> LinkProfile:
    """A profile by name (looked up in ``search_dirs``, default :func:`default_search_dirs`) or by file path.

    Anything containing a path separator or ending in ``.yaml``/``.yml`` is a path.
    Raises :class:`ProfileError` for an unknown name (listing the known ones) or an invalid file.
    """
    text = str(name_or_path)
    if isinstance(name_or_path, Path) or os.sep in text or text.endswith((".yaml", ".yml")):
        return load_profile_file(Path(text))
    dirs = default_search_dirs() if search_dirs is None else list(search_dirs)
    files = _profile_files(dirs)
    if text not in files:
        known = ", ".join(sorted(files)) or "none"
        raise ProfileError(f"unknown profile {text!r}; known: {known} (searched {', '.join(map(str, dirs))})")
    return load_profile_file(files[text])


def list_profiles(search_dirs: Sequence[Path] | None = None) -> list[LinkProfile]:
    """Every profile found (earlier directories shadow later ones), by rate then name; invalid files raise."""
    dirs = default_search_dirs() if search_dirs is None else list(search_dirs)
    profiles = [load_profile_file(p) for p in _profile_files(dirs).values()]
    return sorted(profiles, key=lambda p: (p.rate_bps is None, p.rate_bps or 0, p.needs_netem, p.name))


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
