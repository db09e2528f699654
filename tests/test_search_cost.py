"""The collapse above dna.search's lanes made cheaper without changing an answer (issue 26 item 7,
revision 0023 topic search_cost): dna.text_key replaces the runs of characters other than letters and
digits by a pattern that leaves a lone space alone, and skips the heading patterns for a text without a
line break; the collapse reads the passage vectors only where a cosine is used (MMR, a
duplicate_similarity below 1, explain). Through plain SQL (psycopg) and the Python client."""
from __future__ import annotations

import random

import psycopg
import pytest

MODEL = "dna-fake-hash-v1"
# dna.text_key as revision 0022 released it: the reference every new key must equal.
REFERENCE = r"""coalesce(
    nullif(' ' || btrim(regexp_replace(lower(
           regexp_replace(regexp_replace(regexp_replace(coalesce(t, ''),
               '^[^\n]*\n([=~^"''`#*+:._-])\1{2,}[ \t]*$', '', 'gn'),
               '^([=~^"''`#*+:._-])\1{2,}[ \t]*$', '', 'gn'),
               '^[ \t]{0,3}#{1,6}([ \t][^\n]*)?$', '', 'gn')),
           '[^[:alnum:]]+', ' ', 'g')) || ' ', '  '),
    nullif(' ' || btrim(regexp_replace(lower(coalesce(t, '')), '[^[:alnum:]]+', ' ', 'g')) || ' ', '  '))"""
EDGES = ["", " ", "   ", ",", "a", " a ", "a,,b", "a , b", "a  b", "a \t b", "a\tb", "-a-", "a - b -- c", "a. B, c; d!",
         "Title\n=====\nbody text", "Title\n=====\n\nBody text.", "# only", "## x\n## y", "===", "=== ", "# a", "#a",
         "  # h\nrest", "=====\nTitle\n=====\ntext", "naïve café — déjà vu", "«quoted» text", "a\u00a0b", "ß İ ǅ",
         "a\r\nb", "a\n\n\nb", "x_y_z", "__init__", "a  ,  b", " , ", ".\n.", "**bold** and `code`", "1.5 ± 0.2 µm",
         "line one\n  # not a heading? yes\nline three", "~~~\ncode\n~~~", "a\n", "\n", "\n\n a \n"]


def _random_texts(n=3000, seed=20261203):
    rng = random.Random(seed)
    alphabet = ["a", "B", "7", " ", "  ", "\t", "\n", "\n\n", ",", ".", "-", "--", "=", "===", "#", "## ", "_", "é",
                "—", "«", "ß", "\r\n", "*", "`", "~~~", ":", "Title\n=====\n", "  # h\n", "\u00a0", "!?", "word"]
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))) for _ in range(n)]


def test_text_key_equals_the_released_key_on_edges_and_random_texts(sql):
    texts = EDGES + _random_texts()
    differing = sql.execute(
        f"SELECT array_agg(t) FROM unnest(%s::text[]) AS u(t) WHERE dna.text_key(t) IS DISTINCT FROM {REFERENCE}",
        (texts,)).fetchone()[0]
    assert differing is None
    assert sql.execute("SELECT dna.text_key(NULL) IS NULL AND dna.text_key(' ... ') IS NULL").fetchone()[0]
    # both forms: a text with a line break drops its heading lines, one without keeps every word
    assert sql.execute("SELECT dna.text_key(%s), dna.text_key(%s)", ("Title\n=====\nSame body, here.", "Same  body here")
                       ).fetchone() == (" same body here ", " same body here ")
    assert sql.execute("SELECT dna.text_key('# Title')").fetchone()[0] == " title "   # only a heading: keyed by it


def test_text_key_equals_the_released_key_on_indexed_passages(sql, client):
    body = ("Intro\n=====\n\nThe per-view cache stores, for a number of seconds, the output of a view.\n\n"
            "Usage\n-----\n\nUse ``cache_page`` — the decorator — on the view: «cache it whole».\n\n"
            "# Notes\n\nNothing else; 1.5 ± 0.2 s.")
    client.index("keys", [{"name": "a.rst", "body": body}, {"name": "b.txt", "body": "One line, no break: ok."}],
                 kind="Doc")
    rows = sql.execute(f"SELECT count(*), count(*) FILTER (WHERE dna.text_key(body) IS DISTINCT FROM "
                       f"{REFERENCE.replace('coalesce(t,', 'coalesce(body,')}) "
                       f"FROM dna.dna_search_docs_384 WHERE scope = 'keys'").fetchone()
    assert rows[0] >= 2 and rows[1] == 0


PARA = ("The per-view cache stores the output of an entire view for a number of seconds. "
        "Use the cache_page decorator on the view to cache it whole.")


@pytest.fixture
def dup(dna_dsn):
    with psycopg.connect(dna_dsn, autocommit=True) as c:
        for name, title, body in [("topics/cache.md", "Caching", PARA), ("releases/4.0.md", "Release notes 4.0", PARA),
                                  ("topics/low.md", "Low-level", "The low-level cache API caches any object."),
                                  ("topics/tpl.md", "Fragments", "Template fragment caching caches part of a view.")]:
            c.execute("SELECT dna.index_document('dup', 'Doc', %s, %s, dna.fake_embed(%s), %s, title => %s)",
                      (name, body, f"{title} {body}", MODEL, title))
        yield c


def _search(conn, **args):
    named = "".join(f", {a} => %({a})s" for a in args)
    return conn.execute(f"SELECT name, score, explain FROM dna.search('dup', %(q)s, dna.fake_embed(%(q)s), %(m)s, "
                        f"k => 3{named})", {"q": "cache an entire view", "m": MODEL, **args}).fetchall()


def test_collapse_without_vectors_keeps_the_hits_and_explain_still_reports_the_cosine(dup):
    default = _search(dup)                                          # text rules alone: no vector read
    assert len(default) == 3 and len({"topics/cache.md", "releases/4.0.md"} & {r[0] for r in default}) == 1
    assert _search(dup, duplicate_similarity=1.0) == default
    explained = _search(dup, explain=True)                          # vectors read: the collapsed hit's cosine
    assert [(r[0], r[1]) for r in explained] == [(r[0], r[1]) for r in default]
    (collapsed,) = explained[0][2]["diversity"]["collapsed"]
    assert collapsed["reason"] == "same text" and -1 <= collapsed["similarity"] < 1   # other titles: other vectors
    # the cosine rule (duplicate_similarity < 1) still reads them: at the cosine between the first two hits the
    # second is collapsed into the first
    cos = dup.execute("SELECT 1 - (a.embedding <=> b.embedding) FROM dna.dna_search_docs_384 AS a, "
                      "dna.dna_search_docs_384 AS b WHERE a.scope = 'dup' AND b.scope = 'dup' AND a.name = %s "
                      "AND b.name = %s", (default[0][0], default[1][0])).fetchone()[0]
    assert 0 < cos < 1
    cut = [r[0] for r in _search(dup, duplicate_similarity=cos - 1e-9)]
    assert cut[0] == default[0][0] and default[1][0] not in cut
    assert [r[0] for r in _search(dup, diversity="mmr")][:1] == [default[0][0]]
