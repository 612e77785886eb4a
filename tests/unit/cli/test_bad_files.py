"""Every CLI command's file arguments, given bad files: an exit code of 2 (or 1), the file named, no traceback.

In process (Typer's CliRunner), no subprocess: a command that would start a cluster or a server must refuse
the file before that. Hypothesis picks the command, the argument and what is wrong with the file: binary bytes,
empty, huge (sparse, past synclab.fileio.MAX_INPUT_BYTES), a folder, unreadable (mode 000 when not root; a path
under a regular file, which no one can open, as root), missing, or text that is not what the command expects.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from synclab.cli import app
from synclab.fileio import MAX_INPUT_BYTES

KINDS = ("binary", "empty", "huge", "folder", "unreadable", "missing", "garbage")


def make_bad(where: Path, kind: str, content: bytes) -> Path:
    """A path that is wrong in the way ``kind`` says; ``content``: the binary bytes to use."""
    p = where / "input.yaml"
    if kind == "binary":
        p.write_bytes(b"\xff\xfe\x00" + content)  # never valid UTF-8
    elif kind == "empty":
        p.write_bytes(b"")
    elif kind == "huge":
        with open(p, "wb") as f:
            f.truncate(MAX_INPUT_BYTES + 1)  # sparse: no disk used
    elif kind == "folder":
        p.mkdir()
    elif kind == "unreadable":
        if os.geteuid() != 0:
            p.write_text("x: 1\n")
            p.chmod(0)
        else:  # root reads mode 000; nobody opens a path under a regular file
            (where / "plain").write_text("x\n")
            p = where / "plain" / "input.yaml"
    elif kind == "garbage":
        p.write_text("- [unclosed\n: {\n")
    return p  # missing: never created


GOOD = {  # the other records of a run folder, well formed, so the bad one is what is refused
    "summary.json": json.dumps({"strategy": "ps", "workers": 2}),
    "iterations.csv": None,  # filled in below from the record's own columns
}


def _good_iterations() -> str:
    from synclab.report.records import ITERATION_COLUMNS

    return ",".join(ITERATION_COLUMNS) + "\n"


def run_dir_with(where: Path, kind: str, content: bytes, name: str) -> Path:
    """A run folder whose ``name`` file is bad (or which is itself bad, for folder-level kinds)."""
    d = where / "run"
    d.mkdir()
    for other, text in GOOD.items():
        if other != name:
            (d / other).write_text(text if text is not None else _good_iterations())
    bad = make_bad(d, kind, content)
    if kind in ("missing", "unreadable") and not bad.parent == d:
        return bad.parent if kind == "unreadable" else d
    if bad.exists() or bad.is_dir():
        bad.rename(d / name)
    return d


# (name, argv builder, words the message must contain besides the file). Each builder gets (tmp, bad path).
def _spec_cases():
    return [
        ("run SPEC", lambda t, p: ["run", str(p), "--out", str(t / "out"), "--no-report"]),
        ("simulate SPEC", lambda t, p: ["simulate", str(p), "--out", str(t / "out")]),
        ("coordinator --spec", lambda t, p: ["coordinator", "--spec", str(p), "--run-dir", str(t / "rd"),
                                             "--token", "x", "--listen", "127.0.0.1:0"]),
        ("plan mgwfbp --profile", lambda t, p: ["plan", "mgwfbp", "--profile", str(p), "--a", "0.001",
                                                "--b", "1e-9"]),
        ("plan stanza --profile", lambda t, p: ["plan", "stanza", "--profile", str(p), "--nodes", "4",
                                                "--bandwidth", "10gbit"]),
        ("shape --profile", lambda t, p: ["shape", "--profile", str(p), "--coordinator", "127.0.0.1:9",
                                          "--token", "x"]),
        ("compose-env --template", lambda t, p: ["compose-env", "--env-file", str(t / "new.env"), "--template",
                                                 str(p)]),
        ("compose-env --env-file", lambda t, p: ["compose-env", "--env-file", str(p), "--template",
                                                 str(t / "missing-template")]),
        ("dashboards render --replay", lambda t, p: ["dashboards", "render", "--replay", str(p), "--out",
                                                     str(t / "dash")]),
        ("dashboards render FILE", lambda t, p: ["dashboards", "render", str(p), "--out", str(t / "dash")]),
        ("tune SPEC", lambda t, p: ["tune", str(p), "--param", "transport.chunk_bytes=1024:4096", "--trials", "1",
                                    "--out", str(t / "tune")]),
        ("chaos SPEC", lambda t, p: ["chaos", str(p), "--fault", "kill:worker", "--out", str(t / "chaos")]),
        ("validate compare --before", lambda t, p: ["validate", "compare", "--before", str(p), "--after", str(p),
                                                    "--out", str(t / "cmp")]),
        ("calibrate ring-goodput CSV", lambda t, p: ["calibrate", "ring-goodput", str(p), "--out", str(t / "cal")]),
        ("reproduce --targets", lambda t, p: ["reproduce", "--targets", str(p), "--list"]),
    ]


FILE_CASES = _spec_cases()
FOLDER_ARGS = {"reproduce --targets", "dashboards render FILE"}  # a folder of targets / of dashboards is valid
RUN_DIR_CASES = [  # commands that read a run folder: the folder's file is bad
    ("shape --run (control.json)", "control.json",
     lambda t, d: ["shape", "--profile", "1gbit", "--run", str(d)]),
    ("report RUN_DIR (summary.json)", "summary.json", lambda t, d: ["report", str(d)]),
    ("report RUN_DIR (iterations.csv)", "iterations.csv", lambda t, d: ["report", str(d)]),
]


def check(result, path: Path) -> None:
    out = result.output
    assert result.exit_code in (1, 2), f"exit {result.exit_code}:\n{out}\n{result.exception!r}"
    assert "Traceback" not in out, out
    exc = result.exception
    assert exc is None or isinstance(exc, SystemExit), f"{type(exc).__name__}: {exc}"
    names = {str(path), path.name, str(path.parent)}
    assert any(n in out.replace("\n", "") for n in names), f"the message names no file:\n{out}"


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(case=st.sampled_from(FILE_CASES), kind=st.sampled_from(KINDS), content=st.binary(max_size=64))
def test_a_bad_file_argument_is_refused_naming_it(tmp_path_factory, case, kind, content):
    tmp = tmp_path_factory.mktemp("bad")
    name, argv = case
    if kind == "empty" and name in ("compose-env --env-file",):
        return  # an empty .env is a valid one to fill in
    if kind == "missing" and name == "compose-env --env-file":
        return  # the file it creates
    if kind == "folder" and name in FOLDER_ARGS:
        return  # a folder is what this argument takes
    bad = make_bad(tmp, kind, content)
    result = CliRunner().invoke(app, argv(tmp, bad))
    if kind == "empty" and result.exit_code == 0:
        return  # an empty spec, profile or template may mean "all defaults"; what matters is no traceback
    check(result, bad)


@settings(SETTINGS, max_examples=25)
@given(case=st.sampled_from(RUN_DIR_CASES), kind=st.sampled_from(KINDS), content=st.binary(max_size=64))
def test_a_bad_file_in_a_run_folder_is_refused_naming_it(tmp_path_factory, case, kind, content):
    tmp = tmp_path_factory.mktemp("badrun")
    name, filename, argv = case
    d = run_dir_with(tmp, kind, content, filename)
    result = CliRunner().invoke(app, argv(tmp, d))
    check(result, d / filename if (d / filename).exists() or (d / filename).is_dir() else d)


@pytest.mark.parametrize("listen", ["nohost", "127.0.0.1:notaport", "127.0.0.1:99999", "::1:5", ":5"])
def test_coordinator_refuses_a_bad_listen_address_before_anything(tmp_path, listen):
    spec = tmp_path / "spec.yaml"
    spec.write_text("strategy: {name: ps}\n")
    result = CliRunner().invoke(app, ["coordinator", "--spec", str(spec), "--run-dir", str(tmp_path / "rd"),
                                      "--token", "x", "--listen", listen])
    assert result.exit_code == 2, result.output
    assert "--listen" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "rd").exists()


def test_tls_init_into_a_file_is_refused_and_writes_nothing(tmp_path):
    target = tmp_path / "tls"
    target.write_text("not a folder")
    result = CliRunner().invoke(app, ["tls", "init", str(target)])
    assert result.exit_code == 2, result.output
    assert str(target) in result.output.replace("\n", "") and target.read_text() == "not a folder"


def test_tls_init_writes_all_three_files_or_none(tmp_path, monkeypatch):
    import synclab.fileio as fileio

    real = fileio._write_temp
    calls = []

    def failing(path, data, mode):  # the disk fills up at the third file
        calls.append(path)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return real(path, data, mode)

    monkeypatch.setattr(fileio, "_write_temp", failing)
    result = CliRunner().invoke(app, ["tls", "init", str(tmp_path / "tls")])
    assert result.exit_code == 1, result.output
    assert "No space left" in " ".join(result.output.split()) and "Traceback" not in result.output
    assert sorted(p.name for p in (tmp_path / "tls").iterdir()) == []  # no certificate without its CA


def test_control_json_of_the_wrong_shape_is_named(tmp_path):
    (tmp_path / "control.json").write_text(json.dumps(["not", "an", "object"]))
    result = CliRunner().invoke(app, ["shape", "--profile", "1gbit", "--run", str(tmp_path)])
    assert result.exit_code == 2 and "control.json" in result.output and "coordinator" in result.output
