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

CREATE OR REPLACE FUNCTION dna.z_score(x double precision, lo double precision, sd double precision)
RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN x IS NULL THEN 0
                WHEN sd > 0 THEN (x - lo) / sd
                ELSE 1 END
$$;

COMMENT ON FUNCTION dna.z_score(double precision, double precision, double precision) IS
'z-score normalisation of a lane score x over the lane''s candidates for one query, shifted so the lowest '
'candidate is 0 (lo = their minimum, sd = their population standard deviation): (x - lo) / sd >= 0, in standard '
'deviations above the lowest; 1 when every candidate scores the same (sd = 0); 0 when x is NULL (absent from the '
'lane, as low as the lowest). The shift (z(x) - z(lo)) changes no ranking of a convex fusion: each lane''s '
'terms move by one constant. dna.search''s convex fusion since revision 0025 (before: dna.min_max), which keeps '
'a lane whose candidates score nearly alike from spreading them over the whole [0, 1] (bench/RESULTS.md, '
'"Fusion at 1M"). Pure.';

CREATE OR REPLACE FUNCTION dna.convex_fusion(dense double precision, lexical double precision,
                                             dense_weight double precision DEFAULT 0.5)
RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT dense_weight * coalesce(dense, 0) + (1 - dense_weight) * coalesce(lexical, 0)
$$;

COMMENT ON FUNCTION dna.convex_fusion(double precision, double precision, double precision) IS
'Convex combination of two normalised lane scores (dna.search: dna.z_score; dna.min_max before 0025): dense_weight x dense + '
'(1 - dense_weight) x lexical, dense_weight in [0, 1] (default 0.5; dna.search checks it); NULL counts 0. '
'The second fusion of dna.search (fusion => ''convex''), after Bruch, Gai & Ingber, "An Analysis of Fusion '
'Functions for Hybrid Retrieval", ACM TOIS 2023. Pure.';

-- ---------------------------------------------------------------------------------------------
-- Diversity: duplicate collapse and MMR over a fused ranking (issue 27 item 2)
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.text_key(body text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    -- heading lines out (a passage starts with its section's heading, which a copy in another file does
    -- not share): an RST or setext title with its underline, a bare adornment line (an overline), a
    -- Markdown ATX heading; then every run of characters other than letters and digits one space. A
    -- passage that is nothing but headings (a section cut off before its text) is keyed by them.
    -- The runs are replaced by a pattern that leaves a lone space alone (the same text as replacing
    -- every run, '[^[:alnum:]]+': a run that starts with another character, or a space and more, is
    -- one match, greedy), so a prose text costs one match per punctuation mark instead of one per
    -- word (~35 us instead of ~100 for a 1,400-character abstract: the matches are the cost). A text
    -- without a line break has no heading line to drop (each heading rule matches a whole line, so
    -- there it could only match the whole text, which then falls back to the same key): its key is
    -- the second form alone, without the three heading patterns.
    SELECT CASE WHEN strpos(coalesce(body, ''), E'\n') = 0
        THEN nullif(' ' || btrim(regexp_replace(lower(coalesce(body, '')),
                                                '[^[:alnum:] ][^[:alnum:]]*| [^[:alnum:]]+', ' ', 'g')) || ' ', '  ')
        ELSE coalesce(
        nullif(' ' || btrim(regexp_replace(lower(
               regexp_replace(regexp_replace(regexp_replace(body,
                   '^[^\n]*\n([=~^"''`#*+:._-])\1{2,}[ \t]*$', '', 'gn'),
                   '^([=~^"''`#*+:._-])\1{2,}[ \t]*$', '', 'gn'),
                   '^[ \t]{0,3}#{1,6}([ \t][^\n]*)?$', '', 'gn')),
               '[^[:alnum:] ][^[:alnum:]]*| [^[:alnum:]]+', ' ', 'g')) || ' ', '  '),
        nullif(' ' || btrim(regexp_replace(lower(body), '[^[:alnum:] ][^[:alnum:]]*| [^[:alnum:]]+', ' ', 'g')) || ' ', '  '))
        END
$$;

COMMENT ON FUNCTION dna.text_key(text) IS
'The text of a passage as dna.diversify compares it: heading lines dropped (an RST or setext title with its '
'underline, an adornment line, a Markdown ATX heading: a passage begins with its own section''s heading, which a '
'copy in another file does not share), lower-cased, every run of characters other than letters and digits one '
'space (Markdown or RST marks, punctuation and line breaks do not tell copies apart), with one space before and '
'after (so that a containment is of whole words). A text that is only headings (a section cut off before its '
'text) is keyed by its headings the same way. NULL for a text with no letter or digit. Pure.';

CREATE OR REPLACE FUNCTION dna.collapses_by_text(kind text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    -- a Turn is indexed with the turns before it (dna.conversation_context_turns()): the text of turn i+1
    -- holds turn i's, by design, so the text rules would drop an earlier turn for a later one (0023)
    SELECT kind IS DISTINCT FROM 'Turn'
$$;

COMMENT ON FUNCTION dna.collapses_by_text(text) IS
'Whether dna.search''s duplicate collapse compares a hit of this kind by its passage text (dna.text_key: the same '
'key, or a key of at least 100 characters inside another''s). false for Turn only: a conversation''s turn is indexed '
'with the turns before it, so a later turn''s text holds an earlier one''s whole, and each turn is its own event '
'(speaker, time); turns are compared by vector alone, which the default duplicate_similarity (1) turns off. Since '
'0023_still_open (on LoCoMo dev the text rules took recall R@10 from 0.759 to 0.722). Pure.';

CREATE OR REPLACE FUNCTION dna.diversify(
    embeddings vector[], texts text[], scores double precision[],
    method text DEFAULT 'collapse', duplicate_similarity double precision DEFAULT 0.95,
    mmr_lambda double precision DEFAULT NULL, want integer DEFAULT 10)
RETURNS TABLE (pos integer, place integer, duplicate_of integer, reason text, similarity double precision,
               relevance double precision, redundancy double precision)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    n integer := coalesce(cardinality(scores), 0);
    kept integer[] := '{}';                 -- positions kept, in their place order
    fate integer[] := array_fill(0, ARRAY[greatest(n, 1)]);   -- 0 open, > 0 its place, < 0 duplicate of -fate
    why text[] := array_fill(NULL::text, ARRAY[greatest(n, 1)]);
    keys text[] := array_fill(NULL::text, ARRAY[greatest(n, 1)]);    -- dna.text_key, taken when first compared
    keyed boolean[] := array_fill(false, ARRAY[greatest(n, 1)]);
    sim double precision[] := array_fill(NULL::float8, ARRAY[greatest(n, 1)]);
    worst double precision[] := array_fill(-1::float8, ARRAY[greatest(n, 1)]);  -- MMR: max cosine to the kept
    rel double precision[] := array_fill(1::float8, ARRAY[greatest(n, 1)]);
    lo double precision;
    hi double precision;
    i integer;
    j integer;
    c double precision;
    best integer;
    best_value double precision;
    v double precision;
BEGIN
    IF cardinality(embeddings) IS DISTINCT FROM n OR cardinality(texts) IS DISTINCT FROM n THEN
        RAISE EXCEPTION 'dna.diversify: % scores, % embeddings and % texts: one each per candidate',
            n, coalesce(cardinality(embeddings), 0), coalesce(cardinality(texts), 0) USING ERRCODE = '22023';
    END IF;
    IF method IS NULL OR method NOT IN ('collapse', 'mmr') THEN
        RAISE EXCEPTION 'dna.diversify: method must be collapse or mmr, got %', coalesce(quote_literal(method), 'NULL')
            USING ERRCODE = '22023';
    END IF;
    IF method = 'mmr' AND NOT (mmr_lambda >= 0 AND mmr_lambda <= 1) THEN
        RAISE EXCEPTION 'dna.diversify: mmr_lambda must be between 0 and 1, got %', coalesce(mmr_lambda::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    want := least(greatest(coalesce(want, 0), 0), n);
    IF method = 'mmr' THEN                  -- relevance: the fused score min-max normalised over the pool
        SELECT min(x), max(x) INTO lo, hi FROM unnest(scores) AS x;
        FOR i IN 1 .. n LOOP
            rel[i] := dna.min_max(scores[i], lo, hi);
        END LOOP;
    END IF;
    WHILE cardinality(kept) < want LOOP
        -- the next hit: collapse takes the best-ranked open candidate; MMR the one maximising
        -- lambda x relevance - (1 - lambda) x its highest cosine to a kept hit (ties: the better rank)
        best := NULL;
        FOR i IN 1 .. n LOOP
            CONTINUE WHEN fate[i] <> 0;
            IF method = 'collapse' THEN
                best := i;
                EXIT;
            END IF;
            v := mmr_lambda * rel[i] - (1 - mmr_lambda) * greatest(worst[i], 0);
            IF best IS NULL OR v > best_value THEN
                best := i;
                best_value := v;
            END IF;
        END LOOP;
        EXIT WHEN best IS NULL;
        -- a near-duplicate of a kept hit is collapsed into the first such hit: the same text key, a text
        -- key of at least 100 characters inside the kept one's (it adds nothing), or a cosine >= duplicate_similarity
        IF NOT keyed[best] THEN                 -- a kept hit's key was taken when it was walked
            keys[best] := dna.text_key(texts[best]);
            keyed[best] := true;
        END IF;
        FOREACH j IN ARRAY kept LOOP
            c := 1 - (embeddings[best] <=> embeddings[j]);
            why[best] := CASE WHEN keys[best] = keys[j] THEN 'same text'
                              WHEN length(keys[best]) >= 100 AND strpos(keys[j], keys[best]) > 0 THEN 'contained'
                              WHEN duplicate_similarity < 1 AND c >= duplicate_similarity THEN 'cosine' END;
            IF why[best] IS NOT NULL THEN
                fate[best] := -j;
                sim[best] := dna.score_round(c);
                EXIT;
            END IF;
        END LOOP;
        CONTINUE WHEN fate[best] < 0;
        kept := kept || best;
        fate[best] := cardinality(kept);
        IF method = 'mmr' THEN
            FOR i IN 1 .. n LOOP
                CONTINUE WHEN fate[i] <> 0 OR embeddings[i] IS NULL OR embeddings[best] IS NULL;
                worst[i] := greatest(worst[i], 1 - (embeddings[i] <=> embeddings[best]));
            END LOOP;
        END IF;
    END LOOP;
    RETURN QUERY
        SELECT i2, CASE WHEN fate[i2] > 0 THEN fate[i2] END, CASE WHEN fate[i2] < 0 THEN -fate[i2] END,
               why[i2], CASE WHEN fate[i2] < 0 THEN sim[i2] END,
               CASE WHEN method = 'mmr' AND fate[i2] > 0 THEN dna.score_round(rel[i2]) END,
               CASE WHEN method = 'mmr' AND fate[i2] > 0 THEN dna.score_round(greatest(worst[i2], 0)) END
        FROM generate_series(1, n) AS i2
        WHERE fate[i2] <> 0
        ORDER BY i2;
END
$$;

COMMENT ON FUNCTION dna.diversify(vector[], text[], double precision[], text, double precision, double precision, integer) IS
'Diversity over one fused ranking (dna.search''s diversity): candidates 1..n in their fused order, each with its '
'passage vector (NULL: compared by text only), its passage text (NULL: compared by vector only; dna.text_key is '
'taken of the candidates walked only) and its fused score. Walks the '
'ranking and keeps up to want hits: method ''collapse'' takes the next candidate in rank order; ''mmr'' (Maximal '
'Marginal Relevance, Carbonell & Goldstein, SIGIR 1998) the candidate with the highest mmr_lambda x relevance - '
'(1 - mmr_lambda) x max cosine to a hit already kept (relevance = the fused score min-max normalised over the '
'candidates; ties: the better fused rank). Either way a candidate is collapsed into the first kept hit (in place '
'order) that it duplicates, and never kept: reason ''same text'' (equal text keys), ''contained'' (its text key, '
'at least 100 characters, is inside the kept one''s: it adds nothing) or ''cosine'' (cosine >= duplicate_similarity, '
'when it is below 1: at 1 the text rules alone decide, so two texts an embedder maps to one vector both stay). '
'Returns one row per candidate it decided, by pos (1-based input position): kept ones with place (1..want, the '
'order of the answer) and, for mmr, relevance and redundancy (max cosine to the hits placed before, >= 0); '
'collapsed ones with duplicate_of (the pos of the hit it duplicates), reason and similarity (their cosine; NULL '
'without vectors). Candidates after the want-th kept hit are not returned. Cost: collapse ~ want x candidates walked '
'comparisons and one dna.text_key per candidate walked, mmr ~ want x n cosines. Errors: 22023 for arrays of different lengths, another method, mmr_lambda '
'outside [0, 1] with mmr. Pure.';

CREATE OR REPLACE FUNCTION dna.default_duplicate_similarity()
RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT 1.0::float8 $$;

COMMENT ON FUNCTION dna.default_duplicate_similarity() IS
'1: the cosine between two passage vectors at or above which dna.search (diversity ''collapse'' or ''mmr'', '
'duplicate_similarity NULL) and dna.recall collapse the lower-ranked passage into the higher one: 1 turns the '
'cosine rule off, so by default the text rules alone decide (the same dna.text_key, or a text inside the other''s). The '
'cosine rule is asked for by a lower duplicate_similarity (0.9 caught every edited copy of the duplicate set): with '
'all-MiniLM-L6-v2 two facts that differ by one value are 0.95-0.97 apart (''prod is PostgreSQL 16'' / ''... 17'': '
'0.969), while a copy under another title is 0.92, so no threshold both catches copies and keeps a newer fact '
'(bench/diversity.py, docs/hybrid-search.md "Duplicates and diversity"). Pure.';

CREATE OR REPLACE FUNCTION dna.default_mmr_lambda()
RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT 0.7::float8 $$;

COMMENT ON FUNCTION dna.default_mmr_lambda() IS
'0.7: MMR''s relevance weight when dna.search runs diversity => ''mmr'' without mmr_lambda (the rest, 0.3, weighs '
'the cosine to the hits already placed). Not tuned: the train runs of bench/diversity.py for mmr did not complete; '
'measured on SciFact test, hybrid nDCG@10 0.7221 against 0.7301 without MMR, which is why mmr is not the default '
'(docs/hybrid-search.md). Pure.';

CREATE OR REPLACE FUNCTION dna.check_diversity(diversity text, duplicate_similarity double precision,
                                               mmr_lambda double precision, verb text DEFAULT 'dna.search')
RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    IF diversity IS NULL OR diversity NOT IN ('collapse', 'mmr', 'off') OR (verb = 'dna.recall' AND diversity = 'mmr') THEN
        RAISE EXCEPTION '%: diversity must be %, got %', verb,
            CASE WHEN verb = 'dna.recall' THEN '''collapse'' or ''off''' ELSE '''collapse'', ''mmr'' or ''off''' END,
            coalesce(quote_literal(diversity), 'NULL') USING ERRCODE = '22023',
            HINT = CASE WHEN verb = 'dna.recall'
                        THEN 'collapse (default): a memory whose text is a near-duplicate of a higher-ranked one leaves the answer; '
                             'off: every candidate. (MMR is dna.search''s: recall re-ranks by each memory''s standing.)'
                        ELSE 'collapse (default): a hit whose passage is a near-duplicate of a higher-ranked one leaves the answer; '
                             'mmr: collapse, then Maximal Marginal Relevance (mmr_lambda) orders the rest; off: the fused ranking as it is.' END;
    END IF;
    IF duplicate_similarity IS NOT NULL AND NOT (duplicate_similarity > 0 AND duplicate_similarity <= 1) THEN
        RAISE EXCEPTION '%: duplicate_similarity must be a cosine in (0, 1], got %', verb, duplicate_similarity
            USING ERRCODE = '22023',
                  HINT = format('duplicate_similarity is the cosine between two passage vectors at or above which the lower-ranked '
                                'one is a duplicate; NULL: %s (dna.default_duplicate_similarity()).', dna.default_duplicate_similarity());
    END IF;
    IF duplicate_similarity IS NOT NULL AND diversity = 'off' THEN
        RAISE EXCEPTION '%: duplicate_similarity is the collapse''s, but diversity => ''off'' was asked (got %)', verb,
            duplicate_similarity USING ERRCODE = '22023',
            HINT = 'Leave duplicate_similarity out, or ask diversity => ''collapse''.';
    END IF;
    IF mmr_lambda IS NOT NULL AND diversity <> 'mmr' THEN
        RAISE EXCEPTION '%: mmr_lambda is MMR''s, but diversity => % was asked (got mmr_lambda %)', verb,
            quote_literal(diversity), mmr_lambda USING ERRCODE = '22023',
            HINT = CASE WHEN verb = 'dna.recall' THEN 'dna.recall has no MMR: leave mmr_lambda out.'
                        ELSE 'Leave mmr_lambda out, or ask diversity => ''mmr'' (mmr_lambda alone selects it).' END;
    END IF;
    IF mmr_lambda IS NOT NULL AND NOT (mmr_lambda >= 0 AND mmr_lambda <= 1) THEN
        RAISE EXCEPTION '%: mmr_lambda must be between 0 and 1, got %', verb, mmr_lambda USING ERRCODE = '22023',
            HINT = format('mmr_lambda weighs relevance against novelty: 1 is the fused ranking (after collapse), 0 novelty alone; '
                          'NULL: %s (dna.default_mmr_lambda()).', dna.default_mmr_lambda());
    END IF;
END
$$;

COMMENT ON FUNCTION dna.check_diversity(text, double precision, double precision, text) IS
'Checks dna.search''s (verb ''dna.search'') or dna.recall''s (verb ''dna.recall'') diversity arguments, diversity '
'already lower-cased and defaulted: diversity one of collapse, mmr, off (recall: collapse, off); duplicate_similarity '
'NULL or in (0, 1], and not with off; mmr_lambda NULL or in [0, 1], and only with mmr. Errors: 22023 naming the '
'verb, the argument and the value, with a hint of the valid values. Pure.';
