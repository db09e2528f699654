"""The memory verbs through plain SQL: remember, recall, forget, revive, list; the write path's
history, the bitemporal guard, refused deletes. The any-language contract: no client here."""
from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

import psycopg
import pytest
from psycopg.types.json import Jsonb

S = "mem"
NOW = datetime(2026, 7, 9, 15, 0, tzinfo=timezone.utc)


def one(sql, query, params=()):
    return sql.execute(query, params).fetchone()[0]


def remember(sql, summary=None, *, spec=None, name=None, kind="Engram", now=NOW, embed=True, tenant="", scope=S):
    spec = dict(spec or {})
    if summary is not None:
        spec.setdefault("summary", summary)
    return one(sql, """SELECT dna.remember(%(scope)s, %(spec)s, kind => %(kind)s, name => %(name)s, tenant => %(tenant)s,
                       now => %(now)s, embedding => CASE WHEN %(embed)s THEN dna.fake_embed(dna.memory_text(%(kind)s, %(spec)s)) END)""",
               {"scope": scope, "spec": Jsonb(spec), "kind": kind, "name": name, "now": now, "embed": embed,
                "tenant": tenant})


def recall(sql, query, *, embed=False, k=5, now=None, as_of=None, reconsolidate=True, kinds=None, tenant="",
           scope=S):
    return one(sql, """SELECT dna.recall(%(scope)s, %(q)s, CASE WHEN %(embed)s THEN dna.fake_embed(%(q)s) END,
                       kinds => %(kinds)s, k => %(k)s, tenant => %(tenant)s, reconsolidate => %(rec)s,
                       actor => 'tester', now => %(now)s, as_of => %(as_of)s)""",
               {"scope": scope, "q": query, "embed": embed, "kinds": kinds, "k": k, "tenant": tenant,
                "rec": reconsolidate, "now": now, "as_of": as_of})


def spec_of(sql, name, kind="Engram"):
    return one(sql, "SELECT spec FROM dna.dna_instances WHERE scope = %s AND kind = %s AND name = %s", (S, kind, name))


def versions(sql, name, kind="Engram"):
    return sql.execute("SELECT version, op, spec, created_at FROM dna.dna_versions WHERE scope = %s AND kind = %s "
                       "AND name = %s ORDER BY version", (S, kind, name)).fetchall()


def names(result):
    return [h["name"] for h in result["hits"]]


def sqlstate(sql, query, params=()):
    with pytest.raises(psycopg.Error) as info:
        sql.execute(query, params)
    return info.value.sqlstate, str(info.value)


# -- remember -------------------------------------------------------------------------------


def test_remember_then_recall_finds_it(sql):
    r = remember(sql, "always deep-copy before mutating documents", spec={"area": "Feature/kernel", "affect": "regret",
                                                                        "tags": ["kernel", "copy"]})
    assert r["action"] == "created" and r["indexed"] and r["index"]["embedded"]
    assert r["name"].startswith("rem-") and r["version"] == 1
    spec = r["spec"]
    assert spec["created_at"] == "2026-07-09T15:00:00+00:00" == spec["valid_from"]
    assert spec["memory_type"] == "procedural"
    assert spec["encoding_context"] == {"area": "Feature/kernel", "affect": "regret", "time_of_day": "afternoon",
                                        "co_topics": ["kernel", "copy"], "source_refs": [], "_derived": "verb-autostamp"}
    remember(sql, "banana tropical smoothie recipe", spec={"area": "Feature/food"})
    for embed in (False, True):
        res = recall(sql, "mutating documents", embed=embed, now=NOW + timedelta(days=1), reconsolidate=False)
        assert names(res)[0] == r["name"]
        hit = res["hits"][0]
        assert hit["summary"] == "always deep-copy before mutating documents"
        assert hit["area"] == "Feature/kernel" and hit["affect"] == "regret" and hit["tags"] == ["kernel", "copy"]
        assert hit["title"] == hit["summary"] and hit["created_at"] == spec["created_at"]
        assert hit["retention"] == 1.0 and hit["kind"] == "Engram" and hit["scope"] == S


def test_remember_stamps_and_names_stably(sql):
    a = remember(sql, "the sky tends to be blue", spec={"tags": ["a", "b", "a", "c", "d", "e", "f"]})
    assert a["spec"]["memory_type"] == "semantic"
    assert a["spec"]["encoding_context"]["co_topics"] == ["a", "b", "c", "d", "e"]
    assert a["spec"]["encoding_context"]["affect"] == "neutral"
    again = remember(sql, "the sky tends to be blue", spec={"tags": ["a", "b", "a", "c", "d", "e", "f"]})
    assert again["name"] == a["name"] and again["action"] == "unchanged"
    assert len(versions(sql, a["name"])) == 1
    episodic = remember(sql, "shipped it", spec={"area": "Feature/x", "created_at": "2026-07-09T20:30:00+02:00"})
    assert episodic["spec"]["memory_type"] == "episodic"
    assert episodic["spec"]["encoding_context"]["time_of_day"] == "evening"   # the hour as written
    explicit = remember(sql, "always", spec={"memory_type": "episodic"}, name="explicit")
    assert explicit["name"] == "explicit" and explicit["spec"]["memory_type"] == "episodic"


def test_remember_restates_but_keeps_life_history(sql):
    r = remember(sql, "a fact", name="f")
    recall(sql, "fact", now=NOW + timedelta(hours=1))
    surfaced = spec_of(sql, "f")
    assert surfaced["surface_count"] == 1
    r2 = remember(sql, "a fact, restated", name="f", now=NOW + timedelta(days=2))
    assert r2["action"] == "updated"
    assert r2["spec"]["summary"] == "a fact, restated"
    assert r2["spec"]["created_at"] == r["spec"]["created_at"]
    assert r2["spec"]["cues_history"] == surfaced["cues_history"] and r2["spec"]["surface_count"] == 1


@pytest.mark.parametrize("spec,kind,state,fragment", [
    ({}, "Engram", "22023", "summary"),
    ({"summary": "   "}, "Engram", "22023", "summary"),
    ({"summary": "x" * 281}, "Engram", "22001", "280"),
    ({"summary": "ok", "claims": [{"predicate": "plan", "obj": "Pro"}]}, "Engram", "22023", "claims[0] has unknown field(s) obj"),
    ({"summary": "ok", "claims": [{"object": "Pro"}]}, "Engram", "22023", "claims[0].predicate"),
    ({"summary": "ok", "claims": [{"predicate": "p", "polarity": "maybe"}]}, "Engram", "22023", "polarity"),
    ({"summary": "ok", "claims": {"predicate": "p"}}, "Engram", "22023", "list"),
    ({"summary": "ok", "claims": [{"predicate": "p", "valid_from": "soon"}]}, "Engram", "22007", "valid_from"),
    ({"summary": "ok", "tags": "one"}, "Engram", "22023", "tags"),
    ({"summary": "ok", "valid_from": "yesterday"}, "Engram", "22007", "valid_from"),
    ({"summary": "ok", "confidence_score": "hot"}, "Engram", "22023", "confidence_score"),
    ({"summary": "ok", "encoding_context": {"co_topics": ["a", "b", "c", "d", "e", "f"]}}, "Engram", "22023", "co_topics"),
    ({"summary": "ok"}, "Story", "22023", "not a memory Kind"),
    ({"tags": ["x"]}, "Research", "22023", "text to index"),
])
def test_remember_rejects_bad_input_and_writes_nothing(sql, spec, kind, state, fragment):
    got, message = sqlstate(sql, "SELECT dna.remember(%s, %s, kind => %s)", (S, Jsonb(spec), kind))
    assert got == state and fragment in message
    assert one(sql, "SELECT count(*) FROM dna.dna_instances") == 0
    assert one(sql, "SELECT count(*) FROM dna.dna_versions") == 0
    assert one(sql, "SELECT count(*) FROM dna.dna_search_docs_384") == 0


def test_remember_bad_keys_and_tenant(sql):
    assert sqlstate(sql, "SELECT dna.remember('', '{\"summary\": \"x\"}')")[0] == "22023"
    assert sqlstate(sql, "SELECT dna.remember(%s, '{\"summary\": \"x\"}', tenant => 'personal:bob')", (S,))[0] == "42501"
    assert sqlstate(sql, "SELECT dna.remember(%s, '{\"summary\": \"x\"}', now => 'infinity')", (S,))[0] == "22007"
    assert sqlstate(sql, "SELECT dna.remember(%s, '[1]')", (S,))[0] == "22023"


def test_claims_are_canonicalised(sql):
    r = remember(sql, "plan is pro", spec={"claims": [{"subject": " Workspace/acme ", "predicate": " plan ", "object": "Pro"},
                                                      {"predicate": "approved", "polarity": "denies"}]})
    assert r["spec"]["claims"] == [
        {"subject": "Workspace/acme", "predicate": "plan", "object": "Pro", "polarity": "asserts"},
        {"predicate": "approved", "polarity": "denies"}]


def test_research_and_evidence_are_memories(sql):
    r = remember(sql, spec={"title": "AAC apps", "body": "long body text about augmentative communication"},
                 kind="Research", name="aac")
    assert r["spec"]["valid_from"] and "memory_type" not in r["spec"]
    res = recall(sql, "augmentative communication", now=NOW + timedelta(hours=1))
    assert names(res) == ["aac"] and "retention" not in res["hits"][0]
    assert res["hits"][0]["title"] == "AAC apps"
    assert res["reconsolidated"] == []                                  # only Engrams are reconsolidated
    assert names(recall(sql, "augmentative communication", kinds=["Engram"], now=NOW)) == []


# -- recall -----------------------------------------------------------------------------------


def seed(sql):
    remember(sql, "deep-copy before mutating documents", spec={"area": "Feature/kernel"}, name="rem-target",
             now=NOW - timedelta(days=8))
    remember(sql, "safely archive old reports nightly", spec={"area": "Feature/ops"}, name="rem-decoy",
             now=NOW - timedelta(days=8))
    remember(sql, "banana tropical smoothie recipe", spec={"area": "Feature/food"}, name="rem-noise",
             now=NOW - timedelta(days=8))


def test_recall_is_deterministic(sql):
    seed(sql)
    for embed in (False, True):
        runs = [recall(sql, "mutating documents safely", embed=embed, now=NOW, reconsolidate=False) for _ in range(3)]
        assert runs[0] == runs[1] == runs[2]
    assert one(sql, "SELECT count(*) FROM dna.dna_versions WHERE op = 'reconsolidate'") == 0


def test_recall_without_query_embedding_degrades_honestly(sql):
    seed(sql)
    lexical = recall(sql, "mutating documents safely", now=NOW, reconsolidate=False)
    assert lexical["degraded"] is True and lexical["semantic"] is False
    assert all("semantic" not in h and "rank_dense" not in h for h in lexical["hits"])
    dense = recall(sql, "mutating documents safely", embed=True, now=NOW, reconsolidate=False)
    assert dense["degraded"] is False and dense["semantic"] is True
    assert dense["hits"][0]["name"] == "rem-target" and dense["hits"][0]["rank_dense"] == 1
    assert abs(dense["hits"][0]["similarity"] - 0.4364357804719849) < 1e-6   # float32 vectors
    assert all("rank_ecphory" not in h for h in dense["hits"])   # no second ranking by cosine (issue 15)
    blank = recall(sql, "   ", now=NOW)
    assert blank["hits"] == [] and blank["degraded"] is False
    zero = one(sql, "SELECT dna.recall(%s, 'mutating', array_fill(0, ARRAY[384])::vector, now => %s)", (S, NOW))
    assert zero["semantic"] is False and zero["degraded"] is True


def test_recall_without_model_id_reads_the_scopes_model(sql):
    """A memory indexed with another model (e.g. by the ONNX client) is found by a lexical-only
    dna.recall that names no model_id: the default is the scope's model with the most documents."""
    sql.execute("SELECT dna.register_model('other-384', 384)")
    for summary in ("Deploys happen on Thursdays", "Rollbacks need two approvals"):
        one(sql, "SELECT dna.remember('other', %s, now => %s, embedding => dna.fake_embed(%s), model_id => 'other-384')",
            (Jsonb({"summary": summary}), NOW, summary))
    found = one(sql, "SELECT dna.recall('other', 'when do deploys happen', now => %s, reconsolidate => false)", (NOW,))
    assert [h["summary"] for h in found["hits"]] == ["Deploys happen on Thursdays"]
    assert found["degraded"] is True
    # a scope holding the fake model too: the model with more documents wins
    one(sql, "SELECT dna.remember('other', %s, now => %s)", (Jsonb({"summary": "Deploys freeze in December"}), NOW))
    found = one(sql, "SELECT dna.recall('other', 'deploys', now => %s, reconsolidate => false)", (NOW,))
    assert sorted(h["summary"] for h in found["hits"]) == ["Deploys happen on Thursdays"]
    # naming the model still reads that model's rows only
    fake = one(sql, "SELECT dna.recall('other', 'deploys', model_id => 'dna-fake-hash-v1', now => %s, "
                    "reconsolidate => false)", (NOW,))
    assert [h["summary"] for h in fake["hits"]] == ["Deploys freeze in December"]
    # a scope with no documents: the fake model, no error, no hits
    assert one(sql, "SELECT dna.recall('nothing-here', 'deploys', now => %s)", (NOW,))["hits"] == []


def test_recall_reranks_by_retention_and_affect(sql):
    remember(sql, "alpha beta gamma", name="plain", now=NOW)
    remember(sql, "alpha beta gamma delta", name="surprising", spec={"affect": "surprise"}, now=NOW)
    res = recall(sql, "alpha beta gamma delta", now=NOW, reconsolidate=False)
    by = {h["name"]: h for h in res["hits"]}
    # score = search_score x max(0.05, R) x affect (dna.memory_factors, revision 0017: the standing only)
    assert abs(by["surprising"]["score"] - by["surprising"]["search_score"] * 1.5) < 1e-12
    assert abs(by["plain"]["score"] - by["plain"]["search_score"]) < 1e-12
    # An old, faint memory surfaced long ago decays: score x max(0.05, R).
    sql.execute("UPDATE dna.dna_instances SET spec = spec || '{\"last_surfaced\": \"2026-01-01T00:00:00+00:00\", "
                "\"confidence_score\": \"faint\"}' WHERE name = 'plain'")
    res = recall(sql, "alpha beta gamma delta", now=NOW, reconsolidate=False)
    by = {h["name"]: h for h in res["hits"]}
    assert by["plain"]["retention"] == 0.0
    assert abs(by["plain"]["score"] - by["plain"]["search_score"] * 0.05) < 1e-12


def test_only_surfaced_memories_are_reinforced(sql):
    seed(sql)
    sql.execute("UPDATE dna.dna_instances SET spec = spec || '{\"confidence_score\": 9.98}'")
    before = {n: len(versions(sql, n)) for n in ("rem-target", "rem-decoy", "rem-noise")}
    res = recall(sql, "deep-copy mutating documents", k=1, now=NOW)
    assert names(res) == ["rem-target"] and res["reconsolidated"] == ["rem-target"]
    target = spec_of(sql, "rem-target")
    assert target["surface_count"] == 1 and target["last_surfaced"] == "2026-07-09T15:00:00+00:00"
    assert target["cues_history"] == [{"at": "2026-07-09T15:00:00+00:00", "cue": "deep-copy mutating documents",
                                       "actor": "tester"}]
    assert target["confidence_score"] == 10                             # min(10, c + 0.05)
    for other in ("rem-decoy", "rem-noise"):
        assert "cues_history" not in spec_of(sql, other) and len(versions(sql, other)) == before[other]
    assert versions(sql, "rem-target")[-1][1] == "reconsolidate"


def test_cues_history_keeps_the_last_50(sql):
    remember(sql, "recall me often", name="often", spec={"confidence_score": 2.0})
    for i in range(53):
        recall(sql, f"recall me often {i}", now=NOW + timedelta(minutes=i))
    spec = spec_of(sql, "often")
    assert len(spec["cues_history"]) == 50 and spec["surface_count"] == 53
    assert spec["cues_history"][0]["cue"] == "recall me often 3" and spec["cues_history"][-1]["cue"] == "recall me often 52"
    assert spec["confidence_score"] == pytest.approx(2.0 + 53 * 0.05)
    assert len(versions(sql, "often")) == 3                               # Engram keeps 3 versions


def test_retention_falls_monotonically_with_time(sql):
    remember(sql, "a memory that fades", name="fades", spec={"confidence_score": "firm"})
    recall(sql, "fades", now=NOW)                                        # surfaced at NOW
    spec = spec_of(sql, "fades")
    values = [one(sql, "SELECT dna.memory_retention(%s, %s)", (Jsonb(spec), NOW + timedelta(days=d)))
              for d in range(0, 120, 3)]
    assert values[0] == 1.0
    assert all(a > b for a, b in zip(values, values[1:]))
    assert abs(values[5] - 0.36787944117144233) < 1e-12                  # t = 15 d = S (firm)
    hits = [recall(sql, "fades", now=NOW + timedelta(days=d), reconsolidate=False)["hits"][0]["retention"]
            for d in (1, 10, 30)]
    assert hits[0] > hits[1] > hits[2]


def test_recall_validates_arguments(sql):
    assert sqlstate(sql, "SELECT dna.recall(%s, 'x', k => -1)", (S,))[0] == "22023"
    assert sqlstate(sql, "SELECT dna.recall(%s, 'x', kinds => ARRAY['Story'])", (S,))[0] == "22023"
    assert sqlstate(sql, "SELECT dna.recall(%s, 'x', model_id => 'nope')", (S,))[0] == "22023"
    assert sqlstate(sql, "SELECT dna.recall(%s, 'x', dna.fake_embed('x', 768))", (S,))[0] == "22023"
    assert sqlstate(sql, "SELECT dna.recall(%s, repeat('x', 10001))", (S,))[0] == "22001"
    assert sqlstate(sql, "SELECT dna.recall(%s, 'x', tenant => 'personal:x')", (S,))[0] == "42501"
    assert sqlstate(sql, "SELECT dna.recall(%s, 'x', as_of => '-infinity')", (S,))[0] == "22007"


def test_tenant_overlay(sql):
    remember(sql, "the base plan is free", name="plan")
    remember(sql, "the acme plan is pro", name="plan", tenant="acme")
    base = recall(sql, "plan", now=NOW, reconsolidate=False)
    acme = recall(sql, "plan", now=NOW, reconsolidate=False, tenant="acme")
    assert [h["summary"] for h in base["hits"]] == ["the base plan is free"]
    assert [(h["summary"], h["tenant"]) for h in acme["hits"]] == [("the acme plan is pro", "acme")]
    listed = one(sql, "SELECT dna.list_memories(%s, tenant => 'acme', now => %s)", (S, NOW))
    assert [m["summary"] for m in listed["memories"]] == ["the acme plan is pro"]


# -- two clocks -------------------------------------------------------------------------------


def test_recorded_today_about_last_year(sql):
    last_year = NOW - timedelta(days=365)
    r = remember(sql, "the office moved to Lisbon", name="moved",
                 spec={"valid_from": (last_year - timedelta(days=30)).isoformat()})
    # World time: at last year the fact was already true → found.
    world = recall(sql, "office Lisbon", now=last_year, reconsolidate=False)
    assert names(world) == ["moved"]
    # Transaction time: at last year the system had not recorded it → not found, and not a blind spot.
    believed = recall(sql, "office Lisbon", as_of=last_year)
    assert believed["hits"] == [] and believed["as_of_truncated"] == []
    # Transaction time now-ish: recorded → found, with its recorded_at.
    later = recall(sql, "office Lisbon", as_of=datetime.now(timezone.utc) + timedelta(seconds=1), now=last_year)
    assert names(later) == ["moved"] and later["hits"][0]["recorded_at"] == r["recorded_at"]


def test_as_of_reads_the_past_never_writes_and_names_pruned_memories(sql):
    remember(sql, "the plan is free", name="plan")
    t1 = one(sql, "SELECT clock_timestamp()")
    sql.execute("SELECT dna.remember(%s, %s, name => 'plan', now => %s)", (S, Jsonb({"summary": "the plan is pro"}), NOW))
    t2 = one(sql, "SELECT clock_timestamp()")
    before = one(sql, "SELECT count(*) FROM dna.dna_versions")
    past = recall(sql, "plan", as_of=t1, now=NOW)
    assert [h["summary"] for h in past["hits"]] == ["the plan is free"]
    assert past["hits"][0]["as_of_version"] == 1
    assert [h["summary"] for h in recall(sql, "plan", as_of=t2, now=NOW)["hits"]] == ["the plan is pro"]
    assert one(sql, "SELECT count(*) FROM dna.dna_versions") == before
    assert "surface_count" not in spec_of(sql, "plan")
    # Two more writes prune version 1 (Engram keeps 3): at t1 the store can no longer know.
    for i in range(2):
        sql.execute("SELECT dna.remember(%s, %s, name => 'plan', now => %s)", (S, Jsonb({"summary": f"plan v{i}"}), NOW))
    assert [v[0] for v in versions(sql, "plan")] == [2, 3, 4]
    blind = recall(sql, "plan", as_of=t1, now=NOW)
    assert blind["hits"] == [] and blind["as_of_truncated"] == ["plan"]


def test_forget_is_bitemporal_and_idempotent(sql):
    r = remember(sql, "the plan is free", name="old")
    remember(sql, "the plan is pro", name="new")
    t_forget = NOW + timedelta(days=10)
    f = one(sql, "SELECT dna.forget(%s, 'old', 'new', now => %s)", (S, t_forget))
    assert f == {"kind": "Engram", "name": "old", "scope": S, "tenant": "", "valid_to": "2026-07-19T15:00:00+00:00",
                 "already_forgotten": False, "superseded_by": "new", "written": True}
    assert one(sql, "SELECT upper(valid_at) FROM dna.dna_instances WHERE name = 'old'") == t_forget
    n = len(versions(sql, "old"))
    again = one(sql, "SELECT dna.forget(%s, 'old', 'other', now => %s)", (S, t_forget + timedelta(days=5)))
    assert again["already_forgotten"] is True and again["valid_to"] == f["valid_to"]
    assert again["superseded_by"] == "new" and again["written"] is False
    assert len(versions(sql, "old")) == n
    # World time: valid before valid_to, gone after; transaction time still remembers it was in force.
    assert "old" in names(recall(sql, "plan", now=t_forget - timedelta(days=1), reconsolidate=False))
    assert "old" not in names(recall(sql, "plan", now=t_forget, reconsolidate=False))
    assert "old" not in names(recall(sql, "plan", now=t_forget + timedelta(days=1), reconsolidate=False))
    assert versions(sql, "old")[-1][1] == "forget"
    assert r["spec"]["valid_from"] == spec_of(sql, "old")["valid_from"]
    state, message = sqlstate(sql, "SELECT dna.forget(%s, 'missing')", (S,))
    assert state == "P0002" and "missing" in message


def test_revive_round_trip_and_no_op(sql):
    remember(sql, "the plan is free", name="old")
    remember(sql, "the plan is pro", name="new")       # a successor must exist (dna.forget checks it)
    one(sql, "SELECT dna.forget(%s, 'old', 'new', now => %s)", (S, NOW + timedelta(days=1)))
    n = len(versions(sql, "old"))
    rv = one(sql, "SELECT dna.revive(%s, 'old', 'alice', now => %s)", (S, NOW + timedelta(days=2)))
    assert rv["revived"] is True and rv["already_in_force"] is False and rv["revivals"] == 1
    assert rv["revival"] == {"valid_to": "2026-07-10T15:00:00+00:00", "revived_at": "2026-07-11T15:00:00+00:00",
                             "superseded_by": "new", "revived_by": "alice"}
    spec = spec_of(sql, "old")
    assert "valid_to" not in spec and "superseded_by_memory" not in spec and spec["revivals"] == [rv["revival"]]
    assert one(sql, "SELECT upper_inf(valid_at) FROM dna.dna_instances WHERE name = 'old'")
    assert "old" in names(recall(sql, "plan", now=NOW + timedelta(days=3), reconsolidate=False))
    assert len(versions(sql, "old")) == n + 1 and versions(sql, "old")[-1][1] == "revive"
    # A memory in force: nothing is written, no version row.
    noop = one(sql, "SELECT dna.revive(%s, 'old')", (S,))
    assert noop["already_in_force"] is True and noop["revived"] is False
    assert len(versions(sql, "old")) == n + 1
    # Forget again, revive again: revivals is append-only.
    one(sql, "SELECT dna.forget(%s, 'old', now => %s)", (S, NOW + timedelta(days=4)))
    one(sql, "SELECT dna.revive(%s, 'old', now => %s)", (S, NOW + timedelta(days=5)))
    assert [r["valid_to"] for r in spec_of(sql, "old")["revivals"]] == ["2026-07-10T15:00:00+00:00",
                                                                         "2026-07-13T15:00:00+00:00"]
    assert sqlstate(sql, "SELECT dna.revive(%s, 'missing')", (S,))[0] == "P0002"


def test_guard_restores_a_dropped_valid_to(sql):
    remember(sql, "the plan is free", name="old")
    remember(sql, "the plan is pro", name="new")
    one(sql, "SELECT dna.forget(%s, 'old', 'new', now => %s)", (S, NOW + timedelta(days=1)))
    sql.execute("UPDATE dna.dna_instances SET spec = spec - 'valid_to' - 'superseded_by_memory' WHERE name = 'old'")
    spec = spec_of(sql, "old")
    assert spec["valid_to"] == "2026-07-10T15:00:00+00:00" and spec["superseded_by_memory"] == "new"
    assert one(sql, "SELECT upper(valid_at) FROM dna.dna_instances WHERE name = 'old'") == NOW + timedelta(days=1)
    # Through remember too (a restatement without valid_to keeps it by design; a raw upsert by the guard).
    sql.execute("""INSERT INTO dna.dna_instances (scope, kind, name, spec) VALUES (%s, 'Engram', 'old', '{"summary": "x"}')
                   ON CONFLICT (scope, kind, api_version, name, tenant) DO UPDATE SET spec = excluded.spec""", (S,))
    assert spec_of(sql, "old")["valid_to"] == "2026-07-10T15:00:00+00:00"
    # A revival quoting another valid_to does not open it; quoting the exact one does.
    sql.execute("""UPDATE dna.dna_instances SET spec = (spec - 'valid_to') ||
                   '{"revivals": [{"valid_to": "2026-07-10T15:00:01+00:00"}]}' WHERE name = 'old'""")
    assert spec_of(sql, "old")["valid_to"] == "2026-07-10T15:00:00+00:00"
    sql.execute("""UPDATE dna.dna_instances SET spec = (spec - 'valid_to') ||
                   '{"revivals": [{"valid_to": "2026-07-10T15:00:00+00:00"}]}' WHERE name = 'old'""")
    assert "valid_to" not in spec_of(sql, "old")
    # Changing valid_to (not dropping it) is not the guard's business.
    sql.execute("UPDATE dna.dna_instances SET spec = spec || '{\"valid_to\": \"2030-01-01T00:00:00+00:00\"}' WHERE name = 'old'")
    assert spec_of(sql, "old")["valid_to"] == "2030-01-01T00:00:00+00:00"


def test_delete_is_refused_naming_forget(sql, dna_dsn):
    remember(sql, "never delete me", name="keep")
    for statement in ("DELETE FROM dna.dna_instances WHERE name = 'keep'",
                      "SELECT dna.delete_document('mem', 'Engram', 'keep')",
                      "DELETE FROM dna.dna_search_docs_384 WHERE name = 'keep'"):
        state, message = sqlstate(sql, statement)
        assert state == "23001" and "dna.forget" in message, statement
    assert one(sql, "SELECT count(*) FROM dna.dna_instances WHERE name = 'keep'") == 1
    assert one(sql, "SELECT count(*) FROM dna.dna_search_docs_384 WHERE name = 'keep'") == 1
    # Every memory Kind is refused the same way (0015_governed_history); search docs without a
    # stored memory delete as usual.
    remember(sql, spec={"title": "note", "body": "a research note"}, kind="Research", name="note")
    state, message = sqlstate(sql, "DELETE FROM dna.dna_instances WHERE kind = 'Research'")
    assert state == "23001" and "dna.forget" in message
    sql.execute("SELECT dna.index_document('mem', 'Engram', 'orphan', 'text', model_id => 'dna-fake-hash-v1')")
    assert one(sql, "SELECT dna.delete_document('mem', 'Engram', 'orphan')") == 1


def test_the_write_path_keeps_history(sql):
    r = remember(sql, "v1", name="h")
    assert versions(sql, "h")[0][1] == "remember" and versions(sql, "h")[0][2] == r["spec"]
    for i in range(2, 6):
        remember(sql, f"v{i}", name="h")
    rows = versions(sql, "h")
    assert [v[0] for v in rows] == [3, 4, 5] and [v[2]["summary"] for v in rows] == ["v3", "v4", "v5"]
    assert [v[3] for v in rows] == sorted(v[3] for v in rows)
    for i in range(1, 6):
        remember(sql, spec={"title": f"r{i}", "body": "research"}, kind="Research", name="r")
    assert [v[0] for v in versions(sql, "r", kind="Research")] == [1, 2, 3, 4, 5]   # retention NULL keeps all
    # A raw UPDATE goes through the same path; an UPDATE that changes nothing appends nothing.
    sql.execute("UPDATE dna.dna_instances SET spec = spec || '{\"tags\": [\"x\"]}' WHERE name = 'h'")
    sql.execute("UPDATE dna.dna_instances SET spec = spec WHERE name = 'h'")
    assert [v[1] for v in versions(sql, "h")] == ["remember", "remember", "update"]


def test_concurrent_forget_and_revive_leave_a_consistent_history(sql, dna_dsn):
    remember(sql, "contested memory", name="c")
    remember(sql, "the memory that replaces it", name="other")
    sql.execute("UPDATE dna.dna_kinds SET version_retention = NULL WHERE kind = 'Engram'")   # keep all, to audit
    errors = []

    def worker(verb):
        try:
            with psycopg.connect(dna_dsn, autocommit=True) as conn:
                for _ in range(25):
                    if verb == "forget":
                        conn.execute("SELECT dna.forget(%s, 'c', 'other')", (S,))
                    else:
                        conn.execute("SELECT dna.revive(%s, 'c', 'bot')", (S,))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(v,)) for v in ("forget", "revive", "forget", "revive")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    rows = versions(sql, "c")
    assert [v[0] for v in rows] == list(range(1, len(rows) + 1))
    assert [v[3] for v in rows] == sorted(v[3] for v in rows)
    prev = None
    for version, op, spec, _ in rows:
        if prev is not None:
            assert op in ("forget", "revive")
            if op == "forget":   # only an open memory is forgotten; the first valid_to is never replaced
                assert "valid_to" not in prev and spec["valid_to"]
                assert spec.get("revivals", []) == prev.get("revivals", [])
            else:                # a revival records exactly the window it reopens
                assert prev["valid_to"] and "valid_to" not in spec
                assert spec["revivals"] == prev.get("revivals", []) + [spec["revivals"][-1]]
                assert spec["revivals"][-1]["valid_to"] == prev["valid_to"]
        prev = spec
    final = spec_of(sql, "c")
    valid_at_open = one(sql, "SELECT upper_inf(valid_at) FROM dna.dna_instances WHERE name = 'c'")
    assert valid_at_open == ("valid_to" not in final)


def test_list_memories(sql):
    remember(sql, "first", name="a", now=NOW - timedelta(days=2))
    remember(sql, "second", name="b", now=NOW - timedelta(days=1))
    one(sql, "SELECT dna.forget(%s, 'a', now => %s)", (S, NOW - timedelta(hours=1)))
    valid = one(sql, "SELECT dna.list_memories(%s, now => %s)", (S, NOW))
    assert [m["name"] for m in valid["memories"]] == ["b"] and valid["total"] == 1
    everything = one(sql, "SELECT dna.list_memories(%s, include_invalid => true, now => %s)", (S, NOW))
    assert [(m["name"], m["valid"]) for m in everything["memories"]] == [("b", True), ("a", False)]
    assert everything["memories"][1]["valid_to"]


def test_reconsolidation_is_fail_soft_and_never_waits(sql, dna_dsn):
    remember(sql, "a locked memory about locks", name="locked")
    remember(sql, "a free memory about locks", name="free")
    with psycopg.connect(dna_dsn) as other:                       # holds a row lock, uncommitted
        other.execute("SELECT 1 FROM dna.dna_instances WHERE scope = %s AND name = 'locked' FOR UPDATE", (S,))
        sql.execute("SET lock_timeout = '5s'")
        res = recall(sql, "memory about locks", now=NOW)
        assert set(names(res)) == {"locked", "free"}
        assert res["reconsolidated"] == ["free"]
        assert res["reconsolidation_errors"] == [{"name": "locked", "sqlstate": "55P03",
                                                  "error": "row locked by another writer; skipped"}]
        other.rollback()
    assert "surface_count" not in spec_of(sql, "locked") and spec_of(sql, "free")["surface_count"] == 1


def test_forget_of_an_unknown_name_hints_the_nearest_names(sql):
    """P0002 for a typo'd name names the nearest names of the partition (fresh-user trial)."""
    import psycopg
    from psycopg.types.json import Jsonb

    for name in ("deploy-friday", "office-lisbon", "office-porto"):
        sql.execute("SELECT dna.remember('hint', %s, name => %s)", (Jsonb({"summary": name}), name))
    for verb in ("forget", "revive"):
        try:
            sql.execute(f"SELECT dna.{verb}('hint', 'ofice-lisbon')")
        except psycopg.errors.NoDataFound as err:
            assert "no Engram/ofice-lisbon" in err.diag.message_primary
            assert err.diag.message_hint.startswith("Nearest Engram names here: 'office-lisbon'"), err.diag.message_hint
        else:
            raise AssertionError(f"{verb} of an unknown name was not refused")
    try:
        sql.execute("SELECT dna.forget('empty-scope', 'x')")
    except psycopg.errors.NoDataFound as err:   # a scope with no rows: the nearest scopes (0023 scope_hint)
        assert "Scope 'empty-scope' has no documents or memories" in err.diag.message_hint, err.diag.message_hint
        assert "nearest scopes: 'hint'" in err.diag.message_hint, err.diag.message_hint
