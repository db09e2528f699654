"""Revision 0023_still_open, topic snippet_words, with data: a document indexed at 0022_first_week whose
search highlight drops "of" between two fragments ("couple … «options»"); upgraded to head the same search
shows "couple of «options»"; downgraded to 0022 the document is still there and the highlight is 0022's."""
from __future__ import annotations

import psycopg

from pydna import migrate

from test_snippet_words import MODEL, TOUCHING

QUERY = "django testing options"


def _highlight(conn) -> str:
    return conn.execute("SELECT highlight FROM dna.search('snip', %s, dna.fake_embed(%s), %s, k => 1, "
                        "highlight => true)", (QUERY, QUERY, MODEL)).fetchone()[0]


def test_search_highlight_before_and_after_the_upgrade(empty_dsn):
    migrate.upgrade(empty_dsn, "0022_first_week")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute("SELECT dna.index_document('snip', 'Doc', 'testing', %s, dna.fake_embed(%s), %s)",
                     (TOUCHING, TOUCHING, MODEL))
        before = _highlight(conn)
    assert "couple … «options»" in before, before
    migrate.upgrade(empty_dsn, "head")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        after = _highlight(conn)
    assert "couple of «options»" in after and "…" not in after, after
    migrate.downgrade(empty_dsn, "0022_first_week")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _highlight(conn) == before
