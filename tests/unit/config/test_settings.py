"""The container's SYNCLAB_* variables: defaults, ranges, and errors that name the variable."""

import pytest

from synclab.config.settings import ContainerSettings, SettingsError

TOKEN = {"SYNCLAB_TOKEN": "t"}


def test_defaults():
    s = ContainerSettings.from_env(TOKEN)
    assert (s.token, s.profile, s.shape_device, s.metrics_port, s.repeat, s.verbose) == ("t", None, "eth0", 9100, 1,
                                                                                         False)
    assert s.health_grace_s == 120 and str(s.spec) == "/opt/synclab/specs/compose.yaml" and str(s.runs_dir) == "/runs"
    assert (s.listen_port, s.coordinator, s.port, s.connect_timeout_s) == (50051, "coordinator:50051", 50060, 60)
    assert s.spec_overrides() == []


def test_values_are_read_and_typed():
    s = ContainerSettings.from_env({**TOKEN, "SYNCLAB_PROFILE": " 1gbit ", "SYNCLAB_VERBOSE": "yes",
                                    "SYNCLAB_METRICS_PORT": "9200", "SYNCLAB_REPEAT": "0", "SYNCLAB_WORKERS": "3",
                                    "SYNCLAB_STRATEGY": "p3", "SYNCLAB_ITERATIONS": "", "SYNCLAB_HEALTH_GRACE": "2.5",
                                    "SYNCLAB_SET": "optimizer.lr=0.1  network.rate=null",
                                    "SYNCLAB_PROFILES_DIR": "/somewhere"})  # read by netem, not here
    assert (s.profile, s.verbose, s.metrics_port, s.repeat, s.health_grace_s) == ("1gbit", True, 9200, 0, 2.5)
    # the variables' own overrides first, SYNCLAB_SET's after them (so it wins); an empty variable is unset
    assert s.spec_overrides() == [("strategy.name", "p3"), ("cluster.workers", 3), ("optimizer.lr", 0.1),
                                  ("network.rate", None)]


@pytest.mark.parametrize("value", ["none", "None", "off", "0"])
def test_profile_none_means_unshaped(value):
    assert ContainerSettings.from_env({**TOKEN, "SYNCLAB_PROFILE": value}).profile is None


@pytest.mark.parametrize("env, message", [
    ({}, "SYNCLAB_TOKEN is required (the shared job token"),
    ({"SYNCLAB_TOKEN": "  "}, "SYNCLAB_TOKEN is required"),
    ({**TOKEN, "SYNCLAB_METRICS_PORT": "abc"}, "SYNCLAB_METRICS_PORT='abc' is not an integer"),
    ({**TOKEN, "SYNCLAB_METRICS_PORT": "70000"}, "SYNCLAB_METRICS_PORT=70000 is out of range [1, 65535]"),
    ({**TOKEN, "SYNCLAB_REPEAT": "-1"}, "SYNCLAB_REPEAT=-1 is out of range [0, 1000000]"),
    ({**TOKEN, "SYNCLAB_WORKERS": "two"}, "SYNCLAB_WORKERS='two' is not an integer"),
    ({**TOKEN, "SYNCLAB_CONNECT_TIMEOUT": "0"}, "SYNCLAB_CONNECT_TIMEOUT=0 is out of range [1, 86400]"),
    ({**TOKEN, "SYNCLAB_HEALTH_GRACE": "soon"}, "SYNCLAB_HEALTH_GRACE='soon' is not a number"),
    ({**TOKEN, "SYNCLAB_VERBOSE": "maybe"}, "SYNCLAB_VERBOSE='maybe': expected 0 or 1"),
    ({**TOKEN, "SYNCLAB_COORDINATOR": "coordinator"}, "SYNCLAB_COORDINATOR='coordinator': expected host:port"),
    ({**TOKEN, "SYNCLAB_COORDINATOR": "coordinator:0"}, "SYNCLAB_COORDINATOR='coordinator:0': expected host:port"),
    ({**TOKEN, "SYNCLAB_STRATEGY": "ps; rm"}, "SYNCLAB_STRATEGY='ps; rm': expected a plain name"),
    ({**TOKEN, "SYNCLAB_SET": "optimizer.lr=0.1 cluster.workers"},
     "SYNCLAB_SET='optimizer.lr=0.1 cluster.workers': override 'cluster.workers' must look like dotted.key=value"),
])
def test_a_bad_value_names_the_variable(env, message):
    with pytest.raises(SettingsError) as e:
        ContainerSettings.from_env(env)
    assert message in str(e.value)


def test_every_bad_variable_is_named_at_once():
    with pytest.raises(SettingsError) as e:
        ContainerSettings.from_env({"SYNCLAB_PORT": "x", "SYNCLAB_REPEAT": "-2"})
    assert all(v in str(e.value) for v in ("SYNCLAB_TOKEN", "SYNCLAB_PORT", "SYNCLAB_REPEAT"))


def test_help_lists_every_variable_with_its_default():
    text = ContainerSettings.variables_help()
    lines = text.splitlines()
    assert len(lines) == len(ContainerSettings.model_fields)
    for needle in ("SYNCLAB_TOKEN ", "(required)", "SYNCLAB_METRICS_PORT", "(default 9100)", "(default none)",
                   "SYNCLAB_SET", "(default coordinator:50051)", "(default 120)", "(default 0)"):
        assert needle in text
