"""Conversations (dna.remember_conversation): a conversation's turns in one call and one transaction;
each turn a memory (Kind Turn) that knows its conversation, session, place, speaker and time, indexed
with the turns before it; each session an Episode with its time span; re-sending changes nothing, new
turns append; recall returns each turn with its neighbours (context => n) and narrows by conversation,
session or speaker (the filter). From SQL, Python, MCP and REST."""
from __future__ import annotations

import anyio
import psycopg
import pytest
from fastapi.testclient import TestClient
from mcp import Client as McpClient
from psycopg.types.json import Jsonb

from doors_world import SCOPE, auth, door_roles, door_world  # noqa: F401  (fixtures)
from pydna import FakeEmbeddingProvider

S1 = [{"speaker": "Caroline", "role": "user", "text": "I went to the LGBTQ support group yesterday."},
      {"speaker": "Melanie", "role": "user", "text": "Did you like it?"},
      {"speaker": "Caroline", "role": "user", "text": "Yes, I did! It was so inspiring."}]
S2 = [{"speaker": "Melanie", "text": "I signed up for a pottery class.", "session": "2"},
      {"speaker": "Caroline", "text": "That sounds fun, when does it start?", "session": "2"}]
SESSIONS = {"1": "2023-05-08T13:56:00Z", "2": "2023-05-25T10:00:00Z"}


def _remember(sql, turns, conversation="c1", **kw):
    args = "".join(f", {k} => %({k})s" for k in kw)
    return sql.execute(f"SELECT dna.remember_conversation('chat', %(c)s, %(turns)s, sessions => %(sessions)s{args})",
                       {"c": conversation, "turns": Jsonb(turns), "sessions": Jsonb(SESSIONS), **kw}).fetchone()[0]


def _turns(sql, conversation="c1"):
    return sql.execute("SELECT spec #>> '{conversation,session}', (spec #>> '{conversation,turn}')::int, "
                       "spec #>> '{conversation,speaker}', spec ->> 'summary', spec ->> 'context', spec ->> 'created_at', name "
                       "FROM dna.dna_instances WHERE scope = 'chat' AND kind = 'Turn' AND metadata @> %s ORDER BY 1, 2",
                       (Jsonb({"conversation": conversation}),)).fetchall()


def test_one_call_writes_each_turn_with_its_place_context_time_and_the_sessions_as_episodes(sql):
    out = _remember(sql, S1 + S2)
    assert (out["created"], out["failed"]) == (7, 0) and len(out["turns"]) == 5 and len(out["episodes"]) == 2
    assert [t["ord"] for t in out["turns"]] == [1, 2, 3, 4, 5] and all(t["kind"] == "Turn" for t in out["turns"])
    rows = _turns(sql)
    assert [(r[0], r[1], r[2]) for r in rows] == [("1", 1, "Caroline"), ("1", 2, "Melanie"), ("1", 3, "Caroline"),
                                                   ("2", 1, "Melanie"), ("2", 2, "Caroline")]
    # the turns before it, in its session (dna.conversation_context_turns() = 2)
    assert rows[0][4] is None and rows[1][4] == "Caroline: I went to the LGBTQ support group yesterday."
    assert rows[2][4] == "Caroline: I went to the LGBTQ support group yesterday. / Melanie: Did you like it?"
    assert rows[3][4] is None                                                      # a session starts afresh
    assert {r[5] for r in rows[:3]} == {"2023-05-08T13:56:00+00:00"}
    # the indexed texts: speaker, what was said, the turns before it; then the views with fewer of them
    bodies = [b for (b,) in sql.execute("SELECT body FROM dna.dna_search_docs_384 WHERE name = %s ORDER BY passage",
                                         (rows[2][6],))]
    assert bodies == ["Caroline Yes, I did! It was so inspiring. Caroline: I went to the LGBTQ support group yesterday. "
                      "/ Melanie: Did you like it?",
                      "Caroline Yes, I did! It was so inspiring. Melanie: Did you like it?",
                      "Caroline Yes, I did! It was so inspiring."]
    assert sql.execute("SELECT count(*) FROM dna.dna_search_docs_384 WHERE name = %s", (rows[0][6],)).fetchone()[0] == 1
    meta = sql.execute("SELECT metadata FROM dna.dna_instances WHERE name = %s", (rows[2][6],)).fetchone()[0]
    assert {k: meta[k] for k in ("conversation", "session", "turn", "speaker", "role", "session_date")} == {
        "conversation": "c1", "session": "1", "turn": 3, "speaker": "Caroline", "role": "user",
        "session_date": "2023-05-08"}
    episode = sql.execute("SELECT spec FROM dna.dna_instances WHERE scope = 'chat' AND kind = 'Episode' AND name = 'c1/1'"
                          ).fetchone()[0]
    assert (episode["turns"], episode["started_at"], episode["ended_at"]) == (3, "2023-05-08T13:56:00+00:00",
                                                                              "2023-05-08T13:56:00+00:00")
    assert episode["body"].splitlines()[1] == "Melanie: Did you like it?"


def test_resending_changes_nothing_and_new_turns_append(sql):
    _remember(sql, S1)
    versions = sql.execute("SELECT count(*) FROM dna.dna_versions WHERE scope = 'chat'").fetchone()[0]
    again = _remember(sql, S1)
    assert (again["created"], again["updated"], again["unchanged"]) == (0, 0, 4)
    assert sql.execute("SELECT count(*) FROM dna.dna_versions WHERE scope = 'chat'").fetchone()[0] == versions
    more = _remember(sql, [{"speaker": "Melanie", "text": "Glad to hear it.", "time": "2023-05-08T14:30:00Z"}])
    assert (more["created"], more["updated"]) == (1, 1)                            # the turn, and its episode
    rows = _turns(sql)
    assert [r[1] for r in rows] == [1, 2, 3, 4]
    assert rows[3][4] == "Melanie: Did you like it? / Caroline: Yes, I did! It was so inspiring."
    span = sql.execute("SELECT spec ->> 'started_at', spec ->> 'ended_at', spec ->> 'turns' FROM dna.dna_instances "
                       "WHERE kind = 'Episode' AND name = 'c1/1'").fetchone()
    assert span == ("2023-05-08T13:56:00+00:00", "2023-05-08T14:30:00+00:00", "4")
    # the same words twice are two turns; turns with ids are named by them
    out = _remember(sql, [{"speaker": "A", "text": "ok", "id": "m1"}, {"speaker": "A", "text": "ok", "id": "m2"},
                          {"speaker": "A", "text": "ok"}, {"speaker": "A", "text": "ok"}], conversation="c2")
    assert [t["name"] for t in out["turns"]][:2] == ["c2/m1", "c2/m2"] and out["created"] == 5
    assert len({t["name"] for t in out["turns"]}) == 4


@pytest.mark.parametrize("turns,code,text", [
    ([{"speaker": "A", "text": "hi"}, {"speaker": "B", "content": "hello"}], "22023",
     "turn 2: unknown key 'content' (did you mean 'text'?)"),
    ([{"speaker": "A", "text": "hi"}, {"speaker": "B"}], "22023", "turn 2: text is required"),
    ([{"speaker": "A", "text": "hi"}, "hello"], "22023", "turn 2: a turn is a JSON object"),
    ([{"speaker": "A", "text": "hi", "time": "yesterday"}], "22007", "turn 1: time must be an ISO-8601"),
    ([{"speaker": "A", "text": "hi", "id": "x"}, {"speaker": "B", "text": "yo", "id": "x"}], "22023", "turns 1 and 2 have one id"),
    ([{"speaker": "A", "text": "hi", "metadata": {"speaker": "B"}}], "22023", "turn 1: metadata may not hold speaker"),
    ([{"speaker": 7, "text": "hi"}], "22023", "turn 1: speaker must be a string"),
    ({"text": "hi"}, "22023", "turns must be a JSON array"),
])
def test_a_bad_turn_is_refused_naming_its_position_and_nothing_is_written(sql, turns, code, text):
    with pytest.raises(psycopg.Error) as err:
        sql.execute("SELECT dna.remember_conversation('chat', 'c1', %s)", (Jsonb(turns),))
    assert err.value.sqlstate == code and text in str(err.value), err.value
    assert sql.execute("SELECT count(*) FROM dna.dna_instances WHERE scope = 'chat'").fetchone()[0] == 0


def test_vectors_must_be_of_the_plan_read(sql):
    plan = sql.execute("SELECT dna.conversation_plan('chat', 'c1', %s, sessions => %s)", (Jsonb(S1), Jsonb(SESSIONS))
                       ).fetchone()[0]
    # each item's text, then its views: turn 1 alone, turn 2 with 1 and 0 turns before, turn 3 with 2, 1, 0; the episode
    assert len(plan["items"]) == 4 and len(plan["texts"]) == 1 + 2 + 3 + 1
    assert plan["texts"][0] == "Caroline I went to the LGBTQ support group yesterday."
    call = ("SELECT dna.remember_conversation('chat', 'c1', %s, sessions => %s, digest => %s, "
            "embeddings => ARRAY(SELECT dna.fake_embed(t) FROM jsonb_array_elements_text(%s) AS t))")
    with pytest.raises(psycopg.errors.SerializationFailure, match="changed since its texts were read"):
        sql.execute(call, (Jsonb(S1), Jsonb(SESSIONS), "0" * 32, Jsonb(plan["texts"])))
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="one element per text of the plan"):
        sql.execute(call, (Jsonb(S1), Jsonb(SESSIONS), plan["digest"], Jsonb(plan["texts"][:2])))
    out = sql.execute(call, (Jsonb(S1), Jsonb(SESSIONS), plan["digest"], Jsonb(plan["texts"]))).fetchone()[0]
    assert all(t["index"]["embedded"] for t in out["turns"])


def test_recall_returns_turns_with_their_neighbours_and_narrows_by_conversation_session_speaker(sql):
    _remember(sql, S1 + S2)
    _remember(sql, [{"speaker": "Jon", "text": "I did like the support group."}], conversation="other")
    call = ("SELECT dna.recall('chat', 'did she like the support group', k => 5, reconsolidate => false, "
            "kinds => '{Turn}', context => %s, filter => %s) -> 'hits'")
    hits = sql.execute(call, (1, Jsonb({"conversation": "c1", "session": "1"}))).fetchone()[0]
    assert hits and all(h["metadata"]["conversation"] == "c1" for h in hits)
    yes = next(h for h in hits if h["summary"].startswith("Yes, I did"))
    assert [(c["turn"], c["speaker"]) for c in yes["context"]] == [(2, "Melanie")]
    first = next(h for h in hits if h["summary"].startswith("I went"))
    assert [c["turn"] for c in first["context"]] == [2]
    assert {h["metadata"]["speaker"] for h in sql.execute(call, (0, Jsonb({"speaker": "Caroline"}))).fetchone()[0]} == {
        "Caroline"}
    assert all("context" not in h for h in sql.execute(call, (0, None)).fetchone()[0])
    wide = sql.execute(call, (5, Jsonb({"conversation": "c1", "session": "1"}))).fetchone()[0]
    assert len(next(h for h in wide if h["summary"].startswith("Yes"))["context"]) == 2
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="context must be between 0 and 20"):
        sql.execute(call, (21, None))
    # the episode is a memory too: the session a question is about
    ep = sql.execute("SELECT dna.recall('chat', 'pottery class', kinds => '{Episode}', reconsolidate => false) -> 'hits'"
                     ).fetchone()[0]
    assert ep[0]["name"] == "c1/2"


def test_a_personal_conversation_stays_personal(sql):
    import os

    role = f"dna_conv_{os.getpid()}"
    sql.execute(f"DROP ROLE IF EXISTS {role}")
    sql.execute(f"CREATE ROLE {role}")
    sql.execute("SELECT dna.grant_app_role(%s)", (role,))
    sql.execute("INSERT INTO dna.dna_identities (role_name, oid) VALUES (%s, 'conv-oid')", (role,))
    try:
        sql.execute(f"SET ROLE {role}")
        out = _remember(sql, S1, personal=True)
        assert out["tenant"] == "personal:conv-oid"
        hits = sql.execute("SELECT dna.recall('chat', 'support group', personal => true, context => 1, "
                           "reconsolidate => false) -> 'hits'").fetchone()[0]
        assert hits and all(h["personal"] for h in hits) and any(h.get("context") for h in hits)
        sql.execute("RESET ROLE")
        assert {t for (t,) in sql.execute("SELECT DISTINCT tenant FROM dna.dna_instances WHERE scope = 'chat'")} == {
            "personal:conv-oid"}
    finally:
        sql.execute("RESET ROLE")
        sql.execute(f"DROP OWNED BY {role}")
        sql.execute(f"DROP ROLE {role}")


def test_python_embeds_the_plan_in_one_call(client):
    calls = []
    original = client.embedder.embed
    client.embedder.embed = lambda texts: calls.append(list(texts)) or original(texts)
    out = client.memory.remember_conversation("py", "c1", S1, sessions=SESSIONS)
    assert out["created"] == 4 and len(calls) == 1 and len(calls[0]) == 7      # 6 turn texts and views, 1 episode
    assert all(t["index"]["embedded"] for t in out["turns"])
    hits = client.memory.recall("py", "did she enjoy the support group", kinds=["Turn"], context=1,
                                reconsolidate=False)["hits"]
    assert hits[0]["metadata"]["conversation"] == "c1" and "context" in hits[0]
    assert client.memory.remember_conversation("py", "c1", S1, sessions=SESSIONS)["unchanged"] == 4


def test_mcp_and_rest_take_a_conversation(door_world):
    from pydna.doors.mcp_server import create_server
    from pydna.doors.rest import create_app

    server, door = create_server(door_world.dsn_of("alice"), FakeEmbeddingProvider(), scope=SCOPE)

    async def main():
        async with McpClient(server) as mcp:
            tools = {t.name: t for t in (await mcp.list_tools()).tools}
            props = tools["remember_conversation"].input_schema["properties"]
            assert {"conversation", "turns", "session", "sessions", "personal"} <= set(props)
            assert not {"role", "identity", "oid", "user", "actor"} & set(props)
            got = await mcp.call_tool("remember_conversation", {"conversation": "c1", "turns": S1, "sessions": SESSIONS})
            assert not got.is_error and got.structured_content["created"] == 4
            got = await mcp.call_tool("recall", {"query": "did she like it", "kinds": ["Turn"], "context": 1,
                                                 "filter": {"conversation": "c1"}})
            assert not got.is_error and got.structured_content["hits"][0].get("context")
            bad = await mcp.call_tool("remember_conversation", {"conversation": "c1", "turns": [{"content": "hi"}]})
            assert bad.is_error and "content" in bad.content[0].text
    try:
        anyio.run(main)
    finally:
        door.close()
    with TestClient(create_app(door_world.dsn_of("door"), FakeEmbeddingProvider(), scope=SCOPE, max_size=2)) as http:
        h = auth(door_world.keys["bob"])
        r = http.post("/v1/conversations/c9/turns", headers=h, json={"turns": S2, "sessions": SESSIONS})
        assert r.status_code == 200, r.text
        assert r.json()["created"] == 3 and r.json()["conversation"] == "c9"
        r = http.get("/v1/memories/search", headers=h, params={"q": "pottery", "context": 1, "kind": "Turn",
                                                                "filter": '{"conversation": "c9"}'})
        assert r.status_code == 200 and r.json()["hits"][0]["metadata"]["conversation"] == "c9"
        r = http.post("/v1/conversations/c9/turns", headers=h, json={"turns": S2, "tenant": "", "role": "x"})
        assert r.status_code == 422
