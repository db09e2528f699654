"""as_of reads the past's text (issue 13): a belief "office is in lisbon", later restated "moved to
porto", is found at as_of by "lisbon" (ranked by the text believed then) and not by "porto"; every
memory ranked that way is named in as_of_past_text."""
from __future__ import annotations

from psycopg.types.json import Jsonb


def _remember(sql, name, summary):
    return sql.execute("SELECT dna.remember('team', %s, name => %s, embedding => dna.fake_embed(%s), "
                       "model_id => 'dna-fake-hash-v1')", (Jsonb({"summary": summary}), name, summary)).fetchone()[0]


def _recall(sql, query, as_of=None, embed=False):
    return sql.execute("SELECT dna.recall('team', %s, CASE WHEN %s THEN dna.fake_embed(%s) END, 'dna-fake-hash-v1', "
                       "as_of => %s, reconsolidate => false)", (query, embed, query, as_of)).fetchone()[0]


def test_as_of_ranks_the_text_believed_then(sql):
    _remember(sql, "office", "the office is in lisbon")
    _remember(sql, "cat", "the cat is called miso and lives in lisbon")
    before = sql.execute("SELECT clock_timestamp()").fetchone()[0]
    _remember(sql, "office", "the office moved to porto")
    for embed in (False, True):
        past = _recall(sql, "lisbon office", before, embed)
        names = [h["name"] for h in past["hits"]]
        assert {"office", "cat"} <= set(names), past
        office = past["hits"][names.index("office")]
        assert office["ranked_by"] == "past_text" and office["summary"] == "the office is in lisbon"
        assert office["as_of_version"] == 1
        assert past["as_of_past_text"] == ["office"] and past["as_of_truncated"] == []
        # The text of today is not what was believed then.
        assert "office" not in [h["name"] for h in _recall(sql, "porto", before, embed)["hits"]]
    # Today: porto, not lisbon.
    assert [h["name"] for h in _recall(sql, "porto")["hits"]] == ["office"]
    assert "office" not in [h["name"] for h in _recall(sql, "lisbon")["hits"]]
    # An as_of after the restatement reads today's text from the search rows.
    after = _recall(sql, "porto", sql.execute("SELECT clock_timestamp()").fetchone()[0])
    assert [h["name"] for h in after["hits"]] == ["office"] and after["as_of_past_text"] == []
    assert "ranked_by" not in after["hits"][0]
