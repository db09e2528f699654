-- pydna SQL package — fusion plane.
-- dna.rrf: the one Reciprocal Rank Fusion function used by every fused ranking
-- (Cormack, Clarke & Büttcher, "Reciprocal Rank Fusion outperforms Condorcet and individual
-- rank learning methods", SIGIR 2009); dna.check_weights, the one check of lane weights; dna.score_round,
-- the rounding that makes mathematically equal scores tie.

CREATE OR REPLACE FUNCTION dna.check_weights(what text, weights double precision[], lanes integer DEFAULT NULL)
RETURNS double precision[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    IF weights IS NULL THEN
        RETURN NULL;
    END IF;
    IF lanes IS NOT NULL AND cardinality(weights) <> lanes THEN
        RAISE EXCEPTION '% must hold % values (dense, lexical), got %', what, lanes, cardinality(weights)
            USING ERRCODE = '22023',
                  HINT = format('%s is {dense, lexical}: %s finite numbers >= 0, e.g. ''{1,1}'' (both lanes), '
                                '''{1,0}'' (the dense lane alone); NULL: the default (dna.search: the scope''s, else {1,1.5}).', what, lanes);
    END IF;
    -- NaN >= 0 is true in PostgreSQL (NaN sorts above every number), so NaN is caught by < Infinity.
    IF EXISTS (SELECT 1 FROM unnest(weights) AS x WHERE x IS NULL OR NOT (x >= 0 AND x < 'Infinity')) THEN
        RAISE EXCEPTION '% must be finite numbers >= 0, got %', what, weights
            USING ERRCODE = '22023',
                  HINT = 'A weight scales its lane''s contribution; 0 turns the lane off. NaN, Infinity and negative weights have no ranking meaning.';
    END IF;
    RETURN weights;
END
$$;

COMMENT ON FUNCTION dna.check_weights(text, double precision[], integer) IS
'Returns weights when every element is a finite number >= 0 (and, given lanes, there are that many); NULL '
'stays NULL. Errors: 22023 naming the argument (what) and the value for NULL elements, NaN, ±Infinity, negative '
'values or another length, with a hint of the valid values. Used by dna.search (dna.rrf checks the same inline, a NULL element counting 1).';

-- PL/pgSQL, not SQL: a STRICT SQL function whose body is not strict is never inlined, and the SQL
-- function executor cost ~5.5 us a call (half its time; dna.search rounds ~200 scores a query). Made
-- inlinable instead, x would be evaluated up to five times per call: a cosine distance each time in
-- the dense lane (pgvector's operators cost 1, cheap enough for the planner to inline).
CREATE OR REPLACE FUNCTION dna.score_round(x double precision)
RETURNS double precision
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
BEGIN
    RETURN CASE WHEN x = 0 OR x = 'NaN'::float8 OR abs(x) = 'Infinity'::float8 THEN x
                ELSE round(x::numeric, 11 - floor(log(abs(x)))::integer)::float8 END;
END
$$;

COMMENT ON FUNCTION dna.score_round(double precision) IS
'x rounded to 12 significant digits (0, NaN and ±Infinity unchanged). Scores that are mathematically '
'equal but 1 ulp apart after float arithmetic (two BM25 sums added in another order: 5.730864281798461 vs '
'5.7308642817984605) round to one value, so dna.search orders them by its unique key; distinct scores '
'closer than 1e-12 relative also tie. Pure.';

CREATE OR REPLACE FUNCTION dna.exact_scan_rows()
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT 2000 $$;

COMMENT ON FUNCTION dna.exact_scan_rows() IS
'2000: dna.search scans the dense lane exactly (no HNSW) when the scope holds at most this many rows '
'(passages) of the model and exact is NULL. At that size an exact scan of 384 dims costs about 1-2 ms, '
'no more than the graph, and the answer cannot change when ANALYZE changes the plan.';

CREATE OR REPLACE FUNCTION dna.rrf(ranks integer[], weights double precision[] DEFAULT NULL,
                                   k double precision DEFAULT 60)
RETURNS double precision
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    total double precision := 0;
    i integer;
BEGIN
    IF k IS NULL OR k <= 0 OR k = 'NaN'::float8 OR k = 'Infinity'::float8 THEN
        RAISE EXCEPTION 'dna.rrf: k must be a finite number > 0, got %', k USING ERRCODE = '22023',
            HINT = 'k damps the ranks: weight / (k + rank); 60 is the usual value (Cormack et al. 2009).';
    END IF;
    IF ranks IS NULL THEN
        RETURN 0;
    END IF;
    IF weights IS NOT NULL AND cardinality(weights) <> cardinality(ranks) THEN
        RAISE EXCEPTION 'dna.rrf: % ranks but % weights', cardinality(ranks), cardinality(weights)
            USING ERRCODE = '22023', HINT = 'Give one weight per rank (lane), or NULL for 1 each.';
    END IF;
    FOR i IN 1 .. coalesce(cardinality(weights), 0) LOOP   -- as dna.check_weights, without a query per call
        IF NOT (coalesce(weights[i], 1) >= 0 AND coalesce(weights[i], 1) < 'Infinity') THEN
            RAISE EXCEPTION 'dna.rrf: weights must be finite numbers >= 0, got %', weights
                USING ERRCODE = '22023', HINT = 'A weight scales its lane''s 1 / (k + rank); 0 turns the lane off, NULL counts 1.';
        END IF;
    END LOOP;
    FOR i IN 1 .. coalesce(cardinality(ranks), 0) LOOP
        CONTINUE WHEN ranks[i] IS NULL;            -- absent from that lane: contributes 0
        IF ranks[i] < 1 THEN
            RAISE EXCEPTION 'dna.rrf: ranks are 1-based, got %', ranks[i] USING ERRCODE = '22023',
                HINT = 'A lane''s best hit is rank 1; NULL: absent from that lane (contributes 0).';
        END IF;
        total := total + coalesce(weights[i], 1.0) / (k + ranks[i]);
    END LOOP;
    RETURN total;
END
$$;

COMMENT ON FUNCTION dna.rrf(integer[], double precision[], double precision) IS
'Reciprocal Rank Fusion: sum over lanes i of weight_i / (k + rank_i). ranks are 1-based, one per lane, '
'NULL = absent from that lane (contributes 0); weights default to 1 per lane; k defaults to 60 '
'(Cormack, Clarke & Büttcher, SIGIR 2009). Result in [0, sum(weights)/(k+1)]. Pure, IMMUTABLE, '
'PARALLEL SAFE. Errors: 22023 for a rank < 1, k <= 0 or not finite, weights of another length, or a weight '
'that is NaN, infinite or negative (a NULL weight counts 1); each names the value, with a hint of the valid ones.';

CREATE OR REPLACE FUNCTION dna.min_max(x double precision, lo double precision, hi double precision)
RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN x IS NULL THEN 0
                WHEN hi > lo THEN (x - lo) / (hi - lo)
                ELSE 1 END
$$;

COMMENT ON FUNCTION dna.min_max(double precision, double precision, double precision) IS
'Min-max normalisation of a lane score x over the lane''s candidates for one query (lo = their minimum, '
'hi = their maximum): (x - lo) / (hi - lo) in [0, 1]; 1 when every candidate scores the same (hi = lo); '
'0 when x is NULL (absent from the lane). Pure.';

CREATE OR REPLACE FUNCTION dna.convex_fusion(dense double precision, lexical double precision,
                                             dense_weight double precision DEFAULT 0.5)
RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT dense_weight * coalesce(dense, 0) + (1 - dense_weight) * coalesce(lexical, 0)
$$;

COMMENT ON FUNCTION dna.convex_fusion(double precision, double precision, double precision) IS
'Convex combination of two normalised lane scores (each in [0, 1], dna.min_max): dense_weight x dense + '
'(1 - dense_weight) x lexical, dense_weight in [0, 1] (default 0.5; dna.search checks it); NULL counts 0. '
'The second fusion of dna.search (fusion => ''convex''), after Bruch, Gai & Ingber, "An Analysis of Fusion '
'Functions for Hybrid Retrieval", ACM TOIS 2023. Pure.';
