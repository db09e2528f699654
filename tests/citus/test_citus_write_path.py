"""Every writer of the search tables on a real Citus cluster (DNA_TEST_CITUS_DSN; deselected without it),
as the superuser and as a plain application role, against a single-node twin on the same rows.

After ``dna.distribute()``: ``dna.index_document`` (delegated, and inside a transaction block, where it
runs on the coordinator: a new document's INSERT and a re-index's UPDATE), ``dna.index_documents`` (a bulk statement of its own segment, passages and
their deletion), ``Client.index`` (COPY + ``dna.index_staged``), ``dna.remember`` / ``forget`` /
``revive``, ``dna.redact`` (the superuser), ``dna.delete_document``, plain INSERT / UPDATE / DELETE,
``dna.bm25_compact`` (seal, merge with tombstones, full merge) and a workspace tenant's rows. The twin is
a database on the coordinator's server without the citus extension, migrated to head. Then ``dna.search`` (lexical and hybrid),
``dna.bm25`` (exhaustive and budgeted), ``dna.recall`` and the partition statistics answer the same
names in the same order with scores within 1e-9, and ``dna.verify_integrity(scope, 'full')`` is clean
on both (the vectors check reports the same rows on both). The module's distributed database
(tests/citus/conftest.py), emptied once."""
from __future__ import annotations

import os

import psycopg
import pytest
from psycopg.conninfo import make_conninfo
from psycopg.types.json import Jsonb

import pydna
from pydna import FakeEmbeddingProvider, Record, migrate
from test_bulk_segments import documents


MODEL = "dna-fake-hash-v1"
NOW = "2026-06-01T12:00:00Z"
ROLE = f"dna_write_app_{os.getpid()}"
QUERIES = ["protein expression in cancer cells", "gene mutation risk", "rare0042 cell", "patient study",
           "the office is in lisbon", "rank fusion of lanes"]


@pytest.fixture(scope="module")
def worlds(cluster, citus_database, pg_server):
    """(superuser, application role) DSNs on the module's distributed database and on a single-node twin:
    a database on the coordinator's server without the citus extension, migrated to head."""
    twin = f"{citus_database.name}_single"[:63]
    with psycopg.connect(cluster.coordinator_dsn("postgres"), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{twin}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{twin}"')
    with psycopg.connect(pg_server.dsn(pg_server.maintenance_db), autocommit=True) as admin:
        admin.execute(f'DROP ROLE IF EXISTS "{ROLE}"')
        admin.execute(f'CREATE ROLE "{ROLE}" LOGIN')            # through the coordinator: on every node
    citus_database.reset()
    sides = {"citus": citus_database.dsn, "twin": cluster.coordinator_dsn(twin)}
    try:
        migrate.upgrade(sides["twin"])
        for dsn in sides.values():
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute("SELECT dna.grant_app_role(%s)", (ROLE,))
                conn.execute("INSERT INTO dna.dna_workspace_members (workspace, role_name) VALUES ('ws-a', %s)", (ROLE,))
        with psycopg.connect(sides["citus"], autocommit=True) as conn:
            conn.execute("SELECT dna.sync_tenancy_maps()")
            assert conn.execute("SELECT dna.distribution() -> 'distributed'").fetchone()[0] is True
        with psycopg.connect(sides["twin"], autocommit=True) as conn:
            assert conn.execute("SELECT dna.citus_version() IS NULL").fetchone()[0]
        yield {k: (dsn, make_conninfo(dsn, user=ROLE)) for k, dsn in sides.items()}
    finally:
        for dsn in sides.values():
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute("SELECT dna.revoke_app_role(%s)", (ROLE,))
        with psycopg.connect(cluster.coordinator_dsn("postgres"), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{twin}" WITH (FORCE)')
        with psycopg.connect(pg_server.dsn(pg_server.maintenance_db), autocommit=True) as admin:
            admin.execute(f'DROP ROLE IF EXISTS "{ROLE}"')


def _index_many(conn, scope, docs, **kw):
    kinds, names, bodies = map(list, zip(*docs))
    extra = "".join(f", {k} => %({k})s" for k in kw)
    return conn.execute(f"SELECT count(*) FROM dna.index_documents(%(s)s, %(k)s, %(n)s, %(b)s, NULL, %(m)s{extra})",
                        {"s": scope, "k": kinds, "n": names, "b": bodies, "m": MODEL, **kw}).fetchone()[0]


def _remember(conn, scope, name, summary):
    return conn.execute("SELECT dna.remember(%s, %s, name => %s, now => %s, embedding => dna.fake_embed(%s))",
                        (scope, Jsonb({"summary": summary}), name, NOW, summary)).fetchone()[0]


def write_all(dsn: str, scope: str) -> None:
    """The same writes, in the same order, through every writer of the search tables."""
    docs = documents(1600)
    with psycopg.connect(dsn, autocommit=True) as conn:
        for i, (_k, name, body) in enumerate(docs[:30]):            # one call each: delegated on Citus
            conn.execute("SELECT dna.index_document(%s, 'Doc', %s, %s, dna.fake_embed(%s), %s)",
                         (scope, f"one-{name}", body, body, MODEL))
        with conn.transaction():                                    # a transaction block: the coordinator's
            for _k, name, body in docs[30:35]:
                conn.execute("SELECT dna.index_document(%s, 'Doc', %s, %s, NULL, %s)", (scope, f"txn-{name}", body, MODEL))
            # a re-index there: the UPDATE of the stored row (0022 topic one_upkeep), routed to its shard
            conn.execute("SELECT dna.index_document(%s, 'Doc', %s, 'cancer mutation, rewritten in a transaction block', "
                         "NULL, %s)", (scope, f"one-{docs[0][1]}", MODEL))
        assert _index_many(conn, scope, docs[100:1300]) == 1200     # a bulk statement: a segment
        _index_many(conn, scope, docs[1300:1400], tenant="ws-a")
        _index_many(conn, scope, [("Doc", "p1", "rank fusion of lanes, part one"), ("Doc", "p1", "part two of it"),
                                  ("Doc", "p1", "part three"), ("Doc", "p2", "passages of another document"),
                                  ("Doc", "p2", "its second passage")], passages=[0, 1, 2, 0, 1])
        _index_many(conn, scope, [("Doc", "p1", "rank fusion of lanes, in one passage now")], passages=[0])
        conn.execute("SELECT dna.index_document(%s, 'Doc', 'p2', 'passages no more: the whole text', NULL, %s)",
                     (scope, MODEL))
        _remember(conn, scope, "m1", "the office is in lisbon")
        _remember(conn, scope, "m2", "deploys happen on fridays")
        with conn.transaction():
            _remember(conn, scope, "m3", "the cell study found a gene mutation")
        conn.execute("SELECT dna.forget(%s, 'm2', now => '2026-06-02T00:00:00Z')", (scope,))
        conn.execute("SELECT dna.forget(%s, 'm3', now => '2026-06-02T00:00:00Z')", (scope,))
        conn.execute("SELECT dna.revive(%s, 'm3', now => '2026-06-03T00:00:00Z')", (scope,))
        _remember(conn, scope, "m1", "the office moved from lisbon to porto")
        _remember(conn, scope, "m4", "a memory to erase")
        if conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()[0]:
            # dna.redact: its search rows go and the partition is fully merged (a nested compaction)
            conn.execute("SELECT dna.redact(%s, 'm4', 'test erasure')", (scope,))
        for kind, name, _b in (docs[100], docs[777]):               # tombstones in the segment
            conn.execute("SELECT dna.delete_document(%s, %s, %s)", (scope, kind, name))
        conn.execute("SELECT dna.delete_document(%s, 'Doc', %s)", (scope, f"one-{docs[5][1]}"))   # a memtable row
        conn.execute("INSERT INTO dna.dna_search_docs_384 (scope, kind, name, model_id, text_hash, body) VALUES "
                     "(%s, 'Note', 'raw1', %s, 'r1', 'protein cell study by plain sql'), "
                     "(%s, 'Note', 'raw2', %s, 'r2', 'gene risk by plain sql')", (scope, MODEL, scope, MODEL))
        conn.execute("UPDATE dna.dna_search_docs_384 SET body = 'patient study, rewritten by plain sql', text_hash = 'r3' "
                     "WHERE scope = %s AND name = %s", (scope, docs[200][1]))
        conn.execute("DELETE FROM dna.dna_search_docs_384 WHERE scope = %s AND name = %s", (scope, docs[201][1]))
        conn.execute("SELECT dna.bm25_compact(%s)", (scope,))
    with pydna.connect(dsn, embedder=FakeEmbeddingProvider()) as client:   # COPY + dna.index_staged, then compacts
        client.index(scope, [Record("Doc", f"cl-{n}", b) for _k, n, b in docs[1400:1600]], passages=False)
    with psycopg.connect(dsn, autocommit=True) as conn:
        _index_many(conn, scope, [(k, n, "cancer mutation mutation") for k, n, _b in docs[300:340]])
        conn.execute("SELECT dna.bm25_compact(%s, full_merge => true)", (scope,))
        _index_many(conn, scope, [("Doc", "late", "rank fusion of lanes, written after the merge")])


def answers(dsn: str, scope: str) -> dict:
    out = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for q in QUERIES:
            out[("lexical", q)] = conn.execute("SELECT kind, name, tenant, score FROM dna.search(%s, %s, NULL, %s, k => 20)",
                                               (scope, q, MODEL)).fetchall()
            out[("hybrid", q)] = conn.execute("SELECT kind, name, tenant, score FROM dna.search(%s, %s, dna.fake_embed(%s), "
                                              "%s, k => 20)", (scope, q, q, MODEL)).fetchall()
            out[("ws-a", q)] = conn.execute("SELECT kind, name, tenant, score FROM dna.search(%s, %s, NULL, %s, k => 20, "
                                            "tenant => 'ws-a')", (scope, q, MODEL)).fetchall() if "app" in scope else []
            for exact in (True, False):
                out[("bm25", q, exact)] = conn.execute(
                    "SELECT kind, name, tenant, score FROM dna.bm25(%s, %s, %s, k => 20, exact => %s)",
                    (scope, q, MODEL, exact)).fetchall()
            out[("recall", q)] = [(h["name"], h["score"]) for h in conn.execute(
                "SELECT dna.recall(%s, %s, now => '2026-06-04T00:00:00Z', reconsolidate => false) -> 'hits'",
                (scope, q)).fetchone()[0]]
        out["stats"] = conn.execute("SELECT n_docs, total_len FROM dna.bm25_partition_stats(%s, %s)", (scope, MODEL)).fetchone()
        out["rows"] = conn.execute("SELECT count(*), count(*) FILTER (WHERE valid_at IS NOT NULL) "
                                   "FROM dna.dna_search_docs_384 WHERE scope = %s", (scope,)).fetchone()
        report = conn.execute("SELECT dna.verify_integrity(%s, 'full')", (scope,)).fetchone()[0]
        # the workload mixes Docs with and without vectors (lexical-only bulk statements): only the
        # vectors check reports those, the same on both
        assert all(c["count"] == 0 for name, c in report["checks"].items() if name != "vectors"), report
        out["vectors"] = report["checks"]["vectors"]["count"]
    return out


def assert_same(got: dict, want: dict) -> int:
    """Names (kind, name, tenant) in the same order, scores within 1e-9; the number of calls compared."""
    assert got.keys() == want.keys()
    for key, rows in want.items():
        other = got[key]
        if key in ("stats", "rows", "vectors"):
            assert other == rows, key
            continue
        assert [r[:-1] for r in other] == [r[:-1] for r in rows], key
        assert all(abs(a[-1] - b[-1]) <= 1e-9 for a, b in zip(other, rows)), key
    return len(want)


@pytest.mark.parametrize("who", ["superuser", "app_role"])
def test_every_writer_works_on_citus_and_answers_as_one_node(worlds, who):
    pick = 0 if who == "superuser" else 1
    scope = f"w-{'su' if pick == 0 else 'app'}"
    write_all(worlds["citus"][pick], scope)
    write_all(worlds["twin"][pick], scope)
    want = answers(worlds["twin"][pick], scope)
    assert want[("lexical", QUERIES[0])] and want[("hybrid", QUERIES[0])] and want[("recall", QUERIES[4])]
    assert assert_same(answers(worlds["citus"][pick], scope), want) == len(want)


def test_the_writes_ran_on_the_shard(worlds):
    """The delegated writes drew their doc_ids on a worker (2^48 · group + …), the ones in a transaction
    block on the coordinator (1 …); the BM25 index holds both (a full merge writes a segment per node range)
    and every BM25 write of a scope is on its shard's node."""
    with psycopg.connect(worlds["citus"][0], autocommit=True) as conn:
        ids = dict(conn.execute("SELECT left(name, 4), min(doc_id) FROM dna.dna_search_docs_384 WHERE scope = 'w-su' "
                                "AND (name LIKE 'one-%' OR name LIKE 'txn-%') GROUP BY 1").fetchall())
        assert ids["one-"] >= 1 << 48 > ids["txn-"]
        segs = conn.execute("SELECT count(*) FROM dna.dna_bm25_segments WHERE scope = 'w-su' AND tenant = ''").fetchone()[0]
        assert segs == 2                                            # one per range of doc_ids
        delegated = {f["function"].split("(")[0] for f in conn.execute("SELECT dna.distribution() -> 'functions'").fetchone()[0]
                     if f["delegated"]}
        assert {"dna.index_document", "dna.index_documents", "dna.delete_document", "dna.bm25_compact_scope"} <= delegated
        assert conn.execute("SELECT to_regclass('dna.dna_bm25_seg_id_seq')").fetchone()[0] is None
        # every BM25 table's rows of the scope are on the shard the scope's documents are on
        nodes = conn.execute("""
            SELECT count(DISTINCT p.nodeport) FROM unnest(ARRAY['dna.dna_search_docs_384', 'dna.dna_bm25_docs',
                   'dna.dna_bm25_chunks', 'dna.dna_bm25_segments', 'dna.dna_bm25_forward']) AS t (name),
                   LATERAL (SELECT get_shard_id_for_distribution_column(t.name, 'w-su') AS shard) AS s
            JOIN pg_dist_shard_placement AS p ON p.shardid = s.shard""").fetchone()[0]
        assert nodes == 1


@pytest.mark.parametrize("who", ["superuser", "app_role"])
def test_metadata_writes_and_filters_on_citus_as_one_node(worlds, who):
    """Client.index with each record's metadata (dna.set_document_metadata, an UPDATE of the width table's
    rows on the shard), then dna.set_document_metadata again by SQL: a filtered dna.search answers the
    same names in the same order on Citus and on the single node, and the valid_at trigger stood aside
    (no memory Kind: valid_at stays NULL)."""
    pick = 0 if who == "superuser" else 1
    scope = f"meta-{'su' if pick == 0 else 'app'}"
    records = [Record("Doc", f"md-{i}", f"rank fusion of lanes, document {i}", metadata={"team": "ab"[i % 2], "n": i})
               for i in range(12)]
    got = {}
    for side in ("citus", "twin"):
        dsn = worlds[side][pick]
        with pydna.connect(dsn, embedder=FakeEmbeddingProvider()) as client:
            client.index(scope, records, passages=False)
        with psycopg.connect(dsn, autocommit=True) as conn:
            changed = conn.execute("SELECT dna.set_document_metadata(%s, ARRAY['Doc'], ARRAY['md-0'], "
                                   "ARRAY['{\"team\": \"c\", \"n\": 0}']::jsonb[])", (scope,)).fetchone()[0]
            assert changed == 1
            got[side] = [conn.execute("SELECT kind, name, score FROM dna.search(%s, 'rank fusion', NULL, %s, k => 20, "
                                      "filter => %s)", (scope, MODEL, Jsonb(f))).fetchall()
                         for f in ({"team": "a"}, {"team": "c"}, {"n": {"gte": 6}})]
            assert conn.execute("SELECT count(*) FROM dna.dna_search_docs_384 WHERE scope = %s AND valid_at IS NOT NULL",
                                (scope,)).fetchone()[0] == 0
    assert [len(r) for r in got["twin"]] == [5, 1, 6]
    assert [[r[:2] for r in rows] for rows in got["citus"]] == [[r[:2] for r in rows] for rows in got["twin"]]
