"""The unit tests of the reproduction runner run it in temporary folders, never needing the checkout's git state.

There :func:`synclab.reproduce.runner.code_version` would start ``git describe``; unit tests start no processes
(tests/unit/conftest.py), so every ``synclab.reproduce`` module that uses it gets the answer it gives outside a
checkout (the package version). No unit test checks that stamp; the real lookup, against a real git repository,
is tested in tests/integration/reproduce/test_code_version.py.
"""

import importlib
import pkgutil

import pytest

import synclab.reproduce
import synclab.reproduce.runner
from synclab import __version__


@pytest.fixture(autouse=True)
def no_git_describe(monkeypatch):
    real = synclab.reproduce.runner.code_version
    for info in pkgutil.iter_modules(synclab.reproduce.__path__, "synclab.reproduce."):
        module = importlib.import_module(info.name)
        if getattr(module, "code_version", None) is real:
            monkeypatch.setattr(module, "code_version", lambda root: f"synclab {__version__}")
