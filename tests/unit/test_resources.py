"""The packaged data (synclab.resources): examples by name, data paths from the working directory or the
package, a user's own targets before the packaged ones, and the checkout a command runs in."""

from __future__ import annotations

import pytest

from synclab.reproduce.schema import TargetError, load_target, target_dirs, target_files
from synclab.resources import (
    checkout,
    example_summary,
    examples,
    link_profiles_dir,
    locate,
    model_profiles_dir,
    package_root,
    packaged,
    spec_path,
    targets_dir,
)


def test_every_kind_of_data_is_inside_the_package():
    root = package_root()
    for d in (model_profiles_dir(), link_profiles_dir(), targets_dir(), packaged("examples")):
        assert d.is_dir() and d.is_relative_to(root), d
    assert (model_profiles_dir() / "calibration.yaml").is_file()
    assert {"quickstart", "p3-vs-ps-resnet50-4gbit", "mgwfbp-16-workers-sim", "stanza-alexnet"} <= set(examples())
    assert all(example_summary(p) for p in examples().values())  # each says in its first line what it runs


def test_a_spec_is_a_file_or_a_packaged_example_by_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert spec_path("quickstart") == examples()["quickstart"]
    own = tmp_path / "quickstart"  # a file of the user's own, of the same name, wins
    own.write_text("name: mine\n")
    assert spec_path("quickstart").resolve() == own
    assert spec_path("examples/stanza-alexnet.yaml") == packaged("examples/stanza-alexnet.yaml")
    assert not spec_path("no-such-example").exists()  # left as given: the loader names it


def test_a_data_path_is_read_from_the_working_directory_first(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert locate("profiles/calibration.yaml") == packaged("profiles/calibration.yaml")
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "calibration.yaml").write_text("entries: []\n")
    assert locate("profiles/calibration.yaml") == tmp_path / "profiles" / "calibration.yaml"
    assert locate("profiles/nothing.json") == type(tmp_path)("profiles/nothing.json")


def test_own_targets_come_first_and_shadow_the_packaged_ones(tmp_path):
    stock = target_files()
    assert "mgwfbp-fig10" in stock and stock["mgwfbp-fig10"].parent == targets_dir()
    own = tmp_path / "mine"
    own.mkdir()
    (own / "mgwfbp-fig10.yaml").write_text(stock["mgwfbp-fig10"].read_text())
    found = target_files(target_dirs([own]))
    assert found["mgwfbp-fig10"] == own / "mgwfbp-fig10.yaml" and set(found) == set(stock)
    assert load_target(found["mgwfbp-fig10"]).id == "mgwfbp-fig10"
    with pytest.raises(TargetError, match="no such directory"):
        target_files(target_dirs([tmp_path / "missing"]))


def test_the_checkout_is_found_from_inside_it_and_not_outside(tmp_path):
    here = checkout(package_root())
    assert here is not None and (here / "pyproject.toml").is_file()
    assert checkout(tmp_path) is None
