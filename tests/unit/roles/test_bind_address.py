"""Every listener of a node binds its own address, never wider: the choice of address (issue: bind only where needed)."""

import inspect

import pytest

from synclab.metrics import exporter
from synclab.roles.coordinator import listen_host
from synclab.roles.launcher import LocalCluster, node_args


@pytest.mark.parametrize("listen,host", [("127.0.0.1:50051", "127.0.0.1"), ("10.0.0.7:0", "10.0.0.7"),
                                         ("[::1]:50051", "::1"), ("0.0.0.0:50051", "0.0.0.0")])
def test_the_coordinators_metrics_bind_where_its_grpc_server_listens(listen, host):
    assert listen_host(listen) == host


def test_the_metrics_exporter_defaults_to_loopback():
    for fn in (exporter.Exporter.__init__, exporter.serve):
        assert inspect.signature(fn).parameters["host"].default == "127.0.0.1", fn


def test_a_local_run_gives_every_node_the_loopback_address():
    assert LocalCluster.__dataclass_fields__["host"].default == "127.0.0.1"
    coord = node_args("coordinator", "coordinator", address="127.0.0.1", coordinator="127.0.0.1:4000",
                      spec_path="s.yaml", run_dir="r")
    assert coord[coord.index("--listen") + 1] == "127.0.0.1:4000"
    worker = node_args("worker", "worker0", address="127.0.0.1", coordinator="127.0.0.1:4000", spec_path="s.yaml",
                       run_dir="r")
    assert worker[worker.index("--host") + 1] == "127.0.0.1"
