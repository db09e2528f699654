"""The main job end to end on the project's own docs/: the CLI and one SQL statement agree, and real
(ONNX) embeddings find a page for a query that shares no word with it."""
from __future__ import annotations

import json
import re

import psycopg
from typer.testing import CliRunner

from conftest import REPO
from pydna.cli import app

SCOPE = "dna-development"
QUERY = "reciprocal rank fusion"


def tokens(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def test_cli_recall_equals_one_sql_statement(dna_dsn):
    runner = CliRunner()
    res = runner.invoke(app, ["--dsn", dna_dsn, "index", str(REPO / "docs"), "--scope", SCOPE, "--embedder", "fake"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["--dsn", dna_dsn, "recall", QUERY, "--scope", SCOPE, "-k", "3", "--embedder", "fake",
                              "--json"])
    assert res.exit_code == 0, res.output
    cli_names = [h["name"] for h in json.loads(res.stdout)["hits"]]
    with psycopg.connect(dna_dsn) as conn:
        sql_names = [r[0] for r in conn.execute(
            "SELECT name FROM dna.search('dna-development', 'reciprocal rank fusion', "
            "dna.fake_embed('reciprocal rank fusion'), 'dna-fake-hash-v1', k => 3)")]
    assert cli_names == sql_names and len(sql_names) == 3
    assert sql_names[0] == "hybrid-search.md"


def test_onnx_finds_a_page_that_shares_no_word_with_the_query(dna_dsn):
    import pydna
    from pydna.embeddings import OnnxEmbeddingProvider

    pages = {p.name: p.read_text() for p in sorted((REPO / "docs").glob("*.md"))}
    query = "privacy among coworkers"
    assert tokens(query) & tokens(pages["tenancy.md"]) == set()
    with pydna.connect(dna_dsn, embedder=OnnxEmbeddingProvider()) as client:
        client.index(SCOPE, [{"kind": "Doc", "name": n, "body": t} for n, t in pages.items()])
        result = client.search(SCOPE, query, k=3)
    assert result.degraded is False
    # Found by meaning alone (the dense lane), among the first three: memory.md's passages on personal
    # memory are as near, and which one leads moves with the wording of the docs.
    hit = next(h for h in result.hits if h.name == "tenancy.md")
    assert hit.rank_dense <= 3 and hit.rank_lexical is None
