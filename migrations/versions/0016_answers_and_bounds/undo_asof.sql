-- 0016_answers_and_bounds, topic asof: run first on downgrade (the 0013 text of sql/search.sql is re-run after).
DROP FUNCTION IF EXISTS dna.search(text, text, vector, text, integer, text[], text, text, integer,
                                   double precision[], double precision, boolean, timestamptz, boolean, boolean,
                                   integer, double precision, double precision, boolean, text, double precision, boolean,
                                   jsonb);
