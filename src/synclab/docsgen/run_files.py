"""The files code writes under a run directory, found by scanning the package: every ``run_dir / "NAME"``
(or ``self.run_dir``, ``j.run_dir``) with a literal or f-string name; hidden names (``.status.json.tmp``,
an atomic write's temporary) are not records. ``docs/reference/run-records.md`` is
written by hand; a unit test checks with this scan that it names every such file."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path


def _name(node: ast.AST) -> str | None:
    """A file name as the code spells it, ``{...}`` for what an f-string fills in."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    return None


def run_files(src: Path) -> dict[str, list[str]]:
    """name -> modules that join it to a ``run_dir``, for every Python file under ``src`` (the package)."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(src.rglob("*.py")):
        module = ".".join(path.relative_to(src.parent).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)):
                continue
            left = node.left
            base = left.attr if isinstance(left, ast.Attribute) else left.id if isinstance(left, ast.Name) else ""
            name = _name(node.right)
            if name and name.startswith("."):  # a hidden temporary (an atomic write's), never left behind
                continue
            if base == "run_dir" and name and module not in found[name]:
                found[name].append(module)
    return dict(found)


def mentioned(name: str, text: str) -> bool:
    """Whether ``text`` names the file ``name``: literally, or with ``<...>`` where the code fills in
    ``{}`` (``traffic-{}.csv`` is ``traffic-<node>.csv``), or (a name like ``traffic-worker0.csv``, one
    node's file) by a pattern whose fixed parts match it."""
    import re

    if f"`{name}" in text:
        return True
    for token in re.findall(r"`([^`\s]+)`", text):
        pattern = re.escape(token)
        pattern = re.sub(r"<[^>]*>", ".+", pattern.replace("\\<", "<").replace("\\>", ">"))
        literal = name.replace("{}", "<x>")
        if re.fullmatch(pattern.rstrip("/"), literal) or re.fullmatch(pattern.rstrip("/"), name):
            return True
    return False
