"""Turns of a conversation are never collapsed into one another by their text (revision 0023, topic
turn_collapse): a turn is indexed with the turns before it (dna.conversation_context_turns()), so the
indexed text of turn i+1 holds turn i's whole text. Under 0022's default collapse a search or recall that
found both returned only the later one: on LoCoMo dev recall R@10 fell from 0.759 (diversity 'off') to
0.722 (bench/RESULTS.md). Each turn is its own event (its speaker and time); documents and other
memories still collapse as before."""
from __future__ import annotations

from psycopg.types.json import Jsonb

SESSIONS = {"1": "2023-05-08T13:56:00Z"}
LONG = [{"speaker": "Caroline", "text": "I went to the LGBTQ support group yesterday evening and the stories "
                                        "people shared about their transition were really moving for me."},
        {"speaker": "Melanie", "text": "That support group sounds wonderful, what did you like most about it?"},
        {"speaker": "Caroline", "text": "The support group made me feel accepted, the stories were moving."}]


def _names(sql, call, *args):
    return [h for h in sql.execute(call, args).fetchone()[0]]


def test_search_and_recall_keep_each_turn_whose_text_a_later_turn_quotes(sql):
    sql.execute("SELECT dna.remember_conversation('tc', 'c1', %s, sessions => %s)", (Jsonb(LONG), Jsonb(SESSIONS)))
    search = ("SELECT coalesce(jsonb_agg(s.name ORDER BY s.score DESC, s.name), '[]') FROM dna.search('tc', "
              "'support group stories transition moving', k => 10, kinds => '{Turn}') AS s")
    off = _names(sql, search.replace("kinds => '{Turn}'", "kinds => '{Turn}', diversity => 'off'"))
    assert len(off) == 3
    assert sorted(_names(sql, search)) == sorted(off)
    recall = ("SELECT coalesce(jsonb_agg(h ->> 'name'), '[]') FROM jsonb_array_elements(dna.recall('tc', "
              "'support group stories transition moving', k => 10, kinds => '{Turn}', reconsolidate => false) -> 'hits') AS h")
    assert sorted(_names(sql, recall)) == sorted(off)


def test_documents_with_the_same_paragraph_still_collapse(sql):
    para = ("Release 5.1 fixes a crash in the query planner when a subquery returns no rows and the outer "
            "query orders by an annotation.")
    sql.execute("SELECT dna.index_document('tc', 'Doc', 'notes/a', %s, model_id => 'dna-fake-hash-v1', title => 'Notes A')", (para,))
    sql.execute("SELECT dna.index_document('tc', 'Doc', 'notes/b', %s, model_id => 'dna-fake-hash-v1', title => 'Notes B')", (para,))
    got = _names(sql, "SELECT coalesce(jsonb_agg(s.name), '[]') FROM dna.search('tc', 'crash query planner subquery', model_id => 'dna-fake-hash-v1', "
                      "k => 10, kinds => '{Doc}') AS s")
    assert len(got) == 1
