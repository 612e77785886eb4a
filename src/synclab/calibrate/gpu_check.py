"""Re-check the replay calibration against GPU profiles of the zoo (``synclab calibrate gpu-check``; issue 13
item 7): the text of ``docs/results/gpu-check.md``.

The calibration (``profiles/calibration.yaml``) takes the papers' GPU times where the papers give them and,
where they do not, carries one measured time to other models by the ratio of this VM's CPU profiles, or to
other GPUs by datasheet FP32 peaks. A lent GPU (here an H100, ``scripts/gpu/check.sh``) can test those
steps, not replace them: it is none of the papers' GPUs. This reads the GPU profiles
(``profiles/gpu-<name>/``) beside the checked-in CPU ones and reports, all from files, nothing typed:

1. per model and batch: the CPU profile's forward + backward, the GPU's with per-layer synchronization
   (the profiler's, MG-WFBP §5.1) and a whole iteration without it (``meta.plain_iteration_seconds``);
2. the calibration rows made by a ratio: model-to-model ratios on the CPU (what the rows use), on the GPU,
   and by multiply-adds where the rows cite them;
3. the shape of backward that replay keeps from the CPU profile: the share of gradient bytes ready at a
   quarter, half and three quarters of backward, CPU against GPU (what wait-free back-propagation overlaps);
4. what that shape does to the simulated iteration (``synclab simulate``: the same calibrated total, the
   CPU's per-tensor shares against the GPU's), for the settings the reproduction targets use.
5. with ``--compare-dir``, another GPU's profiles beside these: each model's whole iteration on both and its
   ratio to ResNet-50 b32 on both (the ratio the derived rows of ``calibration.yaml`` carry), i.e. how much those
   rows depend on which GPU measured them.

Part 4 is the only one that runs anything (``synclab simulate`` as subprocesses). In a checkout the check is two
steps: :func:`record` runs the simulations and writes what they gave, with the folders it read, to
``docs/gpu/gpu-check.json`` (:data:`RECORD`); :func:`page` renders ``docs/results/gpu-check.md`` from that record
and the checked-in profiles alone (pure: it starts no process), so ``synclab docs`` and the freshness test
re-render it like every other generated page.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from synclab.resources import package_root, packaged


class GpuCheckError(ValueError):
    """No GPU profiles where the check was told to look; the message names the folder."""

# Forward multiply-adds per sample that the calibration rows cite (MG-WFBP Table 4; He et al. 2016 Table 1).
MACS_G = {"resnet50": 3.9, "resnet152": 11.61, "densenet161": 7.85, "vgg19": 19.6}
# (model, batch) pairs the calibration carries from ResNet-50 b32 by the CPU profiles' ratio (calibration.yaml).
RATIO_ROWS = [("vgg19", 32), ("inception_v3", 32), ("sockeye", 32)]
# Settings of the reproduction targets, simulated with both shapes: (label, model, batch, seconds, sets,
# strategies).
SIM_POINTS = [
    ("MG-WFBP Fig. 6-8 (K80, 1 Gbit/s, 8 workers)", "resnet50", 32, 0.448,
     ["network.rate=1gbit", "cluster.workers=8", "cluster.ps_shards=0"], ["wfbp", "mgwfbp"]),
    ("P3 Fig. 7(c) (P4000, 10 Gbit/s, 4 machines)", "vgg19", 32, 1.032, ["network.rate=10gbit", "cluster.workers=4",
                                                                         "cluster.ps_shards=4"], ["ps", "p3"]),
    ("P3 Fig. 7(a) (P4000, 4 Gbit/s, 4 machines)", "resnet50", 32, 0.370, ["network.rate=4gbit", "cluster.workers=4",
                                                                           "cluster.ps_shards=4"], ["ps", "p3"]),
]


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def total(p: dict) -> float:
    return p["forward_seconds"] + p["backward_seconds"]


def plain(p: dict) -> float | None:
    return (p["meta"].get("plain_iteration_seconds") or {}).get("median")


def bytes_ready_at(p: dict, fractions=(0.25, 0.5, 0.75)) -> list[float]:
    """Share of gradient bytes ready once ``f`` of backward has passed (tensors become ready last to first)."""
    rows = p["tensors"][::-1]
    t_all = sum(r["backward_seconds"] for r in rows) or 1.0
    b_all = sum(r["params"] for r in rows)
    out = []
    for f in fractions:
        t = b = 0.0
        for r in rows:
            t += r["backward_seconds"]
            if t > f * t_all + 1e-15:
                break
            b += r["params"]
        out.append(b / b_all)
    return out


RECORD = "docs/gpu/gpu-check.json"  # part 4's simulations and the folders the page was made from


def simulate(spec_sets: list[str], strategy: str, model: str, batch: int, profile: Path, scale: float) -> float:
    with tempfile.TemporaryDirectory() as d:
        cmd = [sys.executable, "-m", "synclab", "simulate", str(packaged("examples/quickstart.yaml")), "--out", d,
               "--set", f"strategy.name={strategy}", "--set", "compute.mode=replay", "--set", f"model.name={model}",
               "--set", f"model.batch_size={batch}",
               "--set", f"compute.profile={profile}", "--set", f"compute.scale={scale}", "--set", "run.iterations=10",
               "--set", "run.warmup=2"]
        for s in spec_sets:
            cmd += ["--set", s]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(f"{' '.join(cmd)}: {r.stdout[-800:]}{r.stderr[-800:]}")
        return json.loads((Path(d) / "summary.json").read_text())["iteration_seconds"]["mean"]


def _shown(path: Path, base: Path | None = None) -> Path:
    """A folder as the report names it: relative to ``base`` (default: the package root, where ``profiles/``
    lies) when it lies inside it."""
    base = base or package_root()
    for p, root in ((Path(os.path.abspath(path)), Path(os.path.abspath(base))), (path.resolve(), base.resolve())):
        if p.is_relative_to(root):  # as written first (a checkout's links kept), then with links followed
            return p.relative_to(root)
    return path.resolve()


def simulations(gpu_dir: Path | None = None, cpu_dir: Path | None = None, *,
                track=lambda jobs, description: jobs) -> list[dict]:
    """Part 4's measurements: each reproduction setting of :data:`SIM_POINTS` simulated with the calibrated
    seconds spread by the CPU profile and by the GPU profile (mean iteration, s). Starts ``synclab simulate``
    processes; :class:`GpuCheckError` when a profile the settings need is missing."""
    gpu_dir = (gpu_dir or packaged("profiles/gpu-h100")).resolve()
    cpu_dir = cpu_dir or packaged("profiles")
    gpu, cpu = _by_name(gpu_dir.glob("*.json")), _by_name(cpu_dir.glob("*-cpu.json"))
    out = []
    jobs = [(lab, m, b, sec, sets, s) for lab, m, b, sec, sets, strategies in SIM_POINTS for s in strategies]
    for lab, m, b, sec, sets, s in track(jobs, description="simulating"):
        if (m, b) not in cpu or (m, b) not in gpu:
            raise GpuCheckError(f"part 4 needs {m} b{b} profiles in {cpu_dir} and {gpu_dir}")
        cf, cp = cpu[(m, b)]
        gf, gp = gpu[(m, b)]
        out.append({"setting": lab, "strategy": s, "model": m, "batch": b,
                    "cpu_shape_s": simulate(sets, s, m, b, cf, sec / total(cp)),
                    "gpu_shape_s": simulate(sets, s, m, b, gf, sec / total(gp))})
    return out


def _by_name(files) -> dict:
    """GPU or CPU profiles keyed by (model, batch): the file's model name (vgg16-cifar10 is a vgg16 with
    options) and its batch size."""
    return {(f.name.rsplit("-b", 1)[0], p["batch_size"]): (f, p) for f in sorted(files) for p in [load(f)]}


def record(root: Path, gpu_dir: Path | None = None, cpu_dir: Path | None = None, *, compare_dir: Path | None = None,
           no_sim: bool = False, track=lambda jobs, description: jobs) -> Path:
    """Run part 4's simulations (none with ``no_sim``) and write :data:`RECORD` under ``root`` (atomically): the
    GPU and comparison folders (relative to the checkout's ``src/synclab`` where they lie in ``root``) and each
    simulation's result. The folders are checked first, so a bad one fails before anything runs or is written."""
    gpu_dir = (gpu_dir or packaged("profiles/gpu-h100")).resolve()
    for d in [gpu_dir, *([compare_dir] if compare_dir else [])]:
        if not any(Path(d).glob("*.json")):
            raise GpuCheckError(f"no GPU profiles in {d} (scripts/gpu/check.sh writes them)")
    sims = None if no_sim else simulations(gpu_dir, cpu_dir, track=track)

    def rel(p: Path | None) -> str | None:  # as page() reads it: from the checkout's src/synclab
        if p is None:
            return None
        p = p.resolve()
        return os.path.relpath(p, (root / "src" / "synclab").resolve()) if p.is_relative_to(root.resolve()) else str(p)

    data = {"gpu_dir": rel(gpu_dir), "compare_dir": rel(compare_dir), "simulations": sims}
    path = root / RECORD
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    tmp.replace(path)
    return path


def page(root: Path) -> str:
    """``docs/results/gpu-check.md`` from :data:`RECORD` and the profiles checked in under ``root`` (pure: no
    simulation runs; part 4 is the recorded one)."""
    path = root / RECORD
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing (synclab calibrate gpu-check writes it)")
    data = json.loads(path.read_text())
    base = root / "src" / "synclab"  # where a checkout's profiles/ lies (root/profiles links there)

    def folder(p: str | None) -> Path | None:
        return None if p is None else (base / p if not Path(p).is_absolute() else Path(p))

    return report(folder(data["gpu_dir"]), base / "profiles", compare_dir=folder(data.get("compare_dir")),
                  sims=data.get("simulations"), no_sim=data.get("simulations") is None,
                  calibration=base / "profiles" / "calibration.yaml", base=base)


def compare_section(gpu: dict, name: str, other: dict, other_dir: Path, base: Path | None = None) -> list[str]:
    """Part 5: this GPU's whole iterations beside another GPU's, and each model's ratio to ResNet-50 b32 on both."""
    if not other:
        raise GpuCheckError(f"no GPU profiles in {other_dir}")
    meta = next(iter(other.values()))[1]["meta"]
    oname = meta.get("device_name", "GPU").replace("NVIDIA ", "").split()[0]
    r50 = [plain(d[("resnet50", 32)][1]) if ("resnet50", 32) in d else None for d in (gpu, other)]
    lines = ["", f"## 5. Against another GPU: the {oname} (`{_shown(other_dir, base)}/`, measured "
             f"{meta.get('date')})", "",
             "Whole iterations (ms) on both, and each model's ratio to ResNet-50 b32 on both: the derived rows of "
             "`calibration.yaml` carry a paper's ResNet-50 time by that ratio, so its change from one GPU to the "
             "other is how much those rows depend on the GPU that measured it.", "",
             f"| model | batch | {name} (ms) | {oname} (ms) | {oname} ÷ {name} | ratio to ResNet-50 b32, {name} | "
             f"same, {oname} | change |", "|---|---|---|---|---|---|---|---|"]
    for key in sorted(set(gpu) & set(other)):
        t, o = plain(gpu[key][1]), plain(other[key][1])
        if not (t and o):
            continue
        ratios = " – | – | – |"
        if all(r50):
            rt, ro = t / r50[0], o / r50[1]
            ratios = f" {rt:.3f} | {ro:.3f} | {ro / rt - 1:+.1%} |"
        lines.append(f"| {key[0]} | {key[1]} | {t * 1e3:.1f} | {o * 1e3:.1f} | {o / t:.3f} |{ratios}")
    return lines


def report(gpu_dir: Path | None = None, cpu_dir: Path | None = None, *, no_sim: bool = False,
           compare_dir: Path | None = None, track=lambda jobs, description: jobs, sims: list[dict] | None = None,
           calibration: Path | None = None, base: Path | None = None) -> str:
    """The page: GPU profiles of ``gpu_dir`` (default: the packaged ``profiles/gpu-h100``) against the CPU ones
    and ``calibration`` (default: the packaged ``profiles/calibration.yaml``); part 4 shows ``sims`` (what
    :func:`simulations` returned) or, without them, simulates now (skipped with ``no_sim``); part 5 sets
    ``compare_dir``'s GPU beside this one. Folders are named relative to ``base`` (default: the package root).
    :class:`GpuCheckError` when a folder holds no GPU profile."""
    gpu_dir = gpu_dir or packaged("profiles/gpu-h100")
    cpu_dir = cpu_dir or packaged("profiles")
    by_name = _by_name
    gpu, cpu = by_name(gpu_dir.glob("*.json")), by_name(cpu_dir.glob("*-cpu.json"))
    if not gpu:
        raise GpuCheckError(f"no GPU profiles in {gpu_dir} (scripts/gpu/check.sh writes them)")
    any_gpu = next(iter(gpu.values()))[1]["meta"]
    full = any_gpu.get("device_name", "GPU")
    name = full.replace("NVIDIA ", "").split()[0]  # "H100"
    tf32 = ("off: true FP32, as on the papers' K80, P4000, M60 and V100" if any_gpu.get("tf32") == [False, False]
            else "on (not the papers' FP32)")
    lines = [f"# The calibration against a lent GPU ({full})", "",
             f"Generated by `synclab calibrate gpu-check` from `{_shown(gpu_dir, base)}/` "
             f"(measured {any_gpu.get('date')}, torch {any_gpu.get('torch')}, CUDA {any_gpu.get('cuda')}, driver "
             f"{any_gpu.get('driver')}, TF32 {tf32}) and the checked-in CPU profiles (`profiles/*-cpu.json`, this VM). "
             f"The {name} is none of the papers' GPUs: it tests the calibration's steps (model-to-model ratios, the "
             "per-tensor shape replay keeps), it does not replace a paper's number. Replay keeps the CPU profiles "
             f"by default; `SYNCLAB_MODEL_PROFILES_DIR={_shown(gpu_dir, base)}` replays these instead.", "",
             "## 1. Per model: CPU profile, GPU with per-layer sync, GPU whole iteration", "",
             "| model | batch | CPU fwd+bwd (s) | GPU fwd+bwd, synced per layer (ms) | GPU whole iteration (ms) "
             "| sync cost | CPU ÷ GPU |", "|---|---|---|---|---|---|---|"]
    for (m, b), (_, p) in sorted(gpu.items()):
        c = cpu.get((m, b))
        it = plain(p)
        synced = total(p) + (p.get("update_seconds") or 0)
        lines.append(f"| {m} | {b} | {total(c[1]):.2f} |" if c else f"| {m} | {b} | – |")
        lines[-1] += (f" {total(p) * 1e3:.1f} | {it * 1e3:.1f} | {synced / it - 1:+.0%} |" if it else
                      f" {total(p) * 1e3:.1f} | – | – |")
        lines[-1] += f" {total(c[1]) / it:.0f}× |" if c and it else " – |"
    lines += ["", "*Sync cost*: (forward + backward + update, each layer synchronized) ÷ the whole iteration − 1, "
              "what the profiler's per-layer synchronization adds. *GPU whole iteration* includes the SGD step.", ""]

    import yaml

    rows = yaml.safe_load((calibration or packaged("profiles/calibration.yaml")).read_text())["entries"]
    lines += [f"## 1b. Every calibration row against the {name}", "",
              "Each row of `profiles/calibration.yaml` with a GPU profile at its model and batch: the row's seconds "
              f"÷ the {name}'s whole iteration, i.e. how many times slower than the {name} the row makes the "
              "paper's GPU. Rows of one GPU should agree with each other where the models run equally near peak.", "",
              f"| model | GPU | batch | row (s) | kind | {name} (ms) | row ÷ {name} |",
              "|---|---|---|---|---|---|---|"]
    for e in rows:
        g = gpu.get((e["model"], e["batch_size"]))
        if g and plain(g[1]):
            lines.append(f"| {e['model']} | {e['gpu']} | {e['batch_size']} | {e['seconds']} | {e['kind']} | "
                         f"{plain(g[1]) * 1e3:.1f} | {e['seconds'] / plain(g[1]):.1f}× |")
    lines.append("")
    r50c, r50g = cpu.get(("resnet50", 32)), gpu.get(("resnet50", 32))
    lines += ["## 2. The rows carried by a ratio to ResNet-50 b32", "",
              "`calibration.yaml` carries P3's P4000 ResNet-50 time to other models by the CPU profiles' ratio. "
              "Ratios of iteration times to ResNet-50 at batch 32:", "",
              "| model | batch | CPU (what the row uses) | GPU whole iteration | GPU synced | multiply-adds |",
              "|---|---|---|---|---|---|"]
    for m, b in RATIO_ROWS + [("resnet152", 32), ("densenet161", 32), ("vgg16", 64)]:
        c, g = cpu.get((m, b)), gpu.get((m, b))
        if not (g and r50g):
            continue
        cr = f"{total(c[1]) / total(r50c[1]):.2f}" if c and r50c else "–"
        macs = f"{MACS_G[m] / MACS_G['resnet50'] * b / 32:.2f}" if m in MACS_G else "–"
        lines.append(f"| {m} | {b} | {cr} | {plain(g[1]) / plain(r50g[1]):.2f} | {total(g[1]) / total(r50g[1]):.2f} "
                     f"| {macs} |")
    lines += ["", "## 3. The shape of backward: gradient bytes ready at a quarter, half, three quarters of it", "",
              "| model | batch | CPU 25 / 50 / 75 % | GPU 25 / 50 / 75 % |", "|---|---|---|---|"]
    for (m, b), (_, p) in sorted(gpu.items()):
        c = cpu.get((m, b))
        if not c or len(p["tensors"]) < 4:
            continue
        fmt = lambda xs: " / ".join(f"{x:.0%}" for x in xs)  # noqa: E731
        lines.append(f"| {m} | {b} | {fmt(bytes_ready_at(c[1]))} | {fmt(bytes_ready_at(p))} |")
    if sims is None and not no_sim:
        sims = simulations(gpu_dir, cpu_dir, track=track)
    if sims is not None:
        lines += ["", "## 4. The shape's effect on the simulated iteration (same calibrated total)", "",
                  "`synclab simulate` with the calibrated seconds of `calibration.yaml` spread over the tensors by "
                  "the CPU profile (as the reproduction targets do) or by the GPU profile; mean iteration (s):", "",
                  "| setting | strategy | CPU shape | GPU shape | GPU ÷ CPU |", "|---|---|---|---|---|"]
        for r in sims:
            tc, tg = r["cpu_shape_s"], r["gpu_shape_s"]
            lines.append(f"| {r['setting']} | {r['strategy']} | {tc:.3f} | {tg:.3f} | {tg / tc:.3f} |")
    if compare_dir:
        lines += compare_section(gpu, name, by_name(compare_dir.glob("*.json")), compare_dir, base)
    return "\n".join(lines) + "\n"


