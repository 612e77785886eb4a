"""Human units parsed once, at the edge: rates ("4gbit"), durations ("20ms"), sizes ("1MiB"), and
Prometheus/Grafana durations ("5m", "1h30m")."""

from __future__ import annotations

import re

_RATE = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12,
         "bps": 1, "kbps": 8e3, "mbps": 8e6, "gbps": 8e9}  # tc: kbps = kilobytes/s
_TIME = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
_SIZE = {"b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30,
         "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
_NUM = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-zA-Z%]*)\s*$")


def _split(text: str, what: str) -> tuple[float, str]:
    m = _NUM.match(str(text))
    if not m:
        raise ValueError(f"cannot parse {what} {text!r}")
    return float(m.group(1)), m.group(2).lower()


def parse_rate_bps(value: str | int | float) -> int:
    """'4gbit' -> 4_000_000_000 bits/s. Bare numbers are bits/s."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"rate must not be negative, got {value}")
        return int(value)
    num, unit = _split(value, "rate")
    if unit not in _RATE and unit != "":
        raise ValueError(f"unknown rate unit {unit!r} in {value!r}; use bit, kbit, mbit, gbit (or tc's kbps = kilobytes/s)")
    return int(round(num * _RATE.get(unit, 1)))


def parse_duration_s(value: str | int | float) -> float:
    """'20ms' -> 0.02. Bare numbers are seconds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"duration must not be negative, got {value}")
        return float(value)
    num, unit = _split(value, "duration")
    if unit not in _TIME and unit != "":
        raise ValueError(f"unknown time unit {unit!r} in {value!r}; use s, ms, us")
    return num * _TIME.get(unit, 1.0)


def parse_size_bytes(value: str | int) -> int:
    """'1MiB' -> 1048576, '64kb' -> 64000. Bare numbers are bytes."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"size must not be negative, got {value}")
        return value
    num, unit = _split(value, "size")
    if unit not in _SIZE and unit != "":
        raise ValueError(f"unknown size unit {unit!r} in {value!r}; use B, KiB, MiB, GiB, kB, MB, GB")
    return int(round(num * _SIZE.get(unit, 1)))


# Prometheus' duration syntax (also Grafana's time ranges): every part carries a unit ("1h30m");
# unlike tc's, "m" is minutes and a bare number is refused.
_PROM_TIME = {"ms": _TIME["ms"], "s": _TIME["s"], "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0,
              "y": 31536000.0}
_PROM_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)")


def parse_prometheus_duration_s(text: str) -> float:
    """'90s' -> 90.0, '5m' -> 300.0, '1h30m' -> 5400.0, '500ms' -> 0.5."""
    text = str(text).strip()
    parts = _PROM_PART.findall(text)
    if not text or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"cannot parse duration {text!r} (use e.g. 30s, 5m, 1h30m)")
    return sum(float(n) * _PROM_TIME[u] for n, u in parts)
