"""Load tests with Locust: SyncLab's own gRPC wire driven past a node's capacity.

:mod:`synclab.load.targets` starts a standalone PS shard or coordinator on
loopback (the real :class:`~synclab.ps.shard.Shard` behind the real
:class:`~synclab.transport.node.NodeTransport`, the real coordinator service);
:mod:`synclab.load.locustfile` holds the Locust users that speak the wire to
them; :mod:`synclab.load.run` runs Locust headless against a target, samples the
target's memory and checks, once the users have stopped, that every push the
shard applied is in its values exactly once.
"""
