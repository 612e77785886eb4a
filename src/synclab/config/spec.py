"""The experiment spec: one validated model of cluster, network, model, data, strategy, compute, run.

Specs are YAML files (``examples/quickstart.yaml``) plus ``dotted.key=value`` overrides
(``synclab run --set``, the container's ``SYNCLAB_*`` variables), read by
:mod:`synclab.config.load`. Every section rejects unknown keys; a :class:`SpecError` names the
file and the offending dotted key, so a bad spec stops before any process starts. Inner code
receives :class:`Spec`, never raw dicts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_serializer, model_validator

from synclab.config.section import Section as _Section
from synclab.config.straggler import StragglerSpec
from synclab.units import parse_duration_s, parse_rate_bps, parse_size_bytes
from synclab.wire.chunks import auto_chunk_bytes


class SpecError(ValueError):
    """An invalid spec; ``str(err)`` names the dotted key(s) at fault."""




class ClusterSpec(_Section):
    """``colocate_ps``: PS shard *i* runs on worker *i*'s machine (its network namespace), so one
    shaped link carries that worker's and that shard's traffic, and the two talk over the loopback.
    P3 (§5: "the number of KVServers/P3Servers equal to the number of worker machines") and SSD-SGD
    (4 machines for up to 4 servers and 4 workers) ran their servers this way
    (reproduction-targets.md, caveat C2). Needs ``ps_shards <= workers`` and kernel shaping
    (``network.isolation: netns``): with the transport pacing each process, two processes cannot
    share one link."""

    workers: int = Field(2, ge=1, le=1024)
    ps_shards: int = Field(1, ge=0, le=256)
    colocate_ps: bool = False
    slowdown: list[float] = Field(default_factory=list, description="fixed compute factor per worker, in rank "
                                  "order (mixed GPUs: [1, 1, 2.5] makes worker2 2.5x slower); workers beyond "
                                  "the list run at 1")
    straggler: StragglerSpec = Field(default_factory=StragglerSpec)

    @field_validator("slowdown")
    @classmethod
    def _slowdown(cls, v):
        if any(not (0 < f <= 100) for f in v):
            raise ValueError(f"every factor must be in (0, 100], got {v}")
        return v

    @model_validator(mode="after")
    def _slowdown_fits(self):
        if len(self.slowdown) > self.workers:
            raise ValueError(f"slowdown lists {len(self.slowdown)} factors for {self.workers} workers")
        return self

    def compute_factors(self, rank: int, iterations: int, seed: int) -> list[float] | None:
        """Worker ``rank``'s compute factor per iteration (:func:`synclab.compute.stragglers.compute_factors`),
        None when every factor is 1."""
        from synclab.compute.stragglers import compute_factors

        st = self.straggler
        f = compute_factors(rank, iterations, slowdown=self.slowdown, probability=st.probability, factor=st.factor,
                            duration=st.duration, seed=seed)
        return None if all(x == 1.0 for x in f) else f


class NetworkSpec(_Section):
    """Link emulation. ``profile`` names a file in netem/profiles (or is an inline mapping of one);
    ``rate``/``delay`` are a shortcut for an egress-only inline profile.

    ``isolation``: ``netns`` (one network namespace per node, kernel shaping; root),
    ``docker`` (one container per node on a bridge network of the job, each shaping
    its own eth0 as compose containers do; needs a Docker daemon and the ``docker``
    SDK, image ``$SYNCLAB_IMAGE``, default synclab:latest, built when missing),
    ``none`` (loopback, shaping in the transport) or ``auto`` (netns when this
    machine allows it). The spec the nodes receive says ``netns`` for a docker job
    (each node shapes a link of its own; ``network.json`` says docker).
    ``backend`` and ``app_shaping`` are filled in by the
    launcher (what shapes the links, and what the transport must emulate itself).

    ``tcp_notsent_lowat``: the most unsent bytes a node's socket may hold
    (``net.ipv4.tcp_notsent_lowat`` in each node's namespace or container; ``null``
    keeps the kernel's default, unbounded). Bytes already in a socket leave first in,
    first out, so a bound keeps the transport's priority order (P3 §4.2) from being
    undone under kernel shaping; docs/how-to/shape-links.md ("Keep priorities under
    kernel shaping") says why, and CHANGELOG.md ("Priority across destinations and
    under kernel shaping") has the measurement behind the default.
    """

    profile: str | dict[str, Any] | None = Field(
        None, description="a link profile by name (`synclab profiles` lists them, a user's directory included) "
                          "or an inline mapping of one; null with rate and delay null: unshaped links")
    rate: str | int | None = Field(
        None, description="shortcut for an egress-only inline profile: the link rate (e.g. 1gbit, or bit/s as an "
                          "integer); not together with profile")
    delay: str | float | None = Field(
        None, description="shortcut for an egress-only inline profile: one-way delay (e.g. 5ms, or seconds as a "
                          "number); not together with profile")
    isolation: Literal["auto", "none", "netns", "docker"] = "auto"
    interface: str = Field("eth0", description="the network device a node shapes inside its namespace or container "
                                               "(tc qdiscs go on it; `synclab shape` reshapes it)")
    backend: Literal["auto", "netem", "htb", "tbf", "app", "none"] = Field(
        "auto", description="what shapes the links: a tc qdisc (netem, htb, tbf), the transport itself (app) or "
                            "nothing (none); auto: the launcher picks what the profile needs and this machine has, "
                            "and writes its choice here")
    app_shaping: list[Literal["rate", "delay", "jitter"]] = Field(
        default_factory=list, description="what the transport emulates itself because the kernel backend cannot "
                                          "(e.g. delay without netem); filled in by the launcher")
    tcp_notsent_lowat: int | None = Field(default=128 << 10, ge=1)

    @field_validator("rate")
    @classmethod
    def _rate(cls, v):
        if v is not None:
            if parse_rate_bps(v) <= 0:
                raise ValueError("rate must be positive")
        return v

    @field_validator("delay")
    @classmethod
    def _delay(cls, v):
        if v is not None:
            parse_duration_s(v)
        return v

    @model_validator(mode="after")
    def _one_source(self):
        if self.profile is not None and (self.rate is not None or self.delay is not None):
            raise ValueError("set either network.profile or network.rate/delay, not both")
        self.link_profile()  # validates the named or inline profile now, before any process starts
        return self

    def link_profile(self):
        """The :class:`~synclab.linkprofile.LinkProfile` this spec asks for, or None (unshaped)."""
        from synclab.linkprofile import profile_from_mapping
        from synclab.netem.profile import load_profile

        if isinstance(self.profile, dict):
            return profile_from_mapping(self.profile, name=self.profile.get("name", "inline"),
                                        source="network.profile")
        if isinstance(self.profile, str):
            try:
                return load_profile(self.profile)
            except ValueError as e:
                raise ValueError(f"network.profile: {e}") from None
        if self.rate is None and self.delay is None:
            return None
        inline = {"name": "inline", "direction": "egress"}
        if self.rate is not None:
            inline["rate"] = self.rate
        if self.delay is not None:
            inline["delay"] = self.delay
        return profile_from_mapping(inline, source="network.rate/delay")

    @property
    def rate_bps(self) -> int | None:
        p = self.link_profile()
        return None if p is None else p.rate_bps

    @property
    def delay_s(self) -> float:
        p = self.link_profile()
        return 0.0 if p is None else p.delay_s


class ModelSpec(_Section):
    name: str = Field("smallcnn", description="a model of the zoo (synclab.models.MODEL_NAMES); an unknown name "
                                              "is refused with the known ones listed")
    batch_size: int = Field(32, ge=1, le=1 << 16)
    options: dict[str, Any] = Field(default_factory=dict, description="keyword options of the model's builder "
                                                                      "(synclab.models); an unknown option is "
                                                                      "refused with the model's options listed")

    @field_validator("name")
    @classmethod
    def _known(cls, v):
        from synclab.models import MODEL_NAMES

        if v not in MODEL_NAMES:
            raise ValueError(f"unknown model {v!r}; known: {', '.join(MODEL_NAMES)}")
        return v


class DataSpec(_Section):
    """``digits`` is scikit-learn's 1,797 real 8x8 images (1,437 train / 360 held out, :mod:`synclab.data.digits`)."""

    name: Literal["synthetic", "cifar10", "digits"] = Field(
        "synthetic", description="the training data: synthetic (seeded random tensors of the model's input shape), "
                                 "cifar10 (the CIFAR-10 python batches under root) or digits (scikit-learn's, "
                                 "shipped)")
    root: str | None = Field(None, description="cifar10 only: the folder holding the extracted CIFAR-10 python "
                                               "batches; refused for the other datasets")
    size: int | None = Field(None, ge=1, description="training samples to use; None: 50,000 (synthetic, cifar10) "
                                                     "or the whole training split (digits)")


def _default_strategy() -> str:
    from synclab.strategies.registry import DEFAULT_STRATEGY

    return DEFAULT_STRATEGY


class StrategySpec(BaseModel):
    """``name`` plus the strategy's own keys, validated by that strategy's ``Options`` model.

    ``module``: a Python file to import first (its strategies register themselves), for trying a strategy
    without packaging it; relative to the working directory, kept as an absolute path so every node of
    the job imports the same file (a container needs it mounted at that path)."""

    model_config = ConfigDict(extra="allow")
    name: str = Field(default_factory=_default_strategy)
    module: str | None = None

    @field_validator("module")
    @classmethod
    def _load_module(cls, v):
        if v is None:
            return v
        from synclab.strategies import registry

        path = str(Path(v).expanduser().resolve())
        try:
            registry.load_path(path)
        except registry.StrategyLoadError as e:
            raise ValueError(str(e)) from None
        return path

    @model_serializer(mode="wrap")
    def _without_unset_module(self, handler):
        data = handler(self)
        if isinstance(data, dict) and data.get("module") is None:
            data.pop("module", None)  # resolved specs of packaged strategies stay as they were
        return data

    @model_validator(mode="after")
    def _options(self):
        from synclab.strategies import registry

        cls = registry.get(self.name)  # raises KeyError naming known strategies
        cls.Options.model_validate(self.model_extra or {})
        return self

    @property
    def options(self) -> BaseModel:
        from synclab.strategies import registry

        return registry.get(self.name).Options.model_validate(self.model_extra or {})


class ComputeSpec(_Section):
    """``real``: PyTorch forward/backward. ``replay``: per-tensor times from a model profile
    (:mod:`synclab.compute.replay`), real parameter and gradient tensors, no model math.

    ``profile``: a model-profile JSON file (or, once the launcher has resolved it, the
    profile inline); absent, the checked-in profile of ``model.name``. ``scale``
    multiplies the profiled times: a GPU k times slower than the profiled one is
    ``scale: k`` (e.g. the ratio of the two GPUs' measured iteration times for the
    model, or of their FP32 throughputs when only datasheets are at hand).
    """

    mode: Literal["real", "replay"] = Field("real", description="real: PyTorch forward/backward; replay: the "
                                                                 "profile's per-tensor times, no model math")
    device: Literal["cpu", "cuda", "auto"] = Field("cpu", description="where a worker computes; auto: cuda when "
                                                                      "torch sees a CUDA device, else cpu; cuda "
                                                                      "without one is an error")
    threads: int = Field(1, ge=1, le=256, description="torch intra-op threads per worker process")
    profile: str | dict[str, Any] | None = None
    scale: float = Field(1.0, gt=0, le=1e4)
    ps_update: Literal["host", "profile"] = Field("host", description=(
        "a PS shard's update time: host: its arithmetic on this host (emulated time / run.dilation); "
        "profile: the profile's update_seconds per parameter x compute.scale, in emulated time (replay)"))

    @model_validator(mode="after")
    def _replay_only(self):
        if self.ps_update == "profile" and self.mode != "replay":
            raise ValueError("compute.ps_update: profile needs compute.mode: replay")
        if self.mode != "replay":
            if self.profile is not None:
                raise ValueError("compute.profile is read only with compute.mode: replay")
            if self.scale != 1.0:
                raise ValueError("compute.scale applies only with compute.mode: replay")
        return self

    def model_profile(self):
        """The :class:`~synclab.compute.profile.ModelProfile` named or inlined here (None when absent)."""
        from synclab.compute.profile import load_model_profile, parse_model_profile

        if isinstance(self.profile, dict):
            return parse_model_profile(self.profile, source="compute.profile")
        if isinstance(self.profile, str):
            return load_model_profile(self.profile)
        return None


class OptimizerSpec(_Section):
    lr: float = Field(0.05, gt=0)
    momentum: float = Field(0.9, ge=0, lt=1)
    weight_decay: float = Field(1e-4, ge=0)


class TransportSpec(_Section):
    chunk_bytes: int | str = Field("auto", description="frame payload in bytes (or a size like 1MiB), rounded down "
                                                        "to a multiple of 8 (whole elements); auto: "
                                                        "4 MiB on unshaped links or links of 10 Gbit/s or more "
                                                        "(after run.dilation), else 1 MiB")
    queue_bytes: int | str = Field(64 << 20, description="bytes a node may hold queued for one peer (or a size "
                                                         "like 64MiB) before its sender waits, so memory stays "
                                                         "bounded on slow links; also sizes the largest message a "
                                                         "peer accepts")
    tls: bool = Field(False, description="mutual TLS on every gRPC connection: the local launcher makes a CA for "
                                         "the job (run_dir/tls); elsewhere SYNCLAB_TLS_DIR names the files "
                                         "(synclab tls init)")
    engine: Literal["grpc", "tcp"] = Field("grpc", description="what carries the data-plane streams (the same "
                                                               "synclab.v1 frames): grpc, or tcp (one plain TCP "
                                                               "connection per stream, synclab.wire.tcp; no TLS); "
                                                               "the control plane and PS pulls stay gRPC")

    @model_validator(mode="after")
    def _engine_tls(self):
        if self.engine == "tcp" and self.tls:
            raise ValueError("transport.engine tcp carries no TLS; use engine grpc with transport.tls")
        return self

    @field_validator("chunk_bytes", "queue_bytes")
    @classmethod
    def _size(cls, v, info):
        if info.field_name == "chunk_bytes" and v == "auto":
            return v  # resolved by Spec once the network is known (auto_chunk_bytes)
        n = parse_size_bytes(v)
        if not (1 << 10) <= n <= (1 << 30):
            raise ValueError(f"must be between 1 KiB and 1 GiB, got {n} bytes")
        if info.field_name == "chunk_bytes":  # a frame carries whole elements (up to 8 bytes): the receiver
            n -= n % 8                         # refuses a chunk that splits one, so round down to a multiple of 8
        return n


class RunSpec(_Section):
    iterations: int = Field(20, ge=1)
    warmup: int = Field(2, ge=0)
    seed: int = Field(0, description="seeds the model's initial parameters, the dataset's sampling, the plans' "
                                     "random choices (e.g. the ps baseline's shard of each small tensor) and the "
                                     "simulator's jitter")
    check_params: bool = Field(False, description="after each iteration's sync every worker records a checksum of "
                                                  "its parameters (iterations.csv params_checksum), so workers "
                                                  "that should agree can be compared; costs one wait per "
                                                  "iteration")
    heartbeat_s: float = Field(1.0, gt=0)
    heartbeat_timeout_s: float = Field(30.0, gt=0)
    connect_timeout_s: float = Field(30.0, gt=0)
    events: bool = Field(True, description="record per-tensor events and wire/compute spans (events.csv, spans.csv, overlap.csv, timeline.json)")
    linger_s: float = Field(0.0, ge=0, description="keep metrics endpoints up this long after the job ends")
    traffic_sample_ms: float = Field(10.0, ge=1, le=10_000, description="host milliseconds between two rows of "
                                     "each node's traffic-<node>.csv (P3 Fig. 8/9's 10 ms; under dilation a "
                                     "coarser trace costs the host less)")
    dilation: float = Field(1.0, gt=0, le=1000, description="time dilation D: compute times x D, link rates / D; "
                                                             "records divided back (replay only). Unset: synclab "
                                                             "run picks D for replayed compute by the host-budget "
                                                             "rule (synclab.config.dilation) and prints it")
    checkpoint_every: int = Field(0, ge=0, description="every N iterations every node saves its state atomically "
                                                       "into run_dir/checkpoint/ (0: never)")
    restart: Literal["no", "on-failure"] = Field("no", description="on-failure: the local launcher (or, in "
                                                                    "containers, the coordinator's entrypoint) "
                                                                    "restarts the job from its last consistent "
                                                                    "checkpoint")
    max_restarts: int = Field(3, ge=0)
    resume_from: int = Field(0, ge=0, description="set by the launcher on a restart: the checkpoint to resume")
    eval_every: int = Field(0, ge=0, description="every N iterations (and after the last) rank 0 evaluates its "
                                                 "parameters on the dataset's held-out split: eval.csv, "
                                                 "summary.json final_test_accuracy (0: never)")

    @model_validator(mode="after")
    def _warmup(self):
        if self.warmup >= self.iterations:
            raise ValueError(f"run.warmup ({self.warmup}) must be smaller than run.iterations ({self.iterations})")
        if self.resume_from and (not self.checkpoint_every or self.resume_from % self.checkpoint_every
                                 or self.resume_from >= self.iterations):
            raise ValueError(f"run.resume_from ({self.resume_from}) must be a checkpoint: a multiple of "
                             f"run.checkpoint_every ({self.checkpoint_every}) below run.iterations")
        return self

    def checkpoints(self) -> list[int]:
        """The iterations after which this run (still) checkpoints."""
        if not self.checkpoint_every:
            return []
        return [n for n in range(self.checkpoint_every, self.iterations, self.checkpoint_every)
                if n > self.resume_from]


class Spec(_Section):
    name: str = Field("experiment", description="the experiment's name, carried into its run "
                                                 "records (summary.json name)")
    cluster: ClusterSpec = Field(default_factory=ClusterSpec)
    network: NetworkSpec = Field(default_factory=NetworkSpec)
    model: ModelSpec = Field(default_factory=ModelSpec)
    data: DataSpec = Field(default_factory=DataSpec)
    strategy: StrategySpec = Field(default_factory=StrategySpec)
    compute: ComputeSpec = Field(default_factory=ComputeSpec)
    optimizer: OptimizerSpec = Field(default_factory=OptimizerSpec)
    transport: TransportSpec = Field(default_factory=TransportSpec)
    run: RunSpec = Field(default_factory=RunSpec)

    @model_validator(mode="after")
    def _resolve_chunk_bytes(self):
        if self.transport.chunk_bytes == "auto":
            self.transport.chunk_bytes = auto_chunk_bytes(self.network.rate_bps, self.run.dilation)
        return self

    @model_validator(mode="after")
    def _cluster_fits_strategy(self):
        from synclab.strategies import registry

        cls = registry.get(self.strategy.name)
        if cls.needs_ps and self.cluster.ps_shards < 1:
            raise ValueError(f"strategy {self.strategy.name!r} needs cluster.ps_shards >= 1")
        if self.cluster.colocate_ps and self.n_ps > self.n_workers:
            raise ValueError(f"cluster.colocate_ps puts PS shard i on worker i's machine: cluster.ps_shards "
                             f"({self.n_ps}) must not exceed cluster.workers ({self.n_workers})")
        if self.run.checkpoint_every and not cls.checkpointable:
            able = ", ".join(n for n in registry.names() if registry.get(n).checkpointable)
            raise ValueError(f"strategy {self.strategy.name!r} cannot checkpoint (run.checkpoint_every): its "
                             f"workers run apart from one consistent iteration; strategies that can: {able}")
        return self

    @model_validator(mode="after")
    def _data_fits_model(self):
        from synclab.data import required_input
        from synclab.models import model_input_spec

        need = required_input(self.data.name)
        if need is not None and self.compute.mode == "real":
            try:
                have = model_input_spec(self.model.name, **self.model.options)
            except Exception:  # noqa: BLE001 - bad model options are reported when the model is built
                return self
            if have != need:
                raise ValueError(f"data.name {self.data.name!r} provides {need}, but model {self.model.name!r} "
                                 f"with options {self.model.options} expects {have}")
        return self

    @model_validator(mode="after")
    def _eval_has_what_it_needs(self):
        if not self.run.eval_every:
            return self
        from synclab.data import TEST_SPLIT_DATASETS
        from synclab.strategies import registry

        if self.data.name not in TEST_SPLIT_DATASETS:
            raise ValueError(f"run.eval_every needs a dataset with a held-out split ({', '.join(TEST_SPLIT_DATASETS)}); "
                             f"data.name {self.data.name!r} has none")
        if self.compute.mode != "real":
            raise ValueError("run.eval_every needs compute.mode: real (replay computes no outputs to score)")
        if not registry.get(self.strategy.name).rank0_holds_model:
            raise ValueError(f"run.eval_every: strategy {self.strategy.name!r} keeps parts of the model on "
                             f"different workers until the end; rank 0 cannot evaluate mid-run")
        return self

    @model_validator(mode="after")
    def _replay_profile_fits(self):
        if self.run.dilation != 1.0 and self.compute.mode != "replay":
            raise ValueError("run.dilation needs compute.mode: replay (real PyTorch compute cannot be slowed "
                             "down exactly)")
        if self.compute.mode == "replay" and self.compute.profile is not None:
            from synclab.compute.profile import ModelProfileError, check_matches
            from synclab.models import tensor_layout

            try:
                profile = self.compute.model_profile()
                names, numels = tensor_layout(self.model.name, **self.model.options)
                check_matches(profile, names, numels, self.model.name)
            except ModelProfileError as e:
                raise ValueError(f"compute.profile: {e}") from None
        return self

    # The shape of the local cluster this spec launches.
    @property
    def n_workers(self) -> int:
        from synclab.strategies import registry

        return 1 if registry.get(self.strategy.name).single_process else self.cluster.workers

    @property
    def n_ps(self) -> int:
        from synclab.strategies import registry

        return self.cluster.ps_shards if registry.get(self.strategy.name).needs_ps else 0

    def machine_of(self, node: str) -> str:
        """The node whose machine (namespace, shaped link) ``node`` runs on: with ``cluster.colocate_ps``
        shard ``ps<i>`` runs on ``worker<i>``'s; every other node on its own."""
        if self.cluster.colocate_ps and node.startswith("ps") and node[2:].isdigit():
            return f"worker{node[2:]}"
        return node

    def to_dict(self) -> dict:
        return self.model_dump(mode="json")
