"""Foundation: schema dna, extensions, records, kinds, models, the width search tables, the search plane.

Revision ID: 0001_foundation
Revises:
Create Date: 2026-11-30

Creates (schema ``dna``): ``dna_instances`` (current state, bitemporal ``valid_at``),
``dna_versions`` (append-only history), ``dna_kinds`` (seeded with Engram, Research, Evidence),
``dna_models`` (model_id → width), ``dna_search_docs_{384,768,1024,1536,3072}`` with a GIN index on
the tsvector, HNSW cosine indexes (``halfvec`` expression index for 3072) and a ``valid_at`` column
(the world time of the memory behind a document, kept by the triggers of ``0002_memory``; two
indexes find the documents out of force at a given time), the BM25 lexical
index (``dna_bm25_postings``, ``dna_bm25_stats``, kept by triggers on every search table),
per-scope search settings (``dna_search_config``), and the functions of ``sql/bm25.sql``,
``sql/embedding.sql``, ``sql/fusion.sql``, ``sql/search.sql``.

Every PRIMARY KEY / UNIQUE / EXCLUDE includes ``scope`` (the Citus distribution column);
``dna_kinds`` and ``dna_models`` are small reference tables. Downgrade drops schema ``dna`` and
everything in it; the extensions stay (other schemas may use them).
"""
import sys
from pathlib import Path

from alembic import op

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # migrations/ holds sql_files
from sql_files import read_sql  # noqa: E402

revision = "0001_foundation"
down_revision = None
branch_labels = None
depends_on = None

WIDTHS = (384, 768, 1024, 1536, 3072)
HNSW_MAX_DIMS = 2000  # pgvector cannot index `vector` above 2000 dims; `halfvec` goes to 4000


def _extension(name: str) -> str:
    # IF NOT EXISTS still races when two installs run at once: the loser gets unique_violation.
    return f"""
DO $$
BEGIN
    CREATE EXTENSION IF NOT EXISTS {name};
EXCEPTION WHEN unique_violation OR duplicate_object THEN
    NULL;
END
$$;"""


def _search_table(dims: int) -> str:
    table = f"dna.dna_search_docs_{dims}"
    if dims <= HNSW_MAX_DIMS:
        hnsw = f"CREATE INDEX dna_search_docs_{dims}_embedding_hnsw ON {table} USING hnsw (embedding vector_cosine_ops);"
    else:
        hnsw = (f"CREATE INDEX dna_search_docs_{dims}_embedding_hnsw ON {table} "
                f"USING hnsw ((embedding::halfvec({dims})) halfvec_cosine_ops);")
    return f"""
CREATE TABLE {table} (
    scope      text NOT NULL,
    kind       text NOT NULL,
    name       text NOT NULL,
    tenant     text NOT NULL DEFAULT '',
    model_id   text NOT NULL REFERENCES dna.dna_models (model_id),
    text_hash  text NOT NULL,
    title      text,
    snippet    text,
    body       text NOT NULL DEFAULT '',
    doc_id     bigint NOT NULL DEFAULT nextval('dna.dna_search_doc_id_seq'),
    ts_config  regconfig NOT NULL DEFAULT 'english',
    tsv        tsvector GENERATED ALWAYS AS (to_tsvector(ts_config, coalesce(title, '') || ' ' || body)) STORED,
    embedding  vector({dims}),
    valid_at   tstzrange,  -- world time of the record behind a memory document (trigger-kept); NULL: always
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT dna_search_docs_{dims}_key UNIQUE (scope, kind, name, tenant, model_id),
    CONSTRAINT dna_search_docs_{dims}_doc_id_key UNIQUE (scope, doc_id)
);
CREATE INDEX dna_search_docs_{dims}_tsv_gin ON {table} USING gin (tsv);
{hnsw}
-- The documents dna.search leaves out at a valid time: a closed validity (forgotten; a partial
-- index, small next to the scope) or one that starts later (a range scan on lower(valid_at); not
-- partial, because the planner estimates that expression only from the statistics of a full index).
CREATE INDEX dna_search_docs_{dims}_valid_to ON {table} (scope, model_id) INCLUDE (valid_at, doc_id)
    WHERE valid_at IS NOT NULL AND NOT upper_inf(valid_at);
CREATE INDEX dna_search_docs_{dims}_valid_from ON {table} (scope, model_id, lower(valid_at)) INCLUDE (doc_id);
-- BM25 postings and statistics follow every change of the stored tsvector (sql/bm25.sql).
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
COMMENT ON TABLE {table} IS 'Search documents embedded at width {dims}; every read and write filters on model_id.';
"""


_BM25 = """
CREATE SEQUENCE dna.dna_search_doc_id_seq AS bigint;
COMMENT ON SEQUENCE dna.dna_search_doc_id_seq IS 'doc_id of every search table (one sequence: a doc_id names one row across widths).';

CREATE TABLE dna.dna_search_config (
    scope              text PRIMARY KEY,
    ts_config          regconfig NOT NULL DEFAULT 'english',
    bm25_k1            double precision CHECK (bm25_k1 >= 0 AND bm25_k1 <= 100),
    bm25_b             double precision CHECK (bm25_b >= 0 AND bm25_b <= 1),
    weights            double precision[] CHECK (cardinality(weights) = 2),
    rrf_k              double precision CHECK (rrf_k > 0),
    dense_candidates   integer CHECK (dense_candidates BETWEEN 1 AND 10000),
    lexical_candidates integer CHECK (lexical_candidates BETWEEN 1 AND 10000),
    updated_at         timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE dna.dna_search_config IS 'Per-scope search settings (dna.set_search_config): text-search configuration, BM25 k1/b, hybrid weights, rrf_k and per-lane candidate depths; NULL = built-in default.';

CREATE TABLE dna.dna_bm25_postings (
    scope    text NOT NULL,
    model_id text NOT NULL,
    tenant   text NOT NULL,
    lexeme   text NOT NULL,
    doc_id   bigint NOT NULL,
    tf       integer NOT NULL,
    doc_len  integer NOT NULL,
    kind     text NOT NULL,
    CONSTRAINT dna_bm25_postings_pkey PRIMARY KEY (scope, model_id, tenant, lexeme, doc_id) INCLUDE (tf, doc_len, kind)
);
COMMENT ON TABLE dna.dna_bm25_postings IS 'BM25 postings: one row per search document and lexeme of its tsvector (tf = positions, doc_len = the document''s token count, kind = the document''s Kind, so a Kind filter applies before the lexical lane''s cut). Maintained by dna.bm25_maintain(); read by dna.bm25.';

CREATE TABLE dna.dna_bm25_stats (
    scope     text NOT NULL,
    model_id  text NOT NULL,
    tenant    text NOT NULL,
    n_docs    bigint NOT NULL,
    total_len bigint NOT NULL,
    CONSTRAINT dna_bm25_stats_pkey PRIMARY KEY (scope, model_id, tenant)
);
COMMENT ON TABLE dna.dna_bm25_stats IS 'BM25 partition statistics: document count and summed document length per (scope, model_id, tenant). Maintained by dna.bm25_maintain().';

CREATE TYPE dna.bm25_hit AS (
    kind   text,
    name   text,
    tenant text,
    score  double precision,
    doc_id bigint
);
COMMENT ON TYPE dna.bm25_hit IS 'One hit of dna.bm25: the document key, its BM25 score and doc_id.';
"""


SCHEMA_COMMENT = ("pydna: hybrid search and agent memory inside PostgreSQL (the SQL package; "
                  "its README and docs/ travel with the pydna Python package)")


def upgrade() -> None:
    op.execute(_extension("vector"))
    op.execute(_extension("btree_gist"))
    op.execute("CREATE SCHEMA IF NOT EXISTS dna")
    # The text as 0012_first_day sets it (released with a placeholder URL; a comment, no behaviour).
    op.execute(f"COMMENT ON SCHEMA dna IS '{SCHEMA_COMMENT}'")
    op.execute("""
CREATE TABLE dna.dna_kinds (
    kind              text PRIMARY KEY,
    api_version       text NOT NULL DEFAULT 'dna/v1',
    traits            text[] NOT NULL DEFAULT '{}',
    version_retention integer CHECK (version_retention IS NULL OR version_retention >= 1),
    embed_fields      text[] NOT NULL DEFAULT '{title,summary,body}',
    description       text
);
COMMENT ON TABLE dna.dna_kinds IS 'Registry of Kinds and their traits (memory.recallable, record.invalidate-only), version retention (NULL = keep all) and embed fields.';
INSERT INTO dna.dna_kinds (kind, traits, version_retention, embed_fields, description) VALUES
  ('Engram',   '{memory.recallable,record.invalidate-only}', 3,    '{area,title,summary,body}', 'An episodic, semantic or procedural memory; retired only by forget.'),
  ('Research', '{memory.recallable}',                        NULL, '{title,summary,body}',      'A research note recallable as memory.'),
  ('Evidence', '{memory.recallable}',                        NULL, '{title,summary,body}',      'A piece of evidence recallable as memory.');

CREATE TABLE dna.dna_models (
    model_id    text PRIMARY KEY,
    dims        integer NOT NULL CHECK (dims > 0),
    description text,
    created_at  timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE dna.dna_models IS 'Embedding models: model_id names one embedding space; dims routes it to dna_search_docs_<dims>.';
INSERT INTO dna.dna_models (model_id, dims, description) VALUES
  ('dna-fake-hash-v1', 384, 'Deterministic feature-hashing embedder (dna.fake_embed); no semantics.');

CREATE TABLE dna.dna_instances (
    scope       text NOT NULL,
    kind        text NOT NULL,
    api_version text NOT NULL DEFAULT 'dna/v1',
    name        text NOT NULL,
    tenant      text NOT NULL DEFAULT '',
    id          uuid NOT NULL DEFAULT gen_random_uuid(),
    spec        jsonb NOT NULL DEFAULT '{}',
    valid_at    tstzrange NOT NULL DEFAULT tstzrange(now(), NULL, '[)'),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, kind, api_version, name, tenant),
    CONSTRAINT dna_instances_no_overlap EXCLUDE USING gist (scope WITH =, id WITH =, valid_at WITH &&)
);
COMMENT ON TABLE dna.dna_instances IS 'Current state of every record. valid_at = world (valid) time [valid_from, valid_to).';

CREATE TABLE dna.dna_versions (
    scope       text NOT NULL,
    kind        text NOT NULL,
    api_version text NOT NULL,
    name        text NOT NULL,
    tenant      text NOT NULL DEFAULT '',
    version     integer NOT NULL,
    id          uuid NOT NULL,
    spec        jsonb NOT NULL,
    valid_at    tstzrange NOT NULL,
    op          text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, kind, api_version, name, tenant, version)
);
COMMENT ON TABLE dna.dna_versions IS 'Append-only history: the full envelope per write; created_at = transaction time (what as_of reads).';

CREATE TYPE dna.search_hit AS (
    scope         text,
    kind          text,
    name          text,
    tenant        text,
    score         double precision,
    title         text,
    snippet       text,
    similarity    double precision,
    lexical_score double precision,
    rank_dense    integer,
    rank_lexical  integer,
    degraded      boolean,
    personal      boolean
);
COMMENT ON TYPE dna.search_hit IS 'One hit of dna.search: score = RRF; similarity = cosine in [-1,1] (NULL if not in the dense lane); lexical_score (NULL if not in the lexical lane); 1-based lane ranks; degraded = no query embedding; personal = the hit is in a personal partition (tenant personal:<oid>).';
""")
    op.execute(_BM25)
    # bm25.sql and search.sql as released with this revision (0010_scale replaced them).
    op.execute(read_sql("bm25.sql", frozen_in=revision))  # before the width tables: their triggers call dna.bm25_maintain()
    for dims in WIDTHS:
        op.execute(_search_table(dims))
    for name in ("embedding.sql", "fusion.sql"):
        op.execute(read_sql(name, frozen_in=revision))  # as released (0016 replaced them)
    op.execute(read_sql("search.sql", frozen_in=revision))


def downgrade() -> None:
    op.execute("DROP SCHEMA IF EXISTS dna CASCADE")
