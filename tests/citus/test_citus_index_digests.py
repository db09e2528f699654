"""`dna index <folder>` against a real coordinator (DNA_TEST_CITUS_DSN; deselected without it): the CLI's
runner with --dsn to the coordinator, twice over the same folder and once after an edit
(tests/test_index_digests.py's tests, the SQL functions through plain SQL too). Before 0023 (topic
citus_index) the first run failed 42P18 ("could not determine data type of parameter $1") at
dna.record_source_digests' upsert into dna_document_sources: Citus sent the statement to the scope's node
with model_id, in the ON CONFLICT's WHERE, as a parameter of no type."""
from __future__ import annotations

import psycopg

from test_index_digests import (folder, splits,  # noqa: F401
                                test_an_unchanged_folder_is_not_split_again_and_an_edit_is_alone,
                                test_unchanged_sources_in_sql)


def test_a_digest_is_written_once_per_source_and_model(dna_dsn):
    """The upsert's WHERE (containment of the proposed {model_id: digest}) keeps the rows as one node does."""
    call = "SELECT dna.record_source_digests('dg', %s, ARRAY['Doc'], ARRAY['a.md'], ARRAY[''], ARRAY[%s], ARRAY[%s])"
    row = "SELECT source, digests FROM dna.dna_document_sources WHERE scope = 'dg' AND name = 'a.md'"
    with psycopg.connect(dna_dsn, autocommit=True) as conn:
        for model, source, digest, expected in [
                ("m1", "/a.md", "d1", ("/a.md", {"m1": "d1"})),
                ("m1", "/a.md", "d1", ("/a.md", {"m1": "d1"})),
                ("m2", "/a.md", "e1", ("/a.md", {"m1": "d1", "m2": "e1"})),
                ("m1", "/a.md", "d2", ("/a.md", {"m1": "d2", "m2": "e1"})),
                ("m2", "/b.md", "e1", ("/b.md", {"m2": "e1"}))]:
            conn.execute(call, (model, source, digest))
            assert conn.execute(row).fetchone() == expected
