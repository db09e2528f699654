-- Topic receipts: the table (its trigger and policy with it) and the functions of sql/receipts.sql.
DROP TABLE IF EXISTS dna.dna_search_receipts;
DROP FUNCTION IF EXISTS dna.take_receipt(text, jsonb, boolean);
DROP FUNCTION IF EXISTS dna.replay(uuid, text, vector, timestamp with time zone);
DROP FUNCTION IF EXISTS dna.receipts_immutable();
