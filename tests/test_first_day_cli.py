"""The first day with the CLI (issue 12): `dna scopes`, `--embedder auto` on a scope indexed with
another model, what the server notices (unknown scope, unknown kind), and output that reads at 80
columns (name and snippet first, scores behind --scores)."""
from __future__ import annotations

import json

import psycopg
import pytest
from typer.testing import CliRunner

from conftest import REPO
from pydna.cli import app

FAKE = ["--embedder", "fake"]


@pytest.fixture
def run(monkeypatch, tmp_path, dna_dsn):
    monkeypatch.delenv("DNA_DATABASE_URL", raising=False)
    monkeypatch.setenv("DNA_HOME", str(tmp_path / "dna-home"))
    runner = CliRunner()

    def invoke(*args, code=0, env=None):
        result = runner.invoke(app, ["--dsn", dna_dsn, *[str(a) for a in args]], env=env)
        assert result.exit_code == code, f"exit {result.exit_code}\n{result.stdout}\n{result.stderr}\n{result.exception!r}"
        return result
    return invoke


@pytest.fixture
def docs(tmp_path):
    d = tmp_path / "docs"
    d.mkdir()
    (d / "fusion.md").write_text("# Reciprocal rank fusion in a hybrid search engine for long titles\n\n"
                                 + "RRF fuses the dense lane and the lexical lane by summing one over k plus rank. " * 6,
                                 encoding="utf-8")
    (d / "install.md").write_text("# Install\n\nRun pip install pydna, then dna db up to start the server.\n",
                                  encoding="utf-8")
    return d


def test_dna_scopes_lists_documents_memories_and_model_ids(run, docs, dna_dsn):
    assert "no scopes yet" in run("scopes").stdout
    assert json.loads(run("scopes", "--json").stdout) == []
    run("index", docs, "--scope", "my-app", *FAKE)
    run("memory", "remember", "always deep-copy before mutating", "--scope", "team", *FAKE)
    listed = json.loads(run("scopes", "--json").stdout)
    assert listed == [{"scope": "my-app", "documents": 2, "memories": 0, "model_ids": ["dna-fake-hash-v1"]},
                      {"scope": "team", "documents": 0, "memories": 1, "model_ids": ["dna-fake-hash-v1"]}]
    with psycopg.connect(dna_dsn) as conn:
        assert [r[0] for r in conn.execute("SELECT scope FROM dna.scopes()")] == ["my-app", "team"]
    text = run("scopes", env={"COLUMNS": "80"}).stdout
    assert "my-app" in text and "team" in text and "dna-fake-hash-v1" in text
    assert all(len(line) <= 80 for line in text.splitlines())


def test_auto_uses_the_scope_model(run, docs):
    run("index", docs, "--scope", "my-app", *FAKE)
    auto = run("recall", "reciprocal rank fusion", "--scope", "my-app")          # no --embedder: auto
    assert auto.stdout.splitlines()[0] == "embedder: fake dna-fake-hash-v1 (the scope's model)"
    answer = json.loads(run("recall", "reciprocal rank fusion", "--scope", "my-app", "--json").stdout)
    assert answer["model_id"] == "dna-fake-hash-v1" and answer["hits"][0]["name"] == "fusion.md"
    assert not answer["degraded"] and answer["notices"] == []
    # Memory verbs too, and re-indexing: the scope keeps its model.
    mem = run("memory", "recall", "fusion", "--scope", "my-app")
    assert "embedder: fake dna-fake-hash-v1 (the scope's model)" in mem.stdout
    again = json.loads(run("index", docs, "--scope", "my-app", "--json").stdout)
    assert again["model_id"] == "dna-fake-hash-v1" and again["unchanged"] == 2


def test_a_new_scope_gets_auto_default(run, docs):
    from pydna.embeddings import get_provider

    default = get_provider("auto").model_id
    first = run("memory", "remember", "a first memory", "--scope", "fresh")
    assert f"embedder: {'onnx' if 'onnx' in default else 'fake'} {default}" in first.stdout


def test_unknown_scope_names_the_nearest_and_unknown_kind_says_so(run, docs):
    run("index", docs, "--scope", "my-app", *FAKE)
    typo = run("recall", "fusion", "--scope", "my-ap", *FAKE, code=1)          # a typo'd scope exits 1
    assert "scope 'my-ap' has no documents or memories you can see; nearest scopes: 'my-app'" in " ".join(
        typo.stderr.split())
    kind = run("recall", "fusion", "--scope", "my-app", "--kind", "Dco", *FAKE)
    assert "no documents of kind Dco in scope 'my-app'" in " ".join(kind.stdout.split())
    assert "0 hits" in kind.stdout
    as_json = run("recall", "fusion", "--scope", "my-ap", *FAKE, "--json", code=1)
    assert as_json.stdout == "" and "nearest scopes: 'my-app'" in as_json.stderr


def test_recall_reads_at_80_columns(run, docs):
    run("index", docs, "--scope", "my-app", *FAKE)
    plain = run("recall", "reciprocal rank fusion", "--scope", "my-app", *FAKE, env={"COLUMNS": "80"}).stdout
    lines = plain.splitlines()
    assert all(len(line) <= 80 for line in lines), "\n".join(line for line in lines if len(line) > 80)
    assert lines[0] == "embedder: fake dna-fake-hash-v1"
    assert lines[1] == "2 hits for 'reciprocal rank fusion' in scope my-app"
    assert lines[2].startswith(" 1. fusion.md · Reciprocal rank fusion in a hybrid")    # name first, then title
    assert lines[3].startswith("    RRF fuses the dense lane")                          # then the snippet
    assert "score" not in plain and "cosine" not in plain
    scored = run("recall", "reciprocal rank fusion", "--scope", "my-app", *FAKE, "--scores",
                 env={"COLUMNS": "80"}).stdout
    assert "score 0." in scored and "cosine" in scored and "ranks dense 1" in scored
    assert all(len(line) <= 80 for line in scored.splitlines())


def test_the_demo_reads_at_80_columns(run):
    """`make demo`'s commands on the project's docs/ (fake embedder: the layout is what is tested)."""
    run("index", REPO / "docs", "--scope", "dna-development", *FAKE, env={"COLUMNS": "80"})
    out = run("recall", "reciprocal rank fusion", "--scope", "dna-development", "-k", "3",
              env={"COLUMNS": "80"}).stdout
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines), "\n".join(line for line in lines if len(line) > 80)
    assert lines[0] == "embedder: fake dna-fake-hash-v1 (the scope's model)"
    heads = [line for line in lines if line[:3].strip().rstrip(".").isdigit()]
    assert len(heads) == 3 and heads[0].startswith(" 1. hybrid-search.md")
    assert len(lines) <= 2 + 3 * 4                                  # a head and at most 3 snippet lines per hit


def test_readme_examples_answer_on_any_clock_and_its_oids_are_valid(sql):
    import re

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    fixed = re.findall(r"--(?:as-of|valid-time|now)[ =]+\"?(\d{4}-\d\d-\d\d)", readme)
    assert fixed == [], f"README examples with a fixed date that goes stale: {fixed}"
    inserts = re.findall(r"INSERT INTO dna\.dna_identities \(role_name, oid\) VALUES (.+);", readme)
    assert inserts
    oids = [oid for values in inserts for _, oid in re.findall(r"\('([^']+)', '([^']+)'\)", values)]
    assert len(oids) >= 2
    for i, oid in enumerate(oids):           # each passes the table's own check constraint
        sql.execute("INSERT INTO dna.dna_identities (role_name, oid) VALUES (%s, %s)", (f"readme_{i}", oid))
    # The documented limits and JSONL fields are stated.
    for phrase in ("1,000,000 bytes per document", "10,000 characters per query", "280 characters",
                   "JSONL fields", "every other field is kept as the document's **metadata**"):
        assert phrase in readme, phrase
