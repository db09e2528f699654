-- Undo of revision 0026_speed_in_use, topic "any_statistics": the merges' index of revision 0010 back, the
-- memtable's partial index dropped.
CREATE INDEX dna_bm25_chunks_seg ON dna.dna_bm25_chunks (scope, model_id, tenant, seg_id);
DROP INDEX dna.dna_bm25_chunks_merge;
DROP INDEX dna.dna_bm25_docs_memtable;
