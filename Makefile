# SyncLab quick start:  `make run`  runs the example experiment;  `make check`  lints and runs the unit tests (under two
# minutes, before every commit);  `make test`  runs the whole test suite (what CI runs). See CONTRIBUTING.md.
.PHONY: venv system-deps run check lint unit test protos clean-runs compose-env

venv:
	@scripts/bootstrap.sh

system-deps:
	@scripts/system-deps.sh

run: venv
	.venv/bin/synclab run quickstart --out runs/quickstart

# The fast tier: lint, then tests/unit (no processes, no servers: tests/unit/conftest.py refuses them).
check: lint unit

lint: venv
	.venv/bin/ruff check .

unit: venv
	.venv/bin/pytest tests/unit -q

# Everything, as CI runs it (.ci/run): unit and integration tiers, containers and network namespaces included.
test: system-deps venv
	.venv/bin/pytest

# .env for docker compose: .env.example plus a random job token and Grafana password (kept if present).
compose-env: venv
	.venv/bin/synclab compose-env

protos: venv
	.venv/bin/python -m synclab.wire.codegen

clean-runs:
	rm -rf runs
