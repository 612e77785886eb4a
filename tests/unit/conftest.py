"""Run these tests with one torch intra-op thread.

Workers train with one thread (``compute.threads`` defaults to 1), and on a shared
two-core machine OpenMP threads spin against other processes: a small GoogLeNet
step costs 0.35 s of CPU with one thread and over 5 s with two under load.
"""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def one_torch_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
