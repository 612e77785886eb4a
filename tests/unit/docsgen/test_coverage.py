"""The reference covers the product: every ``synclab`` command (and each of its options) has its section in
``docs/reference/cli.md``, and every spec key, each strategy's own ``strategy.*`` keys included, is in
``docs/reference/spec.md``. The command tree and the models are walked here on their own (not through the
renderers), so a renderer that skips something fails. Nothing is started: both are read from the code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer.main
from pydantic import BaseModel

from synclab.cli import app
from synclab.config.spec import Spec
from synclab.strategies import registry

REPO = Path(__file__).resolve().parents[3]
CLI = (REPO / "docs" / "reference" / "cli.md").read_text()
SPEC = (REPO / "docs" / "reference" / "spec.md").read_text()


def _commands(cmd, path):
    yield path, cmd
    for name, sub in sorted((getattr(cmd, "commands", None) or {}).items()):
        yield from _commands(sub, [*path, name])


COMMANDS = list(_commands(typer.main.get_command(app), ["synclab"]))


def _section(path: list[str]) -> str:
    """The text of ``path``'s section in cli.md (from its heading to the next one), '' when it has none."""
    m = re.search(rf"^## `{re.escape(' '.join(path))}`\n(.*?)(?=^## |\Z)", CLI, flags=re.S | re.M)
    return m.group(1) if m else ""


def test_the_tree_has_the_commands_a_user_reaches_for():
    names = {" ".join(p) for p, _ in COMMANDS}
    assert {"synclab run", "synclab docs", "synclab validate doc", "synclab calibrate ring-goodput"} <= names


@pytest.mark.parametrize("path,cmd", COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_every_command_and_option_is_in_the_cli_reference(path, cmd):
    section = _section(path)
    assert section, f"`{' '.join(path)}` has no section in docs/reference/cli.md; run `synclab docs`"
    for param in cmd.params:
        if getattr(param, "hidden", False) or param.param_type_name == "argument":
            continue
        assert any(f"`{o}" in section or f" {o}" in section for o in param.opts), \
            f"{' '.join(path)} {'/'.join(param.opts)} is not in its section of docs/reference/cli.md"


def _keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    out = []
    for name, field in model.model_fields.items():
        sub = field.annotation
        if isinstance(sub, type) and issubclass(sub, BaseModel) and sub.model_fields:
            out += _keys(sub, f"{prefix}{name}.")
        else:
            out.append(f"{prefix}{name}")
    return out


SPEC_KEYS = _keys(Spec) + sorted({f"strategy.{k}" for n in registry.names() for k in _keys(registry.get(n).Options)})


def test_the_spec_walk_finds_nested_and_strategy_keys():
    assert {"network.tcp_notsent_lowat", "run.seed", "name", "strategy.k"} <= set(SPEC_KEYS)


@pytest.mark.parametrize("key", SPEC_KEYS)
def test_every_spec_key_is_in_the_spec_reference(key):
    rows = [line for line in SPEC.splitlines() if line.startswith(f"| `{key}` |")]
    assert rows, f"spec key {key} is not in docs/reference/spec.md; run `synclab docs`"
    for line in rows:  # | key | type | default | description |, pipes inside a cell escaped
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        assert len(cells) == 4 and cells[3] not in ("", "—"), \
            f"spec key {key} has no description in docs/reference/spec.md: {line}"
