"""Metadata and the filter language (sql/metadata.sql), through plain SQL: documents and memories carry
metadata; dna.search, dna.recall and dna.list_memories narrow by one filter applied inside both lanes
before their top k (k hits whenever k rows match, an HNSW scan that runs dry falls back to exact and
explain says so); a malformed filter is refused with 22023 and a hint; a filtered search equals the
unfiltered exact ranking restricted to the rows that match (hypothesis)."""
from __future__ import annotations

import json
from datetime import datetime, timezone

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg.types.json import Jsonb

MODEL = "dna-fake-hash-v1"
NOW = "2026-06-01T12:00:00Z"


def _index(conn, scope, docs):
    """docs: [(name, body, metadata)] indexed with fake vectors, then their metadata set."""
    conn.execute("SELECT count(*) FROM dna.index_documents(%s, %s, %s, %s, "
                 "ARRAY(SELECT dna.fake_embed(b) FROM unnest(%s::text[]) AS b), %s)",
                 (scope, ["Doc"] * len(docs), [d[0] for d in docs], [d[1] for d in docs],
                  [d[1] for d in docs], MODEL))
    return conn.execute("SELECT dna.set_document_metadata(%s, %s, %s, %s::jsonb[])",
                        (scope, ["Doc"] * len(docs), [d[0] for d in docs],
                         [json.dumps(d[2]) for d in docs])).fetchone()[0]


def _search(conn, scope, query, filt=None, **kw):
    args = ", ".join(f"{k} => %({k})s" for k in kw)
    return conn.execute(
        "SELECT name, rank_dense, rank_lexical, metadata, explain FROM dna.search(%(scope)s, %(q)s, dna.fake_embed(%(q)s), "
        f"%(model)s, filter => %(filter)s{', ' + args if args else ''})",
        {"scope": scope, "q": query, "model": MODEL, "filter": Jsonb(filt) if filt is not None else None, **kw}).fetchall()


# -- the language ---------------------------------------------------------------------------------

MATCHES = [
    ({"user": "u1"}, True), ({"user": "u2"}, False), ({"user": {"eq": "u1"}}, True), ({"user": {"ne": "u1"}}, False),
    ({"missing": {"ne": 3}}, True), ({"n": 7}, True), ({"n": 7.0}, True), ({"n": "7"}, False),
    ({"n": {"gt": 6, "lte": 7}}, True), ({"n": {"gt": 7}}, False), ({"n": {"in": [1, 7]}}, True),
    ({"n": {"nin": [1, 7]}}, False), ({"n": {"in": []}}, False), ({"n": {"nin": []}}, True),
    ({"s": {"gt": 5}}, False),                                  # a string never compares as a number
    ({"tags": {"contains": "a"}}, True), ({"tags": {"contains": ["a", "b"]}}, True),
    ({"tags": {"contains": ["a", "z"]}}, False), ({"tags": {"contains_any": ["z", "b"]}}, True),
    ({"tags": "a"}, False),                                     # equality is not membership
    ({"at": {"gte": "2026-01-01", "lt": "2026-02-01T00:00:00Z"}}, True), ({"at": {"gt": "2026-01-15T10:00:01+00:00"}}, False),
    ({"at": {"lte": "2026-01-15T12:00:00+02:00"}}, True),       # instants, whatever the offset
    ({"src.repo": "pydna"}, True), ({"src": {"exists": True}}, True), ({"nul": {"exists": True}}, True),
    ({"nul": None}, True), ({"nope": {"exists": False}}, True), ({"flag": True}, True), ({"flag": False}, False),
    ({"or": [{"user": "u2"}, {"n": 7}]}, True), ({"and": [{"user": "u1"}, {"n": 8}]}, False),
    ({"not": {"user": "u2"}}, True), ({"not": {"or": [{"user": "u1"}, {"n": 1}]}}, False), ({}, True),
]
META = {"user": "u1", "n": 7, "s": "9", "tags": ["a", "b", "c"], "at": "2026-01-15T10:00:00Z",
        "src": {"repo": "pydna", "path": "README.md"}, "nul": None, "flag": True}


def test_filter_matches_the_documented_language(sql):
    for filt, want in MATCHES:
        got = sql.execute("SELECT dna.filter_matches(%s, %s)", (Jsonb(META), Jsonb(filt))).fetchone()[0]
        assert got is want, (filt, got)


@pytest.mark.parametrize("filt,where,hint", [
    ([1], "filter: a filter is a JSON object", "For example"),
    ({"tags": {"contain": "x"}}, "filter.tags.contain: unknown operator 'contain'", "nearest: 'contains'"),
    ({"tags": {"$in": ["x"]}}, "filter.tags.$in: unknown operator", "without $"),
    ({"$or": [{"a": 1}]}, "filter.$or: '$or' is not a field name", "plain words"),
    ({"n": {"gt": "soon"}}, "filter.n.gt: gt takes a number or an ISO-8601 timestamp", "created_at"),
    ({"n": {"gt": True}}, "filter.n.gt: gt takes a number or an ISO-8601 timestamp", "For example"),
    ({"n": {"in": 5}}, "filter.n.in: in takes a list", "For example"),
    ({"n": {"in": [[1]]}}, "filter.n.in: in takes scalars", "dotted path"),
    ({"n": {"exists": "yes"}}, "filter.n.exists: exists takes true or false", "valid_to"),
    ({"n": {"eq": [1]}}, "filter.n.eq: eq takes a string, number, boolean or null", "in / nin"),
    ({"n": [1, 2]}, "filter.n: a list is not a value", "contains"),
    ({"n": {}}, "filter.n: an empty condition", "operators: eq"),
    ({"or": []}, "filter.or: or takes a non-empty list of filters", "For example"),
    ({"and": {"a": 1}}, "filter.and: and takes a non-empty list", "For example"),
    ({"or": [{"a": 1}, 5]}, "filter.or[1]: a filter is a JSON object", "For example"),
    ({"tags": {"contains": []}}, "filter.tags.contains: contains takes a non-empty list", "Leave"),
    ({"a..b": 1}, "filter.a..b: 'a..b' is not a field name", "a.b is the field b"),
    ({"n": {"in": list(range(1001))}}, "filter.n.in: in lists 1001 values; the limit is 1000", "Narrow"),
    ({"not": {"not": {"not": {"not": {"not": {"not": {"not": {"not": {"a": 1}}}}}}}}},
     "nests deeper than 8 levels", "Flatten"),
])
def test_a_malformed_filter_is_refused_with_22023_naming_the_place(sql, filt, where, hint):
    for call in ("SELECT dna.filter_sql(%s)", "SELECT count(*) FROM dna.search('s', 'q', NULL, %s, filter => %s)",
                 "SELECT dna.recall('s', 'q', filter => %s)", "SELECT dna.list_memories('s', filter => %s)"):
        args = (Jsonb(filt),) if call.count("%s") == 1 else (MODEL, Jsonb(filt))
        with pytest.raises(psycopg.errors.InvalidParameterValue) as err:
            sql.execute(call, args)
        assert where in err.value.diag.message_primary, (call, err.value.diag.message_primary)
        assert hint in err.value.diag.message_hint and "docs/memory.md" in err.value.diag.message_hint


def test_an_oversized_filter_is_refused_with_22001(sql):
    with pytest.raises(psycopg.errors.StringDataRightTruncation):
        sql.execute("SELECT dna.filter_sql(%s)", (Jsonb({"x": {"in": ["y" * 100] * 700}}),))


def test_filter_values_are_literals_never_sql(sql):
    evil = "x'); DROP TABLE dna.dna_instances; --"
    assert sql.execute("SELECT dna.filter_matches(%s, %s)", (Jsonb({"a": evil}), Jsonb({"a": evil, evil: {"exists": False}}))
                       ).fetchone()[0] is True
    assert sql.execute("SELECT count(*) FROM dna.dna_instances").fetchone()[0] == 0


# -- documents --------------------------------------------------------------------------------------

def test_document_metadata_is_set_on_every_passage_and_model_and_replaced(sql):
    sql.execute("SELECT count(*) FROM dna.index_documents('docs', '{Doc,Doc}', '{a,a}', '{one,two}', NULL, %s, "
                "passages => '{0,1}')", (MODEL,))
    sql.execute("SELECT dna.register_model('other-model', 384)")
    sql.execute("SELECT dna.index_document('docs', 'Doc', 'a', 'one two', NULL, 'other-model')")
    assert sql.execute("SELECT dna.set_document_metadata('docs', '{Doc}', '{a}', ARRAY[%s::jsonb])",
                       (Jsonb({"user": "u1"}),)).fetchone()[0] == 3
    assert sql.execute("SELECT array_agg(DISTINCT metadata) FROM dna.dna_search_docs_384 WHERE name = 'a'"
                       ).fetchone()[0] == [{"user": "u1"}]
    # the same metadata again writes nothing; NULL clears it
    assert sql.execute("SELECT dna.set_document_metadata('docs', '{Doc}', '{a}', ARRAY[%s::jsonb])",
                       (Jsonb({"user": "u1"}),)).fetchone()[0] == 0
    assert sql.execute("SELECT dna.set_document_metadata('docs', '{Doc}', '{a}', ARRAY[NULL::jsonb])").fetchone()[0] == 3
    # re-indexing the text keeps the metadata
    sql.execute("SELECT dna.set_document_metadata('docs', '{Doc}', '{a}', ARRAY['{\"v\": 2}'::jsonb])")
    sql.execute("SELECT dna.index_document('docs', 'Doc', 'a', 'three', NULL, %s)", (MODEL,))
    assert sql.execute("SELECT metadata FROM dna.dna_search_docs_384 WHERE name = 'a' AND model_id = %s",
                       (MODEL,)).fetchone()[0] == {"v": 2}


@pytest.mark.parametrize("kinds,names,metas,code,text", [
    (["Doc"], ["a"], ['[1]'], "22023", "metadata of document 1 (Doc/a) must be a JSON object"),
    (["Doc", "Doc"], ["a", "a"], ['{}', '{}'], "22023", "appears twice"),
    (["Doc"], ["a", "b"], ['{}'], "22023", "arrays of one length"),
    (["Engram"], ["m"], ['{}'], "22023", "is a memory Kind"),
    (["Doc"], ["a"], [json.dumps({"x": "y" * 70000})], "22001", "the limit is 65536"),
])
def test_set_document_metadata_refuses_bad_input_before_writing(sql, kinds, names, metas, code, text):
    sql.execute("SELECT dna.index_document('docs', 'Doc', 'a', 'one', NULL, %s)", (MODEL,))
    with pytest.raises(psycopg.Error) as err:
        sql.execute("SELECT dna.set_document_metadata('docs', %s, %s, %s::jsonb[])", (kinds, names, metas))
    assert err.value.sqlstate == code and text in str(err.value)
    assert sql.execute("SELECT metadata FROM dna.dna_search_docs_384 WHERE name = 'a'").fetchone()[0] == {}


def test_the_lexical_lane_keeps_k_hits_below_many_that_the_filter_drops(sql):
    # 300 documents match the query; the 250 that score best lexically are u2's. The lane is cut at its
    # depth only after the filter: u1's 50 come back, all of them, ranked.
    docs = [(f"d{i:03d}", "fusion " * (5 if i < 250 else 1) + f"word{i}", {"user": "u2" if i < 250 else "u1"})
            for i in range(300)]
    _index(sql, "lex", docs)
    rows = sql.execute("SELECT name, rank_lexical FROM dna.search('lex', 'fusion', NULL, %s, k => 60, "
                       "filter => '{\"user\": \"u1\"}')", (MODEL,)).fetchall()
    assert len(rows) == 50 and all(int(n[1:]) >= 250 for n, _ in rows)
    assert sorted(r for _, r in rows) == list(range(1, 51))
    # without the filter the same depth holds only u2's
    top = sql.execute("SELECT name FROM dna.search('lex', 'fusion', NULL, %s, k => 60)", (MODEL,)).fetchall()
    assert all(int(n[1:]) < 250 for (n,) in top)


def test_hits_carry_metadata_and_explain_says_how_the_dense_lane_ran(sql):
    _index(sql, "ex", [(f"d{i}", f"rank fusion note {i}", {"n": i, "user": f"u{i % 3}"}) for i in range(30)])
    rows = _search(sql, "ex", "rank fusion", {"user": "u1", "n": {"lte": 20}}, explain=True)
    assert sorted(r[0] for r in rows) == sorted(f"d{i}" for i in range(30) if i % 3 == 1 and i <= 20)
    assert all(r[3]["user"] == "u1" for r in rows)
    answer = rows[0][4]["answer"]
    assert answer["filters"]["filter"] == {"user": "u1", "n": {"lte": 20}}
    assert answer["dense"]["path"] == "exact scan" and answer["lexical"]["cut_at"] is None
    # a small scope is exact by the exact rule already; the filter's own route shows when HNSW could answer
    rows = _search(sql, "ex", "rank fusion", {"user": "u1"}, explain=True, exact=False)
    assert rows[0][4]["answer"]["dense"]["filter"].startswith("hnsw")


def test_a_filter_no_row_passes_says_so(sql):
    _index(sql, "none", [("a", "rank fusion", {"user": "u1"})])
    with sql.cursor() as cur:
        notices = []
        sql.add_notice_handler(lambda d: notices.append(d.message_primary))
        assert cur.execute("SELECT * FROM dna.search('none', 'rank fusion', NULL, %s, filter => '{\"user\": \"u9\"}')",
                           (MODEL,)).fetchall() == []
    assert any("matches the filter" in n for n in notices), notices


# -- the dense lane: few matching rows, and an HNSW scan that runs dry -----------------------------------

@pytest.fixture(scope="module")
def wide(pg_server, dna_template):
    """2,500 documents (over dna.exact_scan_rows()), 1 in 50 of user u1 (tag rare), the rest u2."""
    name = f"dna_wide_{id(pg_server)}"
    with pg_server.janitor(name, template=dna_template):
        with psycopg.connect(pg_server.dsn(name), autocommit=True) as conn:
            docs = [(f"d{i:04d}", f"note {i} about topic {i % 37} and item {i % 11}",
                     {"user": "u1" if i % 50 == 0 else "u2", "n": i, "tags": ["rare"] if i % 50 == 0 else ["common"]})
                    for i in range(2500)]
            for lo in range(0, len(docs), 500):
                _index(conn, "wide", docs[lo:lo + 500])
            conn.execute("ANALYZE dna.dna_search_docs_384")
            yield conn


class Rollback(Exception):
    pass


def _exact_dense(conn, pred_py, k):
    rows = conn.execute("SELECT name, metadata, 1 - (embedding <=> dna.fake_embed('topic 5 item 3')) AS cos "
                        "FROM dna.dna_search_docs_384 WHERE scope = 'wide'").fetchall()
    ranked = sorted((r for r in rows if pred_py(r[1])), key=lambda r: (-round(r[2], 9), r[0]))
    return [r[0] for r in ranked[:k]]


def test_a_selective_filter_is_answered_exactly_from_its_rows(wide):
    rows = _search(wide, "wide", "topic 5 item 3", {"user": "u1"}, k=20, explain=True)
    assert len(rows) == 20 and all(r[3]["user"] == "u1" for r in rows)
    dense = rows[0][4]["answer"]["dense"]
    assert dense["filter"].startswith("exact scan: 50 rows match the filter") and dense["path"] == "exact scan"
    got = [r[0] for r in sorted((r for r in rows if r[1] is not None), key=lambda r: r[1])]
    assert got == _exact_dense(wide, lambda m: m["user"] == "u1", len(got))


def test_an_hnsw_scan_that_runs_dry_falls_back_to_exact_and_explain_says_so(wide):
    # exact => false skips the count; a scan budget of 40 tuples leaves the iterative scan dry
    with pytest.raises(Rollback), wide.transaction():
        wide.execute("SET LOCAL hnsw.max_scan_tuples = 40")
        wide.execute("SET LOCAL enable_bitmapscan = off")
        # the lane searches the graph at ef_search dna.hnsw_ef_search(30, 200) = 800: its first 800
        # candidates hold about 80 of the 250 rows the filter keeps (1 in 10), fewer than the depth, and the
        # budget stops the iteration there: the scan runs dry.
        rows = _search(wide, "wide", "topic 5 item 3", {"n": {"gte": 2250}}, k=30, exact=False, explain=True,
                       candidates=200)
        raise Rollback
    assert len(rows) == 30 and all(r[3]["n"] >= 2250 for r in rows)
    dense = rows[0][4]["answer"]["dense"]
    assert dense["filter"].startswith("hnsw ran dry") and dense["path"] == "exact scan", dense
    ranked = [r[0] for r in sorted((r for r in rows if r[1] is not None), key=lambda r: r[1])]
    assert ranked == _exact_dense(wide, lambda m: m["n"] >= 2250, 200)[:len(ranked)]


@pytest.mark.parametrize("sort", ["off", "on"])
def test_an_unselective_filter_keeps_hnsw(wide, sort):
    # An unselective filter leaves the lane to the graph (no exact scan of the rows it keeps), whatever the
    # session's enable_sort: at 2,500 rows the planner prices the graph at the lane's ef_search (400) above
    # an exact scan and sort, and dna.search turns sorts off for the statement so that the graph answers.
    with pytest.raises(Rollback), wide.transaction():
        wide.execute(f"SET LOCAL enable_sort = {sort}")
        rows = _search(wide, "wide", "topic 5 item 3", {"user": "u2"}, k=10, explain=True)
        raise Rollback
    dense = rows[0][4]["answer"]["dense"]
    assert len(rows) == 10
    assert dense["path"] == "hnsw" and dense["filter"].startswith("hnsw, iterative scan") and dense["ef_search"] == 400, dense


# -- memories ---------------------------------------------------------------------------------------

def _remember(conn, scope, summary, **spec):
    return conn.execute("SELECT dna.remember(%s, %s, now => %s, embedding => dna.fake_embed(%s))",
                        (scope, Jsonb({"summary": summary, **spec}), spec.get("created_at", NOW), summary)).fetchone()[0]


def _names(conn, call, *args):
    return [h["name"] for h in conn.execute(call, args).fetchone()[0]["hits"]]


def test_memory_metadata_is_its_spec_metadata_and_its_own_fields(sql):
    m = _remember(sql, "team", "the office is in lisbon", tags=["place", "work"], area="ops/sites",
                  metadata={"user": "u1", "project": {"id": 7}})
    want = {"user": "u1", "project": {"id": 7}, "tags": ["place", "work"], "area": "ops/sites", "memory_type": "semantic",
            "created_at": "2026-06-01T12:00:00+00:00", "valid_from": "2026-06-01T12:00:00+00:00"}
    assert sql.execute("SELECT metadata FROM dna.dna_instances WHERE name = %s", (m["name"],)).fetchone()[0] == want
    assert sql.execute("SELECT metadata FROM dna.dna_search_docs_384 WHERE name = %s", (m["name"],)).fetchone()[0] == want
    # a memory field cannot be shadowed
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="spec.metadata may not hold area, tags"):
        _remember(sql, "team", "x", metadata={"tags": [], "area": "y"})
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="spec.metadata must be a JSON object"):
        _remember(sql, "team", "x", metadata=[1])


def test_forget_and_restating_reach_the_search_rows_metadata(sql):
    m = _remember(sql, "team", "deploys happen on fridays", tags=["ops"])
    sql.execute("SELECT dna.forget('team', %s, now => '2026-07-01T00:00:00Z')", (m["name"],))
    row = sql.execute("SELECT metadata FROM dna.dna_search_docs_384 WHERE name = %s", (m["name"],)).fetchone()[0]
    assert row["valid_to"] == "2026-07-01T00:00:00+00:00"
    sql.execute("SELECT dna.revive('team', %s, now => '2026-07-02T00:00:00Z')", (m["name"],))
    # the same text with new tags: the search row is not re-indexed, its metadata follows
    _remember(sql, "team", "deploys happen on fridays", tags=["ops", "release"])
    row = sql.execute("SELECT metadata FROM dna.dna_search_docs_384 WHERE name = %s", (m["name"],)).fetchone()[0]
    assert row["tags"] == ["ops", "release"] and "valid_to" not in row
    latest = sql.execute("SELECT max(version) FROM dna.dna_versions WHERE name = %s", (m["name"],)).fetchone()[0]
    assert latest == 4                                         # remember, forget, revive, remember: no extra version


def test_recall_and_list_memories_narrow_by_the_filter_with_date_ranges(sql):
    for day in range(1, 11):
        _remember(sql, "diary", f"day {day}: walked to the office", created_at=f"2026-05-{day:02d}T09:00:00Z",
                  tags=["walk"] + (["rain"] if day % 3 == 0 else []), metadata={"user": "u1" if day <= 5 else "u2"})
    call = "SELECT dna.recall('diary', 'walked office', dna.fake_embed('walked office'), k => 10, now => %s, " \
           "reconsolidate => false, filter => %s)"
    week = {"created_at": {"gte": "2026-05-03", "lt": "2026-05-08"}}
    assert sorted(_names(sql, call, NOW, Jsonb(week))) == sorted(
        _names(sql, call, NOW, Jsonb({"or": [{"created_at": d} for d in
                                             [f"2026-05-0{i}T09:00:00+00:00" for i in range(3, 8)]]})))
    assert len(_names(sql, call, NOW, Jsonb(week))) == 5
    rainy_u2 = _names(sql, call, NOW, Jsonb({"tags": {"contains": "rain"}, "user": "u2"}))
    assert len(rainy_u2) == 2                                  # days 6 and 9
    hits = sql.execute(call, (NOW, Jsonb({"user": "u1"}))).fetchone()[0]
    assert all(h["metadata"]["user"] == "u1" for h in hits["hits"]) and len(hits["hits"]) == 5
    listed = sql.execute("SELECT dna.list_memories('diary', now => %s, filter => %s)", (NOW, Jsonb(week))).fetchone()[0]
    assert listed["total"] == 5 and listed["filter"] == week
    assert {m["created_at"][:10] for m in listed["memories"]} == {f"2026-05-0{i}" for i in range(3, 8)}
    # valid between: memories valid at some time of [May 4, May 6), forgotten ones included
    first = sql.execute("SELECT dna.list_memories('diary', include_invalid => true, now => %s, filter => "
                        "'{\"valid_from\": {\"lt\": \"2026-05-06\"}}')", (NOW,)).fetchone()[0]
    assert first["total"] == 5


def test_personal_memories_stay_personal_under_a_filter(sql):
    import os

    alice, bob = (f"dna_filter_{who}_{os.getpid()}" for who in ("alice", "bob"))
    for role, oid in ((alice, "alice-oid"), (bob, "bob-oid")):
        sql.execute(f"DROP ROLE IF EXISTS {role}")
        sql.execute(f"CREATE ROLE {role}")
        sql.execute("SELECT dna.grant_app_role(%s)", (role,))
        sql.execute("INSERT INTO dna.dna_identities (role_name, oid) VALUES (%s, %s)", (role, oid))
    recall = ("SELECT dna.recall('team', 'zebraquartz', personal => %s, reconsolidate => false, "
              "filter => '{\"user\": \"u1\"}')")
    try:
        sql.execute(f"SET ROLE {alice}")
        sql.execute("SELECT dna.remember('team', %s, personal => true)",
                    (Jsonb({"summary": "my zebraquartz note", "metadata": {"user": "u1"}}),))
        assert [h["personal"] for h in sql.execute(recall, (True,)).fetchone()[0]["hits"]] == [True]
        sql.execute(f"SET ROLE {bob}")
        for personal in (True, False):
            assert sql.execute(recall, (personal,)).fetchone()[0]["hits"] == []
            assert sql.execute("SELECT dna.list_memories('team', personal => %s, filter => '{\"user\": \"u1\"}')",
                               (personal,)).fetchone()[0]["total"] == 0
    finally:
        sql.execute("RESET ROLE")
        for role in (alice, bob):
            sql.execute(f"DROP OWNED BY {role}")
            sql.execute(f"DROP ROLE {role}")


# -- the property: a filtered search is the unfiltered exact ranking restricted to matching rows -------

USERS = ["u1", "u2", "u3"]
TAGS = ["a", "b", "c", "d"]
DAYS = [f"2026-0{m}-{d:02d}T{h:02d}:00:00Z" for m in (1, 2) for d in (1, 10, 20) for h in (0, 12)]


def _doc_meta(i):
    meta = {"user": USERS[i % 3], "n": (i * 7) % 23, "tags": [t for j, t in enumerate(TAGS) if (i >> j) & 1],
            "at": DAYS[i % len(DAYS)], "flag": i % 4 == 0}
    if i % 5 == 0:
        meta["src"] = {"repo": "pydna" if i % 10 == 0 else "other"}
    if i % 6 == 0:
        del meta["n"]
    if i % 7 == 0:
        meta["score"] = i / 3
    return meta


WORDS = ["rank", "fusion", "lexical", "dense", "memory", "recall", "filter", "lane", "vector", "index"]
PROP_DOCS = [(f"p{i:02d}", " ".join(WORDS[(i * k) % len(WORDS)] for k in range(1, 4 + i % 3)), _doc_meta(i))
             for i in range(60)]


def _ts(v):
    if not isinstance(v, str):
        return None
    try:
        t = datetime.fromisoformat(v.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def _get(meta, path):
    for part in path.split("."):
        if not isinstance(meta, dict) or part not in meta:
            return None, False
        meta = meta[part]
    return meta, True


def _eq(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def match(meta, filt):
    """The filter language of sql/metadata.sql, independently (docs/memory.md, "Filters")."""
    ok = True
    for key, cond in filt.items():
        if key == "and":
            ok &= all(match(meta, f) for f in cond)
        elif key == "or":
            ok &= any(match(meta, f) for f in cond)
        elif key == "not":
            ok &= not match(meta, cond)
        else:
            value, present = _get(meta, key)
            ops = cond if isinstance(cond, dict) else {"eq": cond}
            for op, arg in ops.items():
                if op == "eq":
                    ok &= present and _eq(value, arg)
                elif op == "ne":
                    ok &= not (present and _eq(value, arg))
                elif op in ("in", "nin"):
                    hit = present and any(_eq(value, a) for a in arg)
                    ok &= hit if op == "in" else not hit
                elif op in ("gt", "gte", "lt", "lte"):
                    if isinstance(arg, (int, float)) and not isinstance(arg, bool):
                        left = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
                        right = arg
                    else:
                        left, right = _ts(value), _ts(arg)
                    if left is None:
                        ok = False
                        continue
                    ok &= {"gt": left > right, "gte": left >= right, "lt": left < right, "lte": left <= right}[op]
                elif op == "exists":
                    ok &= present is arg
                elif op in ("contains", "contains_any"):
                    want = arg if isinstance(arg, list) else [arg]
                    have = value if isinstance(value, list) else None
                    if have is None:
                        ok = False
                        continue
                    inside = [any(_eq(h, w) for h in have) for w in want]
                    ok &= all(inside) if op == "contains" else any(inside)
    return ok


scalars = st.one_of(st.sampled_from(USERS), st.integers(0, 23), st.booleans(), st.sampled_from(["pydna", "other"]))
conditions = st.one_of(
    st.tuples(st.just("user"), st.one_of(st.sampled_from(USERS), st.fixed_dictionaries({"ne": st.sampled_from(USERS)}),
                                         st.fixed_dictionaries({"in": st.lists(st.sampled_from(USERS), max_size=2)}),
                                         st.fixed_dictionaries({"nin": st.lists(st.sampled_from(USERS), max_size=2)}))),
    st.tuples(st.just("n"), st.one_of(st.integers(0, 23), st.dictionaries(st.sampled_from(["gt", "gte", "lt", "lte"]),
                                                                          st.integers(0, 23), min_size=1, max_size=2))),
    st.tuples(st.just("score"), st.dictionaries(st.sampled_from(["gt", "lte"]), st.floats(0, 20), min_size=1)),
    st.tuples(st.just("tags"), st.one_of(st.fixed_dictionaries({"contains": st.one_of(st.sampled_from(TAGS),
                                                                                       st.lists(st.sampled_from(TAGS), min_size=1, max_size=2))}),
                                         st.fixed_dictionaries({"contains_any": st.lists(st.sampled_from(TAGS), min_size=1, max_size=3)}))),
    st.tuples(st.just("at"), st.dictionaries(st.sampled_from(["gt", "gte", "lt", "lte"]),
                                             st.sampled_from(DAYS + ["2026-01-10", "2026-02-15T06:00:00+03:00"]),
                                             min_size=1, max_size=2)),
    st.tuples(st.sampled_from(["src", "n", "score", "src.repo"]), st.fixed_dictionaries({"exists": st.booleans()})),
    st.tuples(st.sampled_from(["src.repo", "flag"]), scalars),
)
leaves = st.lists(conditions, min_size=1, max_size=3).map(dict)
filters = st.recursive(leaves, lambda inner: st.one_of(
    st.lists(inner, min_size=1, max_size=3).map(lambda fs: {"and": fs}),
    st.lists(inner, min_size=1, max_size=3).map(lambda fs: {"or": fs}),
    inner.map(lambda f: {"not": f})), max_leaves=6)


@pytest.fixture(scope="module")
def prop(pg_server, dna_template):
    name = f"dna_prop_{id(pg_server)}"
    with pg_server.janitor(name, template=dna_template):
        with psycopg.connect(pg_server.dsn(name), autocommit=True) as conn:
            _index(conn, "prop", PROP_DOCS)
            yield conn


def _lanes(conn, query, filt):
    rows = conn.execute("SELECT name, rank_dense, rank_lexical FROM dna.search('prop', %s, dna.fake_embed(%s), %s, "
                        "k => 1000, candidates => 10000, exact => true, filter => %s, diversity => 'off')",
                        (query, query, MODEL, Jsonb(filt) if filt is not None else None)).fetchall()
    dense = [n for n, r, _ in sorted((r for r in rows if r[1] is not None), key=lambda r: r[1])]
    lexical = [n for n, _, r in sorted((r for r in rows if r[2] is not None), key=lambda r: r[2])]
    return dense, lexical


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(filt=filters, query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join))
def test_a_filtered_search_is_the_unfiltered_exact_ranking_restricted_to_matching_rows(prop, filt, query):
    meta = {n: m for n, _, m in PROP_DOCS}
    dense_all, lexical_all = _lanes(prop, query, None)
    dense, lexical = _lanes(prop, query, filt)
    assert dense == [n for n in dense_all if match(meta[n], filt)]
    assert lexical == [n for n in lexical_all if match(meta[n], filt)]
    # and the SQL evaluator agrees with the model on every row
    assert [n for n in meta if prop.execute("SELECT dna.filter_matches(%s, %s)", (Jsonb(meta[n]), Jsonb(filt))
                                            ).fetchone()[0]] == [n for n in meta if match(meta[n], filt)]
