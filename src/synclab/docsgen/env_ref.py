"""``docs/reference/environment.md``: every ``SYNCLAB_*`` environment variable, collected from the code.

The Python sources of the package are scanned with :mod:`ast`: a variable counts as *read* where its name is
the key of ``os.environ.get/[...]``, ``os.getenv``, an option's ``envvar=``, or a field of the container
settings (``synclab.config.settings``, whose help text describes it), and as *set* where it is a keyword of a
call or a key of a dict literal (the environment handed to a child process); a name that only appears in a
constant or a docstring is *named*. Compose files, the container image and scripts are scanned as text and
listed by file. Readers are named by module and function, never by line, so the page moves only when a
variable or its readers do.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

NAME = re.compile(r"\bSYNCLAB_[A-Z0-9_]*[A-Z0-9]\b")
_READ_CALLS = {"get", "getenv", "pop", "setdefault", "_var"}
# Non-Python places a variable is given or used: compose files, the container image, scripts.
TEXT_GLOBS = ("docker-compose*.yml", "services/Dockerfile", "services/entrypoint.py", "services/specs/*.yaml",
              "scripts/**/*.sh", "scripts/**/*.py", "Makefile")


def _literal(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.fullmatch(NAME.pattern, node.value):
        return node.value
    return None


def constants(tree: ast.Module) -> dict[str, str]:
    """A module's top-level constants that hold a variable's name (``PROFILES_ENV = ...``), by name."""
    return {t.id: var for node in tree.body if isinstance(node, ast.Assign) and (var := _literal(node.value))
            for t in node.targets if isinstance(t, ast.Name)}


def _shared(per_module: dict[str, dict[str, str]]) -> dict[str, str]:
    """Constants by name across modules, where the name means one variable everywhere (``tls.ENV``)."""
    seen: dict[str, set[str]] = defaultdict(set)
    for consts in per_module.values():
        for k, v in consts.items():
            seen[k].add(v)
    return {k: next(iter(v)) for k, v in seen.items() if len(v) == 1}


class _Scan(ast.NodeVisitor):
    def __init__(self, module: str, own: dict[str, str], modules: dict[str, dict[str, str]]):
        self.module, self.where, self.own, self.modules = module, [module], own, modules
        self.shared = _shared(modules)
        self.found: list[tuple[str, str, str, str]] = []  # (variable, kind, where, help)
        self.claimed: set[int] = set()

    def _scope(self, node, name):
        self.where.append(name)
        self.generic_visit(node)
        self.where.pop()

    def visit_FunctionDef(self, node):
        self._scope(node, node.name)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        self._scope(node, node.name)

    def _var(self, node: ast.AST) -> str | None:
        """The variable ``node`` names: a literal, or a constant holding one (``PROFILES_ENV``, ``tls.ENV``)."""
        if isinstance(node, ast.Name):
            return self.own.get(node.id) or self.shared.get(node.id)
        if isinstance(node, ast.Attribute):  # placement.IMAGE_ENV: the constant of the module named so
            if isinstance(node.value, ast.Name):
                for module, consts in self.modules.items():
                    if module.rsplit(".", 1)[-1] == node.value.id and node.attr in consts:
                        return consts[node.attr]
            return self.shared.get(node.attr)
        return _literal(node)

    def visit_Assign(self, node: ast.Assign):
        if len(self.where) == 1 and _literal(node.value):  # the constant itself is no mention
            self.claimed.add(id(node.value))
        self.generic_visit(node)

    def _add(self, var: str, kind: str, node: ast.AST | None, help_: str = "") -> None:
        self.found.append((var, kind, ".".join(self.where[:1]) + (f":{self.where[-1]}" if len(self.where) > 1 else ""),
                           help_))
        if node is not None:
            self.claimed.add(id(node))

    def visit_Call(self, node: ast.Call):
        func = node.func
        fname = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if fname in _READ_CALLS and node.args and (var := self._var(node.args[0])):
            help_ = ""
            if fname == "_var" and len(node.args) > 2 and isinstance(node.args[2], ast.Constant):
                help_ = str(node.args[2].value)
            self._add(var, "read", node.args[0], help_)
        for kw in node.keywords:
            if kw.arg == "envvar" and (var := self._var(kw.value)):
                help_ = next((k.value.value for k in node.keywords if k.arg == "help"
                              and isinstance(k.value, ast.Constant)), "")
                self._add(var, "read", kw.value, str(help_))
            elif kw.arg and re.fullmatch(NAME.pattern, kw.arg):
                self._add(kw.arg, "set", None)
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript):
        if isinstance(node.value, ast.Attribute) and node.value.attr == "environ" and (var := self._var(node.slice)):
            self._add(var, "set" if isinstance(node.ctx, ast.Store) else "read", node.slice)
        self.generic_visit(node)

    def visit_Dict(self, node: ast.Dict):
        for k in node.keys:
            if k is not None and (var := self._var(k)):
                self._add(var, "set", k)
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant):
        if id(node) not in self.claimed and isinstance(node.value, str):
            for var in dict.fromkeys(NAME.findall(node.value)):
                self._add(var, "named", None)


def scan_python(src: Path) -> list[tuple[str, str, str, str]]:
    """(variable, read|set|named, module[:function], help) for every mention under ``src`` (the package)."""
    out = []
    paths = [p for p in sorted(src.rglob("*.py")) if "generated" not in p.parts]
    trees = [ast.parse(p.read_text(), str(p)) for p in paths]
    names = [".".join(p.relative_to(src.parent).with_suffix("").parts).removesuffix(".__init__") for p in paths]
    modules = {m: constants(t) for m, t in zip(names, trees)}
    for module, tree in zip(names, trees):
        scan = _Scan(module, modules[module], modules)
        scan.visit(tree)
        out.extend(scan.found)
    return out


def scan_text(root: Path) -> dict[str, list[str]]:
    """variable -> the non-Python files (relative to ``root``) that mention it."""
    out: dict[str, list[str]] = defaultdict(list)
    files = sorted({p for g in TEXT_GLOBS for p in root.glob(g) if p.is_file()})
    for path in files:
        for var in dict.fromkeys(NAME.findall(path.read_text(errors="replace"))):
            out[var].append(path.relative_to(root).as_posix())
    return out


def render(root: Path) -> str:
    import synclab

    src = Path(synclab.__file__).resolve().parent
    mentions = scan_python(src)
    text = scan_text(root)
    by_var: dict[str, dict[str, Any]] = defaultdict(lambda: {"read": [], "set": [], "named": [], "help": ""})
    for var, kind, where, help_ in mentions:
        entry = by_var[var]
        if where not in entry[kind]:
            entry[kind].append(where)
        entry["help"] = entry["help"] or " ".join(help_.split())
    for var in text:
        by_var[var]  # noqa: B018  (a variable only the compose files or scripts know still gets a row)
    lines = ["# Environment variables", "",
             "Generated by `synclab docs` from the code (an AST scan of `src/synclab` and a text scan of the "
             "compose files, the container image and `scripts/`); do not edit by hand. *Read by*: the module and "
             "function that read the variable (`os.environ`, an option's `envvar`, the container settings of "
             "`synclab.config.settings`); *set by*: code that hands it to a child process; *mentioned in*: "
             "files outside the package.", "",
             f"{len(by_var)} variables.", "",
             "| variable | description | read by | set by | mentioned in |", "|---|---|---|---|---|"]

    def cell(items: list[str]) -> str:
        return "<br>".join(f"`{x}`" for x in items) or "—"

    for var in sorted(by_var):
        e = by_var[var]
        desc = e["help"].replace("|", "\\|") or ("named in " + ", ".join(f"`{x}`" for x in e["named"][:3])
                                                if e["named"] else "—")
        lines.append(f"| `{var}` | {desc} | {cell(e['read'])} | {cell(e['set'])} | {cell(text.get(var, []))} |")
    return "\n".join(lines) + "\n"
