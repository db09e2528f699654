"""The `dna` command line, run in-process with typer's CliRunner against the test databases.

Every command that embeds uses the deterministic fake embedder (`--embedder fake`).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

from pydna.cli import app, markdown_snippet, markdown_title

FAKE = ["--embedder", "fake"]


@pytest.fixture
def runner(monkeypatch, tmp_path):
    # No ambient database, and an empty embedded-server home: nothing may fall back to a real server.
    monkeypatch.delenv("DNA_DATABASE_URL", raising=False)
    monkeypatch.setenv("DNA_HOME", str(tmp_path / "dna-home"))
    return CliRunner()


def invoke(runner, *args, env=None):
    return runner.invoke(app, [str(a) for a in args], env=env)


def ok(result):
    assert result.exit_code == 0, f"exit {result.exit_code}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}" \
        + (f"\n{result.exception!r}" if result.exception and not isinstance(result.exception, SystemExit) else "")
    return result


@pytest.fixture
def corpus(tmp_path):
    """A directory of markdown/text files and a JSONL file."""
    docs = tmp_path / "docs"
    (docs / "guide").mkdir(parents=True)
    (docs / "fusion.md").write_text(
        "# Reciprocal rank fusion\n\nRRF fuses the dense lane and the lexical lane by summing "
        "1 / (k + rank) over the lanes.\n", encoding="utf-8")
    (docs / "guide" / "install.md").write_text(
        "---\ntitle: ignored\n---\n\nInstall pydna\n=============\n\nRun pip install pydna, then dna db up "
        "to start the embedded PostgreSQL server.\n", encoding="utf-8")
    (docs / "notes.txt").write_text("Bitemporal memories keep valid time and transaction time apart.\n",
                                    encoding="utf-8")
    (docs / "ignored.html").write_text("<p>not picked up by the directory walk</p>\n", encoding="utf-8")
    (docs / ".hidden").mkdir()
    (docs / ".hidden" / "secret.md").write_text("# hidden\n\nskipped\n", encoding="utf-8")
    jsonl = tmp_path / "facts.jsonl"
    jsonl.write_text("\n".join([
        json.dumps({"kind": "Fact", "name": "pgvector-hnsw", "title": "HNSW in pgvector",
                    "body": "pgvector builds HNSW graphs for approximate nearest neighbour search."}),
        "",
        json.dumps({"_id": 42, "text": "Halfvec stores vectors with half precision floats up to 4000 dims."}),
    ]) + "\n", encoding="utf-8")
    return docs, jsonl


def _index(runner, dsn, *paths, extra=()):
    return invoke(runner, "--dsn", dsn, "index", *paths, "--scope", "docs", *FAKE, "--json", *extra)


# -- dna db ----------------------------------------------------------------------------------


def test_db_upgrade_sql_prints_ddl_and_runs_nothing(runner, empty_dsn, tmp_path):
    result = ok(invoke(runner, "--dsn", empty_dsn, "db", "upgrade", "--sql"))
    assert "CREATE TABLE dna.dna_search_docs_384" in result.stdout
    assert "CREATE SCHEMA IF NOT EXISTS dna" in result.stdout
    with psycopg.connect(empty_dsn) as conn:
        assert conn.execute("SELECT to_regnamespace('dna')").fetchone()[0] is None
        assert conn.execute("SELECT to_regclass('public.dna_alembic_version')").fetchone()[0] is None


def test_db_upgrade_sql_needs_no_server(runner, tmp_path):
    # No DSN anywhere: the embedded server must not be started (its home stays absent).
    result = ok(invoke(runner, "db", "upgrade", "--sql"))
    assert "CREATE TABLE dna.dna_search_docs_384" in result.stdout
    assert not (tmp_path / "dna-home").exists()
    # An unreachable DSN: the SQL from empty, and stderr says why (nothing starts).
    far = ok(invoke(runner, "--dsn", "postgresql://nobody@127.0.0.1:1/nowhere", "db", "upgrade", "--sql"))
    assert "CREATE TABLE dna.dna_search_docs_384" in far.stdout and "does not answer" in far.stderr


def test_db_status_json(runner, dna_dsn, corpus):
    docs, _ = corpus
    ok(_index(runner, dna_dsn, docs))
    result = ok(invoke(runner, "--dsn", dna_dsn, "db", "status", "--json"))
    status = json.loads(result.stdout)
    assert status["server"]["kind"] == "external"
    assert status["postgresql"]
    assert status["pgvector"]["installed"]
    assert status["revision"]["applied"] == status["revision"]["head"]
    assert status["revision"]["up_to_date"] is True
    tables = {t["table"]: t for t in status["search_tables"]}
    assert set(tables) >= {f"dna.dna_search_docs_{w}" for w in (384, 768, 1024, 1536, 3072)}
    t384 = tables["dna.dna_search_docs_384"]
    assert t384["rows"] == 3
    assert t384["models"] == [{"model_id": "dna-fake-hash-v1", "rows": 3, "embedded": 3}]
    assert tables["dna.dna_search_docs_768"]["rows"] == 0


def test_db_status_human_and_env_dsn(runner, dna_dsn):
    result = ok(invoke(runner, "db", "status", env={"DNA_DATABASE_URL": dna_dsn}))
    assert "external" in result.stdout
    assert "up to date" in result.stdout
    assert "dna.dna_search_docs_384" in result.stdout


def test_db_status_unmigrated(runner, empty_dsn):
    result = ok(invoke(runner, "--dsn", empty_dsn, "db", "status", "--json"))
    status = json.loads(result.stdout)
    assert status["revision"]["applied"] is None
    assert status["search_tables"] == []
    human = ok(invoke(runner, "--dsn", empty_dsn, "db", "status"))
    assert "dna db upgrade" in human.stdout


def test_db_status_embedded_not_running_does_not_start_it(runner, tmp_path):
    result = invoke(runner, "db", "status")
    assert result.exit_code == 1
    assert "dna db up" in result.stderr
    assert not (tmp_path / "dna-home" / "pgdata").exists()


def test_db_up_with_dsn_migrates_and_prints_it(runner, empty_dsn):
    result = ok(invoke(runner, "--dsn", empty_dsn, "db", "up"))
    assert result.stdout.strip() == empty_dsn
    with psycopg.connect(empty_dsn) as conn:
        assert conn.execute("SELECT to_regclass('dna.dna_search_docs_384')").fetchone()[0] is not None
    again = ok(invoke(runner, "--dsn", empty_dsn, "db", "upgrade"))
    assert "already at revision" in again.stdout


def test_db_stop_when_not_running(runner):
    result = ok(invoke(runner, "db", "stop"))
    assert "not running" in result.stdout


# -- dna index / dna recall ------------------------------------------------------------------


def test_index_then_recall(runner, dna_dsn, corpus):
    docs, jsonl = corpus
    result = ok(_index(runner, dna_dsn, docs, jsonl))
    summary = json.loads(result.stdout)
    assert summary["records"] == 5
    assert (summary["inserted"], summary["updated"], summary["embedded"], summary["unchanged"]) == (5, 0, 0, 0)
    assert summary["embedded_texts"] == 5
    assert summary["model_id"] == "dna-fake-hash-v1"
    assert summary["tables"] == ["dna.dna_search_docs_384"]
    assert "fake" in result.stderr  # which embedder, on stderr under --json

    result = ok(invoke(runner, "--dsn", dna_dsn, "recall", "reciprocal rank fusion lanes", "--scope", "docs",
                       *FAKE, "--json"))
    answer = json.loads(result.stdout)
    assert set(answer) == {"query", "scope", "model_id", "embedder", "degraded", "notices", "hits"}
    assert answer["query"] == "reciprocal rank fusion lanes"
    assert answer["scope"] == "docs"
    assert answer["model_id"] == "dna-fake-hash-v1"
    assert answer["degraded"] is False
    first = answer["hits"][0]
    assert (first["kind"], first["name"], first["title"], first["rank"]) == (
        "Doc", "fusion.md", "Reciprocal rank fusion", 1)
    assert first["similarity"] is not None and first["lexical_score"] is not None
    assert first["snippet"].startswith("RRF fuses the dense lane")  # the title heading is not repeated

    # JSONL records, kind filter, name prefix, and the `search` alias.
    result = ok(invoke(runner, "--dsn", dna_dsn, "search", "HNSW nearest neighbour", "--scope", "docs",
                       "--kind", "Fact", "-k", "3", *FAKE, "--json"))
    hits = json.loads(result.stdout)["hits"]
    assert [h["name"] for h in hits] == ["pgvector-hnsw"]
    result = ok(invoke(runner, "--dsn", dna_dsn, "recall", "install server", "--scope", "docs",
                       "--name-prefix", "guide/", *FAKE, "--json"))
    hits = json.loads(result.stdout)["hits"]
    assert [(h["name"], h["title"]) for h in hits] == [("guide/install.md", "Install pydna")]
    result = ok(invoke(runner, "--dsn", dna_dsn, "recall", "half precision", "--scope", "docs",
                       "--kind", "Doc", "--kind", "Fact", *FAKE, "--json"))
    assert json.loads(result.stdout)["hits"][0]["name"] == "42"

    # The table output names the embedder and the hits.
    result = ok(invoke(runner, "--dsn", dna_dsn, "recall", "reciprocal rank fusion", "--scope", "docs", *FAKE))
    assert "fake" in result.stdout and "dna-fake-hash-v1" in result.stdout
    assert "fusion.md" in result.stdout and "degraded" not in result.stdout


def test_reindex_is_unchanged_and_embeds_nothing(runner, dna_dsn, corpus):
    docs, jsonl = corpus
    ok(_index(runner, dna_dsn, docs, jsonl))
    summary = json.loads(ok(_index(runner, dna_dsn, docs, jsonl, extra=("--batch-size", "2"))).stdout)
    assert (summary["inserted"], summary["updated"], summary["embedded"], summary["unchanged"]) == (0, 0, 0, 5)
    assert summary["embedded_texts"] == 0

    (docs / "notes.txt").write_text("Bitemporal memories: valid time versus transaction time.\n", encoding="utf-8")
    result = ok(invoke(runner, "--dsn", dna_dsn, "index", docs, "--scope", "docs", *FAKE))
    assert "updated 1" in result.stdout and "unchanged 2" in result.stdout
    assert "texts sent to the model: 1" in result.stdout


def test_recall_degraded_says_so(runner, dna_dsn, corpus, monkeypatch):
    docs, _ = corpus
    ok(_index(runner, dna_dsn, docs))
    from pydna.embeddings.fake import FakeEmbeddingProvider

    def broken(self, texts):
        raise RuntimeError("model went away")

    monkeypatch.setattr(FakeEmbeddingProvider, "embed", broken)
    result = ok(invoke(runner, "--dsn", dna_dsn, "recall", "rank fusion", "--scope", "docs", *FAKE, "--json"))
    answer = json.loads(result.stdout)
    assert answer["degraded"] is True
    assert answer["hits"][0]["name"] == "fusion.md"
    assert answer["hits"][0]["similarity"] is None
    assert "degraded: lexical only" in result.stderr
    result = ok(invoke(runner, "--dsn", dna_dsn, "recall", "rank fusion", "--scope", "docs", *FAKE))
    assert "degraded: lexical only" in result.stdout


def _count(dsn) -> int:
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT count(*) FROM dna.dna_search_docs_384").fetchone()[0]


def test_bad_jsonl_line_fails_with_line_number(runner, dna_dsn, corpus, tmp_path):
    docs, _ = corpus
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"name": "a", "body": "fine"}\n\n{"name": "b", "body": broken}\n', encoding="utf-8")
    result = invoke(runner, "--dsn", dna_dsn, "index", docs, bad, "--scope", "docs", *FAKE)
    assert result.exit_code != 0
    assert "bad.jsonl, line 3" in result.stderr and "not valid JSON" in result.stderr
    assert "Traceback" not in result.output
    assert _count(dna_dsn) == 0  # nothing written, not even the valid inputs before it

    missing_name = tmp_path / "noname.jsonl"
    missing_name.write_text('{"body": "no name here"}\n', encoding="utf-8")
    result = invoke(runner, "--dsn", dna_dsn, "index", missing_name, "--scope", "docs", *FAKE)
    assert result.exit_code != 0 and "line 1" in result.stderr and "name" in result.stderr


def test_unknown_path_is_an_error(runner, dna_dsn, tmp_path):
    result = invoke(runner, "--dsn", dna_dsn, "index", tmp_path / "nope", "--scope", "docs", *FAKE)
    assert result.exit_code != 0
    assert "no such file or directory" in result.stderr
    assert "nope" in result.stderr


def test_empty_document_named_is_an_error(runner, dna_dsn, corpus):
    docs, _ = corpus
    (docs / "empty.md").write_text("  \n\n", encoding="utf-8")
    result = invoke(runner, "--dsn", dna_dsn, "index", docs / "empty.md", "--scope", "docs", *FAKE)
    assert result.exit_code != 0
    assert "empty.md" in result.stderr and "empty document" in result.stderr
    assert _count(dna_dsn) == 0


def test_empty_file_found_in_a_directory_is_skipped_with_a_warning(runner, dna_dsn, corpus):
    docs, _ = corpus
    files = 3  # fusion.md, guide/install.md, notes.txt (the walk ignores .rst and hidden folders)
    (docs / "empty.md").write_text("  \n\n", encoding="utf-8")
    result = invoke(runner, "--dsn", dna_dsn, "index", docs, "--scope", "docs", *FAKE, "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["skipped_empty"] == [str(docs / "empty.md")] and summary["files"] == files
    assert "skipped" in result.stderr and "empty.md" in result.stderr
    assert _count(dna_dsn) == files


def test_directory_of_only_empty_files_is_an_error(runner, dna_dsn, tmp_path):
    folder = tmp_path / "blank"
    folder.mkdir()
    (folder / "a.md").write_text("\n", encoding="utf-8")
    result = invoke(runner, "--dsn", dna_dsn, "index", folder, "--scope", "docs", *FAKE)
    assert result.exit_code != 0 and "every file in this directory is empty" in result.stderr
    assert _count(dna_dsn) == 0


def test_duplicate_names_are_an_error(runner, dna_dsn, tmp_path):
    jsonl = tmp_path / "dup.jsonl"
    jsonl.write_text('{"name": "a", "body": "one"}\n{"name": "a", "body": "two"}\n', encoding="utf-8")
    result = invoke(runner, "--dsn", dna_dsn, "index", jsonl, "--scope", "docs", *FAKE)
    assert result.exit_code != 0 and "duplicate" in result.stderr and "dup.jsonl, line 2" in result.stderr


def test_server_error_is_one_line_without_traceback(runner, dna_dsn, tmp_path):
    doc = tmp_path / "a.md"
    doc.write_text("# A\n\nsome text\n", encoding="utf-8")
    result = invoke(runner, "--dsn", dna_dsn, "index", doc, "--scope", "docs", "--tenant", "Bad Tenant!", *FAKE)
    assert result.exit_code == 1
    assert "invalid tenant" in result.stderr and "SQLSTATE 22023" in result.stderr
    assert "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1


def test_recall_on_unmigrated_database(runner, empty_dsn):
    result = invoke(runner, "--dsn", empty_dsn, "recall", "anything", "--scope", "docs", *FAKE)
    assert result.exit_code == 1
    assert "dna db upgrade" in result.stderr
    assert "Traceback" not in result.output
    result = invoke(runner, "recall", "anything", "--scope", "docs", *FAKE, "--json",
                    env={"DNA_DATABASE_URL": empty_dsn})
    assert result.exit_code == 1 and "dna db upgrade" in result.stderr and result.stdout.strip() == ""


def test_unreachable_server_is_one_line(runner):
    result = invoke(runner, "--dsn", "postgresql://nobody@127.0.0.1:1/nowhere?connect_timeout=2",
                    "recall", "x", "--scope", "docs", *FAKE)
    assert result.exit_code == 1
    assert result.stderr.startswith("error:") and len(result.stderr.strip().splitlines()) == 1
    assert "dna db up" in result.stderr


# -- helpers -----------------------------------------------------------------------------------


@pytest.mark.parametrize("text, title", [
    ("# Title\n\nbody", "Title"),
    ("intro\n\n## Second level ##\n", "Second level"),
    ("```\n# not a heading\n```\n# Real\n", "Real"),
    ("---\ntitle: x\n# no\n---\nSetext\n===\n", "Setext"),
    ("no heading at all\n", None),
])
def test_markdown_title(text, title):
    assert markdown_title(text) == title


def test_markdown_snippet():
    assert markdown_snippet("---\ntitle: x\n---\n# Title\n\nFirst   line\nsecond\n") == "First line second"
    assert markdown_snippet("# Only a title\n") is None
    assert markdown_snippet("no heading\n" + "word " * 100, length=20) == "no heading word word"


# -- dna memory mounting -------------------------------------------------------------------------

_MOUNT = textwrap.dedent("""
    import sys, types
    import typer
    from typer.testing import CliRunner
    MODE = sys.argv[1]
    if MODE == "present":
        m = types.ModuleType("pydna.cli_memory")
        m.memory_app = typer.Typer()

        @m.memory_app.command("list")
        def _list(ctx: typer.Context):
            from pydna.cli import cli_state         # helpers of pydna.cli are importable from it
            print("memory list ran, dsn", cli_state(ctx).dsn)

        @m.memory_app.command("other")
        def _other():
            pass
        sys.modules["pydna.cli_memory"] = m
    elif MODE == "broken":
        class Broken:
            def find_spec(self, name, path=None, target=None):
                if name == "pydna.cli_memory":
                    raise ImportError("cannot import name 'remember' from 'pydna.memory'")
        sys.meta_path.insert(0, Broken())
    from pydna.cli import app
    r = CliRunner().invoke(app, ["--dsn", "postgresql:///x", "memory", "list"])
    print(r.stdout + r.stderr)
    sys.exit(r.exit_code)
""")


@pytest.mark.parametrize("mode, code, expect", [
    ("present", 0, "memory list ran, dsn postgresql:///x"),
    ("broken", 1, "`dna memory` is unavailable"),
])
def test_memory_app_is_mounted_when_present(mode, code, expect):
    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(repo), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", _MOUNT, mode], capture_output=True, text=True, env=env,
                          cwd=repo, timeout=120)
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert expect in proc.stdout


@pytest.mark.parametrize("command", [["memory", "remember", "x", "--scope", "t"], ["memory", "recall", "x"],
                                     ["recall", "x", "--scope", "t"]])
def test_unknown_embedder_is_one_line_error(runner, dna_dsn, command):
    result = invoke(runner, "--dsn", dna_dsn, *command, "--embedder", "openai")
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    assert "openai" in result.output


# -- dna index: batches, progress, compaction ----------------------------------------------------


class _Terminal:
    """Make the stderr console a terminal, so rich draws the progress bar (CliRunner's streams are not)."""

    def __init__(self, monkeypatch):
        from rich.console import Console

        import pydna.cli_index as cli_index

        monkeypatch.setattr(cli_index, "stderr", lambda: Console(stderr=True, force_terminal=True, force_interactive=True,
                                                           width=100, highlight=False))


def test_index_progress_bar_goes_to_stderr_and_leaves_stdout_alone(runner, dna_dsn, corpus, monkeypatch):
    docs, jsonl = corpus
    _Terminal(monkeypatch)
    result = ok(_index(runner, dna_dsn, docs, jsonl, extra=("--batch-size", "2")))
    summary = json.loads(result.stdout)  # stdout is the JSON document and nothing else
    assert summary["records"] == 5 and summary["inserted"] == 5
    assert "indexing" in result.stderr and "5/5" in result.stderr  # documents indexed / total
    plain = ok(invoke(runner, "--dsn", dna_dsn, "index", docs, jsonl, "--scope", "docs", *FAKE))
    lines = plain.stdout.splitlines()
    assert lines[0].startswith("embedder: ")
    assert lines[1].startswith("nothing changed: 5 documents unchanged (3 files, 2 JSONL records) in scope docs")
    assert lines[2].strip().startswith("inserted 0 · updated 0 · vector added to unchanged text 0 · unchanged 5")
    assert "\x1b" not in plain.stdout and "indexing" not in plain.stdout


def test_index_compacts_the_scope_unless_no_compact(runner, dna_dsn, corpus):
    docs, _ = corpus
    summary = json.loads(ok(_index(runner, dna_dsn, docs, extra=("--no-compact",))).stdout)
    assert summary["compaction"] is None
    with psycopg.connect(dna_dsn) as conn:  # the memtable holds the three documents
        assert conn.execute("SELECT count(*) FROM dna.dna_bm25_docs WHERE scope = 'docs' AND seg_id IS NULL"
                            ).fetchone()[0] == 3
    (docs / "more.md").write_text("# More\n\nA fourth document about segments.\n", encoding="utf-8")
    summary = json.loads(ok(_index(runner, dna_dsn, docs)).stdout)
    [part] = summary["compaction"]["partitions"]
    assert (part["scope"], part["status"], part["sealed_documents"]) == ("docs", "ok", 4)
    with psycopg.connect(dna_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM dna.dna_bm25_docs WHERE scope = 'docs' AND seg_id IS NULL"
                            ).fetchone()[0] == 0
    plain = ok(invoke(runner, "--dsn", dna_dsn, "index", docs, "--scope", "docs", *FAKE))
    assert "BM25 compacted: scope docs · dna-fake-hash-v1 · tenant '': sealed 0 documents" in plain.stdout


def test_index_rejects_a_bad_batch_size(runner, dna_dsn, corpus):
    docs, _ = corpus
    result = invoke(runner, "--dsn", dna_dsn, "index", docs, "--scope", "docs", "--batch-size", "0", *FAKE)
    assert result.exit_code == 2 and "batch-size" in result.stderr
    assert _count(dna_dsn) == 0


# -- dna db compact / dna db vector-index (operator commands) -------------------------------------


def test_db_compact(runner, dna_dsn, corpus):
    docs, jsonl = corpus
    ok(_index(runner, dna_dsn, docs, jsonl, extra=("--no-compact",)))
    before = json.loads(ok(invoke(runner, "--dsn", dna_dsn, "recall", "rank fusion lanes", "--scope", "docs",
                                  *FAKE, "--json")).stdout)
    report = json.loads(ok(invoke(runner, "--dsn", dna_dsn, "db", "compact", "--scope", "docs", "--json")).stdout)
    assert [(p["scope"], p["status"], p["sealed_documents"]) for p in report["partitions"]] == [("docs", "ok", 5)]
    after = json.loads(ok(invoke(runner, "--dsn", dna_dsn, "recall", "rank fusion lanes", "--scope", "docs",
                                 *FAKE, "--json")).stdout)
    assert after == before  # compaction changes no answer
    again = ok(invoke(runner, "--dsn", dna_dsn, "db", "compact", "--full"))  # every scope; idempotent
    assert "BM25 compacted: scope docs · dna-fake-hash-v1 · tenant '': sealed 0 documents" in again.stdout


def test_db_compact_on_unmigrated_database(runner, empty_dsn):
    result = invoke(runner, "--dsn", empty_dsn, "db", "compact")
    assert result.exit_code == 1 and "dna db upgrade" in result.stderr and "Traceback" not in result.output


def _indexdef(dsn, width):
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT indexdef FROM pg_indexes WHERE schemaname = 'dna' AND indexname = %s",
                           (f"dna_search_docs_{width}_embedding_hnsw",)).fetchone()
    return row[0] if row else None


@pytest.mark.parametrize("width, opclass", [(384, "vector_cosine_ops"), (3072, "halfvec_cosine_ops")])
def test_db_vector_index_drop_and_build(runner, dna_dsn, dna_template, pg_server, corpus, width, opclass):
    docs, _ = corpus
    ok(_index(runner, dna_dsn, docs))
    migrated = _indexdef(pg_server.dsn(dna_template), width)  # as revision 0001 created it
    assert migrated is not None and opclass in migrated and _indexdef(dna_dsn, width) == migrated
    before = json.loads(ok(invoke(runner, "--dsn", dna_dsn, "recall", "rank fusion lanes", "--scope", "docs",
                                  *FAKE, "--json")).stdout)

    result = ok(invoke(runner, "--dsn", dna_dsn, "db", "vector-index", "drop", "--width", width))
    assert f"dropped dna.dna_search_docs_{width}_embedding_hnsw" in result.stdout
    assert "exact scans" in result.stdout
    assert _indexdef(dna_dsn, width) is None
    result = ok(invoke(runner, "--dsn", dna_dsn, "db", "vector-index", "drop", "--width", width))
    assert "does not exist (nothing to drop)" in result.stdout
    # The dense lane answers without the index (exact scan).
    dropped = json.loads(ok(invoke(runner, "--dsn", dna_dsn, "recall", "rank fusion lanes", "--scope", "docs",
                                   *FAKE, "--json")).stdout)
    assert dropped == before and not dropped["degraded"]

    result = ok(invoke(runner, "--dsn", dna_dsn, "db", "vector-index", "build", "--width", width,
                       "--maintenance-work-mem", "256MB", "--workers", "0", "--json"))
    built = json.loads(result.stdout)
    assert built["changed"] is True and built["state"]["valid"] is True
    assert built["settings"] == {"maintenance_work_mem": "256MB", "max_parallel_maintenance_workers": "0"}
    assert _indexdef(dna_dsn, width) == migrated  # exactly the migration's index
    result = ok(invoke(runner, "--dsn", dna_dsn, "db", "vector-index", "build", "--width", width))
    assert "already exists (nothing built)" in result.stdout
    with psycopg.connect(dna_dsn) as conn:  # SET LOCAL: the session's settings are untouched
        assert conn.execute("SHOW max_parallel_maintenance_workers").fetchone()[0] == "2"


def test_db_vector_index_build_text_output(runner, dna_dsn):
    ok(invoke(runner, "--dsn", dna_dsn, "db", "vector-index", "drop"))
    result = ok(invoke(runner, "--dsn", dna_dsn, "db", "vector-index", "build"))
    assert "built dna.dna_search_docs_384_embedding_hnsw" in result.stdout
    assert "maintenance_work_mem = 1GB, max_parallel_maintenance_workers = 1" in result.stdout


@pytest.mark.parametrize("args, message", [
    (("build", "--width", "999"), "no search table for width 999 (widths with a table: 384, 768, 1024, 1536, 3072)"),
    (("drop", "--width", "999"), "no search table for width 999"),
    (("build", "--maintenance-work-mem", "lots"), "SQLSTATE 22023"),
])
def test_db_vector_index_bad_input_is_one_line(runner, dna_dsn, args, message):
    ok(invoke(runner, "--dsn", dna_dsn, "db", "vector-index", "drop"))
    result = invoke(runner, "--dsn", dna_dsn, "db", "vector-index", *args)
    assert result.exit_code == 1, result.output
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output
    assert _indexdef(dna_dsn, 384) is None  # nothing was built
