#!/bin/bash
exec "$(dirname "$0")/../../scripts/gpu/check.sh" "$@"  # moved: scripts/gpu/check.sh
