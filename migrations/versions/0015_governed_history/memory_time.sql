-- pydna SQL package — memory plane: time helpers.
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
