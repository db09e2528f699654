# pydna — the commands of the README, plus benchmarks.
#   make demo             fresh clone → venv, embedded PostgreSQL, migrations, index docs/, one hybrid search
#   make test             fresh clone → venv, the whole test suite (starts its own embedded PostgreSQL 18)
#   make test-fast        a first check in ~2-3 min: install, search, memory verbs, CLI (FAST below)
#   make test-pg15        the suite's modules that use a server (PG15_TESTS) on PostgreSQL 15 + pgvector 0.8.6,
#                         installed as a managed service has it (DNA_TEST_MANAGED=1); needs $(PG15)/install
#                         run once, as root
#   make test-standalone  the tracked files copied alone into an empty /tmp folder: the suite collects and
#                         FAST passes there (nothing outside the repository is read)
#   make test-citus-smoke the Citus smoke (≤ 5 min): Citus 14.0.1 from $(CITUS) into the venv, a throwaway
#                         coordinator + 2 workers (.ci/with-citus), tests/citus/test_citus_smoke.py, the
#                         cluster stopped whatever the outcome
#   make test-citus       the whole opt-in Citus suite (tests/citus) the same way
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
SCIFACT ?= ../shared/data/scifact
# PostgreSQL 15 + pgvector for `make test-pg15`: `install` (once, as root) and `pg15` (a throwaway
# server, started in a fresh /tmp folder on a free port by .ci/with-pg15). CI's copy, README there.
PG15 ?= ../shared/pgvector
PYTEST_ARGS ?=
# Citus 14.0.1 built for the embedded PostgreSQL wheel: `install` and `cluster` (README there).
CITUS ?= ../shared/citus

# The fast subset: install (pip-level and migrations), the goldens and the SciFact excerpt of
# tests/data, search, the memory verbs, the CLI.
FAST := tests/test_base_install.py tests/test_migrations.py tests/test_smoke_sql.py tests/test_fake_embedding.py \
        tests/test_memory_goldens.py tests/test_scale_migration.py tests/test_search_conformance.py \
        tests/test_memory_verbs.py tests/test_cli.py tests/test_cli_global_options.py tests/test_index_skipped.py
# On PostgreSQL 15: every module that migrates, writes or searches. Left out, the modules that use no
# database of the test server: the embedded server's own life cycle (it is PostgreSQL 18 whatever the
# server), the ONNX embedders, the base-install and import checks, the package layout; and the upgrade
# from 0018 with its write path at 0018 (0019 is the first revision that runs on 15: 0018's segment build
# sets enable_presorted_aggregate, a 16+ setting).
PG15_IGNORE := test_embedded_server test_onnx test_onnx_cut test_onnx_w8a8 test_base_install test_import_light test_layout \
               test_write_path_migration
PG15_TESTS ?= tests $(foreach m,$(PG15_IGNORE),--ignore=tests/$(m).py)

.PHONY: venv demo test test-fast test-pg15 test-standalone test-citus-smoke test-citus bench clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,onnx-offline,mcp,rest]'
	touch $@

# The peers of the benchmarks (bm25s, SQLite FTS5/sqlite-vec, ir-measures) are not needed by the tests.
$(BIN)/.bench: $(BIN)/.installed
	$(BIN)/python -m pip install -q -e '.[bench]'
	touch $@

venv: $(BIN)/.installed

demo: venv
	$(BIN)/dna db up
	$(BIN)/dna index docs --scope dna-development
	$(BIN)/dna recall "reciprocal rank fusion" --scope dna-development -k 3

test: venv
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

test-fast: venv
	$(BIN)/python -m pytest -q $(PYTEST_ARGS) $(FAST)

test-pg15: venv
	DNA_TEST_MANAGED=1 .ci/with-pg15 $(PG15) $(BIN)/python -m pytest -q $(PYTEST_ARGS) $(PG15_TESTS)

test-standalone: venv
	.ci/standalone $(abspath $(BIN)/python) $(PYTEST_ARGS) $(FAST)

test-citus-smoke: venv
	PYTHON=$(BIN)/python .ci/with-citus $(CITUS) env DNA_TEST_CITUS_SHARDS=2 \
		$(BIN)/python -m pytest -q $(PYTEST_ARGS) tests/citus/test_citus_smoke.py

test-citus: venv
	PYTHON=$(BIN)/python .ci/with-citus $(CITUS) $(BIN)/python -m pytest -q $(PYTEST_ARGS) tests/citus

bench: $(BIN)/.bench
	$(BIN)/python bench/beir.py $(SCIFACT) --embedder onnx

clean:
	rm -rf $(VENV) .pytest_cache
