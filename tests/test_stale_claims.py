"""A recalled memory whose claim a newer memory in force contradicts says so and names it (issue 27
item 5), and consolidate's contradiction proposal says how to accept it (one dna.forget call, one `dna memory forget`
command) — through plain SQL and the CLI."""
from __future__ import annotations

import json
from datetime import datetime, timezone

from psycopg.types.json import Jsonb
from typer.testing import CliRunner

S = "stale"
T1 = datetime(2026, 3, 1, tzinfo=timezone.utc)
T2 = datetime(2026, 9, 1, tzinfo=timezone.utc)
LATER = datetime(2030, 1, 1, tzinfo=timezone.utc)   # after the wall clock: an accepted forget (now()) is past
PG16 = {"subject": "User/me", "predicate": "prod_db", "object": "postgres16"}
PG17 = {"subject": "User/me", "predicate": "prod_db", "object": "postgres17"}


def one(sql, query, params=()):
    return sql.execute(query, params).fetchone()[0]


def remember(sql, name, summary, claims, now, tenant=""):
    return one(sql, "SELECT dna.remember(%s, %s, name => %s, now => %s, tenant => %s)",
               (S, Jsonb({"summary": summary, "claims": claims}), name, now, tenant))


def recall(sql, query="which postgres is prod", tenant=""):
    return {h["name"]: h for h in one(sql, "SELECT dna.recall(%s, %s, k => 10, now => %s, reconsolidate => false, "
                                           "tenant => %s) -> 'hits'", (S, query, LATER, tenant))}


def test_recall_flags_the_hit_a_newer_memory_contradicts_and_names_it(sql):
    remember(sql, "prod16", "prod is PostgreSQL 16", [PG16], T1)
    remember(sql, "prod17", "prod was upgraded to PostgreSQL 17", [PG17], T2)
    hits = recall(sql)
    assert set(hits) == {"prod16", "prod17"}
    flag = hits["prod16"]["contradicted_by"]
    assert [f["name"] for f in flag] == ["prod17"]
    assert flag[0]["kind"] == "Engram" and flag[0]["reason"] == "object"
    assert flag[0]["claim"] == {"subject": "User/me", "predicate": "prod_db", "object": "postgres17"}
    assert flag[0]["accept"]["sql"] == "SELECT dna.forget('stale', 'prod16', superseded_by => 'prod17', kind => 'Engram')"
    assert "contradicted_by" not in hits["prod17"]           # its rival is older: prod17 is the news
    # accepting it: the stale memory leaves recall, nothing is flagged any more
    assert flag[0]["accept"]["cli"] == "dna memory forget prod16 --superseded-by prod17 --scope stale"
    sql.execute(flag[0]["accept"]["sql"])
    hits = recall(sql)
    assert set(hits) == {"prod17"} and "contradicted_by" not in hits["prod17"]


def test_what_does_not_contradict_is_not_flagged(sql):
    remember(sql, "a", "prod is PostgreSQL 16", [PG16], T1)
    # the same object, a successor window that does not overlap, another predicate: no contradiction
    remember(sql, "b", "prod runs PostgreSQL 16", [PG16], T2)
    remember(sql, "c", "the old box ran PostgreSQL 14 until 2025",
             [{"subject": "User/me", "predicate": "prod_db", "object": "postgres14", "valid_to": "2025-01-01T00:00:00Z"}], T2)
    remember(sql, "d", "staging is PostgreSQL 17", [{"subject": "User/me", "predicate": "staging_db", "object": "postgres17"}], T2)
    hits = recall(sql, "postgres prod staging box")
    assert set(hits) == {"a", "b", "c", "d"}
    assert not any("contradicted_by" in h for h in hits.values()), hits


def test_a_forgotten_or_unseen_rival_flags_nothing(sql):
    remember(sql, "old", "prod is PostgreSQL 16", [PG16], T1)
    remember(sql, "new", "prod was upgraded to PostgreSQL 17", [PG17], T2)
    sql.execute("SELECT dna.forget(%s, 'new', now => %s)", (S, T2))   # no longer in force
    assert "contradicted_by" not in recall(sql)["old"]
    # a workspace's newer memory is the workspace's: the base read is not flagged by it
    remember(sql, "ws-new", "prod was upgraded to PostgreSQL 17", [PG17], T2, tenant="ws-a")
    assert "contradicted_by" not in recall(sql)["old"]
    assert [f["name"] for f in recall(sql, tenant="ws-a")["old"]["contradicted_by"]] == ["ws-new"]


def test_consolidate_proposal_says_how_to_accept_it(sql):
    remember(sql, "prod16", "prod is PostgreSQL 16", [PG16], T1)
    remember(sql, "prod17", "prod was upgraded to PostgreSQL 17", [PG17], T2)
    report = one(sql, "SELECT dna.consolidate(%s, dry_run => true, now => %s)", (S, LATER))
    (c,) = report["contradictions"]
    prop = c["proposal"]
    assert prop["suggested_keep"] == "prod17" and prop["suggested_supersede"] == ["prod16"]
    assert prop["accept"] == {
        "sql": ["SELECT dna.forget('stale', 'prod16', superseded_by => 'prod17', kind => 'Engram')"],
        "cli": ["dna memory forget prod16 --superseded-by prod17 --scope stale"]}
    for statement in prop["accept"]["sql"]:
        sql.execute(statement)
    assert one(sql, "SELECT dna.consolidate(%s, dry_run => true, now => %s)", (S, LATER))["contradictions"] == []


def test_cli_recall_shows_the_flag_and_consolidate_the_command(sql, dna_dsn):
    from pydna.cli import app

    remember(sql, "prod16", "prod is PostgreSQL 16", [PG16], T1)
    remember(sql, "prod17", "prod was upgraded to PostgreSQL 17", [PG17], T2)
    runner = CliRunner()
    out = runner.invoke(app, ["memory", "recall", "which postgres is prod", "--scope", S, "--dsn", dna_dsn, "--embedder", "none",
                              "--now", LATER.isoformat(), "--no-reconsolidate"])
    assert out.exit_code == 0, out.output
    assert "contradicted by Engram/prod17 (prod_db = postgres17)" in out.output
    assert "dna memory forget prod16 --superseded-by prod17 --scope stale" in out.output
    out = runner.invoke(app, ["memory", "consolidate", "--scope", S, "--dsn", dna_dsn, "--dry-run", "--now", LATER.isoformat()])
    assert out.exit_code == 0, out.output
    assert "accept with: dna memory forget prod16 --superseded-by prod17 --scope stale" in out.output
    data = json.loads(runner.invoke(app, ["memory", "recall", "which postgres is prod", "--scope", S, "--dsn", dna_dsn,
                                          "--embedder", "none", "--now", LATER.isoformat(), "--no-reconsolidate",
                                          "--json"]).output)
    assert [f["name"] for h in data["hits"] for f in h.get("contradicted_by", [])] == ["prod17"]
