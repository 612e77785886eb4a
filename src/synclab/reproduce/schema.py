"""The reproduction-target file (``<id>.yaml``, shipped in ``synclab/reproduce/targets/``): a paper figure as data.

A target names the paper, figure and setting, the base spec and the overrides every point shares,
the calibration it replays compute at, the sweep (full and quick forms), the numbers the paper
quotes (with where they stand) and the claims to judge. Everything is validated here, at the edge:
an unknown or malformed key is a :class:`TargetError` naming the file and the dotted key.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from synclab.resources import targets_dir

Scalar = str | int | float | bool


class TargetError(ValueError):
    """A target file that cannot be used; the message names the file and the key."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Calibration(_Strict):
    """Which row of ``profiles/calibration.yaml`` sets ``compute.scale`` (§1 of the targets catalogue)."""

    model: str
    gpu: str
    batch_size: int = Field(gt=0)


def is_label(key: str) -> bool:
    """An axis key without a dot is a label (e.g. ``delay_steps``), not a spec key: it hands the spec nothing
    itself; the ``when`` entries that name its values give them their overrides. One axis can so hold points
    of different strategies (SSD-SGD Fig. 6: SSGD as 0 delay steps, ``ssdsgd`` with k = 1..5)."""
    return "." not in key


class Form(_Strict):
    """One form of the sweep: the cartesian product of ``axes`` (dotted spec keys or labels -> values)."""

    axes: dict[str, list[Scalar]] = Field(min_length=1)
    set: list[str] = Field(default_factory=list, description="extra KEY=VALUE for this form only")
    estimate_s: float = Field(gt=0, description="estimated host seconds for the whole form on the 2-core VM")

    @field_validator("axes")
    @classmethod
    def _non_empty(cls, v: dict[str, list[Scalar]]) -> dict[str, list[Scalar]]:
        for key, values in v.items():
            if not values:
                raise ValueError(f"axis {key!r} has no values")
        return v


class When(_Strict):
    """Overrides only for the points whose axis values match ``where`` (e.g. one strategy's options).

    ``engine``: run those points with another engine than the target's (``emulate`` or ``simulate``), e.g.
    the largest clusters of a scaling figure simulated beside emulated small ones (P3 Fig. 10); the last
    matching entry that names one decides. Every point records the engine that gave it."""

    where: dict[str, Scalar] = Field(min_length=1)
    set: list[str] = Field(default_factory=list)
    engine: Literal["emulate", "simulate"] | None = None

    @model_validator(mode="after")
    def _does_something(self) -> When:
        if not self.set and self.engine is None:
            raise ValueError("a 'when' entry needs 'set' (overrides) or 'engine', else it changes nothing")
        return self


class Selector(_Strict):
    """One point of the sweep by some of its axis values, and the metric read there."""

    where: dict[str, Scalar]
    metric: str


class Judge(_Strict):
    """How a claim is judged (``synclab.reproduce.verdict``; the rules are issue 51's stricter judge).

    A value (kind ``value``, ``argmax``): reproduced when |SyncLab/paper - 1| <= ``within``; partly within
    ``partly_factor`` of the paper's value; else not.

    A ratio (kinds ``ratio``, ``max_ratio``, ``ratio_growth``) states a gain, ratio - 1 ("1.2x faster" is a
    20 % gain), and is judged on that gain: a SyncLab gain inside the noise margin is a tie (no direction);
    reproduced when the gains differ by at most ``within`` of the paper's gain (never less than the margin);
    partly when the gain has the paper's sign and (``same_side_of_one``) at least a third of its size, or is
    within ``partly_factor`` of it; else not. A paper ratio of exactly 1 ("similar") is reproduced when
    SyncLab's is within ``within`` (or the margin) of 1.

    ``direction``: the paper states only a direction ("P3 lowers the idle time"), so ``paper_value`` is the
    reference it is stated against (usually 1): reproduced when SyncLab's value is beyond it in that
    direction by more than the margin, a tie when within the margin either way, else not.

    The margin is the largest of ``margin``, 3 % and the claim's spread over repeated runs."""

    within: float = Field(0.15, gt=0)
    partly_factor: float | None = Field(None, gt=1)
    same_side_of_one: bool = False
    margin: float = Field(0.0, ge=0, description="the run-to-run noise (at least 3 %, see the class doc): "
                                                 "argmax: the peak must beat every other point by this share, "
                                                 "else the curve is flat (no peak: not reproduced); "
                                                 "direction: the share by which the value must pass the reference; "
                                                 "ratios: a gain this small is a tie")
    direction: Literal["above", "below"] | None = None


class Table2(_Strict):
    """Carry the paper's number from the paper's worker count to the point's by MG-WFBP Table 2
    (:mod:`synclab.reproduce.table2`): a fit on 4 nodes is compared with the paper's 16-GPU a as Table 2's
    formula puts it at 4 (ring: a = 2(N-1)α)."""

    algorithm: Literal["ring", "binary_tree", "recursive_doubling", "recursive_halving_doubling",
                       "double_binary_tree"] = "ring"
    n_paper: int = Field(ge=2, description="the number of workers behind the paper's number")
    n_axis: str = Field("cluster.workers", description="the axis of the claim's point that gives SyncLab's N")
    term: Literal["a", "b", "time"] = Field(description="a, b, or time: T(size) = a + b·size")
    b: float | None = Field(None, gt=0, description="time: the paper's b (s/B), to split a + b·size")
    size: float | None = Field(None, gt=0, description="time: the message size in bytes")

    @model_validator(mode="after")
    def _time(self) -> Table2:
        if self.term == "time" and (self.b is None or self.size is None):
            raise ValueError("term 'time' needs 'b' and 'size'")
        return self


class Claim(_Strict):
    """A number the paper states (or that follows from its numbers by stated arithmetic).

    ``role: calibration``: not a result but a check that a setting hit what it was set from (a link's fitted
    a, b against the Fig. 4 values its delay and rate were derived from); judged the same way, reported in its
    own table and not counted among the claims."""

    id: str
    quote: str
    source: str
    paper_value: float
    unit: str = ""
    kind: Literal["value", "ratio", "argmax", "ratio_growth", "max_ratio"] = Field(
        "value", description="ratio_growth: (num/den) / (base_num/base_den), how a ratio changes between two "
                             "settings, e.g. a speedup at 4 workers over the one at 2 ('more salient as it grows'); "
                             "max_ratio: the largest num/den over the values of axis 'over'")
    value: Selector | None = None
    over: str | None = Field(None, description="argmax: the axis whose value at the metric's maximum is compared; "
                                               "max_ratio: the axis the ratio is maximized over")
    at: Scalar | None = Field(None, description="max_ratio: judge the ratio at this value of 'over' as a share of "
                                                "the maximum ratio (\"the benefit diminishes at low bandwidth\")")
    peak_at: Scalar | None = Field(None, description="max_ratio: the value of 'over' where the paper puts the "
                                                     "maximum (\"as much as 18% on eight-machine cluster\"); a "
                                                     "SyncLab maximum elsewhere, beyond the judge's noise margin, "
                                                     "is at best partly")
    num: Selector | None = None
    den: Selector | None = None
    base_num: Selector | None = None
    base_den: Selector | None = None
    scale: float = Field(1.0, description="SyncLab value x scale before comparing (unit conversion)")
    judge: Judge = Field(default_factory=Judge)
    caveat: str = Field("", description="what, known before running, makes SyncLab differ (C1-C5)")
    role: Literal["claim", "calibration"] = "claim"
    table2: Table2 | None = Field(None, description="compare with the paper's number carried to the point's N by "
                                                    "MG-WFBP Table 2")

    @model_validator(mode="after")
    def _selectors(self) -> Claim:
        if self.kind == "value" and self.value is None:
            raise ValueError("kind 'value' needs 'value' (where + metric)")
        if self.kind == "ratio" and (self.num is None or self.den is None):
            raise ValueError("kind 'ratio' needs 'num' and 'den'")
        if self.kind == "argmax" and (self.value is None or not self.over):
            raise ValueError("kind 'argmax' needs 'value' (the other axes + metric) and 'over' (the swept axis)")
        if self.kind == "ratio_growth" and None in (self.num, self.den, self.base_num, self.base_den):
            raise ValueError("kind 'ratio_growth' needs 'num', 'den', 'base_num' and 'base_den'")
        if self.kind == "max_ratio":
            if self.num is None or self.den is None or not self.over:
                raise ValueError("kind 'max_ratio' needs 'num', 'den' (the other axes + metric) and 'over' "
                                 "(the axis the ratio is maximized over)")
            for name, sel in (("num", self.num), ("den", self.den)):
                if self.over in sel.where:
                    raise ValueError(f"kind 'max_ratio': {name}.where must not fix {self.over!r}, the axis "
                                     f"maximized over")
            if self.at is not None and self.peak_at is not None:
                raise ValueError("kind 'max_ratio': 'at' (a share of the maximum) and 'peak_at' (where the maximum "
                                 "is) judge different claims; give one")
        elif self.at is not None or self.peak_at is not None:
            raise ValueError("'at' and 'peak_at' belong to kind 'max_ratio' only")
        if self.table2 is not None and (self.kind != "value" or self.table2.n_axis not in self.value.where):
            raise ValueError(f"'table2' needs kind 'value' whose point names {self.table2.n_axis!r} (its N)")
        return self


class PaperPoint(_Strict):
    """A number the text gives that can be drawn in the figure beside SyncLab's."""

    series: str
    x: float
    y: float
    source: str


class Figure(_Strict):
    layout: Literal["lines", "fit", "traffic"]
    x: str = Field(description="axis key (lines); traffic: the axis whose values are the bars' colours")
    y: str = Field(description="metric drawn")
    also: list[str] = Field(default_factory=list, description="lines layout: more metrics drawn dashed in each "
                                                              "series' colour (e.g. a model's prediction)")
    series: str | None = Field(None, description="axis key, or several comma-separated (one line each combination)")
    panel: str | None = Field(None, description="axis key with one panel per value")
    logx: bool = False
    logy: bool = False
    xlabel: str = ""
    ylabel: str = ""
    paper_points: list[PaperPoint] = Field(default_factory=list)
    paper_lines: dict[str, tuple[float, float]] = Field(
        default_factory=dict, description="fit layout: label -> (a s, b s/byte) the paper gives")
    bars: list[str] = Field(default_factory=list, description="traffic layout: metrics drawn as grouped bars "
                                                              "(shares, 0-1) beside y")

    @model_validator(mode="after")
    def _bars(self) -> Figure:
        if self.bars and self.layout != "traffic":
            raise ValueError("'bars' is for layout 'traffic' only")
        if self.also and self.layout != "lines":
            raise ValueError("'also' is for layout 'lines' only")
        return self


class Target(_Strict):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    paper: str
    figure: str
    title: str
    compares: str
    setting: str
    engine: Literal["emulate", "simulate", "model"] = Field(
        description="emulate: synclab run; simulate: synclab.sim; model: Stanza's eq. 2-7 (reproduce.perfmodel)")
    spec: str = Field(description="base spec, relative to the repository root")
    set: list[str] = Field(default_factory=list)
    when: list[When] = Field(default_factory=list)
    calibration: Calibration | None = None
    calibration_gpu: str | None = Field(None, description="a calibration row per point: (model.name, this GPU, "
                                                          "model.batch_size); engine model: the point's T_ps; "
                                                          "emulate/simulate: the point's compute.scale (targets "
                                                          "that sweep models, e.g. Stanza Fig. 6)")
    dilation: Literal["rule", "none"] = "rule"
    startup_s: float | None = Field(None, ge=0, description="simulate only: per-message start-up cost")
    full: Form
    quick: Form
    figure_spec: Figure = Field(alias="plot")
    claims: list[Claim] = Field(min_length=1)
    notes: list[str] = Field(default_factory=list)

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @model_validator(mode="after")
    def _engine_model(self) -> Target:
        if self.engine == "model" and (self.calibration_gpu is None or self.calibration is not None):
            raise ValueError("engine 'model' takes 'calibration_gpu' (a row per point) and no 'calibration'")
        if self.calibration_gpu is not None and self.calibration is not None:
            raise ValueError("'calibration' (one row for every point) and 'calibration_gpu' (a row per point) "
                             "exclude each other")
        if self.engine == "model" and any(w.engine for w in self.when):
            raise ValueError("engine 'model' takes no per-point 'when.engine' (its points are not runs)")
        return self

    def engine_of(self, values: dict[str, Scalar]) -> str:
        """The engine of the point with these axis values: the last matching ``when.engine``, else the target's."""
        engine = self.engine
        for w in self.when:
            if w.engine and all(str(values.get(k)) == str(v) for k, v in w.where.items()):
                engine = w.engine
        return engine

    @property
    def mixed(self) -> bool:
        """Some ``when`` entry runs its points with another engine than the target's."""
        return any(w.engine and w.engine != self.engine for w in self.when)

    @model_validator(mode="after")
    def _labels_have_overrides(self) -> Target:
        """Every value of a label axis must be named by some ``when`` (else the label would change nothing).
        Engine ``model`` takes no spec: every axis key is one of its inputs (``nodes`` included)."""
        if self.engine == "model":
            return self
        for name in ("quick", "full"):
            for key, values in getattr(self, name).axes.items():
                if not is_label(key):
                    continue
                named = {str(w.where[key]) for w in self.when if key in w.where}
                missing = [v for v in values if str(v) not in named]
                if missing:
                    raise ValueError(f"{name}.axes.{key}: label value(s) {missing} have no 'when' entry giving "
                                     f"them overrides (a key without a dot is a label, not a spec key)")
        return self

    def form(self, quick: bool) -> Form:
        return self.quick if quick else self.full


def _dotted(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in loc) or "(top level)"


def load_target(path: Path | str) -> Target:
    """Read and validate one target file; :class:`TargetError` names the file and the dotted key."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise TargetError(f"{path}: cannot read: {e}") from None
    if not isinstance(data, dict):
        raise TargetError(f"{path}: a target file is a mapping of keys, got {type(data).__name__}")
    try:
        target = Target.model_validate(data)
    except ValidationError as e:
        problems = "; ".join(f"{_dotted(err['loc'])}: {err['msg']}" for err in e.errors())
        raise TargetError(f"{path}: {problems}") from None
    if target.id != path.stem:
        raise TargetError(f"{path}: id: {target.id!r} must equal the file name {path.stem!r}")
    return target


def target_dirs(own: Sequence[Path] = ()) -> list[Path]:
    """Where targets are read: a user's own directories (``synclab reproduce --targets DIR``), then the
    targets shipped in the package (:func:`synclab.resources.targets_dir`)."""
    return [*map(Path, own), targets_dir()]


def target_files(dirs: Sequence[Path] | None = None) -> dict[str, Path]:
    """Target id -> file; an earlier directory's file shadows a later one of the same id.
    :class:`TargetError` for a directory named that does not exist."""
    found: dict[str, Path] = {}
    for d in target_dirs() if dirs is None else dirs:
        if not Path(d).is_dir():
            raise TargetError(f"{d}: no such directory of targets")
        for p in sorted(Path(d).glob("*.yaml")):
            found.setdefault(p.stem, p)
    return dict(sorted(found.items()))


def load_targets(dirs: Sequence[Path] | None = None) -> list[Target]:
    """Every target found in ``dirs`` (default: the packaged ones), sorted by id."""
    return [load_target(p) for p in target_files(dirs).values()]
