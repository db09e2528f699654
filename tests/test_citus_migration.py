"""Revision 0018_citus_ready upgrades a 0017_recall_past_ingest database holding data — search documents
(whole and as passages, with vectors), memories with versions (restated, forgotten), a workspace overlay
and a personal memory — and every answer is the same after it: search (hybrid, lexical, overlay,
personal), BM25, recall, list_memories and the version history with its labels. After the upgrade the
policies have no sublink, dna_instances carries the verb label (op) and the verbs record theirs; the
downgrade gives 0017's policies, set_op and labels back, answering the same."""
from __future__ import annotations

from datetime import datetime, timezone

import psycopg
from psycopg.types.json import Jsonb

from pydna import migrate

# to 0024, the last revision whose answers this test holds (0025 topic fusion_scale rescales the convex
# fusion: tests/test_fusion_scale_migration.py)
HELD_TO = "0024_at_scale"

S = "mem"
MODEL = "dna-fake-hash-v1"
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
POLICY = ("SELECT qual FROM pg_policies WHERE schemaname = 'dna' AND tablename = 'dna_instances' "
          "AND policyname = 'dna_tenant_isolation'")
# The one-node policy at head (0021, topic policy_inline: dna.tenant_visible's test written out).
SINGLE = ("((tenant = ''::text) OR (tenant = ANY (( SELECT dna.visible_tenants() AS visible_tenants)::text[])) OR "
          "((NOT starts_with(tenant, 'personal:'::text)) AND "
          "('*'::text = ANY (( SELECT dna.visible_tenants() AS visible_tenants)::text[]))))")


def _seed(conn):
    conn.execute("INSERT INTO dna.dna_identities (role_name, oid) VALUES (current_user, 'dba-oid')")
    for i in range(30):
        text = f"alpha beta memory {i} about gamma and delta"
        conn.execute("SELECT dna.remember(%s, %s, name => %s, embedding => dna.fake_embed(%s), now => %s)",
                     (S, Jsonb({"summary": text}), f"m{i}", text, NOW))
    for i in range(0, 10, 3):
        conn.execute("SELECT dna.remember(%s, %s, name => %s, embedding => dna.fake_embed(%s), now => %s)",
                     (S, Jsonb({"summary": f"alpha restated {i}"}), f"m{i}", f"alpha restated {i}", NOW))
        conn.execute("SELECT dna.remember(%s, %s, name => %s, tenant => 'acme', embedding => dna.fake_embed(%s))",
                     (S, Jsonb({"summary": f"alpha workspace {i}"}), f"m{i}", f"alpha workspace {i}"))
    conn.execute("SELECT dna.forget(%s, 'm4')", (S,))
    conn.execute("SELECT dna.remember(%s, %s, name => 'pin', personal => true, embedding => dna.fake_embed('alpha pin'))",
                 (S, Jsonb({"summary": "alpha personal pin"})))
    for i in range(20):
        conn.execute("SELECT dna.index_document(%s, 'Doc', %s, %s, dna.fake_embed(%s), %s)",
                     (S, f"d{i}", f"gamma document {i} with alpha words", f"gamma document {i}", MODEL))
    conn.execute("SELECT count(*) FROM dna.index_documents(%s, ARRAY['Doc','Doc','Doc'], ARRAY['p','p','p'], "
                 "ARRAY['alpha first part','beta second part','gamma third part'], NULL, %s, passages => ARRAY[0,1,2])",
                 (S, MODEL))


def _answers(conn):
    out = {}
    for label, tenant, personal in (("base", "", False), ("acme", "acme", False), ("personal", "", True)):
        out[f"hybrid {label}"] = conn.execute(
            "SELECT kind, name, tenant, score, similarity, lexical_score, passage FROM dna.search(%s, 'alpha gamma', "
            "dna.fake_embed('alpha gamma'), tenant => %s, personal => %s, k => 20)", (S, tenant, personal)).fetchall()
        out[f"lexical {label}"] = conn.execute(
            "SELECT kind, name, tenant, score, lexical_score FROM dna.search(%s, 'alpha gamma', tenant => %s, "
            "personal => %s, k => 20)", (S, tenant, personal)).fetchall()
        out[f"recall {label}"] = conn.execute(
            "SELECT dna.recall(%s, 'alpha gamma', dna.fake_embed('alpha gamma'), tenant => %s, personal => %s, "
            "reconsolidate => false, now => %s, k => 10) -> 'hits'", (S, tenant, personal, NOW)).fetchone()[0]
    out["bm25 acme"] = conn.execute("SELECT kind, name, tenant, score FROM dna.bm25(%s, 'alpha gamma', %s, "
                                    "tenant => 'acme', k => 20)", (S, MODEL)).fetchall()
    out["list"] = conn.execute("SELECT dna.list_memories(%s, tenant => 'acme', include_invalid => true, now => %s)",
                               (S, NOW)).fetchone()[0]
    out["versions"] = conn.execute("SELECT name, tenant, version, op, spec FROM dna.dna_versions WHERE scope = %s "
                                   "ORDER BY name, tenant, version", (S,)).fetchall()
    # From 0019 (topic metadata) recall hits and listed memories also show their metadata, derived from the
    # spec compared here: the answers are the same without it.
    for key in list(out):
        if key.startswith("recall"):
            out[key] = [{k: v for k, v in h.items() if k != "metadata"} for h in out[key]]
    out["list"]["memories"] = [{k: v for k, v in m.items() if k != "metadata"} for m in out["list"]["memories"]]
    # From 0022 (topic pagination) a listing also says where it starts and where the next page would.
    for key in ("offset", "next_offset"):
        out["list"].pop(key, None)
    return out


def _last_op(conn, name):
    return conn.execute("SELECT op FROM dna.dna_versions WHERE scope = %s AND name = %s AND tenant = '' "
                        "ORDER BY version DESC LIMIT 1", (S, name)).fetchone()[0]


def test_upgrade_from_0017_answers_the_same_and_downgrades(empty_dsn):
    migrate.upgrade(empty_dsn, "0017_recall_past_ingest")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        _seed(conn)
        before = _answers(conn)
        assert "SELECT" in conn.execute(POLICY).fetchone()[0]
        assert {r[3] for r in before["versions"]} == {"remember", "forget"}
    migrate.upgrade(empty_dsn, HELD_TO)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _answers(conn) == before
        assert conn.execute(POLICY).fetchone()[0] == SINGLE      # 0021: the test written out (policy_inline)
        assert conn.execute("SELECT count(*) FROM dna.dna_instances WHERE op IS NOT NULL").fetchone()[0] == 0
        conn.execute("SELECT dna.forget(%s, 'm5')", (S,))
        conn.execute("SELECT dna.revive(%s, 'm5')", (S,))
        assert _last_op(conn, "m5") == "revive"
        conn.execute("UPDATE dna.dna_instances SET spec = spec || '{\"tags\": [\"t\"]}' WHERE scope = %s "
                     "AND name = 'm5' AND tenant = ''", (S,))
        assert _last_op(conn, "m5") == "update"
        conn.execute("SELECT dna.remember(%s, %s, name => 'm5', embedding => dna.fake_embed('m5'), now => %s)",
                     (S, Jsonb({"summary": "alpha beta memory 5 about gamma and delta"}), NOW))
        after_writes = _answers(conn)
    migrate.downgrade(empty_dsn, "0017_recall_past_ingest")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _answers(conn) == after_writes
        assert conn.execute(POLICY).fetchone()[0] == "dna.tenant_visible(tenant, ( SELECT dna.visible_tenants() AS visible_tenants))"
        assert conn.execute("SELECT count(*) FROM information_schema.columns WHERE table_schema = 'dna' "
                            "AND table_name = 'dna_instances' AND column_name = 'op'").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM pg_trigger WHERE tgname = 'dna_instances_before_op'").fetchone()[0] == 0
        conn.execute("SELECT dna.forget(%s, 'm6')", (S,))                 # 0017's set_op path records it again
        assert _last_op(conn, "m6") == "forget"
        assert conn.execute("SELECT count(*) FROM pg_proc WHERE proname IN ('tenant_policy', 'memory_text_of', "
                            "'instances_op_named') AND pronamespace = 'dna'::regnamespace").fetchone()[0] == 0
    migrate.upgrade(empty_dsn, HELD_TO)                                    # and up again
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute("SELECT dna.forget(%s, 'm7')", (S,))
        assert _last_op(conn, "m7") == "forget"
