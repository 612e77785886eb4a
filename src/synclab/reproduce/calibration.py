"""GPU calibration (``profiles/calibration.yaml``) and the dilation rule, for reproduction runs.

* ``compute.scale`` = the calibrated GPU seconds of one iteration / the checked-in CPU profile's
  forward + backward seconds (caveat C1: one factor for every layer, so per-layer ratios stay the CPU's).
* Dilation rule (reproduction-targets.md, conventions; :mod:`synclab.config.dilation`, where it lives): the
  smallest power of two D such that the emulated traffic that may flow at the same time — worst case the sum
  of every node's link rate — divided by D stays at or below 1.5 Gbit/s, what Python gRPC on the 2-core host
  moves with room.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

# The dilation rule lives with the spec's resolution (synclab run chooses D by it too); named here as before.
from synclab.config.dilation import HOST_BUDGET_BPS, MAX_DILATION, dilation_for  # noqa: F401

# Where the calibration table lives, from the package root (a checkout's profiles/ links there).
CALIBRATION = "profiles/calibration.yaml"



class CalibrationEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str
    gpu: str
    batch_size: int = Field(gt=0)
    seconds: float = Field(gt=0, description="one iteration's forward + backward on that GPU")
    kind: str = Field(description="measured | derived (arithmetic on a paper's numbers) | external")
    source: str
    profile: str | None = Field(None, description="the profile to replay and scale (repository-relative), "
                                                  "instead of the checked-in CPU one (e.g. a GPU profile)")


class CalibrationTable(BaseModel):
    model_config = ConfigDict(extra="forbid")

    entries: list[CalibrationEntry]

    def find(self, model: str, gpu: str, batch_size: int) -> CalibrationEntry:
        for e in self.entries:
            if (e.model, e.gpu, e.batch_size) == (model, gpu, batch_size):
                return e
        have = ", ".join(f"{e.model}/{e.gpu}/b{e.batch_size}" for e in self.entries)
        raise KeyError(f"no calibration for {model} on {gpu} at batch {batch_size} (have: {have})")


def load_calibration(path: Path) -> CalibrationTable:
    try:
        return CalibrationTable.model_validate(yaml.safe_load(path.read_text()))
    except ValidationError as e:
        where = "; ".join(".".join(str(p) for p in err["loc"]) + f": {err['msg']}" for err in e.errors())
        raise ValueError(f"{path}: {where}") from None


@dataclass(frozen=True)
class Scale:
    entry: CalibrationEntry
    profile: str
    profile_seconds: float
    profile_path: Path | None = None  # replay this file (compute.profile), not the checked-in default

    @property
    def scale(self) -> float:
        return self.entry.seconds / self.profile_seconds

    def describe(self) -> str:
        other = "" if f"-b{self.entry.batch_size}-" in self.profile else " (another batch: replay's fallback)"
        return (f"{self.entry.model} b{self.entry.batch_size} on {self.entry.gpu}: {self.entry.seconds:.3f} s "
                f"({self.entry.kind}) / {self.profile}{other} {self.profile_seconds:.4g} s = compute.scale "
                f"{self.scale:.5f}")


def compute_scale(entry: CalibrationEntry) -> Scale:
    """The scale that turns the checked-in CPU profile of ``entry``'s model and batch into its GPU time
    (or the profile the row names in ``profile``, which the point then replays: :attr:`Scale.profile_path`).

    Without a CPU profile at that batch, the profile replay itself falls back to
    (:func:`synclab.compute.profile.find_default_profile`: the paper's batch, else the smallest) is the
    one scaled, so that a run at ``model.batch_size`` = the entry's batch replays exactly ``seconds`` per
    iteration; its per-layer shares are then another batch's (caveat C1 as well), which
    :meth:`Scale.describe` says by naming the profile."""
    from synclab.compute.profile import REPO_PROFILES, available_profiles, find_default_profile, load_model_profile

    if entry.profile is not None:  # the row names its own profile: replay that one, scaled to ``seconds``
        path = REPO_PROFILES.parent / entry.profile
        if not path.is_file():
            raise KeyError(f"the calibration row {entry.model}/{entry.gpu}/b{entry.batch_size} names profile "
                           f"{entry.profile}, which does not exist")
        prof = load_model_profile(path)
        if (prof.model, prof.batch_size) != (entry.model, entry.batch_size):
            raise KeyError(f"the calibration row {entry.model}/{entry.gpu}/b{entry.batch_size} names "
                           f"{entry.profile}, a profile of {prof.model} at batch {prof.batch_size}")
        return Scale(entry, entry.profile, prof.iteration_seconds, path)
    cpu = [(batch, path) for _, batch, device, path in available_profiles(entry.model) if device == "cpu"]
    for batch, path in cpu:
        if batch == entry.batch_size:
            return Scale(entry, path.name, load_model_profile(path).iteration_seconds)
    if not cpu:
        raise KeyError(f"no checked-in CPU profile of {entry.model}")
    path, _ = find_default_profile(entry.model, entry.batch_size)
    if path not in {p for _, p in cpu}:
        raise KeyError(f"no checked-in CPU profile of {entry.model} at batch {entry.batch_size}, and replay "
                       f"would use {path.name}, not a CPU profile")
    return Scale(entry, path.name, load_model_profile(path).iteration_seconds)


