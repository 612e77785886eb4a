"""Human units parsed once, at the edge: rates ("4gbit"), durations ("20ms"), sizes ("1MiB"), percentages ("1%"),
and Prometheus/Grafana durations ("5m", "1h30m").

Every parser takes the field's name (``what``) so an error says which value was
wrong; all raise :class:`ValueError` only (never ``OverflowError`` or
``TypeError``) and refuse negative, non-finite and non-numeric input. Range
checks that depend on the field (a rate must be positive, a loss at most 100 %)
stay with the caller.
"""

from __future__ import annotations

import math
import re

_RATE = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12,
         "bps": 1, "kbps": 8e3, "mbps": 8e6, "gbps": 8e9}  # tc: kbps = kilobytes/s
_TIME = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
_SIZE = {"b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30,
         "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
_PERCENT = {"%": 1.0}
_NUM = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-zA-Z%]*)\s*$")


def _split(value: object, what: str) -> tuple[int | float, str]:
    """The number and the lower-cased unit of ``value`` (a bare number has unit ''), checked for sign and finiteness."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"{what} must be a number or a string with a unit, got {value!r}")
    if isinstance(value, str):
        if value.strip().startswith("-"):
            raise ValueError(f"{what} must not be negative, got {value!r}")
        m = _NUM.match(value)
        if not m:
            raise ValueError(f"cannot parse {what} {value!r}")
        num: int | float = float(m.group(1))
        unit = m.group(2).lower()
    else:
        num, unit = value, ""
    if isinstance(num, float) and not math.isfinite(num):
        raise ValueError(f"{what} must be finite, got {value!r}")
    if num < 0:
        raise ValueError(f"{what} must not be negative, got {value!r}")
    return num, unit


def _scaled(value: object, what: str, units: dict, hint: str) -> int | float:
    num, unit = _split(value, what)
    if unit == "":
        return num
    if unit not in units:
        raise ValueError(f"unknown {what} unit {unit!r} in {value!r}; use {hint}")
    out = num * units[unit]
    if not math.isfinite(out):
        raise ValueError(f"{what} {value!r} is out of range")
    return out


def parse_rate_bps(value: str | int | float, what: str = "rate") -> int:
    """'4gbit' -> 4_000_000_000 bits/s. Bare numbers are bits/s."""
    n = _scaled(value, what, _RATE, "bit, kbit, mbit, gbit (or tc's kbps = kilobytes/s)")
    if isinstance(value, (int, float)):
        return int(n)  # a bare number of bits/s: its whole part
    return int(round(n))


def parse_duration_s(value: str | int | float, what: str = "duration") -> float:
    """'20ms' -> 0.02. Bare numbers are seconds."""
    return float(_scaled(value, what, _TIME, "s, ms, us"))


def parse_size_bytes(value: str | int | float, what: str = "size") -> int:
    """'1MiB' -> 1048576, '64kb' -> 64000. Bare numbers are bytes (a bare float must be whole)."""
    if isinstance(value, float) and math.isfinite(value) and not value.is_integer():
        raise ValueError(f"{what} must be a whole number of bytes, got {value!r}")
    n = _scaled(value, what, _SIZE, "B, KiB, MiB, GiB, kB, MB, GB")
    return n if isinstance(n, int) else int(round(n))


def parse_percent(value: str | int | float, what: str = "percentage") -> float:
    """'1%' -> 1.0; bare numbers are percent too (0.5 -> 0.5)."""
    try:
        return float(_scaled(value, what, _PERCENT, "a percentage such as '1%' or 0.5"))
    except ValueError as e:
        if str(e).startswith("cannot parse"):
            raise ValueError(f"{e}; write a percentage such as '1%' or 0.5") from None
        raise


# Prometheus' duration syntax (also Grafana's time ranges): every part carries a unit ("1h30m");
# unlike tc's, "m" is minutes and a bare number is refused.
_PROM_TIME = {"ms": _TIME["ms"], "s": _TIME["s"], "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0,
              "y": 31536000.0}
_PROM_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)")


def parse_prometheus_duration_s(value: str, what: str = "duration") -> float:
    """'90s' -> 90.0, '5m' -> 300.0, '1h30m' -> 5400.0, '500ms' -> 0.5."""
    text = str(value).strip()
    parts = _PROM_PART.findall(text)
    if not text or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"cannot parse {what} {text!r} (use e.g. 30s, 5m, 1h30m)")
    return sum(float(n) * _PROM_TIME[u] for n, u in parts)
