-- pydna SQL package — memory plane: the write path.
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
