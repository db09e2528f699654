"""BM25 lexical lane (sql/bm25.sql), tested through plain SQL.

The reference is a direct Python computation of Okapi BM25 with Lucene's idf,
ln(1 + (N - df + 0.5)/(df + 0.5)), over hand-tokenized documents (the tokens of each document under
the `simple` configuration are written out below, and those under `english` are checked against
to_tsvector first).
"""
from __future__ import annotations

import math

import pytest

MODEL = "dna-fake-hash-v1"  # registered by revision 0001; documents indexed without vectors
K1, B = 1.2, 0.4             # the built-in BM25 defaults (sql/bm25.sql)


def bm25_reference(docs: dict[str, list[str]], query_terms: list[str], k1: float, b: float) -> dict[str, float]:
    n = len(docs)
    avg = sum(len(t) for t in docs.values()) / n
    terms = sorted(set(query_terms))
    df = {t: sum(1 for toks in docs.values() if t in toks) for t in terms}
    out: dict[str, float] = {}
    for name, toks in docs.items():
        score, hit = 0.0, False
        for t in terms:
            tf = toks.count(t)
            if tf == 0:
                continue
            hit = True
            idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
            score += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(toks) / avg))
        if hit:
            out[name] = score
    return out


def index(sql, scope: str, name: str, body: str, tenant: str = "", title: str | None = None, kind: str = "Doc"):
    return sql.execute("SELECT dna.index_document(%s, %s, %s, %s, NULL, %s, %s, %s)",
                       (scope, kind, name, body, MODEL, title, tenant)).fetchone()[0]


def bm25(sql, scope: str, query: str, tenant: str = "", k: int = 100, **kw) -> dict[str, float]:
    args = ", ".join(f"{key} => %({key})s" for key in kw)
    rows = sql.execute(
        f"SELECT name, score FROM dna.bm25(%(scope)s, %(query)s, %(model)s, %(tenant)s, k => %(k)s"
        f"{', ' + args if args else ''})",
        {"scope": scope, "query": query, "model": MODEL, "tenant": tenant, "k": k, **kw}).fetchall()
    return {name: score for name, score in rows}


def assert_scores(got: dict[str, float], want: dict[str, float]) -> None:
    assert set(got) == set(want)
    for name, score in want.items():
        assert abs(got[name] - score) <= 1e-9, (name, got[name], score)


SIMPLE_DOCS = {
    "d1": "the cat sat on the mat",
    "d2": "the dog sat",
    "d3": "cat cat cat dog",
    "d4": "a bird",
    "d5": "Cat, dog & bird: the CAT sat!",
}
SIMPLE_TOKENS = {
    "d1": ["the", "cat", "sat", "on", "the", "mat"],
    "d2": ["the", "dog", "sat"],
    "d3": ["cat", "cat", "cat", "dog"],
    "d4": ["a", "bird"],
    "d5": ["cat", "dog", "bird", "the", "cat", "sat"],
}


@pytest.fixture
def simple_scope(sql):
    sql.execute("SELECT dna.set_search_config('s', 'simple')")
    for name, body in SIMPLE_DOCS.items():
        index(sql, "s", name, body)
    return "s"


def test_simple_tokens_are_what_the_reference_assumes(sql):
    for name, body in SIMPLE_DOCS.items():
        lexemes = sql.execute("SELECT tsvector_to_array(to_tsvector('simple', %s))", (body,)).fetchone()[0]
        assert sorted(lexemes) == sorted(set(SIMPLE_TOKENS[name]))
        length = sql.execute("SELECT dna.bm25_doc_length(to_tsvector('simple', %s))", (body,)).fetchone()[0]
        assert length == len(SIMPLE_TOKENS[name])


@pytest.mark.parametrize("query,terms", [
    ("cat", ["cat"]),
    ("the cat sat", ["the", "cat", "sat"]),
    ("Cat CAT dog?", ["cat", "dog"]),
    ("bird mat on", ["bird", "mat", "on"]),
    ("zebra cat", ["zebra", "cat"]),
])
def test_bm25_equals_direct_computation(sql, simple_scope, query, terms):
    got = bm25(sql, simple_scope, query)
    assert_scores(got, bm25_reference(SIMPLE_TOKENS, terms, K1, B))
    # ordered by score DESC, then name
    rows = sql.execute("SELECT name, score FROM dna.bm25('s', %s, %s, k => 100)", (query, MODEL)).fetchall()
    assert rows == sorted(rows, key=lambda r: (-r[1], r[0]))


def test_k1_b_arguments_and_scope_settings(sql, simple_scope):
    want = bm25_reference(SIMPLE_TOKENS, ["cat", "sat"], 1.2, 0.75)
    assert_scores(bm25(sql, simple_scope, "cat sat", k1=1.2, b=0.75), want)
    sql.execute("SELECT dna.set_search_config('s', bm25_k1 => 1.2, bm25_b => 0.75)")
    assert_scores(bm25(sql, simple_scope, "cat sat"), want)
    # b = 0: no length normalisation; k1 = 0: binary term weights (idf only)
    assert_scores(bm25(sql, simple_scope, "cat sat", k1=0.0, b=0.0),
                  bm25_reference(SIMPLE_TOKENS, ["cat", "sat"], 0.0, 0.0))
    with pytest.raises(Exception, match="bm25_b"):
        sql.execute("SELECT dna.set_search_config('s', bm25_b => 1.5)")


def test_k_cuts_with_deterministic_ties(sql):
    sql.execute("SELECT dna.set_search_config('t', 'simple')")
    for i in range(6):
        index(sql, "t", f"n{5 - i}", "alpha beta")   # identical scores
    index(sql, "t", "z", "alpha alpha gamma beta")
    rows = sql.execute("SELECT name FROM dna.bm25('t', 'alpha', %s, k => 3)", (MODEL,)).fetchall()
    assert [r[0] for r in rows] == ["z", "n0", "n1"]


def test_english_stemming_and_stop_words(sql):
    docs = {"e1": "The cats are running", "e2": "A runner runs; cats run.", "e3": "Dogs and cats"}
    tokens = {"e1": ["cat", "run"], "e2": ["runner", "run", "cat", "run"], "e3": ["dog", "cat"]}
    for name, body in docs.items():
        index(sql, "en", name, body)                  # default configuration: english
        vec = sql.execute("SELECT to_tsvector('english', %s)::text", (body,)).fetchone()[0]
        for t in tokens[name]:
            assert f"'{t}'" in vec
    assert sql.execute("SELECT ts_config::text FROM dna.search_config('en')").fetchone()[0] == "english"
    assert_scores(bm25(sql, "en", "Are the cats running?"), bm25_reference(tokens, ["cat", "run"], K1, B))


def _stats(sql, scope, tenant=""):
    return sql.execute("SELECT n_docs, total_len FROM dna.bm25_partition_stats(%s, %s, %s)",
                       (scope, MODEL, tenant)).fetchone()


LIVE_POSTINGS = """
    SELECT p.scope, p.model_id, p.tenant, p.lexeme, p.doc_id, p.tf, p.doc_len, p.kind FROM dna.dna_bm25_postings AS p
    UNION ALL
    SELECT c.scope, c.model_id, c.tenant, c.lexeme::text, s.base_doc_id + (x & 8589934591),
           ((x >> 33) & 511)::integer, (x >> 42)::integer, c.kind
    FROM dna.dna_bm25_chunks AS c
    JOIN dna.dna_bm25_segments AS s USING (scope, model_id, tenant, seg_id), unnest(c.postings) AS x
    WHERE NOT EXISTS (SELECT 1 FROM dna.dna_bm25_tombstones AS t
                      WHERE (t.scope, t.model_id, t.tenant, t.seg_id, t.doc_id)
                          = (c.scope, c.model_id, c.tenant, c.seg_id, s.base_doc_id + (x & 8589934591)))"""


def _postings_are_exact(sql):
    """The postings that count (memtable + sealed chunks minus tombstones) equal the unnest of every
    stored tsvector (nothing stale, nothing missing, nothing twice); forward rows and N/avglen too."""
    diff = sql.execute(f"""
        WITH want AS (
            SELECT d.scope, d.model_id, d.tenant, u.lexeme, d.doc_id,
                   coalesce(cardinality(u.positions), 1) AS tf, dna.bm25_doc_length(d.tsv) AS doc_len, d.kind
            FROM dna.dna_search_docs_384 AS d, unnest(d.tsv) AS u),
        live AS ({LIVE_POSTINGS})
        SELECT count(*) FROM ((SELECT * FROM want EXCEPT ALL SELECT * FROM live)
                              UNION ALL
                              (SELECT * FROM live EXCEPT ALL SELECT * FROM want)) AS x""").fetchone()[0]
    assert diff == 0
    forward = sql.execute("""
        SELECT count(*) FROM (
            (SELECT d.scope, d.model_id, d.tenant, d.doc_id, d.kind, dna.bm25_doc_length(d.tsv),
                    coalesce((SELECT jsonb_object(array_agg(u.lexeme), array_agg(coalesce(cardinality(u.positions), 1)::text))
                              FROM unnest(d.tsv) AS u), '{}')
             FROM dna.dna_search_docs_384 AS d)
            EXCEPT ALL
            (SELECT f.scope, f.model_id, f.tenant, f.doc_id, f.kind, f.doc_len, f.terms FROM dna.dna_bm25_forward AS f)
        ) AS x""").fetchone()[0]
    assert forward == 0
    assert sql.execute("SELECT count(*) FROM dna.dna_bm25_forward").fetchone()[0] == \
        sql.execute("SELECT count(*) FROM dna.dna_search_docs_384").fetchone()[0] == \
        sql.execute("SELECT count(*) FROM dna.dna_bm25_docs").fetchone()[0]
    stats = sql.execute("""
        SELECT count(*) FROM (
            SELECT p.scope, p.model_id, p.tenant, p.n, p.len, st.n_docs, st.total_len
            FROM (SELECT scope, model_id, tenant, count(*)::bigint AS n, sum(dna.bm25_doc_length(tsv))::bigint AS len
                  FROM dna.dna_search_docs_384 WHERE tenant = '' GROUP BY 1, 2, 3) AS p,
                 LATERAL dna.bm25_stats(p.scope, p.model_id, p.tenant) AS st
            WHERE (st.n_docs, st.total_len) IS DISTINCT FROM (p.n, p.len)) AS x""").fetchone()[0]
    assert stats == 0


def _compact(sql, full: bool = False):
    out = sql.execute("SELECT dna.bm25_compact(full_merge => %s)", (full,)).fetchone()[0]
    assert all(p["status"] == "ok" for p in out["partitions"]), out
    return out


@pytest.mark.parametrize("sealed", [False, True], ids=["memtable", "sealed"])
def test_statistics_follow_updates_and_deletes(sql, simple_scope, sealed):
    """Every write keeps postings, N and avglen exact, whether the documents it changes are in the
    memtable or sealed in a segment (tombstones), and after each compaction."""
    tokens = dict(SIMPLE_TOKENS)
    assert _stats(sql, "s") == (5, sum(len(t) for t in tokens.values()))
    _postings_are_exact(sql)
    if sealed:
        _compact(sql)
        assert sql.execute("SELECT count(*) FROM dna.dna_bm25_postings").fetchone()[0] == 0
        _postings_are_exact(sql)

    # update the text of d3: postings, df, N and avglen all follow
    assert index(sql, "s", "d3", "dog dog bird bird bird sat")["action"] == "updated"
    tokens["d3"] = ["dog", "dog", "bird", "bird", "bird", "sat"]
    _postings_are_exact(sql)
    assert _stats(sql, "s") == (5, sum(len(t) for t in tokens.values()))
    assert_scores(bm25(sql, "s", "cat bird sat"), bm25_reference(tokens, ["cat", "bird", "sat"], K1, B))

    # unchanged text writes nothing; an embedding-only change keeps the postings
    assert index(sql, "s", "d3", "dog dog bird bird bird sat")["action"] == "unchanged"
    sql.execute("""SELECT dna.index_document('s', 'Doc', 'd3', 'dog dog bird bird bird sat',
                                             dna.fake_embed('dog bird'), %s)""", (MODEL,))
    _postings_are_exact(sql)

    # delete d1 and d5
    assert sql.execute("SELECT dna.delete_document('s', 'Doc', 'd1')").fetchone()[0] == 1
    assert sql.execute("SELECT dna.delete_document('s', 'Doc', 'd5', '', %s)", (MODEL,)).fetchone()[0] == 1
    del tokens["d1"], tokens["d5"]
    _postings_are_exact(sql)
    assert _stats(sql, "s") == (3, sum(len(t) for t in tokens.values()))
    assert_scores(bm25(sql, "s", "cat bird sat dog"), bm25_reference(tokens, ["cat", "bird", "sat", "dog"], K1, B))
    if sealed:
        assert sql.execute("SELECT count(*) FROM dna.dna_bm25_tombstones").fetchone()[0] == 3  # d3, d1, d5
        _compact(sql, full=True)                       # the merge drops tombstoned postings
        assert sql.execute("SELECT count(*) FROM dna.dna_bm25_tombstones").fetchone()[0] == 0
        assert sql.execute("SELECT count(*) FROM dna.dna_bm25_tombstone_terms").fetchone()[0] == 0
        _postings_are_exact(sql)
        assert _stats(sql, "s") == (3, sum(len(t) for t in tokens.values()))

    # a plain SQL UPDATE / DELETE on the table is covered by the trigger too
    sql.execute("UPDATE dna.dna_search_docs_384 SET body = 'mat mat' WHERE scope = 's' AND name = 'd4'")
    tokens["d4"] = ["mat", "mat"]
    _postings_are_exact(sql)
    assert_scores(bm25(sql, "s", "mat dog"), bm25_reference(tokens, ["mat", "dog"], K1, B))

    sql.execute("TRUNCATE dna.dna_search_docs_384")
    for table in ("postings", "chunks", "segments", "docs", "forward", "tombstones", "tombstone_terms"):
        assert sql.execute(f"SELECT count(*) FROM dna.dna_bm25_{table}").fetchone()[0] == 0, table
    assert _stats(sql, "s")[0] == 0
    assert bm25(sql, "s", "mat") == {}


def test_scopes_and_models_are_separate_partitions(sql, simple_scope):
    sql.execute("SELECT dna.set_search_config('other', 'simple')")
    for i in range(20):
        index(sql, "other", f"o{i}", "cat cat cat cat")
    assert_scores(bm25(sql, "s", "cat"), bm25_reference(SIMPLE_TOKENS, ["cat"], K1, B))


def test_one_tenant_does_not_change_another_tenants_scores(sql, simple_scope):
    base = dict(SIMPLE_TOKENS)
    a_docs = {"a1": ("cat bird bird", ["cat", "bird", "bird"])}
    for name, (body, _) in a_docs.items():
        index(sql, "s", name, body, tenant="acme")
    # tenant acme also shadows base d2
    index(sql, "s", "d2", "mat mat mat mat", tenant="acme")
    acme_view = {**{n: t for n, t in base.items() if n != "d2"}, "a1": a_docs["a1"][1], "d2": ["mat"] * 4}

    q, terms = "cat dog mat bird", ["cat", "dog", "mat", "bird"]
    base_before = bm25(sql, "s", q)
    acme_before = bm25(sql, "s", q, tenant="acme")
    assert_scores(base_before, bm25_reference(base, terms, K1, B))
    assert_scores(acme_before, bm25_reference(acme_view, terms, K1, B))
    assert _stats(sql, "s", "acme") == (len(acme_view), sum(len(t) for t in acme_view.values()))

    # tenant globex writes a lot, including a shadow of d1: acme and base do not move
    for i in range(30):
        index(sql, "s", f"g{i}", "dog dog dog mat cat", tenant="globex")
    index(sql, "s", "d1", "bird", tenant="globex")
    assert bm25(sql, "s", q) == base_before
    assert bm25(sql, "s", q, tenant="acme") == acme_before
    # ... and globex sees its own partition
    globex_view = {**{n: t for n, t in base.items() if n != "d1"}, "d1": ["bird"],
                   **{f"g{i}": ["dog", "dog", "dog", "mat", "cat"] for i in range(30)}}
    assert_scores(bm25(sql, "s", q, tenant="globex"), bm25_reference(globex_view, terms, K1, B))

    # deleting globex rows does not move acme either
    for i in range(30):
        sql.execute("SELECT dna.delete_document('s', 'Doc', %s, 'globex')", (f"g{i}",))
    assert bm25(sql, "s", q, tenant="acme") == acme_before

    # dna.search returns the same lexical scores and lane ranks (lexical only: no embedding)
    rows = sql.execute("SELECT name, tenant, lexical_score, rank_lexical, degraded FROM "
                       "dna.search('s', %s, NULL, %s, k => 100, tenant => 'acme')", (q, MODEL)).fetchall()
    assert {r[0]: r[2] for r in rows} == acme_before
    assert all(r[4] for r in rows)
    assert dict((r[0], r[1]) for r in rows)["d2"] == "acme"
    assert [r[0] for r in sorted(rows, key=lambda r: r[3])] == \
        [n for n, _ in sorted(acme_before.items(), key=lambda kv: (-kv[1], kv[0]))]


def test_filters_apply_before_the_cut(sql, simple_scope):
    index(sql, "s", "note1", "bird bird bird", kind="Note")
    got = bm25(sql, "s", "bird cat", kinds=["Note"], k=1)
    assert list(got) == ["note1"]
    got = sql.execute("SELECT name FROM dna.bm25('s', 'cat bird', %s, name_prefix => 'd4', k => 1)",
                      (MODEL,)).fetchall()
    assert got == [("d4",)]


def test_regconfig_per_scope_retokenizes(sql):
    index(sql, "r", "x", "The cats were running")
    assert bm25(sql, "r", "the") == {}                        # english: 'the' is a stop word
    out = sql.execute("SELECT dna.set_search_config('r', 'simple')").fetchone()[0]
    assert out["ts_config"] == "simple" and out["retokenized"] == 1
    assert list(bm25(sql, "r", "the")) == ["x"]
    assert bm25(sql, "r", "cat") == {}                        # simple: no stemming
    index(sql, "r", "y", "more cats")                          # new documents use the scope's setting
    assert sql.execute("SELECT array_agg(DISTINCT ts_config::text) FROM dna.dna_search_docs_384 "
                       "WHERE scope = 'r'").fetchone()[0] == ["simple"]
    _postings_are_exact(sql)
    sql.execute("SELECT dna.set_search_config('r', 'english')")
    assert set(bm25(sql, "r", "cat")) == {"x", "y"}
    _postings_are_exact(sql)
    with pytest.raises(Exception):
        sql.execute("SELECT dna.set_search_config('r', 'no_such_config')")


@pytest.mark.parametrize("query", [
    "cat & dog | !bird", "(cat <-> dog):*", "'cat' \"dog\" \\ ''", "https://example.com/a?b=c&d=e#f",
    "mail me: someone@example.com", "the of and a an", "   ", "", "!!!", "a:* & b:A", "<-> <2> :* ( ) |",
    "ümlaut naïve café 日本語", "x" * 5000,
])
def test_query_text_never_raises(sql, query):
    index(sql, "q", "d1", "cat and dog at https://example.com/a with someone@example.com")
    sql.execute("SELECT * FROM dna.bm25('q', %s, %s)", (query, MODEL)).fetchall()
    sql.execute("SELECT * FROM dna.search('q', %s, NULL, %s)", (query, MODEL)).fetchall()
    sql.execute("SELECT * FROM dna.search('q', %s, dna.fake_embed(%s), %s)", (query, query, MODEL)).fetchall()
    if query.strip() and query.strip() in ("the of and a an",):
        assert bm25(sql, "q", query) == {}


def test_hybrid_search_uses_bm25_lane(sql, simple_scope):
    rows = sql.execute("SELECT name, lexical_score, rank_lexical FROM dna.search('s', 'cat sat', "
                       "dna.fake_embed('cat sat'), %s, k => 100) WHERE rank_lexical IS NOT NULL", (MODEL,)).fetchall()
    assert_scores({r[0]: r[1] for r in rows}, bm25_reference(SIMPLE_TOKENS, ["cat", "sat"], K1, B))
    # per-scope hybrid settings are validated and used
    sql.execute("SELECT dna.set_search_config('s', weights => '{0,1}', lexical_candidates => 2)")
    rows = sql.execute("SELECT name, rank_lexical FROM dna.search('s', 'cat sat', NULL, %s, k => 10)",
                       (MODEL,)).fetchall()
    assert len(rows) == 2 and all(r[1] is not None for r in rows)
    with pytest.raises(Exception, match="weights"):
        sql.execute("SELECT dna.set_search_config('s', weights => '{1}')")


def test_kinds_filter_scores_with_the_whole_partition_and_cuts_early(sql):
    """The postings carry each document's Kind: a kinds filter scores only those documents, while df
    (like N and avglen) still counts every document; a raw change of a document's Kind follows."""
    tokens = {"n1": ["zebra", "okapi"], "n2": ["okapi"], "d1": ["zebra", "zebra", "zebra"],
              "d2": ["zebra", "okapi", "okapi"], "d3": ["heron"]}
    for name, toks in tokens.items():
        index(sql, "kinds", name, " ".join(toks), kind="Note" if name.startswith("n") else "Doc")
    want = bm25_reference(tokens, ["zebra", "okapi"], K1, B)
    assert_scores(bm25(sql, "kinds", "zebra okapi", kinds=["Note"]), {n: want[n] for n in ("n1", "n2")})
    assert_scores(bm25(sql, "kinds", "zebra okapi", kinds=["Note"], k=1), {"n1": want["n1"]})
    sql.execute("UPDATE dna.dna_search_docs_384 SET kind = 'Note' WHERE scope = 'kinds' AND name = 'd2'")
    _postings_are_exact(sql)
    assert_scores(bm25(sql, "kinds", "zebra okapi", kinds=["Note"]), {n: want[n] for n in ("n1", "n2", "d2")})
