"""The REST door (``dna serve``): the ASGI app in-process for the fast cases, and the real server
under uvicorn on 127.0.0.1 driven by httpx, with API keys mapped to real roles (doors_world)."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone

import httpx
import pytest
from fastapi.testclient import TestClient

from doors_world import ROLES, SCOPE, SECRET, auth, door_roles, door_world  # noqa: F401  (fixtures)
from pydna import FakeEmbeddingProvider
from pydna.doors.rest import create_app

FORGET_DOOR = "POST /v1/memories/{name}/forget"


@pytest.fixture
def api(door_world):
    app = create_app(door_world.dsn_of("door"), FakeEmbeddingProvider(), scope=SCOPE, max_size=4)
    with TestClient(app) as client:
        yield client


def _ok(response: httpx.Response) -> dict:
    assert response.status_code == 200, response.text
    return response.json()


def _err(response: httpx.Response, status: int, sqlstate: str | None = None) -> dict:
    assert response.status_code == status, response.text
    err = response.json()["error"]
    assert err["status"] == status
    if sqlstate is not None:
        assert err["sqlstate"] == sqlstate, err
    return err


def _count(door_world, table="dna.dna_instances") -> int:
    return door_world.admin.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def memory_cycle(http, key: str) -> None:
    """remember, recall (also as_of), forget, the delete refusal and the door it names, revive."""
    h = auth(key)
    made = _ok(http.post("/v1/memories", headers=h, json={
        "summary": "Deploys happen on Thursdays after the release review", "area": "ops/deploys", "tags": ["release"]}))
    name = made["name"]
    assert made["action"] == "created" and made["kind"] == "Engram"
    hits = _ok(http.get("/v1/memories/search", headers=h, params={"q": "when do we deploy", "k": 3}))["hits"]
    assert [x["name"] for x in hits] == [name]
    before_forget = datetime.now(timezone.utc)
    time.sleep(0.01)
    forgot = _ok(http.post(f"/v1/memories/{name}/forget", headers=h))
    assert forgot["already_forgotten"] is False
    assert _ok(http.get("/v1/memories/search", headers=h, params={"q": "when do we deploy"}))["hits"] == []
    # as_of: what was believed before the forget (a read of the past never writes)
    past = _ok(http.get("/v1/memories/search", headers=h, params={"q": "when do we deploy",
                                                                  "as_of": before_forget.isoformat()}))
    assert [x["name"] for x in past["hits"]] == [name]
    # DELETE is refused, and names the forget door, which is open
    refused = http.delete(f"/v1/memories/{name}", headers=h)
    err = _err(refused, 405)
    assert FORGET_DOOR.format(name=name) in err["message"] and err["use"] == FORGET_DOOR.format(name=name)
    assert _ok(http.post(f"/v1/memories/{name}/forget", headers=h))["already_forgotten"] is True
    revived = _ok(http.post(f"/v1/memories/{name}/revive", headers=h, json={"revived_by": "test"}))
    assert revived["already_in_force"] is False
    again = _ok(http.get("/v1/memories/search", headers=h, params={"q": "when do we deploy"}))
    assert [x["name"] for x in again["hits"]] == [name]
    listed = _ok(http.get("/v1/memories", headers=h))
    assert listed["total"] == 1 and listed["memories"][0]["name"] == name


def personal_is_private(http, keys) -> None:
    """INV-PERSONAL over HTTP: alice's personal memory is invisible to bob, whatever he asks."""
    alice, bob = auth(keys["alice"]), auth(keys["bob"])
    mine = _ok(http.post("/v1/memories", headers=alice, json={
        "summary": f"My locker code is {SECRET} 4471", "personal": True}))
    seen = _ok(http.get("/v1/memories/search", headers=alice, params={"q": f"locker code {SECRET}", "personal": "true"}))
    assert seen["hits"][0]["name"] == mine["name"] and seen["hits"][0]["personal"] is True
    # bob: his own personal memory, the shared base, search, list: nothing of alice's
    answers = [
        http.get("/v1/memories/search", headers=bob, params={"q": f"locker code {SECRET}", "personal": "true"}),
        http.get("/v1/memories/search", headers=bob, params={"q": f"locker code {SECRET}"}),
        http.get("/v1/memories", headers=bob, params={"personal": "true", "include_forgotten": "true"}),
        http.get("/v1/memories", headers=bob),
        http.post("/v1/search", headers=bob, json={"query": f"locker code {SECRET}", "personal": True,
                                                    "include_retired": True}),
        http.post("/v1/consolidate", headers=bob, json={"personal": True}),
    ]
    for response in answers:
        body = _ok(response)
        assert SECRET not in str(body).replace(f"locker code {SECRET}", "") and "alice-oid" not in str(body), body
    # a crafted tenant naming alice's partition is refused by the database
    crafted = http.get("/v1/memories/search", headers=bob, params={"q": "locker", "tenant": "personal:alice-oid"})
    err = _err(crafted, 403, "42501")
    assert "reserved" in err["message"]
    _err(http.post("/v1/memories", headers=bob, json={"summary": "planted", "tenant": "personal:alice-oid"}), 403, "42501")
    # bob cannot retire it either: in his partition there is no such memory
    _err(http.post(f"/v1/memories/{mine['name']}/forget", headers=bob, json={"personal": True}), 404, "P0002")
    still = _ok(http.get("/v1/memories", headers=alice, params={"personal": "true"}))["memories"]
    assert [(m["name"], m["valid"]) for m in still if m["personal"]] == [(mine["name"], True)]


# -- in-process (ASGI) ------------------------------------------------------------------------


def test_memory_cycle_in_process(api, door_world):
    memory_cycle(api, door_world.keys["alice"])


def test_personal_memory_is_private_in_process(api, door_world):
    personal_is_private(api, door_world.keys)


def test_keys_unknown_revoked_and_roles_without_rights(api, door_world):
    probe = {"q": "anything"}
    for headers in ({}, {"Authorization": "Bearer dna_" + "0" * 64}, {"Authorization": "Basic YWxpY2U6eA=="}):
        response = api.get("/v1/memories/search", headers=headers, params=probe)
        _err(response, 401)
        assert response.headers["WWW-Authenticate"] == "Bearer"
    # a role granted nothing: the database refuses (permission denied), 403 with its SQLSTATE
    err = _err(api.get("/v1/memories/search", headers=auth(door_world.keys["nobody"]), params=probe), 403, "42501")
    assert "permission denied" in err["message"]
    # a role the door may not switch to: the server says which GRANT is missing
    err = _err(api.get("/v1/memories", headers=auth(door_world.keys["carol"])), 500, "42501")
    assert f"GRANT <role> TO {ROLES['door']}" in err["hint"]
    # revocation takes effect on the next request
    _ok(api.get("/v1/memories", headers=auth(door_world.keys["bob"])))
    door_world.admin.execute("SELECT dna.revoke_api_key(%s)", (door_world.keys["bob"][:16],))
    _err(api.get("/v1/memories", headers=auth(door_world.keys["bob"])), 401)
    # /healthz needs no key
    health = _ok(api.get("/healthz"))
    assert health["status"] == "ok" and health["embedder"] == "dna-fake-hash-v1"


def test_bad_input_is_422_and_writes_nothing(api, door_world):
    alice = auth(door_world.keys["alice"])
    instances, versions = _count(door_world), _count(door_world, "dna.dna_versions")
    # the database's refusals: SQLSTATE and message
    err = _err(api.post("/v1/memories", headers=alice, json={"summary": "x" * 281}), 422, "22001")
    assert "280" in err["message"]
    err = _err(api.post("/v1/memories", headers=alice, json={"kind": "Engram", "area": "ops"}), 422, "22023")
    assert "summary" in err["message"]
    _err(api.post("/v1/memories", headers=alice, json={"summary": "ok", "now": "infinity"}), 422)
    _err(api.get("/v1/memories/search", headers=alice, params={"q": "x", "tenant": "Not A Slug"}), 422, "22023")
    # the schema's: no SQLSTATE, the field named
    err = _err(api.get("/v1/memories/search", headers=alice, params={"q": "x", "k": 5000}), 422)
    assert err["sqlstate"] is None and "k" in err["message"]
    err = _err(api.post("/v1/memories", headers=alice, json={"summary": "ok", "identity": "bob-oid"}), 422)
    assert "identity" in err["message"]
    _err(api.post("/v1/memories", headers=alice, json={"summary": "ok", "affect": "furious"}), 422)
    # no such memory: 404 with the verb's own message
    err = _err(api.post("/v1/memories/rem-nope/forget", headers=alice), 404, "P0002")
    assert "rem-nope" in err["message"]
    assert (_count(door_world), _count(door_world, "dna.dna_versions")) == (instances, versions)


def test_nul_bytes_size_nesting_and_unknown_routes_answer_in_the_error_shape(api, door_world):
    """Issue 27 item 8: a NUL byte in a string field or a path id was a 500; a 10 MB body was parsed
    whole; a 50,000-deep JSON and unknown routes answered outside the documented shape."""
    alice = auth(door_world.keys["alice"])
    instances, versions = _count(door_world), _count(door_world, "dna.dna_versions")
    err = _err(api.post("/v1/search", headers=alice, json={"query": "a\u0000b"}), 422)
    assert err["field"] == "body.query" and "NUL" in err["message"] and err["sqlstate"] is None
    err = _err(api.post("/v1/memories", headers=alice, json={"summary": "ok", "tags": ["a", "b\u0000"]}), 422)
    assert err["field"] == "body.tags[1]"
    err = _err(api.post("/v1/memories/a%00b/forget", headers=alice), 422)
    assert err["field"] == "path"
    err = _err(api.get("/v1/memories/search", headers=alice, params={"q": "a\x00b"}), 422)
    assert err["field"] == "query.q"
    big = {"summary": "ok", "body": "x" * (10 << 20)}
    err = _err(api.post("/v1/memories", headers=alice, json=big), 413)
    assert "1,048,576" in err["message"]
    deep = "[" * 50_000 + "]" * 50_000
    err = _err(api.post("/v1/search", headers={**alice, "Content-Type": "application/json"}, content=deep), 422)
    assert "nested deeper" in err["message"]
    err = _err(api.post("/v1/search", headers={**alice, "Content-Type": "application/json"}, content="{bad"), 422)
    assert "not valid JSON" in err["message"]
    err = _err(api.get("/v1/nowhere", headers=alice), 404)
    assert "no such endpoint" in err["message"]
    _err(api.put("/v1/search", headers=alice, json={"query": "x"}), 405)
    assert (_count(door_world), _count(door_world, "dna.dna_versions")) == (instances, versions)
    # an ordinary request still passes through the guard with its body intact
    assert _ok(api.post("/v1/search", headers=alice, json={"query": "deploys", "k": 3}))["hits"] == []


def test_consolidate_is_a_dry_run_unless_applied(api, door_world):
    alice = auth(door_world.keys["alice"])
    later = (datetime.now(timezone.utc) + timedelta(days=3650)).isoformat()  # ten years without a recall
    for text in ("The staging database lives in eu-west-1", "Lunch is at noon on Fridays"):
        _ok(api.post("/v1/memories", headers=alice, json={"summary": text}))
    door_world.admin.execute("UPDATE dna.dna_instances SET spec = spec || jsonb_build_object('last_surfaced', now()::text)")
    versions = _count(door_world, "dna.dna_versions")
    dry = _ok(api.post("/v1/consolidate", headers=alice, json={"now": later}))
    assert dry["dry_run"] is True and dry["applied"] is False and len(dry["stale"]) == 2 and dry["archived"] == 0
    assert _count(door_world, "dna.dna_versions") == versions
    applied = _ok(api.post("/v1/consolidate", headers=alice, json={"apply": True, "now": later}))
    assert applied["applied"] is True and applied["archived"] == 2
    assert _ok(api.get("/v1/memories", headers=alice, params={"now": later}))["total"] == 0


def test_search_endpoint_and_openapi(api, door_world):
    alice = auth(door_world.keys["alice"])
    made = _ok(api.post("/v1/memories", headers=alice, json={"summary": "Reciprocal rank fusion merges ranked lists"}))
    found = _ok(api.post("/v1/search", headers=alice, json={"query": "rank fusion", "k": 3}))
    assert [h["name"] for h in found["hits"]] == [made["name"]] and found["degraded"] is False
    spec = _ok(api.get("/openapi.json"))
    paths = spec["paths"]
    for path, method in (("/v1/search", "post"), ("/v1/memories", "post"), ("/v1/memories", "get"),
                         ("/v1/memories/search", "get"), ("/v1/memories/{name}/forget", "post"),
                         ("/v1/memories/{name}/revive", "post"), ("/v1/consolidate", "post"),
                         ("/v1/memories/{name}", "delete"), ("/healthz", "get")):
        assert method in paths[path], (path, method)
    recall = {p["name"]: p for p in paths["/v1/memories/search"]["get"]["parameters"]}
    assert "Transaction time" in recall["as_of"]["description"] and "World" in recall["now"]["description"]
    assert recall["k"]["schema"]["maximum"] == 1000
    assert "forget" in paths["/v1/memories/{name}"]["delete"]["summary"]


# -- the real server: uvicorn on 127.0.0.1, httpx ---------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def served(door_world, tmp_path):
    port = _free_port()
    log = open(tmp_path / "serve.log", "w+")
    env = {**os.environ, "DNA_HOME": str(tmp_path / "home")}
    proc = subprocess.Popen([sys.executable, "-m", "pydna.cli", "--dsn", door_world.dsn_of("door"), "serve",
                             "--port", str(port), "--embedder", "fake", "--scope", SCOPE, "--pool-size", "4",
                             "--log-level", "warning"], stdout=log, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                pytest.fail(f"dna serve did not start: {log.read()}")
            time.sleep(0.2)
        with httpx.Client(base_url=base, timeout=30) as http:
            yield http
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_under_uvicorn_the_cycle_and_the_privacy_hold(served, door_world):
    memory_cycle(served, door_world.keys["alice"])
    personal_is_private(served, door_world.keys)
    _err(served.get("/v1/memories"), 401)
