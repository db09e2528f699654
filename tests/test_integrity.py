"""dna.verify_integrity / dna.reconcile (issue 13): every drift the check reports is caused here (as
a restore, a TRUNCATE or a disabled trigger would), reported, and repaired (or listed for re-embedding)."""
from __future__ import annotations

import psycopg
import pytest
from psycopg.types.json import Jsonb

S = "team"
FAKE = "dna-fake-hash-v1"


def _seed(sql):
    for i, text in enumerate(["the office is in lisbon", "deploys happen on fridays", "the cat is called miso"]):
        sql.execute("SELECT dna.remember(%s, %s, name => %s, embedding => dna.fake_embed(%s), model_id => %s)",
                    (S, Jsonb({"summary": text}), f"m{i}", text, FAKE))
    sql.execute("SELECT dna.index_documents(%s, ARRAY['Doc'], ARRAY['d1'], ARRAY['alpha beta gamma'], NULL, %s)", (S, FAKE))


def verify(sql, mode="full"):
    return sql.execute("SELECT dna.verify_integrity(%s, %s)", (S, mode)).fetchone()[0]


def counts(report):
    return {name: c["count"] for name, c in report["checks"].items() if c["count"]}


def test_a_healthy_scope_is_ok(sql):
    _seed(sql)
    for mode in ("quick", "full"):
        report = verify(sql, mode)
        assert report["ok"] is True and counts(report) == {}, report


def test_lexical_drift_is_reported_and_rebuilt(sql):
    _seed(sql)
    lisbon = "SELECT name FROM dna.bm25(%s, 'lisbon', %s, '', k => 5)"
    assert [r[0] for r in sql.execute(lisbon, (S, FAKE))] == ["m0"]
    # A restore that lost the BM25 index of one document, and a stray BM25 document.
    doc_id = sql.execute("SELECT doc_id FROM dna.dna_search_docs_384 WHERE name = 'm0'").fetchone()[0]
    sql.execute("DELETE FROM dna.dna_bm25_postings WHERE doc_id = %s", (doc_id,))
    sql.execute("DELETE FROM dna.dna_bm25_forward WHERE doc_id = %s", (doc_id,))
    sql.execute("DELETE FROM dna.dna_bm25_docs WHERE doc_id = %s", (doc_id,))
    sql.execute("INSERT INTO dna.dna_bm25_docs (scope, model_id, tenant, doc_id, seg_id, kind, doc_len) "
                "VALUES (%s, %s, '', 999999, NULL, 'Doc', 3)", (S, FAKE))
    # And one whose forward row no longer matches its tsvector (full mode only).
    sql.execute("UPDATE dna.dna_bm25_forward SET terms = '{\"bogus\": \"1\"}' WHERE doc_id = "
                "(SELECT doc_id FROM dna.dna_search_docs_384 WHERE name = 'm1')")
    assert [r[0] for r in sql.execute(lisbon, (S, FAKE))] == []
    quick, full = verify(sql, "quick"), verify(sql, "full")
    assert counts(quick) == {"lexical": 2} and counts(full) == {"lexical": 3}
    problems = sorted(f["problem"] for f in full["checks"]["lexical"]["findings"])
    assert problems == ["BM25 document without a search row", "BM25 terms differ from the tsvector", "not in the BM25 index"]
    got = sql.execute("SELECT dna.reconcile(%s, 'rebuild_lexical')", (S,)).fetchone()[0]
    assert got["repaired"]["lexical"] == 3 and got["after"]["ok"] is True, got
    assert [r[0] for r in sql.execute(lisbon, (S, FAKE))] == ["m0"]


def test_validity_mirror_drift_is_reported_and_rebuilt(sql):
    _seed(sql)
    sql.execute("SELECT dna.forget(%s, 'm1')", (S,))
    sql.execute("ALTER TABLE dna.dna_search_docs_384 DISABLE TRIGGER dna_search_docs_valid_at")
    try:
        sql.execute("UPDATE dna.dna_search_docs_384 SET valid_at = NULL WHERE name = 'm1'")   # back in dna.search
    finally:
        sql.execute("ALTER TABLE dna.dna_search_docs_384 ENABLE TRIGGER dna_search_docs_valid_at")
    assert "m1" in [r[0] for r in sql.execute("SELECT name FROM dna.search(%s, 'fridays', NULL, %s)", (S, FAKE))]
    assert counts(verify(sql)) == {"validity": 1}
    got = sql.execute("SELECT dna.reconcile(%s, 'rebuild_lexical')", (S,)).fetchone()[0]
    assert got["repaired"]["validity"] == 1 and got["after"]["ok"] is True
    assert "m1" not in [r[0] for r in sql.execute("SELECT name FROM dna.search(%s, 'fridays', NULL, %s)", (S, FAKE))]


def test_rows_vectors_and_history_drift_are_reported(sql):
    _seed(sql)
    # A memory stored without its search row (a disabled trigger path or a partial restore)...
    sql.execute("ALTER TABLE dna.dna_search_docs_384 DISABLE TRIGGER dna_search_docs_refuse_delete")
    try:
        sql.execute("DELETE FROM dna.dna_search_docs_384 WHERE name = 'm2'")
    finally:
        sql.execute("ALTER TABLE dna.dna_search_docs_384 ENABLE TRIGGER dna_search_docs_refuse_delete")
    # ...a search row without its vector, and a record changed with the history trigger off.
    sql.execute("UPDATE dna.dna_search_docs_384 SET embedding = NULL WHERE name = 'm1'")
    sql.execute("ALTER TABLE dna.dna_instances DISABLE TRIGGER dna_instances_after_write")
    try:
        sql.execute("UPDATE dna.dna_instances SET spec = spec || '{\"area\": \"ops\"}' WHERE name = 'm0'")
    finally:
        sql.execute("ALTER TABLE dna.dna_instances ENABLE TRIGGER dna_instances_after_write")
    report = verify(sql)
    assert counts(report) == {"rows": 1, "vectors": 1, "history": 1}, report
    assert report["checks"]["rows"]["findings"][0]["name"] == "m2"
    assert report["checks"]["history"]["findings"][0]["name"] == "m0"
    # reembed lists exactly what the model lacks: m1 (no vector) and m2 (no row).
    todo = sql.execute("SELECT dna.reconcile(%s, 'reembed', %s)", (S, FAKE)).fetchone()[0]
    assert [t["name"] for t in todo["to_embed"]] == ["m1", "m2"]
    for t in todo["to_embed"]:
        sql.execute("SELECT dna.index_document(%s, %s, %s, %s, dna.fake_embed(%s), %s, %s)",
                    (S, t["kind"], t["name"], t["text"], t["text"], FAKE, t["title"]))
    assert counts(verify(sql)) == {"history": 1}                         # the past is reported, never invented
    assert sql.execute("SELECT dna.reconcile(%s, 'reembed', %s)", (S, FAKE)).fetchone()[0]["count"] == 0


def test_a_new_model_lacks_every_memory(sql):
    _seed(sql)
    sql.execute("INSERT INTO dna.dna_models (model_id, dims) VALUES ('other-model', 384) ON CONFLICT DO NOTHING")
    todo = sql.execute("SELECT dna.reconcile(%s, 'reembed', 'other-model')", (S,)).fetchone()[0]
    assert todo["count"] == 3


def test_bad_arguments(sql):
    for query in (f"SELECT dna.verify_integrity('{S}', 'deep')", f"SELECT dna.reconcile('{S}', 'rewrite')",
                  f"SELECT dna.reconcile('{S}', 'reembed')"):
        with pytest.raises(psycopg.Error) as info:
            sql.execute(query)
        assert info.value.sqlstate == "22023"
        assert info.value.diag.message_hint, query     # each refusal says what is valid


def test_bad_arguments_hint_the_valid_values(sql):
    _seed(sql)
    cases = {f"SELECT dna.verify_integrity('{S}', 'deep')": "full",
             f"SELECT dna.reconcile('{S}', 'rewrite')": "rebuild_lexical",
             f"SELECT dna.reconcile('{S}', 'reembed', 'no-such-model')": FAKE}
    for query, hint in cases.items():
        with pytest.raises(psycopg.Error) as info:
            sql.execute(query)
        assert info.value.sqlstate == "22023" and hint in info.value.diag.message_hint, query


def test_a_scope_with_no_rows_is_named_not_silently_ok(sql):
    """A typo'd scope is consistent (nothing to check) — the report says it has no rows and a NOTICE
    names the nearest scopes, as dna.search does."""
    _seed(sql)
    notices = []
    sql.add_notice_handler(lambda d: notices.append(d.message_primary))
    report = sql.execute("SELECT dna.verify_integrity('teem', 'quick')").fetchone()[0]
    assert report["scope_exists"] is False and report["ok"] is True
    assert any("'teem' has no rows" in n and "'team'" in n for n in notices), notices
    assert verify(sql)["scope_exists"] is True
