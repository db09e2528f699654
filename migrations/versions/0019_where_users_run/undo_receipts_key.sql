-- Topic receipts_key: back to 0016's key (receipt_id alone; receipt ids are random uuids, unique across scopes).
DROP INDEX IF EXISTS dna.dna_search_receipts_receipt_id;
ALTER TABLE dna.dna_search_receipts DROP CONSTRAINT dna_search_receipts_pkey;
ALTER TABLE dna.dna_search_receipts ADD CONSTRAINT dna_search_receipts_pkey PRIMARY KEY (receipt_id);
