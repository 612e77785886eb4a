"""`synclab shape` against a coordinator served over gRPC on loopback: exit 2 for a change the backend cannot make,
exit 1 when a node fails, 0 once all applied."""


import pytest
from typer.testing import CliRunner

# nodes_fixture is the `nodes` fixture: imported, pytest finds it here
from support.coordinator import nodes_fixture, service  # noqa: F401
from synclab.cli import app
from synclab.netem.profile import load_profile
from synclab.wire import rpc
from synclab.wire.channels import make_server

TOKEN = "shape-token"


@pytest.fixture
def live_coordinator(tmp_path):
    svc = service(tmp_path, None, backend="tbf", profile=load_profile("1gbit"))
    server = make_server(TOKEN, max_workers=8)
    rpc.add_CoordinatorServicer_to_server(svc, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield svc, f"127.0.0.1:{port}"
    server.stop(0)


def test_cli_exits_2_when_the_backend_cannot_make_the_change(live_coordinator):
    svc, address = live_coordinator
    result = CliRunner().invoke(app, ["shape", "--profile", "wan-20ms", "--coordinator", address, "--token", TOKEN])
    assert result.exit_code == 2, result.output
    assert "cannot change delay" in " ".join(result.output.split())
    assert svc.job.commands == {}


def test_cli_exits_1_when_a_node_fails_and_0_when_all_apply(live_coordinator, nodes):
    svc, address = live_coordinator
    fail = {"ps0": True}
    nodes(svc, outcome=lambda node, cmd: "boom" if fail.get(node) else None)
    args = ["shape", "--profile", "4gbit", "--coordinator", address, "--token", TOKEN]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1 and "ps0: boom" in result.output
    fail.clear()
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0 and "reshaped ps0, worker0" in result.output
