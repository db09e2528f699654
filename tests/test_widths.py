"""Width routing: the table is chosen by the vector's width; model_ids never mix; an unknown width
fails, names the migration to write, and creates nothing."""
from __future__ import annotations

import psycopg
import pytest

from pydna.embeddings import FakeEmbeddingProvider

WIDTHS = (384, 768, 1024, 1536, 3072)


def counts(sql):
    return {w: sql.execute(f"SELECT count(*) FROM dna.dna_search_docs_{w}").fetchone()[0] for w in WIDTHS}


@pytest.mark.parametrize("dims", WIDTHS)
def test_routing_by_width(sql, dims):
    model = f"fake-{dims}"
    res = sql.execute("SELECT dna.index_document('s', 'Doc', 'd1', 'reciprocal rank fusion', "
                      "dna.fake_embed('reciprocal rank fusion', %s), %s)", (dims, model)).fetchone()[0]
    assert res["table"] == f"dna.dna_search_docs_{dims}"
    assert counts(sql) == {w: int(w == dims) for w in WIDTHS}
    hits = sql.execute("SELECT name, similarity, rank_dense FROM dna.search('s', 'rank fusion', "
                       "dna.fake_embed('rank fusion', %s), %s)", (dims, model)).fetchall()
    assert hits[0][0] == "d1" and hits[0][2] == 1 and hits[0][1] > 0.5


def test_3072_uses_halfvec_index_and_full_precision_rescoring(sql):
    sql.execute("SELECT dna.index_document('s', 'Doc', 'd', 'alpha beta', dna.fake_embed('alpha beta', 3072), 'big')")
    idx = sql.execute("SELECT indexdef FROM pg_indexes WHERE tablename = 'dna_search_docs_3072' "
                      "AND indexname LIKE '%hnsw'").fetchone()[0]
    assert "halfvec(3072)" in idx and "halfvec_cosine_ops" in idx
    sim = sql.execute("SELECT similarity FROM dna.search('s', 'alpha beta', dna.fake_embed('alpha beta', 3072), 'big')"
                      ).fetchone()[0]
    assert sim == pytest.approx(1.0, abs=1e-6)


def test_same_width_other_model_never_mixes(sql):
    for model, body in [("model-a", "apples and pears"), ("model-b", "apples and oranges")]:
        sql.execute("SELECT dna.index_document('s', 'Doc', %s, %s, dna.fake_embed(%s), %s)",
                    (model + "-doc", body, body, model))
    for model in ("model-a", "model-b"):
        names = [r[0] for r in sql.execute(
            "SELECT name FROM dna.search('s', 'apples', dna.fake_embed('apples'), %s)", (model,))]
        assert names == [model + "-doc"]
    # Even lexical-only reads stay inside the model's rows.
    names = [r[0] for r in sql.execute("SELECT name FROM dna.search('s', 'apples', model_id => 'model-a')")]
    assert names == ["model-a-doc"]


def test_model_registered_with_one_width_refuses_another(sql):
    sql.execute("SELECT dna.index_document('s', 'Doc', 'a', 'x y', dna.fake_embed('x y', 384), 'm')")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="registered with 384"):
        sql.execute("SELECT dna.index_document('s', 'Doc', 'b', 'x y', dna.fake_embed('x y', 768), 'm')")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="registered with 384"):
        sql.execute("SELECT * FROM dna.search('s', 'x', dna.fake_embed('x', 768), 'm')")


def test_unknown_width_fails_names_migration_and_creates_nothing(sql):
    before_tables = sql.execute("SELECT count(*) FROM pg_class WHERE relnamespace = 'dna'::regnamespace").fetchone()[0]
    before_models = sql.execute("SELECT count(*) FROM dna.dna_models").fetchone()[0]
    with pytest.raises(psycopg.errors.UndefinedTable) as err:
        sql.execute("SELECT dna.index_document('s', 'Doc', 'a', 'text', dna.fake_embed('text', 512), 'w512')")
    assert "width 512" in str(err.value)
    assert "dna_search_docs_512" in err.value.diag.message_hint and "migration" in err.value.diag.message_hint
    with pytest.raises(psycopg.errors.UndefinedTable):
        sql.execute("SELECT dna.register_model('w512', 512)")
    assert sql.execute("SELECT count(*) FROM pg_class WHERE relnamespace = 'dna'::regnamespace").fetchone()[0] == before_tables
    assert sql.execute("SELECT count(*) FROM dna.dna_models").fetchone()[0] == before_models
    assert sum(counts(sql).values()) == 0


def test_client_routes_by_provider_width(dna_dsn):
    import pydna

    with pydna.connect(dna_dsn, embedder=FakeEmbeddingProvider(dims=768)) as c:
        report = c.index("s", [{"kind": "Doc", "name": "n", "body": "wide vectors"}])
        assert report.tables == {"dna.dna_search_docs_768"}
        assert c.search("s", "wide").names == ["n"]
