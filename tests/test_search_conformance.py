"""The search conformance cases of tests/data/conformance/README.md, run once through plain SQL and
once through the Python client. Both drivers answer the same questions the same way."""
from __future__ import annotations

import pytest

SCOPE = "search-conformance-kit"
MODEL = "dna-fake-hash-v1"
FIXTURE = [
    ("Story", "s-memory", "memory similarity vector embedding recall cognitive ecphory"),
    ("Story", "s-banana", "banana tropical yellow fruit smoothie breakfast"),
    ("Story", "s-fusion", "hybrid search fusion reciprocal rank bm25 dense lexical"),
    ("Genome", "g-root", "root genome package catalog identity"),
]


class SqlDriver:
    """Every call is one SQL statement, embeddings from dna.fake_embed: what psql, Go or Java would do."""

    def __init__(self, conn):
        self.conn = conn

    def index(self, records, tenant=""):
        actions = []
        for kind, name, body in records:
            row = self.conn.execute(
                "SELECT dna.index_document(%s, %s, %s, %s, dna.fake_embed(%s), %s, tenant => %s)",
                (SCOPE, kind, name, body, body, MODEL, tenant)).fetchone()
            actions.append(row[0]["action"])
        return actions

    def search(self, query, kind=None, k=10, tenant=""):
        return [dict(zip(("kind", "name", "tenant", "score", "similarity", "lexical_score",
                          "rank_dense", "rank_lexical", "scope"), r)) for r in self.conn.execute(
            "SELECT kind, name, tenant, score, similarity, lexical_score, rank_dense, rank_lexical, scope "
            "FROM dna.search(%s, %s, dna.fake_embed(%s), %s, k => %s, kinds => %s, tenant => %s)",
            (SCOPE, query, query, MODEL, k, [kind] if kind else None, tenant)).fetchall()]

    def delete(self, kind, name):
        return self.conn.execute("SELECT dna.delete_document(%s, %s, %s)", (SCOPE, kind, name)).fetchone()[0]


class ClientDriver:
    def __init__(self, client):
        self.client = client

    def index(self, records, tenant=""):
        before = self.client.index(SCOPE, [{"kind": k, "name": n, "body": b} for k, n, b in records], tenant=tenant)
        self.last_report = before
        return (["inserted"] * before.inserted + ["updated"] * before.updated
                + ["embedded"] * before.embedded + ["unchanged"] * before.unchanged)

    def search(self, query, kind=None, k=10, tenant=""):
        result = self.client.search(SCOPE, query, kind=kind, k=k, tenant=tenant)
        assert result.degraded is False
        return [h.__dict__ for h in result.hits]

    def delete(self, kind, name):
        return self.client.delete(SCOPE, kind, name)


@pytest.fixture(params=["sql", "client"])
def driver(request):
    if request.param == "sql":
        return SqlDriver(request.getfixturevalue("sql"))
    return ClientDriver(request.getfixturevalue("client"))


@pytest.fixture
def indexed(driver):
    assert driver.index(FIXTURE) == ["inserted"] * 4
    return driver


def names(hits):
    return [h["name"] for h in hits]


def test_1_memory_query_ranks_memory_story_first(indexed):
    hits = indexed.search("memory recall cognitive")
    assert hits and hits[0]["name"] == "s-memory"
    for h in hits:
        assert h["scope"] == SCOPE and h["kind"] and h["name"] and isinstance(h["score"], float)


def test_2_banana_query_ranks_banana_above_memory(indexed):
    order = names(indexed.search("banana fruit smoothie"))
    assert order[0] == "s-banana"
    if "s-memory" in order:
        assert order.index("s-banana") < order.index("s-memory")


def test_3_raw_scores_travel_with_ranks(indexed):
    hits = indexed.search("hybrid fusion rank")
    dense = sorted((h for h in hits if h["rank_dense"] is not None), key=lambda h: h["rank_dense"])
    lexical = sorted((h for h in hits if h["rank_lexical"] is not None), key=lambda h: h["rank_lexical"])
    assert dense and lexical
    sims = [h["similarity"] for h in dense]
    assert all(-1.0 <= s <= 1.0 for s in sims)
    assert sims == sorted(sims, reverse=True)                     # cosine agrees with the dense rank
    scores = [h["lexical_score"] for h in lexical]
    assert scores == sorted(scores, reverse=True)                 # lexical score agrees with its rank
    fused = [h["score"] for h in hits]
    assert fused == sorted(fused, reverse=True)


def test_4_kind_filter(indexed):
    assert names(indexed.search("root genome memory banana", kind="Genome")) == ["g-root"]


def test_5_k_limits_hits(indexed):
    assert len(indexed.search("memory banana fusion genome", k=2)) == 2
    assert len(indexed.search("memory banana fusion genome", k=1)) == 1


@pytest.mark.parametrize("query", ["", "   ", "\n\t"])
def test_6_blank_query_returns_no_hits(indexed, query):
    assert indexed.search(query) == []


def test_7_indexing_twice_changes_nothing(indexed, driver):
    first = indexed.search("memory recall cognitive")
    assert driver.index(FIXTURE) == ["unchanged"] * 4
    if isinstance(driver, ClientDriver):
        assert driver.last_report.embedded_texts == 0          # nothing re-embedded
    assert indexed.search("memory recall cognitive") == first


def test_8_delete_removes_from_both_lanes(indexed):
    assert "s-banana" in names(indexed.search("banana fruit smoothie"))
    assert indexed.delete("Story", "s-banana") == 1
    hits = indexed.search("banana fruit smoothie")
    assert "s-banana" not in names(hits)
    assert all(h["rank_lexical"] is None for h in hits)          # no other doc matches these words
    assert indexed.delete("Story", "s-banana") == 0


def test_9_tenant_row_shadows_base_row_for_that_tenant_only(indexed, driver):
    driver.index([("Story", "s-banana", "banana split dessert for tenant acme")], tenant="acme")
    acme = [h for h in indexed.search("banana", tenant="acme") if h["name"] == "s-banana"]
    assert len(acme) == 1 and acme[0]["tenant"] == "acme"
    base = [h for h in indexed.search("banana") if h["name"] == "s-banana"]
    assert len(base) == 1 and base[0]["tenant"] == ""
    other = [h for h in indexed.search("banana", tenant="globex") if h["name"] == "s-banana"]
    assert len(other) == 1 and other[0]["tenant"] == ""
    assert "dessert" not in str(indexed.search("dessert", tenant="globex"))


def test_model_without_documents_in_scope_says_so(sql, client):
    """An empty answer because nothing was indexed with that model is not "no match": SQL raises a
    NOTICE naming the model_ids that do have documents, and the client surfaces it."""
    sql.execute("SELECT dna.register_model('other-model', 384)")
    SqlDriver(sql).index(FIXTURE)
    notices = []
    sql.add_notice_handler(lambda d: notices.append(d.message_primary))
    assert sql.execute("SELECT count(*) FROM dna.search(%s, 'memory', model_id => 'other-model')",
                       (SCOPE,)).fetchone()[0] == 0
    assert len(notices) == 1
    assert "no documents for model_id 'other-model'" in notices[0] and "dna-fake-hash-v1 (4 documents)" in notices[0]
    result = client.search(SCOPE, "memory", model_id="other-model")
    assert result.hits == [] and result.notices == notices
    assert client.search(SCOPE, "memory").notices == []
