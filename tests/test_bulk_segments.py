"""Bulk ingest near its floor (issue 11, revision 0017 topic ingest): the same BM25 index, cheaper.

A scope loaded in bulk statements (each one a segment of its own, built straight from the stored
tsvectors) and the same documents loaded live in small batches (memtable, then sealed) hold the
same statistics and give the same top 10; every chunk row of every segment — built per batch,
sealed, merged with and without tombstones — equals what the window-function statement of
revisions 0010–0016 computes from the forward rows (the oracle below); the default snippet is the
one of ``left(regexp_replace(body, '\\s+', ' ', 'g'), 240)``; the valid_at trigger fires for plain SQL
writes only (the verbs mirror valid_at themselves).
"""
from __future__ import annotations

import random

import pytest

from test_bulk_ingest import app_role  # noqa: F401 - the fixture

MODEL = "lexical-only-384"
N_DOCS = 2600                      # two bulk statements of 1,300 (>= dna.bm25_bulk_threshold())
COMMON = ["protein", "cell", "gene", "expression", "patient", "study", "cancer", "mutation", "risk"]
QUERIES = ["protein expression in cancer cells", "gene mutation risk", "patient study", "rare0042 cell",
           "rare0007 rare0100 rare0999", "expression", "cell cell cell gene"]

# The chunk rows of segment $4 as revisions 0010-0016 built them (window + grouped array_agg over the
# forward rows of the segment's documents), the oracle for the one-sort build of 0017. A seg_id names
# one segment per partition (0019: dna.bm25_next_seg), so a scope's tenants can each have a segment $4.
ORACLE = """
SELECT r.lexeme, r.kind, r.chunk, count(*)::integer AS n, max(r.imp) AS max_imp, max(r.tf) AS max_tf,
       min(r.len) AS min_len,
       array_agg((r.doc_id - g.base_doc_id) | (r.tf::int8 << 33) | (least(r.len, 2097151)::int8 << 42)
                 ORDER BY r.imp DESC, r.doc_id) AS postings
FROM dna.dna_bm25_segments AS g,
     LATERAL (SELECT s.*, dna.bm25_chunk_of(row_number() OVER (PARTITION BY s.lexeme, s.kind
                                                             ORDER BY s.imp DESC, s.doc_id)) AS chunk
              FROM (SELECT f.kind, e.lexeme COLLATE "C" AS lexeme, f.doc_id, e.v::integer AS tf, f.doc_len AS len,
                           (e.v::integer * (g.k1 + 1) / (e.v::integer + g.k1 * (1 - g.b + g.b * f.doc_len / g.avgdl_ref)))::real AS imp
                    FROM dna.dna_bm25_docs AS d
                    JOIN dna.dna_bm25_forward AS f ON f.scope = d.scope AND f.doc_id = d.doc_id,
                         jsonb_each_text(f.terms) AS e (lexeme, v)
                    WHERE d.scope = g.scope AND d.model_id = g.model_id AND d.tenant = g.tenant
                      AND d.seg_id = g.seg_id) AS s) AS r
WHERE g.scope = %s AND g.seg_id = %s
GROUP BY g.model_id, g.tenant, r.lexeme, r.kind, r.chunk
"""
STORED = """
SELECT c.lexeme, c.kind, c.chunk, c.n, c.max_imp, c.max_tf, c.min_len, c.postings
FROM dna.dna_bm25_chunks AS c WHERE c.scope = %s AND c.seg_id = %s
"""


def documents(n: int = N_DOCS) -> list[tuple[str, str, str]]:
    """(kind, name, body): common words in most documents (lists of more than one chunk: ranks past
    256 and 768), a long tail of rare words, repeated words (tf > 1), two Kinds, odd white space."""
    rng = random.Random(11)
    out = []
    for i in range(n):
        words = [rng.choice(COMMON) for _ in range(rng.randint(3, 40))]
        words += [f"rare{rng.randrange(1000):04d}" for _ in range(rng.randint(0, 6))]
        rng.shuffle(words)
        sep = rng.choice([" ", "  ", "\n", " \t "])
        out.append(("Doc" if i % 7 else "Note", f"d{i:05d}", sep.join(words)))
    return out


def index(sql, scope: str, docs: list[tuple[str, str, str]]) -> None:
    kinds, names, bodies = map(list, zip(*docs))
    sql.execute("SELECT count(*) FROM dna.index_documents(%s, %s, %s, %s, NULL, %s)", (scope, kinds, names, bodies, MODEL))


def stats(sql, scope: str) -> tuple:
    return sql.execute("SELECT n_docs, total_len, avg_len FROM dna.bm25_partition_stats(%s, %s)", (scope, MODEL)).fetchone()


def top10(sql, scope: str, query: str, exact: bool) -> list[tuple]:
    return [(kind, name, round(score, 9)) for kind, name, score in sql.execute(
        "SELECT kind, name, score FROM dna.bm25(%s, %s, %s, k => 10, exact => %s)", (scope, query, MODEL, exact)).fetchall()]


def segments(sql, scope: str) -> list[int]:
    return [r[0] for r in sql.execute("SELECT DISTINCT seg_id FROM dna.dna_bm25_segments WHERE scope = %s ORDER BY seg_id",
                                      (scope,)).fetchall()]


def assert_chunks_match_the_oracle(sql, scope: str) -> int:
    """Every segment of the scope: stored chunk rows = the 0010-0016 statement's, exactly."""
    segs = segments(sql, scope)
    assert segs
    multi = 0
    for seg in segs:
        stored = sorted(sql.execute(STORED, (scope, seg)).fetchall())
        expected = sorted(sql.execute(ORACLE, (scope, seg)).fetchall())
        assert stored == expected, f"segment {seg} of {scope}"
        multi += sum(1 for r in stored if r[2] > 0)
    return multi


@pytest.fixture
def loaded(sql):
    sql.execute("SELECT dna.register_model(%s, 384)", (MODEL,))
    docs = documents()
    half = len(docs) // 2
    index(sql, "bulk", docs[:half])                      # a segment per statement
    index(sql, "bulk", docs[half:])
    for a in range(0, len(docs), 100):                   # the memtable, then one sealed segment
        index(sql, "live", docs[a:a + 100])
    sql.execute("SELECT dna.bm25_compact('live')")
    return docs


def test_bulk_statements_build_segments_equal_to_the_previous_build(sql, loaded):
    assert len(segments(sql, "bulk")) == 2
    assert sql.execute("SELECT count(*) FROM dna.dna_bm25_postings WHERE scope = 'bulk'").fetchone()[0] == 0
    # lists longer than one chunk are there (chunks 1 and 2: ranks 257-768, 769-1792)
    assert assert_chunks_match_the_oracle(sql, "bulk") > 0
    assert sql.execute("SELECT max(chunk) FROM dna.dna_bm25_chunks WHERE scope = 'bulk'").fetchone()[0] >= 1
    assert_chunks_match_the_oracle(sql, "live")            # sealed from the memtable


def test_bulk_and_live_scopes_have_the_same_statistics_and_top_10(sql, loaded):
    assert stats(sql, "bulk") == stats(sql, "live")
    assert stats(sql, "bulk")[0] == len(loaded)
    for q in QUERIES:
        for exact in (True, False):
            bulk, live = top10(sql, "bulk", q, exact), top10(sql, "live", q, exact)
            assert bulk == live, (q, exact)
            assert len(bulk) == 10 or q.startswith("rare"), q


def test_merges_with_and_without_tombstones_match_the_oracle_and_the_live_scope(sql, loaded):
    before = {q: top10(sql, "bulk", q, True) for q in QUERIES}
    sql.execute("SELECT dna.bm25_compact('bulk', full_merge => true)")          # a merge without tombstones
    assert len(segments(sql, "bulk")) == 1
    assert_chunks_match_the_oracle(sql, "bulk")
    assert {q: top10(sql, "bulk", q, True) for q in QUERIES} == before
    # delete a tenth of the documents from both scopes: tombstones in the bulk scope's segment
    gone = [name for _kind, name, _body in loaded[::10]]
    for scope in ("bulk", "live"):
        sql.execute("DELETE FROM dna.dna_search_docs_384 WHERE scope = %s AND name = ANY (%s)", (scope, gone))
    assert sql.execute("SELECT count(*) FROM dna.dna_bm25_tombstones WHERE scope = 'bulk'").fetchone()[0] == len(gone)
    assert stats(sql, "bulk") == stats(sql, "live")
    sql.execute("SELECT dna.bm25_compact(full_merge => true)")                  # merges that drop tombstoned postings
    assert sql.execute("SELECT count(*) FROM dna.dna_bm25_tombstones").fetchone()[0] == 0
    assert_chunks_match_the_oracle(sql, "bulk")
    assert_chunks_match_the_oracle(sql, "live")
    assert stats(sql, "bulk") == stats(sql, "live")
    assert stats(sql, "bulk")[0] == len(loaded) - len(gone)
    for q in QUERIES:
        for exact in (True, False):
            assert top10(sql, "bulk", q, exact) == top10(sql, "live", q, exact), (q, exact)


def test_a_segment_build_leaves_the_sessions_settings_as_they_were(sql, loaded):
    with sql.transaction():
        sql.execute("SET LOCAL work_mem = '4MB'")
        sql.execute("SET LOCAL maintenance_work_mem = '256MB'")
        index(sql, "third", loaded[:1200])
        assert sql.execute("SHOW work_mem").fetchone()[0] == "4MB"
        # The setting exists from PostgreSQL 16 on (NULL on 15, where the build leaves it alone).
        assert sql.execute("SELECT current_setting('enable_presorted_aggregate', true)").fetchone()[0] in (
            "on", None if int(sql.execute("SHOW server_version_num").fetchone()[0]) < 160000 else "on")
    assert len(segments(sql, "third")) == 1
    assert_chunks_match_the_oracle(sql, "third")


WHITE = [" ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u2003", "\u3000", "\u0085", "\u2028", "\f", "\v"]


def test_the_default_snippet_is_the_regexp_one(sql):
    rng = random.Random(5)
    texts = ["", " ", "  ", "a", " a ", "a  b", "a\tb", "\n", "x" * 300, "word " * 100, "w  " * 200, None]
    for _ in range(300):
        texts.append("".join(rng.choice(WHITE) if rng.random() < 0.4 else rng.choice("abcé€x")
                             for _ in range(rng.randint(0, 400))))
    got = sql.execute("SELECT dna.text_snippet(t) = left(regexp_replace(coalesce(t, ''), '\\s+', ' ', 'g'), 240), t "
                      "FROM unnest(%s::text[]) AS t", (texts,)).fetchall()
    assert [t for same, t in got if not same] == []
    # and it is what a document without a snippet is stored with
    sql.execute("SELECT dna.register_model(%s, 384)", (MODEL,))
    body = "first\u2003 line \n\n second\tline  " * 20
    sql.execute("SELECT dna.index_document('s', 'Doc', 'one', %s, model_id => %s)", (body, MODEL))
    index(sql, "s", [("Doc", "two", body)])
    stored = sql.execute("SELECT array_agg(DISTINCT snippet) FROM dna.dna_search_docs_384 WHERE scope = 's'").fetchone()[0]
    assert stored == [sql.execute("SELECT left(regexp_replace(%s, '\\s+', ' ', 'g'), 240)", (body,)).fetchone()[0]]


def test_the_valid_at_trigger_fires_for_plain_sql_only(sql):
    """0017 gave dna_search_docs_valid_at a WHEN clause; 0019's reads a setting the verbs set for their own
    statements (tests/test_write_path.py); a memory's search row still takes its record's valid_at, another
    Kind keeps the one it writes."""
    when = sql.execute("SELECT pg_get_triggerdef(t.oid) FROM pg_trigger AS t WHERE t.tgname = 'dna_search_docs_valid_at' "
                       "AND t.tgrelid = 'dna.dna_search_docs_384'::regclass").fetchone()[0]
    assert "WHEN ((current_setting('dna.valid_at_mirrored'::text, true) IS DISTINCT FROM 'on'::text))" in when
    sql.execute("SELECT dna.register_model(%s, 384)", (MODEL,))
    sql.execute("SELECT dna.index_document('v', 'Doc', 'plain', 'some text', model_id => %s)", (MODEL,))
    sql.execute("UPDATE dna.dna_search_docs_384 SET valid_at = tstzrange('2020-01-01', '2021-01-01') WHERE scope = 'v'")
    assert sql.execute("SELECT valid_at IS NOT NULL FROM dna.dna_search_docs_384 WHERE scope = 'v'").fetchone()[0]


def test_an_application_roles_bulk_statements_build_the_same_segments(app_role, sql):
    """Row security on (FORCE): the segment of a bulk statement reads the role's own new rows; in the
    base partition and in a workspace it is a member of, the chunk rows equal the oracle's."""
    import psycopg

    sql.execute("SELECT dna.register_model(%s, 384)", (MODEL,))
    docs = documents(1200)
    kinds, names, bodies = map(list, zip(*docs))
    with psycopg.connect(app_role, autocommit=True) as app:
        for tenant in ("", "ws-a"):
            app.execute("SELECT count(*) FROM dna.index_documents('app', %s, %s, %s, NULL, %s, tenant => %s)",
                        (kinds, names, bodies, MODEL, tenant))
        got = app.execute("SELECT n_docs FROM dna.bm25_partition_stats('app', %s, 'ws-a')", (MODEL,)).fetchone()[0]
    assert got == 1200                                   # the workspace's rows shadow the base's
    assert sql.execute("SELECT count(*) FROM dna.dna_bm25_segments WHERE scope = 'app'").fetchone()[0] == 2
    assert sql.execute("SELECT count(*) FROM dna.dna_bm25_postings WHERE scope = 'app'").fetchone()[0] == 0
    assert_chunks_match_the_oracle(sql, "app")
