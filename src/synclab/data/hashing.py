"""Counter-based random numbers: a 32-bit integer hash applied elementwise to tensors.

Synthetic data must be a pure function of (seed, sample index, element): the
same sample whether it is drawn alone, in a worker's slice or in the global
batch of a single-process reference, on any torch version. A stateful RNG
(``torch.Generator``) gives none of that for free; hashing a counter does.
The hash is Wellons' "lowbias32" (xorshift-multiply, a bijection on 32-bit
words), computed in int64 with every intermediate below 2**49, so integer
overflow never occurs and results are exact on every backend. Floats are made
from the top 24 bits, which int64 -> float32 converts exactly.
"""

from __future__ import annotations

import torch

MASK32 = 0xFFFFFFFF
_M1, _M2 = 0x7FEB352D, 0x846CA68B
GOLDEN = 0x9E3779B9  # odd: i -> (key + i * GOLDEN) mod 2**32 is injective


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    # (x * c) mod 2**32 with x < 2**32, split so no product exceeds 2**48.
    return (x * (c & 0xFFFF) + (((x * (c >> 16)) & 0xFFFF) << 16)) & MASK32


def hash32(x: torch.Tensor) -> torch.Tensor:
    """lowbias32 of every element of an int64 tensor holding values in [0, 2**32)."""
    x = x ^ (x >> 16)
    x = _mul32(x, _M1)
    x = x ^ (x >> 15)
    x = _mul32(x, _M2)
    return x ^ (x >> 16)


def hash32_int(x: int) -> int:
    """The same hash on one Python int (reduced to 32 bits first)."""
    x &= MASK32
    x ^= x >> 16
    x = (x * _M1) & MASK32
    x ^= x >> 15
    x = (x * _M2) & MASK32
    return x ^ (x >> 16)


def derive_key(seed: int, *labels: int) -> int:
    """A 32-bit key for one named stream (prototypes, noise, epoch e's order...) of ``seed``."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    key = hash32_int(seed & MASK32) ^ hash32_int((seed >> 32) + GOLDEN)
    for label in labels:
        key = hash32_int(key ^ hash32_int(label + GOLDEN))
    return key


def counters(key: int, index: torch.Tensor) -> torch.Tensor:
    """Hash of ``(key, index)`` for an int64 tensor of indices in [0, 2**32)."""
    return hash32((index * GOLDEN + key) & MASK32)


def uniform_centered(bits: torch.Tensor, n: int) -> torch.Tensor:
    """``n`` float32 values per row, zero mean, unit variance, from 32-bit hashes ``(..., ceil(n / 2))``.

    Each hash yields two 16-bit halves, each mapped to the centre of one of 65,536
    equal cells of [-sqrt(3), sqrt(3)) — half the hashing of one value per hash.
    """
    halves = torch.stack([(bits & 0xFFFF).to(torch.float32), (bits >> 16).to(torch.float32)], -1)
    # ((h + 0.5) / 2**16 - 0.5) * sqrt(12), folded into one multiply and one add
    return halves.flatten(-2)[..., :n] * _SCALE16 + _OFFSET16


_SQRT12 = 3.4641016151377544
_SCALE16 = _SQRT12 / (1 << 16)
_OFFSET16 = (0.5 / (1 << 16) - 0.5) * _SQRT12
