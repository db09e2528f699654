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
-- Triggers (created by migration 0002_memory; dna_versions_append_only by 0015_governed_history):
-- dna.instances_before_write (the history guard + valid_at mirror), dna.instances_after_write
-- (append the envelope to dna_versions, prune past the Kind's retention), dna.versions_append_only
-- (dna_versions takes only the next version copying the record now, never an UPDATE, and a DELETE
-- only past the retention), dna.instances_refuse_delete and dna.search_docs_refuse_delete
-- (DELETE of a memory Kind is refused; the error names dna.forget).
--
-- SQLSTATEs of the history: 42501 a write to dna_versions outside the write path, or a change of a
-- memory's key; 55000 a write that would move a stored valid_to (only dna.revive lifts it); 23001 a
-- DELETE of a memory (restrict_violation, naming dna.forget).
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

CREATE OR REPLACE FUNCTION dna.guard_memory_history(kind text, name text, old_spec jsonb, new_spec jsonb)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    stored_to jsonb := old_spec -> 'valid_to';
    old_rev jsonb := CASE WHEN jsonb_typeof(old_spec -> 'revivals') = 'array' THEN old_spec -> 'revivals' ELSE '[]' END;
    new_rev jsonb := CASE WHEN jsonb_typeof(new_spec -> 'revivals') = 'array' THEN new_spec -> 'revivals' ELSE '[]' END;
    old_cues jsonb := CASE WHEN jsonb_typeof(old_spec -> 'cues_history') = 'array' THEN old_spec -> 'cues_history' ELSE '[]' END;
    new_cues jsonb := CASE WHEN jsonb_typeof(new_spec -> 'cues_history') = 'array' THEN new_spec -> 'cues_history' ELSE '[]' END;
    n_old integer;
    n_new integer;
    revived boolean;
    kept boolean := false;
    dropped integer;
BEGIN
    n_old := jsonb_array_length(old_rev);
    n_new := jsonb_array_length(new_rev);
    -- A revival: the stored revivals plus exactly one entry quoting the stored valid_to, which the
    -- write drops (what dna.revive writes). Nothing else lifts or moves a stored valid_to.
    revived := dna.json_truthy(stored_to) AND NOT dna.json_truthy(new_spec -> 'valid_to')
               AND n_new = n_old + 1
               AND (SELECT coalesce(jsonb_agg(e.value ORDER BY e.ord), '[]'::jsonb)
                    FROM jsonb_array_elements(new_rev) WITH ORDINALITY AS e(value, ord) WHERE e.ord <= n_old) = old_rev
               AND jsonb_typeof(new_rev -> n_old) = 'object' AND new_rev -> n_old -> 'valid_to' = stored_to;
    IF dna.json_truthy(stored_to) AND NOT revived THEN
        IF dna.json_truthy(new_spec -> 'valid_to') AND new_spec -> 'valid_to' <> stored_to THEN
            RAISE EXCEPTION '%/% was forgotten at %: only dna.revive lifts or moves a stored valid_to', kind, name,
                stored_to #>> '{}'
                USING ERRCODE = '55000',
                      HINT = 'SELECT dna.revive(scope, name) brings it back in force; dna.forget(scope, name, now => ...) then retires it again.';
        END IF;
        IF NOT dna.json_truthy(new_spec -> 'valid_to') THEN
            new_spec := jsonb_set(new_spec, '{valid_to}', stored_to);
            IF old_spec ? 'superseded_by_memory' AND NOT new_spec ? 'superseded_by_memory' THEN
                new_spec := jsonb_set(new_spec, '{superseded_by_memory}', old_spec -> 'superseded_by_memory');
            END IF;
            RAISE NOTICE 'dna: the bitemporal guard restored valid_to % of %/% (retire and revive with dna.forget and dna.revive)',
                stored_to #>> '{}', kind, name;
        END IF;
    END IF;
    -- revivals only grow, and only by a revival.
    IF n_old > 0 OR old_spec ? 'revivals' THEN
        IF NOT revived AND new_rev IS DISTINCT FROM old_rev THEN
            new_spec := jsonb_set(new_spec, '{revivals}', old_rev);
            kept := true;
        END IF;
    ELSIF n_new > 0 AND NOT revived THEN
        new_spec := new_spec - 'revivals';                 -- no revival without a forget to lift
        kept := true;
    END IF;
    -- cues_history only grows: the new list is the stored one (less at most its oldest entries,
    -- when the window of 50 is full) followed by new cues.
    IF jsonb_array_length(old_cues) > 0 THEN
        SELECT min(d.drop) INTO dropped
        FROM generate_series(0, jsonb_array_length(old_cues)) AS d(drop)
        WHERE (d.drop = 0 OR jsonb_array_length(new_cues) >= 50)
          AND jsonb_array_length(new_cues) >= jsonb_array_length(old_cues) - d.drop
          AND (SELECT coalesce(jsonb_agg(e.value ORDER BY e.ord), '[]'::jsonb)
               FROM jsonb_array_elements(new_cues) WITH ORDINALITY AS e(value, ord)
               WHERE e.ord <= jsonb_array_length(old_cues) - d.drop)
              = (SELECT coalesce(jsonb_agg(e.value ORDER BY e.ord), '[]'::jsonb)
                 FROM jsonb_array_elements(old_cues) WITH ORDINALITY AS e(value, ord) WHERE e.ord > d.drop);
        IF dropped IS NULL THEN
            new_spec := jsonb_set(new_spec, '{cues_history}', old_cues);
            kept := true;
        END IF;
    END IF;
    -- surface_count never goes back.
    IF jsonb_typeof(old_spec -> 'surface_count') = 'number'
       AND (jsonb_typeof(new_spec -> 'surface_count') IS DISTINCT FROM 'number'
            OR (new_spec ->> 'surface_count')::numeric < (old_spec ->> 'surface_count')::numeric) THEN
        new_spec := jsonb_set(new_spec, '{surface_count}', old_spec -> 'surface_count');
        kept := true;
    END IF;
    IF kept THEN
        RAISE NOTICE 'dna: the history guard kept the stored revivals, cues_history and surface_count of %/% (they only grow)',
            kind, name;
    END IF;
    RETURN new_spec;
END
$$;

COMMENT ON FUNCTION dna.guard_memory_history(text, text, jsonb, jsonb) IS
'The history guard of a memory''s spec (old_spec stored, new_spec written), applied by '
'dna.instances_before_write to every UPDATE of a memory Kind; returns the spec to store. (1) A stored '
'valid_to is lifted only by a revival: the write drops valid_to and appends to the stored revivals exactly '
'one entry whose valid_to quotes it (what dna.revive writes). A write that moves it raises 55000 naming '
'dna.revive; one that drops it otherwise gets it (and superseded_by_memory) back, with a NOTICE. (2) '
'revivals only grow, by a revival; any other list is replaced by the stored one. (3) cues_history only '
'grows: the stored list (less its oldest entries when the window of 50 is full) followed by new cues, '
'else the stored list is kept. (4) surface_count never decreases (a missing or lower value keeps the '
'stored one). NOTICE when (2)-(4) keep stored values.';

CREATE OR REPLACE FUNCTION dna.instances_before_write()
RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    traits text[];
BEGIN
    SELECT k.traits INTO traits FROM dna.dna_kinds AS k WHERE k.kind = NEW.kind;
    IF TG_OP = 'UPDATE' THEN
        -- op: the verb of this write (recorded in dna_versions.op by dna.instances_after_write). Kept
        -- only when this statement named it (marked by dna.instances_op_named); the label the row kept
        -- from its previous write is not this write's (a raw UPDATE is recorded as update).
        NEW.op := CASE WHEN starts_with(NEW.op, chr(1)) THEN nullif(substr(NEW.op, 2), '') END;
        NEW.updated_at := now();
        NEW.created_at := OLD.created_at;
        NEW.id := OLD.id;
        IF 'memory.recallable' = ANY (traits) OR dna.kind_has_trait(OLD.kind, 'memory.recallable') THEN
            -- A memory's identity is its key: its history (dna_versions) is filed under it.
            IF (NEW.scope, NEW.kind, NEW.api_version, NEW.name, NEW.tenant)
               IS DISTINCT FROM (OLD.scope, OLD.kind, OLD.api_version, OLD.name, OLD.tenant) THEN
                RAISE EXCEPTION 'UPDATE of the key of %/% refused: a memory keeps its scope, kind, name and tenant', OLD.kind, OLD.name
                    USING ERRCODE = '42501',
                          HINT = 'Remember it under the new key (dna.remember) and forget the old one with superseded_by => the new name.';
            END IF;
            IF dna.is_redacted(OLD.spec) THEN
                RAISE EXCEPTION '%/% was redacted: a tombstone is never written again', OLD.kind, OLD.name
                    USING ERRCODE = '55000', HINT = 'Remember the memory under another name.';
            END IF;
            IF dna.is_redacted(NEW.spec) THEN
                -- Erasure (dna.redact): only a redactor turns a record into a tombstone; the history
                -- guard does not apply (cues and revivals may hold the text being erased).
                IF NOT dna.may_redact(OLD.tenant) THEN
                    RAISE EXCEPTION 'redaction of %/% refused: role % may not redact it', OLD.kind, OLD.name,
                        quote_ident(current_user::text)
                        USING ERRCODE = '42501', HINT = 'A DBA grants it: GRANT dna_redactor TO <role>.';
                END IF;
            ELSE
                NEW.spec := dna.guard_memory_history(NEW.kind, NEW.name, OLD.spec, NEW.spec);
            END IF;
        END IF;
        IF NEW.spec = OLD.spec AND NEW.valid_at = OLD.valid_at THEN
            IF 'memory.recallable' = ANY (traits) THEN
                NEW.metadata := dna.memory_metadata(NEW.spec, NEW.valid_at);   -- never written by hand
            END IF;
            RETURN NEW;                                    -- nothing else to re-derive
        END IF;
    END IF;
    -- World time mirrors the spec for memory Kinds: valid_at = [valid_from, valid_to); the metadata
    -- filters read is derived from both (sql/metadata.sql).
    IF 'memory.recallable' = ANY (traits) THEN
        NEW.valid_at := dna.spec_valid_at(NEW.spec, coalesce(lower(NEW.valid_at), NEW.created_at, now()));
        NEW.metadata := dna.memory_metadata(NEW.spec, NEW.valid_at);
    END IF;
    RETURN NEW;
END
$$;

COMMENT ON FUNCTION dna.instances_before_write() IS
'BEFORE INSERT OR UPDATE trigger of dna.dna_instances. (1) For an UPDATE of a memory Kind (trait '
'memory.recallable): the key (scope, kind, api_version, name, tenant) cannot change (42501); a redacted '
'memory (dna.is_redacted) is never written again (55000); only a role dna.may_redact allows turns a record '
'into a tombstone (42501); any other spec passes the history guard dna.guard_memory_history (a stored valid_to is lifted only by dna.revive, '
'55000 when a write moves it; revivals and cues_history only grow; surface_count never decreases). '
'(2) For memory Kinds, valid_at := dna.spec_valid_at(spec) and metadata := dna.memory_metadata(spec, valid_at) '
'(whatever the statement wrote). (3) id and created_at are immutable, '
'updated_at = now(). (4) op (the verb label dna.instances_after_write records) is this write''s: on UPDATE '
'kept only when the statement named it (dna.instances_op_named), else NULL.';

CREATE OR REPLACE FUNCTION dna.versions_append_only()
RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    latest integer;
    keep integer;
    cur record;
    body text;
BEGIN
    -- The rules hold for every caller and read only the rows themselves: no setting or role opens
    -- a way round them (every function of schema dna runs with the caller's rights).
    IF TG_OP = 'UPDATE' THEN
        RAISE EXCEPTION 'UPDATE of version % of %/% refused: dna.dna_versions is append-only', OLD.version, OLD.kind, OLD.name
            USING ERRCODE = '42501',
                  HINT = 'Write the memory again (dna.remember, dna.forget, dna.revive): a new version is appended.';
    END IF;
    IF TG_OP = 'INSERT' THEN
        -- Only the record's next version, a copy of the record as it is now, stamped now: what
        -- dna.instances_after_write appends. A forged past cannot be written.
        SELECT max(v.version) INTO latest FROM dna.dna_versions AS v
        WHERE v.scope = NEW.scope AND v.kind = NEW.kind AND v.api_version = NEW.api_version
          AND v.name = NEW.name AND v.tenant = NEW.tenant;
        SELECT i.id, i.spec, i.valid_at INTO cur FROM dna.dna_instances AS i
        WHERE i.scope = NEW.scope AND i.kind = NEW.kind AND i.api_version = NEW.api_version
          AND i.name = NEW.name AND i.tenant = NEW.tenant;
        IF NEW.version IS DISTINCT FROM coalesce(latest, 0) + 1 OR cur.id IS NULL OR NEW.id IS DISTINCT FROM cur.id
           OR NEW.spec IS DISTINCT FROM cur.spec OR NEW.valid_at IS DISTINCT FROM cur.valid_at
           OR NEW.created_at IS NULL OR NEW.created_at < now() OR NEW.created_at > clock_timestamp() THEN
            RAISE EXCEPTION 'INSERT of version % of %/% refused: dna.dna_versions holds only what the write path appends',
                NEW.version, NEW.kind, NEW.name
                USING ERRCODE = '42501',
                      HINT = 'Write the memory with dna.remember (or any write to dna.dna_instances): its version is appended for you.';
        END IF;
        -- What the history keeps of the version's text, derived from the row itself (0016): an as_of
        -- recall compares digests and ranks text_tsv instead of recomputing either per read.
        body := dna.memory_text(NEW.kind, NEW.spec);
        NEW.ts_config := (SELECT c.ts_config FROM dna.search_config(NEW.scope) AS c);
        NEW.text_digest := md5(body);
        NEW.text_tsv := dna.text_tsvector(NEW.ts_config, body);
        -- Who wrote the version (0021): the role the write ran as (SET ROLE included: a door's key), set
        -- here whatever the INSERT said, so that the history names who retired a shared memory.
        NEW.recorded_by := current_user::text;
        RETURN NEW;
    END IF;
    -- DELETE: the one narrow path is the Kind's retention (what dna.instances_after_write prunes):
    -- a version at least version_retention behind the record's latest.
    SELECT k.version_retention INTO keep FROM dna.dna_kinds AS k WHERE k.kind = OLD.kind;
    SELECT max(v.version) INTO latest FROM dna.dna_versions AS v
    WHERE v.scope = OLD.scope AND v.kind = OLD.kind AND v.api_version = OLD.api_version
      AND v.name = OLD.name AND v.tenant = OLD.tenant;
    IF keep IS NOT NULL AND OLD.version <= latest - keep THEN
        RETURN OLD;
    END IF;
    IF NOT dna.is_redacted(OLD.spec) AND EXISTS (
           SELECT 1 FROM dna.dna_instances AS i
           WHERE i.scope = OLD.scope AND i.kind = OLD.kind AND i.api_version = OLD.api_version
             AND i.name = OLD.name AND i.tenant = OLD.tenant AND dna.is_redacted(i.spec)) THEN
        RETURN OLD;                                        -- dna.redact erases the versions of its tombstone's record
    END IF;
    RAISE EXCEPTION 'DELETE of version % of %/% refused: dna.dna_versions is append-only (the Kind keeps %)',
        OLD.version, OLD.kind, OLD.name, coalesce(keep::text || ' versions', 'every version')
        USING ERRCODE = '42501',
              HINT = 'Old versions are pruned by the Kind''s version_retention at the next write.';
END
$$;

COMMENT ON FUNCTION dna.versions_append_only() IS
'BEFORE INSERT OR UPDATE OR DELETE trigger of dna.dna_versions, for every caller: UPDATE is refused; '
'INSERT only of the record''s next version that copies its current row (id, spec, valid_at) stamped '
'within this transaction (what dna.instances_after_write appends: no forged or backdated past); DELETE '
'only of a version at least the Kind''s version_retention behind the record''s latest (retention '
'pruning, the one path) or, once a redactor made the record a tombstone (dna.redact), of its versions '
'before the tombstone. An accepted INSERT gets its derived text columns from its own row, whatever it '
'carried: text_digest = md5(dna.memory_text(kind, spec)), ts_config = the scope''s configuration '
'(dna.search_config), text_tsv = dna.text_tsvector(ts_config, that text), and recorded_by = current_user (the role '
'the write ran as; revision 0021). Errors: 42501 naming the verb to use.';

CREATE OR REPLACE FUNCTION dna.instances_after_write()
RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    next_version integer;
    keep integer;
    label text := NEW.op;                                -- the verb, carried by the row (dna.instances_before_write)
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
        -- The one path that removes versions: the Kind's retention, for this record only.
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
'time (clock_timestamp() under the row lock) and op = the verb that wrote the row (its op column: remember, '
'reconsolidate, forget, revive, redact; carried with the data, so any node running the trigger records it) '
'or insert/update; an UPDATE that changes nothing appends nothing. Then '
'prunes versions of that record beyond the Kind''s version_retention (Engram keeps 3; NULL keeps all): '
'the only path that removes versions (dna.versions_append_only enforces it).';

CREATE OR REPLACE FUNCTION dna.instances_refuse_delete()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF dna.kind_has_trait(OLD.kind, 'memory.recallable') THEN
        RAISE EXCEPTION 'DELETE of %/% refused: % is a memory Kind; retire it with dna.forget(scope, name) '
                        '(bring it back with dna.revive, erase its text with dna.redact)', OLD.kind, OLD.name, OLD.kind
            USING ERRCODE = '23001',
                  HINT = format('SELECT dna.forget(%L, %L, kind => %L, tenant => %L);', OLD.scope, OLD.name, OLD.kind, OLD.tenant);
    END IF;
    RETURN OLD;
END
$$;

COMMENT ON FUNCTION dna.instances_refuse_delete() IS
'BEFORE DELETE trigger of dna.dna_instances: a row of a memory Kind (trait memory.recallable: Engram, '
'Research, Evidence) is never deleted. Errors: 23001 (restrict_violation) naming dna.forget; the hint is '
'the call to run.';

CREATE OR REPLACE FUNCTION dna.search_docs_refuse_delete()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    -- A memory's own search row is its passage 0; passages 1, 2, … are further texts it is found by
    -- (dna.remember_many's passages, a conversation turn's views), which a new write replaces.
    IF OLD.passage = 0 AND dna.kind_has_trait(OLD.kind, 'memory.recallable') AND EXISTS (
           SELECT 1 FROM dna.dna_instances AS i
           WHERE i.scope = OLD.scope AND i.kind = OLD.kind AND i.name = OLD.name AND i.tenant = OLD.tenant
             AND NOT dna.is_redacted(i.spec)) THEN
        RAISE EXCEPTION 'DELETE of the search document of %/% refused: % is a memory Kind; retire it with '
                        'dna.forget(scope, name)', OLD.kind, OLD.name, OLD.kind
            USING ERRCODE = '23001',
                  HINT = format('SELECT dna.forget(%L, %L, kind => %L, tenant => %L);', OLD.scope, OLD.name, OLD.kind, OLD.tenant);
    END IF;
    RETURN OLD;
END
$$;

COMMENT ON FUNCTION dna.search_docs_refuse_delete() IS
'BEFORE DELETE trigger of the width search tables: the search document (passage 0) of a stored record of a '
'memory Kind (Engram, Research, Evidence, Turn, Episode) cannot be deleted (dna.delete_document, the client''s '
'delete, raw DELETE), since that would retire the memory outside dna.forget; those of a redacted memory (dna.redact) '
'go, and so do a memory''s further passages (1, 2, …: texts it is also found by, which each write replaces). '
'Errors: 23001 naming dna.forget.';

CREATE OR REPLACE FUNCTION dna.record_valid_at(scope text, kind text, name text, tenant text)
RETURNS tstzrange
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    RETURN (SELECT i.valid_at FROM dna.dna_instances AS i
            JOIN dna.dna_kinds AS k ON k.kind = i.kind AND k.api_version = i.api_version
            WHERE i.scope = record_valid_at.scope AND i.kind = record_valid_at.kind
              AND i.name = record_valid_at.name AND i.tenant = record_valid_at.tenant);
END
$$;

COMMENT ON FUNCTION dna.record_valid_at(text, text, text, text) IS
'The world-time validity (valid_at) of the record (scope, kind, name, tenant) in dna.dna_instances, or NULL '
'when there is none: the valid_at a memory''s search rows carry.';

CREATE OR REPLACE FUNCTION dna.record_metadata(scope text, kind text, name text, tenant text)
RETURNS jsonb
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    RETURN (SELECT i.metadata FROM dna.dna_instances AS i
            JOIN dna.dna_kinds AS k ON k.kind = i.kind AND k.api_version = i.api_version
            WHERE i.scope = record_metadata.scope AND i.kind = record_metadata.kind
              AND i.name = record_metadata.name AND i.tenant = record_metadata.tenant);
END
$$;

COMMENT ON FUNCTION dna.record_metadata(text, text, text, text) IS
'The metadata of the record (scope, kind, name, tenant) in dna.dna_instances (a memory''s: dna.memory_metadata), or '
'NULL when there is none: the metadata a memory''s search rows carry.';

CREATE OR REPLACE FUNCTION dna.mirror_valid_at(mirrored boolean)
RETURNS text
LANGUAGE sql VOLATILE
AS $$
    -- Transaction-local: a statement that fails takes it back with it. Correctness never needs it
    -- on (the trigger then sets the same value), so a writer sets it off after its statement
    -- whatever it was before.
    SELECT set_config('dna.valid_at_mirrored', CASE WHEN mirrored THEN 'on' ELSE 'off' END, true)
$$;

COMMENT ON FUNCTION dna.mirror_valid_at(boolean) IS
'Internal: sets dna.valid_at_mirrored for the transaction (on: the statements that follow give memory search '
'rows their record''s valid_at themselves, so the row trigger dna_search_docs_valid_at stands aside; off: it '
'runs) and returns the new value. The verbs set it on for their statement and off after it. Setting it by '
'hand only skips the mirror for one''s own writes; dna.verify_integrity reports a search row whose valid_at '
'is not its record''s (check validity) and dna.reconcile repairs it.';

CREATE OR REPLACE FUNCTION dna.search_docs_valid_at()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    -- A memory's search documents carry its world time and metadata, so dna.search can filter validity
    -- and metadata inside each lane (an index condition, not a probe per candidate). Other Kinds keep
    -- what they are given.
    IF dna.kind_has_trait(NEW.kind, 'memory.recallable') THEN
        NEW.valid_at := dna.record_valid_at(NEW.scope, NEW.kind, NEW.name, NEW.tenant);
        NEW.metadata := coalesce(dna.record_metadata(NEW.scope, NEW.kind, NEW.name, NEW.tenant), '{}'::jsonb);
    END IF;
    RETURN NEW;
END
$$;

COMMENT ON FUNCTION dna.search_docs_valid_at() IS
'BEFORE INSERT OR UPDATE trigger of the width search tables (dna_search_docs_valid_at, WHEN dna.valid_at_mirrored '
'is not on): the search document of a memory Kind (trait memory.recallable) gets valid_at = the world-time '
'validity of its record in dna.dna_instances (dna.record_valid_at; NULL when there is none: always in '
'force) and metadata = the record''s metadata (dna.record_metadata, dna.memory_metadata; ''{}'' when there is '
'none). dna.search filters on both. Other Kinds keep the valid_at and metadata written. The verbs that write '
'search rows (dna.index_document, dna.index_documents, the valid_at mirror of dna.dna_instances, dna.reconcile, '
'dna.set_search_config) give memory rows those values themselves, by statements of their own (on Citus no '
'table is read inside a shard''s INSERT, citus-probe-3 D5), and set dna.valid_at_mirrored = on for their '
'statement (dna.mirror_valid_at), so the trigger runs only for plain INSERTs and UPDATEs.';

CREATE OR REPLACE FUNCTION dna.instances_sync_search_valid_at()
RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    w integer;
    stale boolean;
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.valid_at = OLD.valid_at AND NEW.metadata = OLD.metadata THEN
        RETURN NULL;                                       -- reconsolidation and restatements: nothing to copy
    END IF;
    IF NOT dna.kind_has_trait(NEW.kind, 'memory.recallable') THEN
        RETURN NULL;
    END IF;
    -- Each width table probed first and updated only where a row differs: an UPDATE that changes nothing
    -- still fires the width table's statement triggers (the BM25 sync reads its transition tables: ~2 ms
    -- each, five per new memory before this probe, most of a remember's cost).
    PERFORM dna.mirror_valid_at(true);                 -- these statements write the record's valid_at and metadata
    FOR w IN SELECT dna.search_widths() LOOP
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM dna.%I AS t WHERE t.scope = $2 AND t.kind = $3 AND t.name = $4
                          AND t.tenant = $5 AND (t.valid_at IS DISTINCT FROM $1 OR t.metadata IS DISTINCT FROM $6))',
                       'dna_search_docs_' || w)
            INTO stale USING NEW.valid_at, NEW.scope, NEW.kind, NEW.name, NEW.tenant, NEW.metadata;
        CONTINUE WHEN NOT stale;
        EXECUTE format('UPDATE dna.%I AS t SET valid_at = $1, metadata = $6
                        WHERE t.scope = $2 AND t.kind = $3 AND t.name = $4 AND t.tenant = $5
                          AND (t.valid_at IS DISTINCT FROM $1 OR t.metadata IS DISTINCT FROM $6)', 'dna_search_docs_' || w)
            USING NEW.valid_at, NEW.scope, NEW.kind, NEW.name, NEW.tenant, NEW.metadata;
    END LOOP;
    PERFORM dna.mirror_valid_at(false);
    RETURN NULL;
END
$$;

COMMENT ON FUNCTION dna.instances_sync_search_valid_at() IS
'AFTER INSERT OR UPDATE trigger of dna.dna_instances: when the valid_at or the metadata of a memory (forget, '
'revive, remember with valid_from/valid_to, new tags or spec.metadata) changes, copies both to the search '
'documents of that record in every width table (every model_id), so dna.search leaves retired memories out '
'and filters on the new metadata at once. Each width table is probed first and updated only where a row differs '
'(an UPDATE changing nothing still fires the BM25 statement triggers).';

CREATE OR REPLACE FUNCTION dna.instances_op_named()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    -- BEFORE UPDATE OF op (named dna_instances_before_op, so it fires before dna_instances_before_write):
    -- marks the label as written by this statement (chr(1) in front), which dna.instances_before_write
    -- keeps (and unmarks); an UPDATE that does not name op gets no label.
    NEW.op := chr(1) || coalesce(NEW.op, '');
    RETURN NEW;
END
$$;

COMMENT ON FUNCTION dna.instances_op_named() IS
'BEFORE UPDATE OF op trigger of dna.dna_instances (dna_instances_before_op, revision 0018_citus_ready): '
'marks the op the statement wrote, so that dna.instances_before_write tells a label this write named from '
'the label the row kept from its previous write (an UPDATE not naming op is recorded as update).';
