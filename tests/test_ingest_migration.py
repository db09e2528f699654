"""Revision 0017 (topic ingest) upgrades a 0016_answers_and_bounds database holding documents — bulk
segments, memtable documents, tombstones — without rebuilding anything: the same statistics, the
same top 10 (exhaustive and budgeted), the same chunk rows; bulk loads after the upgrade build
segments equal to the previous build's, the valid_at trigger gains its WHEN clause and the default
snippet its cheaper form. The downgrade gives 0016's functions and trigger back, answering the same."""
from __future__ import annotations

import psycopg

from pydna import migrate
from test_bulk_segments import MODEL, ORACLE, QUERIES, STORED, documents

TRIGGER = ("SELECT pg_get_triggerdef(t.oid) FROM pg_trigger AS t WHERE t.tgname = 'dna_search_docs_valid_at' "
           "AND t.tgrelid = 'dna.dna_search_docs_384'::regclass")


def _index(conn, scope, docs):
    kinds, names, bodies = map(list, zip(*docs))
    conn.execute("SELECT count(*) FROM dna.index_documents(%s, %s, %s, %s, NULL, %s)", (scope, kinds, names, bodies, MODEL))


def _answers(conn, scope="s"):
    out = {"stats": conn.execute("SELECT n_docs, total_len, avg_len FROM dna.bm25_partition_stats(%s, %s)",
                                 (scope, MODEL)).fetchone()}
    for q in QUERIES:
        for exact in (True, False):
            out[(q, exact)] = conn.execute("SELECT kind, name, round(score::numeric, 9) FROM dna.bm25(%s, %s, %s, "
                                           "k => 10, exact => %s)", (scope, q, MODEL, exact)).fetchall()
    return out


def _chunks(conn):
    return sorted(conn.execute("SELECT seg_id, lexeme, kind, chunk, n, max_imp, max_tf, min_len, postings "
                               "FROM dna.dna_bm25_chunks").fetchall())


def test_upgrade_from_0016_answers_the_same_and_downgrades(empty_dsn):
    migrate.upgrade(empty_dsn, "0016_answers_and_bounds")
    docs = documents(2600)                                        # 1,100 after the upgrade: a segment
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute("SELECT dna.register_model(%s, 384)", (MODEL,))
        _index(conn, "s", docs[:1200])                            # a segment (0016's build)
        for a in range(1200, 1500, 100):                          # memtable documents
            _index(conn, "s", docs[a:a + 100])
        conn.execute("DELETE FROM dna.dna_search_docs_384 WHERE scope = 's' AND name = ANY (%s)",
                     ([n for _k, n, _b in docs[:1200:15]],))      # tombstones in the segment
        assert conn.execute("SELECT count(*) FROM dna.dna_bm25_tombstones").fetchone()[0] > 0
        before, chunks = _answers(conn), _chunks(conn)
        assert "WHEN" not in conn.execute(TRIGGER).fetchone()[0]
        snippets_0016 = conn.execute("SELECT name, snippet FROM dna.dna_search_docs_384 WHERE scope = 's' "
                                     "AND name = ANY (%s) ORDER BY name", ([n for _k, n, _b in docs[1:15]],)).fetchall()
        assert len(snippets_0016) == 14
    migrate.upgrade(empty_dsn, "0017_recall_past_ingest")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert "WHEN (dna.kind_has_trait(new.kind, 'memory.recallable'::text))" in conn.execute(TRIGGER).fetchone()[0]
    migrate.upgrade(empty_dsn, "head")                            # 0019's WHEN reads a setting (tests/test_write_path.py)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _answers(conn) == before
        assert _chunks(conn) == chunks                            # nothing rebuilt by the upgrade
        # loads after the upgrade: a new segment equal to the previous build's, answers as one scope loaded at 0016
        _index(conn, "s", docs[1500:])
        seg = conn.execute("SELECT max(seg_id) FROM dna.dna_bm25_segments").fetchone()[0]
        assert sorted(conn.execute(STORED, ("s", seg)).fetchall()) == sorted(conn.execute(ORACLE, ("s", seg)).fetchall())
        _index(conn, "t", docs[1:15])                             # the same texts, 0017's snippet
        assert conn.execute("SELECT name, snippet FROM dna.dna_search_docs_384 WHERE scope = 't' "
                            "ORDER BY name").fetchall() == snippets_0016
        grown = _answers(conn)
        conn.execute("SELECT dna.bm25_compact(full_merge => true)")   # seal + merge with tombstones, 0017's build
        assert _answers(conn) == grown
        seg = conn.execute("SELECT max(seg_id) FROM dna.dna_bm25_segments").fetchone()[0]
        assert sorted(conn.execute(STORED, ("s", seg)).fetchall()) == sorted(conn.execute(ORACLE, ("s", seg)).fetchall())
    migrate.downgrade(empty_dsn, "0016_answers_and_bounds")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert "WHEN" not in conn.execute(TRIGGER).fetchone()[0]
        assert conn.execute("SELECT count(*) FROM pg_proc WHERE proname = 'text_snippet'").fetchone()[0] == 0
        assert _answers(conn) == grown
        conn.execute("DELETE FROM dna.dna_search_docs_384 WHERE scope = 's' AND name = ANY (%s)",
                     ([n for _k, n, _b in docs[1500:]],))
        _index(conn, "s", docs[1500:])                            # 0016's build again
        assert _answers(conn) == grown
