-- pydna SQL package — memory plane: how the memory scores enter recall's ranking.
--
-- sql/memory_scoring.sql holds the reference's pure scoring functions (the DNA SDK goldens,
-- ../shared/conformance/dna/memory-scoring.json, reproduced bit-exact); this file holds how their
-- results enter dna.recall's ranking (sql/memory_verbs.sql) — the decay rules, dna.memory_factors,
-- dna.memory_explain — and the reference's own fusion, dna.semantic_recall_fusion (golden, no longer
-- what recall ranks by). New in revision 0017_recall_past_ingest (the functions were in
-- memory_scoring.sql before).
--
-- The combination (revision 0017, issue 15 item 1): recall's score is dna.search's hybrid score
-- times the memory's standing, retention × affect — signals about the memory (how well it is
-- retained under the call's decay rule; how salient it was written), never about its match to the
-- query, which the hybrid ranking measures once. Ecphory (the reference's cue match — the query's
-- phrase or tokens in the text, which the lexical lane already counts — plus its adjustments
-- relative to now: novelty, 24-hour recency, saturation, fidelity) only breaks ties between equal
-- scores. Measured on LoCoMo dev (bench/locomo.py; docs/memory.md, "How recall ranks"): multiplying
-- by (1 + ecphory) as revision 0016 did moved near-equal convex scores by the last session's +0.10
-- recency and cost R@10 against dna.search.

-- ---------------------------------------------------------------------------------------------
-- Decay rules
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.memory_retention(spec jsonb, now timestamptz, decay text)
RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE decay
               WHEN 'off' THEN 1.0::float8
               WHEN 'written' THEN dna.ebbinghaus_retention(
                   dna.stability_from_spec(spec),
                   dna.days_since(coalesce(nullif(spec ->> 'last_surfaced', ''), nullif(spec ->> 'last_recall_at', ''),
                                           nullif(spec ->> 'created_at', ''), nullif(spec ->> 'valid_from', '')), now))
               ELSE dna.memory_retention(spec, now) END
$$;

COMMENT ON FUNCTION dna.memory_retention(jsonb, timestamptz, text) IS
'Retention of a memory at world time now under a decay rule (dna.recall''s decay argument): '
'''surfaced'' (and any other value) = dna.memory_retention(spec, now), the reference: days since '
'last_surfaced (or last_recall_at); a memory never surfaced keeps 1.0. ''written'' = the same curve, '
'but a memory never surfaced decays from when it was written (created_at, else valid_from: its '
'session time). ''off'' = 1.0. Result in (0, 1]. Pure.';

-- ---------------------------------------------------------------------------------------------
-- The memory factors of a recall hit
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.memory_factors(kind text, spec jsonb, query text, now timestamptz,
                                              decay text DEFAULT 'surfaced',
                                              OUT factor double precision, OUT retention double precision,
                                              OUT affect double precision, OUT ecphory double precision)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    IF kind = 'Engram' AND spec IS NOT NULL AND spec <> '{}'::jsonb THEN
        retention := dna.memory_retention(spec, now, decay);
        affect := dna.affect_factor(spec ->> 'affect');
    END IF;
    -- The standing multiplies the hybrid score: retention and affect say how the memory stands,
    -- not how well it matches the query (the lanes say that, once).
    -- (greatest() skips a NULL: a Kind without retention must not take the 0.05 floor)
    factor := CASE WHEN retention IS NULL THEN 1.0 ELSE greatest(0.05, retention) END * coalesce(affect, 1.0);
    -- The tie-breaker between equal scores: the reference's ecphory score with no cosine (its
    -- semantic path would count the dense lane twice).
    ecphory := dna.ecphory_score(coalesce(spec, '{}'::jsonb), query, NULL, now);
END
$$;

COMMENT ON FUNCTION dna.memory_factors(text, jsonb, text, timestamptz, text) IS
'The memory factors of a recall candidate (dna.recall, revision 0017). factor = max(0.05, retention) × '
'affect, the memory''s standing, which multiplies its hybrid (dna.search) score: retention = '
'dna.memory_retention(spec, now, decay) and affect = dna.affect_factor(spec.affect) for Engrams; NULL '
'(factor 1) for other Kinds; factor in [0.05, 1.5]. ecphory = dna.ecphory_score(spec, query, NULL, now) '
'(the reference''s cue match and its adjustments: × 0.6 after 3+ cues in 24 h, + 0.05 never cued, + 0.10 '
'created within 24 h, + 0.05 numeric confidence > 1.1; no cosine, the dense lane counts it) only breaks ties '
'between equal scores: it never reorders hits whose score × factor differ. A factor equal for every '
'candidate leaves the hybrid order unchanged. Before 0017 factor was (1 + ecphory) × max(0.05, retention) × '
'affect (measured on LoCoMo dev under the convex fusion: R@10 0.692 against dna.search''s 0.699). Pure.';

CREATE OR REPLACE FUNCTION dna.memory_explain(kind text, spec jsonb, query text, now timestamptz,
                                              decay text DEFAULT 'surfaced')
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    f record;
    cue record;
    since text;
BEGIN
    SELECT * INTO f FROM dna.memory_factors(kind, spec, query, now, decay);
    SELECT * INTO cue FROM dna.score_engram(coalesce(spec, '{}'::jsonb), jsonb_build_object('query', coalesce(query, '')), NULL);
    since := CASE WHEN f.retention IS NULL OR decay = 'off' THEN NULL
                  ELSE coalesce(nullif(spec ->> 'last_surfaced', ''), nullif(spec ->> 'last_recall_at', ''),
                                CASE WHEN decay = 'written' THEN coalesce(nullif(spec ->> 'created_at', ''),
                                                                          nullif(spec ->> 'valid_from', '')) END) END;
    RETURN jsonb_strip_nulls(jsonb_build_object(
        'factor', f.factor, 'retention', f.retention, 'affect', f.affect, 'decay', decay,
        'stability_days', CASE WHEN f.retention IS NOT NULL THEN dna.stability_from_spec(spec) END,
        'days_since', dna.days_since(since, now), 'decays_from', since,
        'tie_break', jsonb_build_object('ecphory', f.ecphory, 'cue_match', cue.score, 'matched', to_jsonb(cue.matched),
                                        'adjustment', f.ecphory - cue.score)));
END
$$;

COMMENT ON FUNCTION dna.memory_explain(text, jsonb, text, timestamptz, text) IS
'The memory part of a recall hit''s explanation (dna.recall(…, explain => true)), as the terms enter the '
'ranking (dna.memory_factors): {factor (= max(0.05, retention) × affect, multiplies search_score), retention, '
'affect (Engrams), decay, stability_days, days_since and decays_from (the timestamp retention counts from; '
'absent when it keeps 1), tie_break {ecphory (breaks ties between equal scores only), cue_match '
'(dna.score_engram with the cue {query} and no cosine), matched (its dims: area, area~J, summary, '
'summary-tokens), adjustment (ecphory − cue_match: dna.ecphory_adjust''s saturation, novelty, recency, '
'fidelity)}} — absent keys when they do not apply. Pure.';

-- ---------------------------------------------------------------------------------------------
-- The reference's fusion (golden: semantic_recall_fusion)
-- ---------------------------------------------------------------------------------------------

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
'score_ecphory, semantic when present. Pure. Golden: semantic_recall_fusion. dna.recall no longer ranks by it '
'(revision 0016: it counted the dense lane twice; recall multiplies the hybrid score by dna.memory_factors).';
