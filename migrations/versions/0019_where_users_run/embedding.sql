-- pydna SQL package — embedding plane.
-- dna.fake_embed: the `dna-fake-hash-v1` feature-hashing embedder, bit-identical (as float32) to the
-- Python FakeEmbeddingProvider and to shared/conformance/dna/fake-embedding-golden.json.
-- dna.fake_embed_float8: the same hashing in full float8 precision (the one implementation of the
-- hashing; dna.fake_embed checks dims and rounds it to float32).

CREATE OR REPLACE FUNCTION dna.fake_embed(input text, dims integer DEFAULT 384)
RETURNS vector
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
BEGIN
    IF dims < 1 OR dims > 16000 THEN
        RAISE EXCEPTION 'dna.fake_embed: dims must be between 1 and 16000, got %', dims
            USING ERRCODE = '22023';
    END IF;
    -- The float8 values of dna.fake_embed_float8, rounded once to float4 by the cast, exactly as
    -- the Python provider does.
    RETURN dna.fake_embed_float8(input, dims)::vector;
END
$$;

COMMENT ON FUNCTION dna.fake_embed(text, integer) IS
'dna-fake-hash-v1 feature-hashing embedder → vector(dims), dims 1..16000 (default 384). Tokens [a-z0-9]+ '
'of the input lowered as Python''s str.lower() does (A-Z, İ → i + U+0307, KELVIN SIGN → k; independent of the '
'database collation); per token SHA-256; bucket = first 4 bytes big-endian mod dims; sign +1 if byte 4 is '
'odd else -1; integer counts; L2-normalised; no tokens → the zero vector. Bit-identical (float32) to '
'pydna.embeddings.FakeEmbeddingProvider for any Unicode text and to the DNA SDK goldens (ruinosus/dna). No semantics: a '
'deterministic floor for tests. Errors: 22023 when dims is out of range.';

CREATE OR REPLACE FUNCTION dna.fake_embed_float8(input text, dims integer DEFAULT 384)
RETURNS double precision[]
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
BEGIN
    IF dims < 1 OR dims > 16000 THEN
        RAISE EXCEPTION 'dna.fake_embed_float8: dims must be between 1 and 16000, got %', dims
            USING ERRCODE = '22023';
    END IF;
    RETURN (
        WITH tok AS (
            SELECT sha256(convert_to(m[1], 'UTF8')) AS h
            -- Python's str.lower(), the reference, whatever the database's collation: only two
            -- characters other than A-Z lower to something holding [a-z0-9] (Unicode 15): U+0130 'İ'
            -- → 'i' + U+0307 (a separator here) and U+212A KELVIN SIGN → 'k'. lower() is not used:
            -- under a libc collation it maps 'İ' to 'i' alone.
            FROM regexp_matches(translate(replace(input, U&'\0130', U&'i\0307'),
                                          U&'ABCDEFGHIJKLMNOPQRSTUVWXYZ\212A', 'abcdefghijklmnopqrstuvwxyzk'),
                                '[a-z0-9]+', 'g') AS m
        ), bucket AS (
            SELECT ((get_byte(h, 0)::bigint << 24) | (get_byte(h, 1)::bigint << 16)
                    | (get_byte(h, 2)::bigint << 8) | get_byte(h, 3)::bigint) % dims AS i,
                   CASE WHEN get_byte(h, 4) % 2 = 1 THEN 1 ELSE -1 END AS sign
            FROM tok
        ), counts AS (
            SELECT i, sum(sign)::float8 AS c FROM bucket GROUP BY i
        ), norm AS (
            SELECT sqrt(coalesce(sum(c * c), 0)) AS n FROM counts
        )
        SELECT array_agg(CASE WHEN norm.n > 0 THEN coalesce(counts.c, 0) / norm.n ELSE 0 END ORDER BY g)
        FROM generate_series(0, dims - 1) AS g
        CROSS JOIN norm
        LEFT JOIN counts ON counts.i = g
    );
END
$$;

COMMENT ON FUNCTION dna.fake_embed_float8(text, integer) IS
'dna-fake-hash-v1 (as dna.fake_embed, which rounds these values) in full float8 precision, before the float32 rounding of the '
'vector type: the values Python''s fake_embed_one returns. For exact conformance of '
'cosine_similarity_fake and semantic_recall_fusion. Pure. Errors: 22023 when dims is outside 1..16000 (as dna.fake_embed).';
