"""Answer equality: one corpus loaded into a single node and into Citus, every answer compared.

The single node is a database on the coordinator's server without the citus extension (the same
PostgreSQL binary, so the same floating point); the Citus side is this module's distributed database.
Both get the same load, in the same order: the generated corpus of tests/citus/corpus.py through
``Client.index`` with the fake embedder (400 documents in scope ``sci``, a third long enough for
passages, a 30-row workspace overlay in tenant ``acme``, 80 documents in scope ``other``), two real
login roles (alice and bob: identities, membership of ``acme``, personal memories) and a memory
script with history. Then every call is made on both and compared: the same names (kind, name,
tenant, passage) in the same order, every score within 1e-9.

Searches are lexical, BM25 and hybrid with exact dense scans (``exact => true``: an HNSW graph per
shard is another approximation than one graph over the whole table, citus-probe.md), with ``kinds``,
``name_prefix``, ``k = 50`` and the workspace tenant; memory: remember, restate, recall (with
reconsolidation), forget, revive, consolidate, list; receipts taken and replayed; verify_integrity.
Each test prints its count of equal answers ("equal: n/n")."""
from __future__ import annotations

import math
import os
from datetime import datetime, timedelta, timezone

import psycopg
import pytest
from psycopg.types.json import Jsonb

import pydna
from pydna import migrate

from . import corpus

NOW = datetime(2026, 7, 1, 9, 0, tzinfo=timezone.utc)
SCOPE, OTHER, MEM = "sci", "other", "mem"
MODEL = "dna-fake-hash-v1"
PASSWORD = "dna-equality"
ROLES = {who: f"dna_eq_{who}_{os.getpid()}" for who in ("alice", "bob")}
TOLERANCE = 1e-9
# Values that are facts of the run, not of the answer: transaction times, random ids, timings.
VOLATILE = {"recorded_at", "taken_at", "receipt_id", "updated_at", "elapsed_ms", "duration_ms", "ms", "took_ms",
            "now", "checked_at", "created_at_tx"}
EMBEDDER = pydna.FakeEmbeddingProvider()
DOCS = corpus.documents(400)
OVERLAY = corpus.overlay(DOCS)
OTHER_DOCS = corpus.documents(80, scope_seed=1)
QUERIES = corpus.queries(DOCS)


def vector(text: str) -> str:
    return "[" + ",".join(repr(x) for x in EMBEDDER.embed([text])[0]) + "]"


class Side:
    """One database of the pair: its DSN and a connection per role (superuser, alice, bob)."""

    def __init__(self, dsn: str, citus: bool):
        self.dsn = dsn
        self.citus = citus
        self.conns: dict[str, psycopg.Connection] = {}

    def __call__(self, who: str = "dba") -> psycopg.Connection:
        if who not in self.conns:
            kw = {} if who == "dba" else {"user": ROLES[who], "password": PASSWORD}
            self.conns[who] = psycopg.connect(self.dsn, autocommit=True, **kw)
        return self.conns[who]

    def close(self):
        for conn in self.conns.values():
            conn.close()


def load(side: Side) -> None:
    dba = side()
    for who, role in ROLES.items():
        dba.execute("SELECT dna.grant_app_role(%s)", (role,))
        dba.execute("INSERT INTO dna.dna_identities (role_name, oid) VALUES (%s, %s)", (role, f"{who}-oid"))
        dba.execute("INSERT INTO dna.dna_workspace_members (workspace, role_name) VALUES (%s, %s)",
                    (corpus.WORKSPACE, role))
    if side.citus:
        dba.execute("SELECT dna.sync_tenancy_maps()")
    with pydna.connect(side.dsn, embedder=EMBEDDER) as client:
        client.index(SCOPE, [d.record() for d in DOCS], batch_size=150)
        client.index(SCOPE, [d.record() for d in OVERLAY], tenant=corpus.WORKSPACE)
        client.index(OTHER, [d.record() for d in OTHER_DOCS])
    for who, texts in (("alice", ["alice keeps the fusion notebook", "alice prefers lexical recall first",
                                  "alice tenant password hint is a memory"]),
                       ("bob", ["bob reviews shard placement", "bob wants vector recall"])):
        conn = side(who)
        for i, text in enumerate(texts):
            conn.execute("SELECT dna.remember(%s, %s, name => %s, personal => true, now => %s, embedding => %s::vector, "
                         "model_id => %s)", (MEM, Jsonb({"summary": text}), f"{who}-own-{i}", NOW, vector(text), MODEL))
        conn.execute("SELECT dna.remember(%s, %s, name => %s, tenant => %s, now => %s, embedding => %s::vector, "
                     "model_id => %s)", (MEM, Jsonb({"summary": f"{who} shares a recall note"}), f"{who}-shared",
                                         corpus.WORKSPACE, NOW, vector(f"{who} shares a recall note"), MODEL))


@pytest.fixture(scope="module")
def roles(pg_server):
    admin = pg_server.dsn(pg_server.maintenance_db)
    with psycopg.connect(admin, autocommit=True) as conn:
        for role in ROLES.values():
            conn.execute(f"DROP ROLE IF EXISTS {role}")
            conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{PASSWORD}'")
    yield ROLES
    with psycopg.connect(admin, autocommit=True) as conn:
        for role in ROLES.values():
            conn.execute(f"DROP ROLE IF EXISTS {role}")


@pytest.fixture(scope="module")
def twins(cluster, citus_database, roles):
    """(single node, Citus), loaded the same way."""
    name = f"{citus_database.name}_single"[:63]
    with psycopg.connect(cluster.coordinator_dsn("postgres"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    single = Side(cluster.coordinator_dsn(name), citus=False)
    citus_database.reset()
    distributed = Side(citus_database.dsn, citus=True)
    try:
        migrate.upgrade(single.dsn)
        assert single().execute("SELECT dna.citus_version() IS NULL").fetchone()[0]
        for side in (single, distributed):
            load(side)
        yield single, distributed
    finally:
        for side in (single, distributed):
            for role in ROLES.values():
                side().execute("SELECT dna.revoke_app_role(%s)", (role,))
            side.close()
        with psycopg.connect(cluster.coordinator_dsn("postgres"), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# -- comparing ------------------------------------------------------------------------------------


def differences(a, b, path="") -> list[str]:
    """Where two answers differ: keys, lengths, values; floats within TOLERANCE (absolute, or relative
    to the larger magnitude); keys in VOLATILE are skipped."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{path}: keys {sorted(set(a) ^ set(b))}"] if set(a) != set(b) else []
        for key in sorted(set(a) & set(b)):
            if key not in VOLATILE:
                out += differences(a[key], b[key], f"{path}.{key}")
        return out
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items vs {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None or not math.isclose(float(a), float(b), rel_tol=TOLERANCE, abs_tol=TOLERANCE):
            return [f"{path}: {a!r} vs {b!r}"]
        return []
    return [] if a == b else [f"{path}: {a!r} vs {b!r}"]


def compare(twins, calls, who="dba") -> tuple[int, list[str]]:
    """Run every (label, sql, params) on both sides; (how many answers are equal, the differences)."""
    single, distributed = twins
    equal, found = 0, []
    for label, query, params in calls:
        answers = []
        for side in (single, distributed):
            cur = side(who).execute(query, params)
            cols = [c.name for c in cur.description]
            answers.append([dict(zip(cols, row)) for row in cur.fetchall()])
        diff = differences(*answers)
        if diff:
            found.append(f"{label}: {diff[:3]}")
        else:
            equal += 1
    return equal, found


def _report(name, equal, found, total):
    print(f"\n{name}: equal {equal}/{total}")
    assert not found and equal == total, "\n".join(found[:20])


# -- searches -----------------------------------------------------------------------------------

HIT = "kind, name, tenant, passage, score, similarity, lexical_score, rank_dense, rank_lexical"
SEARCHES = {
    "lexical": f"SELECT {HIT} FROM dna.search(%(scope)s, %(q)s, k => 10)",
    "lexical_k50": f"SELECT {HIT} FROM dna.search(%(scope)s, %(q)s, k => 50)",
    "bm25": "SELECT kind, name, tenant, score FROM dna.bm25(%(scope)s, %(q)s, %(model)s, k => 10)",
    "bm25_kinds_prefix": "SELECT kind, name, tenant, score FROM dna.bm25(%(scope)s, %(q)s, %(model)s, "
                         "kinds => ARRAY['Paper'], name_prefix => 'beta/', k => 10)",
    "hybrid": f"SELECT {HIT} FROM dna.search(%(scope)s, %(q)s, %(v)s::vector, exact => true)",
    "hybrid_kinds": f"SELECT {HIT} FROM dna.search(%(scope)s, %(q)s, %(v)s::vector, kinds => ARRAY['Paper'], exact => true)",
    "hybrid_prefix": f"SELECT {HIT} FROM dna.search(%(scope)s, %(q)s, %(v)s::vector, name_prefix => 'beta/', exact => true)",
    "hybrid_k50": f"SELECT {HIT} FROM dna.search(%(scope)s, %(q)s, %(v)s::vector, k => 50, exact => true)",
    "hybrid_tenant": f"SELECT {HIT} FROM dna.search(%(scope)s, %(q)s, %(v)s::vector, tenant => 'acme', exact => true)",
}


@pytest.mark.parametrize("variant", sorted(SEARCHES))
def test_searches_are_equal(twins, variant):
    calls = [(f"{variant} {q!r}", SEARCHES[variant], {"scope": SCOPE, "q": q, "v": vector(q), "model": MODEL})
             for q in QUERIES]
    calls += [(f"{variant} other {q!r}", SEARCHES[variant], {"scope": OTHER, "q": q, "v": vector(q), "model": MODEL})
              for q in QUERIES[:10]]
    equal, found = compare(twins, calls)
    _report(variant, equal, found, len(calls))


def test_searches_as_each_role_are_equal_and_private(twins):
    """alice and bob through row-level security: base, workspace and personal answers are equal, and
    neither sees the other's personal rows on either side."""
    calls = []
    for q in ("fusion notebook recall", "shard placement vector", "recall note", QUERIES[0]):
        v = vector(q)
        calls += [(f"{q!r} personal", "SELECT name, tenant, score FROM dna.search(%s, %s, %s::vector, personal => true, "
                   "exact => true)", (MEM, q, v)),
                  (f"{q!r} workspace", "SELECT name, tenant, score FROM dna.search(%s, %s, %s::vector, tenant => 'acme', "
                   "exact => true)", (MEM, q, v)),
                  (f"{q!r} recall", "SELECT dna.recall(%s, %s, %s::vector, personal => true, reconsolidate => false, "
                   "now => %s) AS r", (MEM, q, v, NOW + timedelta(days=1)))]
    total = 0
    for who in ("alice", "bob"):
        equal, found = compare(twins, calls, who=who)
        _report(f"as {who}", equal, found, len(calls))
        total += equal
        other = "bob" if who == "alice" else "alice"
        for side in twins:
            leaked = side(who).execute("SELECT count(*) FROM dna.dna_instances WHERE name LIKE %s",
                                       (f"{other}-own-%",)).fetchone()[0]
            assert leaked == 0, (who, side.citus)
            own = side(who).execute("SELECT count(*) FROM dna.dna_instances WHERE name LIKE %s",
                                    (f"{who}-own-%",)).fetchone()[0]
            assert own == (3 if who == "alice" else 2)


# -- memory: a script with history ------------------------------------------------------------------


def memory_script():
    """(label, sql, params): remember, restate, recall with reconsolidation, forget (superseded),
    revive, consolidate (dry run, then applied, months later), list, recall again."""
    steps = []
    mems = corpus.memories()
    for i, (name, spec) in enumerate(mems):
        text = spec["summary"]
        steps.append((f"remember {name}", "SELECT dna.remember(%s, %s, name => %s, now => %s, embedding => %s::vector, "
                      "model_id => %s) AS r", (MEM, Jsonb(spec), name, NOW + timedelta(hours=i), vector(text), MODEL)))
    for i in (2, 5, 9):
        name, spec = mems[i]
        restated = dict(spec, summary=spec["summary"] + " restated later")
        steps.append((f"restate {name}", "SELECT dna.remember(%s, %s, name => %s, now => %s, embedding => %s::vector, "
                      "model_id => %s) AS r", (MEM, Jsonb(restated), name, NOW + timedelta(days=3, hours=i),
                                               vector(restated["summary"]), MODEL)))
    for day, q in enumerate(("fusion rank", "memory vector", "lexical shard", "scope tenant", "passage recall")):
        steps.append((f"recall {q!r}", "SELECT dna.recall(%s, %s, %s::vector, k => 5, actor => 'eq', now => %s) AS r",
                      (MEM, q, vector(q), NOW + timedelta(days=5 + day))))
        steps.append((f"recall lexical {q!r}", "SELECT dna.recall(%s, %s, k => 8, now => %s) AS r",
                      (MEM, q, NOW + timedelta(days=5 + day, hours=1))))
    steps += [("forget mem-03", "SELECT dna.forget(%s, 'mem-03', superseded_by => 'mem-04', now => %s) AS r",
               (MEM, NOW + timedelta(days=12))),
              ("forget mem-07", "SELECT dna.forget(%s, 'mem-07', now => %s) AS r", (MEM, NOW + timedelta(days=13))),
              ("revive mem-07", "SELECT dna.revive(%s, 'mem-07', now => %s) AS r", (MEM, NOW + timedelta(days=14))),
              ("list", "SELECT dna.list_memories(%s, include_invalid => true, now => %s) AS r",
               (MEM, NOW + timedelta(days=15))),
              ("consolidate dry run", "SELECT dna.consolidate(%s, dry_run => true, now => %s) AS r",
               (MEM, NOW + timedelta(days=35))),
              ("consolidate", "SELECT dna.consolidate(%s, apply => true, now => %s) AS r", (MEM, NOW + timedelta(days=35))),
              ("list after", "SELECT dna.list_memories(%s, include_invalid => true, now => %s) AS r",
               (MEM, NOW + timedelta(days=36))),
              ("recall after", "SELECT dna.recall(%s, 'fusion memory', %s::vector, now => %s) AS r",
               (MEM, vector("fusion memory"), NOW + timedelta(days=37))),
              ("history", "SELECT name, version, op, spec FROM dna.dna_versions WHERE scope = %s AND tenant = '' "
               "ORDER BY name, version", (MEM,))]
    return steps


def test_memory_verbs_with_history_are_equal(twins):
    steps = memory_script()
    equal, found = compare(twins, steps)
    _report("memory", equal, found, len(steps))


# -- receipts, integrity ----------------------------------------------------------------------------


def test_receipts_and_replay_are_equal(twins):
    equal = total = 0
    found = []
    for q in QUERIES[:6]:
        answers = []
        for side in twins:
            receipt = side().execute("SELECT dna.take_receipt('search', %s, keep_query => true)",
                                     (Jsonb({"scope": SCOPE, "query": q, "k": 10}),)).fetchone()[0]
            replay = side().execute("SELECT dna.replay(%s)", (receipt["receipt_id"],)).fetchone()[0]
            assert replay["match"] is True, (side.citus, replay)
            answers.append({"hits": [(h["kind"], h["name"], h["tenant"], h["score"]) for h in receipt["hits"]],
                            "ids_then": replay["ids_then"], "ids_now": replay["ids_now"]})
        total += 1
        diff = differences(*answers)
        if diff:
            found.append(f"receipt {q!r}: {diff[:3]}")
        else:
            equal += 1
    _report("receipts", equal, found, total)


def test_verify_integrity_is_equal(twins):
    calls = [(f"verify {scope} {mode}", "SELECT dna.verify_integrity(%s, %s) AS r", (scope, mode))
             for scope in (SCOPE, OTHER, MEM) for mode in ("quick", "full")]
    single, distributed = twins
    for side in twins:
        for scope in (SCOPE, OTHER, MEM):
            assert side().execute("SELECT (dna.verify_integrity(%s, 'full')) ->> 'ok'", (scope,)).fetchone()[0] == "true"
    equal, found = compare(twins, calls)
    _report("verify_integrity", equal, found, len(calls))


def test_the_two_sides_hold_the_same_rows(twins):
    """The same documents, passages, lexical index and memory history on both sides."""
    tables = [t for (t,) in twins[0]().execute("SELECT tbl::text FROM dna.distribution_plan() "
                                               "WHERE placement = 'distributed' ORDER BY ord")]
    calls = [(t, f"SELECT count(*) AS n FROM {t}", ()) for t in tables]
    equal, found = compare(twins, calls)
    _report("row counts", equal, found, len(calls))
    assert twins[0]().execute("SELECT count(*) FROM dna.dna_search_docs_384 WHERE passage > 0").fetchone()[0] > 0
