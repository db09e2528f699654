-- pydna SQL package — memory plane: pure scoring.
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
-- The memory plane is six files, in a fresh install's order: memory_time.sql (time helpers),
-- memory_scoring.sql (this file: the reference's pure scoring, conformance goldens),
-- memory_ranking.sql (how those scores enter recall's ranking: dna.memory_factors, memory_explain,
-- the decay rules, semantic_recall_fusion; revision 0017), memory_kinds.sql (memory Kinds, specs and
-- claims), memory_write.sql (the write path's trigger functions) and memory_verbs.sql (dna.remember,
-- recall, forget, revive, list_memories).

-- ---------------------------------------------------------------------------------------------
-- Pure scoring (conformance: memory-scoring.json)
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.json_number(value jsonb)
RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    -- jsonb numbers are numeric (any size); float8 is not: clamp instead of overflowing, so a value
    -- stored before the door checked it (0015_governed_history) cannot break a read of its scope.
    SELECT CASE WHEN jsonb_typeof(value) = 'number' THEN
               CASE WHEN abs((value #>> '{}')::numeric) > 1e300 THEN sign((value #>> '{}')::numeric)::float8 * 1e300
                    WHEN abs((value #>> '{}')::numeric) < 1e-300 THEN 0.0::float8
                    ELSE (value #>> '{}')::numeric::float8 END END
$$;

COMMENT ON FUNCTION dna.json_number(jsonb) IS
'A JSON number as double precision, clamped to ±1e300 (magnitudes below 1e-300 → 0) instead of '
'overflowing; NULL when value is not a number. Pure.';

CREATE OR REPLACE FUNCTION dna.ebbinghaus_retention(stability_days double precision,
                                                    days_since_recall double precision)
RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN days_since_recall IS NULL OR days_since_recall <= 0 THEN 1.0::float8
                -- exp() below about -745 underflows float8 (an error, not 0): the exponent stops at -700.
                ELSE exp(greatest(-700.0, -days_since_recall / greatest(0.1, coalesce(stability_days, 15.0)))) END
$$;

COMMENT ON FUNCTION dna.ebbinghaus_retention(double precision, double precision) IS
'Ebbinghaus retention R = exp(-t/S), t = days since last recall, S = stability in days (floored '
'at 0.1); the exponent is floored at -700 (R >= exp(-700) ~ 1e-304, where float8 would underflow). Never '
'recalled (t NULL) or t <= 0 → 1.0. Result in (0, 1]. Pure. Golden: ebbinghaus_retention.';

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
               WHEN 'number' THEN dna.json_number(spec -> 'confidence_score')
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
       AND dna.json_number(spec -> 'engram_stability_days') > 0 THEN
        RETURN dna.json_number(spec -> 'engram_stability_days');
    END IF;
    CASE jsonb_typeof(spec -> 'confidence_score')
    WHEN 'string' THEN
        RETURN CASE lower(spec ->> 'confidence_score')
                   WHEN 'faint' THEN 5.0 WHEN 'firm' THEN 15.0 WHEN 'burning' THEN 45.0 ELSE 15.0 END;
    WHEN 'number' THEN
        s := dna.json_number(spec -> 'confidence_score');
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

CREATE OR REPLACE FUNCTION dna.memory_text_of(fields text[], spec jsonb)
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    IF fields IS NULL OR fields = '{area,title,summary,body}'::text[] THEN
        RETURN dna.engram_text(spec);
    END IF;
    RETURN (SELECT regexp_replace(coalesce(string_agg(spec ->> f, ' ' ORDER BY o), ''), '^\s+|\s+$', '', 'g')
            FROM unnest(fields) WITH ORDINALITY AS u(f, o)
            WHERE dna.json_truthy(spec -> f));
END
$$;

COMMENT ON FUNCTION dna.memory_text_of(text[], jsonb) IS
'dna.memory_text given the Kind''s embed_fields (NULL: an Engram''s, dna.engram_text): the fields present '
'in spec, space-joined, trimmed. Pure, so a statement that already joined dna_kinds calls it per row '
'without a nested read (Citus: no function reading dna_* tables inside a statement on a shard).';

CREATE OR REPLACE FUNCTION dna.memory_text(kind text, spec jsonb)
RETURNS text
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $$
DECLARE
    fields text[];
BEGIN
    SELECT dk.embed_fields INTO fields FROM dna.dna_kinds AS dk WHERE dk.kind = memory_text.kind;
    RETURN dna.memory_text_of(fields, spec);
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
    IF jsonb_typeof(spec -> 'confidence_score') = 'number' AND dna.json_number(spec -> 'confidence_score') > 1.1 THEN
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
'dna.score_engram with the cue {query} then dna.ecphory_adjust at now: the score '
'dna.semantic_recall_fusion ranks ecphory by (it passes at >= 0.30); dna.recall breaks ties by it '
'(dna.memory_factors, sql/memory_ranking.sql). Pure.';
