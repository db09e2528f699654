"""Re-indexing a folder that did not change (issue 26 item 8): each input's digest (text, title, format,
metadata, passages on/off, splitter) is recorded per model_id after it is written
(dna.record_source_digests), and the next `dna index` asks dna.unchanged_sources before it splits
anything: an unchanged file is not split, not sent, not written; an edited one is, alone. Through the
CLI's runner, with the splitter counted; and the SQL functions through plain SQL."""
from __future__ import annotations

import json
import os

import psycopg
import pytest
from typer.testing import CliRunner

from pydna.cli import app
from pydna.passages import PassageSplitter

FAKE = ["--embedder", "fake"]


@pytest.fixture
def splits(monkeypatch):
    seen: list[str] = []
    real = PassageSplitter.split

    def counted(self, text, fmt="text"):
        seen.append(text[:40])
        return real(self, text, fmt)
    monkeypatch.setattr(PassageSplitter, "split", counted)
    return seen


@pytest.fixture
def folder(tmp_path):
    d = tmp_path / "docs"
    d.mkdir()
    for i in range(5):
        (d / f"page{i}.md").write_text(f"# Page {i}\n\n" + f"Paragraph about topic {i} and caching. " * 80,
                                       encoding="utf-8")
    return d


def _index(dsn, folder, *extra):
    result = CliRunner().invoke(app, ["--dsn", dsn, "index", str(folder), "--scope", "digests", *FAKE, "--json", *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_an_unchanged_folder_is_not_split_again_and_an_edit_is_alone(dna_dsn, folder, splits, monkeypatch):
    monkeypatch.delenv("DNA_DATABASE_URL", raising=False)
    first = _index(dna_dsn, folder)
    assert first["inserted"] == 5 and len(splits) == 5
    splits.clear()
    again = _index(dna_dsn, folder)
    assert (again["inserted"], again["updated"], again["unchanged"], again["embedded_texts"]) == (0, 0, 5, 0)
    assert again["passages"] == first["passages"] and again["tables"] == first["tables"]
    assert splits == []                                                   # nothing was split
    page = folder / "page2.md"
    os.utime(page, (1, 1))                                                # touched: same bytes
    assert _index(dna_dsn, folder)["unchanged"] == 5 and splits == []
    page.write_text("# Page 2\n\nRewritten: the per-view cache stores a whole view.\n", encoding="utf-8")
    edited = _index(dna_dsn, folder)
    assert (edited["updated"], edited["unchanged"]) == (1, 4) and len(splits) == 1
    splits.clear()
    whole = _index(dna_dsn, folder, "--whole")                            # another way of cutting: sent again
    assert (whole["updated"], whole["unchanged"]) == (4, 1)               # the short page2 is one row either way
    with psycopg.connect(dna_dsn, autocommit=True) as conn:
        conn.execute("SELECT dna.delete_document('digests', 'Doc', 'page0.md')")
    back = _index(dna_dsn, folder, "--whole")                             # a deleted document is written again
    assert (back["inserted"], back["unchanged"]) == (1, 4)


def test_unchanged_sources_in_sql(sql):
    sql.execute("SELECT dna.index_document('dg', 'Doc', 'a.md', 'alpha', dna.fake_embed('alpha'), 'dna-fake-hash-v1')")
    assert sql.execute("SELECT dna.record_source_digests('dg', 'dna-fake-hash-v1', ARRAY['Doc', 'Doc'], "
                       "ARRAY['a.md', 'b.md'], ARRAY['', ''], ARRAY['/src/a.md', '/src/b.md'], ARRAY['d1', 'd2'])"
                       ).fetchone()[0] == 2
    ask = ("SELECT array_agg(array[ord, passages] ORDER BY ord) FROM dna.unchanged_sources('dg', %s, "
           "ARRAY['Doc', 'Doc', 'Doc'], ARRAY['a.md', 'a.md', 'b.md'], ARRAY['', '', ''], ARRAY['d1', 'other', 'd2'])")
    assert sql.execute(ask, ("dna-fake-hash-v1",)).fetchone()[0] == [[1, 1]]   # b.md has no document: not unchanged
    sql.execute("SELECT dna.register_model('another-model', 384)")
    assert sql.execute(ask, ("another-model",)).fetchone()[0] is None      # digests are per model_id
    assert sql.execute(ask, ("never-registered",)).fetchone()[0] is None
    # The same source keeps other models' digests; another source replaces them.
    sql.execute("SELECT dna.record_source_digests('dg', 'another-model', ARRAY['Doc'], ARRAY['a.md'], ARRAY[''], "
                "ARRAY['/src/a.md'], ARRAY['d9'])")
    assert sql.execute("SELECT digests FROM dna.dna_document_sources WHERE scope = 'dg' AND name = 'a.md'"
                       ).fetchone()[0] == {"dna-fake-hash-v1": "d1", "another-model": "d9"}
    sql.execute("SELECT dna.record_source_digests('dg', 'another-model', ARRAY['Doc'], ARRAY['a.md'], ARRAY[''], "
                "ARRAY['/moved/a.md'], ARRAY['d9'])")
    assert sql.execute("SELECT digests FROM dna.dna_document_sources WHERE scope = 'dg' AND name = 'a.md'"
                       ).fetchone()[0] == {"another-model": "d9"}
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="one length"):
        sql.execute("SELECT dna.unchanged_sources('dg', 'dna-fake-hash-v1', ARRAY['Doc'], ARRAY['a', 'b'], "
                    "ARRAY[''], ARRAY['d'])")
