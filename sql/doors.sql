-- pydna SQL package — doors: the API keys of the REST door (`dna serve`).
--
-- A DBA maps an API key to an ordinary database role; the REST server, connected as its own login
-- role (the "door" role, PostgREST's authenticator), looks the key up and runs the request's SQL in
-- one transaction after `SET LOCAL ROLE <that role>` (set_config('role', …, true)), so row-level
-- security, workspace membership and personal memory are exactly those of the role, as from psql.
--
-- Keys are stored hashed: dna.api_key_hash(key) = sha256 of its UTF-8 bytes. A key is 244 random bits
-- (two gen_random_uuid(), whitened by sha256) in 64 hex digits, so a fast unsalted hash is enough: a
-- salt or a slow hash (bcrypt, argon2) protects guessable secrets such as passwords, and no guess
-- reaches 2^244; a plain hash also lets the door find the key by index (key_hash is UNIQUE) in one
-- lookup. The key is returned once, by dna.create_api_key, and never stored.
--
-- Privileges: dna.dna_api_keys (revision 0014_doors) is revoked from PUBLIC, is not a protected
-- table and dna.grant_app_role never grants it, so application roles cannot read the hashes (or
-- anything else of it). dna.grant_door_role gives the door's login role the four columns its
-- lookup reads. No function here is SECURITY DEFINER: the DBA (table owner or superuser) runs them.
--
-- Tables come from revision 0014_doors; this file only defines functions.
-- SQLSTATEs: 22023 no such role / bad argument, 22001 label too long, 42501 role outside the privacy
-- model (superuser or BYPASSRLS), P0002 no such key.

CREATE OR REPLACE FUNCTION dna.api_key_hash(key text)
RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT sha256(convert_to(key, 'UTF8'))
$$;

COMMENT ON FUNCTION dna.api_key_hash(text) IS
'The stored form of an API key: sha256 of its UTF-8 bytes (32 bytes). Any door computes the same '
'(Python: hashlib.sha256(key.encode()).digest()) and looks the hash up in dna.dna_api_keys. Pure.';

CREATE OR REPLACE FUNCTION dna.create_api_key(role_name text, label text DEFAULT '')
RETURNS text
LANGUAGE plpgsql
AS $$
#variable_conflict use_variable
DECLARE
    r record;
    key text;
BEGIN
    IF role_name IS NULL OR btrim(role_name) = '' THEN
        RAISE EXCEPTION 'role_name is required (got %)', coalesce(quote_literal(role_name), 'NULL')
            USING ERRCODE = '22023';
    END IF;
    SELECT x.rolname, x.rolsuper, x.rolbypassrls INTO r FROM pg_catalog.pg_roles AS x WHERE x.rolname = role_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no role %', quote_literal(role_name) USING ERRCODE = '22023',
              HINT = 'Create the application role first (CREATE ROLE … NOLOGIN) and grant it: SELECT dna.grant_app_role(…);';
    END IF;
    IF r.rolsuper OR r.rolbypassrls THEN
        RAISE EXCEPTION 'role % is a superuser or has BYPASSRLS: row-level security never applies to it, so an API key '
                        'mapped to it would be outside the privacy model', quote_ident(role_name)
            USING ERRCODE = '42501', HINT = 'Map API keys to ordinary application roles.';
    END IF;
    label := coalesce(label, '');
    IF length(label) > 200 THEN
        RAISE EXCEPTION 'label is % characters long; the limit is 200', length(label) USING ERRCODE = '22001';
    END IF;
    key := 'dna_' || encode(sha256(uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid())), 'hex');
    INSERT INTO dna.dna_api_keys (key_id, key_hash, role_name, label)
    SELECT left(key, 16), dna.api_key_hash(key), role_name, label;
    IF NOT has_schema_privilege(role_name, 'dna', 'USAGE') THEN
        RAISE NOTICE 'role % cannot use schema dna yet: every request with this key will be refused (403) until '
                     'SELECT dna.grant_app_role(%);', quote_ident(role_name), quote_literal(role_name);
    END IF;
    RETURN key;
END
$$;

COMMENT ON FUNCTION dna.create_api_key(text, text) IS
'DBA helper: a new API key for the REST door, mapped to role_name (an ordinary role: the door runs each '
'request as SET LOCAL ROLE role_name). Returns the key, ''dna_'' + 64 hex digits (244 random bits), shown '
'this once: only its sha256 (dna.api_key_hash) is stored in dna.dna_api_keys, with key_id = its first 16 '
'characters (for listings and dna.revoke_api_key), label (at most 200 characters) and created_by. '
'The door''s login role must be a member of role_name (GRANT role_name TO <door login>). A NOTICE says '
'when role_name has no access to schema dna yet. Errors: 22023 (no such role), 42501 (a superuser or '
'BYPASSRLS role: outside the privacy model), 22001 (label too long). Needs INSERT on dna.dna_api_keys '
'(its owner or a superuser).';

CREATE OR REPLACE FUNCTION dna.revoke_api_key(key text)
RETURNS integer
LANGUAGE plpgsql
AS $$
#variable_conflict use_variable
DECLARE
    n integer;
BEGIN
    IF key IS NULL OR btrim(key) = '' THEN
        RAISE EXCEPTION 'key is required: a key_id (dna_ and 12 hex digits) or the key itself' USING ERRCODE = '22023';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM dna.dna_api_keys AS k
                   WHERE k.key_id = key OR k.key_hash = dna.api_key_hash(key)) THEN
        RAISE EXCEPTION 'no API key %', quote_literal(left(key, 16)) USING ERRCODE = 'P0002',
              HINT = 'List them: SELECT key_id, role_name, label, created_at, revoked_at FROM dna.dna_api_keys;';
    END IF;
    UPDATE dna.dna_api_keys AS k SET revoked_at = now()
    WHERE (k.key_id = key OR k.key_hash = dna.api_key_hash(key)) AND k.revoked_at IS NULL;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

COMMENT ON FUNCTION dna.revoke_api_key(text) IS
'DBA helper: revokes an API key, named by its key_id (''dna_'' + 12 hex digits, see dna.dna_api_keys) or by '
'the key itself; the door refuses it (401) from the next request on. The row stays, with revoked_at set. '
'Returns 1, or 0 when it was already revoked. Errors: 22023 (blank), P0002 (no such key).';

CREATE OR REPLACE FUNCTION dna.grant_door_role(role_name text)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
#variable_conflict use_variable
DECLARE
    r text := quote_ident(role_name);
BEGIN
    IF role_name IS NULL OR NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles AS x WHERE x.rolname = role_name) THEN
        RAISE EXCEPTION 'no role %', coalesce(quote_literal(role_name), 'NULL') USING ERRCODE = '22023';
    END IF;
    EXECUTE format('GRANT USAGE ON SCHEMA dna TO %s', r);
    EXECUTE format('GRANT SELECT (key_id, key_hash, role_name, revoked_at) ON dna.dna_api_keys TO %s', r);
    IF to_regclass('public.dna_alembic_version') IS NOT NULL THEN
        EXECUTE format('GRANT SELECT ON public.dna_alembic_version TO %s', r);   -- the door checks the revision
    END IF;
    RETURN jsonb_build_object(
        'role', role_name,
        'not_a_member_of', to_jsonb(ARRAY(
            SELECT DISTINCT k.role_name FROM dna.dna_api_keys AS k
            JOIN pg_catalog.pg_roles AS x ON x.rolname = k.role_name
            WHERE k.revoked_at IS NULL AND NOT pg_has_role(role_name, x.oid, 'MEMBER')
            ORDER BY k.role_name)));
END
$$;

COMMENT ON FUNCTION dna.grant_door_role(text) IS
'DBA helper: grants the REST door''s login role (the role `dna serve` connects as; best NOINHERIT) what its '
'key lookup needs: USAGE on schema dna, SELECT on the columns key_id, key_hash, role_name, revoked_at of '
'dna.dna_api_keys, SELECT on the version table. Nothing else: each request''s SQL runs as the key''s role '
'after SET LOCAL ROLE, which needs GRANT <that role> TO <door login>. Returns {role, not_a_member_of: the '
'roles of active keys this login cannot SET ROLE to yet}. Errors: 22023 (no such role).';
