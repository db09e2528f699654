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
