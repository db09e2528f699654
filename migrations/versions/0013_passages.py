"""Passages: long documents indexed as passages tied to their parent.

Revision ID: 0013_passages
Revises: 0012_first_day
Create Date: 2026-12-01

Every ``dna_search_docs_<N>`` row becomes a passage of its document: new columns ``passage``
(0-based ordinal; a document indexed whole, and every memory, is its passage 0), ``heading``
(heading path, e.g. ``Install > From source``) and ``char_start``/``char_end`` (the passage's span
in the parent's text, in characters; NULL for a whole document). The unique key becomes
(scope, kind, name, tenant, model_id, passage). ``dna_index_staging`` gets the same columns, so the
COPY path carries passages. ``dna.search_hit`` gains passage, heading, char_start, char_end and
highlight. Re-runs ``sql/documents.sql`` (``dna.index_documents`` with passage arrays; a document
gets exactly the passages given; unchanged passage text keeps its vector), ``sql/search.sql``
(``dna.search`` fuses passages and answers one hit per document, its best passage, or every passage
with ``passages => true``) and ``sql/bm25.sql`` (a tenant document shadows each base passage once).

Existing rows become passage 0 of their documents: answers are unchanged (test_passages_migration).
BM25 counts passages: N, avglen and df are over rows, the unit both lanes rank.

Downgrade refuses (55000) while any document is stored as more than one passage (it would lose
them); otherwise it restores the key, the columns, the hit type and the functions as 0010_scale
released them.
"""
import sys
from pathlib import Path

from alembic import op
from sqlalchemy import text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # migrations/ holds sql_files
from sql_files import read_sql  # noqa: E402

revision = "0013_passages"
down_revision = "0012_first_day"
branch_labels = None
depends_on = None

WIDTHS = (384, 768, 1024, 1536, 3072)
PLANE_FILES = ("bm25.sql", "documents.sql", "search.sql")
# The texts this revision replaces, as the revision before it runs them.
PREVIOUS = {"bm25.sql": "0011_lane_speed", "documents.sql": "0010_scale", "search.sql": "0010_scale"}


def _text(sql: str):
    return text(sql.replace(":", "\\:"))  # no bind parameters


def _columns(dims: int) -> str:
    table = f"dna.dna_search_docs_{dims}"
    return f"""
ALTER TABLE {table}
    ADD COLUMN passage integer NOT NULL DEFAULT 0,
    ADD COLUMN heading text,
    ADD COLUMN char_start integer,
    ADD COLUMN char_end integer,
    ADD CONSTRAINT dna_search_docs_{dims}_passage_check CHECK (passage >= 0 AND passage < 100000),
    ADD CONSTRAINT dna_search_docs_{dims}_span_check
        CHECK ((char_start IS NULL) = (char_end IS NULL) AND (char_start IS NULL OR 0 <= char_start AND char_start <= char_end));
ALTER TABLE {table} DROP CONSTRAINT dna_search_docs_{dims}_key,
    ADD CONSTRAINT dna_search_docs_{dims}_key UNIQUE (scope, kind, name, tenant, model_id, passage);
COMMENT ON COLUMN {table}.passage IS 'Ordinal of this passage in its document (0-based; a document indexed whole, and every memory, is its passage 0).';
COMMENT ON COLUMN {table}.heading IS 'Heading path of the passage in its document (e.g. ''Install > From source''); NULL when none.';
COMMENT ON COLUMN {table}.char_start IS 'Start of the passage in the parent document''s text, in characters (0-based, inclusive); NULL for a whole document.';
COMMENT ON COLUMN {table}.char_end IS 'End of the passage in the parent document''s text, in characters (exclusive); NULL for a whole document.';
"""


def _drop_columns(dims: int) -> str:
    table = f"dna.dna_search_docs_{dims}"
    return f"""
ALTER TABLE {table} DROP CONSTRAINT dna_search_docs_{dims}_key,
    ADD CONSTRAINT dna_search_docs_{dims}_key UNIQUE (scope, kind, name, tenant, model_id);
ALTER TABLE {table} DROP COLUMN passage, DROP COLUMN heading, DROP COLUMN char_start, DROP COLUMN char_end;
"""


STAGING = """
ALTER TABLE dna.dna_index_staging
    ADD COLUMN passage integer, ADD COLUMN heading text, ADD COLUMN char_start integer, ADD COLUMN char_end integer;
"""

HIT = """
ALTER TYPE dna.search_hit ADD ATTRIBUTE passage integer, ADD ATTRIBUTE heading text,
    ADD ATTRIBUTE char_start integer, ADD ATTRIBUTE char_end integer, ADD ATTRIBUTE highlight text;
COMMENT ON TYPE dna.search_hit IS 'One hit of dna.search: score = RRF; similarity = cosine in [-1,1] (NULL if not in the dense lane); lexical_score (NULL if not in the lexical lane); 1-based lane ranks; degraded = no query embedding; personal = the hit is in a personal partition (tenant personal:<oid>); exact = the lexical lane''s list is provably the exhaustive BM25 ranking; passage, heading, char_start, char_end = the passage that answers (its ordinal, heading path, span in the parent''s text); highlight = that passage around the query''s lexemes, matches marked «like this» (« and », not Markdown''s ** that documents hold themselves).';
"""

DROP_HIT = """
ALTER TYPE dna.search_hit DROP ATTRIBUTE highlight, DROP ATTRIBUTE char_end, DROP ATTRIBUTE char_start,
    DROP ATTRIBUTE heading, DROP ATTRIBUTE passage;
COMMENT ON TYPE dna.search_hit IS 'One hit of dna.search: score = RRF; similarity = cosine in [-1,1] (NULL if not in the dense lane); lexical_score (NULL if not in the lexical lane); 1-based lane ranks; degraded = no query embedding; personal = the hit is in a personal partition (tenant personal:<oid>); exact = the lexical lane''s list is provably the exhaustive BM25 ranking.';
"""

# Functions whose signature or result this revision changed (the frozen texts re-create the rest).
DROP_NEW_FUNCTIONS = """
DROP FUNCTION dna.search(text, text, vector, text, integer, text[], text, text, integer, double precision[],
                         double precision, boolean, timestamptz, boolean, boolean);
DROP FUNCTION dna.index_staged(text, uuid, text, text, boolean);
DROP FUNCTION dna.index_documents(text, text[], text[], text[], vector[], text, text[], text, text[], boolean,
                                  integer[], text[], integer[], integer[]);
DROP FUNCTION dna.scope_kinds_text(text, text, regclass);
"""

REFUSE_LOSING_PASSAGES = """
DO $$
DECLARE
    w integer;
    n bigint;
    total bigint := 0;
BEGIN
    FOREACH w IN ARRAY ARRAY[384, 768, 1024, 1536, 3072] LOOP
        EXECUTE format('SELECT count(*) FROM dna.%I WHERE passage > 0', 'dna_search_docs_' || w) INTO n;
        total := total + n;
    END LOOP;
    IF total > 0 THEN
        RAISE EXCEPTION 'downgrade below 0013_passages would lose % passage rows', total
            USING ERRCODE = '55000',
                  HINT = 'Re-index those documents whole (dna.index_document) or delete them, then downgrade.';
    END IF;
END
$$;
"""


def upgrade() -> None:
    for dims in WIDTHS:
        op.execute(_text(_columns(dims)))
    op.execute(STAGING)
    op.execute(_text(HIT))
    for name in PLANE_FILES:
        op.execute(read_sql(name, frozen_in=revision))  # as released (0016 replaced them)


def downgrade() -> None:
    op.execute(_text(REFUSE_LOSING_PASSAGES))
    op.execute(DROP_NEW_FUNCTIONS)
    op.execute(_text(DROP_HIT))
    op.execute("ALTER TABLE dna.dna_index_staging DROP COLUMN passage, DROP COLUMN heading, "
               "DROP COLUMN char_start, DROP COLUMN char_end")
    for dims in WIDTHS:
        op.execute(_text(_drop_columns(dims)))
    for name in PLANE_FILES:
        op.execute(read_sql(name, frozen_in=PREVIOUS[name]))
