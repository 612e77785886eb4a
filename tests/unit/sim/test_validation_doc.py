"""The validation record (``synclab validate grid --record``) and ``docs/results/validation.md`` built from
records only (:mod:`synclab.validate`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from synclab.cli import app
from synclab.resources import packaged
from synclab.validate import doc as vdoc
from synclab.validate import grid as vgrid

REPO = Path(__file__).resolve().parents[3]
ROWS = [
    {"strategy": "wfbp", "rate": "1gbit", "workers": 2, "model": "resnet50", "emulated_s": 1.0, "simulated_s": 0.95,
     "ratio": 0.95, "dilation": 2, "emu_started": "2026-11-26T20:00:00", "emu_wall_s": 60.0, "emu_load_end": 1.5},
    {"strategy": "wfbp", "rate": "1gbit", "workers": 16, "model": "resnet50", "emulated_s": 4.0, "simulated_s": 3.0,
     "ratio": 0.75, "dilation": 16, "emu_started": "2026-11-26T20:05:00", "emu_wall_s": 600.0, "emu_load_end": 9.0,
     "emu_host_busy": 0.934},
    {"strategy": "mgwfbp", "rate": "1gbit", "workers": 16, "model": "resnet50", "emulated_s": 6.0,
     "simulated_s": 5.7, "ratio": 0.95, "dilation": 16, "emu_a_s": 0.0134, "sim_a_s": 0.0137, "a_ratio": 1.02,
     "emu_b_s_per_byte": 24e-9, "sim_b_s_per_byte": 19.4e-9, "b_ratio": 0.81},
]


def test_a_record_keeps_the_command_code_and_rows(tmp_path, monkeypatch):
    out = tmp_path / "runs"
    out.mkdir()
    (out / "sim-vs-emu.json").write_text(json.dumps(ROWS))
    (out / "sim-vs-emu.csv").write_text("strategy\nwfbp\n")
    monkeypatch.setattr("synclab.reproduce.runner.code_version", lambda root: "abc1234")
    monkeypatch.setattr(vgrid.subprocess, "run", lambda *a, **k: type("R", (), {"stdout": " M src/x.py\n"})())
    dest = vgrid.record(out, "grid-a", "synclab validate grid --workers 2,16 --sim-arg=--host-cpu", tmp_path)
    assert dest == tmp_path / "docs" / "validation" / "grid-a"
    meta = json.loads((dest / "sim-vs-emu.json").read_text())
    assert meta["command"] == "synclab validate grid --workers 2,16 --sim-arg=--host-cpu"
    assert meta["rows"] == ROWS and meta["code"] == "abc1234-dirty" and meta["written"]
    assert (dest / "sim-vs-emu.csv").read_text() == "strategy\nwfbp\n"


def test_the_doc_counts_and_tabulates_every_record(tmp_path):
    d = tmp_path / "docs" / "validation"
    (d / "grid-a").mkdir(parents=True)
    (d / "grid-a" / "sim-vs-emu.json").write_text(json.dumps({"command": "synclab validate grid x",
                                                              "code": "abc", "written": "now", "rows": ROWS}))
    (d / "ring").mkdir()
    (d / "ring" / "allreduce.csv").write_text("link,ranks,mbytes,ring_bound_s,gloo_s,synclab_s,synclab_cpu_s_per_gb,"
                                              "gloo_cpu_s_per_gb\ne62500kbit.yaml,16,2.408996,0.578,0.612,0.993,"
                                              "33.04,8.64\n")
    (d / "ring" / "about.md").write_text("The ring alone at 16 ranks.\n")
    (d / "sampler").mkdir()
    (d / "sampler" / "sampler-cost.csv").write_text("interval_ms,cores_per_node,samples_per_s,cpu_s_per_sample\n"
                                                    "10.0,0.01001,100.1,0.0001\n")
    text = vdoc.render(tmp_path)
    assert "| [`grid-a`](#grid-a) | 2 of 3 | 1 of 1 |" in text
    assert "the ring alone (`allreduce.csv`)\n\nThe ring alone at 16 ranks.\n" in text  # about.md under its heading
    assert "| 10 ms | 100.1 | 10.01 | 100 |" in text  # b ratio 0.81: just inside 20 %
    assert ("| `wfbp` | 1gbit | resnet50 | **0.950** (0.950 / 1.000 s, D = 2) | 0.750 (3.000 / 4.000 s, D = 16, "
            "host 93 % busy) |" in text)
    assert "dilation, how busy the host's cores were over the emulated point's measured iterations):" in text
    assert "| 24.00 ns/B | 19.40 ns/B | 0.810 |" in text
    assert "1-minute load average at the points' ends 1.5–9.0" in text
    assert "| e62500kbit.yaml | 16 | 2.4 | 151 kB | 0.993 | 0.612 | 0.578 | 0.609 | 0.987 | 33.0 / 8.6 |" in text


def test_no_records_is_a_clear_error(tmp_path):
    with pytest.raises(vdoc.ValidationDocError, match="no validation records"):
        vdoc.render(tmp_path)


def test_an_emulated_point_keeps_the_load_it_ended_under(tmp_path):
    m = vgrid
    summary = {"started_at": "2026-11-26T20:00:00", "wall_seconds": 61.5}
    first = m._provenance(tmp_path, summary)
    assert first["emu_started"] == summary["started_at"] and first["emu_wall_s"] == 61.5
    assert first["emu_load_end"] >= 0 and (tmp_path / m.LOAD_FILE).exists()
    assert m._provenance(tmp_path, {"started_at": 1795723562.6})["emu_started"] == "2026-11-26 20:06:02 UTC"
    (tmp_path / m.LOAD_FILE).write_text("7.25\n")  # a reused point reads back what was written when it ran
    assert m._provenance(tmp_path, summary)["emu_load_end"] == 7.25


def test_the_calibrated_ring_goodput_is_tabulated(tmp_path):
    d = tmp_path / "docs" / "validation" / "ring"
    d.mkdir(parents=True)
    (d / "ring-goodput.csv").write_text("ranks,segment_bytes,share,mbytes,emulated_s,simulated_s,"
                                        "simulated_full_share_s,link,source\n16,150562,0.623,2.4,0.993,0.9926,"
                                        "0.6224,x,y\n")
    assert "| 16 | 151 kB | 0.993 | 0.622 | 0.623 | 0.993 |" in vdoc.render(tmp_path)


def test_an_emulated_point_keeps_how_busy_its_host_was(tmp_path):
    m = vgrid
    host = {"busy_fraction": 0.876, "cores": 2, "seconds": 120.0, "context_switches_per_s": 41000.0}
    got = m._provenance(tmp_path, {"started_at": 1.0, "host_cpu": host})
    assert got["emu_host_busy"] == 0.876 and got["emu_ctxt_per_s"] == 41000.0
    assert m._provenance(tmp_path, {"started_at": 1.0})["emu_host_busy"] is None  # a run from before: not recorded


def test_a_point_runs_at_k_times_its_dilation_when_asked():
    m = vgrid
    spec = packaged("examples/quickstart.yaml")
    ring8 = ["strategy.name=wfbp", "network.rate=1gbit", "cluster.workers=8"]
    assert m.point_dilation("rule", spec, ring8, "1gbit") == 8  # 8 links x 1 Gbit/s / D <= 1.5 Gbit/s
    assert m.point_dilation("rule", spec, ring8, "1gbit", times=2) == 16
    assert m.point_dilation("8", spec, ring8, "1gbit", times=2) == 2  # below 4 Gbit/s no dilation but the K
    assert m.point_dilation("8", spec, ring8, "4gbit") == 8


def test_a_dilation_multiple_below_one_is_refused():
    r = CliRunner().invoke(app, ["validate", "grid", "--dilation-times", "0", "--sim-only", "--out", "/nonexistent"])
    assert r.exit_code == 2 and "--dilation-times" in r.output and not Path("/nonexistent").exists()


def _write_record(d: Path, name: str, rows: list[dict]) -> None:
    (d / name).mkdir(parents=True)
    (d / name / "sim-vs-emu.json").write_text(json.dumps({"command": "c", "code": "abc", "written": "now",
                                                          "rows": rows}))


def test_the_grid_takes_each_point_from_the_newest_listed_record(tmp_path):
    d = tmp_path / "docs" / "validation"
    _write_record(d, "old", ROWS)
    newer = dict(ROWS[1], ratio=0.98, simulated_s=3.92)  # wfbp 16 workers measured again
    _write_record(d, "new", [newer])
    _write_record(d, "unlisted", [dict(ROWS[0], ratio=0.5)])  # not in grid.csv: not in the grid
    (d / "grid.csv").write_text('record,note\nold,"the first grid"\nnew,the 16-worker point again\n')
    written = vdoc.write(tmp_path)
    text = (tmp_path / vdoc.DOC).read_text()
    assert written[:2] == [tmp_path / vdoc.DOC, d / "grid.png"]
    assert text == vdoc.render(tmp_path)
    total = len(vdoc.grid_strategies()) * 2 * 4 * 2  # every registered strategy but local x 2 rates x 4 sizes x 2 models
    assert f"**3 of {total} points measured, 3 of them within ±10 %**" in text
    assert ("| `wfbp` | 1gbit | resnet50 | **0.950** [`old`](#old) |  |  | **0.980** [`new`](#new) |"
            in text)
    assert "No point measured yet at: 4gbit resnet50, 1gbit vgg16, 4gbit vgg16." in text
    assert "- [`new`](#new): the 16-worker point again" in text
    assert "| `mgwfbp` 1gbit resnet50 16 workers | **1.020** | **0.810** | [`old`](#old) |" in text
    assert (d / "grid.png").stat().st_size > 0


def test_a_grid_listing_a_missing_record_is_a_clear_error(tmp_path):
    d = tmp_path / "docs" / "validation"
    _write_record(d, "old", ROWS)
    (d / "grid.csv").write_text("record,note\nold,x\ngone,y\n")
    with pytest.raises(vdoc.ValidationDocError, match="names record 'gone'"):
        vdoc.write(tmp_path)
    assert not (tmp_path / vdoc.DOC).exists()


def test_the_readme_block_between_the_markers_is_replaced_and_nothing_else(tmp_path):
    d = tmp_path / "docs" / "validation"
    _write_record(d, "old", ROWS)
    (d / "grid.csv").write_text("record,note\nold,x\n")
    readme = tmp_path / "README.md"
    readme.write_text("# Title\n\nbefore\n<!-- grid:begin -->\nstale\n<!-- grid:end -->\nafter\n")
    assert readme in vdoc.write(tmp_path)
    text = readme.read_text()
    assert text.startswith("# Title\n\nbefore\n<!-- grid:begin -->\n") and text.endswith("<!-- grid:end -->\nafter\n")
    assert "stale" not in text
    assert "| 1gbit | resnet50 | 1 of 1 (0.95–0.95) | not yet | not yet | 1 of 2 (0.75–0.95) |" in text
    readme.write_text("no markers\n")  # a README without the block is left as it is
    assert readme not in vdoc.write(tmp_path) and readme.read_text() == "no markers\n"
    with pytest.raises(vdoc.ValidationDocError, match="no <!-- grid:begin -->"):
        vdoc.replace_block("no markers\n", ["x"])


def test_a_point_is_compared_at_its_strategys_pace(tmp_path):
    # two workers taking turns being slow: the slowest-per-iteration figure (1.5 s) is no worker's pace (1.0 s)
    import csv

    with (tmp_path / "iterations.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["iteration", "rank", "start_s", "iteration_s", "compute_s", "comm_wait_s",
                                          "loss", "samples", "bytes_sent", "bytes_received"])
        w.writeheader()
        for i in range(1, 6):
            for r in (0, 1):
                w.writerow({"iteration": i, "rank": r, "start_s": 0, "iteration_s": 1.5 if (i + r) % 2 else 0.5,
                            "compute_s": 0.1, "comm_wait_s": 0, "loss": 1, "samples": 8, "bytes_sent": 0,
                            "bytes_received": 0})
    m = vgrid
    assert m.iteration_mean(tmp_path, {"strategy": "asgd", "warmup": 1}) == (1.0, "own")
    assert m.iteration_mean(tmp_path, {"strategy": "ps", "warmup": 1}) == (1.5, "slowest")


def test_the_doc_says_which_points_ran_at_their_own_pace():
    m = vdoc
    own = m._ratio_cell({**ROWS[0], "pace": "own"})
    assert "own pace" in own and "own pace" not in m._ratio_cell(ROWS[0])


@pytest.mark.parametrize("bad,words", [(b"{not json", "is not valid JSON"), (b"\xff\xfe", "is not UTF-8"),
                                       (b'{"rows": 3}', "is not a record")])
def test_a_bad_record_leaves_the_page_and_the_readme_as_they_were(tmp_path, bad, words):
    d = tmp_path / "docs" / "validation"
    _write_record(d, "old", ROWS)
    (d / "grid.csv").write_text("record,note\nold,x\n")
    readme = tmp_path / "README.md"
    readme.write_text("<!-- grid:begin -->\n<!-- grid:end -->\n")
    vdoc.write(tmp_path)
    page, text = (tmp_path / vdoc.DOC).read_text(), readme.read_text()
    _write_record(d, "broken", ROWS)
    (d / "broken" / "sim-vs-emu.json").write_bytes(bad)
    with pytest.raises(vdoc.ValidationDocError, match=words) as e:
        vdoc.write(tmp_path)
    assert "broken/sim-vs-emu.json" in str(e.value)
    assert (tmp_path / vdoc.DOC).read_text() == page and readme.read_text() == text
