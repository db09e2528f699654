"""Client.index through COPY: binary COPY into dna.dna_index_staging + dna.index_staged per batch.

The same rows and answers as one dna.index_document call per document; idempotent (nothing
re-embedded); a bad record fails its batch with the server's SQLSTATE and writes nothing of it;
a batch aborted by a deadlock or a serialization failure is retried; application roles can use it.
"""
from __future__ import annotations

import os

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

import pydna
from pydna import Record
from pydna.embeddings.fake import FakeEmbeddingProvider

MODEL = "dna-fake-hash-v1"
WORDS = ("fusion", "lattice", "harbor", "quartz", "meadow", "cobalt", "ember", "glacier", "ranking", "vector")
QUERIES = ("fusion ranking", "quartz harbor", "glacier", "ember vector lattice", "meadow cobalt fusion")


class CountingEmbedder(FakeEmbeddingProvider):
    """The fake embedder, counting the texts it embeds."""

    def __init__(self):
        super().__init__()
        self.texts: list[str] = []

    def embed(self, texts):
        self.texts += list(texts)
        return super().embed(texts)


def corpus(n: int = 45) -> list[Record]:
    """n documents over two tenants ('' and 'ws-a'), some with titles and snippets; one without any
    word the fake embedder hashes (a zero vector, stored as NULL)."""
    docs = []
    for i in range(n):
        words = " ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(3 + i % 5))
        docs.append(Record(kind="Doc" if i % 3 else "Note", name=f"doc-{i:02d}", body=f"{words} number{i}",
                           title=f"Title {WORDS[i % len(WORDS)]}" if i % 2 else None,
                           tenant="ws-a" if i % 4 == 0 else "", snippet=f"snippet {i}" if i % 5 == 0 else None))
    docs.append(Record(kind="Doc", name="punctuation", body="… — !!", title=None))
    return docs


@pytest.fixture
def embedder():
    return CountingEmbedder()


@pytest.fixture
def bulk(dna_dsn, embedder):
    c = pydna.connect(dna_dsn, embedder=embedder)
    yield c
    c.close()


def rows(sql, scope: str) -> list[tuple]:
    return sql.execute(
        "SELECT kind, name, tenant, model_id, text_hash, title, snippet, body, embedding::text, tsv::text, "
        "ts_config::text, valid_at FROM dna.dna_search_docs_384 WHERE scope = %s ORDER BY kind, name, tenant",
        (scope,)).fetchall()


def answers(sql, scope: str, tenant: str = "") -> list:
    out = []
    for q in QUERIES:
        out.append(sql.execute(
            "SELECT kind, name, tenant, round(score::numeric, 9), round(similarity::numeric, 9), rank_dense, "
            "rank_lexical FROM dna.search(%s, %s, dna.fake_embed(%s), %s, k => 10, tenant => %s)",
            (scope, q, q, MODEL, tenant)).fetchall())
        out.append(sql.execute("SELECT kind, name, tenant, round(score::numeric, 9) FROM dna.bm25(%s, %s, %s, "
                               "tenant => %s, k => 20)", (scope, q, MODEL, tenant)).fetchall())
    return out


def one_by_one(sql, scope: str, docs: list[Record]) -> list[str]:
    """What a psql user does: one dna.index_document per document, embedded by dna.fake_embed."""
    return [sql.execute(
        "SELECT dna.index_document(%s, %s, %s, %s, dna.fake_embed(concat_ws(' ', %s::text, %s::text)), %s, title => %s, "
        "tenant => %s, snippet => %s) ->> 'action'",
        (scope, r.kind, r.name, r.body, r.title, r.body, MODEL, r.title, r.tenant, r.snippet)).fetchone()[0]
        for r in docs]


def count(sql, scope: str) -> int:
    return sql.execute("SELECT count(*) FROM dna.dna_search_docs_384 WHERE scope = %s", (scope,)).fetchone()[0]


# -- the same rows and answers ------------------------------------------------------------------


def test_copy_path_gives_the_rows_and_answers_of_index_document(bulk, sql, embedder):
    docs = corpus()
    report = bulk.index("bulk", docs, batch_size=7)  # batches cross tenants and Kinds
    assert (report.inserted, report.updated, report.embedded, report.unchanged) == (len(docs), 0, 0, 0)
    assert report.embedded_texts == len(docs) == len(embedder.texts)
    assert report.tables == {"dna.dna_search_docs_384"}
    assert set(one_by_one(sql, "ref", docs)) == {"inserted"}

    assert rows(sql, "bulk") == rows(sql, "ref")
    assert len(rows(sql, "bulk")) == len(docs)
    punct = sql.execute("SELECT embedding FROM dna.dna_search_docs_384 WHERE scope = 'bulk' AND name = 'punctuation'")
    assert punct.fetchone()[0] is None  # a zero vector is stored as NULL, as dna.index_document does
    for tenant in ("", "ws-a"):
        got = answers(sql, "bulk", tenant)
        assert got == answers(sql, "ref", tenant)
        assert all(got[1::2])  # every lexical query matched something: the comparison is not of empties
    # The staging rows are consumed with the batch.
    assert sql.execute("SELECT count(*) FROM dna.dna_index_staging").fetchone()[0] == 0


def test_a_generator_streams_and_progress_reports_documents(bulk):
    docs = corpus(10)
    seen, sizes = [], []
    bulk.index("bulk", docs, batch_size=4, progress=lambda done, total: seen.append((done, total)),
               on_progress=sizes.append)
    assert seen == [(4, 11), (8, 11), (11, 11)] and sizes == [4, 4, 3]
    seen.clear()
    report = bulk.index("bulk", (d for d in docs), batch_size=5, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(5, None), (10, None), (11, None)]
    assert report.unchanged == 11


def test_mappings_and_lexical_only_model(bulk, sql):
    """Mappings are coerced like before; a model_id other than the embedder's indexes without vectors."""
    sql.execute("SELECT dna.register_model('lexical-only', 768)")
    report = bulk.index("lex", [{"name": "a", "text": "harbor quartz"}, {"_id": 7, "body": "meadow", "kind": "K"}],
                        kind="Doc", model_id="lexical-only")
    assert (report.inserted, report.embedded_texts, report.tables) == (2, 0, {"dna.dna_search_docs_768"})
    assert sql.execute("SELECT kind, name, embedding IS NULL FROM dna.dna_search_docs_768 WHERE scope = 'lex' "
                       "ORDER BY name").fetchall() == [("K", "7", True), ("Doc", "a", True)]


# -- idempotency ---------------------------------------------------------------------------------


def test_second_index_is_unchanged_and_embeds_nothing(bulk, sql, embedder):
    docs = corpus()
    bulk.index("bulk", docs, batch_size=10)
    before = rows(sql, "bulk")
    embedder.texts.clear()
    report = bulk.index("bulk", docs, batch_size=13)
    assert (report.inserted, report.updated, report.embedded) == (0, 0, 0)
    assert report.unchanged == len(docs)
    # Only the zero-vector document, which has no vector, is embedded again (and stays without one).
    assert embedder.texts == ["… — !!"] and report.embedded_texts == 1
    assert rows(sql, "bulk") == before

    changed = [Record(d.kind, d.name, d.body + " revised", d.title, d.tenant, d.snippet) for d in docs[:3]]
    embedder.texts.clear()
    report = bulk.index("bulk", changed + docs[3:10])
    assert (report.updated, report.unchanged, report.embedded_texts) == (3, 7, 3)
    assert len(embedder.texts) == 3

    # A document indexed lexically first (no vector) gets its vector: action 'embedded'.
    sql.execute("SELECT dna.index_document('bulk', 'Doc', 'late', 'glacier ember', NULL, %s)", (MODEL,))
    report = bulk.index("bulk", [Record("Doc", "late", "glacier ember")])
    assert (report.embedded, report.embedded_texts) == (1, 1)


# -- bad input: the batch's SQLSTATE, nothing of the batch written ---------------------------------


@pytest.mark.parametrize("bad, sqlstate", [
    (Record("Doc", "", "blank name"), "22023"),
    (Record("Doc", "   ", "blank name"), "22023"),
    (Record("", "no-kind", "blank kind"), "22023"),
    (Record("Doc", "huge", "x" * 1_000_001), "22001"),
    (Record("Doc", "n" * 513, "name too long"), "22001"),
    (Record("Doc", "doc-good-2", "the same name twice in one batch"), "22023"),
    (Record("Doc", "empty", "   "), "22023"),
    (Record("Doc", "t", "bad tenant", tenant="Bad Tenant!"), "22023"),
    (Record("Doc", "t", "reserved tenant", tenant="personal:someone"), "42501"),
], ids=["blank-name", "space-name", "blank-kind", "body-over-1MB", "long-name", "duplicate", "empty-text",
        "bad-tenant", "personal-tenant"])
def test_bad_record_fails_its_batch_and_writes_nothing_of_it(bulk, sql, bad, sqlstate):
    good = [Record("Doc", f"doc-good-{i}", f"harbor quartz {i}") for i in range(4)]
    with pytest.raises(psycopg.Error) as info:
        bulk.index("bad", good[:2] + [bad] + good[2:], batch_size=10)
    assert info.value.sqlstate == sqlstate, info.value
    assert count(sql, "bad") == 0
    assert sql.execute("SELECT count(*) FROM dna.dna_index_staging").fetchone()[0] == 0
    # Earlier batches stay written; the failing batch ([bad, doc-good-2]) writes nothing, the later
    # ones are not tried.
    with pytest.raises(psycopg.Error) as info:
        bulk.index("bad", good[:2] + [bad] + good[2:], batch_size=2)
    assert info.value.sqlstate == sqlstate
    assert sql.execute("SELECT array_agg(name ORDER BY name) FROM dna.dna_search_docs_384 WHERE scope = 'bad'"
                       ).fetchone()[0] == ["doc-good-0", "doc-good-1"]


# -- retry on 40P01 / 40001 -------------------------------------------------------------------------


def flaky_staging(sql, failures: int, sqlstate: str) -> None:
    """Make the first ``failures`` COPYs into the staging table fail with ``sqlstate`` (a sequence
    counts them: nextval is not rolled back with the failed transaction)."""
    sql.execute("CREATE SEQUENCE public.flaky_attempts")
    sql.execute(f"""
        CREATE FUNCTION public.flaky() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF nextval('public.flaky_attempts') <= {failures} THEN
                RAISE EXCEPTION 'injected failure %', currval('public.flaky_attempts') USING ERRCODE = '{sqlstate}';
            END IF;
            RETURN NULL;
        END $$""")
    sql.execute("CREATE TRIGGER flaky AFTER INSERT ON dna.dna_index_staging FOR EACH STATEMENT "
                "EXECUTE FUNCTION public.flaky()")


def attempts(sql) -> int:
    return sql.execute("SELECT last_value FROM public.flaky_attempts").fetchone()[0]


@pytest.mark.parametrize("sqlstate", ["40P01", "40001"])
def test_a_deadlocked_or_serialization_failed_batch_is_retried(bulk, sql, embedder, sqlstate):
    flaky_staging(sql, 2, sqlstate)
    docs = [d for d in corpus(8) if not d.tenant]  # one tenant: one COPY per attempt
    report = bulk.index("retry", docs, batch_size=100)
    assert attempts(sql) == 3  # two aborted attempts, then the one that committed
    assert report.inserted == len(docs) and report.embedded_texts == len(docs)
    assert len(embedder.texts) == len(docs)  # the retry did not embed again
    assert count(sql, "retry") == len(docs)


def test_retries_give_up_with_the_error_and_write_nothing(bulk, sql):
    flaky_staging(sql, 10, "40P01")
    with pytest.raises(psycopg.errors.DeadlockDetected):
        bulk.index("retry", corpus(3), retries=2)
    assert attempts(sql) == 3 and count(sql, "retry") == 0


def test_no_retry_inside_the_callers_transaction(dna_dsn, sql):
    """Retrying would need the caller's whole transaction again: the error propagates at once."""
    flaky_staging(sql, 1, "40P01")
    with psycopg.connect(dna_dsn) as conn:  # autocommit off: the caller's transaction
        client = pydna.Client(conn, FakeEmbeddingProvider())
        with pytest.raises(psycopg.errors.DeadlockDetected):
            client.index("retry", corpus(3))
        conn.rollback()
    assert attempts(sql) == 1 and count(sql, "retry") == 0


# -- an application role ------------------------------------------------------------------------------


@pytest.fixture
def app_role(pg_server, sql, dna_dsn):
    """A login role granted the application privileges and made a member of workspace ws-a."""
    role = f"dna_bulk_app_{os.getpid()}"
    with psycopg.connect(pg_server.dsn(pg_server.maintenance_db), autocommit=True) as admin:
        admin.execute(f"DROP ROLE IF EXISTS {role}")
        admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'bulk'")
    sql.execute("SELECT dna.grant_app_role(%s)", (role,))
    sql.execute("INSERT INTO dna.dna_workspace_members (workspace, role_name) VALUES ('ws-a', %s)", (role,))
    params = conninfo_to_dict(dna_dsn)
    params.update(user=role, password="bulk")
    yield make_conninfo(**params)
    sql.execute(f"DROP OWNED BY {role}")
    with psycopg.connect(pg_server.dsn(pg_server.maintenance_db), autocommit=True) as admin:
        admin.execute(f"DROP ROLE IF EXISTS {role}")


def test_an_application_role_indexes_through_copy(app_role, sql):
    with pydna.connect(app_role, embedder=FakeEmbeddingProvider()) as client:
        report = client.index("app", [Record("Doc", "base", "harbor"), Record("Doc", "ws", "quartz", tenant="ws-a")])
        assert report.inserted == 2
        with pytest.raises(psycopg.Error) as info:
            client.index("app", [Record("Doc", "ok", "meadow", tenant="ws-a"),
                                 Record("Doc", "other", "ember", tenant="ws-b")])  # not a member of ws-b
        assert info.value.sqlstate == "42501"
    assert sql.execute("SELECT array_agg(name ORDER BY name) FROM dna.dna_search_docs_384 WHERE scope = 'app'"
                       ).fetchone()[0] == ["base", "ws"]


# -- the psql path of docs/bulk-load.md ---------------------------------------------------------------


def test_csv_copy_and_index_staged_as_documented(sql):
    """COPY … (FORMAT csv) with the batch uuid in the file, then dna.index_staged, in one transaction."""
    import uuid

    batch = uuid.uuid4()
    vec = sql.execute("SELECT dna.fake_embed('harbor quartz')::text").fetchone()[0]
    csv = (f'{batch},1,Doc,a,Title A,harbor quartz,,"{vec}"\n'
           f'{batch},2,Doc,b,,meadow cobalt,a snippet,\n')  # empty fields: NULL title / snippet / embedding
    with sql.transaction():
        with sql.cursor().copy("COPY dna.dna_index_staging (batch, ord, kind, name, title, body, snippet, embedding) "
                               "FROM STDIN (FORMAT csv)") as copy:
            copy.write(csv)
        got = sql.execute("SELECT ord, name, action, embedded FROM dna.index_staged('csv', %s, %s) ORDER BY ord",
                          (batch, MODEL)).fetchall()
    assert got == [(1, "a", "inserted", True), (2, "b", "inserted", False)]
    assert sql.execute("SELECT name, title, snippet, embedding IS NULL FROM dna.dna_search_docs_384 "
                       "WHERE scope = 'csv' ORDER BY name").fetchall() == [
        ("a", "Title A", "harbor quartz", False), ("b", None, "a snippet", True)]
    assert sql.execute("SELECT count(*) FROM dna.dna_index_staging").fetchone()[0] == 0


def test_a_transaction_cannot_commit_unconsumed_staged_rows(sql):
    """Staged text never outlives its transaction: COMMIT refuses rows dna.index_staged did not consume."""
    import uuid

    with pytest.raises(psycopg.Error) as info:
        with sql.transaction():
            sql.execute("INSERT INTO dna.dna_index_staging (batch, ord, kind, name, body) VALUES (%s, 1, 'Doc', 'a', 'x')",
                        (uuid.uuid4(),))
    assert info.value.sqlstate == "55000" and "dna.index_staged" in str(info.value)
    assert sql.execute("SELECT count(*) FROM dna.dna_index_staging").fetchone()[0] == 0
