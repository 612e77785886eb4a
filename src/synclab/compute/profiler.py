"""``synclab profile MODEL``: measure a model's per-tensor forward and backward times (a model profile).

Method (MG-WFBP §5.1 measures per-layer backward times the same way):

* Forward. A forward pre-hook on every module that owns parameters stamps the
  moment that layer starts; a layer's forward time is the span from its stamp
  to the next stamp (any layer) or to the end of the loss — so the parameter-free
  work after a layer (activation, pooling, concatenation) is charged to it and
  the per-layer times add up to the whole forward pass. Work before the first
  layer goes to the first layer. A layer's time is split over its tensors in
  proportion to their sizes (replay gates whole layers, so the split only
  matters for display).
* Backward. ``register_post_accumulate_grad_hook`` stamps the moment each
  gradient is ready; :func:`~synclab.compute.profile.backward_times` turns the
  stamps into per-tensor t_b (MG-WFBP eq. 6), the rule the ``mgwfbp`` strategy
  measures with too: in backward order, each tensor's span from the latest
  stamp of the tensors after it (or from the start of ``backward()``) to its
  own, none when it was ready earlier (a conv's or norm's weight comes before
  its bias); what remains after the last stamp goes to tensor 0.
* Update. After backward, one ``torch.optim.SGD`` step (momentum 0.9, weight
  decay 1e-4: the arithmetic of every worker-side update in SyncLab) is timed
  as a whole (``update_seconds``, median); its learning rate is tiny so the
  profiled model does not drift.
* On CUDA every stamp is taken after ``torch.cuda.synchronize()`` (§5.1: "we
  synchronize ... to measure the time of each layer"), which serialises the GPU
  queue; the figures are what each layer costs on its own.
* ``warmup`` untimed iterations, then ``iterations`` timed ones; each tensor's
  time is its median over the timed ones, scaled by one factor per pass so that
  the tensors add up to the median forward (backward) total; the top-level
  totals are those sums (so replay takes exactly them), and ``spread`` reports the
  per-iteration totals' median, min, max and relative spread, the noise a user
  should expect.

The CONV/FC boundary (Stanza §4.2) comes from :func:`synclab.models.conv_fc_boundary`;
``activations_per_sample`` is the size of ``features``' flattened output.
"""

from __future__ import annotations

import datetime as _dt
import platform
import statistics
import subprocess
import time
from collections.abc import Callable

import torch

from synclab.compute.profile import ModelProfile, backward_times, kind_of, parse_model_profile


def _device_meta(device: torch.device) -> dict:
    meta: dict = {"torch": torch.__version__, "host": platform.node(), "date": _dt.date.today().isoformat()}
    if device.type == "cuda":
        meta["device_name"] = torch.cuda.get_device_name(device)
        meta["cuda"] = torch.version.cuda
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=10)
            meta["driver"] = out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
        except (OSError, subprocess.SubprocessError):
            meta["driver"] = None
    else:
        name = platform.processor() or platform.machine()
        try:
            for line in open("/proc/cpuinfo"):
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
        except OSError:
            pass
        meta["device_name"] = name
        meta["threads"] = torch.get_num_threads()
    return meta


def _medians_to_median_total(runs: list[list[float]]) -> list[float]:
    """Per-tensor medians, scaled by one factor so that they sum to the median per-iteration total.

    The sum of per-tensor medians runs below the median iteration (noise in
    different tensors does not line up), and replay must take as long as a
    typical measured iteration; the relative weights of the tensors stay the medians'.
    """
    med = [statistics.median(run[i] for run in runs) for i in range(len(runs[0]))]
    total, summed = statistics.median(sum(run) for run in runs), sum(med)
    return [m * total / summed for m in med] if summed > 0 else med


def measure_profile(model_name: str, *, batch_size: int, device: str = "cpu", iterations: int = 10,
                    warmup: int = 3, options: dict | None = None, seed: int = 0,
                    progress: Callable[[int, int], None] | None = None) -> ModelProfile:
    """Build ``model_name``, run ``warmup + iterations`` training iterations on synthetic data, and profile them."""
    from synclab.core import param_layout
    from synclab.data import make_dataset
    from synclab.models import build_model, conv_fc_boundary, model_input_spec

    if iterations < 1 or warmup < 0:
        raise ValueError(f"iterations must be >= 1 and warmup >= 0, got {iterations} and {warmup}")
    options = dict(options or {})
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("--device cuda, but torch sees no CUDA device")
    torch.manual_seed(seed)
    model = build_model(model_name, **options).to(dev)
    model.train()
    infos, tensors, layers = param_layout(model)
    loss_fn = torch.nn.CrossEntropyLoss()
    data = make_dataset("synthetic", model_input_spec(model_name, **options), seed=seed, size=batch_size)
    x, y = data.batch(0, 0, 1, batch_size)
    x, y = x.to(dev), y.to(dev)

    def now() -> float:
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        return time.perf_counter()

    stamps: list[tuple[float, int]] = []          # (time, layer) of forward pre-hooks, this iteration
    ready = [float("nan")] * len(tensors)
    handles = [m.register_forward_pre_hook(lambda mod, args, li=li: stamps.append((now(), li)))
               for li, m in enumerate(layers)]
    for i, p in enumerate(tensors):
        handles.append(p.register_post_accumulate_grad_hook(lambda p, i=i: ready.__setitem__(i, now())))

    layer_tensors: list[list[int]] = [[] for _ in layers]
    for info in infos:
        layer_tensors[info.layer].append(info.index)
    fwd_runs: list[list[float]] = []
    bwd_runs: list[list[float]] = []
    upd_runs: list[float] = []
    # The step a worker that owns its optimizer takes after backward; a tiny lr keeps the model where it is.
    opt = torch.optim.SGD(tensors, lr=1e-9, momentum=0.9, weight_decay=1e-4)
    try:
        for it in range(warmup + iterations):
            stamps.clear()
            ready[:] = [float("nan")] * len(tensors)
            model.zero_grad(set_to_none=True)
            t0 = now()
            out = model(x)
            loss = loss_fn(out, y)
            t_loss = now()
            loss.backward()
            t_end = now()
            opt.step()
            t_upd = now()
            if it < warmup:
                if progress:
                    progress(it + 1, warmup + iterations)
                continue
            missing = [infos[i].name for i, t in enumerate(ready) if t != t]
            if missing:
                raise RuntimeError(f"no gradient reached {', '.join(missing[:5])}: the model does not use every "
                                   f"parameter in training mode, so it cannot be profiled per tensor")
            per_layer = [0.0] * len(layers)
            if stamps:
                per_layer[stamps[0][1]] += stamps[0][0] - t0
            for (t, li), (t_next, _) in zip(stamps, stamps[1:] + [(t_loss, -1)]):
                per_layer[li] += t_next - t
            fwd = [0.0] * len(tensors)
            for li, idx in enumerate(layer_tensors):
                total = sum(infos[i].numel for i in idx)
                for i in idx:
                    fwd[i] = per_layer[li] * infos[i].numel / total
            fwd_runs.append(fwd)
            bwd_runs.append(backward_times(t_loss, ready, end=t_end))
            upd_runs.append(t_upd - t_end)
            if progress:
                progress(it + 1, warmup + iterations)
    finally:
        for h in handles:
            h.remove()

    fwd_med = _medians_to_median_total(fwd_runs)
    bwd_med = _medians_to_median_total(bwd_runs)
    owner = {id(p): m for m in layers for p in m.parameters(recurse=False)}
    rows = [{"name": info.name, "params": info.numel, "forward_seconds": round(f, 9), "backward_seconds": round(b, 9),
             "kind": kind_of(owner[id(t)])}
            for info, t, f, b in zip(infos, tensors, fwd_med, bwd_med)]

    def spread(totals: list[float]) -> dict:
        med = statistics.median(totals)
        return {"median": med, "min": min(totals), "max": max(totals),
                "relative_spread": (max(totals) - min(totals)) / med if med > 0 else 0.0}

    profile = {
        "model": model_name, "batch_size": batch_size, "device": dev.type, "dtype": "float32",
        "forward_seconds": sum(r["forward_seconds"] for r in rows),
        "backward_seconds": sum(r["backward_seconds"] for r in rows),
        "update_seconds": round(statistics.median(upd_runs), 9),
        "tensors": rows, "options": options,
        "meta": {**_device_meta(dev), "iterations": iterations, "warmup": warmup,
                 "method": "per-layer pre-hook spans (forward), gradient-ready times to MG-WFBP eq. 6 t_b, a "
                           "tensor ready once every later one is (backward), "
                           "torch.optim.SGD step with momentum and weight decay (update); medians"},
        "spread": {"forward_seconds": spread([sum(r) for r in fwd_runs]),
                   "backward_seconds": spread([sum(r) for r in bwd_runs]),
                   "update_seconds": spread(upd_runs)},
    }
    b = conv_fc_boundary(model)
    if b is not None:
        model.eval()  # one pass for the shape: BatchNorm cannot train on one sample
        with torch.no_grad():
            feats = model.features(x[:1])
        model.train()
        profile["boundary"] = {
            "activations_per_sample": int(feats.numel()),
            "conv_params": sum(r["params"] for r in rows[:b]), "fc_params": sum(r["params"] for r in rows[b:]),
            "conv_seconds": sum(r["forward_seconds"] + r["backward_seconds"] for r in rows[:b]),
            "fc_seconds": sum(r["forward_seconds"] + r["backward_seconds"] for r in rows[b:]),
        }
    return parse_model_profile(profile, source=f"profile of {model_name}")


def measure_update_seconds(model_name: str, *, device: str = "cpu", iterations: int = 10, warmup: int = 3,
                           options: dict | None = None, seed: int = 0) -> tuple[float, dict]:
    """One ``torch.optim.SGD`` step over the model's parameters with random gradients, alone: (median, spread).

    The same step :func:`measure_profile` times after each backward pass; on its
    own it needs no data and no forward/backward, so ``update_seconds`` can be
    added to a profile measured before it was part of the format
    (``synclab profile --zoo --update-only``). The step's cost does not
    depend on the batch size.
    """
    from synclab.models import build_model

    dev = torch.device(device)
    torch.manual_seed(seed)
    model = build_model(model_name, **dict(options or {})).to(dev)
    params = [p for p in model.parameters() if p.requires_grad]
    for p in params:
        p.grad = torch.randn_like(p)
    opt = torch.optim.SGD(params, lr=1e-9, momentum=0.9, weight_decay=1e-4)
    spread = _timed(opt.step, dev, iterations, warmup)
    return spread["median"], spread


def _timed(step: Callable[[], object], dev: torch.device, iterations: int, warmup: int) -> dict:
    """Run ``step`` ``warmup + iterations`` times, timing the last ``iterations`` alone (a GPU synchronized at
    both ends of each): median, min, max and relative spread of those times."""
    times = []
    for it in range(warmup + iterations):
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        t0 = time.perf_counter()
        step()
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        if it >= warmup:
            times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    return {"median": med, "min": min(times), "max": max(times),
            "relative_spread": (max(times) - min(times)) / med if med > 0 else 0.0}


def measure_plain_iteration_seconds(model_name: str, *, batch_size: int, device: str = "cpu", iterations: int = 10,
                                    warmup: int = 3, options: dict | None = None, seed: int = 0) -> dict:
    """Whole training iterations (forward, backward, SGD step) with no per-layer stamps: their median and spread.

    :func:`measure_profile` synchronizes a GPU at every layer and tensor (MG-WFBP §5.1), which serializes
    kernels that would otherwise overlap; this is the same iteration timed only at its ends, so the cost of
    the per-layer synchronization can be read off (``synclab profile --zoo --in-process --plain``) and a calibration can use the
    iteration as a framework runs it.
    """
    from synclab.data import make_dataset
    from synclab.models import build_model, model_input_spec

    options = dict(options or {})
    dev = torch.device(device)
    torch.manual_seed(seed)
    model = build_model(model_name, **options).to(dev)
    model.train()
    loss_fn = torch.nn.CrossEntropyLoss()
    x, y = make_dataset("synthetic", model_input_spec(model_name, **options), seed=seed, size=batch_size).batch(
        0, 0, 1, batch_size)
    x, y = x.to(dev), y.to(dev)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=1e-9, momentum=0.9,
                          weight_decay=1e-4)

    def step() -> None:
        model.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()

    return {**_timed(step, dev, iterations, warmup), "iterations": iterations}
