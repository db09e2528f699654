# pydna — the two commands of the README, plus benchmarks.
#   make demo   fresh clone → venv, embedded PostgreSQL, migrations, index docs/, one hybrid search
#   make test   fresh clone → venv, the whole test suite (starts its own embedded PostgreSQL)
#   make test-pg15  the PostgreSQL 15 subset on Debian's postgresql-15 + pgvector 0.8.6, installed by a
#               database owner as on a managed service (needs $(PG15)/install run once, as root)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
SCIFACT ?= ../shared/data/scifact
# The PostgreSQL 15 leg: ../shared/pgvector's pg15 script, a throwaway server, the modules that migrate,
# write or search and fit the CI budget on 15 (README, "Supported servers").
PG15      ?= ../shared/pgvector
PG15_DIR  ?= /tmp/pydna-pg15
PG15_PORT ?= 5815
PG15_TESTS ?= tests/test_owner_install.py tests/test_server_versions.py tests/test_pg15_guard.py

.PHONY: venv demo test test-pg15 bench clean

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
	$(BIN)/python -m pytest -q

test-pg15: venv
	$(PG15)/pg15 start $(PG15_DIR) $(PG15_PORT)
	DNA_TEST_DSN='host=127.0.0.1 port=$(PG15_PORT) user=postgres dbname=postgres' DNA_TEST_MANAGED=1 \
	  $(BIN)/python -m pytest -q $(PG15_TESTS); rc=$$?; $(PG15)/pg15 stop $(PG15_DIR); exit $$rc

bench: $(BIN)/.bench
	$(BIN)/python bench/beir.py $(SCIFACT) --embedder onnx

clean:
	rm -rf $(VENV) .pytest_cache
