"""build_model / model_input_spec / conv_fc_boundary: what the worker and the strategies rely on."""

from __future__ import annotations

import pytest
import torch

from synclab.models import (
    MODEL_NAMES,
    InputSpec,
    ModelOptionError,
    build_model,
    conv_fc_boundary,
    count_params,
    model_input_spec,
)
from synclab.models.layers import AuxTap

TINY_SOCKEYE = dict(source_vocab=30, target_vocab=20, embed=8, hidden=8, layers=2, attention_hidden=6, seq_len=5)


def test_unknown_model_names_it_and_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"'resnet51'.*smallcnn.*sockeye"):
        build_model("resnet51")
    with pytest.raises(ValueError, match="'resnet51'"):
        model_input_spec("resnet51")


def test_unknown_option_is_named():
    with pytest.raises(ModelOptionError, match="'width'") as err:
        build_model("smallcnn", width=3)
    assert isinstance(err.value, TypeError) and isinstance(err.value, ValueError)
    with pytest.raises(ModelOptionError, match="'depth'"):
        model_input_spec("resnet50", depth=3)


@pytest.mark.parametrize("name, options, bad", [
    ("smallcnn", {"num_classes": 0}, "num_classes"),
    ("mlp", {"hidden": (64, -1)}, r"hidden\[1\]"),
    ("mlp", {"hidden": "64"}, "hidden"),
    ("vgg16", {"image_size": 100}, "image_size"),
    ("alexnet", {"dropout": 1.5}, "dropout"),
    ("googlenet", {"aux_logits": "yes"}, "aux_logits"),
    ("sockeye", {"target_vocab": 3}, "target_vocab"),
])
def test_bad_option_value_is_named(name, options, bad):
    with pytest.raises(ModelOptionError, match=bad):
        with torch.device("meta"):
            build_model(name, **options)


def test_input_specs():
    assert model_input_spec("smallcnn") == InputSpec("image", (3, 32, 32), 10)
    assert model_input_spec("smallcnn", num_classes=100).num_classes == 100
    assert model_input_spec("mlp") == InputSpec("vector", (256,), 10)
    assert model_input_spec("mlp", input_dim=32).shape == (32,)
    assert model_input_spec("resnet110") == InputSpec("image", (3, 32, 32), 10)
    assert model_input_spec("resnet50") == InputSpec("image", (3, 224, 224), 1000)
    assert model_input_spec("inception_v3").shape == (3, 299, 299)
    assert model_input_spec("vgg16", image_size=32, num_classes=10) == InputSpec("image", (3, 32, 32), 10)
    assert model_input_spec("sockeye") == InputSpec("tokens", (2, 32), 7_710, source_vocab=17_192)


def test_every_model_builds_on_meta_with_its_defaults():
    for name in MODEL_NAMES:
        with torch.device("meta"):
            assert count_params(build_model(name)) > 0, name


def test_smallcnn_size_and_boundary():
    model = build_model("smallcnn")
    assert 2e6 <= count_params(model) <= 4e6
    assert not any(isinstance(m, (torch.nn.BatchNorm2d, torch.nn.Dropout)) for m in model.modules())
    assert conv_fc_boundary(model) == len(list(model.features.parameters())) == 6


@pytest.mark.parametrize("name, options", [("smallcnn", {}), ("mlp", {}), ("mlp", {"hidden": (), "input_dim": 8})])
def test_forward_shape_and_backward_reaches_every_parameter(name, options):
    torch.manual_seed(0)
    model = build_model(name, **options)
    spec = model_input_spec(name, **options)
    x, y = torch.randn(4, *spec.shape), torch.randint(0, spec.num_classes, (4,))
    out = model(x)
    assert out.shape == (4, spec.num_classes)
    torch.nn.functional.cross_entropy(out, y).backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


def test_parameters_are_registered_in_forward_order():
    # P3 priorities and the engine's gates take forward order from registration order.
    model = build_model("smallcnn")
    seen = []
    hooks = [m.register_forward_pre_hook(lambda m, a: seen.append(m))
             for m in model.modules() if list(m.parameters(recurse=False))]
    model(torch.zeros(1, 3, 32, 32))
    for h in hooks:
        h.remove()
    owners = [m for m in model.modules() if list(m.parameters(recurse=False))]
    assert seen == owners


def test_tiny_sockeye_trains_through_cross_entropy():
    torch.manual_seed(0)
    model = build_model("sockeye", **TINY_SOCKEYE)
    spec = model_input_spec("sockeye", **TINY_SOCKEYE)
    x = torch.randint(4, 20, (3, *spec.shape))
    y = torch.randint(4, 20, (3, spec.shape[1]))
    out = model(x)
    assert out.shape == (3, spec.num_classes, spec.shape[1])
    torch.nn.CrossEntropyLoss()(out, y).backward()
    assert all(p.grad is not None for p in model.parameters())
    assert conv_fc_boundary(model) is None


@pytest.mark.parametrize("name", ["googlenet", "inception_v3"])
def test_aux_heads_sit_on_the_conv_side(name):
    with torch.device("meta"):
        model = build_model(name)
    params = list(model.parameters())
    boundary = conv_fc_boundary(model)
    assert [id(p) for p in params[boundary:]] == [id(p) for p in model.classifier.parameters()]
    aux = {id(p) for n, p in model.named_parameters() if ".head." in n}
    assert aux and aux <= {id(p) for p in params[:boundary]}


@pytest.mark.parametrize("name", [n for n in MODEL_NAMES if n not in ("mlp", "sockeye")])
def test_cnns_are_classifier_of_features(name):
    # The Stanza strategy runs features on CONV workers and classifier on FC workers.
    options = {"aux_logits": False} if name in ("googlenet", "inception_v3") else {}
    with torch.device("meta"):
        model = build_model(name, **options)
    names = [n for n, _ in model.named_parameters()]
    boundary = conv_fc_boundary(model)
    assert all(n.startswith("features.") for n in names[:boundary])
    assert all(n.startswith("classifier.") for n in names[boundary:])
    assert not any(isinstance(m, AuxTap) for m in model.modules())


def test_aux_heads_train_and_vanish_in_eval():
    # GoogLeNet at 32x32 keeps this cheap; Inception-v3 uses the same AuxTap (a forward at its
    # minimum 299x299 takes ~10 s on two cores), checked structurally below.
    torch.manual_seed(0)
    model = build_model("googlenet", num_classes=3)
    x = torch.randn(2, 3, 32, 32)
    torch.nn.functional.cross_entropy(model(x), torch.tensor([1, 2])).backward()
    assert all(p.grad is not None for p in model.parameters())
    model.eval()
    with torch.no_grad():
        assert torch.equal(model(x), model.classifier(model.features(x)))


def test_inception_v3_aux_head_follows_the_last_17x17_block():
    from synclab.models.inception import BlockC, BlockD

    with torch.device("meta"):
        kinds = [type(m) for m in build_model("inception_v3").features]
    tap = kinds.index(AuxTap)
    assert kinds[tap - 1] is BlockC and kinds[tap + 1] is BlockD


def test_boundaries():
    with torch.device("meta"):
        assert conv_fc_boundary(build_model("resnet50")) == 159   # all but the final FC layer
        assert conv_fc_boundary(build_model("vgg19")) == 32       # 16 conv layers, weight + bias
    assert conv_fc_boundary(build_model("mlp")) is None
