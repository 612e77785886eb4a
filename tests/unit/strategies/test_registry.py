"""The strategy registry: discovery inside the package, entry points, modules by path; and that nothing
outside ``synclab/strategies`` knows a strategy by its name (DESIGN "The layers": a strategy is one module)."""

from __future__ import annotations

import ast
import sys
import textwrap
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from synclab.config import SpecError, parse_spec
from synclab.strategies import registry
from synclab.strategies.base import Strategy
from synclab.strategies.simmodel import OwnModel, ParameterServer, RingAllReduce, SimModel

SRC = Path(__file__).parents[3] / "src" / "synclab"
BUILT_IN = {"local", "ps", "wfbp", "synceasgd", "mgwfbp", "mgwfbp-opt", "p3", "p3-slicing", "ssdsgd", "asgd",
            "stanza"}

# A strategy name as a string outside strategies/ is a defect: a comparison with one anywhere (dispatch on a
# name), any other use except where the string names something else:
# - the papers' planner commands (`synclab plan mgwfbp`, `synclab plan stanza`) are command names;
COMMAND_NAMES = {("cli/__init__.py", "mgwfbp"), ("cli/__init__.py", "stanza"), ("cli/plan.py", "mgwfbp")}
# - modules that define experiments to run (which strategies a calibration runs, like a spec file);
EXPERIMENTS = ("calibrate/",)
# - words with other meanings: "ps" is the parameter-server role and service (node "ps0", role "ps", the
#   "ps" stream), "local" an ordinary word (iproute2's "local" address, the local launcher): allowed
#   except on a line that speaks of a strategy.
OTHER_MEANINGS = {"ps", "local"}


def _compared(tree) -> set[int]:
    """ids of the string constants compared with something (==, !=, in, not in; alone or in a tuple/list/set)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                for sub in ast.walk(side):
                    if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                        out.add(id(sub))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("startswith", "endswith"):
            out.update(id(sub) for a in node.args for sub in ast.walk(a) if isinstance(sub, ast.Constant))
    return out


@pytest.fixture
def clean_registry(monkeypatch):
    """The registry as discovered, restored after the test (plugins the test adds do not leak)."""
    registry.names()
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(registry, "_ORIGIN", dict(registry._ORIGIN))
    return registry


def test_every_module_of_the_package_is_discovered():
    assert BUILT_IN <= set(registry.names())
    modules = {p.stem for p in (SRC / "strategies").glob("*.py") if "@register" in p.read_text()}
    found = {registry.get(n).__module__.rsplit(".", 1)[1] for n in registry.names()
             if registry.get(n).__module__.startswith("synclab.strategies.")}
    assert modules <= found
    assert registry.origin("wfbp") == "synclab"


def test_a_module_dropped_into_the_package_is_found_without_an_import_line(tmp_path, monkeypatch, clean_registry):
    import synclab.strategies as package

    (tmp_path / "dropped_in_test.py").write_text(PLUGIN.format(cls="Dropped", name="dropped-in-test"))
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(tmp_path)])
    monkeypatch.setattr(registry, "_discovered", False)
    monkeypatch.delitem(sys.modules, "synclab.strategies.dropped_in_test", raising=False)
    assert "dropped-in-test" in registry.names()
    assert registry.get("dropped-in-test").__module__ == "synclab.strategies.dropped_in_test"
    sys.modules.pop("synclab.strategies.dropped_in_test", None)


def test_the_package_init_lists_no_strategy_module():
    text = (SRC / "strategies" / "__init__.py").read_text()
    tree = ast.parse(text)
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    assert imported <= {"registry", "Strategy", "WorkerContext"}


def test_declared_properties():
    own_pace = {n for n in registry.names() if not registry.get(n).lockstep}
    assert {"asgd", "ssdsgd"} <= own_pace and not own_pace & {"ps", "p3", "wfbp", "mgwfbp", "local", "stanza"}
    for name in BUILT_IN:
        cls = registry.get(name)
        assert isinstance(cls.sim_model, SimModel), name
        assert cls.sim_model.mirrors_ranks == isinstance(cls.sim_model, RingAllReduce), name
        assert cls.needs_ps == isinstance(cls.sim_model, ParameterServer), name


def test_no_strategy_name_outside_the_strategies_package():
    names = set(registry.names())
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith(("strategies/", "examples/")) or "/generated/" in rel:  # examples: plugins, docs
            continue
        lines = path.read_text().splitlines()
        tree = ast.parse("\n".join(lines))
        compared = _compared(tree)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names):
                continue
            line = lines[node.lineno - 1]
            if node.value in OTHER_MEANINGS and "strateg" not in line.lower():
                continue
            if id(node) not in compared and ((rel, node.value) in COMMAND_NAMES or rel.startswith(EXPERIMENTS)):
                continue
            found.append(f"{rel}:{node.lineno}: {line.strip()}")
    assert not found, "strategy names outside synclab/strategies (declare a property on the class instead):\n" + \
        "\n".join(found)


def test_the_name_check_catches_dispatch_on_a_name(tmp_path, monkeypatch):
    pkg = tmp_path / "synclab"
    (pkg / "calibrate").mkdir(parents=True)
    (pkg / "calibrate" / "x.py").write_text('def f(s):\n    return s == "wfbp"\n')
    monkeypatch.setattr(sys.modules[__name__], "SRC", pkg)
    with pytest.raises(AssertionError, match='calibrate/x.py:2: return s == "wfbp"'):
        test_no_strategy_name_outside_the_strategies_package()
    (pkg / "calibrate" / "x.py").write_text('RUNS = ["wfbp", "mgwfbp"]\n')  # an experiment's list: allowed
    test_no_strategy_name_outside_the_strategies_package()
    (pkg / "sim.py").write_text('RING = ("wfbp", "synceasgd")\n')
    with pytest.raises(AssertionError, match="sim.py:1"):
        test_no_strategy_name_outside_the_strategies_package()


def test_no_name_tables_in_the_simulator():
    text = "\n".join(p.read_text() for p in (SRC / "sim").glob("*.py"))
    for table in ("RING_STRATEGIES", "PS_STRATEGIES", "OTHER_STRATEGIES", "UNSUPPORTED"):
        assert table not in text


PLUGIN = '''
from synclab.strategies.registry import register
from synclab.strategies.simmodel import RingAllReduce
from synclab.strategies.wfbp import Wfbp


@register
class {cls}(Wfbp):
    name = "{name}"
    sim_model = RingAllReduce(groups="whole-model")
'''


def test_a_module_by_path_registers_through_the_spec(tmp_path, clean_registry):
    f = tmp_path / "mine.py"
    f.write_text(PLUGIN.format(cls="Mine", name="by-path-test"))
    spec = parse_spec({"strategy": {"name": "by-path-test", "module": str(f)}})
    assert spec.strategy.module == str(f.resolve())
    assert registry.get("by-path-test").__name__ == "Mine"
    assert registry.origin("by-path-test") == str(f.resolve())
    assert parse_spec(spec.to_dict()).strategy.name == "by-path-test"  # the nodes re-read the resolved spec
    assert "module" not in parse_spec({}).to_dict()["strategy"]


def test_a_bad_module_path_is_named(tmp_path, clean_registry):
    with pytest.raises(SpecError, match="strategy.module.*missing.py.*is not a file"):
        parse_spec({"strategy": {"name": "ps", "module": str(tmp_path / "missing.py")}})
    empty = tmp_path / "empty.py"
    empty.write_text("X = 1\n")
    with pytest.raises(SpecError, match="registered no strategy"):
        parse_spec({"strategy": {"name": "ps", "module": str(empty)}})
    broken = tmp_path / "broken.py"
    broken.write_text("import not_a_module_anywhere\n")
    with pytest.raises(SpecError, match="broken.py.*failed to import.*not_a_module_anywhere"):
        parse_spec({"strategy": {"name": "ps", "module": str(broken)}})


def _entry_points(tmp_path, monkeypatch, source: str, ep_name: str, value: str):
    (tmp_path / "ep_plugin_test.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("ep_plugin_test", None)
    ep = EntryPoint(name=ep_name, value=value, group=registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr("importlib.metadata.entry_points",
                        lambda group=None: [ep] if group == registry.ENTRY_POINT_GROUP else [])


def test_entry_points_of_the_group_are_registered(tmp_path, monkeypatch, clean_registry):
    source = PLUGIN.replace("@register\n", "").format(cls="Plugged", name="ep-test")
    _entry_points(tmp_path, monkeypatch, source, "ep-test", "ep_plugin_test:Plugged")
    registry._load_entry_points()
    assert registry.get("ep-test").__name__ == "Plugged"
    assert registry.origin("ep-test").startswith("entry point ep-test = ep_plugin_test:Plugged")


def test_a_wrong_entry_point_is_refused_by_name(tmp_path, monkeypatch, clean_registry):
    source = PLUGIN.replace("@register\n", "").format(cls="Plugged", name="ep-test")
    _entry_points(tmp_path, monkeypatch, source, "other-name", "ep_plugin_test:Plugged")
    with pytest.raises(registry.StrategyLoadError, match="other-name.*must be the class's name 'ep-test'"):
        registry._load_entry_points()
    _entry_points(tmp_path, monkeypatch, "X = 1\n", "x", "ep_plugin_test:X")
    with pytest.raises(registry.StrategyLoadError, match="not a Strategy subclass"):
        registry._load_entry_points()


def test_two_classes_under_one_name_are_an_error(clean_registry):
    class A(Strategy):
        name = "dup-test"

        def on_gradient(self, iteration, index, grad):
            pass

    class B(A):
        pass

    registry.register(A)
    with pytest.raises(ValueError, match="registered twice"):
        registry.register(B)


def test_own_model_declarations_are_checked():
    with pytest.raises(ValueError, match="factory"):
        OwnModel(factory=None)
    with pytest.raises(ValueError, match="planner"):
        RingAllReduce(groups="merged")
    with pytest.raises(ValueError, match="schedule"):
        ParameterServer(client="scheduled-pull")
    assert OwnModel(factory=lambda api: None, mirror=False).mirrors_ranks is False
