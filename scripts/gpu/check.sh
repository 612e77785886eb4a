#!/bin/bash
# What to run on a lent GPU machine (one call; ~5 min on an H100): the checks of SyncLab that need CUDA.
#   1. the zoo's GPU profiles, true FP32 (synclab profile --zoo --in-process --tf32 off --plain 20)
#      -> profiles/gpu-<gpu>/ here (not replayed by default: set SYNCLAB_MODEL_PROFILES_DIR to use them);
#      skipped with SKIP_ZOO=1 (done once per GPU kind);
#   2. VGG-16 on CIFAR-10 at batch 128 (Stanza's calibration model) and the TF32 effect on three models
#      (skipped with SKIP_PROFILES=1);
#   3. real ResNet-50 training on CUDA through the whole runtime, 2 workers on one GPU, for wfbp, mgwfbp
#      (its own per-tensor measurement synchronizes the device, §5.1) and ps;
#   4. the CUDA-only tests (tests/gpu: a ring all-reduce of GPU tensors, every strategy training on CUDA).
# Packages the machine lacks travel as wheels: run scripts/gpu/wheels.sh here first and carry .whl.
# Writes into $OUT (the device tool's folder; any folder otherwise): log.txt, profiles.tgz, runs.tgz.
set -u
OUT=${OUT:-/tmp/gpu-check}; mkdir -p "$OUT"; W=/tmp/gpu-check-work; rm -rf $W; mkdir -p $W/prof $W/runs
if [ -d .whl ]; then  # scripts/gpu/wheels.sh: what the machine's image lacks
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1 PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD/src
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi -L; python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name(0))"
if [ "${SKIP_ZOO:-0}" != 1 ]; then
  python3 -m synclab profile --zoo --device cuda --in-process --tf32 off --plain 20 --out-dir $W/prof
fi
[ "${SKIP_PROFILES:-0}" = 1 ] || python3 - "$W/prof" <<'PY'
import json, sys, torch
from synclab.compute.profile import parse_model_profile
from synclab.compute.profiler import measure_plain_iteration_seconds, measure_profile
torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
opts = {"image_size": 32, "num_classes": 10}
p = measure_profile("vgg16", batch_size=128, device="cuda", options=opts).model_dump(mode="json")
p["meta"]["tf32"] = [False, False]
p["meta"]["plain_iteration_seconds"] = measure_plain_iteration_seconds("vgg16", batch_size=128, device="cuda",
                                                                       iterations=20, options=opts)
open(f"{sys.argv[1]}/vgg16-cifar10-b128-cuda.json", "w").write(parse_model_profile(p).to_json())
print(f"vgg16-cifar10 b128: forward+backward {(p['forward_seconds'] + p['backward_seconds']) * 1e3:.2f} ms, "
      f"plain iteration {p['meta']['plain_iteration_seconds']['median'] * 1e3:.2f} ms")
for model, batch in (("resnet50", 32), ("vgg19", 32), ("vgg16", 64)):
    row = {}
    for tf32 in (False, True):
        torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = tf32
        row[tf32] = measure_plain_iteration_seconds(model, batch_size=batch, device="cuda", iterations=20)["median"]
    print(f"TF32 {model} b{batch}: fp32 {row[False] * 1e3:.2f} ms, tf32 {row[True] * 1e3:.2f} ms, "
          f"ratio {row[False] / row[True]:.2f}")
PY
for s in wfbp mgwfbp ps; do
  echo "== real compute on cuda: $s"
  timeout 100 python3 -m synclab run scripts/gpu/real_compute.yaml --set strategy.name=$s --out $W/runs/$s --no-report \
    2>&1 | tail -5
  python3 -c "import json,sys; s=json.load(open('$W/runs/$s/summary.json')); print('$s', 'mean iteration', \
    round(s['iteration_seconds']['mean'], 4), 's')" || echo "$s: no summary"
  rm -f $W/runs/$s/params.pt
done
echo "== tests/gpu"; python3 -m pytest -q -p no:cacheprovider tests/gpu -o timeout=150 2>&1 | tail -15
tar czf "$OUT/profiles.tgz" -C $W prof; tar czf "$OUT/runs.tgz" -C $W runs
