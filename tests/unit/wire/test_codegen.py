"""The checked-in generated gRPC code must match protos/ (regenerate: python -m synclab.wire.codegen)."""

import pytest

from synclab.wire import codegen


def test_generated_code_is_fresh(tmp_path):
    pytest.importorskip("grpc_tools")
    fresh = {p.name: p.read_text() for p in codegen.generate(tmp_path)}
    for name, text in fresh.items():
        checked_in = (codegen.GENERATED / name).read_text()
        assert checked_in == text, f"{name} is stale: run `python -m synclab.wire.codegen`"
