"""Query vs document embeddings (issue 15 item 4): a provider's role prefixes (e5 "query: " /
"passage: ") are applied by purpose, recorded with the model_id in dna_models, and a model_id is never
written or searched with other prefixes; MiniLM and the fake have none and give the same vectors."""
from __future__ import annotations

import psycopg
import pytest

import pydna
from pydna.embeddings import FakeEmbeddingProvider, embed_for, role_prefix


class PrefixedFake(FakeEmbeddingProvider):
    """The fake hashing behind e5's role prefixes: a query and a document of one text differ."""

    def __init__(self, model_id="fake-e5-roles", query_prefix="query: ", document_prefix="passage: "):
        super().__init__()
        self.model_id = model_id
        self.query_prefix, self.document_prefix = query_prefix, document_prefix


def test_embed_for_puts_the_role_prefix_before_the_text():
    port = PrefixedFake()
    assert list(embed_for(port, ["red fox"], "query")[0]) == list(port.embed(["query: red fox"])[0])
    assert list(embed_for(port, ["red fox"], "document")[0]) == list(port.embed(["passage: red fox"])[0])
    with pytest.raises(ValueError, match="purpose"):
        embed_for(port, ["x"], "answer")


def test_no_prefixes_give_todays_vectors():
    fake = FakeEmbeddingProvider()
    assert role_prefix(fake, "query") == role_prefix(fake, "document") == ""
    for purpose in ("query", "document"):
        assert [list(v) for v in embed_for(fake, ["a b", "c"], purpose)] == [list(v) for v in fake.embed(["a b", "c"])]


def test_minilm_has_no_prefixes_and_the_same_vectors():
    pytest.importorskip("onnxruntime")
    from pydna.embeddings import OnnxEmbeddingProvider

    try:
        onnx = OnnxEmbeddingProvider(allow_download=False)
        texts = ["what causes tides", "The moon's gravity pulls the oceans."]
        plain = onnx.embed(texts)
    except pydna.embeddings.EmbeddingError as exc:  # pragma: no cover - no model installed
        pytest.fail(f"the offline MiniLM is part of the dev install: {exc}")
    assert "roles" not in onnx.model_id and onnx.query_prefix == onnx.document_prefix == ""
    for purpose in ("query", "document"):
        assert embed_for(onnx, texts, purpose).tobytes() == plain.tobytes()
    e5ish = OnnxEmbeddingProvider(allow_download=False, query_prefix="query: ", document_prefix="passage: ")
    assert e5ish.model_id.startswith(onnx.model_id + "+roles-")      # another embedding space


def test_registry_records_prefixes_and_refuses_others(sql):
    got = sql.execute("SELECT dna.register_model('e5-like', 384, NULL, 'query: ', 'passage: ')").fetchone()[0]
    assert (got["query_prefix"], got["document_prefix"]) == ("query: ", "passage: ")
    assert sql.execute("SELECT dna.register_model('e5-like', 384)").fetchone()[0]["query_prefix"] == "query: "
    with pytest.raises(psycopg.Error) as err:
        sql.execute("SELECT dna.register_model('e5-like', 384, NULL, '', '')")
    assert err.value.sqlstate == "22023" and "role prefixes" in err.value.diag.message_primary
    assert sql.execute("SELECT * FROM dna.model_prefixes('dna-fake-hash-v1')").fetchall() in ([], [("", "")])
    sql.execute("SELECT dna.register_model('plain', 384)")
    assert sql.execute("SELECT * FROM dna.model_prefixes('plain')").fetchall() == [("", "")]


def test_client_indexes_documents_and_searches_queries_by_purpose(dna_dsn, sql):
    port = PrefixedFake()
    with pydna.connect(dna_dsn, embedder=port) as client:
        client.index("roles", [{"kind": "Doc", "name": "fox", "body": "red fox jumps"}])
        stored = sql.execute("SELECT embedding::text = dna.fake_embed('passage: red fox jumps')::text "
                             "FROM dna.dna_search_docs_384 WHERE scope = 'roles'").fetchone()[0]
        assert stored is True                                           # the document prefix
        hit = client.search("roles", "red fox", fusion="rrf").hits[0]
        expected = sql.execute("SELECT 1 - (dna.fake_embed('passage: red fox jumps') <=> dna.fake_embed('query: red fox'))"
                               ).fetchone()[0]
        assert hit.similarity == pytest.approx(expected, abs=1e-9)      # the query prefix
    assert sql.execute("SELECT * FROM dna.model_prefixes('fake-e5-roles')").fetchall() == [("query: ", "passage: ")]
    # The same model_id with other prefixes is refused: writing and searching.
    other = PrefixedFake(query_prefix="", document_prefix="")
    with pydna.connect(dna_dsn, embedder=other) as client:
        with pytest.raises(psycopg.Error) as err:
            client.index("roles", [{"kind": "Doc", "name": "cat", "body": "a cat"}])
        assert err.value.sqlstate == "22023"
        with pytest.raises(ValueError, match="role prefixes"):
            client.search("roles", "red fox")


def test_memory_embeds_documents_and_queries_for_their_purpose(dna_dsn):
    seen: list[str] = []

    class Logging(PrefixedFake):
        def embed(self, texts):
            seen.extend(texts)
            return super().embed(texts)

    port = Logging(model_id="fake-e5-memory")
    with pydna.connect(dna_dsn, embedder=port) as client:
        client.memory.remember("purpose", "the red fox jumps", name="fox")
        assert seen[-1] == "passage: the red fox jumps"
        same = client.conn.execute(
            "SELECT embedding = dna.fake_embed('passage: the red fox jumps') FROM dna.dna_search_docs_384 "
            "WHERE scope = 'purpose' AND name = 'fox'").fetchone()[0]
        assert same
        client.memory.recall("purpose", "red fox", reconsolidate=False)
        assert seen[-1] == "query: red fox"
        row = client.conn.execute("SELECT query_prefix, document_prefix FROM dna.model_prefixes('fake-e5-memory')").fetchone()
        assert tuple(row) == ("query: ", "passage: ")


def test_reindex_embeds_memories_as_documents(sql, dna_dsn):
    """dna reindex writes what Client.memory would: the memory text behind the document prefix, and
    the model registered with both prefixes."""
    from psycopg.types.json import Jsonb

    from pydna.reindex import reindex

    sql.execute("SELECT dna.remember('reidx', %s, name => 'fox')", (Jsonb({"summary": "the red fox jumps"}),))
    with psycopg.connect(dna_dsn, autocommit=True) as conn:
        got = reindex(conn, "reidx", PrefixedFake(model_id="fake-e5-reindex"))
    assert got["written"] == 1
    same = sql.execute("SELECT embedding = dna.fake_embed('passage: ' || body) FROM dna.dna_search_docs_384 "
                       "WHERE scope = 'reidx' AND name = 'fox' AND model_id = 'fake-e5-reindex'").fetchone()[0]
    assert same is True
    row = sql.execute("SELECT query_prefix, document_prefix FROM dna.model_prefixes('fake-e5-reindex')").fetchone()
    assert tuple(row) == ("query: ", "passage: ")
