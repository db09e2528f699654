"""Revision 0016 (topic search) upgrades a 0015_governed_history database with documents and memories:
dna.search answers the same (scores now rounded to 12 significant digits), the hit gains dense_exact and
the floor counts, RRF is asked for by fusion => 'rrf' (the default is now the convex fusion), and the downgrade gives 0015's dna.search and hit type back with the data."""
from __future__ import annotations

import psycopg
from psycopg.types.json import Jsonb

from pydna import migrate

MODEL = "dna-fake-hash-v1"
OLD_SEARCH = ("dna.search(text,text,vector,text,integer,text[],text,text,integer,double precision[],"
              "double precision,boolean,timestamp with time zone,boolean,boolean)")


def _seed(conn):
    for name, body in (("a", "alpha beta gamma"), ("b", "beta delta"), ("c", "gamma delta epsilon beta")):
        conn.execute("SELECT dna.index_document('docs', 'Doc', %s, %s, dna.fake_embed(%s), %s)", (name, body, body, MODEL))
    for i, text in enumerate(["the office is in lisbon", "deploys happen on fridays"]):
        conn.execute("SELECT dna.remember('team', %s, name => %s, embedding => dna.fake_embed(%s), model_id => %s)",
                     (Jsonb({"summary": text}), f"m{i}", text, MODEL))


def _answers(conn, rrf=""):
    """dna.search's answers; rrf: the argument that asks for RRF (from 0016 the default fusion is convex)."""
    out = []
    for scope, query in (("docs", "beta delta"), ("docs", "gamma"), ("team", "office lisbon")):
        out.append([(r[0], r[1], round(r[2], 9), r[3], r[4]) for r in conn.execute(
            f"SELECT kind, name, score, rank_dense, rank_lexical FROM dna.search(%s, %s, dna.fake_embed(%s), %s{rrf})",
            (scope, query, query, MODEL))])
    return out


def _signatures(conn):
    return {r[0] for r in conn.execute("SELECT p.oid::regprocedure::text FROM pg_proc AS p "
                                       "WHERE p.pronamespace = 'dna'::regnamespace AND p.proname = 'search'")}


def _hit_attributes(conn):
    return [r[0] for r in conn.execute("SELECT a.attname FROM pg_attribute AS a WHERE a.attrelid = "
                                       "'dna.search_hit'::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum")]


def test_upgrade_from_0015_keeps_search_answers_and_downgrades(empty_dsn):
    migrate.upgrade(empty_dsn, "0015_governed_history")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        _seed(conn)
        before = _answers(conn)
        old_attributes = _hit_attributes(conn)
        assert _signatures(conn) == {OLD_SEARCH}
    migrate.upgrade(empty_dsn)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _answers(conn, ", fusion => 'rrf'") == before
        conn.execute("SELECT dna.set_search_config('docs', fusion => 'rrf'), dna.set_search_config('team', fusion => 'rrf')")
        assert _answers(conn) == before                          # a scope set to RRF answers as before
        assert conn.execute("SELECT fusion FROM dna.search_config('docs')").fetchone()[0] == "rrf"
        conn.execute("SELECT dna.set_search_config('docs', reset => true), dna.set_search_config('team', reset => true)")
        assert _answers(conn) != before                          # the default is the convex fusion
        assert len(_signatures(conn)) == 1 and OLD_SEARCH not in _signatures(conn)
        assert _hit_attributes(conn) == old_attributes + ["dense_exact", "floor_removed_dense", "floor_removed_lexical",
                                                                  "explain", "metadata"]  # 0019: metadata
        rows = conn.execute("SELECT name, dense_exact, floor_removed_dense FROM dna.search('docs', 'beta', "
                            "dna.fake_embed('beta'), %s, \"offset\" => 1, min_similarity => 0.2)", (MODEL,)).fetchall()
        assert rows and all(r[1] is True and r[2] is not None for r in rows)
        recall = conn.execute("SELECT dna.recall('team', 'office lisbon', dna.fake_embed('office lisbon'), %s, "
                              "reconsolidate => false)", (MODEL,)).fetchone()[0]
        assert recall["hits"][0]["name"] == "m0"
    migrate.downgrade(empty_dsn, "0015_governed_history")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _signatures(conn) == {OLD_SEARCH}
        assert _hit_attributes(conn) == old_attributes
        assert _answers(conn) == before
        assert conn.execute("SELECT to_regprocedure('dna.score_round(double precision)')").fetchone()[0] is None
    migrate.upgrade(empty_dsn)
