"""What one sample of a model's input looks like, and the checks every model option goes through.

:class:`InputSpec` is the contract between ``synclab.models`` and
``synclab.data``: a dataset is built for a spec, a model is built for the same
options, and the two agree on shape and number of classes without either
importing the other's internals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

InputKind = Literal["image", "vector", "tokens"]


class ModelOptionError(TypeError, ValueError):
    """An unknown model option, or a bad value for a known one; the message names it.

    A ``TypeError`` like any unexpected keyword argument, and a ``ValueError`` so that
    spec validation (pydantic) reports it against the offending key.
    """


@dataclass(frozen=True, slots=True)
class InputSpec:
    """One sample of a model's input.

    * ``image``: ``shape = (channels, height, width)``, float32; target is a class index.
    * ``vector``: ``shape = (features,)``, float32; target is a class index.
    * ``tokens``: ``shape = (2, seq_len)``, int64; row 0 holds the source sentence, row 1
      the target sentence shifted right behind a BOS symbol (teacher forcing); the target
      is the unshifted target sentence, ``seq_len`` class indices. ``num_classes`` is the
      target vocabulary and ``source_vocab`` the source vocabulary (tokens only).
    """

    kind: InputKind
    shape: tuple[int, ...]
    num_classes: int
    source_vocab: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("image", "vector", "tokens"):
            raise ValueError(f"InputSpec.kind must be 'image', 'vector' or 'tokens', got {self.kind!r}")
        expected_rank = {"image": 3, "vector": 1, "tokens": 2}[self.kind]
        if len(self.shape) != expected_rank or any(int(d) < 1 for d in self.shape):
            raise ValueError(f"InputSpec.shape for kind {self.kind!r} must be {expected_rank} positive sizes, "
                             f"got {self.shape!r}")
        if self.kind == "tokens" and self.shape[0] != 2:
            raise ValueError(f"InputSpec.shape for tokens must be (2, seq_len), got {self.shape!r}")
        if self.num_classes < 1:
            raise ValueError(f"InputSpec.num_classes must be >= 1, got {self.num_classes}")
        if (self.source_vocab is None) != (self.kind != "tokens"):
            raise ValueError(f"InputSpec.source_vocab is required for tokens and only for tokens, "
                             f"got {self.source_vocab!r} for kind {self.kind!r}")

    @property
    def numel(self) -> int:
        """Number of values in one sample."""
        n = 1
        for d in self.shape:
            n *= d
        return n


def positive_int(option: str, value: object) -> int:
    """``value`` as an int >= 1, or :class:`ModelOptionError` naming ``option``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ModelOptionError(f"model option {option!r} must be a positive integer, got {value!r}")
    return value


def probability(option: str, value: object) -> float:
    """``value`` as a float in [0, 1), or :class:`ModelOptionError` naming ``option``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
        raise ModelOptionError(f"model option {option!r} must be a number in [0, 1), got {value!r}")
    return float(value)


def flag(option: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ModelOptionError(f"model option {option!r} must be true or false, got {value!r}")
    return value


def image_spec(size: int, num_classes: int, channels: int = 3) -> InputSpec:
    return InputSpec("image", (channels, size, size), positive_int("num_classes", num_classes))
