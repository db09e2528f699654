-- Undo of revision 0026_speed_in_use, topic "any_statistics": the merges' index of revision 0010 back, the
-- memtable's partial index dropped.
-- On Citus the index DDL below reaches every shard; in sequential mode (one connection per node, as the
-- functions re-created in the same transaction need: a function command is refused after a parallel
-- operation on a distributed table in the transaction).
SELECT set_config('citus.multi_shard_modify_mode', 'sequential', true) WHERE dna.citus_version() IS NOT NULL;
CREATE INDEX dna_bm25_chunks_seg ON dna.dna_bm25_chunks (scope, model_id, tenant, seg_id);
DROP INDEX dna.dna_bm25_chunks_merge;
DROP INDEX dna.dna_bm25_docs_memtable;
