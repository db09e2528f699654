"""Revision 0023_still_open, topic search_cost: a 0022_first_week database holding documents that repeat a
paragraph (with and without line breaks and headings) upgrades to head and back with the same dna.text_key
of every passage and the same dna.search answers (collapse by default, off, explain, the cosine rule)."""
from __future__ import annotations

import psycopg

from pydna import migrate

# to 0024, the last revision whose answers this test holds (0025 topic fusion_scale rescales the convex
# fusion: tests/test_fusion_scale_migration.py)
HELD_TO = "0024_at_scale"

MODEL = "dna-fake-hash-v1"
PARA = "The per-view cache stores the output of an entire view. Use the cache_page decorator to cache a view."
DOCS = [("topics/cache.md", PARA), ("releases/4.0.md", "Release 4.0\n===========\n\n" + PARA),
        ("releases/4.1.md", "**" + PARA + "**\n"), ("topics/low.md", "The low-level cache API caches any object."),
        ("topics/tpl.md", "# Fragments\n\nTemplate fragment caching caches part of a template, not the view.")]
QUERY = "cache an entire view"


def _state(conn):
    keys = conn.execute("SELECT array_agg(dna.text_key(body) ORDER BY name) FROM dna.dna_search_docs_384 "
                        "WHERE scope = 'docs'").fetchone()[0]
    answers = []
    for extra in ("", ", diversity => 'off'", ", duplicate_similarity => 0.5", ", diversity => 'mmr'"):
        answers.append([tuple(r) for r in conn.execute(
            f"SELECT name, score FROM dna.search('docs', %(q)s, dna.fake_embed(%(q)s), %(m)s, k => 4{extra})",
            {"q": QUERY, "m": MODEL})])
    explained = conn.execute("SELECT name, explain -> 'diversity' FROM dna.search('docs', %(q)s, dna.fake_embed(%(q)s), "
                             "%(m)s, k => 4, explain => true)", {"q": QUERY, "m": MODEL}).fetchall()
    return keys, answers, explained


def test_upgrade_from_0022_keeps_keys_and_answers_and_downgrades(empty_dsn):
    migrate.upgrade(empty_dsn, "0022_first_week")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        for name, body in DOCS:
            conn.execute("SELECT dna.index_document('docs', 'Doc', %s, %s, dna.fake_embed(%s), %s)",
                         (name, body, name + " " + body, MODEL))
        before = _state(conn)
    assert len(set(before[0])) == 3                   # the three copies share one key
    assert len(before[1][0]) == 3 and len(before[1][1]) == 4
    migrate.upgrade(empty_dsn, HELD_TO)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _state(conn) == before
        conn.execute("SELECT dna.index_document('docs', 'Doc', 'releases/4.2.md', %s, dna.fake_embed(%s), %s)",
                     (PARA + "\n", PARA, MODEL))       # written at head: one more copy, collapsed
        assert len(_state(conn)[1][0]) == 3 and len(_state(conn)[1][1]) == 4   # three texts; off: every hit
        conn.execute("SELECT dna.delete_document('docs', 'Doc', 'releases/4.2.md')")
    migrate.downgrade(empty_dsn, "0022_first_week")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _state(conn) == before
