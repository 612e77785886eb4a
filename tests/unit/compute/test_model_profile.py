"""The model-profile format: validation names the field, matching against the model, default lookup."""

from __future__ import annotations

import json

import pytest

from synclab.compute.profile import (
    ModelProfileError,
    check_matches,
    find_default_profile,
    load_model_profile,
    parse_model_profile,
)
from synclab.models import tensor_layout


def small(**over):
    data = {"model": "mlp", "batch_size": 8, "device": "cuda", "dtype": "float32",
            "forward_seconds": 0.003, "backward_seconds": 0.006,
            "tensors": [{"name": "a.weight", "params": 10, "forward_seconds": 0.001, "backward_seconds": 0.002,
                         "kind": "fc"},
                        {"name": "a.bias", "params": 2, "forward_seconds": 0.002, "backward_seconds": 0.004,
                         "kind": "fc"}]}
    data.update(over)
    return data


def test_a_valid_profile_parses_and_sums():
    p = parse_model_profile(small())
    assert p.iteration_seconds == pytest.approx(0.009) and p.params == 12 and p.boundary is None


@pytest.mark.parametrize("change, field", [
    ({"batch_size": 0}, "batch_size"),
    ({"forward_seconds": -1}, "forward_seconds"),
    ({"forward_seconds": 0.5}, "forward_seconds"),           # does not equal the tensors' sum
    ({"tensors": []}, "tensors"),
    ({"boundary": {"activations_per_sample": 0, "conv_params": 1, "fc_params": 1, "conv_seconds": 0,
                   "fc_seconds": 0}}, "boundary.activations_per_sample"),
    ({"dtype": "int8"}, "dtype"),
    ({"extra": 1}, "extra"),
    ({"batch_size": 8.0}, "batch_size"),                      # a count is an integer
    ({"batch_size": True}, "batch_size"),
])
def test_bad_fields_are_named(change, field):
    with pytest.raises(ModelProfileError, match=field.replace(".", r"\.")):
        parse_model_profile(small(**change))


def test_missing_field_and_bad_tensor_are_named():
    data = small()
    del data["device"]
    with pytest.raises(ModelProfileError, match="device"):
        parse_model_profile(data)
    data = small()
    data["tensors"][1]["kind"] = "attention"
    with pytest.raises(ModelProfileError, match=r"tensors\.1\.kind"):
        parse_model_profile(data)
    data = small()
    data["tensors"][0]["backward_seconds"] = float("nan")
    with pytest.raises(ModelProfileError, match=r"tensors\.0\.backward_seconds"):
        parse_model_profile(data)


def test_files_that_are_not_profiles(tmp_path):
    with pytest.raises(ModelProfileError, match="cannot read"):
        load_model_profile(tmp_path / "nope.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ModelProfileError, match="not JSON"):
        load_model_profile(tmp_path / "bad.json")
    (tmp_path / "list.json").write_text("[]")
    with pytest.raises(ModelProfileError, match="JSON object"):
        load_model_profile(tmp_path / "list.json")


def test_a_partial_profile_only_when_asked_and_what_is_there_is_checked(tmp_path):
    boundary = {"activations_per_sample": 4, "conv_params": 1, "fc_params": 1, "conv_seconds": 0.1,
                "fc_seconds": 0.0}
    path = tmp_path / "stanza.json"
    path.write_text(json.dumps({"batch_size": 8, "boundary": boundary}))
    with pytest.raises(ModelProfileError, match=r"stanza\.json: model: missing; device: missing"):
        load_model_profile(path)
    p = load_model_profile(path, partial=True, require=("batch_size", "boundary"))
    assert (p.batch_size, p.boundary.activations_per_sample, p.model, p.tensors) == (8, 4, None, None)
    with pytest.raises(ModelProfileError, match=r"stanza\.json: update_seconds: missing"):
        load_model_profile(path, partial=True, require=("update_seconds",))
    path.write_text(json.dumps({"batch_size": 8, "boundary": {**boundary, "fc_seconds": -1}}))
    with pytest.raises(ModelProfileError, match=r"stanza\.json: boundary\.fc_seconds"):
        load_model_profile(path, partial=True)
    path.write_text(json.dumps({"batch_size": 8, "forward_seconds": 0.5, "tensors": small()["tensors"]}))
    with pytest.raises(ModelProfileError, match="forward_seconds is 0.5 but the tensors"):
        load_model_profile(path, partial=True)


def test_require_names_fields_a_whole_profile_may_leave_out(tmp_path):
    path = tmp_path / "mlp.json"
    path.write_text(json.dumps(small()))
    assert load_model_profile(path).boundary is None
    with pytest.raises(ModelProfileError, match=r"mlp\.json: boundary: missing"):
        load_model_profile(path, require=("boundary",))
    with pytest.raises(ValueError, match="no profile field"):
        load_model_profile(path, require=("bondary",))


def test_a_profile_must_fit_the_model():
    names, numels = tensor_layout("mlp")
    tensors = [{"name": n, "params": k, "forward_seconds": 0.0, "backward_seconds": 0.0, "kind": "fc"}
               for n, k in zip(names, numels)]
    good = parse_model_profile(small(tensors=tensors, forward_seconds=0.0, backward_seconds=0.0))
    check_matches(good, names, numels, "mlp")
    with pytest.raises(ModelProfileError, match="model 'mlp', the spec asks for 'smallcnn'"):
        check_matches(good, names, numels, "smallcnn")
    short = parse_model_profile(small(tensors=tensors[:-1], forward_seconds=0.0, backward_seconds=0.0))
    with pytest.raises(ModelProfileError, match=f"{len(numels) - 1} tensors"):
        check_matches(short, names, numels, "mlp")
    tensors[1] = {**tensors[1], "params": tensors[1]["params"] + 1}
    off = parse_model_profile(small(tensors=tensors, forward_seconds=0.0, backward_seconds=0.0))
    with pytest.raises(ModelProfileError, match=r"tensors\[1\]"):
        check_matches(off, names, numels, "mlp")


def test_default_lookup_prefers_gpu_then_batch_then_paper_batch(tmp_path, monkeypatch):
    monkeypatch.setenv("SYNCLAB_MODEL_PROFILES_DIR", str(tmp_path))
    monkeypatch.setattr("synclab.compute.profile.REPO_PROFILES", tmp_path / "no-repo")
    for name in ("resnet50-b32-cpu.json", "resnet50-b64-cuda.json", "resnet50-b32-cuda.json",
                 "vgg16-b8-cpu.json"):
        (tmp_path / name).write_text(json.dumps({}))
    path, why = find_default_profile("resnet50", 64)
    assert path.name == "resnet50-b64-cuda.json" and "model.batch_size" in why
    path, why = find_default_profile("resnet50", 16)
    assert path.name == "resnet50-b32-cuda.json" and "paper" in why
    path, why = find_default_profile("vgg16", 64)
    assert path.name == "vgg16-b8-cpu.json" and "CPU profile" in why and "smallest" in why
    with pytest.raises(ModelProfileError, match="synclab profile alexnet"):
        find_default_profile("alexnet", 128)
