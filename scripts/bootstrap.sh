#!/usr/bin/env bash
# Create .venv and install SyncLab with its test dependencies. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.synclab-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/pip install --quiet --upgrade pip
  # Pin torch first: on the CI machines this is the CPU wheel on disk; elsewhere
  # pip takes the usual wheel for the platform (CUDA on Linux x86_64).
  .venv/bin/pip install --quiet "torch==${TORCH_VERSION:-2.13.0}"
  .venv/bin/pip install --quiet -e '.[dev]'
  touch "$stamp"
fi
