-- pydna SQL package — fusion plane.
-- dna.rrf: the one Reciprocal Rank Fusion function used by every fused ranking
-- (Cormack, Clarke & Büttcher, "Reciprocal Rank Fusion outperforms Condorcet and individual
-- rank learning methods", SIGIR 2009).

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
        RAISE EXCEPTION 'dna.rrf: k must be a finite number > 0, got %', k USING ERRCODE = '22023';
    END IF;
    IF ranks IS NULL THEN
        RETURN 0;
    END IF;
    IF weights IS NOT NULL AND cardinality(weights) <> cardinality(ranks) THEN
        RAISE EXCEPTION 'dna.rrf: % ranks but % weights', cardinality(ranks), cardinality(weights)
            USING ERRCODE = '22023';
    END IF;
    FOR i IN 1 .. coalesce(cardinality(ranks), 0) LOOP
        CONTINUE WHEN ranks[i] IS NULL;            -- absent from that lane: contributes 0
        IF ranks[i] < 1 THEN
            RAISE EXCEPTION 'dna.rrf: ranks are 1-based, got %', ranks[i] USING ERRCODE = '22023';
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
'PARALLEL SAFE. Errors: 22023 for a rank < 1, k <= 0 or not finite, or weights of another length.';
