"""A deterministic, learnable synthetic classification dataset, generated from a seed.

Every sample is a pure function of (seed, index) — see
:mod:`synclab.data.hashing` — so a worker's slice, the global batch of a
single-process reference and a rerun next month hold bit-identical values.
Nothing is stored: a batch is computed from its indices (vectorised integer
hashing, ~1 ms for 64 CIFAR-sized samples).

* ``image`` / ``vector``: sample i has label ``i mod num_classes`` (classes
  exactly balanced) and values ``signal * prototype[label] + noise_i``; the
  prototypes and the noise are zero-mean, unit-variance uniform values (image
  prototypes constant over 4x4 pixel blocks). A linear model separates the
  classes: with SGD (lr 0.05, momentum 0.9, batch 32) the mlp's loss falls near
  zero within ~30 steps and smallcnn's within ~50.
* ``tokens`` (sequence-to-sequence, for ``sockeye``): the source sentence is
  ``seq_len`` random words; the target is a word-for-word translation through a
  fixed random dictionary. ``x`` is ``(batch, 2, seq_len)``: row 0 the source,
  row 1 the target shifted right behind <s>; ``y`` is the target. Ids below 4
  are Sockeye's special symbols and only <s> (2) appears.
"""

from __future__ import annotations

import math

import torch

from synclab.data.hashing import GOLDEN, MASK32, counters, derive_key, hash32, uniform_centered
from synclab.data.order import EpochOrder
from synclab.models.spec import InputSpec

SPECIAL_SYMBOLS = 4
BOS = 2
PROTOTYPE_BLOCK = 4
_PROTOTYPE_STREAM, _NOISE_STREAM, _SOURCE_STREAM, _DICTIONARY_STREAM = 10, 11, 12, 13
_ELEMENT_STRIDE = 0x85EBCA6B  # odd multiplier spreading element numbers over 32 bits


class SyntheticClassification:
    """``batch(iteration, rank, world, batch_size) -> (x, y)``; see the module docstring for the samples."""

    def __init__(self, input_spec: InputSpec, seed: int, size: int = 50_000, *, signal: float = 0.5):
        if not isinstance(input_spec, InputSpec):
            raise TypeError(f"input_spec must be an InputSpec, got {type(input_spec).__name__}")
        if not signal > 0:
            raise ValueError(f"signal must be positive, got {signal!r}")
        self.input_spec, self.seed, self.size, self.signal = input_spec, seed, size, float(signal)
        self.order = EpochOrder(size, seed)
        self._noise_key = derive_key(seed, _NOISE_STREAM)
        if input_spec.kind == "tokens":
            if min(input_spec.source_vocab, input_spec.num_classes) <= SPECIAL_SYMBOLS:
                raise ValueError(f"token vocabularies must exceed the {SPECIAL_SYMBOLS} special symbols, got "
                                 f"source {input_spec.source_vocab} and target {input_spec.num_classes}")
            self._source_key = derive_key(seed, _SOURCE_STREAM)
            self._positions = torch.arange(input_spec.shape[1])
            self._dictionary = self._make_dictionary()
        else:
            self._numel = input_spec.numel
            self._elements = (torch.arange((self._numel + 1) // 2) * _ELEMENT_STRIDE) & MASK32
            self._prototypes = self._make_prototypes() * self.signal  # (classes, numel)

    def __len__(self) -> int:
        return self.size

    def batch(self, iteration: int, rank: int, world: int, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Rank ``rank``'s ``batch_size`` samples of iteration ``iteration`` (see :mod:`synclab.data.order`)."""
        return self.samples(self.order.indices(iteration, rank, world, batch_size))

    def samples(self, indices: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The samples with these indices: ``x`` float32 (or int64 tokens), ``y`` int64."""
        if self.input_spec.kind == "tokens":
            return self._token_samples(indices)
        labels = indices % self.input_spec.num_classes
        bits = hash32((counters(self._noise_key, indices)[:, None] + self._elements) & MASK32)
        x = uniform_centered(bits, self._numel) + self._prototypes[labels]
        return x.view(len(indices), *self.input_spec.shape), labels

    def _make_prototypes(self) -> torch.Tensor:
        """One unit-variance pattern per class; for images, constant over 4x4 pixel blocks.

        Blocky patterns survive convolution and pooling, so a CNN learns them as fast as a
        linear model learns the per-element ones.
        """
        spec = self.input_spec
        shape = spec.shape
        if spec.kind == "image" and shape[1] % PROTOTYPE_BLOCK == 0 and shape[2] % PROTOTYPE_BLOCK == 0:
            shape = (shape[0], shape[1] // PROTOTYPE_BLOCK, shape[2] // PROTOTYPE_BLOCK)
        numel = math.prod(shape)
        elements = (torch.arange((numel + 1) // 2) * _ELEMENT_STRIDE) & MASK32
        keys = counters(derive_key(self.seed, _PROTOTYPE_STREAM), torch.arange(spec.num_classes))
        prototypes = uniform_centered(hash32((keys[:, None] + elements) & MASK32), numel)
        if shape != spec.shape:
            prototypes = prototypes.view(-1, *shape)
            prototypes = prototypes.repeat_interleave(PROTOTYPE_BLOCK, 2).repeat_interleave(PROTOTYPE_BLOCK, 3)
        return prototypes.reshape(spec.num_classes, spec.numel)

    def _make_dictionary(self) -> torch.Tensor:
        spec = self.input_spec
        words = torch.arange(spec.source_vocab)
        key = derive_key(self.seed, _DICTIONARY_STREAM)
        return SPECIAL_SYMBOLS + counters(key, words) % (spec.num_classes - SPECIAL_SYMBOLS)

    def _token_samples(self, indices: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        spec = self.input_spec
        sentence = counters(self._source_key, indices)[:, None]
        bits = hash32((sentence + self._positions * GOLDEN) & MASK32)
        source = SPECIAL_SYMBOLS + bits % (spec.source_vocab - SPECIAL_SYMBOLS)
        target = self._dictionary[source]
        shifted = torch.cat([torch.full_like(target[:, :1], BOS), target[:, :-1]], 1)
        return torch.stack([source, shifted], 1), target
