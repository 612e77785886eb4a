"""``synclab profiles --check`` probes this machine's shaping backends (it runs ``tc``/``ip``)."""

import json

from typer.testing import CliRunner

from synclab.cli import app

runner = CliRunner()


def test_synclab_profiles_check_reports_a_backend_for_every_profile():
    r = runner.invoke(app, ["profiles", "--check", "--json", "1gbit", "wan-20ms"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)
    assert [row["name"] for row in rows] == ["1gbit", "wan-20ms"]
    assert all(row["backend"] in {"netem", "tbf", "htb", "app"} for row in rows)
