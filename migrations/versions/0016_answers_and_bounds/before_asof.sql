-- 0016_answers_and_bounds, topic asof (issue 13 item 4): run before the plane files.
-- dna.search gains past_texts (dna.recall as_of ranks the past's text in the same lanes and fusion):
-- the signature of this revision's search topic goes (never released; 0013's is dropped by before_search.sql).
DROP FUNCTION IF EXISTS dna.search(text, text, vector, text, integer, text[], text, text, integer,
                                   double precision[], double precision, boolean, timestamptz, boolean, boolean,
                                   integer, double precision, double precision, boolean, text, double precision, boolean);
