"""The write path of revision 0019 (topic write_path): the BM25 index is kept by the width tables'
statement triggers for every writer — the verbs and plain INSERT / UPDATE / DELETE alike — with one
upkeep per statement that wrote rows; segment ids come from their partition (no sequence); the
valid_at row trigger reads a setting in its WHEN clause, no table, and memory rows carry their
record's valid_at whoever writes them. Plain SQL through the ``sql`` fixture (a superuser) and an
application role. Citus: tests/citus/test_citus_write_path.py."""
from __future__ import annotations

import psycopg
import pytest
from psycopg.types.json import Jsonb

from test_bulk_ingest import app_role  # noqa: F401 - the fixture
from test_bulk_segments import ORACLE, STORED, documents

MODEL = "dna-fake-hash-v1"
NOW = "2026-06-01T12:00:00Z"
QUERIES = ["protein expression in cancer cells", "gene mutation risk", "rare0042 cell", "patient study"]


def calls(conn) -> dict[str, int]:
    """Calls of the write path's functions so far in this transaction (track_functions = pl)."""
    return dict(conn.execute("SELECT funcname, calls FROM pg_stat_xact_user_functions WHERE schemaname = 'dna' "
                             "AND funcname IN ('bm25_sync', 'bm25_index_docs', 'bm25_remove_docs', "
                             "'search_docs_valid_at')").fetchall())


def index_many(conn, scope, docs, **kw):
    kinds, names, bodies = map(list, zip(*docs))
    extra = "".join(f", {k} => %({k})s" for k in kw)
    return conn.execute(f"SELECT count(*) FROM dna.index_documents(%(s)s, %(k)s, %(n)s, %(b)s, NULL, %(m)s{extra})",
                        {"s": scope, "k": kinds, "n": names, "b": bodies, "m": MODEL, **kw}).fetchone()[0]


def answers(conn, scope, tenant=""):
    out = {"stats": conn.execute("SELECT n_docs, total_len FROM dna.bm25_partition_stats(%s, %s, %s)",
                                 (scope, MODEL, tenant)).fetchone()}
    for q in QUERIES:
        for exact in (True, False):
            out[(q, exact)] = conn.execute("SELECT kind, name, round(score::numeric, 9) FROM dna.bm25(%s, %s, %s, %s, "
                                           "k => 10, exact => %s)", (scope, q, MODEL, tenant, exact)).fetchall()
    return out


def integrity_ok(conn, scope):
    report = conn.execute("SELECT dna.verify_integrity(%s, 'full')", (scope,)).fetchone()[0]
    assert report["ok"], report
    return report


# -- one upkeep per statement ----------------------------------------------------------------------


def test_index_document_runs_one_bm25_upkeep(sql):
    sql.execute("BEGIN")
    sql.execute("SET LOCAL track_functions = 'pl'")
    sql.execute("SELECT dna.index_document('w', 'Doc', 'a', 'rank fusion of lexical lanes', NULL, %s)", (MODEL,))
    # one writing statement (an INSERT: 0022 topic one_upkeep; the upsert fired INSERT and UPDATE triggers)
    assert calls(sql) == {"bm25_sync": 1, "bm25_index_docs": 1}
    sql.execute("SELECT dna.index_document('w', 'Doc', 'a', 'rank fusion of dense lanes', NULL, %s)", (MODEL,))
    assert calls(sql) == {"bm25_sync": 2, "bm25_index_docs": 2, "bm25_remove_docs": 1}     # an UPDATE
    sql.execute("SELECT dna.index_document('w', 'Doc', 'a', 'rank fusion of dense lanes', NULL, %s)", (MODEL,))
    assert calls(sql) == {"bm25_sync": 2, "bm25_index_docs": 2, "bm25_remove_docs": 1}     # unchanged: no write
    sql.execute("COMMIT")
    integrity_ok(sql, "w")


def test_passages_indexed_whole_again_go_in_the_same_call(sql):
    index_many(sql, "w", [("Doc", "p", "first part of it"), ("Doc", "p", "second part of it"),
                          ("Doc", "p", "third part")], passages=[0, 1, 2])
    sql.execute("BEGIN")
    sql.execute("SET LOCAL track_functions = 'pl'")
    sql.execute("SELECT dna.index_document('w', 'Doc', 'p', 'the whole document now', NULL, %s)", (MODEL,))
    # the passage DELETE runs now (a statement of its own: its trigger removes p1 and p2), then the UPDATE
    assert calls(sql) == {"bm25_sync": 2, "bm25_index_docs": 1, "bm25_remove_docs": 2}
    sql.execute("COMMIT")
    assert sql.execute("SELECT array_agg(passage) FROM dna.dna_search_docs_384 WHERE scope = 'w' AND name = 'p'"
                       ).fetchone()[0] == [0]
    integrity_ok(sql, "w")


def test_index_documents_runs_one_upkeep_per_event_and_deletes_passages_by_key(sql):
    index_many(sql, "w", [("Doc", "a", "alpha one"), ("Doc", "a", "alpha two"), ("Doc", "a", "alpha three"),
                          ("Doc", "b", "beta")], passages=[0, 1, 2, 0])
    sql.execute("BEGIN")
    sql.execute("SET LOCAL track_functions = 'pl'")
    got = sql.execute("SELECT ord, name, action, passage FROM dna.index_documents('w', ARRAY['Doc', 'Doc'], "
                      "ARRAY['a', 'b'], ARRAY['alpha again', 'beta'], NULL, %s, passages => ARRAY[0, 0])",
                      (MODEL,)).fetchall()
    assert got == [(1, "a", "updated", 0), (2, "b", "unchanged", 0), (None, "a", "deleted", 1),
                   (None, "a", "deleted", 2)]
    # one statement: its INSERT, UPDATE and DELETE triggers fire once each
    assert calls(sql) == {"bm25_sync": 3, "bm25_index_docs": 1, "bm25_remove_docs": 2}
    sql.execute("COMMIT")
    integrity_ok(sql, "w")


# -- plain SQL writers ------------------------------------------------------------------------------


def test_plain_sql_writes_are_indexed_like_the_verbs(sql):
    docs = documents(1300)                                     # >= dna.bm25_bulk_threshold(): a segment
    index_many(sql, "verbs", docs)
    kinds, names, bodies = map(list, zip(*docs))
    sql.execute("INSERT INTO dna.dna_search_docs_384 (scope, kind, name, model_id, text_hash, body) "
                "SELECT 'plain', k, n, %s, dna.text_hash(NULL, b), b FROM unnest(%s::text[], %s::text[], %s::text[]) "
                "AS u (k, n, b)", (MODEL, kinds, names, bodies))
    assert answers(sql, "plain") == answers(sql, "verbs")
    seg = sql.execute("SELECT seg_id FROM dna.dna_bm25_segments WHERE scope = 'plain'").fetchone()[0]
    assert sorted(sql.execute(STORED, ("plain", seg)).fetchall()) == sorted(sql.execute(ORACLE, ("plain", seg)).fetchall())
    # a few rows at a time (memtable), an UPDATE of text and of Kind, a DELETE (tombstones in the segment)
    for scope in ("verbs", "plain"):
        if scope == "verbs":
            index_many(sql, scope, [("Doc", "new1", "protein cell study"), ("Doc", "new2", "gene risk")])
            index_many(sql, scope, [(k, n, "cancer mutation mutation") for k, n, _b in docs[:40]])
            sql.execute("SELECT dna.delete_document(%s, %s, %s)", (scope, docs[50][0], docs[50][1]))
        else:
            sql.execute("INSERT INTO dna.dna_search_docs_384 (scope, kind, name, model_id, text_hash, body) VALUES "
                        "('plain', 'Doc', 'new1', %s, 'h1', 'protein cell study'), "
                        "('plain', 'Doc', 'new2', %s, 'h2', 'gene risk')", (MODEL, MODEL))
            sql.execute("UPDATE dna.dna_search_docs_384 SET body = 'cancer mutation mutation', text_hash = 'x' "
                        "WHERE scope = 'plain' AND name = ANY (%s)", ([n for _k, n, _b in docs[:40]],))
            sql.execute("DELETE FROM dna.dna_search_docs_384 WHERE scope = 'plain' AND name = %s", (docs[50][1],))
    assert answers(sql, "plain") == answers(sql, "verbs")
    sql.execute("UPDATE dna.dna_search_docs_384 SET kind = 'Note' WHERE scope IN ('plain', 'verbs') AND name = 'new1'")
    for kinds, found in ((["Note"], True), (["Doc"], False)):
        assert ("new1" in {n for (n,) in sql.execute("SELECT name FROM dna.bm25('plain', 'protein cell study', %s, "
                                                     "kinds => %s, k => 1000)", (MODEL, kinds))}) is found
    assert answers(sql, "plain") == answers(sql, "verbs")
    for scope in ("plain", "verbs"):
        integrity_ok(sql, scope)
    sql.execute("SELECT dna.bm25_compact(full_merge => true)")
    assert answers(sql, "plain") == answers(sql, "verbs")


# -- segment ids ----------------------------------------------------------------------------------------


def test_segment_ids_are_per_partition_without_a_sequence(sql):
    assert sql.execute("SELECT to_regclass('dna.dna_bm25_seg_id_seq')").fetchone()[0] is None
    docs = documents(2100)
    for scope in ("a", "b"):
        index_many(sql, scope, docs[:1000])                    # a segment each
        index_many(sql, scope, docs[1000:1050])                # memtable
    assert sql.execute("SELECT scope, seg_id FROM dna.dna_bm25_segments ORDER BY 1, 2").fetchall() == [("a", 1), ("b", 1)]
    index_many(sql, "a", docs[1050:2100])
    sql.execute("SELECT dna.bm25_compact('a')")                # seals the memtable: the partition's next id
    assert [s for (s,) in sql.execute("SELECT seg_id FROM dna.dna_bm25_segments WHERE scope = 'a' ORDER BY 1")] == [1, 2, 3]
    before = answers(sql, "a")
    sql.execute("SELECT dna.bm25_compact('a', full_merge => true)")
    assert [s for (s,) in sql.execute("SELECT seg_id FROM dna.dna_bm25_segments WHERE scope = 'a'")] == [4]
    assert answers(sql, "a") == before
    assert sql.execute("SELECT dna.bm25_next_seg('b', %s, '')", (MODEL,)).fetchone()[0] == 2
    assert sql.execute("SELECT dna.bm25_next_seg('nowhere', %s, '')", (MODEL,)).fetchone()[0] == 1


def test_concurrent_bulk_writers_of_one_partition_take_distinct_ids_without_waiting(dna_dsn, sql):
    docs = documents(2200)
    with psycopg.connect(dna_dsn) as one, psycopg.connect(dna_dsn) as two:
        two.execute("SET lock_timeout = '5s'")                 # a wait would fail the test, not hang it
        index_many(one, "c", docs[:1100])                      # in progress: segment 1 claimed
        index_many(two, "c", docs[1100:])                      # sees no committed segment, claims the next
        ids = {c: conn.execute("SELECT array_agg(seg_id) FROM dna.dna_bm25_segments WHERE scope = 'c'").fetchone()[0]
               for c, conn in (("one", one), ("two", two))}
        assert ids == {"one": [1], "two": [2]}
        one.commit()
        two.commit()
    assert sql.execute("SELECT array_agg(seg_id ORDER BY seg_id) FROM dna.dna_bm25_segments WHERE scope = 'c'"
                       ).fetchone()[0] == [1, 2]
    integrity_ok(sql, "c")


def test_an_application_role_builds_segments_and_compacts(app_role, sql):  # noqa: F811
    docs = documents(1200)
    with psycopg.connect(app_role, autocommit=True) as app:
        index_many(app, "app", docs[:1100])
        index_many(app, "app", docs[1100:], tenant="ws-a")
        app.execute("SELECT dna.delete_document('app', %s, %s)", (docs[0][0], docs[0][1]))
        before = answers(app, "app", "ws-a")
        report = app.execute("SELECT dna.bm25_compact('app', full_merge => true)").fetchone()[0]
        assert {(p["tenant"], p["status"]) for p in report["partitions"]} == {("", "ok"), ("ws-a", "ok")}
        assert answers(app, "app", "ws-a") == before
    assert sql.execute("SELECT array_agg(tenant || ':' || seg_id ORDER BY tenant) FROM dna.dna_bm25_segments "
                       "WHERE scope = 'app'").fetchone()[0] == [":2", "ws-a:1"]
    integrity_ok(sql, "app")


# -- compaction by scope ----------------------------------------------------------------------------------


def test_compaction_runs_scope_by_scope(sql):
    for scope in ("y", "x"):
        index_many(sql, scope, [("Doc", f"d{i}", f"lexical lane note {i}") for i in range(5)])
    report = sql.execute("SELECT dna.bm25_compact()").fetchone()[0]
    assert [(p["scope"], p["sealed_documents"]) for p in report["partitions"]] == [("x", 5), ("y", 5)]
    one = sql.execute("SELECT dna.bm25_compact_scope('x')").fetchone()[0]
    assert [(p["scope"], p["sealed_documents"]) for p in one["partitions"]] == [("x", 0)]
    with pytest.raises(psycopg.errors.NullValueNotAllowed):
        sql.execute("SELECT dna.bm25_compact_scope(NULL)")
    with pytest.raises(psycopg.errors.InvalidParameterValue):
        sql.execute("SELECT dna.bm25_compact(wait_ms => -1)")


# -- the valid_at mirror ------------------------------------------------------------------------------------


TRIGGER = ("SELECT pg_get_triggerdef(t.oid) FROM pg_trigger AS t WHERE t.tgname = 'dna_search_docs_valid_at' "
           "AND t.tgrelid = %s::regclass")


def test_the_valid_at_trigger_reads_a_setting_not_a_table(sql):
    for (w,) in sql.execute("SELECT dna.search_widths()").fetchall():
        definition = sql.execute(TRIGGER, (f"dna.dna_search_docs_{w}",)).fetchone()[0]
        when = definition[definition.index("WHEN"):definition.index("EXECUTE")]
        assert "current_setting('dna.valid_at_mirrored'" in when and "dna." not in when.replace("dna.valid_at_mirrored", "")


def record_and_row(sql, name, scope="m"):
    return sql.execute("SELECT i.valid_at, s.valid_at FROM dna.dna_instances AS i JOIN dna.dna_search_docs_384 AS s "
                       "ON s.scope = i.scope AND s.kind = i.kind AND s.name = i.name AND s.tenant = i.tenant "
                       "WHERE i.scope = %s AND i.name = %s", (scope, name)).fetchone()


def test_memory_rows_carry_their_records_valid_at_from_verbs_and_plain_sql(sql):
    sql.execute("SELECT dna.remember('m', %s, name => 'm1', now => %s, embedding => dna.fake_embed('lisbon office'))",
                (Jsonb({"summary": "the office is in lisbon"}), NOW))
    record, row = record_and_row(sql, "m1")
    assert record is not None and row == record
    sql.execute("SELECT dna.forget('m', 'm1', now => '2026-07-01T00:00:00Z')")
    record, row = record_and_row(sql, "m1")
    assert not record.upper_inf and row == record              # closed, mirrored by the instances trigger
    sql.execute("SELECT dna.remember('m', %s, name => 'm1', now => %s, embedding => dna.fake_embed('porto office'))",
                (Jsonb({"summary": "the office moved to porto"}), NOW))
    assert record_and_row(sql, "m1")[1] == record_and_row(sql, "m1")[0]     # re-indexed text keeps the record's
    # the same memory Kind through index_documents, then plain SQL: the trigger gives the record's value
    index_many(sql, "m", [("Engram", "m1", "the office moved to porto, indexed in bulk")])
    assert record_and_row(sql, "m1")[1] == record_and_row(sql, "m1")[0]
    sql.execute("UPDATE dna.dna_search_docs_384 SET valid_at = NULL, body = body || '!' WHERE scope = 'm' AND name = 'm1'")
    assert record_and_row(sql, "m1")[1] == record_and_row(sql, "m1")[0]
    # another Kind keeps the valid_at it is written with, by plain SQL and through the verbs
    sql.execute("SELECT dna.index_document('m', 'Doc', 'd', 'plain text', NULL, %s)", (MODEL,))
    sql.execute("UPDATE dna.dna_search_docs_384 SET valid_at = tstzrange('2020-01-01', '2021-01-01') WHERE name = 'd'")
    sql.execute("SELECT dna.index_document('m', 'Doc', 'd', 'plain text, changed', NULL, %s)", (MODEL,))
    assert sql.execute("SELECT valid_at = tstzrange('2020-01-01', '2021-01-01') FROM dna.dna_search_docs_384 "
                       "WHERE name = 'd'").fetchone()[0]
    assert sql.execute("SELECT dna.verify_integrity('m') -> 'ok'").fetchone()[0] is True


def test_the_verbs_turn_the_setting_off_after_their_statement(sql):
    sql.execute("SELECT dna.remember('m', %s, name => 'm2', now => %s)", (Jsonb({"summary": "deploys on fridays"}), NOW))
    sql.execute("SELECT dna.forget('m', 'm2', now => '2026-07-01T00:00:00Z')")
    sql.execute("BEGIN")
    sql.execute("SELECT dna.index_document('m', 'Doc', 'x', 'some text', NULL, %s)", (MODEL,))
    sql.execute("SELECT count(*) FROM dna.index_documents('m', ARRAY['Doc'], ARRAY['y'], ARRAY['more text'], NULL, %s)",
                (MODEL,))
    assert sql.execute("SELECT current_setting('dna.valid_at_mirrored', true)").fetchone()[0] in ("", "off")
    # so a plain UPDATE later in the transaction still runs the trigger
    sql.execute("UPDATE dna.dna_search_docs_384 SET valid_at = NULL WHERE scope = 'm' AND name = 'm2'")
    assert record_and_row(sql, "m2")[1] == record_and_row(sql, "m2")[0]
    sql.execute("SAVEPOINT s")
    assert sql.execute("SELECT dna.mirror_valid_at(true)").fetchone()[0] == "on"
    sql.execute("ROLLBACK TO SAVEPOINT s")                     # a statement that fails takes the setting back
    assert sql.execute("SELECT current_setting('dna.valid_at_mirrored', true)").fetchone()[0] in ("", "off")
    sql.execute("COMMIT")


def test_a_bulk_load_of_documents_runs_no_valid_at_trigger(sql):
    sql.execute("BEGIN")
    sql.execute("SET LOCAL track_functions = 'pl'")
    index_many(sql, "bulk", documents(300))
    sql.execute("SELECT dna.index_document('bulk', 'Doc', 'one', 'one more', NULL, %s)", (MODEL,))
    assert "search_docs_valid_at" not in calls(sql)
    sql.execute("INSERT INTO dna.dna_search_docs_384 (scope, kind, name, model_id, text_hash, body) "
                "VALUES ('bulk', 'Doc', 'raw', %s, 'h', 'plain sql row')", (MODEL,))
    assert calls(sql)["search_docs_valid_at"] == 1             # a plain INSERT: the trigger runs
    sql.execute("COMMIT")


# -- doc_ids from several nodes --------------------------------------------------------------------------


def test_documents_whose_doc_ids_span_more_than_a_packed_posting_get_a_segment_per_range(sql):
    """On Citus each node draws doc_ids from its own range of the sequence (2^48 apart), so one scope can
    hold doc_ids a packed posting (33 bits of offset) cannot span; written here with explicit doc_ids."""
    ranges = "SELECT array_agg(ARRAY[lo, hi]) FROM dna.bm25_doc_ranges(%s::bigint[])"
    assert sql.execute(ranges, ([5, 1, 8589934601, 8589934600, 9],)).fetchone()[0] == [[1, 9], [8589934600, 8589934601]]
    assert sql.execute(ranges, ([1, 8589934592],)).fetchone()[0] == [[1, 8589934592]]      # offset 2^33 - 1 fits
    assert sql.execute("SELECT count(*) FROM dna.bm25_doc_ranges('{}')").fetchone()[0] == 0
    far = 1 << 48
    docs = documents(1400)
    kinds, names, bodies = map(list, zip(*docs))
    index_many(sql, "near", docs)                              # one server's ids: one segment
    ids = [far + i if i % 2 else 10_000_000 + i for i in range(len(docs))]
    sql.execute("INSERT INTO dna.dna_search_docs_384 (scope, kind, name, model_id, text_hash, body, doc_id) "
                "SELECT 'far', k, n, %s, dna.text_hash(NULL, b), b, i FROM unnest(%s::text[], %s::text[], %s::text[], "
                "%s::bigint[]) AS u (k, n, b, i)", (MODEL, kinds, names, bodies, ids))
    assert sql.execute("SELECT count(*) FROM dna.dna_bm25_segments WHERE scope = 'far'").fetchone()[0] == 2
    assert answers(sql, "far") == answers(sql, "near")
    for scope in ("far", "near"):                              # memtable writes, tombstones, then seal and merge
        sql.execute("DELETE FROM dna.dna_search_docs_384 WHERE scope = %s AND name = ANY (%s)",
                    (scope, [n for _k, n, _b in docs[::9]]))
    sql.execute("INSERT INTO dna.dna_search_docs_384 (scope, kind, name, model_id, text_hash, body, doc_id) VALUES "
                "('far', 'Doc', 'extra', %s, 'h', 'protein cell study', %s)", (MODEL, far + 10_000))
    sql.execute("SELECT dna.index_document('far', 'Doc', 'extra2', 'gene risk', NULL, %s)", (MODEL,))
    index_many(sql, "near", [("Doc", "extra", "protein cell study"), ("Doc", "extra2", "gene risk")])
    assert answers(sql, "far") == answers(sql, "near")
    sql.execute("SELECT dna.bm25_compact()")
    assert answers(sql, "far") == answers(sql, "near")
    report = sql.execute("SELECT dna.bm25_compact(full_merge => true)").fetchone()[0]
    assert {p["scope"]: p["segments"] for p in report["partitions"]} == {"far": 2, "near": 1}
    assert answers(sql, "far") == answers(sql, "near")
    assert sql.execute("SELECT count(*) FROM dna.dna_bm25_tombstones").fetchone()[0] == 0
    for scope in ("far", "near"):
        integrity_ok(sql, scope)
