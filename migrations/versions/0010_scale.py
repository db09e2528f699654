"""Scale: an LSM of impact-ordered BM25 postings, statement-level triggers, set-based indexing.

Revision ID: 0010_scale
Revises: 0009_tenancy
Create Date: 2026-12-01

Creates (schema ``dna``) the lexical index of ``sql/bm25_write.sql``:

- ``dna_bm25_segments`` (one row per sealed segment of a partition: n_docs, total_len, the average
  length, k1 and b its impacts were computed with, base_doc_id) and ``dna_bm25_chunks`` (per
  lexeme, Kind and segment, the postings in impact order as packed ``int8[]`` chunks of 256…8192);
- ``dna_bm25_docs`` (where each live document is: segment or memtable; Kind; length) and
  ``dna_bm25_forward`` (its term vector, jsonb lexeme → tf, for the exact rerank);
- ``dna_bm25_tombstones`` + ``dna_bm25_tombstone_terms`` (sealed documents removed since the last
  merge, so N and df stay exact);
- ``dna_index_staging`` (UNLOGGED; a transaction cannot commit with rows of its own left in it):
  the COPY path of ``dna.index_staged``;

keeps ``dna_bm25_postings`` as the memtable, drops ``dna_bm25_stats`` (N and avglen are sums no
writer updates in place), replaces the row triggers of every ``dna_search_docs_<N>`` by statement
triggers with transition tables (``dna.bm25_sync``), drops the unused GIN index on ``tsv`` (no
query uses ``@@``), adds ``exact`` to ``dna.search_hit`` and ``dna.bm25_hit``, and runs
``sql/bm25.sql``, ``sql/bm25_write.sql``, ``sql/documents.sql``, ``sql/search.sql`` and
``sql/tenancy.sql``. Existing documents are moved into the new layout (forward rows from the stored
tsvectors; the old postings become the memtable, then one merged segment per partition), so the
database answers as before. Row-level security covers the new tables, and every role that
``dna.grant_app_role`` had granted gets the new tables too.

Downgrade restores the row-per-posting table with its statistics from the forward rows, the row
triggers, the GIN index and the functions as released with 0001_foundation and 0009_tenancy.
"""
import sys
from pathlib import Path

from alembic import op
from sqlalchemy import text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # migrations/ holds sql_files
from sql_files import drop_plane_functions, read_sql  # noqa: E402

revision = "0010_scale"
down_revision = "0009_tenancy"
branch_labels = None
depends_on = None

WIDTHS = (384, 768, 1024, 1536, 3072)
PLANE_FILES = ("bm25.sql", "bm25_write.sql", "documents.sql", "search.sql", "tenancy.sql")

TABLES = r"""
CREATE SEQUENCE dna.dna_bm25_seg_id_seq AS integer;
COMMENT ON SEQUENCE dna.dna_bm25_seg_id_seq IS 'seg_id of BM25 segments (one sequence for every partition).';

CREATE TABLE dna.dna_bm25_segments (
    scope       text NOT NULL,
    model_id    text NOT NULL,
    tenant      text NOT NULL,
    seg_id      integer NOT NULL,
    level       integer NOT NULL,
    n_docs      bigint NOT NULL,
    total_len   bigint NOT NULL,
    avgdl_ref   double precision NOT NULL,
    k1          double precision NOT NULL,
    b           double precision NOT NULL,
    base_doc_id bigint NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT dna_bm25_segments_pkey PRIMARY KEY (scope, model_id, tenant, seg_id)
);
COMMENT ON TABLE dna.dna_bm25_segments IS 'BM25 segments: the sealed documents of a partition (scope, model_id, tenant), n_docs and total_len at sealing (tombstones subtract later), the average length, k1 and b of their impacts, the doc_id their packed postings are relative to. Written by dna.bm25_compact and bulk statements only.';

CREATE TABLE dna.dna_bm25_chunks (
    scope    text NOT NULL,
    model_id text NOT NULL,
    tenant   text NOT NULL,
    lexeme   text COLLATE "C" NOT NULL,
    kind     text NOT NULL,
    seg_id   integer NOT NULL,
    chunk    integer NOT NULL,
    n        integer NOT NULL,
    max_imp  real NOT NULL,
    max_tf   integer NOT NULL,
    min_len  integer NOT NULL,
    postings bigint[] NOT NULL,
    CONSTRAINT dna_bm25_chunks_pkey PRIMARY KEY (scope, model_id, tenant, lexeme, kind, seg_id, chunk)
        INCLUDE (n, max_imp, max_tf, min_len)
);
CREATE INDEX dna_bm25_chunks_seg ON dna.dna_bm25_chunks (scope, model_id, tenant, seg_id);
COMMENT ON TABLE dna.dna_bm25_chunks IS 'BM25 inverted lists of sealed segments: per (lexeme, kind, segment) the postings sorted by impact (descending), chunk c holding impact ranks 256(2^c - 1) + 1 .. 256(2^(c+1) - 1) up to 8192 per chunk. postings: (doc_id - base_doc_id) | tf << 33 | len << 42. max_imp: best impact at the segment''s avgdl_ref, k1, b; max_tf/min_len bound any k1, b.';

CREATE TABLE dna.dna_bm25_docs (
    scope    text NOT NULL,
    model_id text NOT NULL,
    tenant   text NOT NULL,
    doc_id   bigint NOT NULL,
    seg_id   integer,
    kind     text NOT NULL,
    doc_len  integer NOT NULL,
    CONSTRAINT dna_bm25_docs_pkey PRIMARY KEY (scope, model_id, tenant, doc_id)
);
CREATE INDEX dna_bm25_docs_seg ON dna.dna_bm25_docs (scope, model_id, tenant, seg_id) INCLUDE (doc_len);
COMMENT ON TABLE dna.dna_bm25_docs IS 'Every live document of the BM25 index: its segment (NULL = memtable), Kind and length (token positions).';

CREATE TABLE dna.dna_bm25_forward (
    scope    text NOT NULL,
    model_id text NOT NULL,
    tenant   text NOT NULL,
    doc_id   bigint NOT NULL,
    kind     text NOT NULL,
    doc_len  integer NOT NULL,
    terms    jsonb NOT NULL,
    CONSTRAINT dna_bm25_forward_pkey PRIMARY KEY (scope, doc_id)
);
COMMENT ON TABLE dna.dna_bm25_forward IS 'Term vector of every live document of the BM25 index (Kind, length, terms = jsonb lexeme → tf (as text), from the stored tsvector): the exact rerank of the lexical lane and the tombstones of a removal read it.';

CREATE TABLE dna.dna_bm25_tombstones (
    scope    text NOT NULL,
    model_id text NOT NULL,
    tenant   text NOT NULL,
    seg_id   integer NOT NULL,
    doc_id   bigint NOT NULL,
    kind     text NOT NULL,
    doc_len  integer NOT NULL,
    CONSTRAINT dna_bm25_tombstones_pkey PRIMARY KEY (scope, model_id, tenant, seg_id, doc_id)
);
COMMENT ON TABLE dna.dna_bm25_tombstones IS 'Sealed documents removed or changed since their segment was last merged: their postings in seg_id no longer count (N, total length, scores).';

CREATE TABLE dna.dna_bm25_tombstone_terms (
    scope    text NOT NULL,
    model_id text NOT NULL,
    tenant   text NOT NULL,
    lexeme   text NOT NULL,
    doc_id   bigint NOT NULL,
    seg_id   integer NOT NULL,
    CONSTRAINT dna_bm25_tombstone_terms_pkey PRIMARY KEY (scope, model_id, tenant, lexeme, doc_id, seg_id)
);
COMMENT ON TABLE dna.dna_bm25_tombstone_terms IS 'The lexemes of each tombstone, so df stays exact until the merge.';

COMMENT ON TABLE dna.dna_bm25_postings IS 'BM25 memtable: one row per unsealed document and lexeme (tf = positions, doc_len = the document''s token count, kind = its Kind). Read whole by every query; dna.bm25_compact seals it into a segment.';

CREATE UNLOGGED TABLE dna.dna_index_staging (
    batch     uuid NOT NULL,
    ord       integer NOT NULL,
    kind      text NOT NULL,
    name      text NOT NULL,
    title     text,
    body      text,
    snippet   text,
    embedding vector,
    owner     text NOT NULL DEFAULT current_user
);
CREATE INDEX dna_index_staging_batch ON dna.dna_index_staging (batch, ord);
COMMENT ON TABLE dna.dna_index_staging IS 'COPY target of dna.index_staged: documents staged under a batch uuid and consumed in the same transaction, which cannot commit while any of its staged rows remain (constraint trigger dna_index_staging_consumed), so no other session ever sees them. Unlogged (transient). No row-level security: PostgreSQL refuses COPY FROM into a table that has it.';

ALTER TYPE dna.search_hit ADD ATTRIBUTE exact boolean;
COMMENT ON TYPE dna.search_hit IS 'One hit of dna.search: score = RRF; similarity = cosine in [-1,1] (NULL if not in the dense lane); lexical_score (NULL if not in the lexical lane); 1-based lane ranks; degraded = no query embedding; personal = the hit is in a personal partition (tenant personal:<oid>); exact = the lexical lane''s list is provably the exhaustive BM25 ranking.';
ALTER TYPE dna.bm25_hit ADD ATTRIBUTE exact boolean;
COMMENT ON TYPE dna.bm25_hit IS 'One hit of dna.bm25: the document key, its BM25 score, doc_id, and exact (the list is provably the exhaustive BM25 ranking).';
"""


def _old_triggers(dims: int) -> str:
    table = f"dna.dna_search_docs_{dims}"
    return f"""
DROP TRIGGER dna_search_docs_{dims}_bm25_ins ON {table};
DROP TRIGGER dna_search_docs_{dims}_bm25_del ON {table};
DROP TRIGGER dna_search_docs_{dims}_bm25_upd ON {table};
DROP TRIGGER dna_search_docs_{dims}_bm25_truncate ON {table};
DROP INDEX dna.dna_search_docs_{dims}_tsv_gin;
"""


def _new_triggers(dims: int) -> str:
    table = f"dna.dna_search_docs_{dims}"
    return f"""
CREATE TRIGGER dna_search_docs_{dims}_bm25_ins AFTER INSERT ON {table}
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION dna.bm25_sync();
CREATE TRIGGER dna_search_docs_{dims}_bm25_upd AFTER UPDATE ON {table}
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION dna.bm25_sync();
CREATE TRIGGER dna_search_docs_{dims}_bm25_del AFTER DELETE ON {table}
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION dna.bm25_sync();
CREATE TRIGGER dna_search_docs_{dims}_bm25_truncate AFTER TRUNCATE ON {table}
    FOR EACH STATEMENT EXECUTE FUNCTION dna.bm25_truncate('{dims}');
"""


def _backfill(dims: int) -> str:
    # The old postings are exactly the memtable of every stored document; forward and docs rows
    # come from the same tsvectors.
    table = f"dna.dna_search_docs_{dims}"
    return f"""
INSERT INTO dna.dna_bm25_forward (scope, model_id, tenant, doc_id, kind, doc_len, terms)
SELECT t.scope, t.model_id, t.tenant, t.doc_id, t.kind, v.len, v.terms
FROM {table} AS t,
     LATERAL (SELECT coalesce(jsonb_object(array_agg(u.lexeme), array_agg(coalesce(cardinality(u.positions), 1)::text)),
                              '{{}}') AS terms,
                     coalesce(sum(coalesce(cardinality(u.positions), 1)), 0)::integer AS len
              FROM unnest(t.tsv) AS u) AS v;
INSERT INTO dna.dna_bm25_docs (scope, model_id, tenant, doc_id, seg_id, kind, doc_len)
SELECT t.scope, t.model_id, t.tenant, t.doc_id, NULL, t.kind, dna.bm25_doc_length(t.tsv)
FROM {table} AS t;
"""


REGRANT = r"""
DO $$
DECLARE
    r text;
BEGIN
    -- Roles dna.grant_app_role granted before this revision get the new tables as well.
    FOR r IN SELECT DISTINCT a.grantee::regrole::text
             FROM pg_catalog.pg_class AS c, aclexplode(c.relacl) AS a
             WHERE c.oid = 'dna.dna_search_docs_384'::regclass AND a.privilege_type = 'INSERT'
               AND a.grantee <> c.relowner AND a.grantee <> 0
             ORDER BY 1 LOOP
        PERFORM dna.grant_app_role(r);
    END LOOP;
END
$$;
"""

PROTECT = r"""
DO $$
DECLARE
    t regclass;
BEGIN
    FOR t IN SELECT dna.protected_tables() LOOP
        PERFORM dna.protect_table(t);
    END LOOP;
END
$$;
"""


def _text(sql: str):
    return text(sql.replace(":", "\\:"))  # no bind parameters: x::int, 'personal:<oid>'


STAGING_TRIGGER = """
CREATE CONSTRAINT TRIGGER dna_index_staging_consumed AFTER INSERT ON dna.dna_index_staging
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION dna.index_staging_consumed();
"""


def upgrade() -> None:
    op.execute(_text(TABLES))
    for dims in WIDTHS:
        op.execute(_old_triggers(dims))
    op.execute("DROP FUNCTION dna.bm25_maintain()")
    for name in PLANE_FILES:
        op.execute(read_sql(name, frozen_in=revision))  # as released (later revisions replace them)
    for dims in WIDTHS:
        op.execute(_text(_backfill(dims)))
    op.execute("DROP TABLE dna.dna_bm25_stats")
    # Every partition's memtable (all its documents) becomes one segment.
    op.execute("SELECT dna.bm25_compact(full_merge => true)")
    for dims in WIDTHS:
        op.execute(_new_triggers(dims))
    op.execute(STAGING_TRIGGER)
    op.execute(PROTECT)
    op.execute(REGRANT)


DOWNGRADE_TABLES = r"""
CREATE TABLE dna.dna_bm25_stats (
    scope     text NOT NULL,
    model_id  text NOT NULL,
    tenant    text NOT NULL,
    n_docs    bigint NOT NULL,
    total_len bigint NOT NULL,
    CONSTRAINT dna_bm25_stats_pkey PRIMARY KEY (scope, model_id, tenant)
);
COMMENT ON TABLE dna.dna_bm25_stats IS 'BM25 partition statistics: document count and summed document length per (scope, model_id, tenant). Maintained by dna.bm25_maintain().';
TRUNCATE dna.dna_bm25_postings;
INSERT INTO dna.dna_bm25_postings (scope, model_id, tenant, lexeme, doc_id, tf, doc_len, kind)
SELECT f.scope, f.model_id, f.tenant, e.lexeme, f.doc_id, u.tf, f.doc_len, f.kind
FROM dna.dna_bm25_forward AS f, jsonb_each_text(f.terms) AS e (lexeme, v), LATERAL (SELECT e.v::integer AS tf) AS u;
INSERT INTO dna.dna_bm25_stats (scope, model_id, tenant, n_docs, total_len)
SELECT d.scope, d.model_id, d.tenant, count(*), sum(d.doc_len) FROM dna.dna_bm25_docs AS d GROUP BY 1, 2, 3;
COMMENT ON TABLE dna.dna_bm25_postings IS 'BM25 postings: one row per search document and lexeme of its tsvector (tf = positions, doc_len = the document''s token count, kind = the document''s Kind, so a Kind filter applies before the lexical lane''s cut). Maintained by dna.bm25_maintain(); read by dna.bm25.';
"""


def _drop_statement_triggers(dims: int) -> str:
    table = f"dna.dna_search_docs_{dims}"
    return f"""
DROP TRIGGER dna_search_docs_{dims}_bm25_ins ON {table};
DROP TRIGGER dna_search_docs_{dims}_bm25_upd ON {table};
DROP TRIGGER dna_search_docs_{dims}_bm25_del ON {table};
DROP TRIGGER dna_search_docs_{dims}_bm25_truncate ON {table};
"""


def _restore_row_triggers(dims: int) -> str:
    table = f"dna.dna_search_docs_{dims}"
    return f"""
CREATE INDEX dna_search_docs_{dims}_tsv_gin ON {table} USING gin (tsv);
CREATE TRIGGER dna_search_docs_{dims}_bm25_ins AFTER INSERT ON {table}
    FOR EACH ROW EXECUTE FUNCTION dna.bm25_maintain();
CREATE TRIGGER dna_search_docs_{dims}_bm25_del AFTER DELETE ON {table}
    FOR EACH ROW EXECUTE FUNCTION dna.bm25_maintain();
CREATE TRIGGER dna_search_docs_{dims}_bm25_upd AFTER UPDATE ON {table}
    FOR EACH ROW WHEN (OLD.tsv IS DISTINCT FROM NEW.tsv OR OLD.scope <> NEW.scope OR OLD.model_id <> NEW.model_id
                       OR OLD.tenant <> NEW.tenant OR OLD.doc_id <> NEW.doc_id OR OLD.kind <> NEW.kind)
    EXECUTE FUNCTION dna.bm25_maintain();
CREATE TRIGGER dna_search_docs_{dims}_bm25_truncate AFTER TRUNCATE ON {table}
    FOR EACH STATEMENT EXECUTE FUNCTION dna.bm25_truncate('{dims}');
"""


def downgrade() -> None:
    op.execute(_text(DOWNGRADE_TABLES))
    op.execute("DROP TABLE dna.dna_index_staging")  # with its constraint trigger, before the functions go
    for dims in WIDTHS:
        op.execute(_drop_statement_triggers(dims))
    op.execute(drop_plane_functions(("bm25.sql", "bm25_write.sql", "documents.sql", "search.sql"), frozen_in=revision))
    op.execute(read_sql("bm25.sql", frozen_in="0001_foundation"))
    op.execute(read_sql("search.sql", frozen_in="0001_foundation"))
    op.execute(read_sql("tenancy.sql", frozen_in="0009_tenancy"))
    for dims in WIDTHS:
        op.execute(_restore_row_triggers(dims))
    op.execute(_text("""
DROP TABLE dna.dna_bm25_tombstone_terms, dna.dna_bm25_tombstones, dna.dna_bm25_forward,
           dna.dna_bm25_docs, dna.dna_bm25_chunks, dna.dna_bm25_segments;
DROP SEQUENCE dna.dna_bm25_seg_id_seq;
ALTER TYPE dna.search_hit DROP ATTRIBUTE exact;
ALTER TYPE dna.bm25_hit DROP ATTRIBUTE exact;
"""))
    op.execute(PROTECT)
