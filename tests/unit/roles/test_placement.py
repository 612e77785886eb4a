import os
import socket

from synclab.roles.placement import HOST_ENV, IMAGE_ENV, node_placement


def test_a_process_reports_this_machine_and_no_image():
    where = node_placement({})
    assert where == {"host": socket.gethostname(), "hostname": socket.gethostname(), "pid": str(os.getpid())}


def test_a_container_reports_what_its_starter_said():
    where = node_placement({HOST_ENV: "swarm-host-2", IMAGE_ENV: "synclab:latest@sha256:ab12"})
    assert where["host"] == "swarm-host-2" and where["image"] == "synclab:latest@sha256:ab12"
    assert where["hostname"] == socket.gethostname()  # the container's own name stays beside it


def test_empty_variables_count_as_unset():
    assert node_placement({HOST_ENV: "", IMAGE_ENV: ""}) == node_placement({})
