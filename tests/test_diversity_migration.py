"""Revision 0022_first_week, topic diversity: a 0021_holds_in_use database holding documents whose release
notes repeat a topic page's paragraph, and memories remembered twice, upgrades to head: diversity => 'off'
answers what 0021 answered, the default collapses the copies, and dna.search / dna.recall have one
signature each (the 0021 ones dropped); the downgrade gives 0021's signatures back, answering as before,
and the functions 0022 added (dna.diversify, dna.text_key, ...) go."""
from __future__ import annotations

import psycopg
from psycopg.types.json import Jsonb

from pydna import migrate

# to 0024, the last revision whose answers this test holds (0025 topic fusion_scale rescales the convex
# fusion: tests/test_fusion_scale_migration.py)
HELD_TO = "0024_at_scale"

MODEL = "dna-fake-hash-v1"
PARA = "The per-view cache stores the output of an entire view. Use the cache_page decorator to cache a view."
DOCS = [("topics/cache.md", PARA), ("releases/4.0.md", PARA), ("releases/4.1.md", "**" + PARA + "**"),
        ("topics/low.md", "The low-level cache API caches any object with cache.set."),
        ("topics/tpl.md", "Template fragment caching caches part of a template, not the view.")]
ADDED = ("dna.diversify", "dna.text_key", "dna.check_diversity", "dna.default_duplicate_similarity",
         "dna.default_mmr_lambda")


def _seed(conn):
    for name, body in DOCS:
        conn.execute("SELECT dna.index_document('docs', 'Doc', %s, %s, dna.fake_embed(%s), %s)", (name, body, body, MODEL))
    for name in ("deploy-a", "deploy-b"):
        conn.execute("SELECT dna.remember('team', %s, name => %s, embedding => dna.fake_embed(%s), model_id => %s)",
                     (Jsonb({"summary": "Deploys happen on Thursdays"}), name, "Deploys happen on Thursdays", MODEL))
    conn.execute("SELECT dna.remember('team', %s, name => 'office', embedding => dna.fake_embed('office lisbon'), "
                 "model_id => %s)", (Jsonb({"summary": "The office is in Lisbon"}), MODEL))


def _answers(conn, extra=""):
    search = [tuple(r) for r in conn.execute(
        f"SELECT name, score FROM dna.search('docs', %(q)s, dna.fake_embed(%(q)s), %(m)s, k => 3{extra})",
        {"q": "cache an entire view", "m": MODEL})]
    recall = conn.execute(f"SELECT dna.recall('team', %(q)s, dna.fake_embed(%(q)s), k => 3, reconsolidate => false"
                          f"{extra})", {"q": "when do deploys happen"}).fetchone()[0]
    return search, [(h["name"], h["score"]) for h in recall["hits"]]


def _signatures(conn, name):
    return conn.execute("SELECT count(*) FROM pg_proc WHERE pronamespace = 'dna'::regnamespace AND proname = %s",
                        (name,)).fetchone()[0]


def test_upgrade_from_0021_collapses_duplicates_by_default_and_downgrades(empty_dsn):
    migrate.upgrade(empty_dsn, "0021_holds_in_use")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        _seed(conn)
        before = _answers(conn)
    assert len({"topics/cache.md", "releases/4.0.md", "releases/4.1.md"} & {n for n, _ in before[0]}) == 3
    assert {n for n, _ in before[1]} >= {"deploy-a", "deploy-b"}
    migrate.upgrade(empty_dsn, HELD_TO)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _signatures(conn, "search") == 1 and _signatures(conn, "recall") == 1
        assert _answers(conn, ", diversity => 'off'") == before            # the answer before, asked for
        search, recall = _answers(conn)
        assert [n for n, _ in search][:1] == [before[0][0][0]] and len(search) == 3
        assert len({"topics/cache.md", "releases/4.0.md", "releases/4.1.md"} & {n for n, _ in search}) == 1
        assert len({"deploy-a", "deploy-b"} & {n for n, _ in recall}) == 1
        conn.execute("SELECT dna.index_document('docs', 'Doc', 'releases/4.2.md', %s, dna.fake_embed(%s), %s)",
                     (PARA, PARA, MODEL))                                   # written at head
    migrate.downgrade(empty_dsn, "0021_holds_in_use")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _signatures(conn, "search") == 1 and _signatures(conn, "recall") == 1
        for fn in ADDED:
            assert conn.execute("SELECT to_regproc(%s)", (fn,)).fetchone()[0] is None, fn
        conn.execute("SELECT dna.delete_document('docs', 'Doc', 'releases/4.2.md')")
        assert _answers(conn) == before                                     # 0021's dna.search and dna.recall
