"""dna.consolidate: the decay pass, merge candidates, contradictions between declared claims —
through plain SQL, the Python client (with its scribe seams) and the CLI."""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import psycopg
import pytest
from psycopg.types.json import Jsonb

S = "cons"
NOW = datetime(2026, 7, 9, 15, 0, tzinfo=timezone.utc)


def one(sql, query, params=()):
    return sql.execute(query, params).fetchone()[0]


def remember(sql, name, summary, now=NOW, **spec):
    spec["summary"] = summary
    return one(sql, "SELECT dna.remember(%s, %s, name => %s, now => %s)", (S, Jsonb(spec), name, now))


def consolidate(sql, now=NOW, **kw):
    args = {"floor": 0.15, "apply": False, "dry_run": False, "merge": 0.5, **kw}
    return one(sql, "SELECT dna.consolidate(%s, 'Engram', '', %s, %s, %s, %s, %s)",
               (S, args["floor"], args["apply"], args["dry_run"], args["merge"], now))


def surfaced(sql, name, when):
    sql.execute("UPDATE dna.dna_instances SET spec = spec || jsonb_build_object('last_surfaced', %s::text) "
                "WHERE scope = %s AND name = %s", (when.isoformat(), S, name))


def row_counts(sql):
    tables = [r[0] for r in sql.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'dna' ORDER BY 1")]
    return {t: sql.execute(f'SELECT count(*), coalesce(sum(hashtext(x::text)), 0) FROM dna."{t}" AS x').fetchone()
            for t in tables}


# -- the decay pass ---------------------------------------------------------------------------


def test_decay_pass_reports_and_apply_archives_once(sql):
    remember(sql, "fresh", "a fresh memory")
    remember(sql, "old", "an old faint memory", confidence_score="faint")
    remember(sql, "older", "an older memory")
    surfaced(sql, "old", NOW - timedelta(days=30))      # faint: S = 5 d → R = e^-6
    surfaced(sql, "older", NOW - timedelta(days=60))    # S = 15 d → R = e^-4
    report = consolidate(sql)
    assert report == {
        "evaluated": 3, "archived": 0, "applied": False,
        "stale": [{"name": "old", "retention": 0.0025, "stability_days": 5.0, "days_since": 30.0},
                  {"name": "older", "retention": 0.0183, "stability_days": 15.0, "days_since": 60.0}]}
    first = consolidate(sql, apply=True)
    assert first["archived"] == 2 and first["applied"] is True
    assert one(sql, "SELECT spec ->> 'valid_to' FROM dna.dna_instances WHERE name = 'old'") == "2026-07-09T15:00:00+00:00"
    second = consolidate(sql, apply=True)
    assert second == {"evaluated": 1, "stale": [], "archived": 0, "applied": True}
    assert one(sql, "SELECT count(*) FROM dna.dna_instances") == 3   # forgotten, never deleted
    later = consolidate(sql, now=NOW + timedelta(days=1), apply=True)
    assert later["archived"] == 0


def test_dry_run_writes_nothing_and_wins_over_apply(sql):
    remember(sql, "a", "deep copy the cache before mutating documents", tags=["cache"])
    remember(sql, "b", "deep copy the cache before mutating any documents", tags=["copy"])
    remember(sql, "stale", "something long forgotten")
    surfaced(sql, "stale", NOW - timedelta(days=90))
    remember(sql, "gone", "expired already")
    one(sql, "SELECT dna.forget(%s, 'gone', now => %s)", (S, NOW - timedelta(days=1)))
    before = row_counts(sql)
    report = consolidate(sql, apply=True, dry_run=True)
    assert row_counts(sql) == before
    assert report["dry_run"] is True and report["applied"] is False and report["archived"] == 0
    assert [(a["name"], a["action"]) for a in report["actions"]] == [
        ("a", "retain"), ("b", "retain"), ("gone", "already_expired"), ("stale", "expire")]
    expire = report["actions"][3]
    assert expire["reason"].startswith("retention 0.0025 < floor 0.15 after 90") and "stability 15" in expire["reason"]
    assert report["actions"][2]["valid_to"] == "2026-07-08T15:00:00+00:00"
    [group] = report["merge_candidates"]
    assert group["names"] == ["a", "b"] and group["strategy"] == "supersede" and group["synthesized"] is False
    assert group["proposed_spec"]["tags"] == ["cache", "copy"]
    assert group["pairs"][0]["shared_terms"] == ["before", "cache", "copy", "deep", "documents", "mutating"]
    assert report["contradictions"] == [] and report["undecided"] == [] and report["claims"] == 0


def test_consolidate_validates(sql):
    for args in ({"floor": 1.5}, {"merge": -0.1}):
        with pytest.raises(psycopg.errors.InvalidParameterValue):
            consolidate(sql, **args)
    with pytest.raises(psycopg.errors.InvalidParameterValue):
        one(sql, "SELECT dna.consolidate(%s, 'Story')", (S,))


# -- merge candidates -------------------------------------------------------------------------


def test_merge_groups_on_a_crafted_set(sql):
    members = [
        {"name": "m1", "spec": {"summary": "alpha beta gamma delta", "confidence_score": 2.0,
                                "created_at": "2026-07-01T00:00:00+00:00"}},
        {"name": "m2", "spec": {"summary": "alpha beta gamma epsilon", "created_at": "2026-07-05T00:00:00+00:00"}},
        {"name": "m3", "spec": {"summary": "beta gamma epsilon zeta", "created_at": "2026-07-06T00:00:00+00:00"}},
        {"name": "m4", "spec": {"summary": "the and for with alpha"}},                     # stop words, short
        {"name": "n1", "spec": {"summary": "banana tropical smoothie", "created_at": "2026-07-01T00:00:00+00:00"}},
        {"name": "n2", "spec": {"summary": "banana tropical smoothie", "created_at": "2026-07-03T00:00:00+00:00"}},
        {"name": "x", "spec": {"summary": "unrelated words entirely"}},
    ]
    groups = one(sql, "SELECT dna.merge_candidates(%s, 0.5, %s)", (Jsonb(members), NOW))
    # m1~m2 (3/5) and m2~m3 (3/5) chain into one component although m1 and m3 share only 2 of 6.
    assert [g["names"] for g in groups] == [["m1", "m2", "m3"], ["n1", "n2"]]
    chain, twins = groups
    assert chain["canonical"] == "m1"                      # highest confidence wins
    assert chain["superseded"] == ["m2", "m3"]
    assert [(p["a"], p["b"], p["overlap"]) for p in chain["pairs"]] == [("m1", "m2", 0.6), ("m2", "m3", 0.6)]
    assert twins["canonical"] == "n2"                      # same confidence: the newest created_at
    assert twins["pairs"][0]["overlap"] == 1.0
    assert one(sql, "SELECT dna.merge_candidates(%s, 0.7, %s)", (Jsonb(members), NOW)) == [twins]
    assert one(sql, "SELECT dna.merge_tokens(%s)", (Jsonb({"area": "Feature/x", "summary": "The cache; it's DONE!"}),)) \
        == ["cache", "done", "feature"]
    many = [{"name": f"t{i:02d}", "spec": {"summary": " ".join(f"w{j:02d}" for j in range(20))}} for i in range(2)]
    [g] = one(sql, "SELECT dna.merge_candidates(%s, 0.5, %s)", (Jsonb(many), NOW))
    assert len(g["pairs"][0]["shared_terms"]) == 12
    # Equal on every key: the smallest name.
    tie = [{"name": "b", "spec": {"summary": "same words here"}}, {"name": "a", "spec": {"summary": "same words here"}}]
    assert one(sql, "SELECT dna.merge_candidates(%s, 0.5, %s)", (Jsonb(tie), NOW))[0]["canonical"] == "a"


# -- contradictions ---------------------------------------------------------------------------

D = "2026-01-%02dT00:00:00+00:00"
# Allen's 13 relations of A against B = [10, 20): (name, A window, conflicts?)
ALLEN = [
    ("before", (1, 5), False), ("meets", (5, 10), False), ("overlaps", (5, 15), True),
    ("starts", (10, 15), True), ("during", (12, 18), True), ("finishes", (15, 20), True),
    ("equals", (10, 20), True), ("finished-by", (5, 20), True), ("contains", (5, 25), True),
    ("started-by", (10, 25), True), ("overlapped-by", (15, 25), True), ("met-by", (20, 25), False),
    ("after", (22, 28), False),
]


def claim_member(name, obj, window, polarity="asserts"):
    claim = {"subject": "Workspace/acme", "predicate": "plan", "object": obj, "polarity": polarity}
    if window:
        claim["valid_from"], claim["valid_to"] = D % window[0], D % window[1]
    return {"name": name, "spec": {"summary": f"plan is {obj}", "claims": [claim]}}


@pytest.mark.parametrize("relation,window,conflicts", ALLEN, ids=[r[0] for r in ALLEN])
def test_allen_relations(sql, relation, window, conflicts):
    members = [claim_member("a", "Pro", window), claim_member("b", "Free", (10, 20))]
    report = one(sql, "SELECT dna.contradiction_report(%s, '{}', %s)", (Jsonb(members), NOW))
    assert bool(report["contradictions"]) is conflicts, relation
    assert report["claims"] == 2
    if conflicts:
        [c] = report["contradictions"]
        assert c["names"] == ["a", "b"] and c["pairs"][0]["reason"] == "object" and c["decided_by"] == "rule"
        assert c["subject"] == "Workspace/acme" and c["predicate"] == "plan"
        assert c["proposal"]["strategy"] == "await_confirmation" and c["proposal"]["basis"] == "spec"
    else:
        # Two memories about the same referent the rule cleared: nothing is undecided either.
        assert report["undecided"] == [{"referent": "workspace/acme", "names": ["a", "b"],
                                        "reason": "no comparable claims — every memory here declares claims, "
                                                  "but none share a (subject, predicate)"}]
    assert one(sql, "SELECT dna.intervals_overlap(%s, %s, %s, %s)",
               (D % window[0], D % window[1], D % 10, D % 20)) is conflicts


def test_claim_semantics(sql):
    def contradict(a, b):
        return one(sql, "SELECT dna.claims_contradict(%s, %s)", (Jsonb({"memory": "a", **a}), Jsonb({"memory": "b", **b})))

    base = {"subject": "Kind/Livro", "predicate": "approved"}
    assert contradict({**base, "object": " Approved "}, {**base, "object": "approved"}) is None    # strip + casefold
    assert contradict({**base, "object": "yes"}, {**base, "object": "no"}) == "object"
    assert contradict({**base, "object": "yes"}, {**base, "object": "yes", "polarity": "denies"}) == "polarity"
    assert contradict({**base, "object": "yes"}, {**base, "object": "no", "polarity": "denies"}) is None
    assert contradict({**base, "object": "x", "polarity": "denies"}, {**base, "object": "y", "polarity": "denies"}) is None
    assert contradict({**base, "object": "x"}, {**base}) is None                                  # valued vs existence
    assert contradict({**base}, {**base, "polarity": "denies"}) == "polarity"                     # existence, opposite
    assert contradict({**base, "object": 2}, {**base, "object": 2.0}) is None
    assert contradict({**base, "object": True}, {**base, "object": "true"}) is None
    assert contradict({**base, "object": True}, {**base, "object": 1}) == "object"
    assert contradict({**base, "object": "x"}, {"subject": "kind/livro ", "predicate": " APPROVED", "object": "y"}) == "object"
    assert contradict({**base, "object": "x"}, {**base, "subject": "Kind/Other", "object": "y"}) is None


def test_subject_defaults_to_the_memory_referent_and_unanchored_claims_compare_with_nothing(sql):
    members = [
        {"name": "a", "spec": {"summary": "s", "area": "Kind/Livro", "claims": [{"predicate": "status", "object": "draft"}]}},
        {"name": "b", "spec": {"summary": "s", "source_refs": ["general", "Kind/Livro"],
                               "claims": [{"predicate": "status", "object": "approved"}]}},
        {"name": "c", "spec": {"summary": "s", "area": "general", "claims": [{"predicate": "status", "object": "x"}]}},
        {"name": "d", "spec": {"summary": "prose only", "area": "Kind/Livro"}},
    ]
    report = one(sql, "SELECT dna.contradiction_report(%s, '{}', %s)", (Jsonb(members), NOW))
    [c] = report["contradictions"]
    assert c["names"] == ["a", "b"] and c["subject"] == "Kind/Livro" and report["claims"] == 2
    # d shares the referent but has no claims: the group is not all in conflict → undecided, in prose.
    assert report["undecided"] == [{"referent": "kind/livro", "names": ["a", "b", "d"],
                                    "reason": "no claims to compare — the disagreement, if any, is only in prose"}]


def test_succession_written_with_forget_is_not_reported(sql):
    t = NOW - timedelta(days=10)
    remember(sql, "plan-free", "the plan is Free", now=NOW - timedelta(days=40),
             claims=[{"subject": "Workspace/acme", "predicate": "plan", "object": "Free"}])
    remember(sql, "plan-pro", "the plan is Pro", now=t,
             claims=[{"subject": "Workspace/acme", "predicate": "plan", "object": "Pro"}])
    one(sql, "SELECT dna.forget(%s, 'plan-free', 'plan-pro', now => %s)", (S, t))
    report = consolidate(sql, dry_run=True)
    assert report["contradictions"] == []
    # Even with both memories compared, the windows meet: [.., t) and [t, ..) are a clean succession.
    members = one(sql, "SELECT jsonb_agg(jsonb_build_object('name', name, 'spec', spec) ORDER BY name) "
                       "FROM dna.dna_instances WHERE scope = %s", (S,))
    assert one(sql, "SELECT dna.contradiction_report(%s, '{}', %s)", (Jsonb(members), NOW))["contradictions"] == []
    # Without the forget they overlap and are reported, survivor elected on transaction time.
    one(sql, "SELECT dna.revive(%s, 'plan-free', now => %s)", (S, NOW))
    [c] = consolidate(sql, dry_run=True)["contradictions"]
    assert c["names"] == ["plan-free", "plan-pro"]
    assert c["proposal"]["suggested_keep"] == "plan-pro" and c["proposal"]["basis"] == "recorded_at"
    assert c["proposal"]["suggested_supersede"] == ["plan-free"]


def test_pruned_first_version_yields_recorded_at_approximate(sql):
    claim = {"subject": "Workspace/acme", "predicate": "plan"}
    remember(sql, "old", "the plan is Free", claims=[{**claim, "object": "Free"}], confidence_score=3.0)
    remember(sql, "new", "the plan is Pro", claims=[{**claim, "object": "Pro"}])
    for i in range(3):                                     # version 1 of `new` is pruned (Engram keeps 3)
        remember(sql, "new", f"the plan is Pro ({i})", claims=[{**claim, "object": "Pro"}])
    recorded = one(sql, "SELECT dna.memory_recorded_at(%s, 'Engram', '', ARRAY['old', 'new'])", (S,))
    assert recorded["new"]["approximate"] is True and recorded["old"]["approximate"] is False
    report = consolidate(sql, dry_run=True)
    [c] = report["contradictions"]
    proposal = c["proposal"]
    # `new` would win on transaction time, but its stamp is only an upper bound: the authored clock
    # decides (old has the higher confidence), and the proposal says so.
    assert proposal["basis"] == "spec" and proposal["suggested_keep"] == "old"
    assert proposal["recorded_at_approximate"] == ["new"] and report["recorded_at_approximate"] == ["new"]
    # An approximate stamp that loses the election is still sound: basis stays recorded_at.
    names = ["old", "new"]
    rec = {"old": {"recorded_at": "2026-07-09T00:00:00+00:00"},
           "new": {"recorded_at": "2026-07-01T00:00:00+00:00", "approximate": True}}
    got = one(sql, "SELECT dna.elect_survivor(%s, %s, '{}', %s)", (names, Jsonb(rec), NOW))
    assert got["suggested_keep"] == "old" and got["basis"] == "recorded_at" and got["recorded_at_approximate"] == ["new"]


# -- client scribes and CLI -------------------------------------------------------------------


def test_client_scribes(client):
    mem = client.memory
    mem.remember(S, "deep copy the cache before mutating documents", name="a", now=NOW)
    mem.remember(S, "deep copy the cache before mutating any documents", name="b", now=NOW)
    mem.remember(S, "the book Livro still needs approval", name="p1", area="Kind/Livro", now=NOW)
    mem.remember(S, "the book Livro was approved", name="p2", area="Kind/Livro", now=NOW)
    seen = {}

    def merge_scribe(specs):
        seen["merge"] = [s["summary"] for s in specs]
        return {"summary": "deep copy before mutating documents (fused)"}

    def judge(specs):
        seen["judge"] = [s["summary"] for s in specs]
        return {"contradicts": True, "reason": "needs approval vs approved", "predicate": "approval"}

    report = mem.consolidate(S, dry_run=True, now=NOW, merge_scribe=merge_scribe, contradiction_scribe=judge)
    [group] = report["merge_candidates"]
    assert group["strategy"] == "synthesize" and group["synthesized"] is True
    assert group["proposed_text"] == "deep copy before mutating documents (fused)"
    assert len(seen["merge"]) == 2 and seen["judge"] == ["the book Livro still needs approval", "the book Livro was approved"]
    [c] = report["contradictions"]
    assert c["decided_by"] == "scribe" and c["names"] == ["p1", "p2"] and c["predicate"] == "approval"
    assert c["proposal"]["strategy"] == "await_confirmation" and c["proposal"]["suggested_keep"] in ("p1", "p2")
    assert report["undecided"] == []

    def broken(specs):
        raise RuntimeError("model down")

    report = mem.consolidate(S, dry_run=True, now=NOW, merge_scribe=broken, contradiction_scribe=broken)
    [group] = report["merge_candidates"]
    assert group["strategy"] == "supersede" and group["synthesized"] is False
    assert group["scribe_error"] == "RuntimeError: model down"
    assert report["contradictions"] == []
    [u] = report["undecided"]
    assert u["names"] == ["p1", "p2"] and u["scribe_error"] == "RuntimeError: model down"


def test_cli_consolidate(dna, dna_dsn):
    for summary, claim in (("the plan is Free", "Workspace/acme::plan=Free"), ("the plan is Pro", "Workspace/acme::plan=Pro")):
        dna("remember", summary, "--claim", claim, "--scope", S, "--embedder", "fake")
    dna("remember", "deep copy the cache before mutating documents", "--scope", S, "--embedder", "fake")
    dna("remember", "deep copy the cache before mutating any documents", "--scope", S, "--embedder", "fake")
    with psycopg.connect(dna_dsn, autocommit=True) as conn:
        before = row_counts(conn)
        text = dna("consolidate", "--dry-run", "--apply", "--scope", S).stdout
        assert row_counts(conn) == before
    assert "⚡" in text and "Workspace/acme" in text and "plan" in text and "dry run" in text
    assert "merge?" in text
    report = json.loads(dna("consolidate", "--dry-run", "--json", "--scope", S).stdout)
    assert len(report["contradictions"]) == 1 and len(report["merge_candidates"]) == 1
    future = (datetime.now(timezone.utc) + timedelta(days=3650)).isoformat()
    with psycopg.connect(dna_dsn, autocommit=True) as conn:
        conn.execute("UPDATE dna.dna_instances SET spec = spec || jsonb_build_object('last_surfaced', now()::text) "
                     "WHERE scope = %s", (S,))
    applied = json.loads(dna("consolidate", "--apply", "--now", future, "--json", "--scope", S).stdout)
    assert applied["archived"] == 4 and applied["applied"] is True
    again = dna("consolidate", "--apply", "--now", future, "--scope", S).stdout
    assert "archived 0" in again
