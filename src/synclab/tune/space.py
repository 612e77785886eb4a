"""Search dimensions from ``--param KEY=LOW:HIGH[:log]``, typed by the spec's own models.

A key is a dotted spec key (``transport.chunk_bytes``, ``strategy.slice_params``). Its type comes from the
pydantic field it names: a section of :class:`~synclab.config.spec.Spec`, or, under ``strategy.``, the
``Options`` model of the spec's strategy (so a strategy option added later is tunable without a change
here). A field whose annotation admits ``float`` is searched as a float, one that admits ``int`` (and not
``bool``) as an int; anything else (strings, literals, lists, booleans) is refused, naming the key.
"""

from __future__ import annotations

import math
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel


class TuneError(ValueError):
    """Bad ``--param`` text, an unknown key, or a key that is not numeric; the message names it."""


@dataclass(frozen=True)
class Param:
    """One search dimension: ``key`` between ``low`` and ``high`` (inclusive), ``kind`` int or float."""

    key: str
    low: float
    high: float
    log: bool = False
    kind: Literal["int", "float"] = "float"

    def value(self, x: float) -> int | float:
        return int(round(x)) if self.kind == "int" else float(x)

    def as_dict(self) -> dict[str, Any]:
        return {"key": self.key, "low": self.value(self.low), "high": self.value(self.high), "log": self.log,
                "kind": self.kind}


def parse_param(text: str) -> tuple[str, float, float, bool]:
    """``KEY=LOW:HIGH`` or ``KEY=LOW:HIGH:log`` -> (key, low, high, log); :class:`TuneError` naming what is wrong."""
    key, sep, rng = text.partition("=")
    key = key.strip()
    form = f"--param {text!r} must look like KEY=LOW:HIGH or KEY=LOW:HIGH:log (e.g. strategy.slice_params=1e4:1e6:log)"
    if not sep or not key or not rng:
        raise TuneError(form)
    parts = rng.split(":")
    log = False
    if len(parts) == 3:
        if parts[2].strip().lower() != "log":
            raise TuneError(f"{form}: the third field may only be 'log', got {parts[2]!r}")
        log = True
    elif len(parts) != 2:
        raise TuneError(form)
    try:
        low, high = float(parts[0]), float(parts[1])
    except ValueError:
        raise TuneError(f"{form}: {parts[0]!r} and {parts[1]!r} must be numbers") from None
    if not (math.isfinite(low) and math.isfinite(high)) or not low < high:
        raise TuneError(f"--param {key}: LOW must be below HIGH, both finite (got {low:g}:{high:g})")
    if log and low <= 0:
        raise TuneError(f"--param {key}: a log range needs LOW > 0 (got {low:g})")
    return key, low, high, log


def _numeric_kind(annotation: Any) -> Literal["int", "float"] | None:
    """``float`` when the annotation admits a float, ``int`` when it admits an int, else None."""
    args = typing.get_args(annotation) if typing.get_origin(annotation) in (typing.Union, types.UnionType) else (
        annotation,)
    if float in args:
        return "float"
    if int in args and bool not in args:
        return "int"
    return None


def field_kind(spec: Any, key: str) -> Literal["int", "float"]:
    """The numeric kind of dotted ``key`` in ``spec`` (a :class:`~synclab.config.Spec`); :class:`TuneError`
    when the key names no field, or a field that is not an int or float."""
    from synclab.strategies import registry

    parts = key.split(".")
    model: type[BaseModel] = type(spec)
    where = "the spec"
    for n, part in enumerate(parts):
        if n == 1 and parts[0] == "strategy" and part not in model.model_fields:
            model = registry.get(spec.strategy.name).Options
            where = f"strategy {spec.strategy.name!r}'s options"
        field = model.model_fields.get(part)
        if field is None:
            known = ", ".join(sorted(model.model_fields))
            raise TuneError(f"--param {key}: {'.'.join(parts[:n + 1])!r} is not a key of {where} (keys: {known})")
        ann = field.annotation
        if n < len(parts) - 1:
            if not (isinstance(ann, type) and issubclass(ann, BaseModel)):
                raise TuneError(f"--param {key}: {'.'.join(parts[:n + 1])!r} has no keys below it")
            model, where = ann, f"spec section {'.'.join(parts[:n + 1])!r}"
            continue
        kind = _numeric_kind(ann)
        if kind is None:
            raise TuneError(f"--param {key}: not a numeric key (its type is {getattr(ann, '__name__', ann)}); "
                            f"only int and float keys can be tuned")
        return kind
    raise TuneError(f"--param {key}: empty key")


def resolve_params(spec: Any, texts: list[str]) -> list[Param]:
    """Parse and type every ``--param`` against ``spec``; a key given twice is an error."""
    out: list[Param] = []
    for text in texts:
        key, low, high, log = parse_param(text)
        if any(p.key == key for p in out):
            raise TuneError(f"--param {key} is given more than once")
        kind = field_kind(spec, key)
        if kind == "int" and (low != int(low) or high != int(high)):
            raise TuneError(f"--param {key} is an int key: LOW and HIGH must be whole numbers (got {low:g}:{high:g})")
        out.append(Param(key, low, high, log, kind))
    if not out:
        raise TuneError("give at least one --param KEY=LOW:HIGH[:log]")
    return out
