"""A Swarm stack encrypts its overlay and publishes Prometheus only when asked (docker-compose.swarm*.yml)."""

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]


class _ComposeLoader(yaml.SafeLoader):
    """YAML with compose's merge tags (!reset, !override) read as their plain values."""


for _tag in ("!reset", "!override"):
    _ComposeLoader.add_constructor(_tag, lambda loader, node: (
        loader.construct_sequence(node) if isinstance(node, yaml.SequenceNode)
        else loader.construct_mapping(node) if isinstance(node, yaml.MappingNode) else loader.construct_scalar(node)))


def load(name: str) -> dict:
    return yaml.load((REPO / name).read_text(), Loader=_ComposeLoader)


def test_the_swarm_overlay_is_encrypted():
    net = load("docker-compose.swarm.yml")["networks"]["cluster"]
    assert net["driver"] == "overlay" and "encrypted" in net["driver_opts"]


def test_the_overlay_is_unencrypted_only_when_asked():
    assert load("docker-compose.swarm-unencrypted.yml")["networks"]["cluster"]["driver_opts"] == {}
    lab = (REPO / "scripts/docker/swarm-lab.sh").read_text()
    assert "docker-compose.swarm-unencrypted.yml" in lab and "docker-compose.swarm-prometheus.yml" in lab


def test_swarm_prometheus_is_not_published_unless_asked():
    assert load("docker-compose.swarm.yml")["services"]["prometheus"]["ports"] == []
    (port,) = load("docker-compose.swarm-prometheus.yml")["services"]["prometheus"]["ports"]
    assert port["target"] == 9090 and port["mode"] == "host"


def test_compose_publishes_prometheus_and_grafana_on_loopback_by_default():
    services = load("docker-compose.yml")["services"]
    for name in ("prometheus", "grafana"):
        assert all(p.startswith("${PUBLISH_ADDRESS:-127.0.0.1}:") for p in services[name]["ports"]), name
