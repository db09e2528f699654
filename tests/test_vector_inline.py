"""Revision 0024, topic vector_inline: the width tables keep a document's vector in its row (STORAGE MAIN),
so the dense lane's exact scan (a scope of at most dna.exact_scan_rows() rows) reads no TOAST. Under
pgvector's EXTERNAL a row of text, tsvector and a 384-dim vector passed the 2 kB TOAST threshold and its
vector was moved out of line: every vector of an exact scan was a TOAST fetch (an exact scan of 5,000 such
rows 17 ms, 2.3 ms inline). The answers are the same; a downgrade restores EXTERNAL. Plain SQL."""
from __future__ import annotations

import psycopg
import random

from pydna import migrate

FAKE = "dna-fake-hash-v1"
# to 0024, the last revision whose answers this test holds (0025 topic fusion_scale rescales the convex
# fusion: tests/test_fusion_scale_migration.py)
HELD_TO = "0024_at_scale"
WORDS = [f"w{i}x" for i in range(3000)]


def index(conn, n=120, scope="vi"):
    rng = random.Random(7)
    bodies = [" ".join(rng.choice(WORDS) for _ in range(260)) for _ in range(n)]   # ~1,500 characters
    conn.execute("SELECT count(*) FROM dna.index_documents(%s, array_fill('Doc'::text, ARRAY[%s]), %s, %s, "
                 "ARRAY(SELECT dna.fake_embed(b) FROM unnest(%s::text[]) AS b), %s)",
                 (scope, n, [f"d{i}" for i in range(n)], bodies, bodies, FAKE))


def scan_buffers(conn, scope="vi"):
    """Buffers an exact read of the scope's vectors touches (heap, and TOAST when the vectors are there)."""
    with conn.transaction():
        conn.execute("SET LOCAL enable_indexscan = off")
        conn.execute("SET LOCAL enable_bitmapscan = off")
        plan = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT max(t.embedding <=> dna.fake_embed('q')) "
                            "FROM dna.dna_search_docs_384 AS t WHERE t.scope = %s", (scope,)).fetchone()[0][0]["Plan"]
    return plan["Shared Hit Blocks"] + plan["Shared Read Blocks"]


def storage(conn):
    return dict(conn.execute("SELECT c.relname, a.attstorage FROM pg_attribute AS a JOIN pg_class AS c ON c.oid = a.attrelid "
                             "JOIN pg_namespace AS n ON n.oid = c.relnamespace WHERE n.nspname = 'dna' "
                             "AND c.relname ~ '^dna_search_docs_[0-9]+$' AND a.attname = 'embedding'").fetchall())


def test_every_width_table_keeps_its_vectors_in_the_row(sql):
    assert set(storage(sql).values()) == {"m"} and len(storage(sql)) == 5


def test_an_exact_scan_reads_no_toast(sql):
    index(sql)
    buffers = scan_buffers(sql)
    assert buffers < 120, f"{buffers} buffers for 120 rows: the vectors are out of line"


def test_upgrade_from_0023_and_back_keeps_the_answers(empty_dsn):
    migrate.upgrade(empty_dsn, "0023_still_open")
    query = "SELECT name, score FROM dna.search('vi', 'w5x w17x', dna.fake_embed('w5x w17x'), %s, k => 10)"
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert set(storage(conn).values()) == {"e"}
        index(conn)
        before = conn.execute(query, (FAKE,)).fetchall()
        assert scan_buffers(conn) > 240                      # two TOAST probes per vector, at least
    migrate.upgrade(empty_dsn, HELD_TO)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert set(storage(conn).values()) == {"m"}
        assert conn.execute(query, (FAKE,)).fetchall() == before     # the rows stored before read the same
        index(conn, scope="vi2")                             # written at 0024: in the row
        assert scan_buffers(conn, "vi2") < 120
    migrate.downgrade(empty_dsn, "0023_still_open")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert set(storage(conn).values()) == {"e"}
        assert conn.execute(query, (FAKE,)).fetchall() == before
