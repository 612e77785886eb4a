"""The wire: generated gRPC code, tensor framing, channel options and auth.

Everything that knows the protobuf message layout lives here, so the transport
and the roles deal in tensors and small typed objects.
"""

from synclab.wire.generated import synclab_pb2 as pb
from synclab.wire.generated import synclab_pb2_grpc as rpc

__all__ = ["pb", "rpc"]
