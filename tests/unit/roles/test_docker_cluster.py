"""The pure parts of the docker launcher (network.isolation docker): what the Engine is asked for,
which resources a cleanup selects, exit codes and addresses — no daemon needed."""

from pathlib import Path

import pytest

from synclab.config import parse_spec
from synclab.roles.docker_cluster import (
    JOB_LABEL,
    LAUNCHER_LABEL,
    DockerUnavailable,
    check_run_dir,
    container_request,
    exit_status,
    job_resources,
    launch_command,
    launcher_label,
    launcher_running,
    node_addresses,
    node_args,
    node_user,
)
from synclab.roles.network import resolve_network


def test_addresses_skip_the_gateway_and_stay_in_the_subnet():
    got = node_addresses("172.20.0.0/16", "172.20.0.1", ["coordinator", "ps0", "worker0"])
    assert got == {"coordinator": "172.20.0.2", "ps0": "172.20.0.3", "worker0": "172.20.0.4"}
    with pytest.raises(DockerUnavailable, match="too few addresses"):
        node_addresses("10.0.0.0/30", "10.0.0.1", ["a", "b"])


def test_exit_codes_read_like_a_local_process():
    assert exit_status(0) == 0 and exit_status(1) == 1 and exit_status(2) == 2
    assert exit_status(137) == -9 and exit_status(143) == -15   # tini: killed by SIGKILL / SIGTERM


def test_nodes_write_the_run_directory_as_its_owner_or_the_image_user_for_root():
    assert node_user(1000, 1000) == "1000:1000"
    assert node_user(0, 0) is None


@pytest.mark.parametrize("path", ["/usr/local/runs", "/opt/venv", "/opt/synclab/x", "/etc/r", "/"])
def test_a_run_directory_that_would_hide_the_image_is_refused(path):
    with pytest.raises(DockerUnavailable, match="--out"):
        check_run_dir(Path(path))


def test_ordinary_run_directories_are_accepted(tmp_path):
    check_run_dir(tmp_path / "runs" / "x")
    check_run_dir(Path("/optical/runs"))   # a prefix of a reserved path as text, not as a path


def test_a_node_runs_its_usual_command_line_through_the_entrypoint_launch_mode(tmp_path):
    args = node_args("worker", "worker1", address="172.20.0.6", coordinator="172.20.0.2:50051",
                     spec_path=tmp_path / "spec.yaml", run_dir=tmp_path)
    assert args == ["worker", "--rank", "1", "--coordinator", "172.20.0.2:50051", "--host", "172.20.0.6",
                    "--advertise", "172.20.0.6"]
    cmd = launch_command("worker", "worker1", spec_path=tmp_path / "spec.yaml", run_dir=tmp_path,
                         kernel=frozenset({"tbf", "htb", "ifb"}), user="1000:1000", synclab_args=args)
    assert cmd[:3] == ["launch", "worker", "worker1"]
    assert cmd[cmd.index("--kernel") + 1] == "htb,ifb,tbf"
    assert cmd[cmd.index("--record") + 1] == str(tmp_path / "shaping-worker1.json")
    assert cmd[cmd.index("--user") + 1] == "1000:1000"
    assert cmd[cmd.index("--") + 1:] == ["synclab", *args]
    coordinator = node_args("coordinator", "coordinator", address="172.20.0.2", coordinator="172.20.0.2:50051",
                            spec_path=tmp_path / "spec.yaml", run_dir=tmp_path)
    assert coordinator == ["coordinator", "--spec", str(tmp_path / "spec.yaml"), "--run-dir", str(tmp_path),
                           "--listen", "172.20.0.2:50051"]
    assert "--user" not in launch_command("ps", "ps0", spec_path=tmp_path / "s", run_dir=tmp_path,
                                          kernel=frozenset(), user=None, synclab_args=["ps"])


def test_container_request_is_labelled_shaped_and_mounts_the_run_directory(tmp_path):
    req = container_request(job="synclab-abcd", name="ps0", role="ps", image="sha256:x", command=["launch"],
                            run_dir=tmp_path, network="synclab-abcd", address="172.20.0.3",
                            environment={"SYNCLAB_TOKEN": "t"}, notsent_lowat=131072)
    create, host = req["create"], req["host"]
    assert create["name"] == "synclab-abcd-ps0" and create["hostname"] == "ps0"
    assert create["labels"][JOB_LABEL] == "synclab-abcd" and create["labels"]["io.synclab.node"] == "ps0"
    assert create["healthcheck"] == {"test": ["NONE"]}
    assert host["cap_add"] == ["NET_ADMIN"]
    assert host["sysctls"] == {"net.ipv4.tcp_notsent_lowat": "131072"}
    rd = str(tmp_path.resolve())
    assert host["binds"] == {rd: {"bind": rd, "mode": "rw"}}   # the same path inside: records as written
    assert host["tmpfs"] == {"/runs": ""}                       # no anonymous volume for the image's /runs
    assert req["endpoint"] == {"synclab-abcd": {"ipv4_address": "172.20.0.3"}}
    unbounded = container_request(job="j", name="ps0", role="ps", image="i", command=[], run_dir=tmp_path,
                                  network="j", address="a", environment={}, notsent_lowat=None)
    assert unbounded["host"]["sysctls"] == {}


def test_cleanup_selects_docker_jobs_whose_launcher_is_gone_or_the_one_named():
    items = [("c1", {JOB_LABEL: "synclab-a", LAUNCHER_LABEL: "h:1"}),
             ("c2", {JOB_LABEL: "synclab-b", LAUNCHER_LABEL: "h:2"}),
             ("compose", {"com.docker.compose.project": "synclab"}), ("bare", {}), ("none", None)]
    alive = {"h:2"}.__contains__   # the launcher of synclab-b still runs
    assert job_resources(items, launcher_alive=alive) == ["c1"]
    assert job_resources(items, force=True, launcher_alive=alive) == ["c1", "c2"]
    assert job_resources(items, "synclab-b", launcher_alive=alive) == ["c2"]   # named: whatever its launcher
    assert job_resources(items, "synclab-z", launcher_alive=alive) == []


def test_a_launcher_label_of_this_process_is_running_and_a_dead_pid_is_not():
    import os
    import socket

    assert launcher_running(launcher_label())
    assert not launcher_running(f"{socket.gethostname()}:{2 ** 22 + 7}")   # above pid_max: no such process
    assert launcher_running("another-host:1")                              # unknown here: kept
    assert not launcher_running("")                                        # no label: nobody owns it
    assert launcher_label().endswith(f":{os.getpid()}")


def test_docker_isolation_needs_no_netns_and_keeps_kernel_shaping():
    spec = parse_spec({"network": {"profile": "1gbit", "isolation": "docker"}})
    plan = resolve_network(spec, kernel_available=frozenset({"htb", "tbf", "ifb"}), netns_unavailable="needs root")
    assert plan.isolation == "docker" and plan.backend == "tbf" and plan.app_shaping == []


def test_colocated_shards_are_refused_in_containers():
    from synclab.config import SpecError

    spec = parse_spec({"cluster": {"colocate_ps": True}, "network": {"profile": "1gbit", "isolation": "docker"}})
    with pytest.raises(SpecError, match="colocate_ps"):
        resolve_network(spec, kernel_available=frozenset({"htb", "tbf", "ifb"}), netns_unavailable=None)
