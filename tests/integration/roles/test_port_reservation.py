"""A node's ports stay its own from the moment they are chosen until its servers bind them."""


from prometheus_client import CollectorRegistry

from synclab.metrics.exporter import Exporter
from synclab.roles.bootstrap import reserve_port
from synclab.wire.channels import bind, make_server


def test_grpc_binds_the_reserved_port_while_it_is_held():
    hold = reserve_port("127.0.0.1")
    port = hold.getsockname()[1]
    server = make_server("token", 4, 1 << 20)
    try:
        assert bind(server, f"127.0.0.1:{port}", tls=None) == port
        server.start()
    finally:
        hold.close()
        server.stop(None)


def test_the_metrics_exporter_binds_the_reserved_port_while_it_is_held():
    hold = reserve_port("127.0.0.1")
    port = hold.getsockname()[1]
    try:
        with Exporter(CollectorRegistry(), "127.0.0.1", port) as exporter:
            assert exporter.port == port
    finally:
        hold.close()
