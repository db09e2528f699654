-- Topic receipts (issue 15 item 2): the table of stored receipts (dna.take_receipt / dna.replay, sql/receipts.sql).
CREATE TABLE dna.dna_search_receipts (
    receipt_id       uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    taken_at         timestamptz NOT NULL DEFAULT now(),
    taken_by         text NOT NULL DEFAULT current_user,
    verb             text NOT NULL CHECK (verb IN ('search', 'recall')),
    scope            text NOT NULL,
    tenant           text NOT NULL DEFAULT '',
    args             jsonb NOT NULL CHECK (jsonb_typeof(args) = 'object' AND NOT args ?| ARRAY['query', 'query_embedding']),
    settings         jsonb NOT NULL,
    results          jsonb NOT NULL CHECK (jsonb_typeof(results) = 'array'),
    inputs_digest    text NOT NULL,
    query_digest     text NOT NULL,
    embedding_digest text,
    query            text,
    query_embedding  vector,
    CHECK (query_embedding IS NULL OR embedding_digest IS NOT NULL)
);
CREATE INDEX dna_search_receipts_scope_taken ON dna.dna_search_receipts (scope, tenant, taken_at);
COMMENT ON TABLE dna.dna_search_receipts IS 'Stored receipts of dna.search / dna.recall answers (dna.take_receipt), replayed by dna.replay. One row per receipt: receipt_id (uuid, also the digests'' salt), taken_at (transaction time), taken_by (current_user), verb (search | recall), scope, tenant (the partition the answer was read in; the tenant policy of every dna_* data table decides who sees the row), args (the named arguments as run, without query and query_embedding; valid_time / now and model_id pinned), settings (dna.receipt_settings: search configuration, model, fusion, the dense lane''s path, ef_search, iterative scan, BM25 parameters, schema revision, pgvector version), results (the ordered [{kind, name, tenant, passage, score}]), inputs_digest / query_digest / embedding_digest (salted SHA-256 hex, dna.receipt_digest), query and query_embedding (only with keep_query => true; NULL otherwise). Never updated (trigger dna_search_receipts_immutable, 55000); DELETE removes receipts.';
COMMENT ON COLUMN dna.dna_search_receipts.query IS 'The query text, only when the receipt was taken with keep_query => true; NULL otherwise (the replay must then be given it).';
COMMENT ON COLUMN dna.dna_search_receipts.query_embedding IS 'The query embedding, only with keep_query => true (an embedding can be inverted to text it came from); NULL otherwise.';
COMMENT ON COLUMN dna.dna_search_receipts.results IS 'The answer''s ordered result ids with their scores: [{kind, name, tenant, passage (search only), score}], rank 1 first.';
SELECT dna.protect_table('dna.dna_search_receipts'::regclass);
