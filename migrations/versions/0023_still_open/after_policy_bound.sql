-- Revision 0023_still_open, topic "policy_bound": the width tables analyzed again after before_policy_bound's
-- rewrite, so that the planner knows valid_from (the validity probe's estimate) without waiting for
-- autovacuum.
DO $$
DECLARE
    w integer;
BEGIN
    FOR w IN SELECT dna.search_widths() LOOP
        EXECUTE format('ANALYZE dna.%I', 'dna_search_docs_' || w);
    END LOOP;
END
$$;
