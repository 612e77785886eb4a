"""Model profiles: one model's per-tensor forward and backward times at one batch size on one device.

The format is shared by the strategies (MG-WFBP's t_f/t_b, Stanza's eq. 2–5
constants) and replay compute (:mod:`synclab.compute.replay`). A profile is a
JSON object::

    {"model": "resnet50", "batch_size": 32, "device": "cuda", "dtype": "float32",
     "forward_seconds": 0.031, "backward_seconds": 0.064, "update_seconds": 0.0007,
     "tensors": [{"name": "features.0.weight", "params": 9408, "forward_seconds": 0.0009,
                  "backward_seconds": 0.0011, "kind": "conv"}, ...],          # forward order
     "boundary": {"activations_per_sample": 2048, "conv_params": 23508032, "fc_params": 2049000,
                  "conv_seconds": 0.094, "fc_seconds": 0.0008},              # models with a CONV/FC split
     "meta": {...}, "spread": {...}}                                         # how and where it was measured

``forward_seconds``/``backward_seconds`` at the top are the sums over
``tensors`` (a replayed iteration takes exactly their sum). ``update_seconds``
(optional) is one optimizer step over the whole model (SGD with momentum and
weight decay, ``torch.optim.SGD``); replay lets a tensor's share of it, in
proportion to its parameters (the step is elementwise), pass wherever a worker
applies its own update, instead of doing the arithmetic on the host CPU. ``boundary`` follows
Stanza §4.2: T_c = ``conv_seconds`` (forward+backward of the CONV part per
batch), T_f = ``fc_seconds`` (forward+backward of the FC part for one CONV
worker's batch), A = ``activations_per_sample``, P_c = ``conv_params``.
``meta`` (device name, driver, torch version, date, host, iterations) and
``spread`` (timing noise across the measured iterations) are informative.

Where checked-in profiles are found (first hit wins): ``$SYNCLAB_MODEL_PROFILES_DIR``
(``os.pathsep``-separated), then the repository's ``profiles/`` when running
from a checkout. File names are ``<model>-b<batch>-<device>.json``.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

KINDS = ("conv", "fc", "norm", "embedding", "rnn", "other")
PROFILES_ENV = "SYNCLAB_MODEL_PROFILES_DIR"
REPO_PROFILES = Path(__file__).resolve().parents[3] / "profiles"
# sums may differ from the top-level totals by rounding in the JSON (6 significant digits)
SUM_TOLERANCE = 1e-4


class ModelProfileError(ValueError):
    """A profile that cannot be read, is malformed, or does not fit the model; the message names the field."""


def _seconds(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise ValueError(f"must be a finite number of seconds >= 0, got {v!r}")
    return float(v)


Seconds = Annotated[float, BeforeValidator(_seconds)]


class TensorTiming(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    params: int = Field(ge=1)
    forward_seconds: Seconds
    backward_seconds: Seconds
    kind: Literal["conv", "fc", "norm", "embedding", "rnn", "other"]



class Boundary(BaseModel):
    model_config = ConfigDict(extra="forbid")
    activations_per_sample: int = Field(ge=1)
    conv_params: int = Field(ge=0)
    fc_params: int = Field(ge=0)
    conv_seconds: Seconds
    fc_seconds: Seconds



class ModelProfile(BaseModel):
    """A validated model profile; build with :func:`parse_model_profile` or :func:`load_model_profile`."""

    model_config = ConfigDict(extra="forbid")
    model: str
    batch_size: int = Field(ge=1)
    device: str
    dtype: Literal["float32", "float16", "bfloat16"] = "float32"
    forward_seconds: Seconds
    backward_seconds: Seconds
    update_seconds: Seconds | None = Field(None, description="one optimizer step over every tensor; None: not measured")
    tensors: list[TensorTiming] = Field(min_length=1)
    boundary: Boundary | None = None
    options: dict[str, Any] = Field(default_factory=dict, description="model options it was measured with")
    meta: dict[str, Any] = Field(default_factory=dict)
    spread: dict[str, Any] = Field(default_factory=dict)


    @model_validator(mode="after")
    def _totals(self):
        for what in ("forward", "backward"):
            total = getattr(self, f"{what}_seconds")
            summed = sum(getattr(t, f"{what}_seconds") for t in self.tensors)
            if abs(summed - total) > SUM_TOLERANCE * max(1.0, total) + 1e-6:
                raise ValueError(f"{what}_seconds is {total:g} but the tensors' {what}_seconds sum to {summed:g}")
        return self

    @property
    def iteration_seconds(self) -> float:
        """Forward + backward of one iteration, as profiled."""
        return self.forward_seconds + self.backward_seconds

    @property
    def params(self) -> int:
        return sum(t.params for t in self.tensors)

    def update_shares(self) -> list[float] | None:
        """Each tensor's part of ``update_seconds``, in proportion to its parameters (None when not measured)."""
        if self.update_seconds is None:
            return None
        total = self.params
        return [self.update_seconds * t.params / total for t in self.tensors]

    def label(self) -> str:
        where = self.meta.get("device_name") or self.device
        return f"{self.model} batch {self.batch_size} on {where}"

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json", exclude_defaults=False), indent=1) + "\n"


def _dotted(err: ValidationError) -> str:
    parts = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"]) or "(top level)"
        parts.append(f"{loc}: {e['msg'].removeprefix('Value error, ')}")
    return "; ".join(parts)


def parse_model_profile(data: Any, source: str = "profile") -> ModelProfile:
    """Validate decoded JSON; :class:`ModelProfileError` names ``source`` and the field at fault."""
    if not isinstance(data, dict):
        raise ModelProfileError(f"{source}: a model profile is a JSON object, got {type(data).__name__}")
    try:
        return ModelProfile.model_validate(data)
    except ValidationError as e:
        raise ModelProfileError(f"{source}: {_dotted(e)}") from None


def read_profile_json(path: Path | str) -> Any:
    """A profile file's decoded JSON; :class:`ModelProfileError` when it cannot be read or is not JSON."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ModelProfileError(f"cannot read profile {str(path)!r}: {e.strerror or e}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ModelProfileError(f"profile {str(path)!r} is not JSON: {e}") from None


def load_model_profile(path: Path | str) -> ModelProfile:
    return parse_model_profile(read_profile_json(path), source=str(path))


def check_matches(profile: ModelProfile, names: list[str], numels: list[int], model: str) -> None:
    """Refuse a profile whose tensors are not the model's (count and per-tensor sizes, forward order)."""
    if profile.model != model:
        raise ModelProfileError(f"the profile is of model {profile.model!r}, the spec asks for {model!r}")
    if len(profile.tensors) != len(numels):
        raise ModelProfileError(f"the profile has {len(profile.tensors)} tensors, model {model!r} has {len(numels)} "
                                f"(different model options?)")
    for i, (t, n, name) in enumerate(zip(profile.tensors, numels, names)):
        if t.params != n:
            raise ModelProfileError(f"tensors[{i}] ({t.name}) has {t.params} params in the profile, {n} in the model "
                                    f"({name})")


def profile_dirs() -> list[Path]:
    dirs = [Path(d) for d in os.environ.get(PROFILES_ENV, "").split(os.pathsep) if d]
    if REPO_PROFILES.is_dir():
        dirs.append(REPO_PROFILES)
    return dirs


_NAME = re.compile(r"^(?P<model>.+)-b(?P<batch>\d+)-(?P<device>[a-z0-9]+)\.json$")


def profile_file_name(model: str, batch_size: int, device: str) -> str:
    return f"{model}-b{batch_size}-{device}.json"


def available_profiles(model: str | None = None) -> list[tuple[str, int, str, Path]]:
    """Checked-in profiles as (model, batch, device, path); the first directory holding a name wins."""
    seen: dict[str, tuple[str, int, str, Path]] = {}
    for d in profile_dirs():
        for p in sorted(d.glob("*.json")):
            m = _NAME.match(p.name)
            if m and p.name not in seen and (model is None or m["model"] == model):
                seen[p.name] = (m["model"], int(m["batch"]), m["device"], p)
    return sorted(seen.values(), key=lambda e: (e[0], e[1], e[2]))


# Batch sizes the papers trained each model with (per GPU). The first is the one replay
# falls back to when no checked-in profile has model.batch_size; every one listed is profiled.
#   MG-WFBP Table 4: GoogleNet 64, ResNet-50 32, ResNet-152 128, DenseNet-161 64,
#                    DenseNet-201 64, Inception-v4 128.
#   Stanza Table 5:  AlexNet 128, VGG-16 64 (ImageNet), VGG-19 64, Inception-v3 32, ResNet-152 32.
#   SSD-SGD §4.1:    ResNet-20 32, ResNet-50 32 and 64, AlexNet 64 and 32 (Fig. 7); VGG-11 unstated.
#   P3 §5:           ResNet-50, Inception-v3, VGG-19, Sockeye, ResNet-110: batch sizes unstated, so
#                    the figures above (and 64 for Sockeye, 128 for CIFAR ResNet-110) are used.
# VGG-11's 128 and ResNet-20's 128 are the usual CIFAR/ImageNet choices, not a paper's figure.
PAPER_BATCHES: dict[str, tuple[int, ...]] = {
    "resnet20": (32, 128), "resnet110": (128,), "resnet50": (32, 64), "resnet152": (128, 32),
    "vgg11": (128, 64, 32), "vgg16": (64,), "vgg19": (64, 32), "alexnet": (128, 64, 32),
    "inception_v3": (32,), "googlenet": (64,), "densenet161": (64, 32), "densenet201": (64, 32),
    "inception_v4": (128, 32), "sockeye": (64,), "smallcnn": (32,), "mlp": (32,),
}
PAPER_BATCH = {model: batches[0] for model, batches in PAPER_BATCHES.items()}


def find_default_profile(model: str, batch_size: int | None) -> tuple[Path, str]:
    """The checked-in profile replay uses when ``compute.profile`` is absent, and why it was chosen.

    GPU profiles first (the point of replay); among them the one at ``batch_size``,
    else the paper's batch size, else the smallest. A CPU profile only when no
    GPU profile exists, and said.
    """
    found = available_profiles(model)
    if not found:
        dirs = ", ".join(str(d) for d in profile_dirs()) or "(none: set $" + PROFILES_ENV + ")"
        raise ModelProfileError(f"no checked-in profile of model {model!r} (looked in {dirs}); "
                                f"write one with `synclab profile {model} --out FILE` and set compute.profile")
    gpu = [e for e in found if e[2] != "cpu"]
    pool = gpu or found
    why = "" if gpu else "no GPU profile of this model is checked in: a CPU profile is replayed; "
    for want, reason in ((batch_size, "at model.batch_size"), (PAPER_BATCH.get(model), "at the paper's batch size")):
        for e in pool:
            if want is not None and e[1] == want:
                return e[3], why + f"{e[3].name} ({reason})"
    e = min(pool, key=lambda e: e[1])
    return e[3], why + f"{e[3].name} (no profile at batch {batch_size}: the smallest checked-in batch)"


def kind_of(module: Any) -> str:
    """The profile ``kind`` of a parameter's owning module."""
    from torch import nn

    if isinstance(module, nn.modules.conv._ConvNd):
        return "conv"
    if isinstance(module, nn.Linear):
        return "fc"
    if isinstance(module, (nn.modules.batchnorm._NormBase, nn.LayerNorm, nn.GroupNorm)):
        return "norm"
    if isinstance(module, (nn.Embedding, nn.EmbeddingBag)):
        return "embedding"
    if isinstance(module, (nn.RNNBase, nn.RNNCellBase)):
        return "rnn"
    return "other"
