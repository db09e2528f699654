"""One BM25 upkeep per writing statement (issue 26 item 2, revision 0022 topic one_upkeep).

``dna.index_document`` (and ``dna.remember``, which indexes through it) writes a document with one
statement — an UPDATE of the stored row or an INSERT of a new one — so the width table's statement
trigger ``dna.bm25_sync`` runs once per call, and with it one ``dna.bm25_index_docs`` (one memtable bound
check, one statistics check) or one removal and one indexing for changed text. The upsert it replaced
(INSERT … ON CONFLICT DO UPDATE) fired both the INSERT and the UPDATE statement triggers: two upkeeps per
call. Counted with ``track_functions`` (``pg_stat_xact_user_functions``), through plain SQL and through
the Python client; the answers stay those of the same rows written by plain SQL."""
from __future__ import annotations

import pytest
from psycopg.types.json import Jsonb

MODEL = "dna-fake-hash-v1"
UPKEEP = ("bm25_sync", "bm25_index_docs", "bm25_remove_docs", "bm25_bound_memtable", "bm25_keep_statistics")
QUERIES = ["rank fusion of lexical lanes", "dense vectors", "office lisbon", "porto"]


def counts(conn) -> dict[str, int]:
    """Calls so far in this transaction of the BM25 upkeep's functions (track_functions = pl)."""
    return {f: n for f, n in conn.execute("SELECT funcname, calls FROM pg_stat_xact_user_functions "
                                          "WHERE schemaname = 'dna' AND funcname = ANY (%s)", (list(UPKEEP),))}


def delta(conn, statement: str, params=()) -> dict[str, int]:
    """The upkeep calls of one statement (inside the caller's transaction)."""
    before = counts(conn)
    conn.execute(statement, params)
    after = counts(conn)
    return {f: after[f] - before.get(f, 0) for f in after if after[f] != before.get(f, 0)}


@pytest.fixture
def tracked(sql):
    sql.execute("BEGIN")
    sql.execute("SET LOCAL track_functions = 'pl'")
    yield sql
    sql.execute("COMMIT")


def answers(conn, scope):
    out = [conn.execute("SELECT n_docs, total_len FROM dna.bm25_partition_stats(%s, %s)", (scope, MODEL)).fetchone()]
    for q in QUERIES:
        for exact in (True, False):
            out.append(conn.execute("SELECT name, round(score::numeric, 9) FROM dna.bm25(%s, %s, %s, k => 10, "
                                    "exact => %s)", (scope, q, MODEL, exact)).fetchall())
    return out


INDEX = "SELECT dna.index_document('u', 'Doc', %s, %s, %s::vector, %s)"


def test_a_new_document_is_one_upkeep(tracked):
    got = delta(tracked, INDEX, ("a", "rank fusion of lexical lanes", None, MODEL))
    assert got["bm25_sync"] == 1 and got["bm25_index_docs"] == 1 and got["bm25_bound_memtable"] == 1
    assert "bm25_remove_docs" not in got
    # twice: the BM25 tables' (bm25_index_docs) and the search table's own (bm25_sync, revision 0024)
    assert got["bm25_keep_statistics"] == 2


def test_a_set_based_statement_runs_one_upkeep_per_document(tracked):
    names = [f"d{i}" for i in range(25)]
    got = delta(tracked, "SELECT count(dna.index_document('u', 'Doc', n, 'lexical lane note ' || n, NULL, %s)) "
                         "FROM unnest(%s::text[]) AS n", (MODEL, names))
    assert got == {"bm25_sync": 25, "bm25_index_docs": 25, "bm25_bound_memtable": 25, "bm25_keep_statistics": 50}


def test_a_reindex_with_new_text_is_one_upkeep(tracked):
    tracked.execute(INDEX, ("a", "rank fusion of lexical lanes", None, MODEL))
    got = delta(tracked, INDEX, ("a", "rank fusion of dense vectors", None, MODEL))
    # one UPDATE: its trigger removes the old text and indexes the new, once each
    assert got == {"bm25_sync": 1, "bm25_remove_docs": 1, "bm25_index_docs": 1, "bm25_bound_memtable": 1,
                   "bm25_keep_statistics": 3}
    assert delta(tracked, INDEX, ("a", "rank fusion of dense vectors", None, MODEL)) == {}     # unchanged
    # the same text with a vector now: one UPDATE, whose tsvector is the same: nothing to re-index
    vec = tracked.execute("SELECT dna.fake_embed('rank fusion of dense vectors')::text").fetchone()[0]
    got = delta(tracked, INDEX, ("a", "rank fusion of dense vectors", vec, MODEL))
    assert got == {"bm25_sync": 1}
    row = tracked.execute("SELECT embedding IS NOT NULL, updated_at = now() FROM dna.dna_search_docs_384 "
                          "WHERE scope = 'u' AND name = 'a'").fetchone()
    assert row == (True, True)


def test_remember_and_remember_again_are_one_upkeep_each(tracked):
    spec = Jsonb({"summary": "the office is in lisbon"})
    got = delta(tracked, "SELECT dna.remember('u', %s, name => 'm1', now => '2026-06-01T12:00:00Z')", (spec,))
    assert got["bm25_sync"] == 1 and got["bm25_index_docs"] == 1 and "bm25_remove_docs" not in got
    got = delta(tracked, "SELECT dna.remember('u', %s, name => 'm1', now => '2026-06-02T12:00:00Z')",
                (Jsonb({"summary": "the office moved to porto"}),))
    assert got["bm25_sync"] == 1 and got["bm25_index_docs"] == 1 and got["bm25_remove_docs"] == 1


def test_the_verbs_answer_as_plain_sql_writes_of_the_same_rows(sql):
    rows = [("a", "rank fusion of lexical lanes"), ("b", "dense vectors in lisbon"), ("c", "office porto")]
    for name, body in rows:
        sql.execute(INDEX, (name, body, None, MODEL))
        sql.execute("INSERT INTO dna.dna_search_docs_384 (scope, kind, name, model_id, text_hash, body) "
                    "VALUES ('plain', 'Doc', %s, %s, dna.text_hash(NULL, %s), %s)", (name, MODEL, body, body))
    sql.execute(INDEX, ("a", "rank fusion of dense vectors, lisbon office", None, MODEL))
    sql.execute("UPDATE dna.dna_search_docs_384 SET body = 'rank fusion of dense vectors, lisbon office', "
                "text_hash = 'x' WHERE scope = 'plain' AND name = 'a'")
    assert answers(sql, "u") == answers(sql, "plain")
    for scope in ("u", "plain"):
        report = sql.execute("SELECT dna.verify_integrity(%s, 'full')", (scope,)).fetchone()[0]
        assert report["ok"], report


def test_the_client_indexes_a_memory_with_one_upkeep(client, sql):
    with client.conn.transaction():                   # pg_stat_xact_… counts this transaction's calls
        client.conn.execute("SET LOCAL track_functions = 'pl'")
        base = counts(client.conn)            # (counts not yet flushed may hold earlier transactions')
        client.memory.remember("cl", "deploys happen on fridays", name="m")
        first = counts(client.conn)
        client.memory.remember("cl", "deploys happen on mondays", name="m")
        second = {f: n - base.get(f, 0) for f, n in counts(client.conn).items()}
    assert first["bm25_sync"] - base.get("bm25_sync", 0) == 1 and second["bm25_sync"] == 2
    assert second.get("bm25_remove_docs") == 1 and second["bm25_index_docs"] == 2
    hits = sql.execute("SELECT name FROM dna.bm25('cl', 'mondays', %s)", (client.model_id,)).fetchall()
    assert hits == [("m",)]


def test_a_writer_that_lost_the_race_for_a_new_document_upserts_it(dna_dsn, sql):
    """Two writers of one new document: the second's probe saw no row, its INSERT … DO NOTHING waits for
    the first and then writes nothing, so it falls back to the upsert: its text wins, indexed once."""
    import threading

    import psycopg

    with psycopg.connect(dna_dsn) as first, psycopg.connect(dna_dsn, autocommit=True) as second:
        first.execute(INDEX, ("race", "the first writer's text about lisbon", None, MODEL))
        pid = second.info.backend_pid
        out: dict = {}

        def write():
            try:
                out["r"] = second.execute(INDEX, ("race", "the second writer's text about porto", None, MODEL)).fetchone()[0]
            except Exception as e:  # noqa: BLE001 - handed to the test
                out["e"] = e

        t = threading.Thread(target=write)
        t.start()
        for _ in range(600):                                   # until the second waits for the first's row lock
            if sql.execute("SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()[0]:
                break
            t.join(0.05)
        else:
            pytest.fail("the second writer never waited for the first")
        first.commit()
        t.join(30)
        assert "e" not in out, out.get("e")
        assert out["r"]["action"] == "inserted"               # what its probe found: no row
    assert sql.execute("SELECT body FROM dna.dna_search_docs_384 WHERE scope = 'u' AND name = 'race'").fetchone()[0] \
        == "the second writer's text about porto"
    assert sql.execute("SELECT array_agg(name) FROM dna.bm25('u', 'porto', %s)", (MODEL,)).fetchone()[0] == ["race"]
    assert sql.execute("SELECT array_agg(name) FROM dna.bm25('u', 'lisbon', %s)", (MODEL,)).fetchone()[0] is None
    report = sql.execute("SELECT dna.verify_integrity('u', 'full')").fetchone()[0]
    assert report["ok"], report
