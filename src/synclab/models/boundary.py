"""Where a model's CONV part ends and its FC part begins (Stanza §3.2).

Stanza's CONV workers train every layer up to the last CONV/pooling layer and
send its activations to FC workers, which train the rest. Every zoo CNN is
``classifier(features(x))`` (flattened in between) with all its parameters
under those two attributes, ``classifier``'s last in forward order; the boundary is the number of parameter tensors before it —
the same indices the engine's ``param_layout`` gives, since both follow
``model.parameters()``.

* smallcnn, AlexNet, VGG: ``classifier`` is the 3 FC layers.
* ResNets, DenseNets, Inception-v4: ``classifier`` is the single FC layer
  after global pooling; Stanza (Fig. 6) trains ResNet-152 split there.
* GoogLeNet, Inception-v3: the same; the auxiliary heads branch off
  mid-network and stay on the CONV side (the Stanza strategy itself needs
  ``aux_logits=False``: it runs ``features`` and ``classifier`` separately).
* mlp and sockeye have no CONV part: ``None``.
"""

from __future__ import annotations

from torch import nn


def conv_fc_boundary(model: nn.Module) -> int | None:
    """Number of leading parameter tensors in the CONV part, or ``None`` without a CONV/FC split."""
    head = getattr(model, "classifier", None)
    if not isinstance(head, nn.Module):
        return None
    params = list(model.parameters())
    head_ids = [id(p) for p in head.parameters()]
    if not head_ids:
        raise ValueError(f"{type(model).__name__}.classifier has no parameters")
    boundary = len(params) - len(head_ids)
    if [id(p) for p in params[boundary:]] != head_ids:
        raise ValueError(f"{type(model).__name__}.classifier's parameters are not the last ones in forward order")
    return boundary
