-- 0022_first_week, topic diversity (issue 27 item 2): run before the plane files.
-- dna.search gains diversity, duplicate_similarity and mmr_lambda, dna.recall diversity and
-- duplicate_similarity (each last, with a default): their 0021 signatures go (the plane files create the new ones).
DROP FUNCTION IF EXISTS dna.search(text, text, vector, text, integer, text[], text, text, integer, double precision[],
                                   double precision, boolean, timestamptz, boolean, boolean, integer, double precision,
                                   double precision, boolean, text, double precision, boolean, jsonb, dna.past_text[], jsonb);
DROP FUNCTION IF EXISTS dna.recall(text, text, vector, text, text[], integer, text, boolean, text, timestamptz,
                                   timestamptz, boolean, text, boolean, double precision, double precision, jsonb, integer);
