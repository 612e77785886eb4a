"""SSD-SGD: server momentum SGD, the GLU local update (eq. 8) and the iteration schedule."""

from __future__ import annotations

import pytest
import torch

from synclab.plans.ssdsgd import (
    SsdSchedule,
    glu_local_update,
    grad_sync,
    sgd_momentum_step,
)


@pytest.mark.parametrize(
    "lr, momentum, weight_decay",
    [(0.1, 0.9, 5e-4), (0.05, 0.0, 0.0), (0.4, 0.5, 1e-2), (0.01, 0.99, 0.0)],
)
def test_sgd_step_matches_torch_optim_sgd(lr, momentum, weight_decay):
    generator = torch.Generator().manual_seed(0)
    start = torch.randn(7, 5, generator=generator)
    grads = [torch.randn(7, 5, generator=generator) for _ in range(6)]

    param = torch.nn.Parameter(start.clone())
    optimizer = torch.optim.SGD([param], lr=lr, momentum=momentum, weight_decay=weight_decay)
    w, buf = start.clone(), None
    for grad in grads:
        param.grad = grad.clone()
        optimizer.step()
        w, buf = sgd_momentum_step(w, grad, buf, lr, momentum, weight_decay)
        torch.testing.assert_close(w, param.detach(), rtol=0, atol=1e-6)


def test_sgd_step_does_not_modify_its_inputs():
    w, grad, buf = torch.ones(3), torch.full((3,), 2.0), torch.full((3,), 0.5)
    new_w, new_buf = sgd_momentum_step(w, grad, buf, 0.1, 0.9, 0.01)
    assert torch.equal(w, torch.ones(3)) and torch.equal(grad, torch.full((3,), 2.0))
    assert torch.equal(buf, torch.full((3,), 0.5))
    # d = 2 + 0.01 * 1 = 2.01; buf = 0.9 * 0.5 + 2.01 = 2.46; w = 1 - 0.246
    torch.testing.assert_close(new_buf, torch.full((3,), 2.46))
    torch.testing.assert_close(new_w, torch.full((3,), 0.754))


@pytest.mark.parametrize("field", ["lr", "momentum", "weight_decay"])
def test_sgd_step_refuses_negative_hyperparameters(field):
    values = {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.0, field: -1.0}
    w = torch.zeros(2)
    with pytest.raises(ValueError, match=field):
        sgd_momentum_step(w, w, None, **values)


def test_first_step_buffer_is_the_decayed_gradient():
    w, grad = torch.tensor([2.0]), torch.tensor([1.0])
    new_w, buf = sgd_momentum_step(w, grad, None, 0.5, 0.9, 0.25)
    assert buf.item() == 1.5 and new_w.item() == 2.0 - 0.75
    assert buf.data_ptr() != grad.data_ptr()


def test_glu_update_by_hand():
    w = torch.tensor([1.0, -2.0])
    grad = torch.tensor([0.5, 0.25])
    pre_weight = torch.tensor([1.2, -1.8])
    # grad_sync = (pre - w) * (1 - 0.9) / (0.1 * 2) = (0.2, 0.2) * 0.5 = (0.1, 0.1)
    sync = grad_sync(w, pre_weight, lr=0.1, momentum=0.9, k=2)
    torch.testing.assert_close(sync, torch.tensor([0.1, 0.1]))
    new_w = glu_local_update(
        w, grad, pre_weight, lr=0.1, loc_lr=0.4, momentum=0.9, weight_decay=0.01, k=2
    )
    # w - 0.4 * (2 * g + 0.01 * w + 0.5 * sync)
    expected = torch.tensor(
        [1.0 - 0.4 * (1.0 + 0.01 + 0.05), -2.0 - 0.4 * (0.5 - 0.02 + 0.05)]
    )
    torch.testing.assert_close(new_w, expected)
    assert torch.equal(w, torch.tensor([1.0, -2.0]))


def test_glu_descends():
    w, grad = torch.zeros(4), torch.ones(4)
    new_w = glu_local_update(w, grad, w, lr=0.1, loc_lr=0.4, momentum=0.9, weight_decay=0.0, k=3)
    assert torch.all(new_w < w)  # the paper's printed "+" would climb the gradient


def test_grad_sync_recovers_the_servers_gradient():
    """§3.2.1/§3.3: once momentum settles, (w_{t-k} - w_t)(1 - m)/(lr k) = grad."""
    lr, momentum, k = 0.05, 0.9, 4
    g = torch.tensor([0.3, -1.0, 2.0])
    w, buf, history = torch.zeros(3), None, []
    for _ in range(400):  # the warm-up: momentum reaches g / (1 - m)
        w, buf = sgd_momentum_step(w, g, buf, lr, momentum, 0.0)
        history.append(w)
    estimate = grad_sync(history[-1], history[-1 - k], lr=lr, momentum=momentum, k=k)
    torch.testing.assert_close(estimate, g, rtol=1e-4, atol=1e-5)


def test_grad_sync_is_zero_on_the_first_local_update():
    w = torch.randn(5)
    assert torch.count_nonzero(grad_sync(w, w.clone(), lr=0.1, momentum=0.9, k=2)) == 0


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"lr": 0.0}, "lr"),
        ({"momentum": 1.0}, "momentum"),
        ({"momentum": -0.1}, "momentum"),
        ({"k": 0}, "k"),
        ({"loc_lr": -1.0}, "loc_lr"),
    ],
)
def test_glu_refuses_bad_hyperparameters(kwargs, field):
    values = dict(lr=0.1, loc_lr=0.4, momentum=0.9, weight_decay=0.0, k=2)
    values.update(kwargs)
    w = torch.zeros(2)
    with pytest.raises(ValueError, match=field):
        glu_local_update(w, w, w, **values)


# --- the schedule (Algorithms 1 and 2) ---


def test_schedule_by_hand():
    schedule = SsdSchedule(warmup=4, k=3)
    rows = [
        (s.warmup, s.init_pre_weight, s.refresh_pre_weight, s.pull, s.loc_update)
        for s in map(schedule.step, range(12))
    ]
    assert rows == [
        (True, False, False, True, None),  # warm-up: SSGD, pull every iteration
        (True, False, False, True, None),
        (True, False, False, True, None),
        (True, False, False, True, None),
        (False, True, False, False, 0),  # first local update: pre_weight = w'
        (False, False, False, False, 1),
        (False, False, False, True, 2),  # pull at the k-th delayed iteration
        (False, False, True, False, 3),  # grad_sync with the old pre_weight, then refresh
        (False, False, False, False, 4),
        (False, False, False, True, 5),
        (False, False, True, False, 6),
        (False, False, False, False, 7),
    ]
    assert all(s.local_update for s in map(schedule.step, range(4, 12)))


@pytest.mark.parametrize("warmup, k", [(0, 1), (2, 2), (6, 3), (500, 5), (12, 4)])
def test_schedule_matches_algorithm_1_when_aligned(warmup, k):
    # the paper's condition (1 + wp) % k == 0 with wp = warmup - 1
    schedule = SsdSchedule(warmup=warmup, k=k)
    for num in range(warmup, warmup + 5 * k):
        assert schedule.pulls(num) == (num % k == k - 1)  # Algorithm 1 line 20
        loc_update = num - warmup
        assert schedule.refreshes_pre_weight(num) == (loc_update > 0 and loc_update % k == 0)


def test_refresh_follows_every_delayed_pull():
    schedule = SsdSchedule(warmup=7, k=3)  # not aligned: still consistent
    for num in range(8, 60):
        delayed_pull = schedule.pulls(num - 1) and not schedule.is_warmup(num - 1)
        assert schedule.refreshes_pre_weight(num) == delayed_pull


def test_one_pull_per_k_iterations_after_warmup():
    schedule = SsdSchedule(warmup=10, k=4)
    assert sum(schedule.pulls(num) for num in range(10, 10 + 40)) == 10


@pytest.mark.parametrize("kwargs", [{"warmup": -1, "k": 2}, {"warmup": 0, "k": 0}])
def test_schedule_refuses_bad_settings(kwargs):
    with pytest.raises(ValueError, match="SsdSchedule"):
        SsdSchedule(**kwargs)


def test_schedule_refuses_negative_iteration():
    with pytest.raises(ValueError, match="iteration"):
        SsdSchedule(warmup=1, k=1).step(-1)


def test_pieces_train_a_quadratic():
    """One worker running Algorithms 1-2 against a momentum-SGD server converges."""
    target = torch.tensor([1.0, -2.0, 3.0])
    lr, momentum, k = 0.1, 0.9, 3
    schedule = SsdSchedule(warmup=30, k=k)
    w_global, buf = torch.zeros(3), None
    w_local, pre_weight = w_global.clone(), None
    for num in range(150):
        step = schedule.step(num)
        weights = w_global if step.warmup else w_local
        grad = weights - target  # loss 0.5 * ||w - target||^2
        w_global, buf = sgd_momentum_step(w_global, grad, buf, lr, momentum, 0.0)  # push
        if step.local_update:
            if step.init_pre_weight:
                pre_weight = w_local
            new_local = glu_local_update(
                w_local, grad, pre_weight, lr=lr, loc_lr=4 * lr, momentum=momentum,
                weight_decay=0.0, k=k,
            )
            if step.refresh_pre_weight:
                pre_weight = w_local
            w_local = new_local
        if step.pull:
            w_local = w_global.clone()
    torch.testing.assert_close(w_global, target, atol=1e-3, rtol=0)
