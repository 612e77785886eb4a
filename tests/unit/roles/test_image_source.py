"""The node image's source digest: it changes with any file the image is built from and nothing else,
and an image whose label differs from the checkout's digest is rebuilt (unless told not to)."""

import shutil

from support.cluster import REPO
from synclab.roles.docker_cluster import LAUNCH_LABEL, REBUILD_ENV, stale_reason
from synclab.roles.image_source import SOURCE_LABEL, source_digest


def _tree(tmp_path):
    root = tmp_path / "checkout"
    (root / "src" / "synclab").mkdir(parents=True)
    (root / "src" / "synclab" / "a.py").write_text("x = 1\n")
    (root / "profiles").mkdir()
    (root / "profiles" / "m.json").write_text("{}")
    (root / "pyproject.toml").write_text("[project]\n")
    return root


def test_the_digest_follows_the_image_sources_and_ignores_bytecode_and_other_files(tmp_path):
    root = _tree(tmp_path)
    first = source_digest(root)
    assert source_digest(root) == first and len(first) == 32
    (root / "src" / "synclab" / "__pycache__").mkdir()
    (root / "src" / "synclab" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    (root / "runs").mkdir()
    (root / "runs" / "out.csv").write_text("1")
    assert source_digest(root) == first
    (root / "src" / "synclab" / "a.py").write_text("x = 2\n")
    assert source_digest(root) != first
    (root / "src" / "synclab" / "a.py").write_text("x = 1\n")
    shutil.move(root / "src" / "synclab" / "a.py", root / "src" / "synclab" / "b.py")  # a rename counts
    assert source_digest(root) != first


def test_the_strategy_plugins_the_image_installs_enter_the_digest(tmp_path, monkeypatch):
    root = _tree(tmp_path)
    monkeypatch.delenv("SYNCLAB_PLUGINS", raising=False)
    plain = source_digest(root)
    monkeypatch.setenv("SYNCLAB_PLUGINS", "plugins/localsgd")
    with_plugin = source_digest(root)
    monkeypatch.setenv("SYNCLAB_PLUGINS", " ")
    assert with_plugin != plain and source_digest(root) == plain


def test_the_checkout_has_a_digest():
    assert len(source_digest(REPO)) == 32


def test_an_image_from_other_source_is_stale_unless_told_to_keep_it():
    good = {LAUNCH_LABEL: "1", SOURCE_LABEL: "abc"}
    assert stale_reason(good, "abc", {}) is None
    assert "other source" in stale_reason(good, "def", {})
    assert "other source" in stale_reason({LAUNCH_LABEL: "1"}, "def", {})   # built without a digest
    assert stale_reason(good, "def", {REBUILD_ENV: "never"}) is None
    assert stale_reason(good, None, {}) is None                            # installed without a checkout
    assert "predates" in stale_reason({SOURCE_LABEL: "abc"}, "abc", {})
