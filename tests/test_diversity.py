"""Duplicate collapse and MMR (issue 27 item 2): dna.search's diversity, duplicate_similarity and
mmr_lambda, dna.recall's diversity and duplicate_similarity, through plain SQL, the Python client and
the CLI. The corpus is a doc set whose release notes repeat a paragraph of a topic page (as the Django
trial found: the same paragraph from two or three files in the top 3); the fake embedder embeds
"title body", so the copies have other vectors and are found by their text (dna.text_key), while a
passage with another text and nearly the same vector is found by its cosine."""
from __future__ import annotations

import json

import numpy as np
import psycopg
import pytest
from typer.testing import CliRunner

from pydna.cli import app

MODEL = "dna-fake-hash-v1"
QUERY = "cache an entire view"
PARA = ("The per-view cache stores the output of an entire view for a number of seconds. "
        "Use the cache_page decorator on the view to cache it whole.")
DOCS = [  # (name, title, body)
    ("topics/cache.md", "Caching", PARA),
    ("releases/4.0.md", "Release notes 4.0", PARA + "\n"),
    ("releases/4.1.md", "Release notes 4.1", "**The per-view cache** stores the output of an *entire view* for a "
                                             "number of seconds.\nUse the `cache_page` decorator on the view to cache it whole."),
    ("topics/low.md", "Low-level cache API", "The low-level cache API lets you cache any object for a number of "
                                             "seconds with cache.set and cache.get."),
    ("topics/fragments.md", "Template fragment caching", "Template fragment caching caches part of a template "
                                                         "for a number of seconds, not the view."),
    ("topics/sessions.md", "Sessions", "Sessions can be stored in the cache backend for speed."),
]
QUOTED = {"offset": '"offset"'}   # a reserved word: quoted in named notation
COPIES = {"topics/cache.md", "releases/4.0.md", "releases/4.1.md"}


def _seed(conn, scope="dup"):
    for name, title, body in DOCS:
        conn.execute("SELECT dna.index_document(%s, 'Doc', %s, %s, dna.fake_embed(%s), %s, title => %s)",
                     (scope, name, body, f"{title} {body}", MODEL, title))


def _search(conn, k=3, scope="dup", **args):
    named = "".join(f", {QUOTED.get(a, a)} => %({a})s" for a in args)
    return conn.execute(f"SELECT name, score, explain FROM dna.search(%(scope)s, %(q)s, dna.fake_embed(%(q)s), "
                        f"%(model)s, k => %(k)s{named})", {"scope": scope, "q": QUERY, "model": MODEL, "k": k, **args}
                        ).fetchall()


@pytest.fixture
def conn(dna_dsn):
    with psycopg.connect(dna_dsn, autocommit=True) as c:
        _seed(c)
        yield c


def test_default_top3_has_no_copy_where_off_has_two(conn):
    off = [r[0] for r in _search(conn, diversity="off")]
    assert len(COPIES & set(off)) >= 2                    # the same paragraph from two or three files
    default = [r[0] for r in _search(conn)]
    assert len(default) == 3 and len(COPIES & set(default)) == 1
    whole = [r[0] for r in _search(conn, k=10, diversity="off")]
    assert whole[0] in COPIES                             # the best-ranked copy answers, the others leave
    assert default == [whole[0]] + [n for n in whole if n not in COPIES][:2]
    keys = conn.execute("SELECT array_agg(dna.text_key(body)) FROM dna.dna_search_docs_384 WHERE scope = 'dup' "
                        "AND name = ANY (%s)", (list(COPIES),)).fetchone()[0]
    assert len(set(keys)) == 1                            # markup, case and line breaks do not tell them apart


def test_explain_names_what_was_collapsed_into_which_hit(conn):
    rows = _search(conn, explain=True)
    first = rows[0][2]
    collapsed = first["diversity"]["collapsed"]
    assert {c["name"] for c in collapsed} == COPIES - {rows[0][0]}
    assert all(c["reason"] == "same text" and c["fused_rank"] > 1 and c["kind"] == "Doc" for c in collapsed)
    answer = first["answer"]["diversity"]
    assert answer["method"] == "collapse" and answer["duplicate_similarity"] == 1
    assert answer["collapsed"] == 2
    assert "collapsed" not in rows[1][2]["diversity"]
    off = _search(conn, explain=True, diversity="off")
    assert off[0][2]["answer"]["diversity"]["method"] == "off" and "diversity" not in off[0][2]


def test_pages_of_one_size_compose_under_collapse_and_mmr(conn):
    for args in ({}, {"diversity": "mmr"}):
        whole = [r[0] for r in _search(conn, k=4, **args)]
        pages = [r[0] for r in _search(conn, k=2, **args)] + [r[0] for r in _search(conn, k=2, offset=2, **args)]
        assert whole == pages and len(set(whole)) == 4
        assert len(COPIES & set(whole)) == 1


def test_a_near_duplicate_by_cosine_collapses_at_its_threshold(conn):
    base = np.array(conn.execute("SELECT dna.fake_embed(%s)::real[]", (f"Caching {PARA}",)).fetchone()[0])
    other = np.array(conn.execute("SELECT dna.fake_embed('sessions and template fragments')::real[]").fetchone()[0])
    near = base + 0.15 * other
    near /= np.linalg.norm(near)
    cosine = float(base @ near / np.linalg.norm(base))
    assert 0.95 < cosine < 0.999
    # another text (no shared text key), nearly the same vector: the lexical lane still finds it
    conn.execute("SELECT dna.index_document('dup', 'Doc', 'howto/views.md', %s, %s::real[]::vector, %s, title => 'Views')",
                 ("How to cache an entire view: see the per-view cache.", near.tolist(), MODEL))
    pair = {"howto/views.md", "topics/cache.md"}          # topics/cache.md has the vector near is near to
    names = lambda **a: {r[0] for r in _search(conn, k=10, **a)}  # noqa: E731
    assert pair <= names(diversity="off")
    assert pair <= names()                                       # default 1: the text alone decides
    assert len(pair & names(duplicate_similarity=0.95)) == 1                 # 0.95 <= cosine
    assert pair <= names(duplicate_similarity=round(cosine + 0.001, 4))
    assert len(pair & names(duplicate_similarity=round(cosine - 0.001, 4))) == 1
    rows = _search(conn, k=10, explain=True, duplicate_similarity=0.95)
    into = [c for r in rows for c in r[2]["diversity"].get("collapsed", []) if c["name"] in pair]
    assert len(into) == 1 and into[0]["reason"] == "cosine" and abs(into[0]["similarity"] - cosine) < 1e-4


def test_mmr_orders_by_marginal_relevance_and_lambda_one_is_the_collapsed_ranking(conn):
    collapse = [r[0] for r in _search(conn, k=5)]
    assert [r[0] for r in _search(conn, k=5, mmr_lambda=1.0)] == collapse      # mmr_lambda alone selects mmr
    rows = _search(conn, k=5, diversity="mmr", mmr_lambda=0.3, explain=True)
    assert len(collapse) == 4 and len(COPIES & set(collapse)) == 1   # 6 documents, 3 of them one paragraph
    assert rows[0][0] == collapse[0] and {r[0] for r in rows} == set(collapse)
    d = [r[2]["diversity"] for r in rows]
    assert [x["place"] for x in d] == [1, 2, 3, 4] and d[0]["redundancy"] == 0
    assert all(0 <= x["relevance"] <= 1 and x["redundancy"] >= 0 for x in d)
    assert rows[0][2]["answer"]["diversity"]["mmr_lambda"] == 0.3
    # each place maximises 0.3 x relevance - 0.7 x redundancy among those placed after it (ties: better rank)
    for i in range(len(d) - 1):
        mine = 0.3 * d[i]["relevance"] - 0.7 * d[i]["redundancy"]
        # a later hit's redundancy only grew after place i, so its value then was at least its value now
        assert all(mine >= 0.3 * x["relevance"] - 0.7 * x["redundancy"] - 1e-9 for x in d[i + 1:])
    assert rows[0][2]["answer"]["diversity"]["method"] == "mmr"


def test_passages_collapse_the_same_paragraph_in_two_documents(client):
    low = "The low-level cache API lets you cache any object with cache.set and cache.get. "
    topic = "# Caching\n\n## The per-view cache\n\n" + PARA + "\n\n## Low level\n\n" + low * 12 + "\n"
    notes = ("# Release notes 4.0\n\n## What's new\n\n" + "A new sessions backend expires after some seconds. " * 20
             + "\n\n## Caching\n\n" + PARA + "\n")
    rst = ("Release notes 4.1\n=================\n\nWhat's new\n----------\n\n" + "A new thing for users. " * 40
           + "\n\nCaching\n-------\n\n" + PARA + "\n")
    client.index("pass", [{"name": "topics/cache.md", "body": topic, "format": "markdown"},
                          {"name": "releases/4.0.md", "body": notes, "format": "markdown"},
                          {"name": "releases/4.1.txt", "body": rst, "format": "rst"}], kind="Doc")
    off = client.search("pass", QUERY, passages=True, diversity="off", k=3)
    default = client.search("pass", QUERY, passages=True, k=3)
    keys = lambda hits: [client.conn.execute(  # noqa: E731
        "SELECT dna.text_key(body) FROM dna.dna_search_docs_384 WHERE scope = 'pass' AND name = %s AND passage = %s",
        (h.name, h.passage)).fetchone()[0] for h in hits]
    assert len(keys(off.hits)) - len(set(keys(off.hits))) >= 2        # the paragraph three times, from three files
    assert len(keys(default.hits)) == len(set(keys(default.hits)))
    # under its section's heading in each file (Markdown ATX, RST underline): the heading lines do not count
    assert {h.heading for h in off.hits[:3]} == {"Caching", "Release notes 4.0 > Caching", "Release notes 4.1 > Caching"}
    by_doc = client.search("pass", QUERY, k=3, explain=True)
    assert by_doc.names[0] == off.names[0] and not set(by_doc.names[1:]) & {"releases/4.0.md", "releases/4.1.txt"}
    assert {c["name"] for c in by_doc.hits[0].explain["diversity"]["collapsed"]} == {"releases/4.0.md", "releases/4.1.txt"}


def test_bad_diversity_arguments_are_refused_with_a_hint(conn):
    cases = [({"diversity": "dedupe"}, "diversity must be 'collapse', 'mmr' or 'off'"),
             ({"duplicate_similarity": 0.0}, "duplicate_similarity must be a cosine in (0, 1]"),
             ({"duplicate_similarity": 1.5}, "duplicate_similarity must be a cosine in (0, 1]"),
             ({"duplicate_similarity": float("nan")}, "duplicate_similarity must be a cosine in (0, 1]"),
             ({"diversity": "off", "duplicate_similarity": 0.9}, "duplicate_similarity is the collapse's"),
             ({"mmr_lambda": 1.5}, "mmr_lambda must be between 0 and 1"),
             ({"diversity": "collapse", "mmr_lambda": 0.5}, "mmr_lambda is MMR's")]
    for args, message in cases:
        with pytest.raises(psycopg.errors.InvalidParameterValue) as info:
            _search(conn, **args)
        assert message in info.value.diag.message_primary, args
        assert info.value.diag.message_hint, args
    # case and blanks ignored
    assert [r[0] for r in _search(conn, diversity=" MMR ")] == [r[0] for r in _search(conn, diversity="mmr")]
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="diversity must be 'collapse' or 'off'"):
        conn.execute("SELECT dna.recall('team', 'x', diversity => 'mmr')")
    with pytest.raises(psycopg.errors.InvalidParameterValue):
        conn.execute("SELECT dna.diversify(ARRAY[NULL::vector], ARRAY['a'], ARRAY[1.0, 2.0]::float8[])")


def test_recall_collapses_a_memory_remembered_twice(client, dna_dsn):
    mem = client.memory
    mem.remember("team", "Deploys to production happen on Thursdays after the standup", name="deploy-a")
    mem.remember("team", "Deploys to production happen on Thursdays, after the standup.", name="deploy-b",
                 affect="surprise")              # the same text (up to punctuation), better standing
    mem.remember("team", "The staging database is restored every Monday", name="staging")
    off = mem.recall("team", "when do deploys to production happen", k=3, reconsolidate=False, diversity="off")
    assert {"deploy-a", "deploy-b"} <= {h["name"] for h in off["hits"]}
    got = mem.recall("team", "when do deploys to production happen", k=3, reconsolidate=False, explain=True)
    names = [h["name"] for h in got["hits"]]
    assert len({"deploy-a", "deploy-b"} & set(names)) == 1 and "staging" in names
    kept = next(h for h in got["hits"] if h["name"] in ("deploy-a", "deploy-b"))
    assert kept["name"] == "deploy-b"             # collapsed in recall's order, after the re-score by standing
    assert [(c["name"], c["reason"]) for c in kept["explain"]["collapsed"]] == [("deploy-a", "same text")]
    assert got["explain"]["diversity"]["method"] == "collapse" and got["explain"]["diversity"]["collapsed"] == 1
    # through the SQL verb as well
    with psycopg.connect(dna_dsn, autocommit=True) as conn:
        plain = conn.execute("SELECT dna.recall('team', %(q)s, dna.fake_embed(%(q)s), k => 3, reconsolidate => false)",
                             {"q": "when do deploys to production happen"}).fetchone()[0]
    assert [h["name"] for h in plain["hits"]] == names


def test_python_client_and_cli_take_the_arguments(client, dna_dsn, tmp_path, monkeypatch):
    client.index("cli", [{"name": n, "title": t, "body": b} for n, t, b in DOCS], kind="Doc")
    assert len(COPIES & set(client.search("cli", QUERY, k=3, diversity="off").names)) >= 2
    assert len(COPIES & set(client.search("cli", QUERY, k=3).names)) == 1
    mmr = client.search("cli", QUERY, k=3, mmr_lambda=0.5, explain=True)
    assert mmr.hits[0].explain["answer"]["diversity"]["method"] == "mmr"
    receipt = client.search("cli", QUERY, k=3, diversity="off", receipt=True)
    assert receipt.names == client.search("cli", QUERY, k=3, diversity="off").names
    monkeypatch.delenv("DNA_DATABASE_URL", raising=False)
    monkeypatch.setenv("DNA_HOME", str(tmp_path / "home"))
    runner = CliRunner()

    def cli(*args, code=0):
        result = runner.invoke(app, ["--dsn", dna_dsn, *args])
        assert result.exit_code == code, f"{result.stdout}\n{result.stderr}\n{result.exception!r}"
        return result

    hits = lambda *flags: [h["name"] for h in json.loads(cli(  # noqa: E731
        "search", QUERY, "--scope", "cli", "--embedder", "fake", "-k", "3", "--json", *flags).stdout)["hits"]]
    assert len(COPIES & set(hits("--diversity", "off"))) >= 2
    assert len(COPIES & set(hits())) == 1
    assert hits("--mmr-lambda", "1") == hits()
    assert hits("--duplicate-similarity", "0.99") == hits()
    shown = cli("search", QUERY, "--scope", "cli", "--embedder", "fake", "-k", "3", "--explain").stdout
    assert "diversity: collapse" in shown and "collapsed into this hit: releases/" in shown
    bad = cli("search", QUERY, "--scope", "cli", "--embedder", "fake", "--diversity", "dedupe", code=1)
    assert "22023" in bad.stderr
    client.memory.remember("team", "Deploys happen on Thursdays", name="d1")
    client.memory.remember("team", "deploys happen on thursdays!", name="d2")
    recalled = lambda *flags: [h["name"] for h in json.loads(cli(  # noqa: E731
        "memory", "recall", "deploys thursdays", "--scope", "team", "--embedder", "fake", "--json",
        "--no-reconsolidate", *flags).stdout)["hits"]]
    assert sorted(recalled("--diversity", "off")) == ["d1", "d2"] and len(recalled()) == 1
    assert "22023" in cli("memory", "recall", "x", "--scope", "team", "--embedder", "fake", "--diversity", "mmr",
                          code=1).stderr


def test_many_copies_still_give_k_hits_past_the_first_candidates(dna_dsn):
    """collapse reads the first 2 x (offset + k) + 8 candidates first; when those hold fewer than offset + k
    distinct texts (here 40 copies rank first), it walks the whole ranking: k distinct hits, the same as a
    walk of the off ranking that keeps each text once."""
    with psycopg.connect(dna_dsn, autocommit=True) as c:
        for i in range(40):
            c.execute("SELECT dna.index_document('many', 'Doc', %s, %s, dna.fake_embed(%s), %s)",
                      (f"copy-{i:02d}", PARA, PARA, MODEL))
        for i in range(15):
            body = f"The cache of view number {i} keeps an entire page for {i} seconds."
            c.execute("SELECT dna.index_document('many', 'Doc', %s, %s, dna.fake_embed(%s), %s)",
                      (f"other-{i:02d}", body, body, MODEL))
        for k, offset in ((10, 0), (5, 5), (3, 0)):
            got = [r[0] for r in _search(c, k=k, scope="many", offset=offset)]
            ranking = [r[0] for r in _search(c, k=200, scope="many", diversity="off")]
            seen, walk = set(), []
            for name in ranking:
                key = "copy" if name.startswith("copy-") else name
                if key not in seen:
                    seen.add(key)
                    walk.append(name)
            assert got == walk[offset:offset + k] and len(got) == k


def test_a_passage_of_headings_alone_collapses_with_its_copy(sql):
    """A section cut off before its text (RST title and underline only: release notes repeating a CVE's
    heading) is keyed by its heading, so its copy in another file collapses; text keys as before otherwise."""
    rst = "CVE-2023-43665: Denial-of-service possibility in ``django.utils.text.Truncator``\n" + "=" * 79 + "\n"
    assert sql.execute("SELECT dna.text_key(%s) = dna.text_key(%s)", (rst, rst.replace("=", "~"))).fetchone()[0]
    assert sql.execute("SELECT dna.text_key(%s)", (rst,)).fetchone()[0].startswith(" cve 2023 43665 denial ")
    assert sql.execute("SELECT dna.text_key(%s)", ("Title\n=====\n\nBody text.",)).fetchone()[0] == " body text "
    assert sql.execute("SELECT dna.text_key('  ... ')").fetchone()[0] is None
