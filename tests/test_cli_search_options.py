"""The CLI doors to dna.search's and dna.recall's options (issue 15): ``dna search`` / ``dna recall``
with --fusion, --dense-weight, --offset, --min-similarity, --min-lexical-score, --exact, --explain,
--receipt / --keep-query; ``dna replay``; ``dna memory recall`` with --decay, --explain, --receipt.
Run in-process (typer's CliRunner) against the test database with the fake embedder; every answer
is compared with what the SQL function itself answers to the same arguments."""
from __future__ import annotations

import json
import uuid

import psycopg
import pytest
from typer.testing import CliRunner

from pydna.cli import app

FAKE = ["--embedder", "fake"]
MODEL = "dna-fake-hash-v1"
QUERY = "apple ocean rank"
QUOTED = {"offset": '"offset"'}   # a reserved word: quoted in named notation
WORDS = ["banana", "apple", "smoothie", "engine", "wheel", "ocean", "salt", "fusion", "lane", "rank"]


@pytest.fixture
def runner(monkeypatch, tmp_path):
    monkeypatch.delenv("DNA_DATABASE_URL", raising=False)
    monkeypatch.setenv("DNA_HOME", str(tmp_path / "dna-home"))
    return CliRunner()


def invoke(runner, dsn, *args):
    return runner.invoke(app, ["--dsn", dsn, *[str(a) for a in args]])


def ok(result):
    assert result.exit_code == 0, f"exit {result.exit_code}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}" \
        + (f"\n{result.exception!r}" if result.exception and not isinstance(result.exception, SystemExit) else "")
    return result


@pytest.fixture
def corpus(runner, dna_dsn, tmp_path):
    """30 documents with overlapping words (ties, both lanes, more than two pages), indexed by `dna index`."""
    path = tmp_path / "docs.jsonl"
    path.write_text("\n".join(json.dumps({"kind": "Doc", "name": f"d{i:02d}", "body": " ".join(
        WORDS[(i * j + i // 3) % len(WORDS)] for j in range(1, 6)) + f" note {i}"}) for i in range(30)) + "\n",
        encoding="utf-8")
    ok(invoke(runner, dna_dsn, "index", path, "--scope", "ex", *FAKE, "--json"))
    return dna_dsn


def search_json(runner, dsn, *flags, query=QUERY):
    result = ok(invoke(runner, dsn, "search", query, "--scope", "ex", *FAKE, "--json", *flags))
    return json.loads(result.stdout)


def sql_search(dsn, query=QUERY, **args):
    named = "".join(f", {QUOTED.get(k, k)} => %({k})s" for k in args)
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(f"SELECT name, score, dense_exact, explain FROM dna.search('ex', %(q)s, dna.fake_embed(%(q)s), "
                            f"%(m)s{named})", {"q": query, "m": MODEL, **args}).fetchall()


# -- each flag changes the answer as the SQL says -----------------------------------------------


def test_offset_pages_compose(runner, corpus):
    twenty = search_json(runner, corpus, "-k", 20)["hits"]
    page2 = search_json(runner, corpus, "--offset", 10, "-k", 10)["hits"]
    assert len(twenty) == 20 and len(page2) == 10
    assert [h["name"] for h in page2] == [h["name"] for h in twenty[10:20]]
    assert [h["score"] for h in page2] == [h["score"] for h in twenty[10:20]]
    assert [h["rank"] for h in page2] == list(range(11, 21))
    text = ok(invoke(runner, corpus, "search", QUERY, "--scope", "ex", *FAKE, "--offset", 10, "-k", 10)).stdout
    assert "(ranks 11-20)" in text and "11. " + page2[0]["name"] in text


@pytest.mark.parametrize("flags,args", [
    (["--fusion", "rrf"], {"fusion": "rrf"}),
    (["--fusion", "convex", "--dense-weight", "0.9"], {"fusion": "convex", "dense_weight": 0.9}),
    (["--dense-weight", "0"], {"dense_weight": 0.0}),
    (["--min-similarity", "0.5", "-k", "30"], {"min_similarity": 0.5, "k": 30}),
    (["--min-lexical-score", "1.5", "-k", "30"], {"min_lexical_score": 1.5, "k": 30}),
    (["--offset", "5", "-k", "3"], {"offset": 5, "k": 3}),
])
def test_each_flag_answers_as_dna_search_with_that_argument(runner, corpus, flags, args):
    hits = search_json(runner, corpus, *flags)["hits"]
    want = sql_search(corpus, **args)
    assert [(h["name"], h["score"]) for h in hits] == [(n, s) for n, s, _, _ in want]
    default = sql_search(corpus, **{k: v for k, v in args.items() if k == "k"})
    assert [(n, s) for n, s, _, _ in want] != [(n, s) for n, s, _, _ in default]   # the flag changed the answer


def test_floors_say_what_they_removed(runner, corpus):
    hits = search_json(runner, corpus, "--min-similarity", "0.5", "--min-lexical-score", "1.5", "-k", 30)["hits"]
    assert hits and all(h["floor_removed_dense"] > 0 and h["floor_removed_lexical"] > 0 for h in hits)


def test_exact_and_no_exact_say_which_dense_path_answered(runner, corpus):
    assert {h["dense_exact"] for h in search_json(runner, corpus, "--exact")["hits"]} == {True}
    assert {h["dense_exact"] for h in search_json(runner, corpus, "--no-exact")["hits"]} == {False}
    assert [r[2] for r in sql_search(corpus, exact=False)] == [False] * 10


# -- --explain -------------------------------------------------------------------------------


def test_explain_json_is_the_servers_explain(runner, corpus):
    hits = search_json(runner, corpus, "--explain", "--fusion", "rrf", "-k", 3)["hits"]
    want = sql_search(corpus, fusion="rrf", k=3, explain=True)
    for hit, (_, _, _, explain) in zip(hits, want, strict=True):
        for e in (hit["explain"], explain):   # the validity moment is each call's now()
            e["answer"]["filters"].pop("valid_time")
        assert hit["explain"] == explain
    assert hits[0]["explain"]["answer"]["fusion"]["method"] == "rrf"
    assert search_json(runner, corpus, "-k", 3)["hits"][0]["explain"] is None


def test_explain_text_shows_each_lane_and_how_the_answer_was_made(runner, corpus):
    out = ok(invoke(runner, corpus, "search", QUERY, "--scope", "ex", *FAKE, "--explain", "-k", 2,
                    "--min-similarity", "0.2")).stdout
    assert "fusion convex (dense_weight 0.50" in out
    assert "dense lane: exact scan" in out and "min_similarity 0.2" in out and "removed" in out
    assert "lexical lane: BM25 k1 1.20 b 0.40 (english)" in out and "terms appl, ocean, rank" in out
    assert "degraded: no" in out
    assert out.count("    dense: rank ") == 2 and out.count("    lexical: rank ") == 2
    assert "cosine" in out and "bm25" in out and "term" in out and "= the sum of the terms" in out
    rrf = ok(invoke(runner, corpus, "search", QUERY, "--scope", "ex", *FAKE, "--explain", "--fusion", "rrf",
                    "-k", 1)).stdout
    assert "fusion rrf (weights" in rrf and "rrf_k" in rrf


def test_explain_text_of_a_degraded_answer_says_so(runner, corpus, monkeypatch):
    from pydna.embeddings.fake import FakeEmbeddingProvider

    def broken(self, texts):
        raise RuntimeError("model went away")

    monkeypatch.setattr(FakeEmbeddingProvider, "embed", broken)
    out = ok(invoke(runner, corpus, "search", QUERY, "--scope", "ex", *FAKE, "--explain", "-k", 1)).stdout
    assert "dense lane: none" in out and "degraded: no query embedding" in out
    assert "dense: not a candidate" in out


# -- --receipt and dna replay -------------------------------------------------------------------


def receipt_of(stdout: str) -> str:
    line = next(x for x in stdout.splitlines() if x.startswith("receipt: "))
    return str(uuid.UUID(line.split(": ", 1)[1]))


def test_receipt_then_replay_says_match_and_later_says_where_it_differs(runner, corpus):
    plain = search_json(runner, corpus, "-k", 5)
    taken = search_json(runner, corpus, "-k", 5, "--receipt")
    assert uuid.UUID(taken["receipt_id"]) and taken["hits"] == plain["hits"]
    out = ok(invoke(runner, corpus, "search", QUERY, "--scope", "ex", *FAKE, "-k", 5, "--receipt")).stdout
    rid = receipt_of(out)
    assert f"replay with: dna replay {rid} --query '{QUERY}'" in out
    replayed = ok(invoke(runner, corpus, "replay", rid, "--query", QUERY)).stdout
    assert "match: the same 5 ids in the same order (scores equal)" in replayed
    # Without the query the receipt (no --keep-query) cannot be replayed: the server says what to pass.
    refused = invoke(runner, corpus, "replay", rid)
    assert refused.exit_code == 1 and "SQLSTATE 22023" in refused.stderr and "--query TEXT" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    # A new document that ranks first: the replay names the first difference.
    with psycopg.connect(corpus, autocommit=True) as conn:
        conn.execute("SELECT dna.index_document('ex', 'Doc', 'a-new', %s, dna.fake_embed(%s), %s)",
                     (QUERY + " " + QUERY, QUERY, MODEL))
    changed = ok(invoke(runner, corpus, "replay", rid, "--query", QUERY)).stdout
    assert "no match: 5 ids then, 5 now; first difference at rank 1:" in changed and "now Doc/a-new" in changed
    answer = json.loads(ok(invoke(runner, corpus, "replay", rid, "--query", QUERY, "--json")).stdout)
    assert answer["match"] is False and answer["first_difference"]["now"]["name"] == "a-new"


def test_keep_query_replays_without_the_query(runner, corpus):
    out = ok(invoke(runner, corpus, "search", QUERY, "--scope", "ex", *FAKE, "--receipt", "--keep-query")).stdout
    rid = receipt_of(out)
    assert "--query" not in out
    assert "match: the same 10 ids" in ok(invoke(runner, corpus, "replay", rid)).stdout


def test_keep_query_without_receipt_is_one_line(runner, corpus, memories):
    for command in (["search", QUERY, "--scope", "ex"], ["memory", "recall", "deploy", "--scope", "team"]):
        result = invoke(runner, corpus, *command, *FAKE, "--keep-query")
        assert result.exit_code == 1 and "--keep-query keeps the query in a receipt: add --receipt" in result.stderr


def test_replay_refuses_a_malformed_or_unknown_id(runner, corpus):
    bad = invoke(runner, corpus, "replay", "not-a-uuid")
    assert bad.exit_code == 2 and "RECEIPT_ID" in bad.output
    unknown = invoke(runner, corpus, "replay", str(uuid.uuid4()))
    assert unknown.exit_code == 1 and "SQLSTATE P0002" in unknown.stderr and "hint:" in unknown.stderr
    assert "Traceback" not in unknown.output and len(unknown.stderr.strip().splitlines()) == 1


# -- bad values: the server's refusal, one line with its hint, exit 1 ---------------------------


@pytest.mark.parametrize("flags,words", [
    (["--fusion", "linear"], ["fusion must be 'convex' or 'rrf', got 'linear'", "hint: fusion must be 'convex'"]),
    (["--dense-weight", "1.5"], ["dense_weight must be between 0 and 1", "got 1.5", "hint: dense_weight is"]),
    (["--offset", "-1"], ["offset must be between 0 and 9000, got -1", "hint: offset is"]),
    (["--offset", "9001"], ["got 9001", "(p - 1) * k"]),
    (["-k", "5000"], ["k must be between 0 and 1000, got 5000", "hint: k is the number of hits"]),
    (["--min-similarity", "2"], ["min_similarity must be a cosine between -1 and 1, got 2", "hint:"]),
    (["--min-lexical-score", "-1"], ["min_lexical_score must be a finite BM25 score >= 0, got -1", "hint:"]),
    (["--fusion", "linear", "--receipt"], ["fusion must be 'convex' or 'rrf'", "hint:"]),
])
def test_bad_values_are_the_servers_refusal_in_one_line(runner, corpus, flags, words):
    result = invoke(runner, corpus, "search", QUERY, "--scope", "ex", *FAKE, *flags)
    assert result.exit_code == 1, result.output
    assert "SQLSTATE 22023" in result.stderr
    for word in words:
        assert word in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.output
    with psycopg.connect(corpus) as conn:
        assert conn.execute("SELECT count(*) FROM dna.dna_search_receipts").fetchone()[0] == 0


def test_query_over_the_limit_is_refused_with_its_hint(runner, corpus):
    result = invoke(runner, corpus, "search", "word " * 2500, "--scope", "ex", *FAKE)
    assert result.exit_code == 1 and "SQLSTATE 22001" in result.stderr and "limit is 10000" in result.stderr
    assert "hint: Ask with a query of at most 10000 characters" in result.stderr


# -- dna memory recall: --decay, --explain, --receipt ---------------------------------------------


@pytest.fixture
def memories(runner, dna_dsn):
    for i, text in enumerate(["deploys happen on thursday", "the deploy checklist lives in the wiki",
                              "thursday lunch is pizza", "rollbacks need a deploy ticket"]):
        ok(invoke(runner, dna_dsn, "memory", "remember", text, "--scope", "team", "--name", f"m{i}",
                  "--now", "2026-07-01T12:00:00Z", *FAKE))
    return dna_dsn


def recall_json(runner, dsn, *flags):
    result = ok(invoke(runner, dsn, "memory", "recall", "when do we deploy", "--scope", "team", *FAKE, "--json",
                       "--now", "2026-09-01T12:00:00Z", "--no-reconsolidate", *flags))
    return json.loads(result.stdout)


def test_memory_recall_decay_changes_the_answer_as_dna_recall_says(runner, memories):
    with psycopg.connect(memories, autocommit=True) as conn:
        def sql(decay):
            return conn.execute("SELECT dna.recall('team', 'when do we deploy', dna.fake_embed('when do we deploy'), "
                                "%s, k => 5, reconsolidate => false, now => '2026-09-01T12:00:00Z', decay => %s)",
                                (MODEL, decay)).fetchone()[0]
        for decay in ("surfaced", "written", "off"):
            answer = recall_json(runner, memories, "--decay", decay)
            assert answer["decay"] == decay
            assert [(h["name"], h["score"]) for h in answer["hits"]] == \
                [(h["name"], h["score"]) for h in sql(decay)["hits"]]
    off = recall_json(runner, memories, "--decay", "off")["hits"]
    written = recall_json(runner, memories, "--decay", "written")["hits"]
    assert [h["score"] for h in off] != [h["score"] for h in written]     # two months since written: it acts
    text = ok(invoke(runner, memories, "memory", "recall", "deploy", "--scope", "team", *FAKE, "--decay", "off",
                     "--no-reconsolidate")).stdout
    assert "decay off" in text


def test_memory_recall_bad_decay_is_the_servers_refusal(runner, memories):
    result = invoke(runner, memories, "memory", "recall", "deploy", "--scope", "team", *FAKE, "--decay", "sometimes")
    assert result.exit_code == 1
    assert "decay must be surfaced, written or off, got 'sometimes' (SQLSTATE 22023); hint:" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    result = invoke(runner, memories, "memory", "recall", "deploy", "--scope", "team", *FAKE, "-k", "2000")
    assert result.exit_code == 1 and "k must be between 0 and 1000, got 2000" in result.stderr
    assert "hint: k is the number of memories" in result.stderr


def test_memory_recall_explain(runner, memories):
    answer = recall_json(runner, memories, "--explain")
    assert answer["explain"]["pool"] and answer["hits"][0]["explain"]["memory"]
    assert "explain" not in recall_json(runner, memories)["hits"][0]
    out = ok(invoke(runner, memories, "memory", "recall", "when do we deploy", "--scope", "team", *FAKE,
                    "--explain", "--no-reconsolidate", "-k", 2)).stdout
    assert "ranking: " in out and "pool: " in out and "degradations: none" in out
    assert out.count("      memory: ") == 2 and "retention" in out and "x memory factor" in out


def test_memory_recall_receipt_is_read_only_and_replays(runner, memories):
    plain = recall_json(runner, memories, "-k", 3)
    taken = recall_json(runner, memories, "-k", 3, "--receipt")
    assert uuid.UUID(taken["receipt_id"]) and taken["hits"] == plain["hits"]
    # without --no-reconsolidate too: a receipt's recall reinforces nothing
    out = ok(invoke(runner, memories, "memory", "recall", "when do we deploy", "--scope", "team", *FAKE,
                    "--receipt", "--keep-query")).stdout
    rid = receipt_of(out)
    with psycopg.connect(memories) as conn:
        assert conn.execute("SELECT count(*) FROM dna.dna_instances WHERE scope = 'team' "
                            "AND (spec ->> 'surface_count')::int > 0").fetchone()[0] == 0
    assert "match: the same" in ok(invoke(runner, memories, "replay", rid)).stdout


def test_memory_recall_floors_drop_weak_matches_and_say_so(runner, memories):
    plain = recall_json(runner, memories)
    floored = recall_json(runner, memories, "--min-lexical-score", "1000")
    assert floored["floors"]["min_lexical_score"] == 1000 and floored["floors"]["removed_lexical"] >= 1
    assert any(h.get("lexical_score") for h in plain["hits"])
    assert not any(h.get("lexical_score") for h in floored["hits"])       # no lexical candidate is left
    with psycopg.connect(memories, autocommit=True) as conn:
        sql = conn.execute("SELECT dna.recall('team', 'when do we deploy', dna.fake_embed('when do we deploy'), %s, "
                           "reconsolidate => false, now => '2026-09-01T12:00:00Z', min_lexical_score => 1000)",
                           (MODEL,)).fetchone()[0]
    assert [h["name"] for h in floored["hits"]] == [h["name"] for h in sql["hits"]]
    text = ok(invoke(runner, memories, "memory", "recall", "when do we deploy", "--scope", "team", *FAKE,
                     "--min-lexical-score", "1000", "--no-reconsolidate")).stdout
    assert "lexical floor removed" in text
    bad = invoke(runner, memories, "memory", "recall", "deploy", "--scope", "team", *FAKE, "--min-similarity", "3")
    assert bad.exit_code == 1 and "min_similarity must be a cosine between -1 and 1, got 3" in bad.stderr
