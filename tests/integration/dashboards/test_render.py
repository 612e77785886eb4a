"""``synclab dashboards render`` against a stand-in Prometheus (a local HTTP server speaking its API):
one PNG per dashboard plus CSV/JSON, "no data" reported (exit 1 with --require-data), and exit 2
naming the problem for an unreachable Prometheus, a refused query or a malformed dashboard."""

from __future__ import annotations

import json
import shutil
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from PIL import Image
from typer.testing import CliRunner

from synclab.cli import app
from synclab.dashboards.renderer.prometheus import Prometheus, QueryRejected

DASHBOARDS = Path(__file__).resolve().parents[3] / "grafana" / "dashboards"


class _Handler(BaseHTTPRequestHandler):
    empty: tuple[str, ...] = ()

    def log_message(self, *args):
        pass

    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        q = {k: v[0] for k, v in urllib.parse.parse_qs(url.query).items()}
        if url.path.startswith("/api/v1/label/"):
            label = url.path.split("/")[4]
            data = ["ps0", "worker0"] if label == "node" else ["ps", "worker"]
        elif url.path == "/api/v1/query_range":
            if "syntax error" in q["query"]:
                return self._answer(400, {"status": "error", "errorType": "bad_data", "error": "parse error"})
            start, end, step = float(q["start"]), float(q["end"]), float(q["step"])
            values = [[start + i * step, str(1e8 * (1 + i % 7))] for i in range(int((end - start) / step) + 1)]
            node = "ps0" if 'node="ps0"' in q["query"] else "worker0"
            result = [] if any(e in q["query"] for e in self.empty) else [
                {"metric": {"node": node, "direction": "egress", "priority_band": "0", "kind": "gradient",
                            "peer": "ps0"}, "values": values}]
            data = {"resultType": "matrix", "result": result}
        elif url.path == "/api/v1/query":
            data = {"resultType": "vector", "result": [{"metric": {"node": "worker0", "role": "worker",
                                                                   "backend": "tbf"}, "value": [q["time"], "1"]}]}
        else:
            return self._answer(404, {"status": "error", "error": "not found"})
        self._answer(200, {"status": "success", "data": data})

    def _answer(self, code, body):
        raw = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


@pytest.fixture
def prometheus():
    """URL of a stand-in Prometheus; ``prometheus.empty`` lists query fragments answered with no data."""
    handler = type("Handler", (_Handler,), {"empty": ()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    class Url(str):
        def set_empty(self, *fragments):
            handler.empty = fragments

    yield Url(f"http://127.0.0.1:{server.server_address[1]}")
    server.shutdown()
    server.server_close()


def _render(*args):
    return CliRunner().invoke(app, ["dashboards", "render", *args])


def test_every_dashboard_becomes_a_png_with_its_data(prometheus, tmp_path):
    r = _render(str(DASHBOARDS), "--prometheus", prometheus, "--out", str(tmp_path), "--from", "now-2m",
                "--prefix", "p3-", "--caption", "a test run", "--require-data")
    assert r.exit_code == 0, r.output
    for name in ("synclab-network", "synclab-training", "synclab-scheduler"):
        png = tmp_path / f"p3-{name}.png"
        with Image.open(png) as img:
            assert img.format == "PNG" and img.width == 16 * 90
        doc = json.loads((tmp_path / f"p3-{name}.json").read_text())
        assert doc["no_data"] == [] and doc["prometheus"] == prometheus
        assert (tmp_path / f"p3-{name}.csv").stat().st_size > 0
        assert f"{png}  (" in r.stdout
    net = json.loads((tmp_path / "p3-synclab-network.json").read_text())
    assert [p["title"] for p in net["panels"][:2]] == ["tx / rx — ps0", "tx / rx — worker0"]


def test_panels_without_data_are_reported_and_fail_with_require_data(prometheus, tmp_path):
    prometheus.set_empty("synclab_training_loss")
    r = _render(str(DASHBOARDS / "synclab-training.json"), "--prometheus", prometheus, "--out", str(tmp_path))
    assert r.exit_code == 0, r.output
    assert "no data: synclab-training.json / training loss" in r.output
    assert "3/4 panels with data" in r.stdout
    r = _render(str(DASHBOARDS / "synclab-training.json"), "--prometheus", prometheus, "--out", str(tmp_path),
                "--require-data")
    assert r.exit_code == 1, r.output
    assert "1 panel(s) without data" in r.output and "training loss" in r.output
    assert (tmp_path / "synclab-training.png").is_file()  # drawn all the same, the panel says "no data"


def test_a_refused_query_names_the_panel(prometheus, tmp_path):
    board = json.loads((DASHBOARDS / "synclab-training.json").read_text())
    board["panels"][0]["targets"][0]["expr"] = "syntax error ("
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(board))
    r = _render(str(path), "--prometheus", prometheus, "--out", str(tmp_path))
    assert r.exit_code == 2, r.output
    assert "broken.json / iteration time / A: Prometheus refused" in r.output and "parse error" in r.output


def test_malformed_dashboard_exits_2_naming_the_file(prometheus, tmp_path):
    boards = tmp_path / "boards"
    boards.mkdir()
    shutil.copy(DASHBOARDS / "synclab-network.json", boards)
    (boards / "zz-broken.json").write_text('{"panels": [')
    r = _render(str(boards), "--prometheus", prometheus, "--out", str(tmp_path / "out"))
    assert r.exit_code == 2, r.output
    assert "zz-broken.json: not valid JSON" in r.output
    assert not (tmp_path / "out" / "synclab-network.png").exists()  # every file is checked before drawing
    r = _render(str(tmp_path / "missing"), "--prometheus", prometheus)
    assert r.exit_code == 2 and "no such dashboard file or directory" in r.output
    r = _render(str(boards / "synclab-network.json"), "--prometheus", prometheus, "--var", "node")
    assert r.exit_code == 2 and "must look like name=value" in r.output
    r = _render(str(boards / "synclab-network.json"), "--prometheus", prometheus, "--from", "now", "--to", "now-5m")
    assert r.exit_code == 2 and "time range is empty" in r.output


def test_client_reports_refusals(prometheus):
    with pytest.raises(QueryRejected, match="bad_data: parse error"):
        Prometheus(prometheus).query_range("syntax error (", 0, 10, 1)
    assert Prometheus(prometheus).label_values("node", "up{}", 0, 10) == ["ps0", "worker0"]


def test_replay_draws_again_from_the_saved_answers(prometheus, tmp_path):
    r = _render(str(DASHBOARDS), "--prometheus", prometheus, "--out", str(tmp_path / "live"), "--prefix", "x-")
    assert r.exit_code == 0, r.output
    r = _render(str(DASHBOARDS), "--replay", str(tmp_path / "live"), "--prefix", "x-", "--out", str(tmp_path / "again"),
                "--require-data")
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in (tmp_path / "again").iterdir()) == [
        "x-synclab-network.png", "x-synclab-scheduler.png", "x-synclab-training.png"]
    assert "drawn from" in r.stdout
    r = _render(str(DASHBOARDS), "--replay", str(tmp_path / "live"), "--from", "now-1h")
    assert r.exit_code == 2 and "drop --from" in r.output
    r = _render(str(DASHBOARDS), "--replay", str(tmp_path / "live"), "--out", str(tmp_path / "z"))
    assert r.exit_code == 2 and "synclab-network.json: cannot read the saved snapshot" in r.output
