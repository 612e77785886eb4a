"""A spec from a YAML file or a mapping, with ``dotted.key=value`` overrides applied in order.

:func:`load_spec` is the one way a spec file becomes a :class:`~synclab.config.spec.Spec`
(``synclab run`` and the container entrypoint alike); :func:`parse_override` is the one reader of
an override, whether it came from ``--set`` or a ``SYNCLAB_*`` variable.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from synclab.config.spec import Spec, SpecError
from synclab.fileio import InputFileError, read_yaml


def _format_errors(err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"] if not str(p).startswith("function-"))
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = "unknown key"
        lines.append(f"{loc or '<spec>'}: {msg}")
    return "; ".join(lines)


Override = str | tuple[str, Any]
"""``'dotted.key=value'`` as typed on a command line, or an already typed ``(dotted.key, value)``."""


def parse_override(item: str) -> tuple[str, Any]:
    """``'dotted.key=value'`` -> ``('dotted.key', value)``, the value read as a YAML scalar
    (``3`` an int, ``null`` None, ``4gbit`` a string)."""
    key, sep, raw = item.partition("=")
    if not sep:
        raise SpecError(f"override {item!r} must look like dotted.key=value")
    key = key.strip()
    _key_parts(key)
    try:
        return key, (yaml.safe_load(raw) if raw != "" else "")
    except yaml.YAMLError:
        raise SpecError(f"override {item!r}: the value is not valid YAML") from None


def _key_parts(key: str) -> list[str]:
    parts = key.split(".")
    if not all(parts):
        raise SpecError(f"override key {key!r} is malformed")
    return parts


def apply_overrides(data: dict, overrides: Iterable[Override]) -> dict:
    """Set each overridden key in ``data`` (sections created as needed); returns ``data``."""
    for item in overrides:
        key, value = parse_override(item) if isinstance(item, str) else item
        *sections, last = _key_parts(key)
        node = data
        for p in sections:
            nxt = node.setdefault(p, {})
            if not isinstance(nxt, dict):
                raise SpecError(f"{key}: {p!r} is not a section")
            node = nxt
        node[last] = value
    return data


def parse_spec(data: dict | None, overrides: Iterable[Override] = ()) -> Spec:
    data = apply_overrides(dict(data or {}), overrides)
    try:
        return Spec.model_validate(data)
    except ValidationError as e:
        raise SpecError(_format_errors(e)) from None
    except KeyError as e:  # unknown strategy from the registry
        raise SpecError(f"strategy.name: {e.args[0]}") from None


def load_spec(path: str | Path, overrides: Iterable[Override] = ()) -> Spec:
    """The one way a spec file becomes a :class:`Spec` (``synclab run`` and the container
    entrypoint alike): the YAML file, then the overrides in order, validated.
    A :class:`SpecError` names the file and the dotted key."""
    path = Path(path)
    try:
        data = read_yaml(path, "spec file")
    except InputFileError as e:
        raise SpecError(str(e)) from None
    if data is None:  # an empty file is a mistake (a truncated copy, the wrong path), never "all defaults"
        raise SpecError(f"spec file {path} is empty; a spec names at least its strategy (e.g. strategy: {{name: ps}})")
    if not isinstance(data, dict):
        raise SpecError(f"{path}: the spec must be a mapping of sections")
    try:
        return parse_spec(data, overrides)
    except SpecError as e:
        raise SpecError(f"{path}: {e}") from None
