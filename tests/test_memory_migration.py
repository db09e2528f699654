"""Revision 0002_memory: downgrade to 0001_foundation removes exactly what it added."""
from __future__ import annotations

import psycopg

from pydna import migrate


def snapshot(dsn):
    with psycopg.connect(dsn) as conn:
        funcs = {r[0] for r in conn.execute(
            "SELECT p.oid::regprocedure::text FROM pg_proc AS p WHERE p.pronamespace = 'dna'::regnamespace")}
        triggers = {r[0] for r in conn.execute(
            "SELECT c.relname || '.' || t.tgname FROM pg_trigger AS t JOIN pg_class AS c ON c.oid = t.tgrelid "
            "WHERE c.relnamespace = 'dna'::regnamespace AND NOT t.tgisinternal")}
        tables = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'dna'")}
    return funcs, triggers, tables


def test_downgrade_removes_exactly_the_memory_plane(empty_dsn):
    migrate.upgrade(empty_dsn, "0001_foundation")
    base = snapshot(empty_dsn)
    migrate.upgrade(empty_dsn, "0002_memory")
    funcs, triggers, tables = snapshot(empty_dsn)
    assert {"dna.remember(text,jsonb,text,text,text,timestamp with time zone,vector,text,boolean)",
            "dna.ebbinghaus_retention(double precision,double precision)"} <= funcs
    assert "dna_instances.dna_instances_refuse_delete" in triggers
    assert "dna_search_docs_3072.dna_search_docs_refuse_delete" in triggers
    assert base[0] < funcs and tables == base[2]
    migrate.downgrade(empty_dsn, "0001_foundation")
    assert snapshot(empty_dsn) == base
    migrate.upgrade(empty_dsn, "0002_memory")
    assert snapshot(empty_dsn) == (funcs, triggers, tables)


def test_memory_sql_prints_in_sql_mode():
    text = migrate.upgrade("postgresql://nobody@127.0.0.1:1/none", sql=True)
    for expected in ("CREATE OR REPLACE FUNCTION dna.recall(", "CREATE TRIGGER dna_instances_before_write",
                     "dna_search_docs_refuse_delete"):
        assert expected in text


def test_every_memory_plane_function_is_documented(sql):
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "sql"
    names = set()
    for plane in sorted(root.glob("memory_*.sql")) + [root / "consolidate.sql"]:
        names |= set(re.findall(r"CREATE OR REPLACE FUNCTION dna\.(\w+)\s*\(", plane.read_text()))
    rows = sql.execute("SELECT p.proname, p.oid::regprocedure::text, obj_description(p.oid, 'pg_proc') FROM pg_proc AS p "
                       "WHERE p.pronamespace = 'dna'::regnamespace AND p.proname = ANY (%s)", (sorted(names),)).fetchall()
    assert {r[0] for r in rows} == names
    undocumented = [sig for _, sig, comment in rows if not comment or len(comment) < 40]
    assert undocumented == []
