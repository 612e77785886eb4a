"""A container's settings: every ``SYNCLAB_*`` variable the entrypoint (``services/entrypoint.py``)
reads, with its default, range and help, validated once into a :class:`ContainerSettings`.

Plain pydantic over a mapping of variables (``os.environ`` in the container, a dict in tests):
an empty variable counts as unset, and a bad one raises :class:`SettingsError` naming it.
Variables other code reads (``SYNCLAB_PROFILES_DIR``, ...) are left alone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator

from synclab.config.load import parse_override

PREFIX = "SYNCLAB_"


class SettingsError(ValueError):
    """A bad ``SYNCLAB_*`` value; the message names the variable."""


def _var(name: str, default: Any, what: str, spec_key: str | None = None, **bounds: Any) -> Any:
    """A field read from the variable ``name``; ``spec_key``: the job-spec key it overrides."""
    extra = {"spec_key": spec_key} if spec_key else None
    return Field(default, validation_alias=name, description=what, json_schema_extra=extra, **bounds)


def _plain_name(value: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", value):
        raise ValueError("expected a plain name (letters, digits, _ . -)")
    return value


def _host_port(value: str) -> str:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError("expected host:port")
    return value


PlainName = Annotated[str, AfterValidator(_plain_name)]
HostPort = Annotated[str, AfterValidator(_host_port)]
_COUNT = {"ge": 0, "le": 10_000_000}
_PORT = {"ge": 1, "le": 65535}


class ContainerSettings(BaseModel):
    """One container's configuration; the field's alias is its variable, the description its help."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    token: str = _var("SYNCLAB_TOKEN", ..., "the shared job token of the cluster")
    profile: str | None = _var("SYNCLAB_PROFILE", "none", "link profile: a name in netem/profiles, a YAML path, "
                               "or 'none'; the coordinator makes it the job's network.profile",
                               validate_default=True)
    shape_device: str = _var("SYNCLAB_SHAPE_DEVICE", "eth0", "interface to shape")
    metrics_port: int = _var("SYNCLAB_METRICS_PORT", 9100, "Prometheus /metrics port", **_PORT)
    repeat: int = _var("SYNCLAB_REPEAT", 1, "jobs to run before the container exits; 0 = forever",
                       ge=0, le=1_000_000)
    verbose: bool = _var("SYNCLAB_VERBOSE", False, "1 for debug logs")
    health_grace_s: float = _var("SYNCLAB_HEALTH_GRACE", 120.0,
                                 "seconds a starting job counts as healthy before /metrics answers", ge=0, le=86_400)
    spec: Path = _var("SYNCLAB_SPEC", Path("/opt/synclab/specs/compose.yaml"), "coordinator: base spec YAML")
    strategy: PlainName | None = _var("SYNCLAB_STRATEGY", None, "coordinator: strategy.name override",
                                      spec_key="strategy.name")
    model: PlainName | None = _var("SYNCLAB_MODEL", None, "coordinator: model.name override", spec_key="model.name")
    workers: int | None = _var("SYNCLAB_WORKERS", None, "coordinator: cluster.workers override",
                               spec_key="cluster.workers", **_COUNT)
    ps_shards: int | None = _var("SYNCLAB_PS_SHARDS", None, "coordinator: cluster.ps_shards override",
                                 spec_key="cluster.ps_shards", **_COUNT)
    iterations: int | None = _var("SYNCLAB_ITERATIONS", None, "coordinator: run.iterations override",
                                  spec_key="run.iterations", **_COUNT)
    spec_set: tuple[tuple[str, Any], ...] = _var("SYNCLAB_SET", (), "coordinator: more overrides, "
                                                 "'dotted.key=value' separated by spaces")
    runs_dir: Path = _var("SYNCLAB_RUNS_DIR", Path("/runs"), "where run directories go (a volume); workers and "
                          "PS shards read runs/latest to learn whether a failed job restarts")
    listen_port: int = _var("SYNCLAB_LISTEN_PORT", 50051, "coordinator: gRPC port", **_PORT)
    coordinator: HostPort = _var("SYNCLAB_COORDINATOR", "coordinator:50051", "worker/ps: coordinator host:port")
    port: int = _var("SYNCLAB_PORT", 50060, "worker/ps: gRPC port of this node", **_PORT)
    connect_timeout_s: int = _var("SYNCLAB_CONNECT_TIMEOUT", 60, "worker/ps: seconds to reach the coordinator",
                                  ge=1, le=86_400)

    @field_validator("profile")
    @classmethod
    def _no_profile(cls, v: str | None) -> str | None:
        return None if v is not None and v.lower() in ("none", "off", "0") else v

    @field_validator("verbose", mode="before")
    @classmethod
    def _zero_or_one(cls, v: Any) -> Any:
        if isinstance(v, str):
            if v.lower() not in ("0", "1", "true", "false", "yes", "no"):
                raise ValueError("expected 0 or 1")
            return v.lower() in ("1", "true", "yes")
        return v

    @field_validator("spec_set", mode="before")
    @classmethod
    def _overrides(cls, v: Any) -> Any:
        return tuple(parse_override(item) for item in v.split()) if isinstance(v, str) else v

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> ContainerSettings:
        given = {k: v.strip() for k, v in environ.items() if k.startswith(PREFIX) and v.strip()}
        try:
            return cls.model_validate(given)
        except ValidationError as e:
            raise SettingsError("; ".join(_describe(err) for err in e.errors())) from None

    def spec_overrides(self) -> list[tuple[str, Any]]:
        """The job-spec overrides these variables ask for, ``SYNCLAB_SET``'s last."""
        own = [(key, getattr(self, name)) for name, key in _spec_keys().items() if getattr(self, name) is not None]
        return own + list(self.spec_set)

    @classmethod
    def variables_help(cls) -> str:
        """One line per variable: name, default, what it does."""
        lines = []
        for field in cls.model_fields.values():
            default = "required" if field.is_required() else f"default {_shown(field.default)}"
            lines.append(f"  {field.validation_alias:<24} {field.description} ({default})")
        return "\n".join(lines)


def _spec_keys() -> dict[str, str]:
    return {name: f.json_schema_extra["spec_key"] for name, f in ContainerSettings.model_fields.items()
            if f.json_schema_extra}


def _shown(default: Any) -> str:
    if default is None or default == ():
        return "unset"
    if isinstance(default, bool):
        return str(int(default))
    return f"{default:g}" if isinstance(default, float) else str(default)


def _describe(err: dict) -> str:
    """One validation error as ``VARIABLE=value: what is wrong``."""
    var = err["loc"][0]
    raw = err.get("input")
    field = next(f for f in ContainerSettings.model_fields.values() if f.validation_alias == var)
    if err["type"] == "missing":
        return f"{var} is required ({field.description})"
    if err["type"] == "int_parsing":
        return f"{var}={raw!r} is not an integer"
    if err["type"] == "float_parsing":
        return f"{var}={raw!r} is not a number"
    if err["type"] in ("greater_than_equal", "less_than_equal"):
        lo = next(m.ge for m in field.metadata if hasattr(m, "ge"))
        hi = next(m.le for m in field.metadata if hasattr(m, "le"))
        return f"{var}={raw} is out of range [{lo}, {hi}]"
    return f"{var}={raw!r}: {err['msg'].removeprefix('Value error, ')}"
