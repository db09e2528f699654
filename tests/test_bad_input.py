"""Bad input gets a clear error (with a SQLSTATE) and nothing already stored is lost or changed."""
from __future__ import annotations

import psycopg
import pytest

MODEL = "dna-fake-hash-v1"
HOSTILE = [
    "it's", "a & b | !c", "(unbalanced", "foo:*", "'quoted' \"double\"", "<->", "a <2> b", "!!!",
    "https://example.com/path?q=1&x=y#frag", "someone@example.org", "the and of a to",
    "\\ backslash \\\\", "émoji 🎉 and 中文", ":& | ! ( ) ' < > *",
]


@pytest.fixture
def stored(sql):
    sql.execute("SELECT dna.index_document('s', 'Doc', 'keep', 'reciprocal rank fusion of dense and lexical lanes', "
                "dna.fake_embed('reciprocal rank fusion of dense and lexical lanes'), %s)", (MODEL,))
    return sql


def snapshot(sql):
    return sql.execute("SELECT scope, kind, name, text_hash, embedding::text FROM dna.dna_search_docs_384 "
                       "ORDER BY scope, kind, name, tenant, model_id").fetchall()


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_query_text_never_raises(stored, query):
    stored.execute("SELECT * FROM dna.search('s', %s, dna.fake_embed(%s), %s)", (query, query, MODEL)).fetchall()
    stored.execute("SELECT * FROM dna.search('s', %s, NULL, %s)", (query, MODEL)).fetchall()
    stored.execute("SELECT dna.lexical_query(%s)", (query,)).fetchone()


def test_operators_in_text_are_words_not_syntax(stored):
    names = [r[0] for r in stored.execute("SELECT name FROM dna.search('s', 'fusion & !lexical | (rank', "
                                          "model_id => %s)", (MODEL,))]
    assert names == ["keep"]


def test_stop_words_only_gives_no_lexical_hits(stored):
    assert stored.execute("SELECT dna.lexical_query('the and of a')").fetchone()[0] is None
    assert stored.execute("SELECT count(*) FROM dna.search('s', 'the and of a', model_id => %s)",
                          (MODEL,)).fetchone()[0] == 0


def test_null_query_embedding_is_lexical_only_and_flagged(stored):
    rows = stored.execute("SELECT name, degraded, rank_dense, rank_lexical FROM dna.search('s', 'rank fusion', "
                          "NULL, %s)", (MODEL,)).fetchall()
    assert rows == [("keep", True, None, 1)]


@pytest.mark.parametrize("call,sqlstate,message", [
    ("dna.index_document('s', 'Doc', 'x', 'text', '[1,NaN,3]'::vector, 'm3')", "22000", "NaN"),
    ("dna.index_document('s', 'Doc', 'x', 'text', dna.fake_embed('text', 512), 'm512')", "42P01", "width 512"),
    ("dna.index_document('s', 'Doc', 'x', 'text', NULL, 'no-such-model')", "22023", "unknown model_id"),
    ("dna.index_document('s', 'Doc', 'x', 'text', dna.fake_embed('text'), NULL)", "22023", "model_id is required"),
    ("dna.index_document('s', 'Doc', 'x', '   ', dna.fake_embed('x'), 'dna-fake-hash-v1')", "22023", "nothing to index"),
    ("dna.index_document('s', 'Doc', 'x', repeat('word ', 250000), NULL, 'dna-fake-hash-v1')", "22001", "limit is 1000000"),
    ("dna.index_document('', 'Doc', 'x', 'text', NULL, 'dna-fake-hash-v1')", "22023", "scope is required"),
    ("dna.index_document('s', NULL, 'x', 'text', NULL, 'dna-fake-hash-v1')", "22023", "kind is required"),
    ("dna.index_document('s', 'Doc', 'x', 'text', NULL, 'dna-fake-hash-v1', tenant => 'personal:alice')", "42501", "reserved"),
    ("dna.index_document('s', 'Doc', 'x', 'text', NULL, 'dna-fake-hash-v1', tenant => 'Bad Tenant!')", "22023", "invalid tenant"),
    ("dna.index_document('s', 'Doc', 'keep', 'new text', dna.fake_embed('t', 768), 'dna-fake-hash-v1')", "22023", "registered with 384"),
    ("dna.search('s', 'x', NULL, 'no-such-model')", "22023",
     "unknown model_id 'no-such-model': nothing was ever indexed with it; "
     "model_ids with documents in scope 's': dna-fake-hash-v1 (1 document)"),
    ("dna.search('s', 'x', NULL, 'dna-fake-hash-v1', weights => '{NaN,1}')", "22023", "weights must be finite"),  # model_id NULL is the scope's model (0016)
    ("dna.search('s', 'x', dna.fake_embed('x', 768), 'dna-fake-hash-v1')", "22023", "768 dimensions"),
    ("dna.search('s', repeat('x ', 6000), NULL, 'dna-fake-hash-v1')", "22001", "limit is 10000"),
    ("dna.search('s', 'x', NULL, 'dna-fake-hash-v1', k => -1)", "22023", "k must be"),
    ("dna.search('s', 'x', NULL, 'dna-fake-hash-v1', weights => '{1}')", "22023", "weights"),
    ("dna.search('s', 'x', NULL, 'dna-fake-hash-v1', tenant => 'personal:bob')", "42501", "reserved"),
    ("dna.rrf('{0}')", "22023", "1-based"),
    ("dna.rrf('{1,2}', '{1}')", "22023", "weights"),
    ("dna.rrf('{1}', NULL, 0)", "22023", "k must be"),
])
def test_bad_input_raises_clear_error_and_changes_nothing(stored, call, sqlstate, message):
    before = snapshot(stored)
    with pytest.raises(psycopg.Error) as err:
        stored.execute(f"SELECT * FROM {call}").fetchall()
    assert err.value.sqlstate == sqlstate, err.value
    assert message in str(err.value)
    assert snapshot(stored) == before


def test_zero_vector_is_stored_as_lexical_only(sql):
    res = sql.execute("SELECT dna.index_document('s', 'Doc', 'z', '!!! ???', dna.fake_embed('!!! ???'), %s)",
                      (MODEL,)).fetchone()[0]
    assert res["embedded"] is False


def test_client_batch_with_a_bad_record_writes_nothing_of_that_batch(client):
    client.index("s", [{"kind": "Doc", "name": "ok1", "body": "fine text"}])
    with pytest.raises(psycopg.Error):
        client.index("s", [{"kind": "Doc", "name": "ok2", "body": "fine"},
                           {"kind": "Doc", "name": "bad", "body": "   "}])
    assert client.search("s", "fine").names == ["ok1"]


# -- refusals that say what to do: SQLSTATE, a message naming the argument and the value, a HINT with the
#    valid range or values (issue 15; sql/search.sql, sql/search_support.sql, sql/fusion.sql, sql/receipts.sql)

SEARCH = "dna.search('s', 'rank fusion', NULL, 'dna-fake-hash-v1'"
RECALL = "dna.recall('s', 'rank fusion', NULL, 'dna-fake-hash-v1'"


@pytest.mark.parametrize("call,sqlstate,message,hint", [
    (f"{SEARCH}, k => 1001)", "22023", "k must be between 0 and 1000, got 1001", "0 to 1000"),
    (f"{SEARCH}, k => -1)", "22023", "got -1", "offset"),
    (f"{SEARCH}, \"offset\" => 9001)", "22023", "offset must be between 0 and 9000, got 9001", "(p - 1) * k"),
    (f"{SEARCH}, \"offset\" => -5)", "22023", "got -5", "0 to 9000"),
    (f"{SEARCH}, candidates => 0)", "22023", "candidates must be between 1 and 10000, got 0", "max(4k, 100)"),
    (f"{SEARCH}, min_similarity => 1.5)", "22023", "min_similarity must be a cosine between -1 and 1, got 1.5",
     "from -1 to 1"),
    (f"{SEARCH}, min_similarity => 'NaN')", "22023", "got NaN", "NULL: no floor"),
    (f"{SEARCH}, min_lexical_score => -0.5)", "22023", "min_lexical_score must be a finite BM25 score >= 0, got -0.5",
     "finite number >= 0"),
    (f"{SEARCH}, min_lexical_score => 'Infinity')", "22023", "got Infinity", "NULL: no floor"),
    (f"{SEARCH}, fusion => 'linear')", "22023", "fusion must be 'convex' or 'rrf', got 'linear'",
     "'convex' (dense_weight x normalised cosine + (1 - dense_weight) x normalised BM25) or 'rrf'"),
    (f"{SEARCH}, dense_weight => 1.2)", "22023", "dense_weight must be between 0 and 1", "from 0 (the lexical lane alone)"),
    (f"{SEARCH}, dense_weight => -0.1)", "22023", "got -0.1", "NULL: the scope's setting"),
    (f"{SEARCH}, weights => '{{1}}')", "22023", "weights must hold 2 values (dense, lexical), got 1", "'{1,1}'"),
    (f"{SEARCH}, weights => '{{-1,1}}')", "22023", "weights must be finite numbers >= 0, got {-1,1}", "0 turns the lane off"),
    ("dna.search('s', repeat('x ', 6000), NULL, 'dna-fake-hash-v1')", "22001",
     "query is 12000 characters long; the limit is 10000", "at most 10000 characters"),
    ("dna.search('s', 'x', NULL, repeat('m', 201))", "22001", "model_id is 201 characters long; the limit is 200",
     "at most 200 characters"),
    ("dna.search(repeat('s', 201), 'x')", "22001", "scope is 201 characters long; the limit is 200",
     "at most 200 characters"),
    ("dna.search('', 'x')", "22023", "scope is required (got '')", "non-blank"),
    (f"{RECALL}, k => 1001)", "22023", "k must be between 0 and 1000, got 1001", "0 to 1000"),
    (f"{RECALL}, decay => 'sometimes')", "22023", "decay must be surfaced, written or off, got 'sometimes'",
     "off: no decay"),
    ("dna.recall('s', repeat('x ', 6000))", "22001", "query is 12000 characters long; the limit is 10000",
     "at most 10000 characters"),
    ("dna.rrf('{1}', NULL, 0)", "22023", "k must be a finite number > 0, got 0", "60"),
    ("dna.rrf('{0}')", "22023", "ranks are 1-based, got 0", "NULL"),
])
def test_search_and_recall_refusals_name_the_argument_and_hint_the_range(stored, call, sqlstate, message, hint):
    before = snapshot(stored)
    with pytest.raises(psycopg.Error) as err:
        stored.execute(f"SELECT * FROM {call}").fetchall()
    diag = err.value.diag
    assert err.value.sqlstate == sqlstate, err.value
    assert message in diag.message_primary
    assert diag.message_hint and hint in diag.message_hint, diag.message_hint
    assert snapshot(stored) == before


def receipts(sql):
    return sql.execute("SELECT count(*) FROM dna.dna_search_receipts").fetchone()[0]


@pytest.mark.parametrize("verb,args,sqlstate,message,hint", [
    ("search", {"k": "ten"}, "22P02", 'args.k of dna.search must be integer, got "ten"', "a JSON number"),
    ("search", {"k": 99999999999}, "22003", "args.k of dna.search must be integer, got 99999999999", "a JSON number"),
    ("search", {"weights": [1, "a"]}, "22P02", 'args.weights of dna.search must be double precision[], got [1, "a"]',
     "a JSON array"),
    ("search", {"kinds": "Doc"}, "22P02", 'args.kinds of dna.search must be text[], got "Doc"', 'a JSON array'),
    ("search", {"valid_time": "yesterday-ish"}, "22007",
     'args.valid_time of dna.search must be timestamp with time zone, got "yesterday-ish"', "ISO 8601"),
    ("search", {"explain": "maybe"}, "22P02", 'args.explain of dna.take_receipt must be boolean, got "maybe"',
     "true or false"),
    ("search", {"query_embedding": "[1,2"}, "22P02", 'args.query_embedding of dna.search must be vector, got "[1,2"',
     "JSON array of numbers"),
    ("search", {"fusion": "linear"}, "22023", "fusion must be 'convex' or 'rrf', got 'linear'",
     "'convex' (dense_weight x normalised cosine + (1 - dense_weight) x normalised BM25) or 'rrf'"),
    ("search", {"kk": 3}, "22023", "dna.search has no argument 'kk'", "given beside"),
    ("recall", {"reconsolidate": "yes please"}, "22P02",
     'args.reconsolidate of dna.recall must be boolean, got "yes please"', "true or false"),
    ("recall", {"reconsolidate": True}, "22023", "reconsolidate must be false in a receipt", "leave it out"),
    ("recall", {"decay": "sometimes"}, "22023", "decay must be surfaced, written or off", "off: no decay"),
    ("lookup", {}, "22023", "verb must be search or recall, got 'lookup'", "read-only dna.recall"),
])
def test_take_receipt_refuses_a_malformed_argument_by_name(stored, verb, args, sqlstate, message, hint):
    from psycopg.types.json import Jsonb

    with pytest.raises(psycopg.Error) as err:
        stored.execute("SELECT dna.take_receipt(%s, %s)", (verb, Jsonb({"scope": "s", "query": "rank fusion", **args})))
    diag = err.value.diag
    assert err.value.sqlstate == sqlstate, err.value
    assert message in diag.message_primary, diag.message_primary
    assert diag.message_hint and hint in diag.message_hint, diag.message_hint
    assert receipts(stored) == 0


def test_take_receipt_args_that_are_not_an_object_get_a_hint(stored):
    with pytest.raises(psycopg.Error) as err:
        stored.execute("SELECT dna.take_receipt('search', '[1, 2]')")
    assert err.value.sqlstate == "22023"
    assert "args must be a JSON object of dna.search's named arguments, got array" in err.value.diag.message_primary
    assert '"scope"' in err.value.diag.message_hint


def test_replay_of_an_unknown_receipt_hints_where_receipts_are(stored):
    with pytest.raises(psycopg.Error) as err:
        stored.execute("SELECT dna.replay('00000000-0000-0000-0000-000000000000')")
    assert err.value.sqlstate == "P0002"
    assert "no receipt 00000000-0000-0000-0000-000000000000 visible" in err.value.diag.message_primary
    assert "dna_search_receipts" in err.value.diag.message_hint
