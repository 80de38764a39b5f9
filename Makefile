# The two commands of the quick start are `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# What each command installs: the demo only what it runs, the tests everything.
DEMO_STAMP := $(VENV)/.demo-stamp
TEST_STAMP := $(VENV)/.test-stamp
PIP := $(BIN)/pip install --quiet --disable-pip-version-check

.PHONY: demo test test-unit test-pg18 test-pg18-e2e test-pg18-rest test-pg15 lint typecheck generate bench tools venv clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# (Re)installed when pyproject.toml changes.
$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	$(PIP) -e '.[demo]'
	touch $@

$(TEST_STAMP): pyproject.toml | $(BIN)/python
	$(PIP) -e '.[test]'
	touch $@

venv: $(TEST_STAMP)

tools:
	scripts/install-test-tools
	scripts/oban-venv
	scripts/node-libs

demo: $(DEMO_STAMP)
	$(BIN)/pgq-exporter demo

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: venv
	$(BIN)/mypy

# Everything: lint, types, the whole suite on PostgreSQL 18 (embedded, or
# $$PGQ_TEST_DSN) and the integration tests on a throwaway PostgreSQL 15; the
# suite streams while the other three run beside it (scripts/test-all).
test: venv tools
	scripts/test-all

test-unit: venv
	$(BIN)/pytest -p no:cacheprovider tests/unit $(BESIDE_THE_UNITS)

test-pg18: venv
	$(BIN)/pytest

# The suite on PostgreSQL 18 in parts that make test runs side by side: the end-to-end
# tests, which mostly wait on processes, in two (those marked prometheus, under a real
# Prometheus, and the others), and the rest.
# The library presets' end-to-end tests run with the rest of the suite, and the queue
# objectives', periodic tasks' and workers' and promtool's alert tests with the unit
# tests: those two lanes have the time the others lack.
# The two longest presets' tests (pg-boss's and Procrastinate's) run in the unit lane,
# and Oban's and PgQueuer's in the PostgreSQL 15 lane.
BESIDE_THE_REST := tests/e2e/test_library_presets.py
PRESETS_BESIDE_THE_UNITS := test_pgboss_preset_reads_every_state \
	test_procrastinate_preset_reads_every_state
PRESETS_BESIDE_PG15 := test_oban_preset_reads_every_state test_pgqueuer_preset_reads_every_state
BESIDE_THE_UNITS := tests/e2e/test_slo_alerts.py tests/e2e/test_slo_promtool.py \
	tests/e2e/test_library_slos.py tests/e2e/test_periodic_alerts.py tests/e2e/test_no_workers.py \
	tests/e2e/test_promtool.py \
	$(addprefix tests/e2e/test_library_presets.py::,$(PRESETS_BESIDE_THE_UNITS))

test-pg18-e2e: venv
	$(BIN)/pytest -p no:cacheprovider -m "not prometheus" tests/e2e \
		$(addprefix --ignore=,$(BESIDE_THE_REST) $(BESIDE_THE_UNITS) $(BESIDE_PG15))

test-pg18-prometheus: venv
	$(BIN)/pytest -p no:cacheprovider -m prometheus tests/e2e \
		$(addprefix --ignore=,$(BESIDE_THE_REST) $(BESIDE_THE_UNITS))

# pg_cron's tests start a PostgreSQL 15 of their own: they run in test-pg15's lane.
test-pg18-rest: venv
	$(BIN)/pytest -p no:cacheprovider -m "not pg_cron" tests/integration $(BESIDE_THE_REST) \
		$(addprefix --deselect=tests/e2e/test_library_presets.py::,$(PRESETS_BESIDE_THE_UNITS) \
			$(PRESETS_BESIDE_PG15))

# What is the same on every version (one_server) runs on PostgreSQL 18 alone. The
# benchmarks' harnesses run here, on the version `make bench` measures on, beside
# the integration pass, which had the time the end-to-end lane lacked.
BESIDE_PG15 := tests/e2e/test_bench_smoke.py \
	$(addprefix tests/e2e/test_library_presets.py::,$(PRESETS_BESIDE_PG15))

test-pg15: venv
	scripts/with-postgres 15 $(BIN)/pytest -p no:cacheprovider -m "not one_server" tests/integration \
		$(BESIDE_PG15)

generate: venv
	$(BIN)/pgq-exporter generate --out .

bench: venv tools
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .venv-oban tests/libraries/node/node_modules .pytest_cache .mypy_cache .ruff_cache *.egg-info
