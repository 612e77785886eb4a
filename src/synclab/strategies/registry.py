"""Strategies by name, discovered rather than listed.

Three sources, loaded on first use:

1. every module of the :mod:`synclab.strategies` package (a new module is found by being there; its
   class registers itself with :func:`register`);
2. entry points of the group ``synclab.strategies`` in the installed distributions, each naming a
   :class:`~synclab.strategies.base.Strategy` subclass (``name = "pkg.module:Class"``; the entry point's
   name must be the class's ``name``), the way pytest and Flower find plugins;
3. a module loaded by path (:func:`load_path`, the spec key ``strategy.module``) for quick experiments.

A name registered twice by different classes is an error naming both, never a silent override.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import sys
from pathlib import Path

from synclab.strategies.base import Strategy

ENTRY_POINT_GROUP = "synclab.strategies"
DEFAULT_STRATEGY = "ps"  # a spec without strategy.name runs the P3 §4.1 KVStore baseline
_REGISTRY: dict[str, type[Strategy]] = {}
_ORIGIN: dict[str, str] = {}    # name -> where it came from ("synclab", "entry point X = Y (dist)", a path)
_FROM_PATH: dict[str, list[type[Strategy]]] = {}  # module name of a file loaded by path -> its strategies
_discovered = False


class StrategyLoadError(RuntimeError):
    """A plugin or a strategy module could not be loaded (names which and why)."""


def register(cls: type[Strategy]) -> type[Strategy]:
    """Class decorator: make ``cls`` known by ``cls.name``."""
    if not (isinstance(cls, type) and issubclass(cls, Strategy)):
        raise TypeError(f"{cls!r} is not a subclass of synclab.strategies.base.Strategy")
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise TypeError(f"strategy class {cls.__qualname__} has no 'name'")
    old = _REGISTRY.get(name)
    if old is not None and old is not cls and _qualname(old) != _qualname(cls):
        raise ValueError(f"strategy {name!r} is registered twice: {_qualname(old)} and {_qualname(cls)}")
    _REGISTRY[name] = cls
    _ORIGIN.setdefault(name, "synclab" if cls.__module__.startswith("synclab.") else cls.__module__)
    return cls


def _qualname(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _discover() -> None:
    global _discovered
    if _discovered:
        return
    _discovered = True
    import synclab.strategies as package

    for info in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{info.name}")
    _load_entry_points()


def _load_entry_points() -> None:
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        where = f"entry point {ep.name} = {ep.value}" + (f" ({ep.dist.name})" if ep.dist is not None else "")
        try:
            cls = ep.load()
        except Exception as e:  # a broken plugin is named, not silently skipped
            raise StrategyLoadError(f"cannot load strategy plugin {where}: {type(e).__name__}: {e} "
                                    f"(fix or uninstall that package)") from e
        if not (isinstance(cls, type) and issubclass(cls, Strategy)):
            raise StrategyLoadError(f"strategy plugin {where} is not a Strategy subclass")
        if cls.name != ep.name:
            raise StrategyLoadError(f"strategy plugin {where}: the entry point's name must be the class's "
                                    f"name {cls.name!r}")
        register(cls)
        _ORIGIN[cls.name] = where


def load_path(path: str | Path) -> list[str]:
    """Import the Python file ``path`` (the spec's ``strategy.module``) so its strategies register; returns
    the names it registered. :class:`StrategyLoadError` names the file and the reason."""
    _discover()
    p = Path(path).expanduser().resolve()
    if not p.is_file():
        raise StrategyLoadError(f"strategy module {str(path)!r} is not a file")
    mod_name = f"synclab_strategy_file_{abs(hash(str(p)))}"
    if mod_name in _FROM_PATH:  # imported before: its classes (registered again if the registry was reset)
        for cls in _FROM_PATH[mod_name]:
            register(cls)
        return sorted(c.name for c in _FROM_PATH[mod_name])
    before = set(_REGISTRY)
    spec = importlib.util.spec_from_file_location(mod_name, p)
    if spec is None or spec.loader is None:
        raise StrategyLoadError(f"strategy module {str(p)!r} cannot be imported (not a .py file?)")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        del sys.modules[mod_name]
        raise StrategyLoadError(f"strategy module {str(p)!r} failed to import: {type(e).__name__}: {e}") from e
    added = sorted(set(_REGISTRY) - before)
    if not added:
        raise StrategyLoadError(f"strategy module {str(p)!r} registered no strategy (decorate the class with "
                                f"@synclab.strategies.registry.register)")
    for name in added:
        _ORIGIN[name] = str(p)
    _FROM_PATH[mod_name] = [_REGISTRY[name] for name in added]
    return added


def get(name: str) -> type[Strategy]:
    _discover()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown strategy {name!r}; known: {', '.join(sorted(_REGISTRY))}") from None


def names() -> list[str]:
    _discover()
    return sorted(_REGISTRY)


def origin(name: str) -> str:
    """Where ``name`` came from: ``synclab``, an entry point, or a file path."""
    get(name)
    return _ORIGIN.get(name, _REGISTRY[name].__module__)
