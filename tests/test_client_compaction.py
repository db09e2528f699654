"""Client.index compacts the scope's BM25 index after its last batch, as ``dna index`` does.

Batches below dna.bm25_bulk_threshold() go to the memtable, which every query reads whole; before,
a corpus loaded through Client.index in small batches stayed there for good (the SciFact bench:
5,183 documents, batches of 256, every query on the memtable path). Answers never change.
"""
from __future__ import annotations

import pytest

import pydna
from pydna import Record
from pydna.embeddings.fake import FakeEmbeddingProvider

MODEL = "dna-fake-hash-v1"
WORDS = ("fusion", "lattice", "harbor", "quartz", "meadow", "cobalt", "ember", "glacier", "ranking", "vector")


def corpus(n: int = 60, tenant_every: int = 0) -> list[Record]:
    return [Record(kind="Doc", name=f"doc-{i:02d}",
                   body=" ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(3 + i % 5)) + f" n{i}",
                   tenant="ws-a" if tenant_every and i % tenant_every == 0 else "")
            for i in range(n)]


def bm25_state(sql, scope="s"):
    """(memtable documents, segments) of the scope's BM25 index, read through plain SQL."""
    memtable = sql.execute(
        "SELECT count(*) FROM dna.dna_bm25_docs WHERE scope = %s AND seg_id IS NULL", (scope,)).fetchone()[0]
    segments = sql.execute("SELECT count(*) FROM dna.dna_bm25_segments WHERE scope = %s", (scope,)).fetchone()[0]
    return memtable, segments


def top10(sql, query, scope="s", tenant=""):
    return sql.execute("SELECT name, tenant, score, exact FROM dna.bm25(%s, %s, %s, tenant => %s)",
                       (scope, query, MODEL, tenant)).fetchall()


@pytest.fixture
def client(dna_dsn):
    c = pydna.connect(dna_dsn, embedder=FakeEmbeddingProvider())
    yield c
    c.close()


def test_small_batches_end_compacted_with_a_report(client, sql):
    report = client.index("s", corpus(), batch_size=7)       # 9 batches, each below the bulk threshold
    assert bm25_state(sql) == (0, 1)
    [part] = report.compaction["partitions"]
    assert (part["scope"], part["model_id"], part["status"], part["sealed_documents"]) == ("s", MODEL, "ok", 60)


def test_answers_are_those_of_the_memtable(client, dna_dsn, sql):
    with pydna.connect(dna_dsn, embedder=FakeEmbeddingProvider()) as other:
        other.index("m", corpus(tenant_every=4), batch_size=7, compact=False)
    client.index("s", corpus(tenant_every=4), batch_size=7)
    assert bm25_state(sql, "m") == (60, 0)
    assert bm25_state(sql, "s")[0] == 0
    for q in ("fusion ranking", "quartz harbor glacier", "ember n7", "cobalt"):
        for tenant in ("", "ws-a"):
            assert top10(sql, q, "s", tenant) == top10(sql, q, "m", tenant)
            assert top10(sql, q, "s", tenant)            # something matched


def test_compact_false_leaves_the_memtable(client, sql):
    report = client.index("s", corpus(12), batch_size=5, compact=False)
    assert report.compaction is None
    assert bm25_state(sql) == (12, 0)


def test_nothing_written_nothing_compacted(client, sql):
    client.index("s", corpus(12), batch_size=5, compact=False)
    report = client.index("s", corpus(12), batch_size=5)     # unchanged: no write, no compaction
    assert report.unchanged == 12 and report.compaction is None
    assert bm25_state(sql) == (12, 0)


def test_inside_a_callers_transaction_it_does_not_compact(client, sql):
    with client.conn.transaction():
        report = client.index("s", corpus(12), batch_size=5)
    assert report.compaction is None
    assert bm25_state(sql) == (12, 0)
    # the documents are written all the same, and a compaction afterwards seals them
    from pydna import maintenance

    assert maintenance.compact(client.conn, "s")["partitions"][0]["sealed_documents"] == 12
    assert bm25_state(sql) == (0, 1)


def test_a_rewrite_leaves_no_tombstone_behind(client, sql):
    client.index("s", corpus(20), batch_size=6)
    changed = [Record(kind=r.kind, name=r.name, body=r.body + " meadow", tenant=r.tenant) for r in corpus(20)[:5]]
    report = client.index("s", changed, batch_size=6)
    assert report.updated == 5
    assert sql.execute("SELECT count(*) FROM dna.dna_bm25_tombstones WHERE scope = 's'").fetchone()[0] == \
        report.compaction["partitions"][0]["tombstones"]
    assert bm25_state(sql)[0] == 0
