#!/bin/bash
# The Python packages SyncLab needs that a lent GPU machine's image lacks or holds too old (seen on an H200,
# 2026-11-27: no pydantic, grpcio 1.84 where the generated stubs need >= 1.85.1), downloaded here as CPython 3.12
# x86-64 wheels into .whl/ at the versions of this checkout's venv. check.sh installs them when .whl/ travels
# (`carry: [".whl"]`); .whl/ is for .git/info/exclude, not the repository.
set -eu
PY=${PY:-.venv/bin/python}
pkgs=""
for p in pydantic pydantic_core annotated-types typing-inspection typing_extensions grpcio protobuf simpy; do
  pkgs="$pkgs $p==$($PY -m pip show "$p" | sed -n 's/^Version: //p')"
done
plats=""
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
  plats="$plats --platform $p"
done
# shellcheck disable=SC2086
$PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $plats -d .whl $pkgs
ls .whl
