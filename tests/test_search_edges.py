"""The edges of dna.search (issue 15 item 3), through plain SQL: a zero query vector is degraded;
weights must be finite and >= 0; pages compose; equal scores tie-break by key; relevance floors say
what they removed; exact => true and the exact rule; Client.search without an embedder."""
from __future__ import annotations

import psycopg
import pytest

MODEL = "dna-fake-hash-v1"


def _index(sql, scope, docs, kind="Doc"):
    """docs: [(name, body)], written with the fake embedder's vectors, as psql would."""
    for name, body in docs:
        sql.execute("SELECT dna.index_document(%s, %s, %s, %s, dna.fake_embed(%s), %s)",
                    (scope, kind, name, body, body, MODEL))


def _search(sql, scope, query, **args):
    quoted = {"offset": '"offset"'}  # a reserved word: named notation needs it quoted
    named = "".join(f", {quoted.get(a, a)} => %({a})s" for a in args)
    return sql.execute(
        "SELECT name, score, similarity, lexical_score, rank_dense, rank_lexical, degraded, dense_exact, "
        "floor_removed_dense, floor_removed_lexical "
        f"FROM dna.search(%(scope)s, %(query)s, dna.fake_embed(%(query)s), %(model)s{named})",
        {"scope": scope, "query": query, "model": MODEL, **args}).fetchall()


def _sqlstate(sql, statement, params=()):
    with pytest.raises(psycopg.Error) as err:
        sql.execute(statement, params)
    return err.value.sqlstate, err.value.diag.message_primary


# (a) ------------------------------------------------------------------------------------------

def test_zero_query_vector_is_degraded(sql):
    """Text without [a-z0-9] embeds (fake) to the zero vector: no dense lane, so the answer is lexical
    only and says so, as dna.recall does."""
    _index(sql, "zero", [("beijing", "北京 is a city"), ("paris", "paris is a city")])
    assert sql.execute("SELECT vector_norm(dna.fake_embed('北京'))").fetchone()[0] == 0
    rows = _search(sql, "zero", "北京")
    assert [r[0] for r in rows] == ["beijing"]
    assert all(r[6] is True and r[4] is None and r[7] is None for r in rows)   # degraded, no dense rank
    recall = sql.execute("SELECT dna.recall('zero', '北京', dna.fake_embed('北京'), %s, reconsolidate => false)",
                         (MODEL,)).fetchone()[0]
    assert recall["degraded"] is True


# (b) ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("weights", ["{NaN,1}", "{Infinity,1}", "{1,-Infinity}", "{-1,-1}", "{1,NULL}", "{1,2,3}"])
def test_weights_must_be_finite_and_non_negative(sql, weights):
    _index(sql, "w", [("a", "alpha beta"), ("b", "beta gamma")])
    state, message = _sqlstate(sql, "SELECT * FROM dna.search('w', 'beta', dna.fake_embed('beta'), %s, "
                                    "weights => %s::float8[])", (MODEL, weights))
    assert state == "22023" and "weights" in message
    if weights != "{1,NULL}" and weights != "{1,2,3}":
        state, message = _sqlstate(sql, "SELECT dna.rrf(ARRAY[1, 2], %s::float8[], 10)", (weights,))
        assert state == "22023" and "weights" in message
        state, message = _sqlstate(sql, "SELECT dna.set_search_config('w', weights => %s::float8[])", (weights,))
        assert state == "22023" and "weights" in message


def test_zero_weight_turns_a_lane_off_and_rrf_keeps_null_weight_as_one(sql):
    _index(sql, "w0", [("a", "alpha beta"), ("b", "beta gamma delta")])
    rows = _search(sql, "w0", "beta gamma", weights=[0.0, 1.0], fusion="rrf")
    assert [r[0] for r in rows] == ["b", "a"]          # the lexical order alone
    assert sql.execute("SELECT dna.rrf(ARRAY[1, 1], ARRAY[NULL, 2]::float8[], 9)").fetchone()[0] == pytest.approx(0.3)


def test_weights_that_turn_both_lanes_off_are_refused(sql):
    """'{0,0}' would rank every candidate at 0 (name order: meaningless hits): 22023 with a hint."""
    _index(sql, "w00", [("a", "alpha beta"), ("b", "beta gamma")])
    with pytest.raises(psycopg.Error) as err:
        sql.execute("SELECT * FROM dna.search('w00', 'beta', dna.fake_embed('beta'), %s, weights => '{0,0}')", (MODEL,))
    assert err.value.sqlstate == "22023" and "both lanes off" in err.value.diag.message_primary
    assert "{1,0}" in err.value.diag.message_hint


def test_search_refuses_a_scope_outside_the_name_rule(sql):
    """As the write verbs do (README, "Names"): 22023 with a suggestion, not an empty answer."""
    with pytest.raises(psycopg.Error) as err:
        sql.execute("SELECT * FROM dna.search('My Scope!', 'beta', NULL, %s)", (MODEL,))
    assert err.value.sqlstate == "22023" and "invalid scope" in err.value.diag.message_primary
    assert "my-scope" in err.value.diag.message_hint


# (c) ------------------------------------------------------------------------------------------

NEAR_DUPLICATES = [(f"dup-{i:02d}", "pagination window page offset ranking " + " ".join(
    ["stable"] * (i % 3) + ["order"] * (i % 5) + ["page"] * (i % 2))) for i in range(30)]


def test_pages_compose_into_one_ranking(sql):
    """Over 30 near-duplicate documents (many equal scores), every window (offset, k) for k = 10..50 is
    that slice of one long answer, and the first 10 at k = 50 are the k = 10 answer. (diversity => 'off':
    the ties of the fused ranking itself; tests/test_diversity.py pages the collapsed one.)"""
    _index(sql, "pages", NEAR_DUPLICATES)
    query = "page ranking order"
    long = [r[0] for r in _search(sql, "pages", query, k=50, diversity="off")]
    assert sorted(long) == sorted(n for n, _ in NEAR_DUPLICATES)     # every document, once
    assert [r[0] for r in _search(sql, "pages", query, k=10, diversity="off")] == long[:10]
    for k in range(10, 51):
        for offset in sorted({0, 5, k, 2 * k, 29}):
            page = [r[0] for r in _search(sql, "pages", query, k=k, offset=offset, diversity="off")]
            assert page == long[offset:offset + k], (k, offset)
    # The page walk with k = 10 covers the ranking exactly: no name twice, none left out.
    walked = [r[0] for offset in (0, 10, 20) for r in _search(sql, "pages", query, k=10, offset=offset, diversity="off")]
    assert walked == long[:30]


def test_offset_is_checked(sql):
    _index(sql, "pages", NEAR_DUPLICATES[:3])
    for bad in (-1, 9001):
        state, message = _sqlstate(sql, "SELECT * FROM dna.search('pages', 'page', NULL, %s, \"offset\" => %s)",
                                   (MODEL, bad))
        assert state == "22023" and "offset" in message


# (d) ------------------------------------------------------------------------------------------

def test_scores_one_ulp_apart_round_to_one_value(sql):
    a, b, c = sql.execute("SELECT dna.score_round(5.730864281798461), dna.score_round(5.7308642817984605), "
                          "dna.score_round(5.73086428181)").fetchone()
    assert a == b and a != c
    assert sql.execute("SELECT dna.score_round(0), dna.score_round(-0.1234567890123456)").fetchone() == (0, -0.123456789012)



def test_score_round_is_twelve_significant_digits_for_every_kind_of_input(sql):
    """dna.score_round (PL/pgSQL since 0018) against the rounding it documents, written inline in
    plain SQL: 20,000 values over 30 orders of magnitude, both signs, and the special values."""
    differ = sql.execute("""
        WITH v(x) AS (SELECT (CASE WHEN g % 2 = 0 THEN 1 ELSE -1 END) * (1 + g * 0.61803398875) * 10.0 ^ (g % 31 - 15)
                      FROM generate_series(1, 20000) AS g
                      UNION ALL VALUES (0::float8), ('NaN'), ('Infinity'), ('-Infinity'), (1e-300), (5e307))
        SELECT count(*) FROM v
        WHERE dna.score_round(x) IS DISTINCT FROM
              CASE WHEN x = 0 OR x = 'NaN'::float8 OR abs(x) = 'Infinity'::float8 THEN x
                   ELSE round(x::numeric, 11 - floor(log(abs(x)))::integer)::float8 END""").fetchone()[0]
    assert differ == 0
    assert sql.execute("SELECT dna.score_round(NULL)").fetchone()[0] is None

def test_equal_scores_tie_break_by_name_across_identical_ingests(sql):
    """The same documents ingested twice (in opposite orders, so the BM25 sums and HNSW graph are built
    differently) answer in the same order, equal scores ordered by name."""
    docs = [(f"t{i:02d}", "tie score equal bm25 " + ("apple banana" if i % 2 else "banana apple")) for i in range(12)]
    _index(sql, "tie-a", docs)
    _index(sql, "tie-b", list(reversed(docs)))
    for query in ("apple banana", "tie equal", "banana"):
        first = _search(sql, "tie-a", query, k=12)
        second = _search(sql, "tie-b", query, k=12)
        assert [r[:6] for r in first] == [r[:6] for r in second]
        for x, y in zip(first, first[1:]):
            assert x[1] > y[1] or (x[1] == y[1] and x[0] < y[0])   # score DESC, then name


# (e) ------------------------------------------------------------------------------------------

FLOOR_DOCS = [("fruit", "banana apple fruit smoothie"), ("car", "engine wheel car road"),
              ("mixed", "banana car"), ("sea", "ocean wave salt water")]


def test_min_similarity_removes_weak_dense_candidates_and_says_how_many(sql):
    _index(sql, "floor", FLOOR_DOCS)
    plain = _search(sql, "floor", "banana smoothie")
    weak = [r for r in plain if r[2] is not None and r[2] < 0.6]
    assert weak                                              # the fixture has weak dense candidates
    floored = _search(sql, "floor", "banana smoothie", min_similarity=0.6)
    assert all(r[2] is None or r[2] >= 0.6 for r in floored)
    assert {r[8] for r in floored} == {len(weak)} and {r[9] for r in floored} == {None}
    # A hit below the dense floor stays when the lexical lane has it (the floor is the dense lane's).
    assert "mixed" in [r[0] for r in floored] and [r for r in floored if r[0] == "mixed"][0][4] is None


def test_floors_that_remove_everything_say_so(sql):
    _index(sql, "floor", FLOOR_DOCS)
    notices = []
    sql.add_notice_handler(lambda d: notices.append((d.sqlstate, d.message_primary)))
    # No word of the query in any document: the lexical lane is empty, the dense lane all weak.
    assert _search(sql, "floor", "quantum chromodynamics", min_similarity=0.3) == []
    assert len(notices) == 1 and notices[0][0] == "02000"
    assert "min_similarity 0.3 removed 4 dense candidates" in notices[0][1]


def test_min_lexical_score_removes_weak_lexical_candidates(sql):
    _index(sql, "floor", FLOOR_DOCS)
    plain = _search(sql, "floor", "banana fruit")
    scores = sorted(r[3] for r in plain if r[3] is not None)
    assert len(scores) == 2 and scores[0] < scores[1]
    cut = (scores[0] + scores[1]) / 2
    floored = _search(sql, "floor", "banana fruit", min_lexical_score=cut)
    assert [r[3] for r in floored if r[3] is not None] == [scores[1]]
    assert {r[9] for r in floored} == {1} and {r[8] for r in floored} == {None}


@pytest.mark.parametrize("arg,value", [("min_similarity", 1.5), ("min_similarity", float("nan")),
                                       ("min_lexical_score", -1.0), ("min_lexical_score", float("inf"))])
def test_floors_are_checked(sql, arg, value):
    _index(sql, "floor", FLOOR_DOCS[:1])
    state, message = _sqlstate(sql, f"SELECT * FROM dna.search('floor', 'banana', NULL, %s, {arg} => %s)",
                               (MODEL, value))
    assert state == "22023" and arg in message


# (f) ------------------------------------------------------------------------------------------

def _brute_force(sql, scope, query):
    return [r[0] for r in sql.execute(
        "SELECT name FROM dna.dna_search_docs_384 WHERE scope = %s AND model_id = %s "
        "ORDER BY dna.score_round(1 - (embedding <=> dna.fake_embed(%s))) DESC, kind, name", (scope, MODEL, query))]


def test_small_scope_is_exact_before_and_after_analyze(sql):
    """The exact rule: a scope of at most dna.exact_scan_rows() rows scans exactly by default, so ANALYZE
    cannot change its answer; exact => true always scans exactly, exact => false lets HNSW answer."""
    docs = [(f"d{i:03d}", f"word{i % 17} word{i % 11} word{i % 7} common") for i in range(300)]
    _index(sql, "exact", docs)
    query = "word3 word5 word1 common"

    def dense(**args):
        rows = _search(sql, "exact", query, k=50, weights=[1.0, 0.0], fusion="rrf", candidates=50, diversity="off", **args)
        return [r[0] for r in sorted(rows, key=lambda r: r[4])], {r[7] for r in rows}

    before, flag = dense()
    assert flag == {True} and before == _brute_force(sql, "exact", query)[:50]
    sql.execute("ANALYZE dna.dna_search_docs_384")
    after, flag = dense()
    assert flag == {True} and after == before
    assert dense(exact=True) == (before, {True})
    assert dense(exact=False)[1] == {False}
    assert sql.execute("SELECT dna.exact_scan_rows()").fetchone()[0] == 2000


def test_exact_true_on_a_large_scope_matches_brute_force(sql):
    sql.execute("SELECT setseed(0.1)")
    sql.execute(f"""
        INSERT INTO dna.dna_search_docs_384 (scope, kind, name, model_id, text_hash, body, embedding)
        SELECT 'wide', 'Doc', 'v' || g, '{MODEL}', md5(g::text), 'vector ' || g,
               (SELECT l2_normalize(array_agg(random() - 0.5)::vector) FROM generate_series(1, 384) WHERE g > 0)
        FROM generate_series(1, 2500) AS g""")
    sql.execute("ANALYZE dna.dna_search_docs_384")
    probe = "(SELECT embedding FROM dna.dna_search_docs_384 WHERE scope = 'wide' AND name = 'v7')"
    rows = sql.execute(f"SELECT name, dense_exact FROM dna.search('wide', 'vector', {probe}, %s, k => 20, "
                       "weights => '{1,0}', fusion => 'rrf', candidates => 20, exact => true)", (MODEL,)).fetchall()
    truth = [r[0] for r in sql.execute(
        f"SELECT name FROM dna.dna_search_docs_384 WHERE scope = 'wide' "
        f"ORDER BY dna.score_round(1 - (embedding <=> {probe})) DESC, name LIMIT 20")]
    assert [r[0] for r in rows] == truth and {r[1] for r in rows} == {True}
    default = sql.execute(f"SELECT DISTINCT dense_exact FROM dna.search('wide', 'vector', {probe}, %s, k => 5)",
                          (MODEL,)).fetchall()
    assert default == [(False,)]                                  # above the rule: HNSW


# (g) ------------------------------------------------------------------------------------------

def test_client_without_embedder_searches_the_scopes_model_lexically(dna_dsn, sql):
    import pydna

    _index(sql, "lex", [("a", "alpha beta"), ("b", "beta gamma")])
    with pydna.connect(dna_dsn, embedder=None) as client:
        result = client.search("lex", "gamma beta")
    assert result.degraded is True and result.model_id == MODEL
    assert result.names == ["b", "a"]
    assert all(h.rank_dense is None for h in result.hits)
    # In SQL: model_id NULL is the scope's model with the most documents.
    rows = sql.execute("SELECT name, degraded FROM dna.search('lex', 'gamma beta')").fetchall()
    assert rows == [("b", True), ("a", True)]
