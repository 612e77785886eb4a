"""The paths that only a CUDA device exercises: skipped without one (CI has none).

``scripts/gpu/check.sh`` runs this file on a lent GPU machine. A ring all-reduce over a GPU tensor failed
there on 2026-11-26 (the transport's in-place sinks take host memory only) before the ring staged GPU tensors
through the host; these tests hold that, and that every strategy trains a real model on CUDA.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from support.rings import ring_over_transports

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("engine", ["grpc", "tcp"])
@pytest.mark.parametrize("world", [2, 3])
def test_ring_allreduce_of_a_gpu_tensor_sums_in_place(world, engine):
    g = torch.Generator().manual_seed(world)
    data = [torch.randn(40_000, generator=g).cuda() for _ in range(world)]
    want = torch.stack([d.cpu() for d in data]).sum(0)
    results = ring_over_transports(data, pieces=2, streamed=True, slow_rank0=False, engine=engine)
    for r in results:
        assert r.device.type == "cuda"
        torch.testing.assert_close(r.cpu(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["wfbp", "mgwfbp", "synceasgd", "ps", "p3", "stanza", "ssdsgd"])
def test_every_strategy_trains_on_cuda(strategy, tmp_path):
    out = tmp_path / strategy
    extra = ["--set", "strategy.fc_workers=1"] if strategy == "stanza" else []
    r = subprocess.run([sys.executable, "-m", "synclab", "run", str(REPO / "scripts/gpu/real_compute.yaml"),
                        "--set", f"strategy.name={strategy}", "--set", "model.name=smallcnn",
                        "--set", "run.iterations=4", "--set", "run.warmup=1", "--out", str(out), "--no-report", *extra],
                       capture_output=True, text=True, timeout=300, cwd=REPO)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["iteration_seconds"]["mean"] > 0
