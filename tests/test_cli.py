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
    (docs / "ignored.rst").write_text("not picked up by the directory walk\n", encoding="utf-8")
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
    # An unreachable DSN is not contacted either.
    ok(invoke(runner, "--dsn", "postgresql://nobody@127.0.0.1:1/nowhere", "db", "upgrade", "--sql"))


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
    assert set(answer) == {"query", "scope", "model_id", "degraded", "notices", "hits"}
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
