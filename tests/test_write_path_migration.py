"""Revision 0019 (topic write_path) upgrades a 0018_citus_ready database holding documents — a bulk
segment, memtable documents, tombstones, passages, a workspace partition — and memories (one of them
forgotten) without rebuilding anything: the same chunk rows, the same answers (dna.bm25 exhaustive and
budgeted, dna.search lexical and hybrid, dna.recall, the partition statistics) and a consistent BM25
index (dna.verify_integrity full). Writes after the upgrade number segments per partition above what is
there and compact; the downgrade gives 0018 its sequence (past every seg_id) and trigger back, answering
the same, and its writes and compactions work again."""
from __future__ import annotations

import psycopg
from psycopg.types.json import Jsonb

from pydna import migrate
from test_bulk_segments import documents

# to 0024, the last revision whose answers this test holds (0025 topic fusion_scale rescales the convex
# fusion: tests/test_fusion_scale_migration.py)
HELD_TO = "0024_at_scale"

MODEL = "dna-fake-hash-v1"
NOW = "2026-06-01T12:00:00Z"
QUERIES = ["protein expression in cancer cells", "gene mutation risk", "rare0042 cell", "patient study",
           "the office is in lisbon"]
TRIGGER = ("SELECT pg_get_triggerdef(t.oid) FROM pg_trigger AS t WHERE t.tgname = 'dna_search_docs_valid_at' "
           "AND t.tgrelid = 'dna.dna_search_docs_384'::regclass")


def _index(conn, scope, docs, **kw):
    kinds, names, bodies = map(list, zip(*docs))
    extra = "".join(f", {k} => %({k})s" for k in kw)
    conn.execute(f"SELECT count(*) FROM dna.index_documents(%(s)s, %(k)s, %(n)s, %(b)s, NULL, %(m)s{extra})",
                 {"s": scope, "k": kinds, "n": names, "b": bodies, "m": MODEL, **kw})


def _seed(conn, docs):
    _index(conn, "s", docs[:1200])                                # a bulk segment
    for a in range(1200, 1400, 50):                               # memtable documents
        _index(conn, "s", docs[a:a + 50])
    _index(conn, "s", docs[1400:1450], tenant="ws-a")             # a workspace partition
    conn.execute("DELETE FROM dna.dna_search_docs_384 WHERE scope = 's' AND name = ANY (%s)",
                 ([n for _k, n, _b in docs[:1200:40]],))          # tombstones in the segment
    _index(conn, "s", [("Doc", "p", "rank fusion part one"), ("Doc", "p", "part two of it")], passages=[0, 1])
    for name, text in (("m1", "the office is in lisbon"), ("m2", "deploys happen on fridays")):
        conn.execute("SELECT dna.remember('s', %s, name => %s, now => %s, embedding => dna.fake_embed(%s))",
                     (Jsonb({"summary": text}), name, NOW, text))
    conn.execute("SELECT dna.forget('s', 'm2', now => '2026-06-02T00:00:00Z')")
    assert conn.execute("SELECT count(*) FROM dna.dna_bm25_tombstones").fetchone()[0] > 0


def _answers(conn):
    out = {"stats": [conn.execute("SELECT n_docs, total_len, avg_len FROM dna.bm25_partition_stats('s', %s, %s)",
                                  (MODEL, t)).fetchone() for t in ("", "ws-a")]}
    for q in QUERIES:
        for exact in (True, False):
            out[("bm25", q, exact)] = conn.execute("SELECT kind, name, round(score::numeric, 9) FROM dna.bm25('s', %s, %s, "
                                                   "k => 10, exact => %s)", (q, MODEL, exact)).fetchall()
        out[("lexical", q)] = conn.execute("SELECT name, round(score::numeric, 9) FROM dna.search('s', %s, NULL, %s, "
                                           "k => 10)", (q, MODEL)).fetchall()
        out[("hybrid", q)] = conn.execute("SELECT name, round(score::numeric, 9) FROM dna.search('s', %s, "
                                          "dna.fake_embed(%s), %s, k => 10)", (q, q, MODEL)).fetchall()
        out[("recall", q)] = [(h["name"], round(h["score"], 9)) for h in conn.execute(
            "SELECT dna.recall('s', %s, now => '2026-06-03T00:00:00Z', reconsolidate => false) -> 'hits'",
            (q,)).fetchone()[0]]
    out["valid_at"] = conn.execute("SELECT name, valid_at FROM dna.dna_search_docs_384 WHERE valid_at IS NOT NULL "
                                   "ORDER BY name").fetchall()
    return out


def _chunks(conn):
    return sorted(conn.execute("SELECT tenant, seg_id, lexeme, kind, chunk, n, max_imp, max_tf, min_len, postings "
                               "FROM dna.dna_bm25_chunks").fetchall())


def _consistent(conn):
    report = conn.execute("SELECT dna.verify_integrity('s', 'full')").fetchone()[0]
    assert report["ok"], report


def test_upgrade_from_0018_with_data_answers_the_same_and_downgrades(empty_dsn):
    migrate.upgrade(empty_dsn, "0018_citus_ready")
    docs = documents(2600)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute("SELECT dna.register_model(%s, 384)", (MODEL,))
        _seed(conn, docs)
        before, chunks = _answers(conn), _chunks(conn)
        assert before[("recall", QUERIES[4])] and before["valid_at"]
        old_segs = conn.execute("SELECT max(seg_id) FROM dna.dna_bm25_segments").fetchone()[0]
        assert conn.execute("SELECT to_regclass('dna.dna_bm25_seg_id_seq')").fetchone()[0] is not None
        _consistent(conn)
    migrate.upgrade(empty_dsn, HELD_TO)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _answers(conn) == before
        assert _chunks(conn) == chunks                            # nothing rebuilt by the upgrade
        _consistent(conn)
        assert conn.execute("SELECT to_regclass('dna.dna_bm25_seg_id_seq')").fetchone()[0] is None
        assert "current_setting('dna.valid_at_mirrored'" in conn.execute(TRIGGER).fetchone()[0]
        # writes after the upgrade: a bulk segment numbered above the partition's, memories, compaction
        _index(conn, "s", docs[1450:2600])
        ids = [s for (s,) in conn.execute("SELECT seg_id FROM dna.dna_bm25_segments WHERE scope = 's' AND tenant = '' "
                                          "ORDER BY seg_id")]
        assert len(ids) == 2 and ids[-1] == ids[0] + 1 and ids[-1] <= old_segs + 1
        conn.execute("SELECT dna.remember('s', %s, name => 'm3', now => %s, embedding => dna.fake_embed('a third memory'))",
                     (Jsonb({"summary": "a third memory"}), NOW))
        grown = _answers(conn)
        conn.execute("SELECT dna.bm25_compact(full_merge => true)")
        assert _answers(conn) == grown
        _consistent(conn)
    migrate.downgrade(empty_dsn, "0018_citus_ready")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _answers(conn) == grown
        _consistent(conn)
        assert "dna.kind_has_trait(new.kind, 'memory.recallable'::text)" in conn.execute(TRIGGER).fetchone()[0]
        top = conn.execute("SELECT max(seg_id) FROM dna.dna_bm25_segments").fetchone()[0]
        assert conn.execute("SELECT nextval('dna.dna_bm25_seg_id_seq')").fetchone()[0] > top
        # 0018's write path numbers from the sequence again: a bulk segment, a compaction
        _index(conn, "t", docs[:1100])
        _index(conn, "t", docs[1100:1150])
        conn.execute("SELECT dna.bm25_compact(full_merge => true)")
        assert _answers(conn) == grown
        assert conn.execute("SELECT dna.verify_integrity('t', 'full') -> 'ok'").fetchone()[0] is True
    migrate.upgrade(empty_dsn, HELD_TO)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _answers(conn) == grown
        _consistent(conn)
