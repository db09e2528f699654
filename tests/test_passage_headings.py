"""A passage is found by the section it sits in (issue 27 item 3, revision 0022 topic passage_headings).

Plain SQL first: dna.heading_context's rule, every search row's tsv holding its passage's heading context
(a row without a heading tokenized as before), a heading-only change re-indexing BM25 exactly; then what
Client.index embeds for a passage; then the revision, 0021 → head → 0021 with data.
"""
from __future__ import annotations

import psycopg
import pytest
from pgvector.psycopg import register_vector

import pydna
from pydna import migrate
from pydna.records import embedding_text, heading_context
from test_bulk_ingest import CountingEmbedder
from test_citus_migration import _answers, _seed

MODEL = "dna-fake-hash-v1"
PARTS = ["Install the tool with a compiler and cmake.",
         "The daemon listens on port 8080 by default.",
         "Mount it read-only to keep backups safe."]
HEADINGS = ["Guide > Installing", "Guide > Networking > Ports", "Guide > Storage volumes"]


def _index(conn, headings, parts=PARTS, name="guide", title="Guide"):
    spans, pos = [], 0
    for p in parts:
        spans.append((pos, pos + len(p)))
        pos += len(p) + 2
    return conn.execute(
        "SELECT action FROM dna.index_documents('s', %s, %s, %s, "
        "(SELECT array_agg(dna.fake_embed(x)) FROM unnest(%s::text[]) AS x), %s, %s, "
        "passages => %s, headings => %s, char_starts => %s, char_ends => %s)",
        (["Doc"] * len(parts), [name] * len(parts), parts, parts, MODEL, [title] * len(parts),
         list(range(len(parts))), headings, [a for a, _ in spans], [b for _, b in spans])).fetchall()


def _lexical(conn, query):
    return conn.execute("SELECT name, passage, heading FROM dna.search('s', %s, k => 5)", (query,)).fetchall()


def _bm25_exact(conn, query):
    lane = conn.execute("SELECT doc_id, score FROM dna.bm25('s', %s, %s) ORDER BY doc_id", (query, MODEL)).fetchall()
    exact = conn.execute("SELECT doc_id, score FROM dna.bm25('s', %s, %s, exact => true) ORDER BY doc_id",
                         (query, MODEL)).fetchall()
    return lane, exact


@pytest.fixture
def vsql(sql):
    register_vector(sql)
    sql.execute("SELECT dna.register_model(%s, 384)", (MODEL,))
    return sql


@pytest.mark.parametrize("title, heading, context", [
    ("Guide", "Guide > Networking > Ports", "Networking > Ports"),
    ("Guide", "Guide", None),
    ("Guide", "Other > Ports", "Other > Ports"),
    ("Guide", "Guidebook > Ports", "Guidebook > Ports"),     # a prefix of a title is not the title
    (None, "Guide > Ports", "Guide > Ports"),
    ("Guide", None, None),
    ("Guide", "  ", None),
])
def test_heading_context_drops_the_title_in_sql_and_in_python(sql, title, heading, context):
    assert sql.execute("SELECT dna.heading_context(%s, %s)", (title, heading)).fetchone()[0] == context
    assert heading_context(title, heading) == context


def test_a_passage_is_found_by_its_heading_and_bm25_stays_exact(vsql):
    _index(vsql, HEADINGS)
    _index(vsql, None, parts=["A note on ports and volumes."], name="note", title=None)
    # "networking" is only in the second passage's heading, "volumes" only in the third's
    assert _lexical(vsql, "networking") == [("guide", 1, "Guide > Networking > Ports")]
    assert [r[:2] for r in _lexical(vsql, "storage")] == [("guide", 2)]
    lane, exact = _bm25_exact(vsql, "networking ports volumes")
    assert lane == exact and len(lane) == 3
    # a row without a heading is tokenized as before revision 0022: title || ' ' || body
    same = vsql.execute("SELECT bool_and(tsv = dna.text_tsvector(ts_config, coalesce(title, '') || ' ' || body)) "
                        "FROM dna.dna_search_docs_384 WHERE scope = 's' AND heading IS NULL").fetchone()[0]
    assert same is True
    stats = vsql.execute("SELECT n_docs, total_len FROM dna.bm25_partition_stats('s', %s)", (MODEL,)).fetchone()
    expect = vsql.execute("SELECT count(*), sum(dna.bm25_doc_length(tsv)) FROM dna.dna_search_docs_384 "
                          "WHERE scope = 's'").fetchone()
    assert stats == (expect[0], expect[1])


def test_a_heading_only_change_moves_the_passage_in_the_lexical_index(vsql):
    _index(vsql, HEADINGS)
    moved = ["Guide > Installing", "Guide > Sockets", "Guide > Storage volumes"]
    assert [a for (a,) in _index(vsql, moved)] == ["unchanged", "moved", "unchanged"]
    assert _lexical(vsql, "networking") == []
    assert _lexical(vsql, "sockets") == [("guide", 1, "Guide > Sockets")]
    lane, exact = _bm25_exact(vsql, "sockets networking ports")
    assert lane == exact
    report = vsql.execute("SELECT dna.verify_integrity('s', 'full')").fetchone()[0]
    assert report["ok"] is True, report


def test_client_embeds_a_passage_with_its_heading_context(dna_dsn):
    emb = CountingEmbedder()
    body = ("# Tool\n\nIntro paragraph about the tool.\n\n" + "## Errors\n\n" + "EADDRINUSE means the port is taken. " * 40
            + "\n\n## Storage\n\n" + "Mount the volume read-only. " * 40)
    with pydna.connect(dna_dsn, embedder=emb) as c:
        rep = c.index("s", [{"kind": "Doc", "name": "tool.md", "title": "Tool", "body": body}])
        assert rep.passages > 2
        rows = c.conn.execute("SELECT title, heading, body FROM dna.dna_search_docs_384 WHERE scope = 's' "
                              "ORDER BY passage").fetchall()
    assert sorted(emb.texts) == sorted(embedding_text(*r) for r in rows)
    sections = [(heading_context(t, h), b) for t, h, b in rows if heading_context(t, h)]
    assert "Storage" in [c for c, _ in sections]
    for context, b in sections:                              # the title once, then the section, then the text
        assert f"Tool {context} {b}" in emb.texts
    assert embedding_text("Tool", None, "body") == "Tool body"


def test_upgrade_from_0021_indexes_headings_and_downgrades(empty_dsn):
    migrate.upgrade(empty_dsn, "0021_holds_in_use")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        _seed(conn)
        conn.execute("SELECT dna.register_model(%s, 384)", (MODEL,))
        _index(conn, HEADINGS)
        conn.execute("SELECT dna.bm25_compact('s')")          # the passages in a sealed segment too
        _index(conn, ["Guide > Extra"], parts=["One more short section."], name="more")
        before = _answers(conn)
        assert _lexical(conn, "networking") == []
    migrate.upgrade(empty_dsn, "head")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        # a row without a heading keeps 0021's tsvector (other topics of 0022 change answers: diversity)
        assert conn.execute("SELECT bool_and(tsv = dna.text_tsvector(ts_config, coalesce(title, '') || ' ' || body)) "
                            "FROM dna.dna_search_docs_384 WHERE heading IS NULL").fetchone()[0] is True
        assert _lexical(conn, "networking") == [("guide", 1, "Guide > Networking > Ports")]
        assert _lexical(conn, "extra") == [("more", 0, "Guide > Extra")]
        lane, exact = _bm25_exact(conn, "networking extra ports")
        assert lane == exact and len(lane) == 2                # guide's passage 1, more's passage 0
        report = conn.execute("SELECT dna.verify_integrity('s', 'full')").fetchone()[0]
        assert report["ok"] is True, report
        _index(conn, HEADINGS, parts=[p + " Again." for p in PARTS])   # a write after the upgrade
        assert _lexical(conn, "networking") == [("guide", 1, "Guide > Networking > Ports")]
    migrate.downgrade(empty_dsn, "0021_holds_in_use")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _answers(conn) == before
        assert _lexical(conn, "networking") == []
        assert conn.execute("SELECT to_regproc('dna.heading_context')").fetchone()[0] is None
        report = conn.execute("SELECT dna.verify_integrity('s', 'full')").fetchone()[0]
        assert report["ok"] is True, report
        assert [r[:2] for r in _lexical(conn, "daemon")] == [("guide", 1)]
