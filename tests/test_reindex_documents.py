"""`dna reindex --model` covers documents (issue 27 item 7): after switching embedder, the documents of
a scope with no vector under the new model_id are listed by SQL (`dna.reconcile(scope, 'reembed',
model_id) -> 'documents_to_embed'`, passage by passage) and written as `Client.index` writes them under
that model: the same passages, headings, spans, metadata and vectors as a fresh index with it. A second
run finds nothing to do; memories are covered as before."""
from __future__ import annotations

import json

import psycopg
from psycopg.types.json import Jsonb
from typer.testing import CliRunner

import pydna
from pydna.embeddings import FakeEmbeddingProvider
from pydna.reindex import reindex

LONG = "# Caching\n\n" + "\n\n".join(
    f"## Part {i}\n\n" + f"The per-view cache number {i} stores the output of an entire view for a while. " * 12
    for i in range(6))
RECORDS = [{"kind": "Doc", "name": "cache.md", "title": "Caching", "body": LONG, "user": "u1", "tags": ["views"]},
           {"kind": "Doc", "name": "short.txt", "body": "A short note about the low-level cache API.", "project": "p"}]
ROWS = ("SELECT kind, name, tenant, passage, title, body, snippet, heading, char_start, char_end, metadata, "
        "embedding::text FROM dna.dna_search_docs_384 WHERE scope = %s AND model_id = %s AND kind = 'Doc' ORDER BY kind, name, passage")


class OtherFake(FakeEmbeddingProvider):
    """The fake embedder under another model_id (vectors of another model, same width)."""

    def __init__(self):
        super().__init__()
        self.model_id = "fake-other-v1"


def _index(dsn, scope, embedder):
    with pydna.connect(dsn, embedder=embedder) as client:
        report = client.index(scope, RECORDS)
        client.memory.remember(scope, "the cache lives in redis", name="where-cache")
    return report


def test_reindex_writes_documents_as_a_fresh_index_with_the_model(dna_dsn, sql):
    first = _index(dna_dsn, "switch", FakeEmbeddingProvider())
    assert first.passages > 2                                              # the long document has passages
    _index(dna_dsn, "fresh", OtherFake())                                  # what index with the new model writes
    listed = sql.execute("SELECT dna.reconcile('switch', 'reembed', 'fake-other-v1')").fetchone()
    assert listed is not None                                              # the model is registered by 'fresh'
    todo = listed[0]
    assert [(d["kind"], d["name"], d["source_model_id"]) for d in todo["documents_to_embed"]] == [
        ("Doc", "cache.md", "dna-fake-hash-v1"), ("Doc", "short.txt", "dna-fake-hash-v1")]
    assert [p["passage"] for p in todo["documents_to_embed"][0]["passages"]] == list(range(first.passages - 1))
    assert todo["documents_to_embed"][0]["metadata"] == {"user": "u1", "tags": ["views"]}
    with psycopg.connect(dna_dsn, autocommit=True) as conn:
        got = reindex(conn, "switch", OtherFake())
    assert (got["documents"], got["passages"], got["written"]) == (2, first.passages, 1)
    switched = [row[:2] + row[3:] for row in sql.execute(ROWS, ("switch", "fake-other-v1")).fetchall()]
    fresh = [row[:2] + row[3:] for row in sql.execute(ROWS, ("fresh", "fake-other-v1")).fetchall()]
    assert switched == fresh and len(switched) == first.passages
    again = sql.execute("SELECT dna.reconcile('switch', 'reembed', 'fake-other-v1')").fetchone()[0]
    assert again["documents_to_embed"] == [] and again["to_embed"] == []
    hits = sql.execute("SELECT name FROM dna.search('switch', 'per-view cache', dna.fake_embed('per-view cache'), "
                       "model_id => 'fake-other-v1', k => 3)").fetchall()
    assert ("cache.md",) in hits


def test_a_document_written_through_sql_is_reembedded_with_its_metadata(dna_dsn, sql):
    """A document written with dna.index_document (no passages) and metadata set by SQL."""
    sql.execute("SELECT dna.index_document('mine', 'Doc', 'diary.md', 'a private note on caching', "
                "dna.fake_embed('a private note on caching'), 'dna-fake-hash-v1', 'Diary')")
    sql.execute("SELECT dna.set_document_metadata('mine', ARRAY['Doc'], ARRAY['diary.md'], ARRAY[%s::jsonb])",
                (Jsonb({"mood": "calm"}),))
    sql.execute("SELECT dna.register_model('fake-other-v1', 384)")
    with psycopg.connect(dna_dsn, autocommit=True) as conn:
        got = reindex(conn, "mine", OtherFake())
    assert (got["documents"], got["passages"]) == (1, 1)
    row = sql.execute("SELECT tenant, metadata, embedding = dna.fake_embed('Diary a private note on caching') "
                      "FROM dna.dna_search_docs_384 WHERE scope = 'mine' AND model_id = 'fake-other-v1'").fetchone()
    assert row == ("", {"mood": "calm"}, True)


def test_dna_reindex_cli_reports_documents(dna_dsn, monkeypatch, tmp_path):
    from pydna.cli import app

    monkeypatch.delenv("DNA_DATABASE_URL", raising=False)
    monkeypatch.setenv("DNA_HOME", str(tmp_path / "dna-home"))
    _index(dna_dsn, "cli-switch", FakeEmbeddingProvider())
    with psycopg.connect(dna_dsn, autocommit=True) as conn:
        conn.execute("SELECT dna.register_model('dna-fake-hash-v1-768', 768)")
    result = CliRunner().invoke(app, ["--dsn", dna_dsn, "reindex", "--model", "dna-fake-hash-v1-768",
                                      "--scope", "cli-switch", "--json"])
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)
    assert (got["written"], got["documents"]) == (1, 2) and got["passages"] > 2
    with psycopg.connect(dna_dsn) as conn:
        n = conn.execute("SELECT count(*) FROM dna.dna_search_docs_768 WHERE scope = 'cli-switch' "
                         "AND model_id = 'dna-fake-hash-v1-768' AND embedding IS NOT NULL").fetchone()[0]
    assert n == got["passages"] + 1
