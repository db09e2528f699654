"""Issue 16, revision 0018_citus_ready: the statement shapes Citus refuses are gone, through plain SQL.

Citus is not installed here, so these tests check, on one node, what Citus would refuse or run on
every shard, and that the answers stay those of a single node:

- B5 / B7 / S3 (``citus_plans.Plans``: the plan of every statement each verb runs, nested ones
  included): no statement that reads ``dna_*`` tables calls a function that reads them too (the BM25
  lane and dna.search each run by their own statement); every UPDATE/DELETE on a scope-keyed table
  is pinned to one scope (the reconsolidation UPDATE of dna.recall, the passage DELETE of
  dna.index_documents); no correlated sublink on a scope-keyed table that is not pinned (the tenant
  overlay of dna.search, dna.list_memories).
- B3: no ``now()`` in an ``ON CONFLICT DO UPDATE SET``; the timestamps written stay the transaction's.
- B4: no LANGUAGE sql set-returning function reads ``dna_*`` tables.
- B6: dna.register_model writes dna_models with a plain INSERT only when the model is absent: a real
  application role indexes with a vector for a registered model without any write right on dna_models.
- S2: the verb label of dna_versions.op rides in the row (dna_instances.op), not in a session setting.
- B1: no policy holds a sublink.
"""
from __future__ import annotations

import itertools
import os
import threading
import time

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.types.json import Jsonb

from citus_plans import Plans

S = "mem"
MODEL = "dna-fake-hash-v1"
PASSWORD = "dna-citus-ready-test"
APP = f"dna_cr_app_{os.getpid()}"


def one(conn, query, params=()):
    return conn.execute(query, params).fetchone()[0]


def remember(conn, summary, name, *, tenant="", personal=False, scope=S):
    return one(conn, "SELECT dna.remember(%s, %s, name => %s, tenant => %s, personal => %s, "
                     "embedding => dna.fake_embed(%s))",
               (scope, Jsonb({"summary": summary}), name, tenant, personal, summary))


@pytest.fixture(scope="module")
def seeded_template(pg_server, dna_template):
    """The seeded database, written once for the module (90 verb calls); each test gets a copy."""
    name = f"dna_cr_seeded_{os.getpid()}"
    with pg_server.janitor(name, template=dna_template):
        with psycopg.connect(pg_server.dsn(name), autocommit=True) as conn:
            _seed(conn)
        yield name


@pytest.fixture
def seeded(pg_server, seeded_template):
    """A fresh copy of the seeded database (CREATE DATABASE … TEMPLATE), as the ``sql`` fixture connects."""
    name = f"dna_cr_{os.getpid()}_{next(_copies)}"
    with pg_server.janitor(name, template=seeded_template):
        with psycopg.connect(pg_server.dsn(name), autocommit=True) as conn:
            yield conn


_copies = itertools.count()


def _seed(sql):
    """A scope with base memories, a workspace overlay shadowing some, a personal memory (the superuser
    mapped to an identity), documents (whole and as passages) and a second scope of the same names."""
    sql.execute("INSERT INTO dna.dna_identities (role_name, oid) VALUES (current_user, 'dba-oid')")
    for i in range(40):
        remember(sql, f"alpha beta note number {i} about gamma", f"m{i}")
        remember(sql, f"alpha beta note number {i} elsewhere", f"m{i}", scope="other")
    for i in range(0, 10, 2):
        remember(sql, f"alpha workspace note {i}", f"m{i}", tenant="acme")
    remember(sql, "alpha personal pin", "pin", personal=True)
    sql.execute("SELECT dna.index_document(%s, 'Doc', 'd1', 'alpha gamma whole document', dna.fake_embed('alpha gamma'), %s)",
                (S, MODEL))
    sql.execute("SELECT count(*) FROM dna.index_documents(%s, ARRAY['Doc','Doc','Doc'], ARRAY['d2','d2','d2'], "
                "ARRAY['alpha one','beta two','gamma three'], NULL, %s, passages => ARRAY[0,1,2])", (S, MODEL))
    return sql


CALLS = {
    "recall": "SELECT dna.recall('mem', 'alpha gamma', dna.fake_embed('alpha gamma'))",
    "recall lexical": "SELECT dna.recall('mem', 'alpha gamma')",
    "recall workspace": "SELECT dna.recall('mem', 'alpha', dna.fake_embed('alpha'), tenant => 'acme')",
    "recall personal": "SELECT dna.recall('mem', 'alpha', dna.fake_embed('alpha'), personal => true)",
    "recall as_of": "SELECT dna.recall('mem', 'alpha gamma', as_of => now())",
    "search hybrid": "SELECT count(*) FROM dna.search('mem', 'alpha gamma', dna.fake_embed('alpha gamma'))",
    "search lexical": "SELECT count(*) FROM dna.search('mem', 'alpha gamma')",
    "search workspace": "SELECT count(*) FROM dna.search('mem', 'alpha', dna.fake_embed('alpha'), tenant => 'acme')",
    "search floors": "SELECT count(*) FROM dna.search('mem', 'alpha', dna.fake_embed('alpha'), min_similarity => 1)",
    "bm25": "SELECT count(*) FROM dna.bm25('mem', 'alpha', 'dna-fake-hash-v1', tenant => 'acme')",
    "remember": "SELECT dna.remember('mem', '{\"summary\": \"alpha restated\"}', name => 'm3', "
                "embedding => dna.fake_embed('alpha restated'))",
    "forget": "SELECT dna.forget('mem', 'm5')",
    "revive": "SELECT dna.forget('mem', 'm7'), dna.revive('mem', 'm7')",
    "list workspace": "SELECT dna.list_memories('mem', tenant => 'acme')",
    "index passages": "SELECT count(*) FROM dna.index_documents('mem', ARRAY['Doc'], ARRAY['d2'], ARRAY['alpha one'], "
                      "NULL, 'dna-fake-hash-v1', passages => ARRAY[0])",
    "index document": "SELECT dna.index_document('mem', 'Doc', 'd1', 'alpha gamma new text', dna.fake_embed('x'), "
                      "'dna-fake-hash-v1')",
    "consolidate": "SELECT dna.consolidate('mem', dry_run => false)",
    "receipt search": "SELECT dna.take_receipt('search', '{\"scope\": \"mem\", \"query\": \"alpha\"}')",
    "receipt recall": "SELECT dna.take_receipt('recall', '{\"scope\": \"mem\", \"query\": \"alpha\"}')",
    "verify integrity": "SELECT dna.verify_integrity('mem', 'full')",
    "reconcile": "SELECT dna.reconcile('mem', 'rebuild_lexical'), dna.reconcile('mem', 'reembed', 'dna-fake-hash-v1')",
    "source conflicts": "SELECT count(*) FROM dna.source_conflicts('mem', ARRAY['Doc'], ARRAY['d1'], ARRAY[''], ARRAY['/x'])",
    # issue 25: filters, batch writes, conversations
    "search filter": "SELECT count(*) FROM dna.search('mem', 'alpha gamma', dna.fake_embed('alpha gamma'), exact => false, "
                     "filter => '{\"memory_type\": \"semantic\", \"created_at\": {\"gte\": \"2020-01-01\"}}')",
    "recall filter": "SELECT dna.recall('mem', 'alpha', dna.fake_embed('alpha'), tenant => 'acme', "
                     "filter => '{\"memory_type\": {\"in\": [\"semantic\", \"episodic\"]}}')",
    "list filter": "SELECT dna.list_memories('mem', tenant => 'acme', filter => '{\"memory_type\": \"semantic\"}')",
    "document metadata": "SELECT dna.set_document_metadata('mem', ARRAY['Doc'], ARRAY['d1'], ARRAY['{\"user\": 1}'::jsonb])",
    "remember many": "SELECT dna.remember_many('mem', '[{\"spec\": {\"summary\": \"alpha many\"}}, "
                     "{\"spec\": {\"summary\": \"alpha restated\"}, \"name\": \"m3\"}]', "
                     "embeddings => ARRAY[dna.fake_embed('a'), NULL])",
    "remember conversation": "SELECT dna.remember_conversation('mem', 'c1', '[{\"speaker\": \"A\", \"text\": \"alpha hi\"}, "
                             "{\"speaker\": \"B\", \"text\": \"gamma yes\"}]'), "
                             "dna.recall('mem', 'alpha', kinds => '{Turn}', context => 1, "
                             "filter => '{\"conversation\": \"c1\"}')",
}


@pytest.mark.parametrize("call", sorted(CALLS))
def test_no_statement_of_a_verb_has_a_shape_citus_refuses(seeded, call):
    plans = Plans(seeded)
    with plans.capture():
        seeded.execute(CALLS[call])
    assert len(plans.plans) > 1                                           # the nested statements were seen
    assert plans.nested_reads() == []                                     # B5
    assert plans.unscoped_writes() == []                                  # B7
    assert plans.unscoped_reads() == []                                   # S3


def test_recall_still_reconsolidates_only_its_scope(seeded):
    before = one(seeded, "SELECT jsonb_object_agg(scope, spec -> 'surface_count') FROM dna.dna_instances "
                         "WHERE name = 'm1' AND tenant = ''")
    result = one(seeded, "SELECT dna.recall('mem', 'note number 1 about gamma', k => 3)")
    assert "m1" in result["reconsolidated"] and "reconsolidation_errors" not in result
    after = one(seeded, "SELECT jsonb_object_agg(scope, spec -> 'surface_count') FROM dna.dna_instances "
                        "WHERE name = 'm1' AND tenant = ''")
    assert after["other"] == before["other"] and after["mem"] != before["mem"]
    assert one(seeded, "SELECT op FROM dna.dna_versions WHERE scope = 'mem' AND name = 'm1' AND tenant = '' "
                       "ORDER BY version DESC LIMIT 1") == "reconsolidate"


# -- B3: ON CONFLICT DO UPDATE SET without volatile or stable functions -----------------------------


def test_upserts_set_no_function_and_keep_the_transaction_time(sql):
    for fn in ("index_document", "index_documents", "record_document_sources"):
        src = one(sql, "SELECT string_agg(prosrc, ' ') FROM pg_proc WHERE proname = %s "
                       "AND pronamespace = 'dna'::regnamespace", (fn,))
        for clause in src.split("DO UPDATE")[1:]:
            head = clause.split("RETURNING")[0].split("USING")[0].split(";")[0]
            assert "now()" not in head and "clock_timestamp" not in head, (fn, head)
    args = (S, ["Doc"], ["d"], [""], ["/a"])
    with psycopg.connect(sql.info.dsn) as tx:                             # one transaction: now() is fixed
        tx.execute("SELECT dna.index_document(%s, 'Doc', 'd', 'first text', model_id => %s)", (S, MODEL))
        tx.execute("SELECT dna.record_document_sources(%s, %s, %s, %s, %s)", args)
        tx.commit()
    time.sleep(0.01)
    with psycopg.connect(sql.info.dsn) as tx:
        stamp = one(tx, "SELECT now()")
        tx.execute("SELECT dna.index_document(%s, 'Doc', 'd', 'second text', model_id => %s)", (S, MODEL))
        tx.execute("SELECT dna.record_document_sources(%s, %s, %s, %s, %s)", (*args[:4], ["/b"]))
        tx.execute("SELECT count(*) FROM dna.index_documents(%s, ARRAY['Doc','Doc'], ARRAY['p','p'], "
                   "ARRAY['one','two'], NULL, %s, passages => ARRAY[0,1])", (S, MODEL))
        tx.commit()
    time.sleep(0.01)
    with psycopg.connect(sql.info.dsn) as tx:
        later = one(tx, "SELECT now()")
        tx.execute("SELECT count(*) FROM dna.index_documents(%s, ARRAY['Doc','Doc'], ARRAY['p','p'], "
                   "ARRAY['one','three'], NULL, %s, passages => ARRAY[0,1])", (S, MODEL))
        tx.commit()
    assert one(sql, "SELECT updated_at FROM dna.dna_search_docs_384 WHERE name = 'd'") == stamp
    assert one(sql, "SELECT recorded_at FROM dna.dna_document_sources WHERE name = 'd'") == stamp
    assert sql.execute("SELECT passage, updated_at = %s, updated_at = %s FROM dna.dna_search_docs_384 "
                       "WHERE name = 'p' ORDER BY passage", (stamp, later)).fetchall() == [(0, True, False),
                                                                                           (1, False, True)]


# -- B4: no LANGUAGE sql set-returning function over dna_* tables --------------------------------


def test_no_sql_set_returning_function_reads_dna_tables(sql):
    offenders = sql.execute(r"""
        SELECT p.proname FROM pg_proc AS p JOIN pg_language AS l ON l.oid = p.prolang
        WHERE p.pronamespace = 'dna'::regnamespace AND l.lanname = 'sql' AND p.proretset
          AND p.prosrc ~ 'dna\.dna_\w+' ORDER BY 1""").fetchall()
    assert offenders == []
    assert sql.execute("SELECT * FROM dna.search_config('nowhere')").fetchall() == [
        ("english", 1.2, 0.4, None, None, None, None, None, None)]
    sql.execute("SELECT dna.set_search_config('tuned', bm25_k1 => 0.9, fusion => 'rrf', weights => '{1,2}')")
    sql.execute("SELECT dna.set_search_config('tuned', bm25_b => 0.7)")            # the row exists: updated
    assert sql.execute("SELECT ts_config::text, bm25_k1, bm25_b, weights, fusion FROM dna.search_config('tuned')"
                       ).fetchall() == [("english", 0.9, 0.7, [1.0, 2.0], "rrf")]
    sql.execute("SELECT dna.register_model('prefixed', 384, query_prefix => 'query: ', document_prefix => 'passage: ')")
    assert sql.execute("SELECT * FROM dna.model_prefixes('prefixed')").fetchall() == [("query: ", "passage: ")]
    assert sql.execute("SELECT * FROM dna.model_prefixes('absent')").fetchall() == []


# -- B6: register_model with a real application role -----------------------------------------------


@pytest.fixture
def app(sql, pg_server):
    admin = pg_server.dsn(pg_server.maintenance_db)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP ROLE IF EXISTS {APP}")
        conn.execute(f"CREATE ROLE {APP} LOGIN PASSWORD '{PASSWORD}'")
    sql.execute("SELECT dna.grant_app_role(%s)", (APP,))
    params = conninfo_to_dict(sql.info.dsn)
    params.update(user=APP, password=PASSWORD)
    conn = psycopg.connect(make_conninfo(**params), autocommit=True)
    yield conn
    conn.close()
    sql.execute(f"REVOKE ALL ON ALL TABLES IN SCHEMA dna FROM {APP}; REVOKE ALL ON ALL SEQUENCES IN SCHEMA dna FROM {APP}; "
                f"REVOKE ALL ON SCHEMA dna FROM {APP}; REVOKE ALL ON public.dna_alembic_version FROM {APP}")
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(f"DROP ROLE IF EXISTS {APP}")


def test_an_application_role_indexes_with_a_vector_for_a_known_and_a_new_model(sql, app):
    assert one(app, "SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user") is False
    sql.execute("SELECT dna.register_model('known-384', 384)")
    # What Citus's reference-table upsert needs (UPDATE/DELETE/TRUNCATE) the role never had; without
    # INSERT too, a known model needs no write at all (INSERT … ON CONFLICT needed INSERT even then).
    assert one(app, "SELECT has_table_privilege('dna.dna_models', 'UPDATE') OR "
                    "has_table_privilege('dna.dna_models', 'DELETE')") is False
    sql.execute(f"REVOKE INSERT ON dna.dna_models FROM {APP}")
    r = one(app, "SELECT dna.index_document('mem', 'Doc', 'a', 'alpha text', dna.fake_embed('alpha text'), 'known-384')")
    assert r["action"] == "inserted" and r["embedded"] is True
    with pytest.raises(psycopg.errors.InsufficientPrivilege):             # a new model is a write: 42501
        app.execute("SELECT dna.index_document('mem', 'Doc', 'b', 'beta', dna.fake_embed('beta'), 'fresh-384')")
    assert one(sql, "SELECT count(*) FROM dna.dna_models WHERE model_id = 'fresh-384'") == 0
    sql.execute(f"GRANT INSERT ON dna.dna_models TO {APP}")               # what dna.grant_app_role grants
    r = one(app, "SELECT dna.index_document('mem', 'Doc', 'b', 'beta', dna.fake_embed('beta'), 'fresh-384')")
    assert r["action"] == "inserted"
    assert one(app, "SELECT dna.remember('mem', '{\"summary\": \"gamma\"}', embedding => dna.fake_embed('gamma'), "
                    "model_id => 'fresh-384') ->> 'action'") == "created"
    assert sql.execute("SELECT model_id, dims FROM dna.dna_models WHERE model_id IN ('known-384', 'fresh-384') "
                       "ORDER BY 1").fetchall() == [("fresh-384", 384), ("known-384", 384)]
    # a wrong width for a known model is still refused before any write
    with pytest.raises(psycopg.errors.InvalidParameterValue):
        app.execute("SELECT dna.index_document('mem', 'Doc', 'c', 'x', dna.fake_embed('x', 768), 'known-384')")


def test_two_writers_registering_one_new_model_both_succeed(sql, dna_dsn):
    with psycopg.connect(dna_dsn) as first, psycopg.connect(dna_dsn) as second:
        first.execute("SELECT dna.register_model('raced', 384)")          # holds the new key, uncommitted
        out = {}

        def register():
            try:
                out["r"] = one(second, "SELECT dna.register_model('raced', 384)")
                second.commit()
            except Exception as exc:                                      # pragma: no cover - reported below
                out["error"] = exc
        t = threading.Thread(target=register)
        t.start()
        time.sleep(0.5)
        assert t.is_alive()                                               # waiting on the first's key
        first.commit()
        t.join(10)
    assert "error" not in out and out["r"]["dims"] == 384
    assert one(sql, "SELECT count(*) FROM dna.dna_models WHERE model_id = 'raced'") == 1


# -- S2: the verb label rides in the row -------------------------------------------------------------


def ops(conn, name, scope=S):
    return [r[0] for r in conn.execute("SELECT op FROM dna.dna_versions WHERE scope = %s AND name = %s "
                                       "ORDER BY version", (scope, name))]


def test_version_labels_come_with_the_data_not_a_session_setting(sql):
    sql.execute("UPDATE dna.dna_kinds SET version_retention = NULL WHERE kind = 'Engram'")   # keep every version
    remember(sql, "first text", "h")
    remember(sql, "second text", "h")                                     # a restatement: remember again
    for _ in range(2):                                                    # the same label twice in a row
        sql.execute("SELECT dna.recall('mem', 'second text', k => 1)")
    sql.execute("SELECT dna.forget('mem', 'h')")
    sql.execute("SELECT dna.revive('mem', 'h')")
    sql.execute("UPDATE dna.dna_instances SET spec = spec || '{\"tags\": [\"x\"]}' WHERE name = 'h'")   # raw
    # a session setting no longer names the verb: a forged dna.op is not recorded
    sql.execute("SELECT set_config('dna.op', 'forged', false)")
    sql.execute("UPDATE dna.dna_instances SET spec = spec || '{\"tags\": [\"y\"]}' WHERE name = 'h'")
    with psycopg.connect(sql.info.dsn) as tx:                             # several verbs in one transaction
        tx.execute("SELECT dna.forget('mem', 'h')")
        tx.execute("SELECT dna.revive('mem', 'h')")
        tx.execute("SELECT dna.recall('mem', 'second text', k => 1)")
        tx.commit()
    assert ops(sql, "h") == ["remember", "remember", "reconsolidate", "reconsolidate", "forget", "revive",
                             "update", "update", "forget", "revive", "reconsolidate"]
    assert one(sql, "SELECT op FROM dna.dna_instances WHERE name = 'h'") == "reconsolidate"
    assert one(sql, "SELECT count(*) FROM pg_proc WHERE proname = 'set_op' AND pronamespace = 'dna'::regnamespace") == 0
    sql.execute("INSERT INTO dna.dna_instances (scope, kind, api_version, name, tenant, spec) "
                "VALUES ('mem', 'Doc', 'dna/v1', 'raw', '', '{}')")
    sql.execute("UPDATE dna.dna_instances SET spec = '{\"a\": 1}', op = 'import' WHERE name = 'raw'")   # named
    sql.execute("UPDATE dna.dna_instances SET spec = '{\"a\": 2}' WHERE name = 'raw'")
    assert ops(sql, "raw") == ["insert", "import", "update"]


def test_redact_records_its_label(sql):
    remember(sql, "to erase", "gone")
    sql.execute("SELECT dna.redact('mem', 'gone', 'erasure request')")
    assert ops(sql, "gone") == ["redact"]                                 # earlier versions are erased


# -- B1: the tenant policy (no sublink on Citus) -------------------------------------------------------

# One node (0021, topic policy_inline): dna.tenant_visible's test written out, the list an InitPlan.
SINGLE = ("((tenant = ''::text) OR (tenant = ANY (( SELECT dna.visible_tenants() AS visible_tenants)::text[])) OR "
          "((NOT starts_with(tenant, 'personal:'::text)) AND "
          "('*'::text = ANY (( SELECT dna.visible_tenants() AS visible_tenants)::text[]))))")
CITUS = "((tenant = ''::text) OR dna.tenant_visible(tenant, dna.visible_tenants()))"


def test_every_tenant_policy_is_dna_tenant_policy_and_the_citus_form_has_no_sublink(sql):
    rows = sql.execute("SELECT tablename, qual, with_check FROM pg_policies WHERE schemaname = 'dna' "
                       "AND policyname = 'dna_tenant_isolation' ORDER BY 1").fetchall()
    tables = [r[0] for r in sql.execute("SELECT c.relname FROM dna.protected_tables() AS t "
                                        "JOIN pg_class AS c ON c.oid = t ORDER BY 1")]
    assert [r[0] for r in rows] == tables and len(tables) >= 9
    assert all(qual == check == SINGLE for _t, qual, check in rows)      # no Citus here: the InitPlan form
    assert one(sql, "SELECT dna.tenant_policy() = dna.tenant_policy(false)") is True
    citus = one(sql, "SELECT dna.tenant_policy(true)")
    assert "SELECT" not in citus.upper() and citus.startswith("tenant = '' OR ")
    sql.execute("CREATE TABLE dna.policy_probe (tenant text)")
    sql.execute(f"CREATE POLICY p ON dna.policy_probe USING ({citus}) WITH CHECK ({citus})")
    assert one(sql, "SELECT qual FROM pg_policies WHERE tablename = 'policy_probe'") == CITUS


def test_both_policy_forms_admit_the_same_rows_to_a_real_role(sql, app):
    sql.execute("INSERT INTO dna.dna_identities (role_name, oid) VALUES (%s, 'app-oid')", (APP,))
    sql.execute("INSERT INTO dna.dna_workspace_members (workspace, role_name) VALUES ('acme', %s)", (APP,))
    sql.execute("CREATE TABLE dna.policy_probe (tenant text)")
    sql.execute("INSERT INTO dna.policy_probe VALUES (''), ('acme'), ('other'), ('personal:app-oid'), "
                "('personal:someone-else'), ('*')")
    sql.execute(f"GRANT SELECT, INSERT ON dna.policy_probe TO {APP}")
    sql.execute("ALTER TABLE dna.policy_probe ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY")
    seen = {}
    for citus in (False, True):
        expr = one(sql, "SELECT dna.tenant_policy(%s)", (citus,))
        sql.execute("DROP POLICY IF EXISTS p ON dna.policy_probe")
        sql.execute(f"CREATE POLICY p ON dna.policy_probe USING ({expr}) WITH CHECK ({expr})")
        seen[citus] = sorted(r[0] for r in app.execute("SELECT tenant FROM dna.policy_probe"))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):       # WITH CHECK: not into another's partition
            app.execute("INSERT INTO dna.policy_probe VALUES ('personal:someone-else')")
        app.execute("INSERT INTO dna.policy_probe VALUES ('personal:app-oid')")
    assert seen[False] == ["", "acme", "personal:app-oid"]
    assert seen[True] == ["", "acme", "personal:app-oid", "personal:app-oid"]   # the row the first pass wrote
    sql.execute("DROP TABLE dna.policy_probe")
