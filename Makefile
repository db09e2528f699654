# pydna — the two commands of the README, plus benchmarks.
#   make demo   fresh clone → venv, embedded PostgreSQL, migrations, index docs/, one hybrid search
#   make test   fresh clone → venv, the whole test suite (starts its own embedded PostgreSQL)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
SCIFACT ?= ../shared/data/scifact

.PHONY: venv demo test bench clean

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

bench: $(BIN)/.bench
	$(BIN)/python bench/beir.py $(SCIFACT) --embedder onnx

clean:
	rm -rf $(VENV) .pytest_cache
