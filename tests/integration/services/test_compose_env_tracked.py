"""No compose secret is tracked by git (asks `git ls-files`); the rest of compose-env is in tests/unit/services."""

import subprocess
from pathlib import Path

from synclab.cli.compose_env import SECRETS, _values

REPO = Path(__file__).resolve().parents[3]


def test_no_tracked_file_carries_a_compose_secret():
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    assert ".env" not in tracked and ".env.example" in tracked
    example = _values((REPO / ".env.example").read_text())
    assert not set(SECRETS) & set(example)
    assert ".env" in (REPO / ".gitignore").read_text().split()
