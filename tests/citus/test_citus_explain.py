"""dna.search(..., explain => true) on a real coordinator (DNA_TEST_CITUS_DSN; deselected without it).
Before 0023 (topic citus_explain) every call with a query embedding failed there with XX000 "cannot switch
local execution status from local execution required to local execution disabled": the call is delegated
to the node holding the scope, which reads its shards locally, and Citus turns local execution off at any
EXPLAIN for the rest of the transaction. tests/test_search_explain.py's single-node tests run on the
distributed database, and the receipts (explain) of a few shapes of question equal a single node's, in
autocommit and inside a transaction that wrote the documents first."""
from __future__ import annotations

import psycopg
import pytest

from test_search_explain import (docs, test_the_dense_path_is_read_from_the_plan,  # noqa: F401
                                 test_the_receipt_names_floors_filters_and_degradation,
                                 test_the_terms_add_up_to_the_score_and_carry_the_lane_scores,
                                 test_without_explain_there_is_none_and_the_client_passes_it)

MODEL = "dna-fake-hash-v1"
WHEN = "2026-12-01T12:00:00Z"
TEXTS = [f"rank fusion explain text {i} " + ("apple " if i % 2 else "pear ") * (i % 4 + 1) for i in range(40)]
SHAPES = {
    "default": {},
    "exact": {"exact": True},
    "graph": {"exact": False},
    "kinds": {"kinds": ["Note"], "exact": False},
    "prefix": {"name_prefix": "d1"},
    "rrf": {"fusion": "rrf"},
    "tenant": {"tenant": "t1"},
}


def _load(conn) -> None:
    for i, text in enumerate(TEXTS):
        conn.execute("SELECT dna.index_document('ex', %s, %s, %s, dna.fake_embed(%s), %s, tenant => %s)",
                     ("Note" if i % 3 else "Doc", f"d{i:02d}", text, text, MODEL, "t1" if i % 5 == 0 else ""))


def _receipts(conn, shapes=tuple(SHAPES)) -> dict[str, list]:
    out = {}
    for shape, args in ((s, SHAPES[s]) for s in shapes):
        named = "".join(f", {a} => %({a})s" for a in args)
        out[shape] = [tuple(r) for r in conn.execute(
            "SELECT name, score, explain FROM dna.search('ex', 'rank fusion apple', dna.fake_embed('rank fusion apple'), "
            f"%(m)s, k => 5, valid_time => %(w)s, explain => true{named})", {"m": MODEL, "w": WHEN, **args})]
    return out


@pytest.fixture
def single(cluster, citus_database):
    """A single-node database on the coordinator (not distributed), migrated to head."""
    from pydna import migrate
    name = f"{citus_database.name}_single"[:63]
    with psycopg.connect(cluster.coordinator_dsn("postgres"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    dsn = cluster.coordinator_dsn(name)
    migrate.upgrade(dsn)
    yield dsn
    with psycopg.connect(cluster.coordinator_dsn("postgres"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_explain_answers_as_on_one_node(dna_dsn, single):
    with psycopg.connect(single, autocommit=True) as conn:
        _load(conn)
        expected = _receipts(conn)
    with psycopg.connect(dna_dsn, autocommit=True) as conn:
        _load(conn)
        got = _receipts(conn)
    assert {s: [r[2]["answer"]["dense"]["path"] for r in rows[:1]] for s, rows in expected.items()} == \
        {"default": ["exact scan"], "exact": ["exact scan"], "graph": ["hnsw"], "kinds": ["hnsw"],
         "prefix": ["exact scan"], "rrf": ["exact scan"], "tenant": ["exact scan"]}
    for shape in SHAPES:
        assert expected[shape], shape
        assert got[shape] == expected[shape], shape


def test_explain_inside_a_transaction_that_wrote_the_scope(dna_dsn, single):
    """The documents written and searched in one transaction (the writes executed on the scope's shards).
    Without the tenant shape: dna.search(tenant => ...) inside a transaction that wrote the scope fails on
    Citus with or without explain ("cannot execute a distributed query from a query on a shard", in
    dna.bm25_stats), another matter than explain's."""
    answers = []
    for dsn in (single, dna_dsn):
        with psycopg.connect(dsn) as conn:
            with conn.transaction():
                _load(conn)
                answers.append(_receipts(conn, [s for s in SHAPES if s != "tenant"]))
                conn.execute("SELECT dna.index_document('ex', 'Doc', 'after', 'written after the explain', "
                             "dna.fake_embed('after'), %s)", (MODEL,))
            assert conn.execute("SELECT count(*) FROM dna.search('ex', 'written after', NULL, %s)",
                                (MODEL,)).fetchone()[0] == 1
    assert answers[1] == answers[0]
