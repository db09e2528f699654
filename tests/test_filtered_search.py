"""A filter that keeps 1% of 5,000 rows still yields k hits: filters run inside each lane and the
HNSW lane uses pgvector's iterative index scans instead of stopping at ef_search candidates (100, the
lane's depth for k = 10, gives about one match among them, as test_without_iterative_scans_the_filter_would_starve
shows; the lane's own ef_search is dna.hnsw_ef_search(k, depth), 400 there)."""
from __future__ import annotations

import psycopg
import pytest

ROWS = 5_000
MODEL = "dna-fake-hash-v1"


@pytest.fixture(scope="module")
def big_db(pg_server, dna_template):
    """One database for the module: loading 5,000 rows once keeps the suite fast."""
    name = f"dna_big_{id(pg_server)}"
    with pg_server.janitor(name, template=dna_template):
        with psycopg.connect(pg_server.dsn(name), autocommit=True) as conn:
            yield _load(conn)


@pytest.fixture
def big(big_db):
    return big_db


def _load(sql):
    # Direct bulk insert of random unit vectors (a fixture shortcut; search is what is under test).
    # The HNSW index is rebuilt after the load: one bulk build is far faster than 5,000 inserts.
    sql.execute("SELECT setseed(0.42)")
    sql.execute("DROP INDEX dna.dna_search_docs_384_embedding_hnsw")
    sql.execute(f"""
        INSERT INTO dna.dna_search_docs_384 (scope, kind, name, model_id, text_hash, body, embedding)
        SELECT 'big', CASE WHEN g % 100 = 0 THEN 'Rare' ELSE 'Common' END,
               CASE WHEN g % 100 = 7 THEN 'rare/' ELSE 'doc/' END || g,
               '{MODEL}', md5(g::text), 'document number ' || g || ' about topic ' || (g % 37),
               (SELECT l2_normalize(array_agg(random() - 0.5)::vector) FROM generate_series(1, 384) WHERE g > 0)
        FROM generate_series(1, {ROWS}) AS g""")
    sql.execute("SET maintenance_work_mem = '256MB'")
    sql.execute("CREATE INDEX dna_search_docs_384_embedding_hnsw ON dna.dna_search_docs_384 "
                "USING hnsw (embedding vector_cosine_ops)")
    sql.execute("ANALYZE dna.dna_search_docs_384")
    return sql


QUERY_VEC = "(SELECT l2_normalize(array_agg(sin(i))::vector) FROM generate_series(1, 384) AS i)"


# The planner may serve a very selective filter from a btree or a seq scan; "forced" takes those
# plans away (inside a transaction that is rolled back) so the HNSW path — iterative scan plus
# filter — is the one under test.
def force_hnsw(conn) -> None:
    conn.execute("SET LOCAL enable_seqscan = off")
    conn.execute("SET LOCAL enable_bitmapscan = off")
    for (constraint,) in conn.execute(
            "SELECT conname FROM pg_constraint WHERE conrelid = 'dna.dna_search_docs_384'::regclass "
            "AND contype IN ('u', 'p')").fetchall():
        conn.execute(f"ALTER TABLE dna.dna_search_docs_384 DROP CONSTRAINT {constraint} CASCADE")
    for (index,) in conn.execute(
            "SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = 'dna.dna_search_docs_384'::regclass "
            "AND indexrelid::regclass::text NOT LIKE '%hnsw'").fetchall():
        conn.execute(f"DROP INDEX {index}")


class Rollback(Exception):
    pass


@pytest.mark.parametrize("force", [False, True], ids=["planner", "forced-hnsw"])
@pytest.mark.parametrize("filter_sql,check", [
    ("kinds => '{Rare}'", lambda kind, name: kind == "Rare"),
    ("name_prefix => 'rare/'", lambda kind, name: name.startswith("rare/")),
], ids=["kind", "name_prefix"])
def test_selective_filter_still_returns_k_dense_hits(big, filter_sql, check, force):
    assert big.execute("SELECT count(*) FROM dna.dna_search_docs_384 WHERE kind = 'Rare'").fetchone()[0] == ROWS // 100
    with pytest.raises(Rollback), big.transaction():
        if force:
            force_hnsw(big)
        rows = big.execute(f"SELECT kind, name, rank_dense FROM dna.search('big', 'zzzz', {QUERY_VEC}, '{MODEL}', "
                           f"k => 10, {filter_sql})").fetchall()
        raise Rollback
    assert len(rows) == 10
    assert all(check(kind, name) for kind, name, _ in rows)
    assert [r[2] for r in rows] == list(range(1, 11))


def test_without_iterative_scans_the_filter_would_starve(big):
    """The premise: the HNSW scan that stops at ef_search candidates (100, the lane's depth for k = 10)
    finds fewer than k rows of the 1% kind, so the k hits above come from the iterative scan."""
    with pytest.raises(Rollback), big.transaction():
        force_hnsw(big)
        big.execute("SET LOCAL hnsw.iterative_scan = off")
        big.execute("SET LOCAL hnsw.ef_search = 100")
        rows = big.execute(f"SELECT name FROM dna.dna_search_docs_384 AS t WHERE t.scope = 'big' AND t.kind = 'Rare' "
                           f"ORDER BY t.embedding <=> {QUERY_VEC} LIMIT 10").fetchall()
        raise Rollback
    assert len(rows) < 10


def test_hnsw_index_is_used_by_the_dense_lane(big):
    with pytest.raises(Rollback), big.transaction():
        force_hnsw(big)
        plan = "\n".join(r[0] for r in big.execute(
            f"EXPLAIN SELECT name FROM dna.dna_search_docs_384 AS t WHERE t.scope = 'big' AND t.model_id = '{MODEL}' "
            f"AND starts_with(t.name, 'rare/') ORDER BY t.embedding <=> {QUERY_VEC} LIMIT 40"))
        raise Rollback
    assert "dna_search_docs_384_embedding_hnsw" in plan, plan


def test_dense_results_match_exact_knn_on_filtered_rows(big):
    exact = [r[0] for r in big.execute(
        f"SELECT name FROM dna.dna_search_docs_384 WHERE kind = 'Rare' "
        f"ORDER BY embedding <=> {QUERY_VEC}, name LIMIT 10")]
    got = [r[0] for r in big.execute(
        f"SELECT name FROM dna.search('big', 'zzzz', {QUERY_VEC}, '{MODEL}', k => 10, kinds => '{{Rare}}') "
        f"ORDER BY rank_dense")]
    assert len(set(got) & set(exact)) >= 9
