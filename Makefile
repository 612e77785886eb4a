# SyncLab quick start:  `make run`  runs the example experiment;  `make test`  runs the whole test suite.
.PHONY: venv system-deps run test protos clean-runs compose-env

venv:
	@scripts/bootstrap.sh

system-deps:
	@scripts/system-deps.sh

run: venv
	.venv/bin/synclab run examples/quickstart.yaml --out runs/quickstart

test: system-deps venv
	.venv/bin/pytest

# .env for docker compose: .env.example plus a random job token and Grafana password (kept if present).
compose-env: venv
	.venv/bin/synclab compose-env

protos: venv
	.venv/bin/python -m synclab.wire.codegen

clean-runs:
	rm -rf runs
