"""Highlights never drop the words between two fragments that touch (revision 0023_still_open, topic
snippet_words). ts_headline (MaxFragments=2) starts its second fragment at the first word it may end on
after the first fragment, so "a couple of options" showed as "a couple … options": dna.identifier_headline
gives the text between them back when it holds only punctuation, stop words and words of 3 characters or
fewer, and keeps " … " for a gap of other words. Through plain SQL and through dna.search's highlight."""
from __future__ import annotations

import psycopg

MODEL = "dna-fake-hash-v1"
FILLER = " ".join(f"filler{i:02d}" for i in range(3, 40))
# The first fragment (two query words) grows to 40 words and ends on "couple"; the second is "options".
TOUCHING = f"Django testing {FILLER} couple of options for this. You could rather create the relationships."
# Forty other words part the two fragments.
APART = (f"Django testing {FILLER} couple {' '.join(f'other{i:02d}' for i in range(40))} options for this "
         "and then more words follow here.")


def headline(conn, body: str, query: str) -> str:
    return conn.execute("SELECT dna.identifier_headline('english', %s, dna.lexical_query(%s))",
                        (body, query)).fetchone()[0]


def test_fragments_parted_by_a_stop_word_are_one(sql):
    got = headline(sql, TOUCHING, "django testing options")
    assert "couple of «options» for this" in got, got
    assert "…" not in got, got


def test_fragments_parted_by_other_words_keep_the_ellipsis(sql):
    got = headline(sql, APART, "django testing options")
    assert "couple … other21" in got and "«options»" in got, got   # other00..other20 are not shown
    assert "other20" not in got, got


def test_the_body_holding_the_private_character_still_highlights(sql):
    got = headline(sql, TOUCHING + " \ue000", "django testing options")   # the fragments as ts_headline cut them
    assert "couple … «options»" in got, got


def test_search_highlight_keeps_the_words(sql):
    sql.execute("SELECT dna.index_document('snip', 'Doc', 'testing', %s, dna.fake_embed(%s), %s)",
                (TOUCHING, TOUCHING, MODEL))
    got = sql.execute("SELECT highlight FROM dna.search('snip', 'django testing options', "
                      "dna.fake_embed('django testing options'), %s, k => 1, highlight => true)",
                      (MODEL,)).fetchone()[0]
    assert "couple of «options»" in got, got
