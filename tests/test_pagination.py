"""Pages of dna.recall and dna.list_memories (issue 27 item 6), through plain SQL and the Python client.

A page is a window of one ranking: recall's page (offset, k) is ranks offset+1 .. offset+k of the recall
at k => offset + k, whatever the memories' standing (property test over memories of varied affect and
age); over tied memories (equal text, equal standing: dna.search's ties) the pages of one size walk the
ranking with no memory twice and none left out. A listing's pages are windows of its one order (created
desc, then name, kind, tenant), next_offset chains them and is NULL on the last. A negative, NULL or too
large offset is 22023 with a hint."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg.types.json import Jsonb

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
QUERY = "deploy window rollback notes"
AFFECTS = ("triumph", "regret", "surprise", "wistful", "ominous", "neutral")
WORDS = ("deploy", "window", "rollback", "notes", "friday", "canary", "release", "pager")


def _tied(client, scope: str, n: int) -> list[str]:
    """n memories of one text written at one time: equal scores in both lanes, equal standing."""
    names = [f"t{i:03d}" for i in range(n)]
    client.memory.remember_many(scope, [{"name": name, "summary": "deploy window rollback notes, shared text"}
                                        for name in names], now=NOW)
    return names


def _varied(client, scope: str, n: int) -> list[str]:
    """n memories of overlapping texts, of every affect, written over a year: their factors differ."""
    items = []
    for i in range(n):
        words = " ".join(WORDS[(i * j) % len(WORDS)] for j in range(1, 2 + i % 5))
        items.append({"name": f"v{i:03d}", "summary": f"{words} item {i}", "affect": AFFECTS[i % len(AFFECTS)],
                      "now": (NOW - timedelta(days=9 * i)).isoformat()})
    client.memory.remember_many(scope, items)
    return [it["name"] for it in items]


def _recall(sql, scope: str, k: int, offset: int | None = None, decay: str = "written",
            diversity: str | None = None) -> dict:
    extra = ', "offset" => %s' if offset is not None else ""
    args = (scope, QUERY, QUERY, k, NOW, decay, diversity) + ((offset,) if offset is not None else ())
    return sql.execute("SELECT dna.recall(%s, %s, dna.fake_embed(%s), k => %s, reconsolidate => false, now => %s, "
                       f"decay => %s, diversity => %s{extra})", args).fetchone()[0]


def _names(answer: dict) -> list[str]:
    return [h["name"] for h in answer["hits"]]


def _state(sql, query: str, args: tuple) -> psycopg.Error:
    with pytest.raises(psycopg.Error) as info:
        sql.execute(query, args)
    return info.value


# -- recall --------------------------------------------------------------------------------------------

def test_recall_pages_over_tied_memories_walk_one_ranking(sql, client):
    """150 tied memories (more than the lanes' depth at k = 10): pages of 10 walk the ranking of one recall
    at k = 150, no memory twice, none left out; next_offset chains them."""
    names = _tied(client, "tied", 150)
    whole = _names(_recall(sql, "tied", 150, diversity="off"))   # one text: collapse would answer it once
    assert sorted(whole) == names and whole == names                   # ties order by name
    for k in (7, 10, 25):
        walked, offset = [], 0
        while offset is not None:
            page = _recall(sql, "tied", k, offset, diversity="off")
            assert page["offset"] == offset and page["k"] == k
            assert _names(page) == whole[offset:offset + k], (k, offset)
            walked += _names(page)
            offset = page["next_offset"]
        assert walked == whole, k


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(k=st.integers(0, 12), offset=st.integers(0, 40))
def test_recall_page_is_a_window_of_the_recall_at_offset_plus_k(varied_world, k, offset):
    """Property: over memories whose factors differ (affect, age with decay written), page (offset, k) is
    ranks offset+1 .. offset+k of one recall at k => offset + k, hit for hit (score, factor, rank_search)."""
    sql = varied_world
    page = _recall(sql, "varied", k, offset)
    whole = _recall(sql, "varied", offset + k)
    assert page["hits"] == whole["hits"][offset:offset + k]
    more = len(whole["hits"]) == offset + k and _recall(sql, "varied", offset + k + 1)["hits"][offset + k:]
    assert (page["next_offset"] is not None) == bool(k and len(page["hits"]) == k and more), page["next_offset"]


@pytest.fixture
def varied_world(sql, client):
    _varied(client, "varied", 45)
    return sql


def test_recall_without_offset_is_the_first_page(sql, client):
    _varied(client, "varied", 20)
    plain = sql.execute("SELECT dna.recall('varied', %s, dna.fake_embed(%s), k => 5, reconsolidate => false, "
                        "now => %s)", (QUERY, QUERY, NOW)).fetchone()[0]
    assert plain["offset"] == 0 and plain["next_offset"] == 5
    assert plain["hits"] == _recall(sql, "varied", 5, 0, decay="surfaced")["hits"]
    last = _recall(sql, "varied", 5, 15)
    assert len(last["hits"]) == 5 and last["next_offset"] is None       # the 20th is the last


@pytest.mark.parametrize("k, offset", [(5, -1), (5, None), (5, 996), (1000, 1), (0, 1001)])
def test_recall_offset_out_of_range_is_22023_with_a_hint(sql, k, offset):
    err = _state(sql, "SELECT dna.recall('varied', 'x', k => %s, \"offset\" => %s)", (k, offset))
    assert err.sqlstate == "22023" and "offset must be between 0 and 1000 - k" in err.diag.message_primary
    assert "next_offset" in err.diag.message_hint and "at most 1000" in err.diag.message_hint


def test_recall_pages_through_the_client_and_a_receipt(client):
    _tied(client, "tied", 30)
    first = client.memory.recall("tied", QUERY, k=10, reconsolidate=False, now=NOW, diversity="off")
    second = client.memory.recall("tied", QUERY, k=10, offset=first["next_offset"], reconsolidate=False, now=NOW,
                                  diversity="off")
    assert [h["name"] for h in second["hits"]] == [f"t{i:03d}" for i in range(10, 20)]
    kept = client.memory.recall("tied", QUERY, k=10, offset=10, receipt=True, now=NOW, diversity="off")
    assert [h["name"] for h in kept["hits"]] == [f"t{i:03d}" for i in range(10, 20)] and kept["receipt_id"]
    with pytest.raises(psycopg.errors.InvalidParameterValue):
        client.memory.recall("tied", QUERY, k=10, offset=-3)


# -- list_memories ----------------------------------------------------------------------------------------

def _listing(sql, scope: str, n: int, offset: int | None = None) -> dict:
    extra = ', "offset" => %s' if offset is not None else ""
    return sql.execute(f"SELECT dna.list_memories(%s, max_rows => %s{extra})",
                       (scope, n) + ((offset,) if offset is not None else ())).fetchone()[0]


@pytest.fixture
def listed(sql):
    """45 memories, in 5 batches written at one time each (equal created_at: the name breaks the tie)."""
    for batch in range(5):
        items = [{"name": f"m{batch}-{i:02d}", "spec": {"summary": f"memory {i} of batch {batch}"}} for i in range(9)]
        sql.execute("SELECT dna.remember_many('list', %s, now => %s)", (Jsonb(items), NOW - timedelta(days=batch)))
    return sql


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(0, 20), offset=st.integers(0, 60))
def test_list_page_is_a_window_of_one_listing(listed, n, offset):
    whole = _listing(listed, "list", 100)["memories"]
    page = _listing(listed, "list", n, offset)
    assert page["memories"] == whole[offset:offset + n] and page["total"] == 45 and page["offset"] == offset
    end = offset + len(page["memories"])
    assert page["next_offset"] == (end if n and end < 45 else None)


def test_list_pages_walk_the_newest_first_order(listed):
    whole = _listing(listed, "list", 100)["memories"]
    assert [m["name"] for m in whole[:9]] == [f"m0-{i:02d}" for i in range(9)]    # newest batch, by name
    walked, offset = [], 0
    while offset is not None:
        page = _listing(listed, "list", 10, offset)
        walked += page["memories"]
        offset = page["next_offset"]
    assert walked == whole and len(walked) == 45
    assert _listing(listed, "list", 10, 45)["memories"] == []


@pytest.mark.parametrize("offset", [-1, None, 1000001])
def test_list_offset_out_of_range_is_22023_with_a_hint(sql, offset):
    err = _state(sql, "SELECT dna.list_memories('list', \"offset\" => %s)", (offset,))
    assert err.sqlstate == "22023" and "offset must be between 0 and 1000000" in err.diag.message_primary
    assert "next_offset" in err.diag.message_hint


def test_list_max_rows_refusal_now_hints_the_offset(sql):
    err = _state(sql, "SELECT dna.list_memories('list', max_rows => 10001)", ())
    assert err.sqlstate == "22023" and '"offset"' in err.diag.message_hint


def test_list_pages_through_the_client_with_a_filter(client):
    client.memory.remember_many("list", [{"name": f"m{i:02d}", "summary": f"memory {i}",
                                          "tags": ["ops" if i % 2 else "dev"]} for i in range(12)], now=NOW)
    first = client.memory.list("list", limit=4, filter={"tags": {"contains": "ops"}})
    assert first["total"] == 6 and first["next_offset"] == 4
    rest = client.memory.list("list", limit=4, offset=4, filter={"tags": {"contains": "ops"}})
    assert [m["name"] for m in first["memories"] + rest["memories"]] == [f"m{i:02d}" for i in range(1, 12, 2)]
    assert rest["next_offset"] is None
