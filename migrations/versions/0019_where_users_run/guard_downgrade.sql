-- Run first by the downgrade (issue 24, D6 of ../shared/research/citus-probe-3.md): a database whose
-- dna tables Citus holds cannot go back below this revision. 0018's schema and code do not run on
-- Citus (its dna.distribute fails, D1-D3; its receipts key is refused by Citus), and the older
-- revisions' downgrades drop triggers and re-create sublink policies on distributed tables, which
-- Citus refuses. So the downgrade refuses before it changes anything; docs/scale-out.md, "Leaving
-- Citus", gives the way back (SELECT dna.undistribute() first, then downgrade).
DO $$
DECLARE
    held text;
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RETURN;
    END IF;
    EXECUTE 'SELECT string_agg(format(''%s (%s)'', c.oid::regclass, dna.citus_placement_name(p.partmethod, p.repmodel)), '
            ''', '' ORDER BY c.relname) FROM pg_catalog.pg_dist_partition AS p JOIN pg_catalog.pg_class AS c '
            'ON c.oid = p.logicalrelid WHERE c.relnamespace = ''dna''::regnamespace'
        INTO held;
    IF held IS NOT NULL THEN
        RAISE EXCEPTION 'downgrade below 0019_where_users_run refused: Citus holds tables of schema dna (%)', held
            USING ERRCODE = '0A000',
                  DETAIL = 'The revisions before 0019_where_users_run do not run on Citus; nothing was changed.',
                  HINT = 'Run SELECT dna.undistribute(); on the coordinator first (every dna table back on it, '
                         'the rows kept), then downgrade; see docs/scale-out.md, "Leaving Citus".';
    END IF;
END
$$;
