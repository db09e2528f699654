-- pydna SQL package — memory plane, consolidation (claims and contradictions: sql/memory_contradictions.sql).
--
-- dna.consolidate: the deterministic decay pass over one scope, Kind and tenant partition. It
-- evaluates every valid memory's retention, reports the stale ones, and with apply soft-forgets
-- them (dna.forget: never a delete). A dry run writes nothing at all and adds a structured preview:
-- per-memory actions, merge candidates (lexical overlap, connected components, a canonical
-- survivor, proposal `supersede`) and contradictions between declared claims (TOKI §2.1: same
-- subject and predicate, overlapping half-open world-time windows, different objects or opposite
-- polarity; proposal `await_confirmation`). Nothing but the expiry of stale memories is ever
-- applied. Rules and constants: ../shared/conformance/README.md (DNA SDK, ruinosus/dna, MIT).
--
-- SQLSTATEs: 22023 invalid argument, 22007 bad timestamp, 42501 reserved tenant.

-- ---------------------------------------------------------------------------------------------
-- Merge candidates
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.merge_tokens(spec jsonb)
RETURNS text[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    RETURN ARRAY(
        SELECT DISTINCT t COLLATE "C"
        FROM regexp_split_to_table(lower(dna.engram_text(coalesce(spec, '{}'::jsonb))), '[^0-9a-zA-Z]+') AS t
        WHERE length(t) >= 3
          AND t <> ALL (ARRAY['the', 'and', 'for', 'with', 'that', 'this', 'was', 'were', 'are', 'has', 'have',
                              'had', 'but', 'not', 'you', 'our', 'its', 'their', 'into', 'from', 'when', 'then',
                              'than', 'over', 'under', 'about'])
        ORDER BY t COLLATE "C");
END
$$;

COMMENT ON FUNCTION dna.merge_tokens(jsonb) IS
'A memory''s comparable token set for merge candidates: dna.engram_text(spec) lower-cased, split on '
'non-alphanumerics ([^0-9a-zA-Z]+), tokens of 3+ characters minus the stop words (the, and, for, with, '
'that, this, was, were, are, has, have, had, but, not, you, our, its, their, into, from, when, then, '
'than, over, under, about); distinct, sorted. Pure.';

CREATE OR REPLACE FUNCTION dna.canonical_name(names text[], specs jsonb, now timestamptz)
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    RETURN (
        SELECT n.name
        FROM unnest(names) AS n(name)
        ORDER BY dna.confidence_score_numeric(specs -> n.name) DESC,
                 coalesce(dna.days_since(coalesce(specs -> n.name ->> 'created_at', specs -> n.name ->> 'valid_from'), now),
                          'Infinity'::float8),
                 n.name COLLATE "C"
        LIMIT 1);
END
$$;

COMMENT ON FUNCTION dna.canonical_name(text[], jsonb, timestamptz) IS
'The deterministic survivor among names (specs: {name: spec}): highest dna.confidence_score_numeric, '
'then the newest created_at (else valid_from; none counts as oldest), then the smallest name '
'(codepoint order). A total order: the same group always elects the same name. Pure.';

CREATE OR REPLACE FUNCTION dna.merge_candidates(members jsonb, overlap_floor double precision DEFAULT 0.5,
                                                now timestamptz DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    result jsonb;
    dup text;
BEGIN
    IF overlap_floor IS NULL OR overlap_floor < 0 OR overlap_floor > 1 OR overlap_floor = 'NaN'::float8 THEN
        RAISE EXCEPTION 'merge_overlap_floor must be between 0 and 1, got %', overlap_floor USING ERRCODE = '22023';
    END IF;
    IF jsonb_typeof(members) IS DISTINCT FROM 'array' AND members IS NOT NULL THEN
        RAISE EXCEPTION 'members must be a list of {name, spec} objects, got %', jsonb_typeof(members) USING ERRCODE = '22023';
    END IF;
    SELECT e.value ->> 'name' INTO dup
    FROM jsonb_array_elements(coalesce(members, '[]'::jsonb)) AS e
    WHERE coalesce(e.value ->> 'name', '') <> ''
    GROUP BY e.value ->> 'name' HAVING count(*) > 1
    ORDER BY (e.value ->> 'name') COLLATE "C" LIMIT 1;
    IF dup IS NOT NULL THEN
        RAISE EXCEPTION 'members must have distinct names: % is given more than once', quote_literal(dup)
            USING ERRCODE = '22023';
    END IF;
    WITH m AS MATERIALIZED (
        SELECT e.value ->> 'name' AS name, coalesce(e.value -> 'spec', '{}'::jsonb) AS spec,
               dna.merge_tokens(e.value -> 'spec') AS tokens
        FROM jsonb_array_elements(coalesce(members, '[]'::jsonb)) AS e
        WHERE coalesce(e.value ->> 'name', '') <> ''
    ), tok AS (
        SELECT m.name, t.token FROM m CROSS JOIN LATERAL unnest(m.tokens) AS t(token)
    ), pairs AS MATERIALIZED (                              -- only pairs that share a token can overlap
        SELECT a.name AS a, b.name AS b, count(*) AS shared,
               cardinality(ma.tokens) + cardinality(mb.tokens) - count(*) AS uni
        FROM tok AS a JOIN tok AS b ON a.token = b.token AND a.name COLLATE "C" < b.name COLLATE "C"
        JOIN m AS ma ON ma.name = a.name
        JOIN m AS mb ON mb.name = b.name
        GROUP BY a.name, b.name, ma.tokens, mb.tokens
    ), edges AS MATERIALIZED (
        SELECT p.a, p.b, p.shared::float8 / p.uni::float8 AS overlap
        FROM pairs AS p
        WHERE p.uni > 0 AND p.shared::float8 / p.uni::float8 >= overlap_floor
    ), sym AS (
        SELECT e.a AS x, e.b AS y FROM edges AS e UNION ALL SELECT e.b, e.a FROM edges AS e
    ), reach AS (
        WITH RECURSIVE r(src, dst) AS (
            SELECT DISTINCT s.x, s.x FROM sym AS s
            UNION
            SELECT r.src, s.y FROM r JOIN sym AS s ON s.x = r.dst
        )
        SELECT r.src AS name, min(r.dst COLLATE "C") AS root FROM r GROUP BY r.src
    ), groups AS (
        SELECT g.root, array_agg(g.name ORDER BY g.name COLLATE "C") AS names
        FROM reach AS g GROUP BY g.root
    ), specs AS (
        SELECT jsonb_object_agg(m.name, m.spec) AS by_name FROM m
    ), proposals AS (
        SELECT g.root, g.names, dna.canonical_name(g.names, s.by_name, now) AS canonical, s.by_name
        FROM groups AS g CROSS JOIN specs AS s
    )
    SELECT coalesce(jsonb_agg(
               jsonb_build_object(
                   'names', to_jsonb(p.names),
                   'canonical', p.canonical,
                   'superseded', to_jsonb(array_remove(p.names, p.canonical)),
                   'overlap', (SELECT round(max(e.overlap)::numeric, 4) FROM edges AS e WHERE e.a = ANY (p.names)),
                   'pairs', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                                     'a', e.a, 'b', e.b, 'overlap', round(e.overlap::numeric, 4),
                                     'shared_terms', to_jsonb(ARRAY(
                                         SELECT t FROM unnest((SELECT ma.tokens FROM m AS ma WHERE ma.name = e.a)::text[]) AS t
                                         WHERE t = ANY ((SELECT mb.tokens FROM m AS mb WHERE mb.name = e.b)::text[])
                                         ORDER BY t COLLATE "C" LIMIT 12)))
                                 ORDER BY e.a COLLATE "C", e.b COLLATE "C"), '[]'::jsonb)
                             FROM edges AS e WHERE e.a = ANY (p.names)),
                   'strategy', 'supersede',
                   'proposed_spec', p.by_name -> p.canonical
                        || CASE WHEN u.tags IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('tags', u.tags) END,
                   'proposed_text', p.by_name -> p.canonical -> 'summary',
                   'synthesized', false)
               ORDER BY p.root COLLATE "C"), '[]'::jsonb)
    INTO result
    FROM proposals AS p
    CROSS JOIN LATERAL (
        SELECT jsonb_agg(DISTINCT tg.tag COLLATE "C" ORDER BY tg.tag COLLATE "C") AS tags
        FROM unnest(p.names) AS n(name)
        CROSS JOIN LATERAL jsonb_array_elements_text(
            CASE WHEN jsonb_typeof(p.by_name -> n.name -> 'tags') = 'array' THEN p.by_name -> n.name -> 'tags'
                 ELSE '[]'::jsonb END) AS tg(tag)
    ) AS u;
    RETURN result;
END
$$;

COMMENT ON FUNCTION dna.merge_candidates(jsonb, double precision, timestamptz) IS
'Merge proposals over members [{name, spec}]: every pair whose dna.merge_tokens Jaccard is >= '
'overlap_floor (0..1, default 0.5) is an edge; groups are the connected components. Per group, '
'ordered by its smallest name: {names, canonical (dna.canonical_name at now), superseded, overlap '
'(best pair), pairs[{a, b, overlap (4 places), shared_terms (up to 12, sorted)}], strategy: '
'supersede, proposed_spec (the canonical''s spec with the group''s tags unioned), proposed_text, '
'synthesized: false}. Proposals only: nothing is written. Errors: 22023 for a floor outside 0..1, members '
'not a list, or two members of one name. Pure.';

-- ---------------------------------------------------------------------------------------------
-- Reads the verb needs, and the verb
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.memory_recorded_at(scope text, kind text, tenant text, names text[])
RETURNS jsonb
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_variable
BEGIN
    RETURN (
        SELECT coalesce(jsonb_object_agg(n.name, jsonb_strip_nulls(jsonb_build_object(
                   'recorded_at', dna.iso8601(f.created_at), 'approximate', f.version > 1))), '{}'::jsonb)
        FROM unnest(names) AS n(name)
        CROSS JOIN LATERAL (SELECT v.version, v.created_at FROM dna.dna_versions AS v
                            WHERE v.scope = scope AND v.kind = kind AND v.name = n.name AND v.tenant = tenant
                            ORDER BY v.version LIMIT 1) AS f);
END
$$;

COMMENT ON FUNCTION dna.memory_recorded_at(text, text, text, text[]) IS
'Transaction time at which each named memory was first recorded: {name: {recorded_at, approximate}} '
'from its oldest retained version in dna_versions; approximate = true when version 1 was pruned (the '
'stamp is then an upper bound). Names without history are absent. Read-only.';

CREATE OR REPLACE FUNCTION dna.memory_specs(scope text, kind text, tenant text, names text[])
RETURNS jsonb
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_variable
BEGIN
    RETURN (
        SELECT coalesce(jsonb_object_agg(i.name, i.spec), '{}'::jsonb)
        FROM dna.dna_instances AS i
        WHERE i.scope = scope AND i.kind = kind AND i.tenant = coalesce(tenant, '') AND i.name = ANY (names));
END
$$;

COMMENT ON FUNCTION dna.memory_specs(text, text, text, text[]) IS
'The stored specs of the named memories of one scope, Kind and tenant: {name: spec}. Read-only (for '
'the external scribes of the Python client).';

DROP FUNCTION IF EXISTS dna.consolidate(text, text, text, double precision, boolean, boolean, double precision, timestamptz);  -- before the personal parameter (0009_tenancy)
CREATE OR REPLACE FUNCTION dna.consolidate(
    scope text, kind text DEFAULT 'Engram', tenant text DEFAULT '',
    stale_retention_floor double precision DEFAULT 0.15, apply boolean DEFAULT false, dry_run boolean DEFAULT false,
    merge_overlap_floor double precision DEFAULT 0.5, now timestamptz DEFAULT NULL,
    personal boolean DEFAULT false)
RETURNS jsonb
LANGUAGE plpgsql
SET jit = off                -- many short statements: compiling them would cost more than running them
AS $$
#variable_conflict use_variable
DECLARE
    world timestamptz;
    evaluated integer;
    stale jsonb;
    actions jsonb;
    valid_members jsonb;
    s jsonb;
    f jsonb;
    archived integer := 0;
    errors jsonb := '[]'::jsonb;
    report jsonb;
    claims jsonb;
    recorded jsonb;
BEGIN
    scope := dna.check_key('scope', scope, 200);
    tenant := dna.resolve_tenant(tenant, personal);       -- personal: the caller's own partition
    kind := dna.check_memory_kind(coalesce(kind, 'Engram'));
    world := coalesce(dna.check_now(now), now());
    IF stale_retention_floor IS NULL OR stale_retention_floor < 0 OR stale_retention_floor > 1
       OR stale_retention_floor = 'NaN'::float8 THEN
        RAISE EXCEPTION 'stale_retention_floor must be between 0 and 1, got %', stale_retention_floor
            USING ERRCODE = '22023';
    END IF;
    IF merge_overlap_floor IS NULL OR merge_overlap_floor < 0 OR merge_overlap_floor > 1
       OR merge_overlap_floor = 'NaN'::float8 THEN
        RAISE EXCEPTION 'merge_overlap_floor must be between 0 and 1, got %', merge_overlap_floor USING ERRCODE = '22023';
    END IF;
    apply := coalesce(apply, false);
    dry_run := coalesce(dry_run, false);

    WITH m AS MATERIALIZED (
        SELECT i.name, i.spec, dna.currently_valid(i.spec ->> 'valid_to', world) AS valid
        FROM dna.dna_instances AS i
        WHERE i.scope = scope AND i.kind = kind AND i.tenant = tenant
    ), ev AS MATERIALIZED (
        SELECT m.name, m.spec,
               dna.memory_retention(m.spec, world) AS retention,
               round(dna.stability_from_spec(m.spec)::numeric, 2) AS stability_days,
               round(coalesce(dna.days_since(coalesce(nullif(m.spec ->> 'last_surfaced', ''), m.spec ->> 'created_at'), world),
                              0.0)::numeric, 2) AS days_since
        FROM m WHERE m.valid
    )
    SELECT (SELECT count(*) FROM ev),
           (SELECT coalesce(jsonb_agg(jsonb_build_object('name', ev.name, 'retention', round(ev.retention::numeric, 4),
                                                         'stability_days', ev.stability_days, 'days_since', ev.days_since)
                                      ORDER BY round(ev.retention::numeric, 4), ev.name COLLATE "C"), '[]'::jsonb)
            FROM ev WHERE ev.retention < stale_retention_floor),
           (SELECT coalesce(jsonb_agg(a.obj ORDER BY a.name COLLATE "C"), '[]'::jsonb) FROM (
                SELECT ev.name, jsonb_build_object(
                    'name', ev.name,
                    'action', CASE WHEN ev.retention < stale_retention_floor THEN 'expire' ELSE 'retain' END,
                    'reason', format('retention %s %s floor %s after %sd (stability %sd)',
                                     to_char(ev.retention, 'FM0.0000'),
                                     CASE WHEN ev.retention < stale_retention_floor THEN '<' ELSE '>=' END,
                                     stale_retention_floor, ev.days_since, ev.stability_days),
                    'retention', round(ev.retention::numeric, 4), 'stability_days', ev.stability_days,
                    'days_since', ev.days_since) AS obj
                FROM ev
                UNION ALL
                SELECT m.name, jsonb_build_object('name', m.name, 'action', 'already_expired',
                                                  'reason', format('valid_to %s is already past', m.spec ->> 'valid_to'),
                                                  'valid_to', m.spec -> 'valid_to')
                FROM m WHERE NOT m.valid) AS a),
           (SELECT coalesce(jsonb_agg(jsonb_build_object('name', ev.name, 'spec', ev.spec) ORDER BY ev.name COLLATE "C"),
                            '[]'::jsonb) FROM ev)
    INTO evaluated, stale, actions, valid_members;

    IF apply AND NOT dry_run THEN
        FOR s IN SELECT e FROM jsonb_array_elements(stale) AS e LOOP
            BEGIN
                f := dna.forget(scope, s ->> 'name', NULL, kind, CASE WHEN personal IS TRUE THEN '' ELSE tenant END, world, personal IS TRUE);
                IF NOT (f ->> 'already_forgotten')::boolean THEN
                    archived := archived + 1;
                END IF;
            EXCEPTION WHEN OTHERS THEN                     -- fail-soft per memory, reported
                errors := errors || jsonb_build_array(jsonb_build_object('name', s ->> 'name', 'sqlstate', SQLSTATE,
                                                                         'error', SQLERRM));
            END;
        END LOOP;
    END IF;

    report := jsonb_build_object('evaluated', evaluated, 'stale', stale, 'archived', archived,
                                 'applied', apply AND NOT dry_run);
    IF jsonb_array_length(errors) > 0 THEN
        report := report || jsonb_build_object('errors', errors);
    END IF;
    IF dry_run THEN
        recorded := dna.memory_recorded_at(scope, kind, tenant,
                                           ARRAY(SELECT e ->> 'name' FROM jsonb_array_elements(valid_members) AS e));
        claims := dna.contradiction_report(valid_members, recorded, world);
        report := report || jsonb_build_object(
            'dry_run', true,
            'actions', actions,
            'merge_candidates', dna.merge_candidates(valid_members, merge_overlap_floor, world),
            -- each proposal says how to accept it: one dna.forget (and `dna memory forget`) per memory it supersedes
            'contradictions', (SELECT coalesce(jsonb_agg(jsonb_set(cd, '{proposal,accept}', (
                                   SELECT jsonb_build_object('sql', coalesce(jsonb_agg(a -> 'sql' ORDER BY x COLLATE "C"), '[]'),
                                                             'cli', coalesce(jsonb_agg(a -> 'cli' ORDER BY x COLLATE "C"), '[]'))
                                   FROM jsonb_array_elements_text(cd #> '{proposal,suggested_supersede}') AS x
                                   CROSS JOIN LATERAL dna.accept_successor(scope, x, cd #>> '{proposal,suggested_keep}',
                                                                           kind, tenant) AS a))
                                   ORDER BY e.ord), '[]'::jsonb)
                               FROM jsonb_array_elements(claims -> 'contradictions') WITH ORDINALITY AS e(cd, ord)),
            'undecided', claims -> 'undecided',
            'claims', claims -> 'claims',
            'recorded_at_approximate', to_jsonb(ARRAY(
                SELECT DISTINCT x FROM jsonb_array_elements(claims -> 'contradictions') AS cd
                CROSS JOIN LATERAL jsonb_array_elements_text(coalesce(cd #> '{proposal,recorded_at_approximate}', '[]')) AS x
                ORDER BY x)));
    END IF;
    RETURN report;
END
$$;

COMMENT ON FUNCTION dna.consolidate(text, text, text, double precision, boolean, boolean, double precision, timestamptz, boolean) IS
'The deterministic consolidation pass over the memories of one scope, Kind (default Engram) and '
'tenant partition (exactly that tenant; '''' = the base; personal => true: the caller''s personal partition, '
'42501 without an identity). Evaluates every memory valid at world time '
'now (default now(); valid_to absent or later) with dna.memory_retention; stale = retention < '
'stale_retention_floor (0..1, default 0.15), sorted by retention then name, each {name, retention (4 '
'places), stability_days, days_since (since last_surfaced, else created_at; 2 places)}. apply '
'soft-forgets the stale ones with dna.forget (never a delete; idempotent: a second pass archives '
'nothing); a failing forget is skipped and listed in errors. dry_run wins over apply and writes '
'nothing at all; it adds dry_run, actions[{name, action: retain|expire|already_expired, reason, ...}] '
'sorted by name, merge_candidates (dna.merge_candidates, merge_overlap_floor 0..1, default 0.5), '
'contradictions and undecided (dna.contradiction_report with transaction-time stamps from '
'dna.memory_recorded_at; each contradiction''s proposal gains accept {sql[], cli[]}: the dna.forget call and `dna memory '
'forget` command per memory it supersedes, dna.accept_successor), claims, recorded_at_approximate. Returns {evaluated, stale, archived, '
'applied[, errors][, dry-run keys]}. Errors: 22023 (floors, not a memory Kind, blank scope), 22007 '
'(infinite now), 42501 (reserved tenant).';
