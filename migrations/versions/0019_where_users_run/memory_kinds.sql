-- pydna SQL package — memory plane: memory Kinds, specs and claims.
--
-- Memory is not a new store: it is the Kinds that declare the trait `memory.recallable` (seeded:
-- Engram, Research, Evidence) in dna.dna_instances, indexed into the search tables like any record.
-- Every verb is one function returning jsonb: dna.remember, dna.recall, dna.forget, dna.revive,
-- dna.list_memories (and dna.consolidate in sql/consolidate.sql). Pure scoring functions take `now`
-- as an argument and reproduce ../shared/conformance/dna/memory-scoring.json (the DNA SDK goldens,
-- ruinosus/dna, MIT) to 1e-12.
--
-- Two clocks. World (valid) time: spec.valid_from / spec.valid_to, mirrored into the column
-- valid_at = [valid_from, valid_to); `now` arguments read it. Transaction time: dna.dna_versions
-- .created_at, the instant a version was written; `as_of` arguments read it.
--
-- Triggers (created by migration 0002_memory): dna.instances_before_write (bitemporal guard +
-- valid_at mirror), dna.instances_after_write (append the envelope to dna_versions, prune past
-- the Kind's retention), dna.instances_refuse_delete and dna.search_docs_refuse_delete (DELETE of
-- an invalidate-only Kind is refused; the error names dna.forget).
--
-- SQLSTATEs used: 22023 invalid argument, 22001 too long, 22007 bad timestamp, P0002 no such
-- memory, 23001 refused delete (restrict_violation), 42501 reserved tenant (dna.check_tenant).
--
-- The memory plane is five files, run in this order by migration 0015_governed_history:
-- memory_time.sql (time helpers), memory_scoring.sql (pure scoring, conformance goldens),
-- memory_kinds.sql (memory Kinds, specs and claims), memory_write.sql (the write path's trigger
-- functions) and memory_verbs.sql (dna.remember, recall, forget, revive, list_memories).

-- ---------------------------------------------------------------------------------------------
-- Kinds, specs and claims
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.recallable_kinds()
RETURNS text[]
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $$
BEGIN
    RETURN (
        SELECT coalesce(array_agg(k.kind ORDER BY k.kind COLLATE "C"), '{}')
        FROM dna.dna_kinds AS k WHERE 'memory.recallable' = ANY (k.traits)
    );
END
$$;

COMMENT ON FUNCTION dna.recallable_kinds() IS
'The memory Kinds: those of dna.dna_kinds with the trait memory.recallable, sorted (seeded: Engram, Evidence, Research).';

CREATE OR REPLACE FUNCTION dna.check_memory_kind(kind text)
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    PERFORM dna.check_kind(kind);                         -- the name rule (sql/catalog.sql)
    IF NOT (kind = ANY (dna.recallable_kinds())) THEN
        RAISE EXCEPTION '% is not a memory Kind (memory Kinds: %)', quote_literal(kind),
            array_to_string(dna.recallable_kinds(), ', ')
            USING ERRCODE = '22023',
                  HINT = 'A Kind is a memory Kind when dna.dna_kinds gives it the trait memory.recallable.';
    END IF;
    RETURN kind;
END
$$;

COMMENT ON FUNCTION dna.check_memory_kind(text) IS
'Returns kind when it is a memory Kind (trait memory.recallable). Errors: 22023 otherwise (the message lists them).';

CREATE OR REPLACE FUNCTION dna.check_memory_kinds(kinds text[])
RETURNS text[]
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    kd text;
BEGIN
    IF kinds IS NULL THEN
        RETURN dna.recallable_kinds();
    END IF;
    FOREACH kd IN ARRAY kinds LOOP
        PERFORM dna.check_memory_kind(kd);
    END LOOP;
    RETURN kinds;
END
$$;

COMMENT ON FUNCTION dna.check_memory_kinds(text[]) IS
'The kinds argument of a reading verb (dna.recall, dna.list_memories): NULL → dna.recallable_kinds(); '
'otherwise kinds unchanged once each is checked by dna.check_memory_kind. Errors: 22023 (not a memory Kind).';

CREATE OR REPLACE FUNCTION dna.validate_claims(claims jsonb)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    item jsonb;
    i integer := 0;
    unknown text[];
    out jsonb := '[]'::jsonb;
    claim jsonb;
    f text;
    allowed constant text[] := ARRAY['object', 'polarity', 'predicate', 'subject', 'valid_from', 'valid_to'];
BEGIN
    IF claims IS NULL OR jsonb_typeof(claims) = 'null' THEN
        RETURN '[]'::jsonb;
    END IF;
    IF jsonb_typeof(claims) <> 'array' THEN
        RAISE EXCEPTION 'claims must be a list of objects, got %', jsonb_typeof(claims) USING ERRCODE = '22023';
    END IF;
    FOR item IN SELECT e FROM jsonb_array_elements(claims) AS e LOOP
        IF jsonb_typeof(item) <> 'object' THEN
            RAISE EXCEPTION 'claims[%] must be an object, got %', i, jsonb_typeof(item) USING ERRCODE = '22023';
        END IF;
        unknown := ARRAY(SELECT k FROM jsonb_object_keys(item) AS k WHERE NOT (k = ANY (allowed)) ORDER BY k COLLATE "C");
        IF cardinality(unknown) > 0 THEN
            RAISE EXCEPTION 'claims[%] has unknown field(s) %; allowed: %', i,
                array_to_string(unknown, ', '), array_to_string(allowed, ', ') USING ERRCODE = '22023';
        END IF;
        IF jsonb_typeof(item -> 'predicate') IS DISTINCT FROM 'string' OR btrim(item ->> 'predicate') = '' THEN
            RAISE EXCEPTION 'claims[%].predicate is required and must be a non-empty string', i USING ERRCODE = '22023';
        END IF;
        claim := jsonb_build_object('predicate', btrim(item ->> 'predicate'));
        IF item ? 'subject' AND jsonb_typeof(item -> 'subject') <> 'null' THEN
            IF jsonb_typeof(item -> 'subject') <> 'string' OR btrim(item ->> 'subject') = '' THEN
                RAISE EXCEPTION 'claims[%].subject must be a non-empty string when present', i USING ERRCODE = '22023';
            END IF;
            claim := claim || jsonb_build_object('subject', btrim(item ->> 'subject'));
        END IF;
        IF item ? 'object' THEN
            IF jsonb_typeof(item -> 'object') NOT IN ('string', 'number', 'boolean', 'null') THEN
                RAISE EXCEPTION 'claims[%].object must be a string, number, boolean or null, got %', i,
                    jsonb_typeof(item -> 'object') USING ERRCODE = '22023';
            END IF;
            IF jsonb_typeof(item -> 'object') = 'number'
               AND (abs((item ->> 'object')::numeric) > 1e15 OR scale((item ->> 'object')::numeric) > 15) THEN
                RAISE EXCEPTION 'claims[%].object must be a number of magnitude at most 1e15 with at most 15 decimals, got %',
                    i, left(item ->> 'object', 40) USING ERRCODE = '22003',
                    HINT = 'Give a larger or more precise value as a string.';
            END IF;
            claim := claim || jsonb_build_object('object', item -> 'object');
        END IF;
        IF coalesce(item ->> 'polarity', 'asserts') NOT IN ('asserts', 'denies') THEN
            RAISE EXCEPTION 'claims[%].polarity must be asserts or denies, got %', i, item -> 'polarity'
                USING ERRCODE = '22023';
        END IF;
        claim := claim || jsonb_build_object('polarity', coalesce(item ->> 'polarity', 'asserts'));
        FOREACH f IN ARRAY ARRAY['valid_from', 'valid_to'] LOOP
            CONTINUE WHEN NOT item ? f OR jsonb_typeof(item -> f) = 'null';
            IF jsonb_typeof(item -> f) <> 'string' OR dna.parse_timestamptz(item ->> f) IS NULL THEN
                RAISE EXCEPTION 'claims[%].% must be an ISO-8601 timestamp string, got %', i, f, item -> f
                    USING ERRCODE = '22007';
            END IF;
            claim := claim || jsonb_build_object(f, btrim(item ->> f));
        END LOOP;
        out := out || jsonb_build_array(claim);
        i := i + 1;
    END LOOP;
    RETURN out;
END
$$;

COMMENT ON FUNCTION dna.validate_claims(jsonb) IS
'Validates and canonicalises spec.claims: a list of {subject?, predicate, object?, polarity: '
'asserts|denies (default asserts), valid_from?, valid_to?}; strings stripped. Returns the canonical '
'list ([] for NULL). Errors: 22023 naming claims[i] and the field for a non-list, a non-object, an '
'unknown key, a blank predicate/subject, a non-scalar object or a bad polarity; 22003 for a number object of '
'magnitude above 1e15 or more than 15 decimals; 22007 for a bad timestamp.';

CREATE OR REPLACE FUNCTION dna.derive_encoding_context(spec jsonb)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    RETURN (
        SELECT jsonb_build_object(
            'area', coalesce(CASE WHEN dna.json_truthy(spec -> 'area') THEN spec ->> 'area' END, ''),
            'affect', coalesce(CASE WHEN dna.json_truthy(spec -> 'affect') THEN spec ->> 'affect' END, 'neutral'),
            'time_of_day', dna.time_of_day(spec ->> 'created_at'),
            'co_topics', coalesce((SELECT jsonb_agg(t.tag ORDER BY t.first)
                                   FROM (SELECT e.tag, min(e.ord) AS first
                                         FROM jsonb_array_elements_text(CASE WHEN jsonb_typeof(spec -> 'tags') = 'array'
                                                                             THEN spec -> 'tags' ELSE '[]' END)
                                              WITH ORDINALITY AS e(tag, ord)
                                         WHERE e.tag <> '' GROUP BY e.tag ORDER BY first LIMIT 5) AS t), '[]'::jsonb),
            'source_refs', CASE WHEN jsonb_typeof(spec -> 'source_refs') = 'array' THEN spec -> 'source_refs' ELSE '[]' END,
            '_derived', 'verb-autostamp')
    );
END
$$;

COMMENT ON FUNCTION dna.derive_encoding_context(jsonb) IS
'The encoding context stamped on a remembered Engram: {area (spec.area or ''''), affect (spec.affect '
'or neutral), time_of_day (hour of spec.created_at), co_topics (first 5 distinct tags), source_refs, '
'_derived: verb-autostamp}. Pure.';

CREATE OR REPLACE FUNCTION dna.prepare_memory_spec(kind text, spec jsonb, now timestamptz)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    f text;
    tag jsonb;
    ec jsonb;
    clash text[];
BEGIN
    IF spec IS NULL OR jsonb_typeof(spec) <> 'object' THEN
        RAISE EXCEPTION 'spec must be a JSON object, got %', coalesce(jsonb_typeof(spec), 'NULL') USING ERRCODE = '22023';
    END IF;
    FOREACH f IN ARRAY ARRAY['summary', 'title', 'body', 'area', 'affect', 'memory_type', 'superseded_by_memory'] LOOP
        IF spec ? f AND jsonb_typeof(spec -> f) NOT IN ('string', 'null') THEN
            RAISE EXCEPTION 'spec.% must be a string, got %', f, jsonb_typeof(spec -> f) USING ERRCODE = '22023';
        END IF;
    END LOOP;
    FOREACH f IN ARRAY ARRAY['tags', 'source_refs'] LOOP
        IF spec ? f AND jsonb_typeof(spec -> f) <> 'null' THEN
            IF jsonb_typeof(spec -> f) <> 'array' THEN
                RAISE EXCEPTION 'spec.% must be a list of strings, got %', f, jsonb_typeof(spec -> f) USING ERRCODE = '22023';
            END IF;
            FOR tag IN SELECT e FROM jsonb_array_elements(spec -> f) AS e LOOP
                IF jsonb_typeof(tag) <> 'string' THEN
                    RAISE EXCEPTION 'spec.% must be a list of strings, found %', f, tag USING ERRCODE = '22023';
                END IF;
            END LOOP;
        END IF;
    END LOOP;
    FOREACH f IN ARRAY ARRAY['created_at', 'valid_from', 'valid_to', 'last_surfaced'] LOOP
        IF spec ? f AND jsonb_typeof(spec -> f) <> 'null'
           AND (jsonb_typeof(spec -> f) <> 'string' OR dna.parse_timestamptz(spec ->> f) IS NULL) THEN
            RAISE EXCEPTION 'spec.% must be an ISO-8601 timestamp string, got %', f, spec -> f USING ERRCODE = '22007';
        END IF;
    END LOOP;
    IF jsonb_typeof(spec -> 'affect') = 'string' AND NOT (spec ->> 'affect' = ANY (dna.memory_affects())) THEN
        RAISE EXCEPTION 'spec.affect % is not an affect (affects: %)', quote_literal(spec ->> 'affect'),
            array_to_string(dna.memory_affects(), ', ')
            USING ERRCODE = '22023', HINT = 'Leave it out for neutral.';
    END IF;
    IF spec ? 'confidence_score' AND NOT (
           jsonb_typeof(spec -> 'confidence_score') = 'number'
           OR lower(spec ->> 'confidence_score') IN ('faint', 'firm', 'burning')) THEN
        RAISE EXCEPTION 'spec.confidence_score must be a number or one of faint, firm, burning, got %',
            spec -> 'confidence_score' USING ERRCODE = '22023';
    END IF;
    IF spec ? 'engram_stability_days' AND NOT (jsonb_typeof(spec -> 'engram_stability_days') = 'number'
                                               AND (spec ->> 'engram_stability_days')::numeric > 0) THEN
        RAISE EXCEPTION 'spec.engram_stability_days must be a number of days > 0, got %',
            spec -> 'engram_stability_days' USING ERRCODE = '22023';
    END IF;
    -- Numbers are bounded at the door, so nothing stored can later overflow a read of the scope.
    IF jsonb_typeof(spec -> 'confidence_score') = 'number'
       AND NOT ((spec ->> 'confidence_score')::numeric BETWEEN 0 AND 10) THEN
        RAISE EXCEPTION 'spec.confidence_score must be between 0 and 10, got %', spec -> 'confidence_score'
            USING ERRCODE = '22003', HINT = 'Tiers: faint (1), firm (3), burning (5); reconsolidation caps at 10.';
    END IF;
    IF jsonb_typeof(spec -> 'engram_stability_days') = 'number'
       AND (spec ->> 'engram_stability_days')::numeric > 365000 THEN
        RAISE EXCEPTION 'spec.engram_stability_days must be at most 365000 days (1000 years), got %',
            spec -> 'engram_stability_days' USING ERRCODE = '22003';
    END IF;
    IF spec ? 'surface_count' AND jsonb_typeof(spec -> 'surface_count') <> 'null' AND NOT (
           jsonb_typeof(spec -> 'surface_count') = 'number'
           AND (spec ->> 'surface_count')::numeric = trunc((spec ->> 'surface_count')::numeric)) THEN
        RAISE EXCEPTION 'spec.surface_count must be a whole number, got %', spec -> 'surface_count' USING ERRCODE = '22023';
    END IF;
    IF jsonb_typeof(spec -> 'surface_count') = 'number'
       AND NOT ((spec ->> 'surface_count')::numeric BETWEEN 0 AND 1000000000) THEN
        RAISE EXCEPTION 'spec.surface_count must be between 0 and 1000000000, got %', spec -> 'surface_count'
            USING ERRCODE = '22003';
    END IF;
    IF spec ? 'claims' THEN
        spec := jsonb_set(spec, '{claims}', dna.validate_claims(spec -> 'claims'));
    END IF;
    IF spec ? 'conversation' AND jsonb_typeof(spec -> 'conversation') NOT IN ('object', 'null') THEN
        RAISE EXCEPTION 'spec.conversation must be an object {id, session, turn, speaker, role, session_date}, got a JSON %',
            jsonb_typeof(spec -> 'conversation') USING ERRCODE = '22023',
            HINT = 'dna.remember_conversation writes it for each turn.';
    END IF;
    -- metadata: what filters read beside the memory's own fields (sql/metadata.sql), which it may not shadow.
    IF spec ? 'metadata' THEN
        spec := jsonb_set(spec, '{metadata}', dna.check_metadata(spec -> 'metadata', 'spec.metadata'));
        SELECT array_agg(k ORDER BY k) INTO clash
        FROM jsonb_object_keys(spec -> 'metadata') AS k WHERE k = ANY (dna.memory_field_names());
        IF clash IS NOT NULL THEN
            RAISE EXCEPTION 'spec.metadata may not hold %: the memory''s own field of that name is what filters read',
                array_to_string(clash, ', ')
                USING ERRCODE = '22023',
                      HINT = format('Give them as the memory''s fields (spec.tags, spec.area, spec.created_at...) or rename them; '
                                    'the memory fields: %s.', array_to_string(dna.memory_field_names(), ', '));
        END IF;
    END IF;

    IF kind = 'Engram' THEN
        IF jsonb_typeof(spec -> 'summary') IS DISTINCT FROM 'string' OR btrim(spec ->> 'summary') = '' THEN
            RAISE EXCEPTION 'an Engram needs spec.summary (a non-blank string of at most 280 characters)'
                USING ERRCODE = '22023';
        END IF;
        IF length(spec ->> 'summary') > 280 THEN
            RAISE EXCEPTION 'spec.summary is % characters long; the limit is 280 (put the rest in spec.body)',
                length(spec ->> 'summary') USING ERRCODE = '22001';
        END IF;
    ELSIF dna.memory_text(kind, spec) = '' THEN
        RAISE EXCEPTION 'a % needs text to index: give spec.title, spec.summary or spec.body', kind
            USING ERRCODE = '22023';
    END IF;

    IF NOT dna.json_truthy(spec -> 'created_at') THEN
        spec := spec || jsonb_build_object('created_at', dna.iso8601(now));
    END IF;
    IF kind = 'Engram' THEN
        ec := spec -> 'encoding_context';
        IF ec IS NOT NULL AND jsonb_typeof(ec) NOT IN ('object', 'null') THEN
            RAISE EXCEPTION 'spec.encoding_context must be an object, got %', jsonb_typeof(ec) USING ERRCODE = '22023';
        END IF;
        IF jsonb_typeof(ec) = 'object' AND ec <> '{}'::jsonb THEN
            IF jsonb_typeof(ec -> 'co_topics') = 'array' AND jsonb_array_length(ec -> 'co_topics') > 5 THEN
                RAISE EXCEPTION 'spec.encoding_context.co_topics holds % topics; the limit is 5',
                    jsonb_array_length(ec -> 'co_topics') USING ERRCODE = '22023';
            END IF;
        ELSE
            spec := spec || jsonb_build_object('encoding_context', dna.derive_encoding_context(spec));
        END IF;
        IF NOT dna.json_truthy(spec -> 'memory_type') THEN
            spec := spec || jsonb_build_object('memory_type', dna.classify_memory_type(spec));
        END IF;
    END IF;
    IF NOT dna.json_truthy(spec -> 'valid_from') THEN
        spec := spec || jsonb_build_object('valid_from', spec -> 'created_at');
    END IF;
    RETURN spec;
END
$$;

COMMENT ON FUNCTION dna.prepare_memory_spec(text, jsonb, timestamptz) IS
'Validates a memory spec and stamps it (pure, now = world time of the write): created_at (ISO-8601 of '
'now) unless given; for an Engram the encoding_context (dna.derive_encoding_context) unless given and '
'the memory_type (dna.classify_memory_type) unless given; valid_from = created_at unless given; '
'claims canonicalised (dna.validate_claims). Rules: Engram summary required, <= 280 chars; other '
'Kinds need text in their embed fields; summary/title/body/area/affect/memory_type strings; tags and '
'source_refs lists of strings; encoding_context.co_topics <= 5; confidence_score a number or '
'faint|firm|burning, a number in [0, 10] (22003 outside); engram_stability_days in (0, 365000] (22003 above); '
'surface_count a whole number in [0, 1e9] (22003 outside); affect one of dna.memory_affects() (triumph, regret, surprise, '
'wistful, ominous, neutral); metadata a JSON object of at most 65536 bytes (dna.check_metadata) without the keys '
'of dna.memory_field_names() (the memory''s own fields, which filters read beside it). Errors: 22023, 22003 (a '
'number out of range, naming the field), 22001 (summary too long, metadata too large), 22007 (bad timestamp).';
