-- pydna SQL package — memory plane, claims and contradictions (used by dna.consolidate, sql/consolidate.sql).
--
-- A memory's declared claims (subject, predicate, object, polarity, a half-open world-time window)
-- and the rule that two of them contradict (TOKI §2.1: same subject and predicate, overlapping
-- windows, different objects or opposite polarity), the survivor a contradiction proposes
-- (transaction-time election) and the report dna.consolidate's dry run returns. All pure: nothing
-- here reads or writes a table. Rules and constants: ../shared/conformance/README.md (DNA SDK,
-- ruinosus/dna, MIT).
--
-- Errors: none raised here (a malformed claim is not a claim; dna.consolidate checks its arguments).

-- ---------------------------------------------------------------------------------------------
-- Claims and contradictions
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.is_referent(value text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT coalesce(btrim(value) ~ '^[^/[:space:]][^/]*/[^/[:space:]].*$', false)
$$;

COMMENT ON FUNCTION dna.is_referent(text) IS
'Whether a value names a referent in Kind/name form (a non-blank segment, a slash, a non-blank '
'segment): how area and source_refs declare what a memory is about. A default area such as '
'''general'' is not a referent. Pure.';

CREATE OR REPLACE FUNCTION dna.memory_referents(spec jsonb)
RETURNS text[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    RETURN ARRAY(
        SELECT DISTINCT r COLLATE "C" FROM (
            SELECT lower(btrim(c ->> 'subject')) AS r
            FROM jsonb_array_elements(CASE WHEN jsonb_typeof(spec -> 'claims') = 'array' THEN spec -> 'claims' ELSE '[]' END) AS c
            WHERE jsonb_typeof(c) = 'object' AND jsonb_typeof(c -> 'subject') = 'string' AND btrim(c ->> 'subject') <> ''
            UNION ALL
            SELECT lower(btrim(v)) FROM (
                SELECT spec ->> 'area' AS v WHERE jsonb_typeof(spec -> 'area') = 'string'
                UNION ALL
                SELECT x FROM jsonb_array_elements_text(CASE WHEN jsonb_typeof(spec -> 'source_refs') = 'array'
                                                             THEN spec -> 'source_refs' ELSE '[]' END) AS x
            ) AS cand
            WHERE dna.is_referent(v)
        ) AS refs
        ORDER BY r COLLATE "C");
END
$$;

COMMENT ON FUNCTION dna.memory_referents(jsonb) IS
'The subjects a memory declares it is about, normalised (stripped, lower-cased): every claim''s subject, '
'plus area and source_refs values in Kind/name form (dna.is_referent). Sorted, distinct. Pure.';

CREATE OR REPLACE FUNCTION dna.claim_value_key(value jsonb)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE jsonb_typeof(value)
               WHEN 'boolean' THEN value #>> '{}'
               WHEN 'number' THEN CASE WHEN (value #>> '{}')::numeric = trunc((value #>> '{}')::numeric)
                                       THEN trunc((value #>> '{}')::numeric)::text
                                       ELSE dna.json_number(value)::text END
               WHEN 'string' THEN lower(btrim(value #>> '{}'))
               ELSE NULL END
$$;

COMMENT ON FUNCTION dna.claim_value_key(jsonb) IS
'The comparison key of a claim object: strings stripped and lower-cased, booleans true/false, whole '
'numbers as integers (2.0 = 2), other numbers in shortest form; NULL for a missing object (an '
'existence claim). Pure.';

CREATE OR REPLACE FUNCTION dna.memory_claims(name text, spec jsonb)
RETURNS SETOF jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    default_subject text;
    item jsonb;
    subject text;
BEGIN
    IF jsonb_typeof(spec -> 'claims') IS DISTINCT FROM 'array' THEN
        RETURN;
    END IF;
    -- The memory's own referent as written: the first (sorted) Kind/name value of area and source_refs.
    default_subject := (
        SELECT btrim(v) FROM (
            SELECT spec ->> 'area' AS v WHERE jsonb_typeof(spec -> 'area') = 'string'
            UNION ALL
            SELECT x FROM jsonb_array_elements_text(CASE WHEN jsonb_typeof(spec -> 'source_refs') = 'array'
                                                         THEN spec -> 'source_refs' ELSE '[]' END) AS x) AS c
        WHERE dna.is_referent(v) ORDER BY btrim(v) COLLATE "C" LIMIT 1);
    FOR item IN SELECT c FROM jsonb_array_elements(spec -> 'claims') AS c LOOP
        -- Lenient: a stored claim that is malformed is skipped, never fatal.
        CONTINUE WHEN jsonb_typeof(item) <> 'object'
                   OR jsonb_typeof(item -> 'predicate') IS DISTINCT FROM 'string' OR btrim(item ->> 'predicate') = ''
                   OR coalesce(item ->> 'polarity', 'asserts') NOT IN ('asserts', 'denies')
                   OR coalesce(jsonb_typeof(item -> 'object'), 'null') NOT IN ('string', 'number', 'boolean', 'null');
        subject := CASE WHEN jsonb_typeof(item -> 'subject') = 'string' AND btrim(item ->> 'subject') <> ''
                        THEN btrim(item ->> 'subject') ELSE default_subject END;
        CONTINUE WHEN subject IS NULL;                     -- an unanchored claim compares with nothing
        RETURN NEXT jsonb_strip_nulls(jsonb_build_object(
            'memory', name,
            'subject', subject,
            'predicate', btrim(item ->> 'predicate'),
            'object', CASE WHEN jsonb_typeof(item -> 'object') = 'null' THEN NULL ELSE item -> 'object' END,
            'polarity', coalesce(item ->> 'polarity', 'asserts'),
            'valid_from', coalesce(nullif(btrim(item ->> 'valid_from'), ''), nullif(btrim(spec ->> 'valid_from'), '')),
            'valid_to', coalesce(nullif(btrim(item ->> 'valid_to'), ''), nullif(btrim(spec ->> 'valid_to'), ''))));
    END LOOP;
END
$$;

COMMENT ON FUNCTION dna.memory_claims(text, jsonb) IS
'The comparable claims of one memory, leniently (a malformed stored claim is skipped): {memory, '
'subject, predicate, object?, polarity, valid_from?, valid_to?}. subject defaults to the memory''s '
'first Kind/name referent (area, source_refs); a claim with no subject at all is dropped. The window '
'defaults to the memory''s own valid_from/valid_to. Pure.';

CREATE OR REPLACE FUNCTION dna.intervals_overlap(a_from text, a_to text, b_from text, b_to text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT coalesce(dna.parse_timestamptz(a_from), '-infinity'::timestamptz) < coalesce(dna.parse_timestamptz(b_to), 'infinity'::timestamptz)
       AND coalesce(dna.parse_timestamptz(b_from), '-infinity'::timestamptz) < coalesce(dna.parse_timestamptz(a_to), 'infinity'::timestamptz)
$$;

COMMENT ON FUNCTION dna.intervals_overlap(text, text, text, text) IS
'Whether two half-open world-time windows [from, to) share an instant: sA < eB and sB < eA, a '
'missing or unparseable bound being -infinity / +infinity. True for 9 of Allen''s 13 relations; '
'false for before, after, meets and met-by (a clean succession is not a conflict). Pure.';

CREATE OR REPLACE FUNCTION dna.claims_contradict(a jsonb, b jsonb)
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    same_object boolean;
BEGIN
    IF a ->> 'memory' = b ->> 'memory'
       OR lower(btrim(a ->> 'subject')) IS DISTINCT FROM lower(btrim(b ->> 'subject'))
       OR lower(btrim(a ->> 'predicate')) IS DISTINCT FROM lower(btrim(b ->> 'predicate'))
       OR NOT dna.intervals_overlap(a ->> 'valid_from', a ->> 'valid_to', b ->> 'valid_from', b ->> 'valid_to') THEN
        RETURN NULL;
    END IF;
    same_object := dna.claim_value_key(a -> 'object') IS NOT DISTINCT FROM dna.claim_value_key(b -> 'object');
    IF coalesce(a ->> 'polarity', 'asserts') <> coalesce(b ->> 'polarity', 'asserts') THEN
        RETURN CASE WHEN same_object THEN 'polarity' END;
    END IF;
    IF coalesce(a ->> 'polarity', 'asserts') = 'denies' THEN
        RETURN NULL;                                       -- denying two values is no disagreement
    END IF;
    IF dna.claim_value_key(a -> 'object') IS NULL OR dna.claim_value_key(b -> 'object') IS NULL THEN
        RETURN NULL;                                       -- existence vs valued: not comparable
    END IF;
    RETURN CASE WHEN same_object THEN NULL ELSE 'object' END;
END
$$;

COMMENT ON FUNCTION dna.claims_contradict(jsonb, jsonb) IS
'Why two claims (as dna.memory_claims returns them) contradict, or NULL: they must come from different '
'memories, agree on subject and predicate (stripped, case-insensitive) and have overlapping windows '
'(dna.intervals_overlap); then opposite polarity on the same object → ''polarity'', both asserting '
'different objects → ''object''. Two denials, or a valued claim against an existence claim, never '
'contradict. TOKI §2.1 (arXiv:2606.06240). Pure.';

CREATE OR REPLACE FUNCTION dna.elect_survivor(names text[], recorded jsonb, specs jsonb, now timestamptz)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    winner text;
    approx text[];
    basis text := 'spec';
BEGIN
    approx := ARRAY(SELECT n FROM unnest(names) AS n
                    WHERE coalesce((recorded -> n ->> 'approximate')::boolean, false) ORDER BY n COLLATE "C");
    IF NOT EXISTS (SELECT 1 FROM unnest(names) AS n
                   WHERE dna.parse_timestamptz(recorded -> n ->> 'recorded_at') IS NULL) THEN
        -- Transaction time: the memory first recorded last wins (name breaks a tie).
        SELECT n INTO winner FROM unnest(names) AS n
        ORDER BY dna.parse_timestamptz(recorded -> n ->> 'recorded_at') DESC, n COLLATE "C" DESC LIMIT 1;
        IF winner = ANY (approx) THEN
            winner := NULL;                                -- its stamp is only an upper bound
        ELSE
            basis := 'recorded_at';
        END IF;
    END IF;
    IF winner IS NULL THEN
        winner := dna.canonical_name(names, specs, now);   -- the authored clock
    END IF;
    RETURN jsonb_build_object('strategy', 'await_confirmation', 'suggested_keep', winner,
                              'suggested_supersede', to_jsonb(ARRAY(SELECT n FROM unnest(names) AS n
                                                                    WHERE n <> winner ORDER BY n COLLATE "C")),
                              'basis', basis)
        || CASE WHEN cardinality(approx) > 0 THEN jsonb_build_object('recorded_at_approximate', to_jsonb(approx))
                ELSE '{}'::jsonb END;
END
$$;

COMMENT ON FUNCTION dna.elect_survivor(text[], jsonb, jsonb, timestamptz) IS
'The await_confirmation proposal of a contradiction among names. recorded: {name: {recorded_at '
'(first version''s transaction time), approximate (that first version was pruned, so the stamp is an '
'upper bound)}}; specs: {name: spec}. When every name has a stamp, the memory first recorded last '
'wins (basis recorded_at) — unless the winner''s stamp is approximate, in which case the proposal '
'falls back to the authored clock (dna.canonical_name, basis spec). Returns {strategy, '
'suggested_keep, suggested_supersede, basis, recorded_at_approximate?}. Never applied. Pure.';

CREATE OR REPLACE FUNCTION dna.contradiction_report(members jsonb, recorded jsonb DEFAULT '{}',
                                                    now timestamptz DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    contradictions jsonb;
    undecided jsonb;
    n_claims integer;
BEGIN
    WITH m AS MATERIALIZED (
        SELECT e.value ->> 'name' AS name, coalesce(e.value -> 'spec', '{}'::jsonb) AS spec
        FROM jsonb_array_elements(coalesce(members, '[]'::jsonb)) AS e
        WHERE coalesce(e.value ->> 'name', '') <> ''
    ), specs AS (
        SELECT coalesce(jsonb_object_agg(m.name, m.spec), '{}'::jsonb) AS by_name FROM m
    ), c AS MATERIALIZED (
        SELECT cl.claim, lower(btrim(cl.claim ->> 'subject')) AS sk, lower(btrim(cl.claim ->> 'predicate')) AS pk,
               row_number() OVER (PARTITION BY lower(btrim(cl.claim ->> 'subject')), lower(btrim(cl.claim ->> 'predicate'))
                                  ORDER BY cl.claim ->> 'memory' COLLATE "C", cl.claim ->> 'predicate' COLLATE "C",
                                           coalesce(cl.claim ->> 'object', 'None') COLLATE "C", cl.ord) AS pos
        FROM m CROSS JOIN LATERAL dna.memory_claims(m.name, m.spec) WITH ORDINALITY AS cl(claim, ord)
    ), pairs AS MATERIALIZED (
        SELECT a.sk, a.pk, a.pos AS pa, b.pos AS pb, a.claim AS ca, b.claim AS cb,
               dna.claims_contradict(a.claim, b.claim) AS reason
        FROM c AS a JOIN c AS b ON a.sk = b.sk AND a.pk = b.pk AND a.pos < b.pos
    ), conflict AS (
        SELECT p.sk, p.pk,
               jsonb_agg(jsonb_build_object('a', p.ca ->> 'memory', 'b', p.cb ->> 'memory', 'reason', p.reason,
                                            'a_claim', p.ca, 'b_claim', p.cb) ORDER BY p.pa, p.pb) AS pairs,
               ARRAY(SELECT DISTINCT x COLLATE "C" FROM unnest(array_agg(p.ca ->> 'memory') || array_agg(p.cb ->> 'memory')) AS x
                     ORDER BY x COLLATE "C") AS names
        FROM pairs AS p WHERE p.reason IS NOT NULL
        GROUP BY p.sk, p.pk
    ), decided AS (
        SELECT f.*, first.claim ->> 'subject' AS subject, first.claim ->> 'predicate' AS predicate
        FROM conflict AS f
        JOIN c AS first ON first.sk = f.sk AND first.pk = f.pk AND first.pos = 1
    )
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'subject', d.subject, 'predicate', d.predicate, 'names', to_jsonb(d.names), 'pairs', d.pairs,
               'decided_by', 'rule',
               'proposal', dna.elect_survivor(d.names, coalesce(recorded, '{}'::jsonb), s.by_name, now))
               ORDER BY d.subject COLLATE "C", d.predicate COLLATE "C", array_to_string(d.names, chr(1)) COLLATE "C"), '[]'::jsonb),
           (SELECT count(*) FROM c)
    INTO contradictions, n_claims
    FROM decided AS d CROSS JOIN specs AS s;

    -- What the rule could not decide: memories sharing a declared referent, not all in a conflict.
    WITH m AS (
        SELECT e.value ->> 'name' AS name, coalesce(e.value -> 'spec', '{}'::jsonb) AS spec
        FROM jsonb_array_elements(coalesce(members, '[]'::jsonb)) AS e
        WHERE coalesce(e.value ->> 'name', '') <> ''
    ), claimed AS (
        SELECT DISTINCT m.name FROM m WHERE EXISTS (SELECT 1 FROM dna.memory_claims(m.name, m.spec))
    ), conflicted AS (
        SELECT DISTINCT x.name FROM jsonb_array_elements(contradictions) AS cd
        CROSS JOIN LATERAL jsonb_array_elements_text(cd -> 'names') AS x(name)
    ), refs AS (
        SELECT r.referent, array_agg(DISTINCT m.name ORDER BY m.name) AS names
        FROM m CROSS JOIN LATERAL unnest(dna.memory_referents(m.spec)) AS r(referent)
        GROUP BY r.referent
    )
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'referent', r.referent,
               'names', to_jsonb(ARRAY(SELECT x FROM unnest(r.names) AS x ORDER BY x COLLATE "C")),
               'reason', CASE WHEN r.names <@ ARRAY(SELECT cl.name FROM claimed AS cl)
                              THEN 'no comparable claims — every memory here declares claims, but none share a (subject, predicate)'
                              ELSE 'no claims to compare — the disagreement, if any, is only in prose' END)
               ORDER BY r.referent COLLATE "C"), '[]'::jsonb)
    INTO undecided
    FROM refs AS r
    WHERE cardinality(r.names) >= 2
      AND NOT r.names <@ ARRAY(SELECT cf.name FROM conflicted AS cf);

    RETURN jsonb_build_object('contradictions', contradictions, 'undecided', undecided, 'claims', n_claims);
END
$$;

COMMENT ON FUNCTION dna.contradiction_report(jsonb, jsonb, timestamptz) IS
'Contradictions between the declared claims of members [{name, spec}] (dna.memory_claims). Claims are '
'grouped only by their declared referent (subject, defaulting to the memory''s Kind/name in area or '
'source_refs) and predicate; within a group every pair is tested by dna.claims_contradict. Returns '
'{contradictions[{subject, predicate, names, pairs[{a, b, reason: object|polarity, a_claim, b_claim}], '
'decided_by: rule, proposal (dna.elect_survivor with recorded {name: {recorded_at, approximate}})}], '
'undecided[{referent, names, reason}] (memories sharing a referent that the rule could not compare), '
'claims (how many were read)}. Sorted by subject, predicate, names; undecided by referent. Nothing is applied. Pure.';

CREATE OR REPLACE FUNCTION dna.shell_word(word text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN word ~ '^[A-Za-z0-9._/:@%+=,-]+$' THEN word
                ELSE '''' || replace(coalesce(word, ''), '''', '''"''"''') || '''' END
$$;

COMMENT ON FUNCTION dna.shell_word(text) IS
'word as one POSIX shell word: as it is when it holds only letters, digits and ._/:@%+=,-; else single-quoted (a '
'quote inside as ''"''"''). Pure.';

CREATE OR REPLACE FUNCTION dna.accept_successor(scope text, name text, successor text, kind text, tenant text)
RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT jsonb_build_object(
        'sql', format('SELECT dna.forget(%L, %L, superseded_by => %L, kind => %L%s)', scope, name, successor, kind,
                      CASE WHEN coalesce(tenant, '') = '' THEN ''
                           WHEN starts_with(tenant, 'personal:') THEN ', personal => true'
                           ELSE format(', tenant => %L', tenant) END),
        'cli', concat_ws(' ', 'dna memory forget', dna.shell_word(name), '--superseded-by', dna.shell_word(successor),
                         '--scope', dna.shell_word(scope),
                         CASE WHEN kind IS DISTINCT FROM 'Engram' THEN '--kind ' || dna.shell_word(kind) END,
                         CASE WHEN coalesce(tenant, '') = '' THEN NULL
                              WHEN starts_with(tenant, 'personal:') THEN '--personal'
                              ELSE '--tenant ' || dna.shell_word(tenant) END))
$$;

COMMENT ON FUNCTION dna.accept_successor(text, text, text, text, text) IS
'How to take successor as the memory that replaces name (scope, Kind, tenant as stored; personal:… = the caller''s '
'personal partition): {sql: the dna.forget call with superseded_by, cli: the same as a `dna memory forget` command, each '
'word shell-quoted where needed}. Soft: dna.forget closes the world-time window and dna.revive undoes it. Pure.';

CREATE OR REPLACE FUNCTION dna.flag_contradicted(scope text, tenant text, hits jsonb, now timestamptz)
RETURNS jsonb
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_variable
DECLARE
    mine jsonb;
    recallable text[];
BEGIN
    IF hits IS NULL OR jsonb_array_length(hits) = 0 THEN
        RETURN hits;
    END IF;
    -- The hits' own claims (dna.memory_claims of the stored spec), with when each hit was first recorded;
    -- one index probe per hit. None: the hits as they are, no further read.
    SELECT jsonb_agg(jsonb_build_object('ord', h.ord, 'kind', h.value ->> 'kind', 'name', h.value ->> 'name',
                                        'tenant', h.value ->> 'tenant', 'claim', c.claim, 'recorded', i.created_at))
    INTO mine
    FROM jsonb_array_elements(hits) WITH ORDINALITY AS h(value, ord)
    JOIN LATERAL (SELECT i.spec, i.created_at FROM dna.dna_instances AS i
                  WHERE i.scope = scope AND i.kind = h.value ->> 'kind' AND i.name = h.value ->> 'name'
                    AND i.tenant = h.value ->> 'tenant' LIMIT 1) AS i ON true
    CROSS JOIN LATERAL dna.memory_claims(h.value ->> 'name', i.spec) AS c(claim)
    WHERE jsonb_typeof(i.spec -> 'claims') = 'array';
    IF mine IS NULL THEN
        RETURN hits;
    END IF;
    recallable := dna.recallable_kinds();          -- by its own statement (Citus rule 4, sql/tenancy.sql)
    RETURN (
        WITH m AS (
            SELECT (e.value ->> 'ord')::bigint AS ord, e.value ->> 'kind' AS kind, e.value ->> 'name' AS name,
                   e.value ->> 'tenant' AS tenant, e.value -> 'claim' AS claim,
                   (e.value ->> 'recorded')::timestamptz AS recorded
            FROM jsonb_array_elements(mine) AS e
        ), rival AS MATERIALIZED (               -- memories of the read's partitions that declare claims, in force now
            SELECT o.kind, o.name, o.tenant, o.created_at, c.claim
            FROM dna.dna_instances AS o
            CROSS JOIN LATERAL dna.memory_claims(o.name, o.spec) AS c(claim)
            WHERE o.scope = scope AND o.tenant IN (tenant, '') AND jsonb_typeof(o.spec -> 'claims') = 'array'
              AND o.kind = ANY (recallable)
              AND (o.valid_at IS NULL OR o.valid_at @> now) AND dna.currently_valid(o.spec ->> 'valid_to', now)
        ), flagged AS (
            SELECT m.ord, jsonb_agg(DISTINCT jsonb_build_object(
                       'kind', r.kind, 'name', r.name, 'tenant', r.tenant, 'recorded_at', dna.iso8601(r.created_at),
                       'reason', dna.claims_contradict(m.claim, r.claim),
                       'claim', jsonb_strip_nulls(jsonb_build_object('subject', r.claim -> 'subject',
                                                                     'predicate', r.claim -> 'predicate',
                                                                     'object', r.claim -> 'object',
                                                                     'polarity', CASE WHEN r.claim ->> 'polarity' = 'denies'
                                                                                      THEN 'denies' END)),
                       'accept', dna.accept_successor(scope, m.name, r.name, m.kind, m.tenant))) AS by
            FROM m
            JOIN rival AS r ON r.created_at > m.recorded
                           AND (r.kind, r.name, r.tenant) IS DISTINCT FROM (m.kind, m.name, m.tenant)
                           AND dna.claims_contradict(m.claim, r.claim) IS NOT NULL
            GROUP BY m.ord
        )
        SELECT jsonb_agg(CASE WHEN f.by IS NULL THEN h.value
                              ELSE h.value || jsonb_build_object('contradicted_by', (
                                  SELECT jsonb_agg(x ORDER BY x ->> 'recorded_at' DESC, x ->> 'name' COLLATE "C", x ->> 'kind' COLLATE "C")
                                  FROM jsonb_array_elements(f.by) AS x)) END
                         ORDER BY h.ord)
        FROM jsonb_array_elements(hits) WITH ORDINALITY AS h(value, ord)
        LEFT JOIN flagged AS f ON f.ord = h.ord);
END
$$;

COMMENT ON FUNCTION dna.flag_contradicted(text, text, jsonb, timestamptz) IS
'recall''s hits (jsonb array) with, on each hit whose declared claim (dna.memory_claims) a newer memory contradicts '
'(dna.claims_contradict: same subject and predicate, overlapping windows, another object or the opposite polarity), '
'contradicted_by: [{kind, name, tenant, recorded_at, reason: object|polarity, claim {subject, predicate, object?, '
'polarity?}, accept}], newest first. The rival is a memory of a recallable Kind in the read''s partitions (tenant, and '
'the base), in force at now (valid_at, valid_to) and first recorded after the hit (dna_instances.created_at, '
'transaction time: the basis of consolidate''s proposal, dna.elect_survivor); accept is the one call that takes it as '
'the successor (dna.accept_successor: {sql, cli}, the dna.forget call and the `dna memory forget` command). Row-level security applies. Order '
'and scores are unchanged. One probe per hit, and one read of the claims of the read''s partitions when a hit '
'declares claims. dna.recall calls it.';
