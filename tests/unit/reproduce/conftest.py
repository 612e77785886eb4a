"""The unit tests of the reproduction runner and the re-judge never ask git which code they ran.

:func:`synclab.reproduce.runner.code_version` and :func:`synclab.reproduce.rejudge.judge_version` stamp records
with ``git describe`` / ``git rev-parse`` of the checkout; unit tests start no processes (tests/unit/conftest.py),
so every ``synclab.reproduce`` module that uses them gets the answer they give outside a checkout (the package
version). No unit test checks that stamp; the real lookup, against a real git repository, is tested in
tests/integration/reproduce/test_code_version.py.
"""

import importlib
import pkgutil

import pytest

import synclab.reproduce
from synclab import __version__

# function name -> what it answers outside a git checkout
OUTSIDE_A_CHECKOUT = {
    "code_version": lambda root: f"synclab {__version__}",
    "judge_version": lambda: f"synclab {__version__}",
}


@pytest.fixture(autouse=True)
def no_git_lookups(monkeypatch):
    modules = [importlib.import_module(m.name)
               for m in pkgutil.iter_modules(synclab.reproduce.__path__, "synclab.reproduce.")]
    for name, answer in OUTSIDE_A_CHECKOUT.items():
        real = {getattr(m, name) for m in modules if callable(getattr(m, name, None))}
        for module in modules:
            if getattr(module, name, None) in real:
                monkeypatch.setattr(module, name, answer)
