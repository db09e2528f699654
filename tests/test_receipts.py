"""Stored receipts and replay (issue 15 item 2, receipts part): dna.take_receipt runs dna.search or a
read-only dna.recall and stores a digest of the inputs, the settings that shaped the answer and the
ordered result ids with their scores (the query text and embedding only with keep_query);
dna.replay re-runs the stored question and says whether the ids match, where they first differ and
which settings changed. Receipts are under the tenant policy of every dna_* data table."""
from __future__ import annotations

import os

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.types.json import Jsonb

MODEL = "dna-fake-hash-v1"
DOCS = [("fruit", "banana apple fruit smoothie"), ("car", "engine wheel car road banana"),
        ("mixed", "banana car apple"), ("sea", "ocean wave salt water fruit")]
QUERY = "banana smoothie"           # words (and stems) that name no document and no setting


@pytest.fixture
def docs(sql):
    for name, body in DOCS:
        sql.execute("SELECT dna.index_document('ex', 'Doc', %s, %s, dna.fake_embed(%s), %s)", (name, body, body, MODEL))
    return sql


def one(conn, query, params=()):
    return conn.execute(query, params).fetchone()[0]


def refused(conn, query, params=()):
    with pytest.raises(psycopg.Error) as info:
        conn.execute(query, params)
    return info.value.sqlstate, str(info.value)


def take(conn, verb="search", keep_query=False, query=QUERY, embed=True, **args):
    base = {"scope": "ex", "query": query, "model_id": MODEL} if verb == "search" else {"scope": "team", "query": query}
    base.update(args)
    embedding = "dna.fake_embed(%(q)s)::text" if embed else "NULL"
    return one(conn, f"SELECT dna.take_receipt(%(verb)s, %(args)s::jsonb || jsonb_strip_nulls(jsonb_build_object("
                     f"'query_embedding', {embedding})), keep_query => %(keep)s)",
               {"verb": verb, "args": Jsonb(base), "q": query, "keep": keep_query})


def replay(conn, receipt, query=None, embedding=None):
    return one(conn, "SELECT dna.replay(%s::uuid, query => %s, query_embedding => %s::vector)",
               (receipt["receipt_id"], query, embedding))


def direct(conn):
    return [tuple(r) for r in conn.execute(
        "SELECT kind, name, tenant, passage, score FROM dna.search('ex', %s, dna.fake_embed(%s), %s)",
        (QUERY, QUERY, MODEL))]


# -- search ----------------------------------------------------------------------------------


def test_a_receipt_returns_the_answer_and_replays_to_a_match(docs):
    r = take(docs, keep_query=True)
    assert [(h["kind"], h["name"], h["tenant"], h["passage"], h["score"]) for h in r["hits"]] == direct(docs)
    assert all(h["explain"] is None for h in r["hits"])           # explain only when asked
    row = docs.execute("SELECT verb, scope, tenant, taken_by = current_user, query, query_embedding IS NOT NULL, "
                       "length(inputs_digest), results FROM dna.dna_search_receipts WHERE receipt_id = %s",
                       (r["receipt_id"],)).fetchone()
    assert row[:6] == ("search", "ex", "", True, QUERY, True) and row[6] == 64
    assert [(x["name"], x["score"]) for x in row[7]] == [(h[1], h[4]) for h in direct(docs)]
    out = replay(docs, r)
    assert out["match"] is True and out["scores_match"] is True and out["first_difference"] is None
    assert out["ids_then"] == out["ids_now"] == row[7]
    assert out["settings_changed"] == []


def test_a_new_document_that_changes_the_answer_is_the_first_difference(docs):
    r = take(docs, keep_query=True)
    then_first = r["hits"][0]["name"]
    docs.execute("SELECT dna.index_document('ex', 'Doc', 'blender', 'banana smoothie banana smoothie', "
                 "dna.fake_embed('banana smoothie'), %s)", (MODEL,))
    out = replay(docs, r)
    assert out["match"] is False
    diff = out["first_difference"]
    assert diff["rank"] == 1 and diff["then"]["name"] == then_first and diff["now"]["name"] == "blender"
    assert [x["name"] for x in out["ids_then"]] == [h["name"] for h in r["hits"]]
    assert out["ids_now"][0]["name"] == "blender"


def test_a_changed_setting_is_named(docs):
    r = take(docs, keep_query=True)
    docs.execute("SELECT dna.set_search_config('ex', fusion => 'rrf')")
    out = replay(docs, r)
    changed = {c["setting"]: (c["then"], c["now"]) for c in out["settings_changed"]}
    assert changed["search_config.fusion"] == (None, "rrf")
    assert changed["answer.fusion.method"] == ("convex", "rrf")
    assert out["scores_match"] is False                          # RRF scores are not convex scores


def test_keep_query_false_leaves_no_query_text_in_any_column(docs):
    r = take(docs, keep_query=False)
    row = docs.execute("SELECT to_jsonb(x)::text, x.query, x.query_embedding FROM dna.dna_search_receipts AS x "
                       "WHERE receipt_id = %s", (r["receipt_id"],)).fetchone()
    assert row[1] is None and row[2] is None
    lexemes = [w for (w,) in docs.execute("SELECT unnest(tsvector_to_array(to_tsvector('english', %s)))", (QUERY,))]
    for word in QUERY.split() + lexemes:
        assert word not in row[0].lower(), word
    # kept: the text, the embedding and the lexemes are there
    kept = take(docs, keep_query=True)
    text = one(docs, "SELECT to_jsonb(x)::text FROM dna.dna_search_receipts AS x WHERE receipt_id = %s",
               (kept["receipt_id"],))
    assert QUERY in text and "smoothi" in text


def test_replay_without_a_kept_query_needs_it_and_checks_it(docs):
    r = take(docs, keep_query=False)
    state, msg = refused(docs, "SELECT dna.replay(%s::uuid)", (r["receipt_id"],))
    assert state == "22023" and "query" in msg and "keep_query" in msg
    state, msg = refused(docs, "SELECT dna.replay(%s::uuid, query => %s)", (r["receipt_id"], QUERY))
    assert state == "22023" and "query_embedding" in msg
    state, msg = refused(docs, "SELECT dna.replay(%s::uuid, query => 'banana smoothies', "
                               "query_embedding => dna.fake_embed(%s))", (r["receipt_id"], QUERY))
    assert state == "22023" and "query" in msg and "digest" in msg
    state, msg = refused(docs, "SELECT dna.replay(%s::uuid, query => %s, query_embedding => dna.fake_embed('car'))",
                         (r["receipt_id"], QUERY))
    assert state == "22023" and "query_embedding" in msg and "digest" in msg
    out = one(docs, "SELECT dna.replay(%s::uuid, query => %s, query_embedding => dna.fake_embed(%s))",
              (r["receipt_id"], QUERY, QUERY))
    assert out["match"] is True and out["scores_match"] is True


def test_a_kept_query_replays_alone_and_a_different_one_is_refused(docs):
    r = take(docs, keep_query=True)
    assert replay(docs, r, query=QUERY)["match"] is True
    state, msg = refused(docs, "SELECT dna.replay(%s::uuid, query => 'ocean')", (r["receipt_id"],))
    assert state == "22023" and "digest" in msg
    lexical = take(docs, keep_query=True, embed=False)
    state, msg = refused(docs, "SELECT dna.replay(%s::uuid, query_embedding => dna.fake_embed('x'))",
                         (lexical["receipt_id"],))
    assert state == "22023" and "query_embedding" in msg


def test_bad_calls_are_refused_and_store_nothing(docs):
    import uuid
    state, msg = refused(docs, "SELECT dna.replay(%s::uuid)", (str(uuid.uuid4()),))
    assert state == "P0002" and "receipt" in msg
    state, msg = refused(docs, "SELECT dna.take_receipt('list', '{}')")
    assert state == "22023" and "verb" in msg
    state, msg = refused(docs, "SELECT dna.take_receipt('search', %s)", (Jsonb({"scope": "ex", "query": "x", "kk": 3}),))
    assert state == "22023" and "kk" in msg
    state, msg = refused(docs, "SELECT dna.take_receipt('search', %s)", (Jsonb(["ex"]),))
    assert state == "22023" and "args" in msg
    state, msg = refused(docs, "SELECT dna.take_receipt('recall', %s)",
                         (Jsonb({"scope": "team", "query": "x", "reconsolidate": True}),))
    assert state == "22023" and "reconsolidate" in msg
    state, _ = refused(docs, "SELECT dna.take_receipt('search', %s)", (Jsonb({"scope": "ex", "query": "x", "k": -1}),))
    assert state == "22023"                                       # dna.search's own check
    assert one(docs, "SELECT count(*) FROM dna.dna_search_receipts") == 0
    r = take(docs)
    state, _ = refused(docs, "UPDATE dna.dna_search_receipts SET results = '[]' WHERE receipt_id = %s",
                       (r["receipt_id"],))
    assert state == "55000"                                        # a receipt is never rewritten
    assert docs.execute("DELETE FROM dna.dna_search_receipts WHERE receipt_id = %s", (r["receipt_id"],)).rowcount == 1


def test_the_pinned_arguments_are_what_replay_runs(docs):
    """valid_time is pinned to the moment the receipt was taken and model_id to the one used, so a
    replay asks the same question; arguments given are kept as given."""
    r = take(docs, keep_query=True, model_id=None, k=2, fusion="rrf")
    args = one(docs, "SELECT args FROM dna.dna_search_receipts WHERE receipt_id = %s", (r["receipt_id"],))
    assert args["model_id"] == MODEL and args["k"] == 2 and args["fusion"] == "rrf" and "valid_time" in args
    assert "query" not in args and "query_embedding" not in args
    assert len(r["hits"]) == 2 and replay(docs, r)["match"] is True


# -- recall ----------------------------------------------------------------------------------


@pytest.fixture
def memories(sql):
    for i, text in enumerate(["the office is in lisbon", "deploys happen on fridays", "the office cat is called miso"]):
        sql.execute("SELECT dna.remember('team', %s, name => %s, embedding => dna.fake_embed(%s), model_id => %s)",
                    (Jsonb({"summary": text}), f"m{i}", text, MODEL))
    return sql


def test_a_recall_receipt_is_read_only_and_replays(memories):
    before = one(memories, "SELECT jsonb_agg(spec ORDER BY name) FROM dna.dna_instances WHERE scope = 'team'")
    r = take(memories, verb="recall", query="office", keep_query=True, model_id=MODEL, k=3)
    assert r["reconsolidated"] == [] and r["receipt_id"]
    assert one(memories, "SELECT jsonb_agg(spec ORDER BY name) FROM dna.dna_instances WHERE scope = 'team'") == before
    expected = one(memories, "SELECT dna.recall('team', 'office', dna.fake_embed('office'), %s, k => 3, "
                             "reconsolidate => false, now => %s::timestamptz)", (MODEL, r["now"]))
    assert [(h["name"], h["score"]) for h in r["hits"]] == [(h["name"], h["score"]) for h in expected["hits"]]
    args = one(memories, "SELECT args FROM dna.dna_search_receipts WHERE receipt_id = %s", (r["receipt_id"],))
    assert args["now"] and args["reconsolidate"] is False and args["decay"] == "surfaced"
    out = replay(memories, r)
    assert out["match"] is True and out["scores_match"] is True and out["verb"] == "recall"
    memories.execute("SELECT dna.remember('team', %s, name => 'm9', embedding => dna.fake_embed('office office'), "
                     "model_id => %s)", (Jsonb({"summary": "office office office"}), MODEL))
    # at the receipt's world time m9 was not yet in force: the same answer; replayed now, m9 leads
    out = replay(memories, r)
    assert out["match"] is True and out["world_time"] == r["now"]
    out = one(memories, "SELECT dna.replay(%s::uuid, now => now())", (r["receipt_id"],))
    assert out["match"] is False and out["first_difference"] == {
        "rank": 1, "then": out["ids_then"][0], "now": out["ids_now"][0]} and out["ids_now"][0]["name"] == "m9"


# -- tenancy ---------------------------------------------------------------------------------


ROLES = {who: f"dna_rc_{who}_{os.getpid()}" for who in ("ana", "ben", "cy")}
PASSWORD = "dna-receipts-test"


@pytest.fixture
def roles(pg_server, sql, dna_dsn):
    admin = pg_server.dsn(pg_server.maintenance_db)
    with psycopg.connect(admin, autocommit=True) as conn:
        for role in ROLES.values():
            conn.execute(f"DROP ROLE IF EXISTS {role}")
            conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{PASSWORD}'")
    for who, role in ROLES.items():
        sql.execute("SELECT dna.grant_app_role(%s)", (role,))
        sql.execute("INSERT INTO dna.dna_identities (role_name, oid) VALUES (%s, %s)", (role, f"{who}-oid"))
    for ws, who in (("ws-a", "ana"), ("ws-a", "ben"), ("ws-b", "cy")):
        sql.execute("INSERT INTO dna.dna_workspace_members (workspace, role_name, member_role) VALUES (%s, %s, 'member')",
                    (ws, ROLES[who]))
    for name, body in DOCS:
        for tenant in ("ws-a", "ws-b"):
            sql.execute("SELECT dna.index_document('ex', 'Doc', %s, %s, dna.fake_embed(%s), %s, tenant => %s)",
                        (name, body, body, MODEL, tenant))
    params = conninfo_to_dict(dna_dsn)
    conns = {}
    for who, role in ROLES.items():
        conns[who] = psycopg.connect(make_conninfo(**{**params, "user": role, "password": PASSWORD}), autocommit=True)
    yield conns
    for conn in conns.values():
        conn.close()
    sql.execute("DELETE FROM dna.dna_search_receipts")
    for role in ROLES.values():
        sql.execute(f"DROP OWNED BY {role}")
    with psycopg.connect(admin, autocommit=True) as conn:
        for role in ROLES.values():
            conn.execute(f"DROP ROLE IF EXISTS {role}")


def test_a_role_sees_the_receipts_of_its_own_tenants_only(roles, sql):
    ana, ben, cy = roles["ana"], roles["ben"], roles["cy"]
    in_a = take(ana, keep_query=True, tenant="ws-a")
    mine = take(ana, keep_query=True, personal=True)
    in_b = take(cy, keep_query=True, tenant="ws-b")
    assert one(sql, "SELECT tenant FROM dna.dna_search_receipts WHERE receipt_id = %s", (mine["receipt_id"],)) \
        == "personal:ana-oid"
    seen = {who: {r for (r,) in conn.execute("SELECT receipt_id::text FROM dna.dna_search_receipts")}
            for who, conn in roles.items()}
    assert seen["ana"] == {in_a["receipt_id"], mine["receipt_id"]}
    assert seen["ben"] == {in_a["receipt_id"]}                    # the workspace, not ana's personal one
    assert seen["cy"] == {in_b["receipt_id"]}
    assert replay(ben, in_a)["match"] is True                     # a member of ws-a replays ws-a's receipt
    for who, receipt in (("cy", in_a), ("ben", mine), ("ana", in_b)):
        state, msg = refused(roles[who], "SELECT dna.replay(%s::uuid)", (receipt["receipt_id"],))
        assert state == "P0002", who
        assert QUERY not in msg
    # nobody writes a receipt into a tenant it cannot see
    state, _ = refused(cy, "INSERT INTO dna.dna_search_receipts (verb, scope, tenant, args, settings, results, "
                           "inputs_digest, query_digest) VALUES ('search', 'ex', 'ws-a', '{}', '{}', '[]', 'x', 'x')")
    assert state == "42501"
    assert sql.execute("SELECT relrowsecurity AND relforcerowsecurity FROM pg_class "
                       "WHERE oid = 'dna.dna_search_receipts'::regclass").fetchone()[0] is True
    assert "dna.dna_search_receipts" in {t for (t,) in sql.execute("SELECT t::text FROM dna.protected_tables() AS t")}


# -- the client ------------------------------------------------------------------------------


def test_the_client_takes_and_replays_receipts(docs, client):
    r = client.take_receipt("search", "ex", QUERY, k=3)
    assert [h["name"] for h in r["hits"]] == [h[1] for h in direct(docs)][:3]
    assert one(docs, "SELECT query IS NULL AND embedding_digest IS NOT NULL FROM dna.dna_search_receipts "
                     "WHERE receipt_id = %s", (r["receipt_id"],)) is True
    with pytest.raises(psycopg.Error) as info:
        client.replay(r["receipt_id"])
    assert info.value.sqlstate == "22023"
    out = client.replay(r["receipt_id"], QUERY)                    # re-embedded: the same digest
    assert out["match"] is True and out["scores_match"] is True
    with pytest.raises(psycopg.Error) as info:
        client.replay(r["receipt_id"], "banana shake")
    assert info.value.sqlstate == "22023"
