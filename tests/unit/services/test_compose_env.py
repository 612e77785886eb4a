"""No secret in tracked files: .env is generated with random secrets; compose refuses without them."""

import stat
from pathlib import Path

import yaml
from typer.testing import CliRunner

from synclab.cli import app
from synclab.cli.compose_env import SECRETS, _values, write_compose_env

REPO = Path(__file__).resolve().parents[3]


def test_compose_env_generates_distinct_secrets_once(tmp_path):
    env = tmp_path / ".env"
    result = CliRunner().invoke(app, ["compose-env", "--env-file", str(env), "--template",
                                      str(REPO / ".env.example")])
    assert result.exit_code == 0, result.output
    first = _values(env.read_text())
    assert all(len(first[s]) >= 32 for s in SECRETS) and first["SYNCLAB_TOKEN"] != first["GRAFANA_ADMIN_PASSWORD"]
    assert first["STRATEGY"] == "ps" and first["PUBLISH_ADDRESS"] == "127.0.0.1"  # the template's settings
    assert stat.S_IMODE(env.stat().st_mode) == 0o600
    assert write_compose_env(env, REPO / ".env.example") == []  # kept on a second run
    assert _values(env.read_text()) == first
    write_compose_env(env, REPO / ".env.example", force=True)
    assert _values(env.read_text())["SYNCLAB_TOKEN"] != first["SYNCLAB_TOKEN"]


def test_compose_env_without_a_template_says_so(tmp_path):
    result = CliRunner().invoke(app, ["compose-env", "--env-file", str(tmp_path / ".env"), "--template",
                                      str(tmp_path / "missing")])
    assert result.exit_code == 2 and "missing" in result.output


def test_compose_refuses_without_secrets_and_says_how():
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    env = compose["x-synclab-env"]["SYNCLAB_TOKEN"]
    grafana = compose["services"]["grafana"]["environment"]["GF_SECURITY_ADMIN_PASSWORD"]
    for value in (env, grafana):
        assert value.startswith("${") and ":?" in value and "synclab compose-env" in value


def test_dashboards_publish_on_loopback_unless_asked():
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    for service in ("prometheus", "grafana"):
        (port,) = compose["services"][service]["ports"]
        assert port.startswith("${PUBLISH_ADDRESS:-127.0.0.1}:"), port
