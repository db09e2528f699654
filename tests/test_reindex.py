"""dna reindex --model (issue 13): memories stored without vectors (or before switching embedder) are
listed by dna.reconcile(..., 'reembed', model_id) and embedded exactly once by the CLI and client."""
from __future__ import annotations

from psycopg.types.json import Jsonb
from typer.testing import CliRunner

from pydna.cli import app

FAKE = "dna-fake-hash-v1"


def _lacking(sql, model=FAKE):
    return sql.execute("SELECT dna.reconcile('team', 'reembed', %s)", (model,)).fetchone()[0]["count"]


def test_reindex_embeds_exactly_what_the_model_lacks(sql, dna_dsn, monkeypatch, tmp_path):
    monkeypatch.setenv("DNA_HOME", str(tmp_path / "home"))
    for i, text in enumerate(["the office is in lisbon", "deploys happen on fridays", "the cat is called miso"]):
        sql.execute("SELECT dna.remember('team', %s, name => %s)", (Jsonb({"summary": text}), f"m{i}"))   # lexical only
    sql.execute("SELECT dna.remember('team', %s, name => 'v', embedding => dna.fake_embed('vectored'), model_id => %s)",
                (Jsonb({"summary": "vectored"}), FAKE))
    assert _lacking(sql) == 3
    runner = CliRunner()
    result = runner.invoke(app, ["--dsn", dna_dsn, "reindex", "--model", FAKE, "--scope", "team", "--json"])
    assert result.exit_code == 0, result.output
    assert '"written": 3' in result.stdout
    assert _lacking(sql) == 0
    # The vectors written are the model's: the same as dna.fake_embed of the memory's text.
    same = sql.execute("SELECT bool_and(embedding = dna.fake_embed(body)) FROM dna.dna_search_docs_384 "
                       "WHERE scope = 'team' AND name LIKE 'm%%'").fetchone()[0]
    assert same is True
    again = runner.invoke(app, ["--dsn", dna_dsn, "reindex", "--model", FAKE, "--scope", "team"])
    assert again.exit_code == 0 and "0 of 0" in again.stdout
    unknown = runner.invoke(app, ["--dsn", dna_dsn, "reindex", "--model", "no-such-model", "--scope", "team"])
    assert unknown.exit_code != 0
