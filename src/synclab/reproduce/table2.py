"""MG-WFBP Table 2: how an all-reduce's start-up ``a`` and per-byte cost ``b`` grow with the number of
workers N, used to carry a paper's fitted (a, b) from its N to another N before comparing them.

Table 2 ("Cost of different all-reduce algorithms"), with α the point-to-point latency, β the time per
byte and γ the reduction time per byte (§3, eq. 10: T(M) = a + b·M):

=========================  ==============  ====================================
algorithm                  a               b
=========================  ==============  ====================================
binary tree                2α log N        (2β + γ) log N
recursive doubling         α log N         (β + γ) log N
recursive halving/doubling 2α log N        2β − (1/N)(2β + γ) + γ
double binary trees        2 log N [#]_    β + γ
ring                       2(N − 1)α       2(N − 1)/N · β + (N − 1)/N · γ
=========================  ==============  ====================================

.. [#] printed without α, read as 2α log N.

α, β, γ are properties of the network and the GPUs, not of N, so the ratio of a formula at two values of N
carries a fitted a (or b) from one cluster size to another. For the ring, b = (N − 1)/N · (2β + γ) for any
split of β and γ. Recursive halving/doubling's b mixes β and γ differently at each N; it is scaled with
γ = 0 (b = 2β(N − 1)/N), said so in :func:`factor`. Logarithms are base 2 (the algorithms pair workers).
"""

from __future__ import annotations

import math
from typing import Literal

Algorithm = Literal["ring", "binary_tree", "recursive_doubling", "recursive_halving_doubling", "double_binary_tree"]
Term = Literal["a", "b"]


def _shape(algorithm: str, term: str, n: int) -> float:
    """The part of Table 2's formula for ``term`` that depends on N (α, β, γ factored out)."""
    log_n = math.log2(n)
    if term == "a":
        return {"ring": 2 * (n - 1), "binary_tree": 2 * log_n, "recursive_doubling": log_n,
                "recursive_halving_doubling": 2 * log_n, "double_binary_tree": 2 * log_n}[algorithm]
    return {"ring": (n - 1) / n, "binary_tree": log_n, "recursive_doubling": log_n,
            "recursive_halving_doubling": (n - 1) / n, "double_binary_tree": 1.0}[algorithm]


def factor(algorithm: str, term: str, n_from: int, n_to: int) -> float:
    """The factor that carries ``term`` (``a`` or ``b``) of ``algorithm`` from ``n_from`` to ``n_to`` workers
    (MG-WFBP Table 2): e.g. the ring's a = 2(N − 1)α gives (n_to − 1)/(n_from − 1)."""
    if term not in ("a", "b"):
        raise ValueError(f"Table 2 term must be 'a' or 'b', got {term!r}")
    if algorithm not in ("ring", "binary_tree", "recursive_doubling", "recursive_halving_doubling",
                         "double_binary_tree"):
        raise ValueError(f"Table 2 has no all-reduce algorithm {algorithm!r}")
    if n_from < 2 or n_to < 2:
        raise ValueError(f"an all-reduce needs at least 2 workers, got {n_from} and {n_to}")
    return _shape(algorithm, term, n_to) / _shape(algorithm, term, n_from)


def carry(paper_value: float, algorithm: str, term: str, n_from: int, n_to: int, *,
          b: float | None = None, size: float | None = None) -> float:
    """``paper_value`` measured on ``n_from`` workers, as Table 2 puts it at ``n_to``.

    ``term`` 'a' or 'b': the value is that term. ``term`` 'time' (with the paper's ``b`` and a message ``size``
    in bytes): the value is T(size) = a + b·size; its a part and b part are carried each by its own formula."""
    if term == "time":
        if b is None or size is None:
            raise ValueError("Table 2 term 'time' needs the paper's b and the message size")
        a = paper_value - b * size
        return a * factor(algorithm, "a", n_from, n_to) + b * size * factor(algorithm, "b", n_from, n_to)
    return paper_value * factor(algorithm, term, n_from, n_to)
