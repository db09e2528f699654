-- pydna SQL package — memory plane.
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

-- ---------------------------------------------------------------------------------------------
-- Time helpers
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.parse_timestamptz(value text)
RETURNS timestamptz
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    v text;
    shape text;
    rest text;
    t text := '00:00:00';
    frac text := '';
    tz text := '+00:00';
    y integer;
    mo integer;
    d integer;
    n integer;
BEGIN
    -- ISO-8601 only (what Python's datetime.fromisoformat reads): YYYY-MM-DD, optional time
    -- HH:MM, HH:MM:SS or HH:MM:SS.f (1-6 digits) after T or a space, optional Z or an offset ±HH,
    -- ±HHMM or ±HH:MM; no offset = UTC.
    -- Parsed by the digit shape (translate), not a regular expression: the hot paths call this
    -- for every candidate and cue, and regular expressions compete for a small compiled cache.
    -- Every field is range-checked (the day against its month), so the cast never raises.
    IF value IS NULL THEN
        RETURN NULL;
    END IF;
    v := btrim(value, E' \t\n\r');
    shape := translate(v, '0123456789', '9999999999');
    IF left(shape, 10) <> '9999-99-99' THEN
        RETURN NULL;
    END IF;
    rest := substr(shape, 11);
    IF rest <> '' THEN
        IF left(rest, 1) NOT IN ('T', ' ') OR substr(rest, 2, 5) <> '99:99' THEN
            RETURN NULL;
        END IF;
        t := substr(v, 12, 5) || ':' || '00';
        rest := substr(rest, 7);
        IF left(rest, 3) = (':' || '99') THEN
            t := substr(v, 12, 8);
            rest := substr(rest, 4);
            IF left(rest, 2) = '.9' THEN
                n := length(rest) - length(ltrim(substr(rest, 2), '9')) - 1;   -- digits after the point
                IF n > 6 THEN
                    RETURN NULL;
                END IF;
                frac := substr(v, 20, n + 1);
                rest := substr(rest, n + 2);
            END IF;
        END IF;
        rest := btrim(rest);
        IF rest IN ('Z', 'z', '') THEN
            NULL;
        ELSIF rest IN ('+99', '-99', '+99:99', '-99:99', '+9999', '-9999') THEN
            tz := right(v, length(rest));
            tz := left(tz, 3) || ':' || CASE WHEN length(tz) = 3 THEN '00' ELSE right(tz, 2) END;
            IF substr(tz, 2, 2)::integer > 15 OR right(tz, 2)::integer > 59 THEN
                RETURN NULL;
            END IF;
        ELSE
            RETURN NULL;
        END IF;
        IF left(t, 2)::integer > 23 OR substr(t, 4, 2)::integer > 59 OR right(t, 2)::integer > 59 THEN
            RETURN NULL;
        END IF;
    END IF;
    y := left(v, 4)::integer;
    mo := substr(v, 6, 2)::integer;
    d := substr(v, 9, 2)::integer;
    IF y < 1 OR mo < 1 OR mo > 12 OR d < 1
       OR d > extract(day FROM make_date(y, mo, 1) + interval '1 month' - interval '1 day') THEN
        RETURN NULL;                                       -- e.g. month 13, February 30
    END IF;
    RETURN (left(v, 10) || ' ' || t || frac || tz)::timestamptz;
END
$$;

COMMENT ON FUNCTION dna.parse_timestamptz(text) IS
'Parses an ISO-8601 timestamp (YYYY-MM-DD, optional time HH:MM, HH:MM:SS or HH:MM:SS.ffffff after T or a space, optional Z or ±HH or ±HHMM or ±HH:MM; '
'no offset = UTC) as Python''s datetime.fromisoformat does; returns NULL (never raises) for NULL, '
'blank or unparseable text, and for PostgreSQL specials such as ''now'' or ''infinity''. Pure.';

CREATE OR REPLACE FUNCTION dna.iso8601(ts timestamptz)
RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT CASE WHEN NOT isfinite(ts) THEN NULL
                WHEN (extract(microseconds FROM ts)::bigint % 1000000) = 0
                THEN to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"+00:00"')
                ELSE to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"') END
$$;

COMMENT ON FUNCTION dna.iso8601(timestamptz) IS
'A timestamp as ISO-8601 text in UTC, the way Python''s datetime.isoformat() writes it: '
'2026-07-09T15:00:00+00:00, with .ffffff only when there are microseconds. NULL for ±infinity. Pure.';

CREATE OR REPLACE FUNCTION dna.days_since(ts text, now timestamptz)
RETURNS double precision
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    p timestamptz := dna.parse_timestamptz(ts);
BEGIN
    IF p IS NULL OR now IS NULL THEN
        RETURN NULL;
    END IF;
    RETURN greatest((extract(epoch FROM now) - extract(epoch FROM p))::float8 / 86400.0, 0.0);
END
$$;

COMMENT ON FUNCTION dna.days_since(text, timestamptz) IS
'Days (float, >= 0) from the ISO-8601 timestamp ts to now; NULL when ts is NULL or unparseable. Pure.';

CREATE OR REPLACE FUNCTION dna.check_now(now timestamptz, what text DEFAULT 'now')
RETURNS timestamptz
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    IF now IS NOT NULL AND NOT isfinite(now) THEN
        RAISE EXCEPTION '% must be a finite timestamp, got %', what, now USING ERRCODE = '22007';
    END IF;
    RETURN now;
END
$$;

COMMENT ON FUNCTION dna.check_now(timestamptz, text) IS
'Returns now unchanged; raises 22007 (naming the argument) when it is ±infinity.';

-- ---------------------------------------------------------------------------------------------
-- Pure scoring (conformance: memory-scoring.json)
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.ebbinghaus_retention(stability_days double precision,
                                                    days_since_recall double precision)
RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN days_since_recall IS NULL OR days_since_recall <= 0 THEN 1.0::float8
                ELSE exp(-days_since_recall / greatest(0.1, coalesce(stability_days, 15.0))) END
$$;

COMMENT ON FUNCTION dna.ebbinghaus_retention(double precision, double precision) IS
'Ebbinghaus retention R = exp(-t/S), t = days since last recall, S = stability in days (floored '
'at 0.1). Never recalled (t NULL) or t <= 0 → 1.0. Result in (0, 1]. Pure. Golden: ebbinghaus_retention.';

CREATE OR REPLACE FUNCTION dna.currently_valid(valid_to text, now timestamptz)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN valid_to IS NULL OR valid_to = '' THEN true
                ELSE coalesce(dna.parse_timestamptz(valid_to) > now, true) END
$$;

COMMENT ON FUNCTION dna.currently_valid(text, timestamptz) IS
'Validity of a memory at world time now judged on valid_to alone: NULL, empty or unparseable '
'valid_to → true (fail-open: never hides a memory on a bad timestamp); else valid_to > now. '
'Pure. Golden: currently_valid. (Recall also requires valid_from <= now, through the valid_at column.)';

CREATE OR REPLACE FUNCTION dna.confidence_score_numeric(spec jsonb, fallback double precision DEFAULT 1.0)
RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE jsonb_typeof(spec -> 'confidence_score')
               WHEN 'number' THEN (spec ->> 'confidence_score')::float8
               WHEN 'boolean' THEN CASE WHEN (spec -> 'confidence_score')::boolean THEN 1.0 ELSE 0.0 END
               WHEN 'string' THEN CASE lower(spec ->> 'confidence_score')
                                      WHEN 'faint' THEN 1.0 WHEN 'firm' THEN 3.0 WHEN 'burning' THEN 5.0
                                      ELSE fallback END
               ELSE fallback END
$$;

COMMENT ON FUNCTION dna.confidence_score_numeric(jsonb, double precision) IS
'spec.confidence_score as a number: a number as is (1.0–10.0 by convention); tiers faint 1, firm 3, '
'burning 5; missing or malformed → fallback (default 1.0). Pure. Golden: confidence_score_numeric.';

CREATE OR REPLACE FUNCTION dna.stability_from_spec(spec jsonb)
RETURNS double precision
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    s double precision;
BEGIN
    IF spec IS NULL OR jsonb_typeof(spec) <> 'object' OR spec = '{}'::jsonb THEN
        RETURN 15.0;
    END IF;
    IF jsonb_typeof(spec -> 'engram_stability_days') = 'number'
       AND (spec ->> 'engram_stability_days')::float8 > 0 THEN
        RETURN (spec ->> 'engram_stability_days')::float8;
    END IF;
    CASE jsonb_typeof(spec -> 'confidence_score')
    WHEN 'string' THEN
        RETURN CASE lower(spec ->> 'confidence_score')
                   WHEN 'faint' THEN 5.0 WHEN 'firm' THEN 15.0 WHEN 'burning' THEN 45.0 ELSE 15.0 END;
    WHEN 'number' THEN
        s := (spec ->> 'confidence_score')::float8;
        IF s <= 1.0 THEN
            RETURN 5.0;
        ELSIF s <= 5.0 THEN
            RETURN 5.0 + ((s - 1.0) / 4.0) * (15.0 - 5.0);
        ELSIF s <= 10.0 THEN
            RETURN 15.0 + ((s - 5.0) / 5.0) * (45.0 - 15.0);
        END IF;
        RETURN 45.0;
    ELSE
        RETURN 15.0;
    END CASE;
END
$$;

COMMENT ON FUNCTION dna.stability_from_spec(jsonb) IS
'Ebbinghaus stability S in days from a memory spec: engram_stability_days > 0 wins; tiers faint 5, '
'firm 15, burning 45; a numeric confidence_score s: <= 1 → 5, <= 5 → 5 + (s-1)/4·10, <= 10 → '
'15 + (s-5)/5·30, else 45; otherwise 15. Pure. Golden: stability_from_spec.';

CREATE OR REPLACE FUNCTION dna.classify_memory_type(spec jsonb)
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    body text;
    area text;
    w text;
BEGIN
    IF jsonb_typeof(spec -> 'memory_type') = 'string' AND btrim(spec ->> 'memory_type') <> '' THEN
        RETURN btrim(spec ->> 'memory_type');              -- any declared type wins
    END IF;
    body := lower(coalesce(nullif(spec ->> 'summary', ''), '') || ' ' || coalesce(nullif(spec ->> 'body', ''), ''));
    FOREACH w IN ARRAY ARRAY['always', 'never', 'must', 'should', 'don''t', 'do not', 'ensure',
                             'sempre', 'nunca', 'deve', 'não ', 'garanta', 'evite', 'prefira'] LOOP
        IF strpos(body, w) > 0 THEN
            RETURN 'procedural';
        END IF;
    END LOOP;
    area := lower(coalesce(spec ->> 'area', ''));
    IF starts_with(area, 'feature/') OR starts_with(area, 'epic/') OR starts_with(area, 'story/')
       OR starts_with(area, 'issue/') OR starts_with(area, 'roadmap/') THEN
        RETURN 'episodic';
    END IF;
    RETURN 'semantic';
END
$$;

COMMENT ON FUNCTION dna.classify_memory_type(jsonb) IS
'CoALA memory type of a spec: a declared non-blank memory_type wins; a rule word in summary/body '
'(always, never, must, should, don''t, do not, ensure, sempre, nunca, deve, "não ", garanta, evite, '
'prefira) → procedural; area starting feature/, epic/, story/, issue/, roadmap/ → episodic; else '
'semantic. Pure. Golden: classify_memory_type.';

CREATE OR REPLACE FUNCTION dna.time_of_day(hour integer)
RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT CASE WHEN hour >= 5 AND hour < 12 THEN 'morning'
                WHEN hour >= 12 AND hour < 18 THEN 'afternoon'
                WHEN hour >= 18 AND hour < 22 THEN 'evening'
                ELSE 'night' END
$$;

COMMENT ON FUNCTION dna.time_of_day(integer) IS
'Hour (0–23) → morning (5–11), afternoon (12–17), evening (18–21), night (else). Pure. Golden: time_of_day.';

CREATE OR REPLACE FUNCTION dna.time_of_day(ts text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    -- The hour as written (local to the timestamp's own offset, as Python's dt.hour), else UTC.
    SELECT dna.time_of_day(coalesce(
        (regexp_match(ts, '^\s*\d{4}-\d{2}-\d{2}[T ](\d{2}):'))[1]::integer,
        extract(hour FROM dna.parse_timestamptz(ts) AT TIME ZONE 'UTC')::integer))
$$;

COMMENT ON FUNCTION dna.time_of_day(text) IS
'time_of_day of an ISO-8601 timestamp''s hour as written (its own offset); NULL when unparseable. Pure.';

CREATE OR REPLACE FUNCTION dna.affect_factor(affect text)
RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE affect WHEN 'triumph' THEN 1.2 WHEN 'regret' THEN 1.3 WHEN 'surprise' THEN 1.5
                       WHEN 'wistful' THEN 1.0 WHEN 'ominous' THEN 1.4 ELSE 1.0 END::float8
$$;

COMMENT ON FUNCTION dna.affect_factor(text) IS
'Recall multiplier of an affect: triumph 1.2, regret 1.3, surprise 1.5, wistful 1.0, ominous 1.4, '
'anything else (neutral, NULL) 1.0. Pure.';

CREATE OR REPLACE FUNCTION dna.memory_affects()
RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT ARRAY['triumph', 'regret', 'surprise', 'wistful', 'ominous', 'neutral']
$$;

COMMENT ON FUNCTION dna.memory_affects() IS
'The affects a memory may carry (spec.affect, checked by dna.prepare_memory_spec), in the order `dna memory '
'remember --help` lists them: triumph, regret, surprise, wistful, ominous, neutral (the default: no '
'affect given). dna.affect_factor gives each its recall multiplier. Pure.';

CREATE OR REPLACE FUNCTION dna.memory_retention(spec jsonb, now timestamptz)
RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT dna.ebbinghaus_retention(
        dna.stability_from_spec(spec),
        dna.days_since(coalesce(nullif(spec ->> 'last_surfaced', ''), nullif(spec ->> 'last_recall_at', '')), now))
$$;

COMMENT ON FUNCTION dna.memory_retention(jsonb, timestamptz) IS
'Current Ebbinghaus retention of a memory at world time now: dna.ebbinghaus_retention('
'dna.stability_from_spec(spec), days since spec.last_surfaced (or last_recall_at)). A memory never '
'surfaced keeps 1.0 (t unknown), as in the reference. Pure.';

CREATE OR REPLACE FUNCTION dna.json_truthy(value jsonb)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE jsonb_typeof(value)
               WHEN 'string' THEN value #>> '{}' <> ''
               WHEN 'number' THEN (value #>> '{}')::numeric <> 0
               WHEN 'boolean' THEN (value #>> '{}')::boolean
               WHEN 'array' THEN jsonb_array_length(value) > 0
               WHEN 'object' THEN value <> '{}'::jsonb
               ELSE false END
$$;

COMMENT ON FUNCTION dna.json_truthy(jsonb) IS
'Python truthiness of a JSON value: non-empty string, non-zero number, true, non-empty array/object. Pure.';

CREATE OR REPLACE FUNCTION dna.engram_text(spec jsonb)
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    RETURN (
        SELECT regexp_replace(coalesce(string_agg(spec ->> f, ' ' ORDER BY o), ''), '^\s+|\s+$', '', 'g')
        FROM unnest(ARRAY['area', 'title', 'summary', 'body']) WITH ORDINALITY AS u(f, o)
        WHERE dna.json_truthy(spec -> f)
    );
END
$$;

COMMENT ON FUNCTION dna.engram_text(jsonb) IS
'The text a memory is embedded and indexed by: spec area, title, summary, body — present (truthy) '
'fields only, space-joined, trimmed; '''' when none. Pure. Golden: engram_text.';

CREATE OR REPLACE FUNCTION dna.memory_text(kind text, spec jsonb)
RETURNS text
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $$
DECLARE
    fields text[];
BEGIN
    SELECT dk.embed_fields INTO fields FROM dna.dna_kinds AS dk WHERE dk.kind = memory_text.kind;
    IF fields IS NULL OR fields = '{area,title,summary,body}'::text[] THEN
        RETURN dna.engram_text(spec);
    END IF;
    RETURN (SELECT regexp_replace(coalesce(string_agg(spec ->> f, ' ' ORDER BY o), ''), '^\s+|\s+$', '', 'g')
            FROM unnest(fields) WITH ORDINALITY AS u(f, o)
            WHERE dna.json_truthy(spec -> f));
END
$$;

COMMENT ON FUNCTION dna.memory_text(text, jsonb) IS
'The indexed (and embedded) text of a memory of Kind kind: its dna_kinds.embed_fields present in '
'spec, space-joined (Engram: area title summary body = dna.engram_text). Clients embed exactly this text.';

CREATE OR REPLACE FUNCTION dna.cosine_similarity(a double precision[], b double precision[])
RETURNS double precision
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    RETURN (
        -- Accumulated in index order (as the reference), over the common length.
        SELECT CASE WHEN coalesce(s.na, 0) = 0 OR coalesce(s.nb, 0) = 0 THEN 0.0::float8
                    ELSE s.dot / sqrt(s.na) / sqrt(s.nb) END
        FROM (SELECT sum(x * y) AS dot, sum(x * x) AS na, sum(y * y) AS nb
              FROM unnest(a, b) AS u(x, y) WHERE x IS NOT NULL AND y IS NOT NULL) AS s
    );
END
$$;

COMMENT ON FUNCTION dna.cosine_similarity(double precision[], double precision[]) IS
'Cosine similarity of two float8 arrays (dot / |a| / |b|, summed in index order); 0.0 when either '
'has no signal (all zeros). Pure. Golden: cosine_similarity_fake (with dna.fake_embed_float8).';

CREATE OR REPLACE FUNCTION dna.ecphory_tokens(value text)
RETURNS text[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    -- Split on [\s/_-]+ without a regular expression (hot path: no compiled-regex cache churn).
    RETURN ARRAY(SELECT DISTINCT t
                 FROM unnest(string_to_array(translate(lower(coalesce(value, '')),
                                                       E'\t\n\r\f\v/_-\u00a0\u2028\u2029\u3000', '             '), ' ')) AS t
                 WHERE t <> '' ORDER BY t);
END
$$;

COMMENT ON FUNCTION dna.ecphory_tokens(text) IS
'Ecphory token set: lower-cased text split on [\s/_-]+, distinct, sorted. Pure.';

CREATE OR REPLACE FUNCTION dna.ecphory_token_list(value text)
RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT array_remove(string_to_array(translate(lower(coalesce(value, '')),
                                                  E'\t\n\r\f\v/_-\u00a0\u2028\u2029\u3000', '             '), ' '), '')
$$;

COMMENT ON FUNCTION dna.ecphory_token_list(text) IS
'The ecphory tokens of a text as a plain list (duplicates kept, unsorted): the fast form of '
'dna.ecphory_tokens for set tests with <@ and &&. Pure.';

CREATE OR REPLACE FUNCTION dna.json_text_set(value jsonb)
RETURNS text[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    IF jsonb_typeof(value) IS DISTINCT FROM 'array' OR value = '[]'::jsonb THEN
        RETURN '{}';
    END IF;
    RETURN ARRAY(SELECT DISTINCT e FROM jsonb_array_elements_text(value) AS e ORDER BY e);
END
$$;

COMMENT ON FUNCTION dna.json_text_set(jsonb) IS
'The distinct text values of a JSON array (anything else → empty), sorted. Pure.';

CREATE OR REPLACE FUNCTION dna.score_engram(spec jsonb, cue jsonb, cosine double precision DEFAULT NULL,
                                            OUT score double precision, OUT matched text[])
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    ec jsonb := CASE WHEN jsonb_typeof(spec -> 'encoding_context') = 'object' THEN spec -> 'encoding_context'
                     ELSE '{}'::jsonb END;
    ec_area text;
    cue_area text;
    cue_q text;
    ec_tokens text[];
    cue_tokens text[];
    common text[];
    jac double precision;
    area_score double precision := 0;
    area_label text := '';
    summary_score double precision := 0;
    summary_label text := '';
    semantic_score double precision := 0;
    semantic_label text := '';
    haystack text;
    q_tokens text[];
    primary_score double precision;
    ec_topics text[];
    cue_topics text[];
    n_common integer;
    n_union integer;
    ec_refs text[];
    cue_refs text[];
    ec_affect text;
    cue_affect text;
BEGIN
    score := 0;
    matched := '{}';
    cue := coalesce(cue, '{}'::jsonb);
    spec := coalesce(spec, '{}'::jsonb);

    ec_area := btrim(coalesce(nullif(ec ->> 'area', ''), nullif(spec ->> 'area', ''), ''), E' \t\n\r\f\v');
    cue_area := btrim(coalesce(nullif(cue ->> 'area_inferred', ''), nullif(cue ->> 'query', ''), ''), E' \t\n\r\f\v');
    cue_q := lower(cue_area);

    -- Path 1: area token overlap.
    IF ec_area <> '' AND cue_area <> '' THEN
        ec_tokens := dna.ecphory_token_list(ec_area);
        cue_tokens := dna.ecphory_token_list(cue_area);
        IF cardinality(ec_tokens) > 0 AND cardinality(cue_tokens) > 0 THEN
            IF ec_tokens <@ cue_tokens OR cue_tokens <@ ec_tokens THEN   -- one set contains the other
                area_score := 0.55;
                area_label := 'area';
            ELSIF ec_tokens && cue_tokens THEN
                common := ARRAY(SELECT unnest(ec_tokens) INTERSECT SELECT unnest(cue_tokens));
                jac := cardinality(common)::float8
                       / (SELECT count(*) FROM (SELECT unnest(ec_tokens) UNION SELECT unnest(cue_tokens)) AS u)::float8;
                area_score := 0.55 * jac;
                area_label := 'area~' || to_char(jac, 'FM0.00');
            END IF;
        END IF;
    END IF;

    -- Path 2: the query phrase in summary/title/body.
    IF cue_q <> '' AND length(cue_q) >= 3 THEN
        haystack := lower(coalesce(CASE WHEN dna.json_truthy(spec -> 'summary') THEN spec ->> 'summary' END, '') || ' ' ||
                          coalesce(CASE WHEN dna.json_truthy(spec -> 'title') THEN spec ->> 'title' END, '') || ' ' ||
                          coalesce(CASE WHEN dna.json_truthy(spec -> 'body') THEN spec ->> 'body' END, ''));
        IF strpos(haystack, cue_q) > 0 THEN
            summary_score := 0.55;
            summary_label := 'summary';
        ELSE
            q_tokens := dna.ecphory_token_list(cue_q);
            IF cardinality(q_tokens) > 0 AND q_tokens <@ dna.ecphory_token_list(haystack) THEN
                summary_score := 0.28;
                summary_label := 'summary-tokens';
            END IF;
        END IF;
    END IF;

    -- Path 3: embedding cosine, only when one is given and positive.
    IF cosine IS NOT NULL AND cosine > 0 THEN
        semantic_score := 0.61 * cosine;
        semantic_label := 'semantic~' || to_char(cosine, 'FM0.00');
    END IF;

    primary_score := greatest(area_score, summary_score, semantic_score);
    IF primary_score > 0 THEN
        score := score + primary_score;
        IF primary_score = area_score AND area_label <> '' THEN
            matched := matched || area_label;
        ELSIF primary_score = summary_score AND summary_label <> '' THEN
            matched := matched || summary_label;
        ELSIF semantic_label <> '' THEN
            matched := matched || semantic_label;
        END IF;
    END IF;

    -- co_topics Jaccard.
    IF jsonb_typeof(cue -> 'co_topics') = 'array' AND jsonb_typeof(ec -> 'co_topics') = 'array' THEN
        ec_topics := dna.json_text_set(ec -> 'co_topics');
        cue_topics := dna.json_text_set(cue -> 'co_topics');
    END IF;
    IF cardinality(ec_topics) > 0 AND cardinality(cue_topics) > 0 THEN
        n_common := (SELECT count(*) FROM (SELECT unnest(ec_topics) INTERSECT SELECT unnest(cue_topics)) AS i);
        n_union := (SELECT count(*) FROM (SELECT unnest(ec_topics) UNION SELECT unnest(cue_topics)) AS u);
        score := score + 0.20 * (n_common::float8 / n_union::float8);
        IF n_common > 0 THEN
            matched := matched || format('co_topics(%s)', n_common);
        END IF;
    END IF;

    -- source_refs distinctiveness.
    IF jsonb_typeof(cue -> 'source_refs') = 'array' AND cue -> 'source_refs' <> '[]'::jsonb THEN
        ec_refs := CASE WHEN dna.json_truthy(ec -> 'source_refs') THEN dna.json_text_set(ec -> 'source_refs')
                        ELSE dna.json_text_set(spec -> 'source_refs') END;
        cue_refs := dna.json_text_set(cue -> 'source_refs');
    END IF;
    IF cardinality(ec_refs) > 0 AND cardinality(cue_refs) > 0 AND ec_refs && cue_refs THEN
        score := score + 0.15;
        matched := matched || 'source_refs'::text;
    END IF;

    -- affect mood (marginal).
    ec_affect := coalesce(nullif(ec ->> 'affect', ''), nullif(spec ->> 'affect', ''));
    cue_affect := nullif(cue ->> 'affect_mood', '');
    IF ec_affect IS NOT NULL AND cue_affect IS NOT NULL AND ec_affect <> 'neutral' AND cue_affect <> 'neutral'
       AND ec_affect = cue_affect THEN
        score := score + 0.05;
        matched := matched || 'affect'::text;
    END IF;

    -- time_of_day (perceptual, marginal).
    IF nullif(ec ->> 'time_of_day', '') IS NOT NULL AND nullif(cue ->> 'time_of_day', '') IS NOT NULL
       AND ec ->> 'time_of_day' = cue ->> 'time_of_day' THEN
        score := score + 0.05;
        matched := matched || 'time'::text;
    END IF;
END
$$;

COMMENT ON FUNCTION dna.score_engram(jsonb, jsonb, double precision) IS
'Ecphory score of one memory spec against a cue {query?, area_inferred?, co_topics?, source_refs?, '
'affect_mood?, time_of_day?} → (score, matched dims). Primary = max of: area (spec.encoding_context.'
'area or spec.area vs cue area_inferred or query: one token set contains the other → 0.55, else '
'0.55 × Jaccard); summary (cue of 3+ chars a substring of summary+title+body → 0.55, all its tokens '
'among the content tokens → 0.28); semantic 0.61 × cosine when cosine > 0. Then + 0.20 × Jaccard('
'co_topics), + 0.15 if source_refs intersect, + 0.05 equal non-neutral affect, + 0.05 equal '
'time_of_day. Tokens: lower-cased, split on [\s/_-]+. Pure. Golden: score_engram.';

CREATE OR REPLACE FUNCTION dna.ecphory_adjust(score double precision, spec jsonb, now timestamptz)
RETURNS double precision
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    cues jsonb := CASE WHEN jsonb_typeof(spec -> 'cues_history') = 'array' THEN spec -> 'cues_history'
                       ELSE '[]'::jsonb END;
    recent integer;
    created timestamptz;
BEGIN
    SELECT count(*) INTO recent
    FROM jsonb_array_elements(cues) AS c
    WHERE jsonb_typeof(c) = 'object'
      AND now - dna.parse_timestamptz(c ->> 'at') <= interval '24 hours';
    IF recent >= 3 THEN
        score := score * 0.6;                              -- saturation
    END IF;
    IF jsonb_array_length(cues) = 0 THEN
        score := score + 0.05;                             -- novelty
    END IF;
    created := dna.parse_timestamptz(spec ->> 'created_at');
    IF created IS NOT NULL AND now - created <= interval '24 hours' THEN
        score := score + 0.10;                             -- recency
    END IF;
    IF jsonb_typeof(spec -> 'confidence_score') = 'number' AND (spec ->> 'confidence_score')::float8 > 1.1 THEN
        score := score + 0.05;                             -- high fidelity
    END IF;
    RETURN score;
END
$$;

COMMENT ON FUNCTION dna.ecphory_adjust(double precision, jsonb, timestamptz) IS
'Semon adjustments of an ecphory score at world time now, in order: 3+ cues_history entries in the '
'last 24 h → × 0.6; no cues ever → + 0.05; created_at within 24 h → + 0.10; numeric confidence_score '
'> 1.1 → + 0.05. Pure.';

CREATE OR REPLACE FUNCTION dna.ecphory_score(spec jsonb, query text, cosine double precision,
                                             now timestamptz)
RETURNS double precision
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    RETURN dna.ecphory_adjust((dna.score_engram(spec, jsonb_build_object('query', coalesce(query, '')), cosine)).score,
                              spec, now);
END
$$;

COMMENT ON FUNCTION dna.ecphory_score(jsonb, text, double precision, timestamptz) IS
'dna.score_engram with the cue {query} then dna.ecphory_adjust at now: the score recall ranks '
'ecphory by (it passes at >= 0.30). Pure.';

CREATE OR REPLACE FUNCTION dna.semantic_recall_fusion(hits jsonb, engrams jsonb, query text,
                                                      semantic jsonb, now timestamptz,
                                                      rrf_k double precision DEFAULT 60)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    RETURN (
        WITH h AS (
            SELECT e.hit, coalesce(e.hit ->> 'key', e.hit ->> 'name') AS key, e.ord
            FROM jsonb_array_elements(coalesce(hits, '[]')) WITH ORDINALITY AS e(hit, ord)
            WHERE coalesce(e.hit ->> 'name', '') <> ''
        ), first_hit AS (                                      -- a repeated key keeps its first (best) hit
            SELECT DISTINCT ON (h.key) h.key, h.hit, h.ord FROM h ORDER BY h.key, h.ord
        ), recall AS (
            SELECT f.key, f.hit, row_number() OVER (ORDER BY f.ord)::integer AS rank_recall FROM first_hit AS f
        ), cos AS (
            SELECT s.key, s.value::float8 AS cosine
            FROM jsonb_each_text(coalesce(semantic, '{}')) AS s(key, value)
            WHERE s.value::float8 > 0                          -- no signal is never a penalty
        ), raw_scores AS MATERIALIZED (                    -- each candidate scored once
            SELECT coalesce(e.en ->> 'key', e.en ->> 'name') AS key,
                   dna.ecphory_score(coalesce(e.en -> 'spec', '{}'), query, c.cosine, now) AS score
            FROM jsonb_array_elements(coalesce(engrams, '[]')) AS e(en)
            LEFT JOIN cos AS c ON c.key = coalesce(e.en ->> 'key', e.en ->> 'name')
        ), scored AS (
            SELECT DISTINCT ON (x.key) x.key, x.score
            FROM raw_scores AS x
            WHERE x.score >= 0.30 AND x.key IS NOT NULL
            ORDER BY x.key, x.score DESC
        ), ecphory AS (
            SELECT s.key, s.score, row_number() OVER (ORDER BY s.score DESC, s.key COLLATE "C")::integer AS rank_ecphory
            FROM scored AS s
        ), fused AS (
            SELECT r.key, r.hit, r.rank_recall, e.rank_ecphory, e.score AS score_ecphory, c.cosine,
                   dna.rrf(ARRAY[r.rank_recall, e.rank_ecphory], NULL, rrf_k) AS score
            FROM recall AS r
            LEFT JOIN ecphory AS e ON e.key = r.key
            LEFT JOIN cos AS c ON c.key = r.key
        )
        SELECT coalesce(jsonb_agg(
                   f.hit || jsonb_build_object('score', f.score,
                                               'score_recall', coalesce((f.hit ->> 'score')::float8, 0.0),
                                               'rank_recall', f.rank_recall)
                         || CASE WHEN f.rank_ecphory IS NULL THEN '{}'::jsonb
                                 ELSE jsonb_build_object('rank_ecphory', f.rank_ecphory, 'score_ecphory', f.score_ecphory) END
                         || CASE WHEN f.cosine IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('semantic', f.cosine) END
                   ORDER BY f.score DESC, f.key COLLATE "C"), '[]'::jsonb)
        FROM fused AS f
    );
END
$$;

COMMENT ON FUNCTION dna.semantic_recall_fusion(jsonb, jsonb, text, jsonb, timestamptz, double precision) IS
'Fuses a recall ranking with the ecphory ranking by dna.rrf (k = rrf_k, default 60). hits: the recall '
'ranking, best first, [{name, score, key?, ...}] (key defaults to name; a repeated key keeps its first '
'hit). engrams: [{name, spec, key?}] candidates; each is scored by dna.ecphory_score(spec, query, '
'semantic[key], now) and enters the ecphory ranking when >= 0.30, ordered (score desc, key). '
'semantic: {key: cosine}; cosines <= 0 are ignored. Returns the hits in fused order (score desc, key '
'asc, codepoint order) as new objects: score = fused RRF, score_recall, rank_recall, and rank_ecphory, '
'score_ecphory, semantic when present. Pure. Golden: semantic_recall_fusion.';

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
'unknown key, a blank predicate/subject, a non-scalar object or a bad polarity; 22007 for a bad timestamp.';

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
                                               AND (spec ->> 'engram_stability_days')::float8 > 0) THEN
        RAISE EXCEPTION 'spec.engram_stability_days must be a number of days > 0, got %',
            spec -> 'engram_stability_days' USING ERRCODE = '22023';
    END IF;
    IF spec ? 'claims' THEN
        spec := jsonb_set(spec, '{claims}', dna.validate_claims(spec -> 'claims'));
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
'faint|firm|burning; engram_stability_days > 0; affect one of dna.memory_affects() (triumph, regret, surprise, '
'wistful, ominous, neutral). Errors: 22023, 22001 (summary too long), 22007 (bad timestamp).';

-- ---------------------------------------------------------------------------------------------
-- The write path: triggers on dna_instances (created by migration 0002_memory)
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.kind_has_trait(kind text, trait text)
RETURNS boolean
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $$
BEGIN
    RETURN (
        SELECT coalesce((SELECT trait = ANY (k.traits) FROM dna.dna_kinds AS k WHERE k.kind = kind_has_trait.kind), false)
    );
END
$$;

COMMENT ON FUNCTION dna.kind_has_trait(text, text) IS
'Whether dna.dna_kinds gives kind the trait (memory.recallable, record.invalidate-only); false for an unknown Kind.';

CREATE OR REPLACE FUNCTION dna.spec_valid_at(spec jsonb, fallback_from timestamptz)
RETURNS tstzrange
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    RETURN (
        SELECT tstzrange(l.lo, CASE WHEN u.hi IS NOT NULL AND u.hi < l.lo THEN l.lo ELSE u.hi END, '[)')
        FROM (SELECT coalesce(dna.parse_timestamptz(spec ->> 'valid_from'), dna.parse_timestamptz(spec ->> 'created_at'),
                              fallback_from) AS lo) AS l,
             (SELECT dna.parse_timestamptz(spec ->> 'valid_to') AS hi) AS u
    );
END
$$;

COMMENT ON FUNCTION dna.spec_valid_at(jsonb, timestamptz) IS
'World-time window of a memory spec: [valid_from (else created_at, else fallback_from), valid_to) — '
'open above when valid_to is absent or unparseable (fail-open, as dna.currently_valid); empty when '
'valid_to precedes valid_from. Pure.';

CREATE OR REPLACE FUNCTION dna.instances_before_write()
RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    stored_to jsonb;
    traits text[];
BEGIN
    SELECT k.traits INTO traits FROM dna.dna_kinds AS k WHERE k.kind = NEW.kind;
    IF TG_OP = 'UPDATE' THEN
        NEW.updated_at := now();
        NEW.created_at := OLD.created_at;
        NEW.id := OLD.id;
        -- Bitemporal guard: a write that drops a stored valid_to gets it (and superseded_by_memory)
        -- back, unless the incoming spec.revivals quotes that exact valid_to (dna.revive does).
        IF 'record.invalidate-only' = ANY (traits) THEN
            stored_to := OLD.spec -> 'valid_to';
            IF dna.json_truthy(stored_to) AND NOT dna.json_truthy(NEW.spec -> 'valid_to')
               AND NOT EXISTS (SELECT 1
                               FROM jsonb_array_elements(CASE WHEN jsonb_typeof(NEW.spec -> 'revivals') = 'array'
                                                              THEN NEW.spec -> 'revivals' ELSE '[]' END) AS r
                               WHERE jsonb_typeof(r) = 'object' AND r -> 'valid_to' = stored_to) THEN
                NEW.spec := jsonb_set(NEW.spec, '{valid_to}', stored_to);
                IF OLD.spec ? 'superseded_by_memory' AND NOT NEW.spec ? 'superseded_by_memory' THEN
                    NEW.spec := jsonb_set(NEW.spec, '{superseded_by_memory}', OLD.spec -> 'superseded_by_memory');
                END IF;
                RAISE NOTICE 'dna: the bitemporal guard restored valid_to % of %/% (retire and revive with dna.forget and dna.revive)',
                    stored_to #>> '{}', NEW.kind, NEW.name;
            END IF;
        END IF;
        IF NEW.spec = OLD.spec AND NEW.valid_at = OLD.valid_at THEN
            RETURN NEW;                                    -- nothing to re-derive
        END IF;
    END IF;
    -- World time mirrors the spec for memory Kinds: valid_at = [valid_from, valid_to).
    IF 'memory.recallable' = ANY (traits) THEN
        NEW.valid_at := dna.spec_valid_at(NEW.spec, coalesce(lower(NEW.valid_at), NEW.created_at, now()));
    END IF;
    RETURN NEW;
END
$$;

COMMENT ON FUNCTION dna.instances_before_write() IS
'BEFORE INSERT OR UPDATE trigger of dna.dna_instances. (1) The bitemporal guard: for a Kind with the '
'trait record.invalidate-only (Engram), an UPDATE whose spec drops a stored valid_to gets it and '
'superseded_by_memory back unless the new spec.revivals holds an entry whose valid_to equals the '
'stored one exactly (NOTICE when it restores). (2) For memory Kinds, valid_at := dna.spec_valid_at(spec). '
'(3) id and created_at are immutable, updated_at = now().';

CREATE OR REPLACE FUNCTION dna.instances_after_write()
RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    next_version integer;
    keep integer;
    label text := nullif(current_setting('dna.op', true), '');
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.spec = OLD.spec AND NEW.valid_at = OLD.valid_at
       AND NEW.api_version = OLD.api_version THEN
        RETURN NULL;                                       -- nothing changed: no version
    END IF;
    SELECT coalesce(max(v.version), 0) + 1 INTO next_version
    FROM dna.dna_versions AS v
    WHERE v.scope = NEW.scope AND v.kind = NEW.kind AND v.api_version = NEW.api_version
      AND v.name = NEW.name AND v.tenant = NEW.tenant;
    -- Transaction time: clock_timestamp() is read after the row lock is held, so versions of one
    -- record are stamped in the order they were written even when writers raced.
    INSERT INTO dna.dna_versions AS v (scope, kind, api_version, name, tenant, version, id, spec, valid_at, op, created_at)
    SELECT NEW.scope, NEW.kind, NEW.api_version, NEW.name, NEW.tenant, next_version, NEW.id, NEW.spec,
           NEW.valid_at, coalesce(label, lower(TG_OP)), clock_timestamp();
    SELECT k.version_retention INTO keep FROM dna.dna_kinds AS k WHERE k.kind = NEW.kind;
    IF keep IS NOT NULL THEN
        DELETE FROM dna.dna_versions AS v
        WHERE v.scope = NEW.scope AND v.kind = NEW.kind AND v.api_version = NEW.api_version
          AND v.name = NEW.name AND v.tenant = NEW.tenant AND v.version <= next_version - keep;
    END IF;
    RETURN NULL;
END
$$;

COMMENT ON FUNCTION dna.instances_after_write() IS
'AFTER INSERT OR UPDATE trigger of dna.dna_instances: the one write path''s history. Appends the full '
'envelope (id, spec, valid_at) as the next version of dna.dna_versions with created_at = transaction '
'time (clock_timestamp() under the row lock) and op = the verb (setting dna.op: remember, '
'reconsolidate, forget, revive) or insert/update; an UPDATE that changes nothing appends nothing. Then '
'prunes versions beyond the Kind''s version_retention (Engram keeps 3; NULL keeps all).';

CREATE OR REPLACE FUNCTION dna.instances_refuse_delete()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF dna.kind_has_trait(OLD.kind, 'record.invalidate-only') THEN
        RAISE EXCEPTION 'DELETE of %/% refused: % is invalidate-only; retire it with dna.forget(scope, name) '
                        '(and bring it back with dna.revive)', OLD.kind, OLD.name, OLD.kind
            USING ERRCODE = '23001',
                  HINT = format('SELECT dna.forget(%L, %L, kind => %L, tenant => %L);', OLD.scope, OLD.name, OLD.kind, OLD.tenant);
    END IF;
    RETURN OLD;
END
$$;

COMMENT ON FUNCTION dna.instances_refuse_delete() IS
'BEFORE DELETE trigger of dna.dna_instances: a row of a Kind with the trait record.invalidate-only '
'(Engram) is never deleted. Errors: 23001 (restrict_violation) naming dna.forget; the hint is the call to run.';

CREATE OR REPLACE FUNCTION dna.search_docs_refuse_delete()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF dna.kind_has_trait(OLD.kind, 'record.invalidate-only') AND EXISTS (
           SELECT 1 FROM dna.dna_instances AS i
           WHERE i.scope = OLD.scope AND i.kind = OLD.kind AND i.name = OLD.name AND i.tenant = OLD.tenant) THEN
        RAISE EXCEPTION 'DELETE of the search document of %/% refused: % is invalidate-only; retire it with '
                        'dna.forget(scope, name)', OLD.kind, OLD.name, OLD.kind
            USING ERRCODE = '23001',
                  HINT = format('SELECT dna.forget(%L, %L, kind => %L, tenant => %L);', OLD.scope, OLD.name, OLD.kind, OLD.tenant);
    END IF;
    RETURN OLD;
END
$$;

COMMENT ON FUNCTION dna.search_docs_refuse_delete() IS
'BEFORE DELETE trigger of the width search tables: the search document of a stored record of an '
'invalidate-only Kind (Engram) cannot be deleted (dna.delete_document, the client''s delete, raw '
'DELETE), since that would retire the memory outside dna.forget. Errors: 23001 naming dna.forget.';

CREATE OR REPLACE FUNCTION dna.search_docs_valid_at()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    -- A memory's search documents carry its world time, so dna.search can filter validity inside
    -- each lane (an index condition, not a probe per candidate). Other Kinds keep what they are given.
    IF dna.kind_has_trait(NEW.kind, 'memory.recallable') THEN
        NEW.valid_at := (SELECT i.valid_at FROM dna.dna_instances AS i
                         JOIN dna.dna_kinds AS k ON k.kind = i.kind AND k.api_version = i.api_version
                         WHERE i.scope = NEW.scope AND i.kind = NEW.kind AND i.name = NEW.name
                           AND i.tenant = NEW.tenant);
    END IF;
    RETURN NEW;
END
$$;

COMMENT ON FUNCTION dna.search_docs_valid_at() IS
'BEFORE INSERT OR UPDATE trigger of the width search tables: the search document of a memory Kind '
'(trait memory.recallable) gets valid_at = the world-time validity of its record in dna.dna_instances '
'(NULL when there is none: always in force). dna.search filters on it. Other Kinds keep the valid_at written.';

CREATE OR REPLACE FUNCTION dna.instances_sync_search_valid_at()
RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    w integer;
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.valid_at = OLD.valid_at THEN
        RETURN NULL;                                       -- reconsolidation and restatements: nothing to copy
    END IF;
    IF NOT dna.kind_has_trait(NEW.kind, 'memory.recallable') THEN
        RETURN NULL;
    END IF;
    FOR w IN SELECT dna.search_widths() LOOP
        EXECUTE format('UPDATE dna.%I AS t SET valid_at = $1
                        WHERE t.scope = $2 AND t.kind = $3 AND t.name = $4 AND t.tenant = $5
                          AND t.valid_at IS DISTINCT FROM $1', 'dna_search_docs_' || w)
            USING NEW.valid_at, NEW.scope, NEW.kind, NEW.name, NEW.tenant;
    END LOOP;
    RETURN NULL;
END
$$;

COMMENT ON FUNCTION dna.instances_sync_search_valid_at() IS
'AFTER INSERT OR UPDATE trigger of dna.dna_instances: when the valid_at of a memory (forget, revive, '
'remember with valid_from/valid_to) changes, copies it to the search documents of that record in every '
'width table (every model_id), so dna.search leaves retired memories out at once.';

CREATE OR REPLACE FUNCTION dna.set_op(label text)
RETURNS void
LANGUAGE sql
AS $$
    SELECT set_config('dna.op', coalesce(label, ''), true)
$$;

COMMENT ON FUNCTION dna.set_op(text) IS
'Names the verb the next writes of this transaction belong to (recorded as dna_versions.op). Transaction-local.';

-- ---------------------------------------------------------------------------------------------
-- Verbs
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.memory_name(kind text, spec jsonb)
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    RETURN (
        SELECT 'rem-' || left(encode(sha256(convert_to(kind || E'\n' || dna.engram_text(spec) || E'\n' ||
                                                       coalesce(spec ->> 'summary', ''), 'UTF8')), 'hex'), 16)
    );
END
$$;

COMMENT ON FUNCTION dna.memory_name(text, jsonb) IS
'The stable name of a memory given without one: rem- and 16 hex digits of SHA-256 over its Kind and '
'text, so remembering the same text twice names the same memory. Pure.';

DROP FUNCTION IF EXISTS dna.lock_memory(text, text, text, text);  -- before required_by
CREATE OR REPLACE FUNCTION dna.lock_memory(scope text, kind text, name text, tenant text,
                                           required_by text DEFAULT NULL, OUT api text, OUT stored jsonb)
LANGUAGE plpgsql
AS $$
#variable_conflict use_variable
BEGIN
    SELECT k.api_version INTO api FROM dna.dna_kinds AS k WHERE k.kind = kind;
    SELECT i.spec INTO stored FROM dna.dna_instances AS i
    WHERE i.scope = scope AND i.kind = kind AND i.api_version = api AND i.name = name AND i.tenant = tenant
    FOR UPDATE;
    IF stored IS NULL AND required_by IS NOT NULL THEN   -- spec is NOT NULL: no such row
        RAISE EXCEPTION '%: no %/% in scope % (tenant %)', required_by, kind, name, quote_literal(scope),
            quote_literal(tenant) USING ERRCODE = 'P0002';
    END IF;
END
$$;

COMMENT ON FUNCTION dna.lock_memory(text, text, text, text, text) IS
'The row of one memory for a write verb (dna.remember, dna.forget, dna.revive): api = the Kind''s '
'api_version, stored = its spec (NULL when there is no such row), the row locked FOR UPDATE until the '
'end of the transaction. Arguments are already validated by the caller. required_by (a verb that needs '
'the row, e.g. ''forget''): no such row raises P0002 naming that verb; otherwise no error of its own.';

DROP FUNCTION IF EXISTS dna.remember(text, jsonb, text, text, text, timestamptz, vector, text);  -- before the personal parameter (0009_tenancy)
CREATE OR REPLACE FUNCTION dna.remember(
    scope text, spec jsonb, kind text DEFAULT 'Engram', name text DEFAULT NULL, tenant text DEFAULT '',
    now timestamptz DEFAULT NULL, embedding vector DEFAULT NULL, model_id text DEFAULT NULL,
    personal boolean DEFAULT false)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
#variable_conflict use_variable
DECLARE
    at timestamptz;
    api text;
    stored jsonb;
    merged jsonb;
    action text;
    idx jsonb;
    lifecycle constant text[] := ARRAY['created_at', 'valid_from', 'valid_to', 'superseded_by_memory', 'revivals',
                                       'cues_history', 'last_surfaced', 'surface_count'];
    f text;
    ver record;
BEGIN
    scope := dna.check_scope(scope);               -- 22023 outside the name rule (sql/catalog.sql)
    tenant := dna.resolve_tenant(tenant, personal);       -- personal: the caller's own partition
    kind := dna.check_memory_kind(coalesce(kind, 'Engram'));
    at := coalesce(dna.check_now(now), now());
    model_id := coalesce(model_id, 'dna-fake-hash-v1');
    merged := dna.prepare_memory_spec(kind, spec, at);     -- validates (22023/22001/22007) before any write
    name := dna.check_key('name', coalesce(name, dna.memory_name(kind, merged)), 512);
    SELECT l.api, l.stored INTO api, stored FROM dna.lock_memory(scope, kind, name, tenant) AS l;
    IF stored IS NOT NULL THEN
        -- Remembering an existing memory again restates it: the new spec replaces the stored one,
        -- but its life history (lifecycle keys the caller did not give) is kept.
        FOREACH f IN ARRAY lifecycle LOOP
            IF stored ? f AND NOT spec ? f THEN
                merged := jsonb_set(merged, ARRAY[f], stored -> f);
            END IF;
        END LOOP;
        action := CASE WHEN merged = stored THEN 'unchanged' ELSE 'updated' END;
    ELSE
        action := 'created';
    END IF;

    IF action <> 'unchanged' THEN
        PERFORM dna.set_op('remember');
        INSERT INTO dna.dna_instances AS i (scope, kind, api_version, name, tenant, spec)
        SELECT scope, kind, api, name, tenant, merged
        ON CONFLICT ON CONSTRAINT dna_instances_pkey DO UPDATE SET spec = excluded.spec;
        PERFORM dna.set_op(NULL);
    END IF;
    SELECT i.spec INTO merged FROM dna.dna_instances AS i
    WHERE i.scope = scope AND i.kind = kind AND i.api_version = api AND i.name = name AND i.tenant = tenant;
    SELECT v.version, v.created_at INTO ver FROM dna.dna_versions AS v
    WHERE v.scope = scope AND v.kind = kind AND v.api_version = api AND v.name = name AND v.tenant = tenant
    ORDER BY v.version DESC LIMIT 1;

    idx := dna.index_document(scope, kind, name, dna.memory_text(kind, merged), embedding, model_id,
                              NULL, CASE WHEN personal IS TRUE THEN '' ELSE tenant END,
                              left(coalesce(nullif(merged ->> 'summary', ''), dna.memory_text(kind, merged)), 240),
                              personal => personal IS TRUE);
    RETURN jsonb_build_object('kind', kind, 'name', name, 'tenant', tenant, 'personal', personal IS TRUE, 'scope', scope, 'spec', merged,
                              'action', action, 'indexed', true, 'index', idx,
                              'version', ver.version, 'recorded_at', dna.iso8601(ver.created_at));
END
$$;

COMMENT ON FUNCTION dna.remember(text, jsonb, text, text, text, timestamptz, vector, text, boolean) IS
'Writes a memory of a memory Kind (default Engram) and indexes it. spec is validated and stamped by '
'dna.prepare_memory_spec at world time now (default now()): created_at, encoding_context and '
'memory_type (Engram), valid_from. name defaults to dna.memory_name (stable: rem-<sha256 of kind and '
'text>). Remembering an existing name restates it: the new spec replaces the stored one, keeping its '
'lifecycle keys (created_at, valid_from, valid_to, superseded_by_memory, revivals, cues_history, '
'last_surfaced, surface_count) unless given; an identical spec writes nothing. The write appends a '
'version (transaction time) through the dna_instances triggers. The text dna.memory_text(kind, spec) '
'(Engram: area title summary body) is indexed by dna.index_document with embedding (NULL = lexical '
'only) under model_id (default dna-fake-hash-v1). personal => true writes the caller''s personal memory '
'(tenant ''personal:<oid>'', resolved from the connected role; 42501 without an identity). Returns {kind, name, tenant, personal, scope, spec, action: '
'created|updated|unchanged, indexed, index, version, recorded_at}. Errors: 22023 (not a memory Kind, '
'bad spec, claims, unknown model_id), 22001 (summary > 280 chars, key too long), 22007 (bad timestamp '
'or infinite now), 42501 (reserved tenant), 42P01 (no table for the embedding width). Atomic.';

CREATE OR REPLACE FUNCTION dna.memory_display(hit jsonb, spec jsonb)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    extra jsonb := jsonb_strip_nulls(jsonb_build_object(
        'summary', spec -> 'summary',
        'area', spec -> 'area',
        'affect', coalesce(spec -> 'affect', spec #> '{encoding_context,affect}'),
        'tags', spec -> 'tags',
        'memory_type', spec -> 'memory_type',
        'created_at', coalesce(spec -> 'created_at', spec -> 'valid_from', spec #> '{cues_history,0,at}'),
        'valid_from', spec -> 'valid_from',
        'valid_to', spec -> 'valid_to',
        'title', CASE WHEN coalesce(hit ->> 'title', '') = '' THEN
                      to_jsonb(coalesce(nullif(spec ->> 'title', ''), nullif(spec ->> 'summary', ''))) END));
BEGIN
    IF hit ->> 'title' IS NULL THEN
        hit := hit - 'title';                              -- a JSON null title is replaced
    END IF;
    RETURN extra || hit;                                   -- the hit's own keys win
END
$$;

COMMENT ON FUNCTION dna.memory_display(jsonb, jsonb) IS
'Adds the display fields of a memory spec to a hit without overwriting any: summary, area, affect '
'(or encoding_context.affect), tags, memory_type, created_at (else valid_from, else the first cue), '
'valid_from, valid_to, and title (spec title, else summary) when the hit has none. Absent fields are '
'never fabricated. Pure.';

CREATE OR REPLACE FUNCTION dna.reconsolidated_spec(spec jsonb, now timestamptz, cue text, actor text)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    RETURN (
        SELECT spec
            || jsonb_build_object(
                   'cues_history',
                   (SELECT coalesce(jsonb_agg(c.value ORDER BY c.ord), '[]'::jsonb)
                    FROM (SELECT e.value, e.ord, count(*) OVER () AS n
                          FROM jsonb_array_elements(
                                   CASE WHEN jsonb_typeof(spec -> 'cues_history') = 'array' THEN spec -> 'cues_history' ELSE '[]' END
                                   || jsonb_build_array(jsonb_build_object('at', dna.iso8601(now), 'cue', left(coalesce(cue, ''), 120),
                                                                           'actor', coalesce(nullif(actor, ''), 'unknown'))))
                               WITH ORDINALITY AS e(value, ord)) AS c
                    WHERE c.ord > c.n - 50),
                   'last_surfaced', dna.iso8601(now),
                   'surface_count', coalesce(CASE WHEN jsonb_typeof(spec -> 'surface_count') = 'number'
                                                  THEN (spec ->> 'surface_count')::numeric::bigint END, 0) + 1)
            || CASE WHEN jsonb_typeof(spec -> 'confidence_score') = 'number'
                    THEN jsonb_build_object('confidence_score',
                                            round(least(10.0, (spec ->> 'confidence_score')::numeric + 0.05), 3))
                    ELSE '{}'::jsonb END
    );
END
$$;

COMMENT ON FUNCTION dna.reconsolidated_spec(jsonb, timestamptz, text, text) IS
'A surfaced Engram''s spec after reconsolidation at now: appends {at, cue (first 120 chars), actor} '
'to cues_history (keeps the last 50), sets last_surfaced, surface_count + 1, and a numeric '
'confidence_score becomes min(10, c + 0.05) rounded to 3 places (tiers are left alone). Pure.';

DROP FUNCTION IF EXISTS dna.recall(text, text, vector, text, text[], integer, text, boolean, text, timestamptz, timestamptz);  -- before the personal parameter (0009_tenancy)
CREATE OR REPLACE FUNCTION dna.recall(
    scope text, query text, query_embedding vector DEFAULT NULL, model_id text DEFAULT NULL,
    kinds text[] DEFAULT NULL, k integer DEFAULT 5, tenant text DEFAULT '', reconsolidate boolean DEFAULT true,
    actor text DEFAULT NULL, now timestamptz DEFAULT NULL, as_of timestamptz DEFAULT NULL,
    personal boolean DEFAULT false)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
#variable_conflict use_variable
DECLARE
    world timestamptz;
    depth integer;
    semantic_on boolean;
    blank boolean := coalesce(btrim(query), '') = '';
    cands jsonb;
    truncated jsonb := '[]'::jsonb;
    hits jsonb;
    engrams jsonb;
    sem jsonb := '{}'::jsonb;
    top jsonb;
    h jsonb;
    done jsonb := '[]'::jsonb;
    failed jsonb := '[]'::jsonb;
    tbl regclass;
    result jsonb;
BEGIN
    scope := dna.check_scope(scope);               -- 22023 outside the name rule (sql/catalog.sql)
    tenant := dna.resolve_tenant(tenant, personal);       -- personal: the caller's own partition
    IF k IS NULL OR k < 0 OR k > 1000 THEN
        RAISE EXCEPTION 'k must be between 0 and 1000, got %', k USING ERRCODE = '22023';
    END IF;
    kinds := dna.check_memory_kinds(kinds);             -- NULL: every memory Kind
    PERFORM dna.check_now(now);
    PERFORM dna.check_now(as_of, 'as_of');
    IF as_of IS NOT NULL THEN
        reconsolidate := false;                            -- a read of the past never writes
    END IF;
    world := coalesce(now, as_of, now());                  -- world time follows as_of unless pinned
    -- No model_id: the scope's model with the most documents (of the query vector's width), so a
    -- lexical-only recall reads the rows the scope was indexed with; a scope with none: the fake.
    model_id := coalesce(model_id,
                         (SELECT m.model_id FROM dna.scope_models(scope) AS m
                          WHERE query_embedding IS NULL OR m.dims = vector_dims(query_embedding)
                          ORDER BY m.documents DESC, m.model_id LIMIT 1),
                         'dna-fake-hash-v1');
    semantic_on := query_embedding IS NOT NULL AND vector_norm(query_embedding) > 0 AND NOT blank;
    depth := least(greatest(3 * k, 10), 1000);
    actor := coalesce(nullif(actor, ''), session_user::text);

    -- Candidates: hybrid search over the memory Kinds (the filters run inside each lane), then the
    -- spec in force (now) or believed (as_of, from dna_versions), validity at world time, re-score.
    WITH s AS MATERIALIZED (
        SELECT row_number() OVER (ORDER BY x.score DESC, x.kind, x.name, x.tenant) AS ord, x.*
        FROM dna.search(scope, query, query_embedding, model_id, k => depth, kinds => kinds,
                        tenant => CASE WHEN personal IS TRUE THEN '' ELSE tenant END, personal => personal IS TRUE,
                        -- in force at world time inside the lanes; a read of the past (as_of) judges
                        -- validity from the versions believed then, below
                        valid_time => CASE WHEN as_of IS NULL THEN world END) AS x
    ), c AS (
        SELECT s.*, i.spec AS cur_spec, i.valid_at AS cur_valid, i.name IS NOT NULL AS stored,
               av.spec AS past_spec, av.valid_at AS past_valid, av.version AS past_version,
               av.created_at AS past_recorded, hist.first_version
        FROM s
        LEFT JOIN dna.dna_kinds AS dk ON dk.kind = s.kind
        LEFT JOIN LATERAL (SELECT i.spec, i.valid_at, i.name FROM dna.dna_instances AS i   -- one index probe per hit
                           WHERE i.scope = scope AND i.kind = s.kind AND i.api_version = dk.api_version
                             AND i.name = s.name AND i.tenant = s.tenant LIMIT 1) AS i ON true
        LEFT JOIN LATERAL (SELECT v.spec, v.valid_at, v.version, v.created_at FROM dna.dna_versions AS v
                           WHERE as_of IS NOT NULL AND v.scope = scope AND v.kind = s.kind
                             AND v.api_version = dk.api_version AND v.name = s.name AND v.tenant = s.tenant
                             AND v.created_at <= as_of
                           ORDER BY v.version DESC LIMIT 1) AS av ON true
        LEFT JOIN LATERAL (SELECT min(v.version) AS first_version FROM dna.dna_versions AS v
                           WHERE as_of IS NOT NULL AND v.scope = scope AND v.kind = s.kind
                             AND v.api_version = dk.api_version AND v.name = s.name AND v.tenant = s.tenant) AS hist ON true
    ), r AS (
        SELECT c.*,
               CASE WHEN as_of IS NULL THEN coalesce(c.cur_spec, '{}'::jsonb) ELSE c.past_spec END AS spec,
               CASE WHEN as_of IS NULL THEN c.cur_valid ELSE c.past_valid END AS valid_at,
               as_of IS NOT NULL AND c.past_version IS NULL
                   AND (c.first_version IS NULL OR c.first_version > 1) AS blind
        FROM c
    ), scored AS MATERIALIZED (                            -- retention computed once per row
        SELECT r.*,
               CASE WHEN r.kind = 'Engram' AND r.spec <> '{}'::jsonb THEN dna.memory_retention(r.spec, world) END AS retention
        FROM r
        WHERE NOT r.blind AND r.spec IS NOT NULL
          AND (r.valid_at IS NULL OR r.valid_at @> world)
          AND dna.currently_valid(r.spec ->> 'valid_to', world)
    ), ranked AS (
        SELECT sc.*,
               CASE WHEN sc.retention IS NULL THEN sc.score
                    ELSE sc.score * greatest(0.05, sc.retention) * dna.affect_factor(sc.spec ->> 'affect') END AS rescored
        FROM scored AS sc
    )
    SELECT (SELECT coalesce(jsonb_agg(to_jsonb(r.name) ORDER BY r.name COLLATE "C"), '[]'::jsonb)
            FROM (SELECT DISTINCT r2.name FROM r AS r2 WHERE r2.blind) AS r),
           (SELECT coalesce(jsonb_agg(jsonb_build_object('x', dna.memory_display(
                   jsonb_strip_nulls(jsonb_build_object(
                       'key', rk.name || chr(31) || rk.kind || chr(31) || rk.tenant,
                       'scope', scope, 'kind', rk.kind, 'name', rk.name, 'tenant', rk.tenant,
                       'personal', starts_with(rk.tenant, 'personal:'),
                       'score', rk.rescored, 'search_score', rk.score,
                       'retention', round(rk.retention::numeric, 4),
                       'title', rk.title, 'snippet', rk.snippet, 'similarity', rk.similarity,
                       'lexical_score', rk.lexical_score, 'rank_dense', rk.rank_dense, 'rank_lexical', rk.rank_lexical,
                       'recorded_at', dna.iso8601(rk.past_recorded), 'as_of_version', rk.past_version)),
                   rk.spec), 'spec', rk.spec)
                   ORDER BY rk.rescored DESC, rk.name COLLATE "C", rk.kind COLLATE "C", rk.tenant COLLATE "C"), '[]'::jsonb)
            FROM ranked AS rk)
    INTO truncated, cands;

    hits := coalesce((SELECT jsonb_agg(e.value -> 'x' ORDER BY e.ord) FROM jsonb_array_elements(cands) WITH ORDINALITY AS e(value, ord)), '[]');

    IF semantic_on AND jsonb_array_length(hits) > 0 THEN
        -- Ecphory with the semantic hook fed: the cosine of the query to each candidate's stored
        -- vector (same model_id), fused with the recall ranking by RRF.
        tbl := dna.search_table(dna.model_dims(model_id));
        EXECUTE format(
            'SELECT coalesce(jsonb_object_agg(c.key, 1 - (t.embedding <=> $1)), ''{}''::jsonb)
             FROM jsonb_array_elements($2) AS e(value)
             CROSS JOIN LATERAL (SELECT e.value ->> ''key'' AS key, e.value ->> ''kind'' AS kind,
                                        e.value ->> ''name'' AS name, e.value ->> ''tenant'' AS tenant) AS c
             JOIN %s AS t ON t.scope = $3 AND t.model_id = $4 AND t.kind = c.kind AND t.name = c.name
                         AND t.tenant = c.tenant AND t.embedding IS NOT NULL', tbl)
            INTO sem USING query_embedding, hits, scope, model_id;
        engrams := coalesce((SELECT jsonb_agg(jsonb_build_object('key', e.value -> 'x' ->> 'key',
                                                                 'name', e.value -> 'x' ->> 'name',
                                                                 'spec', e.value -> 'spec') ORDER BY e.ord)
                             FROM jsonb_array_elements(cands) WITH ORDINALITY AS e(value, ord)), '[]');
        hits := dna.semantic_recall_fusion(hits, engrams, query, sem, world);
    END IF;

    top := coalesce((SELECT jsonb_agg(e.value - 'key' ORDER BY e.ord)
                     FROM jsonb_array_elements(hits) WITH ORDINALITY AS e(value, ord) WHERE e.ord <= k), '[]');

    IF reconsolidate THEN
        -- Light reconsolidation of the surfaced Engrams, in one statement; fail-soft and never waits:
        -- a row locked by another writer is skipped (SKIP LOCKED) and named in reconsolidation_errors.
        BEGIN
            PERFORM dna.set_op('reconsolidate');
            WITH want AS (
                SELECT e.value ->> 'name' AS name, e.value ->> 'tenant' AS tenant, e.ord
                FROM jsonb_array_elements(top) WITH ORDINALITY AS e(value, ord) WHERE e.value ->> 'kind' = 'Engram'
                  AND e.value ->> 'tenant' = tenant   -- the cue never lands in another partition (INV-PERSONAL)
            ), locked AS (
                SELECT i.scope, i.kind, i.api_version, i.name, i.tenant
                FROM dna.dna_instances AS i JOIN want AS w ON i.name = w.name AND i.tenant = w.tenant
                WHERE i.scope = scope AND i.kind = 'Engram'
                FOR UPDATE OF i SKIP LOCKED
            ), upd AS (
                UPDATE dna.dna_instances AS i SET spec = dna.reconsolidated_spec(i.spec, world, query, actor)
                FROM locked AS l
                WHERE i.scope = l.scope AND i.kind = l.kind AND i.api_version = l.api_version
                  AND i.name = l.name AND i.tenant = l.tenant
                RETURNING i.name, i.tenant
            )
            SELECT coalesce((SELECT jsonb_agg(to_jsonb(u.name) ORDER BY w.ord)
                             FROM upd AS u JOIN want AS w ON w.name = u.name AND w.tenant = u.tenant), '[]'::jsonb),
                   coalesce((SELECT jsonb_agg(jsonb_build_object('name', w.name, 'sqlstate', '55P03',
                                                                 'error', 'row locked by another writer; skipped')
                                              ORDER BY w.ord)
                             FROM want AS w WHERE NOT EXISTS (SELECT 1 FROM locked AS l WHERE l.name = w.name
                                                                                      AND l.tenant = w.tenant)), '[]'::jsonb)
            INTO done, failed;
            PERFORM dna.set_op(NULL);
        EXCEPTION WHEN OTHERS THEN
            failed := jsonb_build_array(jsonb_build_object('name', NULL, 'sqlstate', SQLSTATE, 'error', SQLERRM));
            done := '[]'::jsonb;
        END;
    END IF;

    result := jsonb_build_object('query', query, 'scope', scope, 'tenant', tenant, 'personal', personal IS TRUE, 'k', k, 'model_id', model_id,
                                 'degraded', NOT blank AND NOT semantic_on, 'semantic', semantic_on,
                                 'now', dna.iso8601(world), 'hits', top,
                                 'reconsolidated', done);
    IF jsonb_array_length(failed) > 0 THEN
        result := result || jsonb_build_object('reconsolidation_errors', failed);
    END IF;
    IF as_of IS NOT NULL THEN
        result := result || jsonb_build_object('as_of', dna.iso8601(as_of), 'as_of_truncated', truncated);
    END IF;
    RETURN result;
END
$$;

COMMENT ON FUNCTION dna.recall(text, text, vector, text, text[], integer, text, boolean, text, timestamptz, timestamptz, boolean) IS
'Recall over the memory Kinds (kinds, default dna.recallable_kinds()). Steps: dna.search over-fetches '
'max(3k, 10) candidates (dense lane when query_embedding is given, lexical lane always; model_id default: '
'the scope''s model_id with the most documents (dna.scope_models; of query_embedding''s width when given), '
'else dna-fake-hash-v1; tenant overlay); each candidate''s spec is the stored one, or with as_of the version '
'of dna_versions recorded at or before as_of (transaction time); memories not valid at world time now '
'(default as_of, else now()) — valid_at not containing now or dna.currently_valid false — are dropped; '
'Engrams are re-scored score × max(0.05, dna.memory_retention) × dna.affect_factor(spec.affect); '
'ordered (score desc, name, kind, tenant). With a non-zero query_embedding the ecphory ranking '
'(dna.ecphory_score with the cosine of the query to each stored vector) is fused by RRF '
'(dna.semantic_recall_fusion) and semantic = true; otherwise semantic = false and degraded = true (a '
'blank query has no hits and is not degraded). The first k (0..1000, default 5) are returned with '
'display fields (dna.memory_display) and retention (Engram, 4 places). Then, unless reconsolidate is '
'false or as_of is given, each surfaced Engram is reconsolidated (dna.reconsolidated_spec; actor '
'default session_user), fail-soft: a locked or failing row is skipped and named in '
'reconsolidation_errors. An as_of read never writes; memories whose history was pruned past as_of (or '
'that have none) are dropped from hits and named in as_of_truncated. Only memories of the partition read '
'(tenant, or the personal partition) are reconsolidated: a cue never lands in a shared base row. personal => '
'true reads the caller''s personal partition plus the shared base, nothing from any workspace (42501 '
'without an identity); each hit says personal true|false. Returns {query, scope, tenant, personal, k, '
'model_id, degraded, semantic, now, hits, reconsolidated[, reconsolidation_errors][, as_of, '
'as_of_truncated]}. Errors: 22023 (k, kinds, model_id, embedding width), 22001 (query > 10000 chars), '
'22007 (infinite now/as_of), 42501 (reserved tenant).';

DROP FUNCTION IF EXISTS dna.forget(text, text, text, text, text, timestamptz);  -- before the personal parameter (0009_tenancy)
CREATE OR REPLACE FUNCTION dna.forget(scope text, name text, superseded_by text DEFAULT NULL,
                                      kind text DEFAULT 'Engram', tenant text DEFAULT '',
                                      now timestamptz DEFAULT NULL, personal boolean DEFAULT false)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
#variable_conflict use_variable
DECLARE
    at timestamptz;
    api text;
    stored jsonb;
    updated jsonb;
    already boolean;
BEGIN
    scope := dna.check_scope(scope);               -- 22023 outside the name rule (sql/catalog.sql)
    name := dna.check_key('name', name, 512);
    tenant := dna.resolve_tenant(tenant, personal);       -- personal: the caller's own partition
    kind := dna.check_memory_kind(coalesce(kind, 'Engram'));
    IF superseded_by IS NOT NULL THEN
        superseded_by := dna.check_key('superseded_by', superseded_by, 512);
    END IF;
    at := coalesce(dna.check_now(now), now());
    SELECT l.api, l.stored INTO api, stored FROM dna.lock_memory(scope, kind, name, tenant, 'forget') AS l;
    IF superseded_by IS NOT NULL AND NOT dna.json_truthy(stored -> 'superseded_by_memory') THEN
        -- The successor is a memory of a memory Kind the caller can see in this scope: its own
        -- partition or the shared base (row-level security hides the rest).
        IF superseded_by = name THEN
            RAISE EXCEPTION 'forget: %/% cannot be superseded by itself', kind, name USING ERRCODE = '22023';
        END IF;
        IF NOT EXISTS (SELECT 1 FROM dna.dna_instances AS i
                       WHERE i.scope = scope AND i.name = superseded_by AND i.tenant IN (tenant, '')
                         AND i.kind = ANY (dna.recallable_kinds())) THEN
            RAISE EXCEPTION 'forget: superseded_by names no memory: no % in scope % (tenant %)',
                quote_literal(superseded_by), quote_literal(scope), quote_literal(tenant)
                USING ERRCODE = '23503',
                      HINT = 'Remember the successor first (dna.remember), then forget this one with superseded_by => its name.';
        END IF;
    END IF;
    already := dna.json_truthy(stored -> 'valid_to');
    updated := stored;
    IF NOT already THEN
        updated := updated || jsonb_build_object('valid_to', dna.iso8601(at));
    END IF;
    IF superseded_by IS NOT NULL AND NOT dna.json_truthy(stored -> 'superseded_by_memory') THEN
        updated := updated || jsonb_build_object('superseded_by_memory', superseded_by);
    END IF;
    IF updated <> stored THEN
        PERFORM dna.set_op('forget');
        UPDATE dna.dna_instances AS i SET spec = updated
        WHERE i.scope = scope AND i.kind = kind AND i.api_version = api AND i.name = name AND i.tenant = tenant;
        PERFORM dna.set_op(NULL);
    END IF;
    RETURN jsonb_build_object('kind', kind, 'name', name, 'scope', scope, 'tenant', tenant,
                              'valid_to', updated -> 'valid_to', 'already_forgotten', already,
                              'superseded_by', updated -> 'superseded_by_memory', 'written', updated <> stored);
END
$$;

COMMENT ON FUNCTION dna.forget(text, text, text, text, text, timestamptz, boolean) IS
'Retires a memory in world time: sets spec.valid_to = now (default now(); valid_at closes there) and '
'records superseded_by in spec.superseded_by_memory. Never deletes. Idempotent: a memory already '
'forgotten keeps its first valid_to (and its first superseded_by) and reports already_forgotten = '
'true; nothing is written when nothing changes. Returns {kind, name, scope, tenant, valid_to, '
'already_forgotten, superseded_by, written}. personal => true acts on the caller''s personal memory (42501 without an identity). '
'superseded_by must name a memory (any memory Kind) of the scope in the same partition or the shared base. '
'Errors: P0002 (no such memory), 23503 (superseded_by names no memory), 22023 (not a memory '
'Kind, blank key, superseded by itself, scope outside the name rule), 22007 (infinite now), 42501 (reserved tenant).';

DROP FUNCTION IF EXISTS dna.revive(text, text, text, text, text, timestamptz);  -- before the personal parameter (0009_tenancy)
CREATE OR REPLACE FUNCTION dna.revive(scope text, name text, revived_by text DEFAULT NULL,
                                      kind text DEFAULT 'Engram', tenant text DEFAULT '',
                                      now timestamptz DEFAULT NULL, personal boolean DEFAULT false)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
#variable_conflict use_variable
DECLARE
    at timestamptz;
    api text;
    stored jsonb;
    revival jsonb;
    revivals jsonb;
BEGIN
    scope := dna.check_scope(scope);               -- 22023 outside the name rule (sql/catalog.sql)
    name := dna.check_key('name', name, 512);
    tenant := dna.resolve_tenant(tenant, personal);       -- personal: the caller's own partition
    kind := dna.check_memory_kind(coalesce(kind, 'Engram'));
    at := coalesce(dna.check_now(now), now());
    SELECT l.api, l.stored INTO api, stored FROM dna.lock_memory(scope, kind, name, tenant, 'revive') AS l;
    revivals := CASE WHEN jsonb_typeof(stored -> 'revivals') = 'array' THEN stored -> 'revivals' ELSE '[]'::jsonb END;
    IF NOT dna.json_truthy(stored -> 'valid_to') THEN
        RETURN jsonb_build_object('kind', kind, 'name', name, 'scope', scope, 'tenant', tenant,
                                  'revived', false, 'already_in_force', true, 'revivals', jsonb_array_length(revivals));
    END IF;
    revival := jsonb_strip_nulls(jsonb_build_object('valid_to', stored -> 'valid_to', 'revived_at', dna.iso8601(at),
                                                    'superseded_by', stored -> 'superseded_by_memory',
                                                    'revived_by', revived_by));
    PERFORM dna.set_op('revive');
    UPDATE dna.dna_instances AS i
    SET spec = (stored - 'valid_to' - 'superseded_by_memory') || jsonb_build_object('revivals', revivals || jsonb_build_array(revival))
    WHERE i.scope = scope AND i.kind = kind AND i.api_version = api AND i.name = name AND i.tenant = tenant;
    PERFORM dna.set_op(NULL);
    RETURN jsonb_build_object('kind', kind, 'name', name, 'scope', scope, 'tenant', tenant,
                              'revived', true, 'already_in_force', false, 'revival', revival,
                              'revivals', jsonb_array_length(revivals) + 1);
END
$$;

COMMENT ON FUNCTION dna.revive(text, text, text, text, text, timestamptz, boolean) IS
'Reopens the world-time window of a forgotten memory: removes spec.valid_to and '
'superseded_by_memory and appends {valid_to, revived_at (now, default now()), superseded_by?, '
'revived_by?} to the append-only spec.revivals (which is what lets the bitemporal guard accept '
'the dropped valid_to). A memory already in force returns already_in_force = true and writes nothing '
'(no version). Returns {kind, name, scope, tenant, revived, already_in_force, revival?, revivals (count)}. '
'personal => true acts on the caller''s personal memory (42501 without an identity). Errors: P0002 (no such memory), 22023 (not a memory Kind, blank key), 22007, 42501.';

DROP FUNCTION IF EXISTS dna.list_memories(text, text[], text, boolean, timestamptz, integer);  -- before the personal parameter (0009_tenancy)
CREATE OR REPLACE FUNCTION dna.list_memories(scope text, kinds text[] DEFAULT NULL, tenant text DEFAULT '',
                                             include_invalid boolean DEFAULT false, now timestamptz DEFAULT NULL,
                                             max_rows integer DEFAULT 100, personal boolean DEFAULT false)
RETURNS jsonb
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_variable
DECLARE
    world timestamptz;
    items jsonb;
    total bigint;
BEGIN
    scope := dna.check_scope(scope);               -- 22023 outside the name rule (sql/catalog.sql)
    tenant := dna.resolve_tenant(tenant, personal);       -- personal: the caller's own partition
    IF max_rows IS NULL OR max_rows < 0 OR max_rows > 10000 THEN
        RAISE EXCEPTION 'max_rows must be between 0 and 10000, got %', max_rows USING ERRCODE = '22023';
    END IF;
    kinds := dna.check_memory_kinds(kinds);             -- NULL: every memory Kind
    world := coalesce(dna.check_now(now), now());
    WITH m AS (
        SELECT i.*, (i.valid_at @> world AND dna.currently_valid(i.spec ->> 'valid_to', world)) AS valid
        FROM dna.dna_instances AS i
        WHERE i.scope = scope AND i.kind = ANY (kinds)
          AND (i.tenant = tenant OR (i.tenant = '' AND NOT EXISTS (
                 SELECT 1 FROM dna.dna_instances AS t
                 WHERE t.scope = i.scope AND t.kind = i.kind AND t.api_version = i.api_version
                   AND t.name = i.name AND t.tenant = tenant)))
    ), f AS (
        SELECT m.* FROM m WHERE include_invalid OR m.valid
    )
    SELECT (SELECT count(*) FROM f),
           (SELECT coalesce(jsonb_agg(x.obj ORDER BY x.created DESC, x.name COLLATE "C", x.kind COLLATE "C", x.tenant COLLATE "C"), '[]'::jsonb)
            FROM (SELECT f.name, f.kind, f.tenant, lower(f.valid_at) AS created_sort,
                         coalesce(dna.parse_timestamptz(f.spec ->> 'created_at'), f.created_at) AS created,
                         dna.memory_display(jsonb_strip_nulls(jsonb_build_object(
                             'kind', f.kind, 'name', f.name, 'tenant', f.tenant, 'personal', starts_with(f.tenant, 'personal:'),
                             'valid', f.valid,
                             'retention', CASE WHEN f.kind = 'Engram' THEN round(dna.memory_retention(f.spec, world)::numeric, 4) END,
                             'surface_count', f.spec -> 'surface_count', 'superseded_by', f.spec -> 'superseded_by_memory')),
                             f.spec) AS obj
                  FROM f ORDER BY created DESC, f.name COLLATE "C", f.kind COLLATE "C", f.tenant COLLATE "C"
                  LIMIT max_rows) AS x)
    INTO total, items;
    RETURN jsonb_build_object('scope', scope, 'tenant', tenant, 'personal', personal IS TRUE, 'now', dna.iso8601(world),
                              'include_invalid', include_invalid, 'total', total, 'memories', items);
END
$$;

COMMENT ON FUNCTION dna.list_memories(text, text[], text, boolean, timestamptz, integer, boolean) IS
'Lists the memories of a scope (kinds default dna.recallable_kinds(); tenant overlay: the tenant''s '
'rows shadow base rows), newest created_at first then name, kind, tenant; by default only those valid '
'at world time now (default now()), all with include_invalid. At most max_rows (0..10000, default 100). '
'Read-only. personal => true lists the caller''s personal memories over the shared base (42501 without '
'an identity). Returns {scope, tenant, personal, now, include_invalid, total, memories[{kind, name, tenant, valid, '
'retention, surface_count?, superseded_by?, summary, area, affect, tags, memory_type, created_at, '
'valid_from, valid_to?, title}]}. Errors: 22023, 22007, 42501.';
