-- Revision 0026_speed_in_use, topic "any_statistics": the BM25 lane's plans no longer depend on the
-- planner's statistics of its tables. Planned with none (a restore, a server upgrade, a table never analyzed:
-- every partition estimated at one row), two indexes won over the ones the lane is written for:
--   * dna_bm25_chunks_seg (scope, model_id, tenant, seg_id), the merges' index: the lane's reads by lexeme
--     took it and filtered every chunk of the partition by lexeme (dna.bm25 x3.6 / x24 p50 / p95 on a
--     30,000-document scope). It is now dna_bm25_chunks_merge, the same keys WHERE n > 0: every chunk (a chunk
--     holds at least one posting), but usable only by a statement that names n > 0, as the merges do
--     (sql/bm25_compact.sql) and no statement of the lane does;
--   * dna_bm25_docs_pkey for the memtable's count (seg_id IS NULL), read as the whole partition: the memtable
--     gets its own partial index, dna_bm25_docs_memtable (scope, model_id, tenant) INCLUDE (doc_len) WHERE
--     seg_id IS NULL, which holds the memtable's documents only.
-- The lane's statements read the chunks by one probe per term or per chosen chunk (sql/bm25_lane.sql).
-- Cost: one build of each index (~1 s per million chunk rows).
-- On Citus the index DDL below reaches every shard; in sequential mode (one connection per node, as the
-- functions re-created in the same transaction need: a function command is refused after a parallel
-- operation on a distributed table in the transaction).
SELECT set_config('citus.multi_shard_modify_mode', 'sequential', true) WHERE dna.citus_version() IS NOT NULL;
CREATE INDEX dna_bm25_chunks_merge ON dna.dna_bm25_chunks (scope, model_id, tenant, seg_id) WHERE n > 0;
DROP INDEX dna.dna_bm25_chunks_seg;
CREATE INDEX dna_bm25_docs_memtable ON dna.dna_bm25_docs (scope, model_id, tenant) INCLUDE (doc_len) WHERE seg_id IS NULL;
COMMENT ON INDEX dna.dna_bm25_chunks_merge IS
'The chunks of a segment, for merges (dna.bm25_merge). Holds every chunk (n > 0 always); partial so that only a statement naming n > 0 can use it: the lexical lane reads chunks by lexeme through the primary key, whatever the planner''s statistics say (revision 0026, topic any_statistics).';
COMMENT ON INDEX dna.dna_bm25_docs_memtable IS
'The memtable''s documents of each partition (seg_id IS NULL), with their lengths: N and the memtable''s size read index-only, never the partition''s documents (revision 0026, topic any_statistics).';
