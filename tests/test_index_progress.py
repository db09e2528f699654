"""The indexing progress counts passages (issue 26 item 8): Client.index(on_passages=...) reports the
passages done as they are embedded, the first count after at most EMBED_CHUNK passages (one small first
batch, so a bar has a rate and an ETA from the start), and the counts add up to the passages written;
`dna index` draws passages, a rate and the time left on stderr."""
from __future__ import annotations

import json
import re

from typer.testing import CliRunner

import pydna
from pydna.client import EMBED_CHUNK
from pydna.embeddings import FakeEmbeddingProvider

LONG = "# Title\n\n" + "\n\n".join(f"## Part {i}\n\n" + f"Sentence {i} about caching views. " * 60 for i in range(8))


def test_on_passages_counts_every_passage_and_starts_small(dna_dsn):
    counts: list[int] = []
    written_before_first: list[int] = []
    with pydna.connect(dna_dsn, embedder=FakeEmbeddingProvider()) as client:
        def seen(n):
            if not counts:
                written_before_first.append(client.conn.execute(
                    "SELECT count(*) FROM dna.dna_search_docs_384 WHERE scope = 'progress'").fetchone()[0])
            counts.append(n)
        records = [{"kind": "Doc", "name": f"d{i}.md", "body": LONG} for i in range(12)]
        report = client.index("progress", records, on_passages=seen)
        again = []
        client.index("progress", records, on_passages=again.append)     # unchanged: counted as written
    assert report.passages > EMBED_CHUNK * 2
    assert sum(counts) == report.passages and sum(again) == report.passages
    assert 0 < counts[0] <= EMBED_CHUNK and written_before_first == [0]   # before the first batch is written
    assert max(counts) <= EMBED_CHUNK


def test_dna_index_draws_passages_a_rate_and_the_time_left(dna_dsn, tmp_path, monkeypatch):
    from rich.console import Console

    import pydna.cli_index as cli_index
    from pydna.cli import app

    monkeypatch.delenv("DNA_DATABASE_URL", raising=False)
    monkeypatch.setattr(cli_index, "stderr", lambda: Console(stderr=True, force_terminal=True, force_interactive=True,
                                                             width=140, highlight=False))
    (tmp_path / "long.md").write_text(LONG, encoding="utf-8")
    result = CliRunner().invoke(app, ["--dsn", dna_dsn, "index", str(tmp_path / "long.md"), "--scope", "bar",
                                      "--embedder", "fake", "--json"])
    assert result.exit_code == 0, result.output
    done = json.loads(result.stdout)["passages"]
    drawn = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", result.stderr)
    assert f"{done}/{done} passages · " in drawn and "/s" in drawn
