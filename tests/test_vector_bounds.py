"""Vectors beyond the halfvec range (issue 13 item 2). The 3072-d table is indexed as halfvec(3072), whose
cast raised 22003 for a component beyond ±65504 while 384-d took it. The document door now stores such
a vector at unit length (dna.storable_vector): cosine is scale-invariant, so every similarity and
ranking is the one of the vector given, at every width alike. NaN / infinite components are refused
by pgvector as the value is read (22000), before any door runs, and nothing is written."""
from __future__ import annotations

import math
import uuid

import psycopg
import pytest
from psycopg.types.json import Jsonb

MODELS = {384: "dna-fake-hash-v1", 3072: "big-3072"}


def _vec(sql, text, dims, spike):
    """dna.fake_embed(text, dims) with component 0 set to spike, as pgvector text."""
    v = sql.execute("SELECT dna.fake_embed(%s, %s)::real[]", (text, dims)).fetchone()[0]
    v[0] = spike
    return "[" + ",".join(repr(float(x)) for x in v) + "]"


def _cos(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


@pytest.mark.parametrize("dims", [384, 3072])
def test_beyond_halfvec_range_is_stored_at_unit_length_at_every_door(sql, dims):
    model = MODELS[dims]
    big = _vec(sql, "alpha beta", dims, 70000.0)
    if dims == 3072:  # the premise: the halfvec cast itself refuses it
        with pytest.raises(psycopg.errors.NumericValueOutOfRange):
            sql.execute("SELECT %s::vector::halfvec", (big,))
    sql.execute("SELECT dna.index_document('one', 'Doc', 'd', 'alpha beta', %s::vector, %s)", (big, model))
    sql.execute("SELECT * FROM dna.index_documents('many', ARRAY['Doc'], ARRAY['d'], ARRAY['alpha beta'], "
                "ARRAY[%s::vector], %s)", (big, model))
    with sql.transaction():
        batch = uuid.uuid4()
        with sql.cursor().copy("COPY dna.dna_index_staging (batch, ord, kind, name, body, embedding) FROM STDIN") as copy:
            copy.write_row((batch, 1, "Doc", "d", "alpha beta", big))
        sql.execute("SELECT * FROM dna.index_staged('staged', %s, %s)", (batch, model))
    sql.execute("SELECT dna.remember('mem', %s, name => 'd', embedding => %s::vector, model_id => %s)",
                (Jsonb({"summary": "alpha beta"}), big, model))
    given = [float(x) for x in big.strip("[]").split(",")]
    query = _vec(sql, "alpha gamma", dims, 0.5)
    q = [float(x) for x in query.strip("[]").split(",")]
    for scope, kind in (("one", "Doc"), ("many", "Doc"), ("staged", "Doc"), ("mem", "Engram")):
        norm, first = sql.execute(f"SELECT vector_norm(embedding), (embedding::real[])[1] FROM dna.dna_search_docs_{dims} "
                                  "WHERE scope = %s AND name = 'd'", (scope,)).fetchone()
        assert abs(norm - 1) < 1e-5 and abs(first - 70000 / math.sqrt(sum(x * x for x in given))) < 1e-5
        hit = sql.execute("SELECT similarity FROM dna.search(%s, 'alpha', %s::vector, %s, k => 3, kinds => ARRAY[%s])",
                          (scope, query, model, kind)).fetchone()
        assert hit is not None and abs(hit[0] - _cos(given, q)) < 1e-5, scope


def test_in_range_vectors_are_stored_as_given(sql):
    v = _vec(sql, "alpha beta", 3072, 65504.0)                 # the largest finite halfvec: in range
    sql.execute("SELECT dna.index_document('s', 'Doc', 'd', 'alpha beta', %s::vector, 'big-3072')", (v,))
    assert sql.execute("SELECT embedding = %s::vector FROM dna.dna_search_docs_3072 WHERE name = 'd'", (v,)).fetchone()[0]
    assert sql.execute("SELECT dna.storable_vector(NULL) IS NULL").fetchone()[0]


@pytest.mark.parametrize("bad", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinite_components_are_refused_before_any_write(sql, bad):
    text = "[" + ",".join(["0.1"] * 383 + [bad]) + "]"
    with pytest.raises(psycopg.errors.DataException, match="not allowed in vector"):
        sql.execute("SELECT dna.index_document('s', 'Doc', 'd', 'alpha', %s::vector, 'dna-fake-hash-v1')", (text,))
    with pytest.raises(psycopg.errors.DataException, match="not allowed in vector"):
        sql.execute("SELECT dna.remember('s', %s, name => 'd', embedding => %s::vector)", (Jsonb({"summary": "alpha"}), text))
    with pytest.raises(psycopg.errors.DataException, match="not allowed in vector"):
        with sql.transaction():
            with sql.cursor().copy("COPY dna.dna_index_staging (batch, ord, kind, name, body, embedding) FROM STDIN") as copy:
                copy.write_row((uuid.uuid4(), 1, "Doc", "d", "alpha", text))
    assert sql.execute("SELECT count(*) FROM dna.dna_search_docs_384").fetchone()[0] == 0
    assert sql.execute("SELECT count(*) FROM dna.dna_instances WHERE scope = 's'").fetchone()[0] == 0
