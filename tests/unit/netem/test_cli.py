import json

from typer.testing import CliRunner

from synclab.cli import app
from synclab.netem.cli import profile_rows
from synclab.netem.profile import load_profile

runner = CliRunner()


def test_profiles_lists_every_stock_profile_with_values():
    r = runner.invoke(app, ["profiles", "--json"])
    assert r.exit_code == 0, r.output
    rows = {row["name"]: row for row in json.loads(r.output)}
    assert rows["4gbit"]["rate"] == "4gbit" and rows["4gbit"]["burst"] == "2MB (derived)"
    assert rows["wan-20ms"]["delay"] == "20ms" and rows["lossy-1pct"]["loss"] == "1%"
    assert rows["unshaped"]["rate"] == "unlimited"
    table = runner.invoke(app, ["profiles", "4gbit"], env={"COLUMNS": "200"})
    assert table.exit_code == 0 and "4gbit" in table.output and "10gbit" not in table.output


def test_bad_profile_exits_2_naming_the_field(tmp_path):
    (tmp_path / "bad.yaml").write_text("rate: 4gbit\nloss: 120%\n")
    r = runner.invoke(app, ["profiles", "--profiles-dir", str(tmp_path)])
    assert r.exit_code == 2 and "loss" in r.output and "100" in r.output
    r = runner.invoke(app, ["profiles", "no-such-profile"])
    assert r.exit_code == 2 and "unknown profile" in r.output


def test_rows_show_the_backend_this_machine_would_use():
    rows = profile_rows([load_profile("wan-20ms")], available=frozenset({"tbf", "htb", "ifb"}), privileged=True)
    assert rows[0]["backend"] == "tbf" and rows[0]["left_to_transport"] == ["delay", "jitter"]
