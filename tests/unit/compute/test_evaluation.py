"""run.eval_every's pieces: scoring leaves training untouched; which iterations; the eval.csv record."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from synclab.compute.evaluation import EvalLog, HeldOutScore, eval_iterations, evaluate, read_eval, summarize_eval

CPU = torch.device("cpu")


def test_scores_a_known_model():
    model = nn.Linear(2, 2, bias=False)
    with torch.no_grad():
        model.weight.copy_(torch.eye(2))
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    score = evaluate(model, x, torch.tensor([0, 1, 1, 1]), CPU, chunk=3)
    assert score.accuracy == 0.75 and score.samples == 4
    expected = nn.functional.cross_entropy(model(x), torch.tensor([0, 1, 1, 1])).item()
    assert score.loss == pytest.approx(expected)


def test_evaluation_changes_nothing_in_training():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.Dropout(0.5), nn.Linear(16, 3))
    model.train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    x, y = torch.randn(10, 8), torch.randint(0, 3, (10,))
    rng = torch.get_rng_state()
    evaluate(model, x, y, CPU)
    assert model.training
    assert torch.equal(torch.get_rng_state(), rng)
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k  # BatchNorm running stats included
    assert all(p.grad is None for p in model.parameters())


def test_eval_iterations():
    assert eval_iterations(100, 0) == []
    assert eval_iterations(100, 25) == [0, 25, 50, 75, 100]
    assert eval_iterations(90, 25) == [0, 25, 50, 75, 90]     # the last one always
    assert eval_iterations(90, 25, resume_from=50) == [75, 90]  # a restart: only what is still to come


def test_eval_log_keeps_rows_up_to_the_checkpoint_on_restart(tmp_path):
    path = tmp_path / "eval.csv"
    log = EvalLog(path)
    for it in (0, 10, 20):
        log.write(it, it / 10, float(it), HeldOutScore(1.0 / (it + 1), it / 100, 360))
    assert [r["iteration"] for r in read_eval(path)] == [0, 10, 20]
    EvalLog(path, resume_from=10).write(20, 2.0, 21.0, HeldOutScore(0.5, 0.3, 360))
    rows = read_eval(path)
    assert [r["iteration"] for r in rows] == [0, 10, 20] and rows[-1]["test_accuracy"] == 0.3
    s = summarize_eval(rows)
    assert s["final_test_accuracy"] == 0.3 and s["final_eval_iteration"] == 20 and s["test_samples"] == 360
    assert s["best_test_accuracy"] == 0.3 and s["evaluations"] == 3
    assert summarize_eval([]) == {} and read_eval(tmp_path / "none.csv") == []
