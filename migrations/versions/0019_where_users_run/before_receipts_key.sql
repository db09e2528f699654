-- Topic receipts_key (issue 24, D3 of ../shared/research/citus-probe-3.md): the key of a stored receipt
-- includes scope, as every key of a table distributed by scope must (Citus refuses a PRIMARY KEY
-- without the distribution column). dna.replay finds a receipt by its id alone: the plain index on
-- receipt_id (one probe per shard on Citus).
ALTER TABLE dna.dna_search_receipts DROP CONSTRAINT dna_search_receipts_pkey;
ALTER TABLE dna.dna_search_receipts ADD CONSTRAINT dna_search_receipts_pkey PRIMARY KEY (scope, receipt_id);
CREATE INDEX dna_search_receipts_receipt_id ON dna.dna_search_receipts (receipt_id);
