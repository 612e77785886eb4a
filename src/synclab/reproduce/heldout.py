"""The held-out check of the compute calibration (issue 51, item 1: "check the method before using it").

Replay sets a model's compute time on a paper's GPU from one time a paper gives (the anchor) and a
model-to-model ratio. This module tests that step on the numbers the papers themselves give: every
paper-given time is predicted from every other paper-given time on the same GPU type, through the ratio of
the two models' profiles, and the prediction's error against the paper is published. Three ratios are
compared, all read from checked-in profiles, nothing measured here:

* ``gpu``: the whole training iteration measured on a lent GPU (``profiles/gpu-h100/``,
  ``meta.plain_iteration_seconds``, true FP32) — what issue 51 proposes;
* ``gpu_synced``: the same GPU's forward + backward with every layer synchronized (the profiler's per-layer
  times, which replay spreads over the tensors);
* ``cpu``: this VM's CPU profiles (``profiles/*-cpu.json``, forward + backward) — the ratio the calibration
  uses today for the P4000 rows (``profiles/calibration.yaml``).

Only pure computation: nothing here changes a target's calibration.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Anchor:
    """A per-iteration compute time a paper gives (or that follows from its numbers by stated arithmetic)."""

    model: str          # the zoo's profile name (``vgg16-cifar10``: VGG-16 at 32x32, 10 classes)
    batch: int          # per GPU
    gpu: str
    seconds: float
    paper: str
    source: str
    caveat: str = ""


# The compute times the four papers' texts give. MG-WFBP and P3 give none (their GPU times are plot-only).
ANCHORS: tuple[Anchor, ...] = (
    Anchor("resnet50", 32, "V100", 0.140, "SSD-SGD",
           "§4.5: \"optimal training speeds of batch size 32 and 64 ... (3657.22 images/sec vs 3682.12 images/sec)\" "
           "on 4 machines x 4 V100: 32 / (3657.22 / 16) = 0.140 s [derived]",
           "includes the intra-machine PCIe reduce (V100 PCIe, no NVLink)"),
    Anchor("resnet50", 64, "V100", 0.278, "SSD-SGD", "§4.5: 64 / (3682.12 / 16) = 0.278 s [derived]",
           "as above"),
    Anchor("alexnet", 128, "V100", 0.43, "Stanza",
           "Table 1: measured 1.99 s - estimated comm. 1.56 s [derived]; batch 128 (Table 5)",
           "measured minus estimated communication: holds PS overheads besides compute (V100 SXM2, p3.2xlarge)"),
    Anchor("vgg16", 64, "V100", 1.40, "Stanza", "Table 1: 4.93 s - 3.53 s [derived]; batch 64 (Table 5)",
           "as for AlexNet"),
    Anchor("vgg19", 64, "V100", 1.49, "Stanza", "Table 1: 5.15 s - 3.66 s [derived]; batch 64 (Table 5)",
           "as for AlexNet"),
    Anchor("inception_v3", 32, "V100", 0.14, "Stanza", "Table 1: 0.83 s - 0.69 s [derived]; batch 32 (Table 5)",
           "as for AlexNet"),
    Anchor("resnet152", 32, "V100", 0.32, "Stanza", "Table 1: 1.86 s - 1.54 s [derived]; batch 32 (Table 5)",
           "as for AlexNet"),
    Anchor("vgg16-cifar10", 128, "K80", 0.436, "Stanza",
           "§6.2: computation \"0.47h ... for 4 ... workers\" over 40 epochs x 97 iterations [derived]",
           "the hours have two digits (+-1 %)"),
    Anchor("vgg16-cifar10", 128, "K80", 0.469, "Stanza",
           "§6.2: computation \"0.25h for ... 8 workers\" over 40 epochs x 48 iterations [derived]",
           "the hours have two digits (+-2 %)"),
)

METHODS = ("gpu", "gpu_synced", "cpu")
METHOD_NAMES = {"gpu": "GPU whole iteration", "gpu_synced": "GPU per-layer synced", "cpu": "CPU profile (today)"}


def _profile(directory: Path, model: str, batch: int, device: str) -> dict | None:
    path = directory / f"{model}-b{batch}-{device}.json"
    return json.loads(path.read_text()) if path.exists() else None


def profile_seconds(profiles: Path, gpu_dir: Path, model: str, batch: int) -> dict[str, float | None]:
    """The seconds each method's ratio is taken from, for one model and batch (None where no profile exists)."""
    out: dict[str, float | None] = dict.fromkeys(METHODS)
    g = _profile(gpu_dir, model, batch, "cuda")
    if g is not None:
        out["gpu"] = (g.get("meta", {}).get("plain_iteration_seconds") or {}).get("median")
        out["gpu_synced"] = g["forward_seconds"] + g["backward_seconds"]
    c = _profile(profiles, model, batch, "cpu")
    if c is not None:
        out["cpu"] = c["forward_seconds"] + c["backward_seconds"]
    return out


@dataclass(frozen=True)
class Prediction:
    target: Anchor
    anchor: Anchor
    predicted: dict[str, float | None]   # method -> seconds

    def error(self, method: str) -> float | None:
        """predicted / paper - 1."""
        p = self.predicted[method]
        return None if p is None else p / self.target.seconds - 1


def predictions(profiles: Path, gpu_dir: Path, anchors: tuple[Anchor, ...] = ANCHORS) -> list[Prediction]:
    """Every anchor predicted from every other anchor of the same GPU type and another (model, batch):
    T_target = T_anchor x R(target) / R(anchor), R a method's seconds."""
    secs = {(a.model, a.batch): profile_seconds(profiles, gpu_dir, a.model, a.batch) for a in anchors}
    out = []
    for t in anchors:
        for a in anchors:
            if a.gpu != t.gpu or (a.model, a.batch) == (t.model, t.batch):
                continue
            st, sa = secs[(t.model, t.batch)], secs[(a.model, a.batch)]
            out.append(Prediction(t, a, {m: a.seconds * st[m] / sa[m] if st[m] and sa[m] else None
                                         for m in METHODS}))
    return out


def same_model_spread(anchors: tuple[Anchor, ...] = ANCHORS) -> list[tuple[Anchor, Anchor, float]]:
    """Pairs of statements of the same model, batch and GPU (no ratio needed): how far apart the paper's own
    numbers are, the floor any method's error can be judged against."""
    out = []
    for i, a in enumerate(anchors):
        for b in anchors[i + 1:]:
            if (a.model, a.batch, a.gpu) == (b.model, b.batch, b.gpu):
                out.append((a, b, b.seconds / a.seconds - 1))
    return out


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{v:+.0%}"


def _median_abs(values: list[float | None]) -> str:
    vals = [abs(v) for v in values if v is not None]
    return "—" if not vals else f"{statistics.median(vals):.0%} (n = {len(vals)})"


def _label(a: Anchor) -> str:
    return f"{a.model} b{a.batch} ({a.paper}) {a.seconds:g} s"


def render(profiles: Path, gpu_dir: Path, shown_gpu_dir: str = "profiles/gpu-h100") -> str:
    """The held-out table as markdown."""
    preds = predictions(profiles, gpu_dir)
    meta = {}
    for f in sorted(gpu_dir.glob("*.json")):
        meta = json.loads(f.read_text()).get("meta", {})
        break
    device = meta.get("device_name", "the lent GPU")
    lines = ["# Held-out check of the compute calibration", "",
             "Generated by `synclab reproduce --calibration-check` from the paper-given compute times listed below, "
             f"the GPU profiles in `{shown_gpu_dir}/` ({device}, measured {meta.get('date', '?')}, TF32 "
             f"{'off' if meta.get('tf32') == [False, False] else 'as recorded'}) and the CPU profiles in "
             "`profiles/`; do not edit by hand. Nothing here changes a target's calibration.", "",
             "Each paper-given time is predicted from every other paper-given time on the same GPU type: "
             "T = T_anchor x R(model) / R(anchor model), where R is a profile's time for that model and batch: "
             + "; ".join(f"**{METHOD_NAMES[m]}**" for m in METHODS)
             + " (the GPU's whole iteration, the GPU's per-layer synchronized forward + backward, and this VM's CPU "
               "forward + backward, the ratio `profiles/calibration.yaml` uses today for the P4000 rows). "
               "Error = predicted / paper - 1; — where a profile at that model and batch is missing.", "",
             "## Paper-given compute times", "",
             "| model | batch | GPU | seconds | paper | how | caveat |", "|---|---|---|---|---|---|---|"]
    for a in ANCHORS:
        lines.append(f"| {a.model} | {a.batch} | {a.gpu} | {a.seconds:g} | {a.paper} | {a.source} | {a.caveat} |")
    lines += ["", "## Summary: median absolute error", "",
              "| predicted from | " + " | ".join(METHOD_NAMES[m] for m in METHODS) + " |",
              "|---|" + "---|" * len(METHODS)]
    groups = [("SSD-SGD's ResNet-50 b32 and b64, each from the other (the two times with no parameter server in "
               "them)",
               [p for p in preds if p.anchor.paper == p.target.paper == "SSD-SGD"]),
              ("every other anchor (all pairs)", preds),
              ("SSD-SGD's ResNet-50 b32 (the anchor issue 51 names)",
               [p for p in preds if (p.anchor.model, p.anchor.batch) == ("resnet50", 32)]),
              ("Stanza Table 1 anchors only, among themselves",
               [p for p in preds if "Table 1" in p.anchor.source and "Table 1" in p.target.source])]
    for name, ps in groups:
        ps = [p for p in ps if all(p.predicted[m] is not None for m in METHODS)]  # the same pairs for every method
        lines.append(f"| {name} | " + " | ".join(_median_abs([p.error(m) for p in ps]) for m in METHODS) + " |")
    lines += ["", "Each row takes the pairs where every method has a profile (so the methods are compared on the same "
              "predictions). Stanza Table 1's times are measured time minus the data size over 10 Gbit/s, so they hold "
              "whatever of the parameter server's overheads that estimate leaves out besides compute; an error against "
              "them mixes those overheads with the ratio method's own error."]
    lines += ["", "## Every prediction", "",
              "| paper time predicted | from anchor | " + " | ".join(f"{METHOD_NAMES[m]}: s (error)" for m in METHODS)
              + " |", "|---|---|" + "---|" * len(METHODS)]
    for p in preds:
        cells = [("—" if p.predicted[m] is None else f"{p.predicted[m]:.3g} ({_pct(p.error(m))})") for m in METHODS]
        lines.append(f"| {_label(p.target)} | {_label(p.anchor)} | " + " | ".join(cells) + " |")
    spread = same_model_spread()
    if spread:
        lines += ["", "## The papers' own spread (same model, batch and GPU stated twice)", "",
                  "| model | GPU | first | second | second / first - 1 |", "|---|---|---|---|---|"]
        for a, b, d in spread:
            lines.append(f"| {a.model} b{a.batch} | {a.gpu} | {a.seconds:g} s ({a.source.split(':')[0]}) | "
                         f"{b.seconds:g} s | {d:+.1%} |")
    lines += ["", "K80, P4000 and M60: no paper gives a time for a second model on these GPUs (MG-WFBP and P3 give "
              "none; Stanza gives only VGG-16 on CIFAR-10 on the K80), so no cross-model prediction can be checked "
              "there.", ""]
    return "\n".join(lines)


GPU_DIR = "gpu-h100"


def page(root: Path) -> str:
    """``docs/results/calibration-check.md`` from the profiles checked in under ``root`` (the packaged ones when
    ``root`` has none): the page ``synclab reproduce --calibration-check`` writes."""
    profiles = root / "profiles"
    if not (profiles / GPU_DIR).is_dir():
        from synclab.resources import model_profiles_dir

        profiles = model_profiles_dir()
    return render(profiles, profiles / GPU_DIR, f"profiles/{GPU_DIR}")
