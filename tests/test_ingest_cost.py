"""dna.identifier_tokens skips texts that cannot hold an identifier (revision 0024, topic ingest_cost): every
identifier it finds needs an underscore, a dot between name characters or a CamelCase run, so one scan for
those decides, and a text without any is not split into tokens (9 SciFact abstracts in 10; the identifier
part of dna.text_tsvector was ~3/4 of its cost, the largest step of a bulk load). The tokens, and so every
tsvector, are revision 0023's: compared on the SciFact excerpt of tests/data, edge cases and random texts.
Plain SQL."""
from __future__ import annotations

import json
import random
from pathlib import Path

# dna.identifier_tokens as revision 0023 released it: the reference.
REFERENCE = r"""
CREATE FUNCTION pg_temp.tokens_0023(body text) RETURNS TABLE (token text, n integer) LANGUAGE sql IMMUTABLE AS $$
    SELECT m.t, count(*)::integer
    FROM (SELECT x[1] AS t
          FROM regexp_matches(regexp_replace(coalesce(body, ''), '(^|[^A-Za-z0-9_.])\.(?=[A-Za-z_])', '\1 ', 'g'),
                              '(?<![A-Za-z0-9_.])([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)', 'g') AS x) AS m
    WHERE (strpos(m.t, '_') > 0 AND m.t ~ '[A-Za-z0-9]')
       OR (strpos(m.t, '.') > 0 AND m.t !~ '(^|\.)[A-Za-z0-9_](\.|$)')
       OR m.t ~ '[a-z][A-Z][a-z]{2}'
    GROUP BY m.t
$$"""
EDGES = ["", " ", "a", "_", "__", "a_", "_a", "a.__", "__.a", "a._b", "x.y", "e.g. this", "i.e.,", "H2A.Z", "0.5 mg",
         "cells.The", "QuerySet", "getElementById", "HeLa", "mRNA", "ATPase", "on_commit()", "__init__.py",
         "django.db.transaction.on_commit", ":meth:`.QuerySet.select_for_update`", ".hidden", "a..b", "a.b.c",
         "naïve_café", "Ümlaut_x", "x\u00a0_y", "snake_case and CamelCase and dotted.names", "end.", "...",
         "ab.cd", "a.bc", "ab.c", "AbcDef", "aBcd", "abCde", "x_1", "1_x", "_1", "1.e", "e.1", "A.B"]


def _random_texts(n=2000, seed=20261204):
    rng = random.Random(seed)
    alphabet = ["a", "b", "Z", "Q", "7", " ", "_", ".", "..", "-", "ab", "Cd", "cD", "e", "é", "\n", "(", ":", "`"]
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30))) for _ in range(n)]


def _scifact():
    path = Path(__file__).parent / "data" / "scifact" / "corpus-400.jsonl"
    return [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines()]


def test_tokens_equal_the_released_tokens(sql):
    sql.execute(REFERENCE)
    texts = EDGES + _random_texts() + _scifact()
    differing = sql.execute(
        "SELECT array_agg(u.t) FROM unnest(%s::text[]) AS u(t) "
        "WHERE ARRAY(SELECT row(x.token, x.n)::text FROM dna.identifier_tokens(u.t) AS x ORDER BY 1) "
        "   IS DISTINCT FROM ARRAY(SELECT row(y.token, y.n)::text FROM pg_temp.tokens_0023(u.t) AS y ORDER BY 1)",
        (texts,)).fetchone()[0]
    assert differing is None
    assert sql.execute("SELECT count(*) FROM dna.identifier_tokens(NULL)").fetchone()[0] == 0
    # the rule still finds each kind
    found = {r[0] for r in sql.execute("SELECT token FROM dna.identifier_tokens(%s)",
                                       ("Use transaction.on_commit in a QuerySet, not e.g. x.y or __init__",))}
    assert found == {"transaction.on_commit", "QuerySet", "__init__"}

