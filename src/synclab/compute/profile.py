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

A tensor's ``backward_seconds`` is its t_b of MG-WFBP eq. 6, derived from
gradient-ready times by :func:`backward_times`, the one place that rule lives
(the profiler and the ``mgwfbp`` strategy's own measurement both use it).

:func:`load_model_profile` is the one reader of profile files. By default it
wants the whole format; ``partial=True`` (``synclab plan stanza --partial``)
lets fields be absent, ``require=`` names the fields a caller cannot do
without, and every field present is checked either way.

Where checked-in profiles are found (first hit wins): ``$SYNCLAB_MODEL_PROFILES_DIR``
(``os.pathsep``-separated: a user's own), then the ones shipped in the package
(``synclab/profiles``, :mod:`synclab.resources`; a checkout's ``profiles/`` links
there). File names are ``<model>-b<batch>-<device>.json``. A relative path
(``compute.profile=profiles/alexnet-b128-cpu.json``) is read from the working
directory, else from the package (:func:`synclab.resources.locate`).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, create_model, model_validator
from pydantic.fields import FieldInfo

from synclab.resources import locate, model_profiles_dir

KINDS = ("conv", "fc", "norm", "embedding", "rnn", "other")
PROFILES_ENV = "SYNCLAB_MODEL_PROFILES_DIR"
# The stock profiles: package data (the checkout's profiles/ is a link to this directory).
REPO_PROFILES = model_profiles_dir()
# sums may differ from the top-level totals by rounding in the JSON (6 significant digits)
SUM_TOLERANCE = 1e-4


class ModelProfileError(ValueError):
    """A model profile that cannot be read, is malformed, lacks a field its caller needs, or does not fit the
    model; the message names the file (or the spec key) and the field."""


def _seconds(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise ValueError(f"must be a finite number of seconds >= 0, got {v!r}")
    return float(v)


Seconds = Annotated[float, BeforeValidator(_seconds)]


class TensorTiming(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)  # strict: a count is an integer, never 1.0 or true
    name: str
    params: int = Field(ge=1)
    forward_seconds: Seconds
    backward_seconds: Seconds
    kind: Literal["conv", "fc", "norm", "embedding", "rnn", "other"]



class Boundary(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    activations_per_sample: int = Field(ge=1)
    conv_params: int = Field(ge=0)
    fc_params: int = Field(ge=0)
    conv_seconds: Seconds
    fc_seconds: Seconds



class _ProfileChecks(BaseModel):
    """What a whole profile and a partial one both check: no unknown fields, totals that match the tensors."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="after")
    def _totals(self):
        if self.tensors is None:
            return self
        for what in ("forward", "backward"):
            total = getattr(self, f"{what}_seconds")
            summed = sum(getattr(t, f"{what}_seconds") for t in self.tensors)
            if total is not None and abs(summed - total) > SUM_TOLERANCE * max(1.0, total) + 1e-6:
                raise ValueError(f"{what}_seconds is {total:g} but the tensors' {what}_seconds sum to {summed:g}")
        return self


class ModelProfile(_ProfileChecks):
    """A validated model profile; build with :func:`parse_model_profile` or :func:`load_model_profile`."""

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


def _may_be_absent(field: FieldInfo) -> tuple[Any, Any]:
    """A field of :class:`ModelProfile` as a partial profile has it: same checks, None when absent."""
    if not field.is_required():
        return field.annotation, field
    checked = Annotated[(field.annotation, *field.metadata)] if field.metadata else field.annotation
    return checked | None, None


PartialModelProfile = create_model(
    "PartialModelProfile", __base__=_ProfileChecks,
    __doc__="A model profile read with ``partial=True``: any field may be None (absent); those present are checked.",
    **{name: _may_be_absent(f) for name, f in ModelProfile.model_fields.items()})


def _dotted(err: ValidationError) -> str:
    parts = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"]) or "(top level)"
        msg = "missing" if e["type"] == "missing" else e["msg"].removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}")
    return "; ".join(parts)


def parse_model_profile(data: Any, source: str = "profile", *, partial: bool = False,
                        require: Collection[str] = ()) -> ModelProfile | PartialModelProfile:
    """Validate decoded JSON; :class:`ModelProfileError` names ``source`` and the field at fault.

    ``partial``: fields may be absent (a :class:`PartialModelProfile`); ``require``:
    fields that must be present all the same (or, in a whole profile, optional
    ones the caller needs, such as ``boundary``).
    """
    unknown = set(require) - set(ModelProfile.model_fields)
    if unknown:
        raise ValueError(f"require names no profile field: {sorted(unknown)}")
    if not isinstance(data, dict):
        raise ModelProfileError(f"{source}: a model profile is a JSON object, got {type(data).__name__}")
    try:
        profile = (PartialModelProfile if partial else ModelProfile).model_validate(data)
    except ValidationError as e:
        raise ModelProfileError(f"{source}: {_dotted(e)}") from None
    absent = [name for name in require if getattr(profile, name) is None]
    if absent:
        raise ModelProfileError(f"{source}: {'; '.join(f'{name}: missing' for name in absent)}")
    return profile


def load_model_profile(path: Path | str, *, partial: bool = False,
                       require: Collection[str] = ()) -> ModelProfile | PartialModelProfile:
    """Read and validate a profile file (``partial``, ``require``: as in :func:`parse_model_profile`).

    :class:`ModelProfileError` names the file: unreadable, not JSON, or the field at fault.
    """
    try:
        text = locate(path).read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise ModelProfileError(f"cannot read profile {str(path)!r}: {getattr(e, 'strerror', None) or e}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ModelProfileError(f"profile {str(path)!r} is not JSON: {e}") from None
    return parse_model_profile(data, source=str(path), partial=partial, require=require)


def backward_times(backward_start: float, ready: Sequence[float], end: float | None = None) -> list[float]:
    """Per-tensor t_b (MG-WFBP eq. 6) from the moments one backward pass made each gradient ready (§5.1).

    ``ready[i]`` is when tensor i's gradient was ready (tensors in forward
    order), ``backward_start`` when backward began (tau_b^(L) of eq. 6).
    Eq. 6 lets tensor i's gradient be ready at backward_start + sum of t_b over
    i..L-1, which can only be non-decreasing as i falls, and eq. 7 starts a
    communication no earlier than the one after it. Autograd need not finish
    gradients in descending index order (a layer's bias can come after its
    weight), so tensor i counts as ready once it and every tensor after it are:
    R_i = max(ready[i..L-1]), R_L = ``backward_start``, t_b[i] = R_i - R_{i+1}.
    Then eq. 6 gives every tensor R_i, the moment eq. 7 can first send it in
    any merge plan; when gradients come in descending order, t_b[i] is §5.1's
    interval between consecutive ready events. A tensor ready before one after
    it gets t_b = 0 and that later one the interval from the previous R. With
    ``end`` (when backward returned), what follows the last gradient is added
    to tensor 0, so the t_b add up to the whole pass.
    """
    if not ready:
        raise ValueError("ready needs one time per tensor")
    t_b = [0.0] * len(ready)
    previous = backward_start
    for i in range(len(ready) - 1, -1, -1):
        current = max(previous, ready[i])
        t_b[i] = current - previous
        previous = current
    if end is not None:
        if end < previous:
            raise ValueError(f"end {end!r} is before the last gradient was ready ({previous!r})")
        t_b[0] += end - previous
    return t_b


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
    "inception_v3": (32,), "googlenet": (64,), "googlenet_mgwfbp": (64,), "densenet161": (64, 32),
    "densenet201": (64, 32), "inception_v4": (128, 32), "sockeye": (64,), "smallcnn": (32,), "mlp": (32,),
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
