"""Text too long for a tsvector (issue 13 item 2). PostgreSQL refuses a tsvector past 1 MB of lexemes
and positions (54000 "string is too long for tsvector"); a body of random words under the documented
1,000,000-byte limit passes it. dna.text_tsvector (sql/catalog.sql) bounds every tsvector the package
makes: the text's own when it fits, else its longest prefix that fits. These write a 720 KB body of
random words (which to_tsvector itself refuses) and bodies at the limit through every entry point."""
from __future__ import annotations

import random
import string

import psycopg
import psycopg.types.json
import pytest

LIMIT = 1_000_000          # bytes per document (dna.index_document, dna.index_documents, index_staged)


def random_words(nbytes: int, seed: int = 1, lo: int = 4, hi: int = 6) -> str:
    """Lowercase random words of lo..hi letters, space-separated, exactly nbytes long (ASCII)."""
    rng = random.Random(seed)
    out, n = [], 0
    while n < nbytes:
        w = "".join(rng.choices(string.ascii_lowercase, k=rng.randint(lo, hi)))
        out.append(w)
        n += len(w) + 1
    return " ".join(out)[:nbytes]


BODY_720K = random_words(720_000)


def test_the_720k_body_is_too_long_for_a_plain_tsvector(sql):
    # The premise: PostgreSQL itself refuses it (so the tests below would fail without the bound).
    with pytest.raises(psycopg.errors.ProgramLimitExceeded, match="too long for tsvector"):
        sql.execute("SELECT to_tsvector('english', %s)", (BODY_720K,))


def test_text_tsvector_is_bounded_and_exact_when_it_fits(sql):
    short = "the office is in lisbon " * 100
    assert sql.execute("SELECT dna.text_tsvector('english', %s) = to_tsvector('english', %s)",
                       (short, short)).fetchone()[0]
    assert sql.execute("SELECT dna.text_tsvector('english', NULL) IS NULL").fetchone()[0]
    for body in (BODY_720K, random_words(LIMIT, seed=2)):
        # head_fits: every lexeme of the first 100,000 characters is in t. A set difference (hashed),
        # not array @> (a nested loop over ~20,000 x ~110,000 lexemes: 30 s per body).
        tsv_bytes, first_in, head_fits = sql.execute(
            "SELECT pg_column_size(t), t @@ to_tsquery('english', %s), "
            "NOT EXISTS (SELECT unnest(tsvector_to_array(to_tsvector('english', left(%s, 100000)))) "
            "            EXCEPT SELECT unnest(tsvector_to_array(t))) "
            "FROM dna.text_tsvector('english', %s) AS t", (body.split()[0], body, body)).fetchone()
        assert tsv_bytes > 500_000 and first_in and head_fits


def test_lexical_query_never_raises_on_a_long_query(sql):
    for body in (BODY_720K, random_words(LIMIT, seed=3)):
        n = sql.execute("SELECT numnode(dna.lexical_query(%s, 'english'))", (body,)).fetchone()[0]
        assert n == 2 * 10000 - 1                      # the first 10000 lexemes, OR-ed
        first = body.split()[0]
        assert sql.execute("SELECT to_tsvector('english', %s) @@ dna.lexical_query(%s, 'english')",
                           (first, body)).fetchone()[0]


def test_bm25_never_raises_on_a_long_query(sql):
    sql.execute("SELECT dna.index_documents('docs', ARRAY['Doc','Doc'], ARRAY['a','b'], %s, NULL, 'dna-fake-hash-v1')",
                (["alpha beta gamma " + BODY_720K[:50], "beta delta"],))
    for query in ("beta " + BODY_720K, "alpha " + random_words(LIMIT, seed=5)):
        hits = sql.execute("SELECT name FROM dna.bm25('docs', %s, 'dna-fake-hash-v1') ORDER BY score DESC",
                           (query,)).fetchall()
        assert hits and hits[0][0] in ("a", "b")
    assert len(sql.execute("SELECT dna.bm25_terms(%s, 'english')", (BODY_720K,)).fetchone()[0]) > 1000


MODEL = "dna-fake-hash-v1"


def _found(sql, scope, word, kind="Doc"):
    """Names the lexical lane finds for a word, in scope."""
    return {r[0] for r in sql.execute("SELECT name FROM dna.search(%s, %s, NULL, %s, k => 10, kinds => ARRAY[%s])",
                                      (scope, word, MODEL, kind))}


@pytest.mark.parametrize("nbytes", [720_000, LIMIT])
def test_document_door_indexes_long_bodies(sql, nbytes):
    body = BODY_720K if nbytes == 720_000 else random_words(LIMIT, seed=6)
    assert len(body.encode()) == nbytes
    first = body.split()[0]
    one = sql.execute("SELECT dna.index_document('one', 'Doc', 'big', %s, NULL, %s)", (body, MODEL)).fetchone()[0]
    assert one["action"] == "inserted"
    got = sql.execute("SELECT action FROM dna.index_documents('many', ARRAY['Doc','Doc'], ARRAY['big','small'], %s, "
                      "NULL, %s) ORDER BY ord", ([body, "harbor quartz"], MODEL)).fetchall()
    assert got == [("inserted",), ("inserted",)]
    with sql.transaction():
        import uuid
        batch = uuid.uuid4()
        with sql.cursor().copy("COPY dna.dna_index_staging (batch, ord, kind, name, body) FROM STDIN") as copy:
            copy.write_row((batch, 1, "Doc", "big", body))
        got = sql.execute("SELECT action FROM dna.index_staged('staged', %s, %s)", (batch, MODEL)).fetchall()
    assert got == [("inserted",)]
    for scope in ("one", "many", "staged"):
        assert "big" in _found(sql, scope, first), scope
        # The stored tsvector is bounded, and the BM25 state agrees with it.
        assert sql.execute("SELECT pg_column_size(tsv) <= 1048575 + 4 * 200000 FROM dna.dna_search_docs_384 "
                           "WHERE scope = %s AND name = 'big'", (scope,)).fetchone()[0]
    report = sql.execute("SELECT dna.verify_integrity('many', mode => 'full')").fetchone()[0]
    assert report["ok"] is True, report


def test_document_door_refuses_past_the_limit(sql):
    with pytest.raises(psycopg.errors.StringDataRightTruncation, match="1000000 bytes"):
        sql.execute("SELECT dna.index_document('one', 'Doc', 'big', %s, NULL, %s)", ("a" + random_words(LIMIT), MODEL))


@pytest.mark.parametrize("nbytes", [720_000, LIMIT])
def test_remember_takes_a_long_body(sql, nbytes):
    summary = "a long note"
    body = random_words(nbytes - len(summary) - 1, seed=7)
    assert sql.execute("SELECT octet_length(dna.memory_text('Engram', %s))",
                       (psycopg.types.json.Jsonb({"summary": summary, "body": body}),)).fetchone()[0] == nbytes
    got = sql.execute("SELECT dna.remember('team', %s, name => 'long', model_id => %s)",
                      (psycopg.types.json.Jsonb({"summary": summary, "body": body}), MODEL)).fetchone()[0]
    assert got["action"] == "created"
    first = body.split()[0]
    hits = sql.execute("SELECT dna.recall('team', %s, reconsolidate => false)", (first,)).fetchone()[0]["hits"]
    assert [h["name"] for h in hits] == ["long"]
    assert sql.execute("SELECT text_tsv @@ to_tsquery('english', %s) FROM dna.dna_versions WHERE name = 'long'",
                       (first,)).fetchone()[0]
