"""The package's layers, as data, and a walk over every import that checks them.

``docs/explanation/architecture.md`` states the order; this table is the same
order (bottom = 1). A module imports only from its own layer or a lower one,
and no group of modules imports itself in a circle. Every import counts: at
module level, inside functions and under ``TYPE_CHECKING``, since each of them
is a dependency a reader has to follow.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"

# Module (or package) prefix -> layer. The longest matching prefix wins.
LAYERS: dict[str, int] = {
    # 1: vocabulary every other layer speaks; imports nothing above it
    "synclab": 1,  # the package's __init__ (version) and anything not named below fails the test
    "synclab.core": 1,
    "synclab.units": 1,
    "synclab.fileio": 1,
    "synclab.hostlock": 1,  # the host-wide emulation lock (standard library only)
    "synclab.linkprofile": 1,
    "synclab.resources": 1,  # where the packaged data files are (standard library only)
    "synclab.wire": 1,
    "synclab.plans": 1,
    "synclab.models": 1,
    # 2: moving bytes and counting them
    "synclab.transport": 2,
    "synclab.ps": 2,
    "synclab.collective": 2,
    "synclab.data": 2,
    "synclab.metrics": 2,
    "synclab.report": 2,
    # 3: one worker's computation
    "synclab.compute": 3,
    # 4: one module per strategy
    "synclab.strategies": 4,
    # 5: the spec, the emulated network, the simulator, the dashboards
    "synclab.config": 5,
    "synclab.netem": 5,
    "synclab.sim": 5,
    "synclab.dashboards": 5,
    # 6: processes: coordinator, worker, PS, launchers, container entrypoint
    "synclab.roles": 6,
    # 7: tools built from whole runs
    "synclab.reproduce": 7,
    "synclab.load": 7,
    "synclab.tune": 7,  # synclab tune: searches on the simulator, confirms with synclab run
    "synclab.stragglers": 7,  # synclab stragglers: one slow worker against each strategy, simulated
    "synclab.chaos": 7,  # fault injection into whole runs (synclab chaos) and the fault matrix page
    "synclab.validate": 7,
    "synclab.docsgen": 7,  # the generated documents, rendered from the layers below (synclab docs writes them)
    "synclab.calibrate": 7,
    # 8: the command line
    "synclab.cli": 8,
    "synclab.__main__": 8,
}

# Packages whose every module must be named by a prefix other than the bare package.
NAMED_PACKAGES = {p.name for p in (SRC / "synclab").iterdir() if p.is_dir() and (p / "__init__.py").exists()}


def _modules() -> dict[str, Path]:
    mods = {}
    for f in (SRC / "synclab").rglob("*.py"):
        parts = list(f.relative_to(SRC).with_suffix("").parts)
        if "generated" in parts:  # protoc output: imports only grpc/protobuf and itself
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = f
    return mods


def layer_of(module: str) -> int:
    name = module
    while name:
        if name in LAYERS:
            return LAYERS[name]
        name = name.rpartition(".")[0]
    raise KeyError(module)


def _imports(mods: dict[str, Path]) -> dict[str, set[tuple[str, int]]]:
    """Module -> {(imported synclab module, line)}: the nearest module an import names."""

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[tuple[str, int]]] = {}
    for m, f in mods.items():
        pkg = m if f.name == "__init__.py" else m.rpartition(".")[0]
        edges = set()
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([base] if base else []))
                targets = [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            for t in targets:
                if not t.startswith("synclab"):
                    continue
                r = resolve(t)
                if r and r != m:
                    edges.add((r, node.lineno))
        graph[m] = edges
    return graph


MODULES = _modules()
GRAPH = _imports(MODULES)


def test_every_module_has_a_layer():
    bare = [m for m in MODULES if m.count(".") >= 1 and m.split(".")[1] in NAMED_PACKAGES
            and f"synclab.{m.split('.')[1]}" not in LAYERS]
    assert not bare, f"packages missing from LAYERS: {sorted(bare)}"
    top = [m for m in MODULES if m.count(".") == 1 and m.split(".")[1] not in NAMED_PACKAGES and m not in LAYERS]
    assert not top, f"top-level modules missing from LAYERS: {top}"


def test_no_import_goes_up_a_layer():
    upward = sorted(f"{MODULES[m].relative_to(SRC)}:{line}: {m} (layer {layer_of(m)}) imports {t} (layer {layer_of(t)})"
                    for m, edges in GRAPH.items() for t, line in edges
                    if layer_of(t) > layer_of(m) and not t.startswith(m + "."))
    assert not upward, "imports from a lower layer up to a higher one:\n" + "\n".join(upward)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
    return found


def test_no_import_cycles():
    # A package's __init__ re-exporting its own children is not a cycle of design, nor is a
    # child naming its parent package (Python imports the parent first either way).
    graph = {m: {t for t, _ in edges
                 if not (MODULES[m].name == "__init__.py" and t.startswith(m + ".")) and not m.startswith(t + ".")}
             for m, edges in GRAPH.items()}
    cycles = _cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_walk_sees_an_upward_import():
    """The checks above are only worth something if the walk finds imports at all, inside functions too."""
    assert any(t.startswith("synclab.roles") for t, _ in GRAPH["synclab.cli.run"])  # imported inside run()
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    assert layer_of("synclab.cli.run") > layer_of("synclab.roles.launcher") > layer_of("synclab.core")


def test_the_architecture_page_states_the_same_layers():
    """docs/explanation/architecture.md's table names, per layer, the packages this table puts there."""
    page = (SRC.parent / "docs" / "explanation" / "architecture.md").read_text()
    stated: dict[int, set[str]] = {}
    for row in re.finditer(r"^\| (\d) \| ([^|]+) \|", page, re.M):
        stated[int(row.group(1))] = set(re.findall(r"`([\w.]+)`", row.group(2)))
    here: dict[int, set[str]] = {}
    for prefix, layer in LAYERS.items():
        if prefix not in ("synclab", "synclab.__main__"):
            here.setdefault(layer, set()).add(prefix.removeprefix("synclab."))
    assert stated == here


@pytest.mark.parametrize("module", ["synclab.wire.generated.synclab_pb2"])
def test_generated_code_is_left_out(module):
    assert module not in MODULES
