"""The memory plane through the Python client (``Client.memory``) and the CLI (``dna memory``)."""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import psycopg
import pytest

import pydna

NOW = datetime(2026, 7, 9, 15, 0, tzinfo=timezone.utc)


# -- client -----------------------------------------------------------------------------------


def test_client_remember_recall_forget_revive(client):
    mem = client.memory
    r = mem.remember("team", "always deep-copy before mutating documents", area="Feature/kernel", affect="regret",
                     tags=["kernel"], now=NOW)
    assert r["action"] == "created" and r["index"]["embedded"] and r["index"]["model_id"] == "dna-fake-hash-v1"
    mem.remember("team", "banana tropical smoothie recipe", area="Feature/food", now=NOW)
    res = mem.recall("team", "mutating documents safely", now=NOW + timedelta(days=1))
    assert res["semantic"] is True and res["degraded"] is False
    assert res["hits"][0]["name"] == r["name"] and res["reconsolidated"][0] == r["name"]
    other = mem.remember("team", "always copy on write, never mutate in place", name="rem-other", now=NOW)
    assert other["name"] == "rem-other"
    f = mem.forget("team", r["name"], superseded_by="rem-other", now=NOW + timedelta(days=2))
    assert f["already_forgotten"] is False
    assert r["name"] not in [h["name"] for h in mem.recall("team", "mutating documents", now=NOW + timedelta(days=3))["hits"]]
    assert mem.revive("team", r["name"], revived_by="me")["revived"] is True
    assert mem.revive("team", r["name"])["already_in_force"] is True
    listed = mem.list("team", include_invalid=True)
    assert {m["name"] for m in listed["memories"]} == {r["name"], "rem-other", mem.remember("team", "banana tropical smoothie recipe",
                                                                               area="Feature/food", now=NOW)["name"]}


def test_client_without_embedder_degrades(dna_dsn):
    with pydna.connect(dna_dsn, embedder=None) as c:
        r = c.memory.remember("team", "lexical only memory", now=NOW)
        assert r["index"]["embedded"] is False
        res = c.memory.recall("team", "lexical memory", now=NOW)
        assert res["degraded"] is True and res["semantic"] is False
        assert [h["name"] for h in res["hits"]] == [r["name"]]


class Broken:
    model_id = "dna-fake-hash-v1"
    dims = 384

    def embed(self, texts):
        raise RuntimeError("model missing")


def test_client_embedder_failure_is_reported_not_faked(dna_dsn):
    with pydna.connect(dna_dsn, embedder=Broken()) as c:
        r = c.memory.remember("team", "a memory while the model is down", now=NOW)
        assert r["index"]["embedded"] is False and "model missing" in r["embedding_error"]
        res = c.memory.recall("team", "memory model", now=NOW)
        assert res["degraded"] is True and "model missing" in res["embedding_error"]
        assert len(res["hits"]) == 1


def test_client_errors_are_the_databases(client):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="summary"):
        client.memory.remember("team", None, spec={"area": "x"})
    with pytest.raises(psycopg.errors.NoDataFound):
        client.memory.forget("team", "nope")
    r = client.memory.remember("team", "keep me", now=NOW)
    with pytest.raises(psycopg.errors.RestrictViolation, match="dna.forget"):
        client.delete("team", "Engram", r["name"])


# -- CLI --------------------------------------------------------------------------------------


def test_cli_remember_recall_forget_revive_list(dna):
    out = json.loads(dna("remember", "always deep-copy before mutating documents", "--area", "Feature/kernel",
                         "--affect", "regret", "--tag", "kernel", "--tag", "copy", "--source-ref", "Story/s-1",
                         "--scope", "cli", "--embedder", "fake", "--json").stdout)
    name = out["name"]
    assert out["spec"]["encoding_context"]["co_topics"] == ["kernel", "copy"]
    assert out["spec"]["source_refs"] == ["Story/s-1"] and out["spec"]["memory_type"] == "procedural"
    text = dna("recall", "mutating documents", "--scope", "cli", "--embedder", "fake", "-k", "3").stdout
    assert name in text and "semantic" in text
    res = json.loads(dna("recall", "mutating documents", "--scope", "cli", "--embedder", "fake", "--no-reconsolidate",
                         "--json").stdout)
    assert res["reconsolidated"] == [] and res["hits"][0]["name"] == name
    past = json.loads(dna("recall", "mutating documents", "--scope", "cli", "--as-of", "2020-01-01T00:00:00Z",
                          "--embedder", "fake", "--json").stdout)
    assert past["hits"] == [] and past["as_of"] == "2020-01-01T00:00:00+00:00"
    dna("remember", "copy on write instead", "--name", "rem-new", "--scope", "cli", "--embedder", "fake")
    assert "forgotten" in dna("forget", name, "--superseded-by", "rem-new", "--scope", "cli").stdout
    assert "already forgotten" in dna("forget", name, "--scope", "cli").stdout
    listed = dna("list", "--scope", "cli").stdout
    assert "1 memory in cli" in listed and name not in listed and "rem-new" in listed
    assert "[forgotten]" in dna("list", "--all", "--scope", "cli").stdout
    assert "revived" in dna("revive", name, "--scope", "cli").stdout
    assert "already in force" in dna("revive", name, "--scope", "cli").stdout
    assert name in dna("list", "--scope", "cli").stdout


def test_cli_claims_and_errors(dna):
    out = json.loads(dna("remember", "the plan is pro", "--claim", "Workspace/acme::plan=Pro", "--claim", "approved=!",
                         "--claim", "region=!eu", "--scope", "cli", "--embedder", "fake", "--json").stdout)
    assert out["spec"]["claims"] == [
        {"subject": "Workspace/acme", "predicate": "plan", "object": "Pro", "polarity": "asserts"},
        {"predicate": "approved", "polarity": "denies"},
        {"predicate": "region", "object": "eu", "polarity": "denies"}]
    bad = dna("remember", "x", "--claim", "no-equals-sign", "--scope", "cli", code=1)
    assert "PREDICATE=" in bad.stderr
    long = dna("remember", "x" * 281, "--scope", "cli", "--embedder", "fake", code=1)
    assert "280" in long.stderr and "Traceback" not in long.stderr
    missing = dna("forget", "nope", "--scope", "cli", code=1)
    assert "no Engram/nope" in missing.stderr


def test_cli_delete_is_refused_naming_forget(dna, dna_dsn):
    name = json.loads(dna("remember", "undeletable", "--scope", "cli", "--embedder", "fake", "--json").stdout)["name"]
    with psycopg.connect(dna_dsn, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.RestrictViolation, match="dna.forget"):
            conn.execute("DELETE FROM dna.dna_instances WHERE name = %s", (name,))


def test_cli_recall_across_models_says_what_the_scope_holds(dna):
    """Memories remembered with ONNX: `--embedder none` still finds them (lexical over the scope's
    model), a recall with another embedder says which model_ids the scope holds, in text and JSON."""
    onnx = dna("remember", "Deploys happen on Thursdays", "--scope", "models", "--embedder", "onnx")
    assert "embedder: onnx all-MiniLM-L6-v2-onnx-int8-w8a8" in onnx.stdout
    lexical = json.loads(dna("recall", "deploys", "--scope", "models", "--embedder", "none", "--json").stdout)
    assert [h["summary"] for h in lexical["hits"]] == ["Deploys happen on Thursdays"]
    assert lexical["degraded"] is True and lexical["model_id"] == "all-MiniLM-L6-v2-onnx-int8-w8a8"
    text = dna("recall", "deploys", "--scope", "models", "--embedder", "fake")
    assert "embedder: fake dna-fake-hash-v1" in text.stdout and "0 memories for 'deploys'" in text.stdout
    assert ("no documents for model_id 'dna-fake-hash-v1' in scope 'models'; model_ids with documents there: "
            "all-MiniLM-L6-v2-onnx-int8-w8a8 (1 document)") in text.stdout
    js = dna("recall", "deploys", "--scope", "models", "--embedder", "fake", "--json")
    assert "embedder: fake" in js.stderr and "embedder" not in js.stdout
    assert json.loads(js.stdout)["notices"] == [
        "no documents for model_id 'dna-fake-hash-v1' in scope 'models'; model_ids with documents there: "
        "all-MiniLM-L6-v2-onnx-int8-w8a8 (1 document)"]
    one = dna("recall", "thursdays", "--scope", "models", "--embedder", "onnx").stdout
    assert "1 memory for 'thursdays'" in one
    bad = dna("recall", "x", "--scope", "models", "--embedder", "bogus", code=1)
    assert "unknown embedder 'bogus': use auto, onnx, fake or none" in bad.stderr


def test_cli_bad_onnx_compute_is_one_line(dna, monkeypatch):
    monkeypatch.setenv("DNA_ONNX_COMPUTE", "int4")
    bad = dna("recall", "x", "--scope", "models", "--embedder", "onnx", code=1)
    assert "DNA_ONNX_COMPUTE must be one of w8a8, float32, got 'int4'" in bad.stderr
    assert "Traceback" not in bad.stderr + bad.stdout
    monkeypatch.setenv("DNA_ONNX_COMPUTE", " FLOAT32 ")  # case and spaces do not matter
    ok = dna("remember", "compute from the environment", "--scope", "models", "--embedder", "onnx")
    assert "embedder: onnx all-MiniLM-L6-v2-onnx-int8\n" in ok.stdout   # float32: not …-w8a8
