from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class FrameKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FRAME_KIND_UNSPECIFIED: _ClassVar[FrameKind]
    GRADIENT: _ClassVar[FrameKind]
    PARAMS: _ClassVar[FrameKind]
    PULL_REQUEST: _ClassVar[FrameKind]
    NOTIFY: _ClassVar[FrameKind]
    COLLECTIVE: _ClassVar[FrameKind]
    ACTIVATION: _ClassVar[FrameKind]
    ACTIVATION_GRAD: _ClassVar[FrameKind]

class DType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DTYPE_UNSPECIFIED: _ClassVar[DType]
    FLOAT32: _ClassVar[DType]
    FLOAT16: _ClassVar[DType]
    BFLOAT16: _ClassVar[DType]
    FLOAT64: _ClassVar[DType]
    INT64: _ClassVar[DType]
    INT32: _ClassVar[DType]
    UINT8: _ClassVar[DType]

class Role(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROLE_UNSPECIFIED: _ClassVar[Role]
    COORDINATOR: _ClassVar[Role]
    WORKER: _ClassVar[Role]
    PS: _ClassVar[Role]
FRAME_KIND_UNSPECIFIED: FrameKind
GRADIENT: FrameKind
PARAMS: FrameKind
PULL_REQUEST: FrameKind
NOTIFY: FrameKind
COLLECTIVE: FrameKind
ACTIVATION: FrameKind
ACTIVATION_GRAD: FrameKind
DTYPE_UNSPECIFIED: DType
FLOAT32: DType
FLOAT16: DType
BFLOAT16: DType
FLOAT64: DType
INT64: DType
INT32: DType
UINT8: DType
ROLE_UNSPECIFIED: Role
COORDINATOR: Role
WORKER: Role
PS: Role

class FrameHeader(_message.Message):
    __slots__ = ("kind", "key", "slice", "iteration", "priority", "offset", "total_bytes", "dtype", "shape", "sender", "tag")
    KIND_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    SLICE_FIELD_NUMBER: _ClassVar[int]
    ITERATION_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    SENDER_FIELD_NUMBER: _ClassVar[int]
    TAG_FIELD_NUMBER: _ClassVar[int]
    kind: FrameKind
    key: str
    slice: int
    iteration: int
    priority: int
    offset: int
    total_bytes: int
    dtype: DType
    shape: _containers.RepeatedScalarFieldContainer[int]
    sender: str
    tag: int
    def __init__(self, kind: _Optional[_Union[FrameKind, str]] = ..., key: _Optional[str] = ..., slice: _Optional[int] = ..., iteration: _Optional[int] = ..., priority: _Optional[int] = ..., offset: _Optional[int] = ..., total_bytes: _Optional[int] = ..., dtype: _Optional[_Union[DType, str]] = ..., shape: _Optional[_Iterable[int]] = ..., sender: _Optional[str] = ..., tag: _Optional[int] = ...) -> None: ...

class Frame(_message.Message):
    __slots__ = ("header", "payload")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    header: FrameHeader
    payload: bytes
    def __init__(self, header: _Optional[_Union[FrameHeader, _Mapping]] = ..., payload: _Optional[bytes] = ...) -> None: ...

class PullRequest(_message.Message):
    __slots__ = ("key", "slice")
    KEY_FIELD_NUMBER: _ClassVar[int]
    SLICE_FIELD_NUMBER: _ClassVar[int]
    key: str
    slice: int
    def __init__(self, key: _Optional[str] = ..., slice: _Optional[int] = ...) -> None: ...

class NodeInfo(_message.Message):
    __slots__ = ("role", "index", "name", "address", "metrics_url", "capabilities")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    METRICS_URL_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    role: Role
    index: int
    name: str
    address: str
    metrics_url: str
    capabilities: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, role: _Optional[_Union[Role, str]] = ..., index: _Optional[int] = ..., name: _Optional[str] = ..., address: _Optional[str] = ..., metrics_url: _Optional[str] = ..., capabilities: _Optional[_Iterable[str]] = ...) -> None: ...

class RegisterRequest(_message.Message):
    __slots__ = ("role", "requested_index", "address", "metrics_url", "capabilities", "placement")
    class PlacementEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ROLE_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_INDEX_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    METRICS_URL_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    role: Role
    requested_index: int
    address: str
    metrics_url: str
    capabilities: _containers.RepeatedScalarFieldContainer[str]
    placement: _containers.ScalarMap[str, str]
    def __init__(self, role: _Optional[_Union[Role, str]] = ..., requested_index: _Optional[int] = ..., address: _Optional[str] = ..., metrics_url: _Optional[str] = ..., capabilities: _Optional[_Iterable[str]] = ..., placement: _Optional[_Mapping[str, str]] = ...) -> None: ...

class RegisterReply(_message.Message):
    __slots__ = ("node", "spec_json", "run_dir", "job_id", "session")
    NODE_FIELD_NUMBER: _ClassVar[int]
    SPEC_JSON_FIELD_NUMBER: _ClassVar[int]
    RUN_DIR_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    node: NodeInfo
    spec_json: str
    run_dir: str
    job_id: str
    session: str
    def __init__(self, node: _Optional[_Union[NodeInfo, _Mapping]] = ..., spec_json: _Optional[str] = ..., run_dir: _Optional[str] = ..., job_id: _Optional[str] = ..., session: _Optional[str] = ...) -> None: ...

class ClusterRequest(_message.Message):
    __slots__ = ("node",)
    NODE_FIELD_NUMBER: _ClassVar[int]
    node: str
    def __init__(self, node: _Optional[str] = ...) -> None: ...

class ClusterReply(_message.Message):
    __slots__ = ("nodes",)
    NODES_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[NodeInfo]
    def __init__(self, nodes: _Optional[_Iterable[_Union[NodeInfo, _Mapping]]] = ...) -> None: ...

class PlanRequest(_message.Message):
    __slots__ = ("node",)
    NODE_FIELD_NUMBER: _ClassVar[int]
    node: str
    def __init__(self, node: _Optional[str] = ...) -> None: ...

class PlanReply(_message.Message):
    __slots__ = ("plan_json",)
    PLAN_JSON_FIELD_NUMBER: _ClassVar[int]
    plan_json: str
    def __init__(self, plan_json: _Optional[str] = ...) -> None: ...

class PublishPlanRequest(_message.Message):
    __slots__ = ("node", "plan_json", "session")
    NODE_FIELD_NUMBER: _ClassVar[int]
    PLAN_JSON_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    node: str
    plan_json: str
    session: str
    def __init__(self, node: _Optional[str] = ..., plan_json: _Optional[str] = ..., session: _Optional[str] = ...) -> None: ...

class BarrierRequest(_message.Message):
    __slots__ = ("name", "node", "participants", "session")
    NAME_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    PARTICIPANTS_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    name: str
    node: str
    participants: int
    session: str
    def __init__(self, name: _Optional[str] = ..., node: _Optional[str] = ..., participants: _Optional[int] = ..., session: _Optional[str] = ...) -> None: ...

class BarrierReply(_message.Message):
    __slots__ = ("arrived",)
    ARRIVED_FIELD_NUMBER: _ClassVar[int]
    arrived: int
    def __init__(self, arrived: _Optional[int] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("node", "iteration", "results", "session")
    NODE_FIELD_NUMBER: _ClassVar[int]
    ITERATION_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    node: str
    iteration: int
    results: _containers.RepeatedCompositeFieldContainer[CommandResult]
    session: str
    def __init__(self, node: _Optional[str] = ..., iteration: _Optional[int] = ..., results: _Optional[_Iterable[_Union[CommandResult, _Mapping]]] = ..., session: _Optional[str] = ...) -> None: ...

class CommandResult(_message.Message):
    __slots__ = ("id", "ok", "message")
    ID_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    id: str
    ok: bool
    message: str
    def __init__(self, id: _Optional[str] = ..., ok: _Optional[bool] = ..., message: _Optional[str] = ...) -> None: ...

class HeartbeatReply(_message.Message):
    __slots__ = ("stop", "reason", "commands")
    STOP_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    COMMANDS_FIELD_NUMBER: _ClassVar[int]
    stop: bool
    reason: str
    commands: _containers.RepeatedCompositeFieldContainer[ControlCommand]
    def __init__(self, stop: _Optional[bool] = ..., reason: _Optional[str] = ..., commands: _Optional[_Iterable[_Union[ControlCommand, _Mapping]]] = ...) -> None: ...

class IterationReport(_message.Message):
    __slots__ = ("node", "rank", "iteration", "start_s", "iteration_s", "compute_s", "comm_wait_s", "loss", "samples", "bytes_sent", "bytes_received", "params_checksum", "comm_span_s", "schedule_error_s", "session")
    NODE_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    ITERATION_FIELD_NUMBER: _ClassVar[int]
    START_S_FIELD_NUMBER: _ClassVar[int]
    ITERATION_S_FIELD_NUMBER: _ClassVar[int]
    COMPUTE_S_FIELD_NUMBER: _ClassVar[int]
    COMM_WAIT_S_FIELD_NUMBER: _ClassVar[int]
    LOSS_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_FIELD_NUMBER: _ClassVar[int]
    BYTES_SENT_FIELD_NUMBER: _ClassVar[int]
    BYTES_RECEIVED_FIELD_NUMBER: _ClassVar[int]
    PARAMS_CHECKSUM_FIELD_NUMBER: _ClassVar[int]
    COMM_SPAN_S_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_ERROR_S_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    node: str
    rank: int
    iteration: int
    start_s: float
    iteration_s: float
    compute_s: float
    comm_wait_s: float
    loss: float
    samples: int
    bytes_sent: int
    bytes_received: int
    params_checksum: float
    comm_span_s: float
    schedule_error_s: float
    session: str
    def __init__(self, node: _Optional[str] = ..., rank: _Optional[int] = ..., iteration: _Optional[int] = ..., start_s: _Optional[float] = ..., iteration_s: _Optional[float] = ..., compute_s: _Optional[float] = ..., comm_wait_s: _Optional[float] = ..., loss: _Optional[float] = ..., samples: _Optional[int] = ..., bytes_sent: _Optional[int] = ..., bytes_received: _Optional[int] = ..., params_checksum: _Optional[float] = ..., comm_span_s: _Optional[float] = ..., schedule_error_s: _Optional[float] = ..., session: _Optional[str] = ...) -> None: ...

class DoneRequest(_message.Message):
    __slots__ = ("node", "ok", "message", "bytes_sent", "bytes_received", "session")
    class BytesSentEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class BytesReceivedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    NODE_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    BYTES_SENT_FIELD_NUMBER: _ClassVar[int]
    BYTES_RECEIVED_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    node: str
    ok: bool
    message: str
    bytes_sent: _containers.ScalarMap[str, int]
    bytes_received: _containers.ScalarMap[str, int]
    session: str
    def __init__(self, node: _Optional[str] = ..., ok: _Optional[bool] = ..., message: _Optional[str] = ..., bytes_sent: _Optional[_Mapping[str, int]] = ..., bytes_received: _Optional[_Mapping[str, int]] = ..., session: _Optional[str] = ...) -> None: ...

class ControlCommand(_message.Message):
    __slots__ = ("kind", "target", "args_json", "id")
    KIND_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    ARGS_JSON_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    kind: str
    target: str
    args_json: str
    id: str
    def __init__(self, kind: _Optional[str] = ..., target: _Optional[str] = ..., args_json: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...

class ControlReply(_message.Message):
    __slots__ = ("accepted", "message", "unsupported")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    UNSUPPORTED_FIELD_NUMBER: _ClassVar[int]
    accepted: bool
    message: str
    unsupported: bool
    def __init__(self, accepted: _Optional[bool] = ..., message: _Optional[str] = ..., unsupported: _Optional[bool] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StatusReply(_message.Message):
    __slots__ = ("state", "iterations_done", "iterations_total", "nodes", "message")
    STATE_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_DONE_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    state: str
    iterations_done: int
    iterations_total: int
    nodes: _containers.RepeatedCompositeFieldContainer[NodeInfo]
    message: str
    def __init__(self, state: _Optional[str] = ..., iterations_done: _Optional[int] = ..., iterations_total: _Optional[int] = ..., nodes: _Optional[_Iterable[_Union[NodeInfo, _Mapping]]] = ..., message: _Optional[str] = ...) -> None: ...

class Ack(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
