-- pydna SQL package — conversations: an agent hands over turns, not hand-made memories.
--
-- dna.remember_conversation(scope, conversation, turns) takes a conversation's turns ({text, speaker,
-- role, time, session, id, metadata}) in one call and one transaction. Each turn becomes a memory of
-- Kind Turn that knows its conversation, session, place in the session (turn, 1-based), speaker, role
-- and time (spec.conversation; its metadata, so filters narrow by them); it is indexed with its
-- speaker and the turns before it (spec.context), so that "Yes, I did!" is found by what it answers.
-- Each session touched is remembered as a memory of Kind Episode: its turns, speakers and time span
-- (started_at, ended_at). The write is dna.remember_many's: re-sending the same turns changes nothing.
--
-- Identity: a turn with an id is <conversation>/<id>; one without is <conversation>/<session>/t- and
-- 16 hex of SHA-256 over its session, speaker, role, time, text and how many identical turns precede
-- it in the call (so re-sending it names the same memory). A turn's place is its stored one, or, for
-- a new turn, the next after the session's stored turns, in the order given: sending a session's new
-- turns appends them. Its context is the turns before it only, so appending never re-indexes the
-- turns already stored. Episodes are <conversation>/<session>.
--
-- A client embeds the texts dna.conversation_plan returns (the same plan the verb writes), then calls
-- the verb with their vectors and the plan's digest; a plan changed in between (another writer of the
-- conversation) is refused with 40001 (read it again). Kinds Turn and Episode come from revision
-- 0019_where_users_run (topic conversations).

CREATE OR REPLACE FUNCTION dna.conversation_context_turns()
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT 2
$$;

COMMENT ON FUNCTION dna.conversation_context_turns() IS
'2: how many turns before a turn its indexed texts reach by default (dna.conversation_plan context_turns: the turn '
'with the 2 before it, with the 1 before it, and alone); chosen on the LoCoMo dev split by the rule of '
'bench/RESULTS.md ("Conversations"). Pure.';

CREATE OR REPLACE FUNCTION dna.turn_line(speaker text, text text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN coalesce(speaker, '') = '' THEN text ELSE speaker || ': ' || text END
$$;

COMMENT ON FUNCTION dna.turn_line(text, text) IS
'One turn as a line of context: "speaker: text" (the text alone without a speaker). Pure.';

CREATE OR REPLACE FUNCTION dna.conversation_plan(
    scope text, conversation text, turns jsonb, session text DEFAULT NULL, sessions jsonb DEFAULT NULL,
    tenant text DEFAULT '', personal boolean DEFAULT false, now timestamptz DEFAULT NULL,
    context_turns integer DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql STABLE
SET jit = off                -- many short statements: compiling them would cost more than running them
AS $$
#variable_conflict use_variable
DECLARE
    at timestamptz;
    n integer;
    t record;
    unknown text;
    near text;
    s_id text;
    s_time timestamptz;
    t_time timestamptz;
    t_text text;
    t_speaker text;
    t_role text;
    t_id text;
    rows jsonb := '[]'::jsonb;                            -- the turns, checked, in input order
    seen jsonb := '{}'::jsonb;                            -- identical turns so far, per session: their count
    key text;
    sess record;
    stored jsonb;
    ordinal integer;
    by_name jsonb;
    items jsonb := '[]'::jsonb;
    episodes jsonb := '[]'::jsonb;
    lines jsonb;
    texts text[] := '{}';
    fields jsonb;
    turn_fields text[];
    before text[];
    item jsonb;
    dup record;
    synonyms constant jsonb := '{"content": "text", "message": "text", "body": "text", "name": "speaker",
                                 "author": "speaker", "user": "speaker", "timestamp": "time", "created_at": "time",
                                 "date": "time", "session_id": "session", "message_id": "id", "meta": "metadata"}';
BEGIN
    scope := dna.check_scope(scope);
    tenant := dna.resolve_tenant(tenant, personal);
    conversation := dna.check_key('conversation', conversation, 200);
    at := coalesce(dna.check_now(now), now());
    context_turns := coalesce(context_turns, dna.conversation_context_turns());
    IF context_turns < 0 OR context_turns > 10 THEN
        RAISE EXCEPTION 'context_turns must be between 0 and 10, got %', context_turns USING ERRCODE = '22023',
            HINT = 'How many turns before a turn its indexed text holds; NULL: dna.conversation_context_turns().';
    END IF;
    IF turns IS NULL OR jsonb_typeof(turns) <> 'array' THEN
        RAISE EXCEPTION 'turns must be a JSON array of {text, speaker?, role?, time?, session?, id?, metadata?}, got %',
            coalesce('a JSON ' || jsonb_typeof(turns), 'NULL') USING ERRCODE = '22023',
            HINT = 'For example ''[{"speaker": "Ana", "role": "user", "text": "I moved to Porto"}, {"role": "assistant", "text": "Congratulations!"}]''.';
    END IF;
    n := jsonb_array_length(turns);
    IF n > dna.remember_many_limit() - 100 THEN
        RAISE EXCEPTION '% turns in one call; the limit is %: send the conversation in parts', n,
            dna.remember_many_limit() - 100 USING ERRCODE = '54000';
    END IF;
    IF sessions IS NOT NULL AND jsonb_typeof(sessions) <> 'object' THEN
        RAISE EXCEPTION 'sessions must be a JSON object {"<session>": "<ISO-8601 time>"}, got a JSON %',
            jsonb_typeof(sessions) USING ERRCODE = '22023';
    END IF;
    IF session IS NOT NULL THEN
        session := dna.check_key('session', session, 200);
    END IF;

    -- 1. Every turn checked, in input order; a bad one is named by its position (1-based).
    FOR t IN SELECT x.value AS turn, x.ord::integer AS ord FROM jsonb_array_elements(turns) WITH ORDINALITY AS x(value, ord)
             ORDER BY x.ord LOOP
        IF jsonb_typeof(t.turn) <> 'object' THEN
            RAISE EXCEPTION 'turn %: a turn is a JSON object {text, speaker?, role?, time?, session?, id?, metadata?}, got a JSON %',
                t.ord, jsonb_typeof(t.turn) USING ERRCODE = '22023';
        END IF;
        SELECT string_agg(quote_literal(k) || coalesce(' (did you mean ' || quote_literal(synonyms ->> k) || '?)', ''), ', ' ORDER BY k)
        INTO unknown FROM jsonb_object_keys(t.turn) AS k
        WHERE k NOT IN ('text', 'speaker', 'role', 'time', 'session', 'id', 'metadata');
        IF unknown IS NOT NULL THEN
            RAISE EXCEPTION 'turn %: unknown key %', t.ord, unknown USING ERRCODE = '22023',
                HINT = 'A turn is {text, speaker?, role?, time?, session?, id?, metadata?}; anything else goes in metadata.';
        END IF;
        IF jsonb_typeof(t.turn -> 'text') IS DISTINCT FROM 'string' OR btrim(t.turn ->> 'text') = '' THEN
            RAISE EXCEPTION 'turn %: text is required (a non-blank string)', t.ord USING ERRCODE = '22023';
        END IF;
        t_text := t.turn ->> 'text';
        IF octet_length(t_text) > 100000 THEN
            RAISE EXCEPTION 'turn %: text is % bytes; the limit is 100000 per turn', t.ord, octet_length(t_text)
                USING ERRCODE = '22001';
        END IF;
        FOREACH key IN ARRAY ARRAY['speaker', 'role'] LOOP
            IF t.turn ? key AND jsonb_typeof(t.turn -> key) NOT IN ('string', 'null') THEN
                RAISE EXCEPTION 'turn %: % must be a string, got a JSON %', t.ord, key, jsonb_typeof(t.turn -> key)
                    USING ERRCODE = '22023';
            END IF;
            IF length(t.turn ->> key) > 200 THEN
                RAISE EXCEPTION 'turn %: % is % characters long; the limit is 200', t.ord, key, length(t.turn ->> key)
                    USING ERRCODE = '22001';
            END IF;
        END LOOP;
        t_role := nullif(btrim(t.turn ->> 'role'), '');
        t_speaker := coalesce(nullif(btrim(t.turn ->> 'speaker'), ''), t_role);
        FOREACH key IN ARRAY ARRAY['session', 'id'] LOOP
            IF t.turn ? key AND jsonb_typeof(t.turn -> key) NOT IN ('string', 'number', 'null') THEN
                RAISE EXCEPTION 'turn %: % must be a string or a number, got a JSON %', t.ord, key, jsonb_typeof(t.turn -> key)
                    USING ERRCODE = '22023';
            END IF;
            IF length(t.turn ->> key) > 200 OR btrim(t.turn ->> key) = '' THEN
                RAISE EXCEPTION 'turn %: % must be 1-200 characters', t.ord, key USING ERRCODE = '22023';
            END IF;
        END LOOP;
        s_id := coalesce(t.turn ->> 'session', session, '1');
        s_time := CASE WHEN jsonb_typeof(sessions -> s_id) = 'string' THEN dna.parse_timestamptz(sessions ->> s_id) END;
        IF sessions ? s_id AND s_time IS NULL THEN
            RAISE EXCEPTION 'sessions.%: must be an ISO-8601 timestamp string, got %', s_id, sessions -> s_id
                USING ERRCODE = '22007';
        END IF;
        t_time := CASE WHEN jsonb_typeof(t.turn -> 'time') = 'string' THEN dna.parse_timestamptz(t.turn ->> 'time') END;
        IF t.turn ? 'time' AND jsonb_typeof(t.turn -> 'time') <> 'null' AND t_time IS NULL THEN
            RAISE EXCEPTION 'turn %: time must be an ISO-8601 timestamp string, got %', t.ord, t.turn -> 'time'
                USING ERRCODE = '22007';
        END IF;
        PERFORM dna.check_metadata(t.turn -> 'metadata', format('turn %s: metadata', t.ord));
        SELECT string_agg(k, ', ' ORDER BY k) INTO unknown
        FROM jsonb_object_keys(CASE WHEN jsonb_typeof(t.turn -> 'metadata') = 'object' THEN t.turn -> 'metadata' ELSE '{}' END) AS k
        WHERE k = ANY (dna.memory_field_names());
        IF unknown IS NOT NULL THEN
            RAISE EXCEPTION 'turn %: metadata may not hold %: the turn''s own field of that name is what filters read', t.ord,
                unknown USING ERRCODE = '22023',
                HINT = format('The turn''s fields (%s) come from the turn itself; rename these keys.',
                              array_to_string(dna.memory_field_names(), ', '));
        END IF;
        t_id := t.turn ->> 'id';
        key := s_id || chr(31) || coalesce(t_speaker, '') || chr(31) || coalesce(t_role, '') || chr(31)
               || coalesce(dna.iso8601(t_time), '') || chr(31) || t_text;
        seen := jsonb_set(seen, ARRAY[md5(key)], to_jsonb(coalesce((seen ->> md5(key))::integer, 0) + 1));
        rows := rows || jsonb_build_object(
            'ord', t.ord, 'session', s_id, 'text', t_text, 'speaker', t_speaker, 'role', t_role,
            'time', dna.iso8601(coalesce(t_time, s_time, at)), 'session_time', dna.iso8601(coalesce(s_time, t_time, at)),
            'id', t_id, 'metadata', coalesce(t.turn -> 'metadata', '{}'::jsonb),
            'name', conversation || '/' || CASE WHEN t_id IS NOT NULL THEN t_id
                    ELSE s_id || '/t-' || left(encode(sha256(convert_to(key || chr(31) || (seen ->> md5(key)), 'UTF8')), 'hex'), 16) END);
    END LOOP;
    SELECT array_agg(x.ord ORDER BY x.ord) AS ords, x.name INTO dup
    FROM jsonb_to_recordset(rows) AS x(ord integer, name text)
    GROUP BY x.name HAVING count(*) > 1 ORDER BY min(x.ord) LIMIT 1;
    IF dup.name IS NOT NULL THEN
        RAISE EXCEPTION 'turns % have one id (%)', array_to_string(dup.ords, ' and '), dup.name USING ERRCODE = '22023',
            HINT = 'A turn''s id names it in its conversation: give each turn its own, or none.';
    END IF;

    -- 2. Per session (in order of first appearance): the stored turns, each new turn's place after them,
    -- the context of every turn sent, and the episode.
    SELECT jsonb_object_agg(k.kind, to_jsonb(k.embed_fields)) INTO fields
    FROM dna.dna_kinds AS k WHERE k.kind IN ('Turn', 'Episode');
    IF fields IS NULL OR NOT fields ? 'Turn' OR NOT fields ? 'Episode' THEN
        RAISE EXCEPTION 'the memory Kinds Turn and Episode are not registered' USING ERRCODE = '55000',
            HINT = 'Run dna db upgrade (revision 0019_where_users_run registers them).';
    END IF;
    turn_fields := ARRAY(SELECT jsonb_array_elements_text(fields -> 'Turn'));
    FOR sess IN SELECT x.session, min(x.ord) AS first FROM jsonb_to_recordset(rows) AS x(ord integer, session text)
                GROUP BY x.session ORDER BY min(x.ord) LOOP
        -- stored turns of the session: name -> {turn, line}
        SELECT coalesce(jsonb_object_agg(i.name, jsonb_build_object(
                   'turn', (i.spec #>> '{conversation,turn}')::integer,
                   'line', dna.turn_line(i.spec #>> '{conversation,speaker}', i.spec ->> 'summary'),
                   'time', i.spec ->> 'created_at')), '{}'::jsonb)
        INTO stored
        FROM dna.dna_instances AS i
        WHERE i.scope = scope AND i.kind = 'Turn' AND i.tenant = tenant
          AND i.metadata @> jsonb_build_object('conversation', conversation, 'session', sess.session)
          AND jsonb_typeof(i.spec #> '{conversation,turn}') = 'number';
        ordinal := coalesce((SELECT max((v.value ->> 'turn')::integer) FROM jsonb_each(stored) AS v), 0);
        by_name := stored;
        FOR t IN SELECT x.* FROM jsonb_array_elements(rows) AS e(r)
                 CROSS JOIN LATERAL jsonb_to_record(e.r) AS x(ord integer, session text, text text, speaker text, role text,
                                                           "time" text, session_time text, id text, metadata jsonb, name text)
                 WHERE x.session = sess.session ORDER BY x.ord LOOP
            IF NOT by_name ? t.name THEN
                ordinal := ordinal + 1;
                by_name := by_name || jsonb_build_object(t.name, jsonb_build_object(
                    'turn', ordinal, 'line', dna.turn_line(t.speaker, t.text), 'time', t."time"));
            ELSE
                by_name := jsonb_set(by_name, ARRAY[t.name, 'line'], to_jsonb(dna.turn_line(t.speaker, t.text)));
            END IF;
        END LOOP;
        -- every turn of the session by place: [{name, turn, line, time}]
        lines := (SELECT jsonb_agg(jsonb_build_object('name', v.key) || v.value ORDER BY (v.value ->> 'turn')::integer)
                  FROM jsonb_each(by_name) AS v);
        FOR t IN SELECT x.* FROM jsonb_array_elements(rows) AS e(r)
                 CROSS JOIN LATERAL jsonb_to_record(e.r) AS x(ord integer, session text, text text, speaker text, role text,
                                                           "time" text, session_time text, id text, metadata jsonb, name text)
                 WHERE x.session = sess.session ORDER BY x.ord LOOP
            ordinal := (by_name #>> ARRAY[t.name, 'turn'])::integer;
            -- the turns before it, nearest last: its text holds all of them, its views fewer, the last one none
            before := ARRAY(SELECT l.value ->> 'line' FROM jsonb_array_elements(lines) AS l
                            WHERE (l.value ->> 'turn')::integer BETWEEN ordinal - context_turns AND ordinal - 1
                            ORDER BY (l.value ->> 'turn')::integer);
            item := jsonb_build_object(
                'ord', t.ord, 'kind', 'Turn', 'name', t.name, 'now', t."time",
                'spec', jsonb_strip_nulls(jsonb_build_object(
                    'summary', t.text, 'title', t.speaker,
                    'context', nullif(array_to_string(before, ' / '), ''),
                    'created_at', t."time",
                    'conversation', jsonb_strip_nulls(jsonb_build_object(
                        'id', conversation, 'session', sess.session, 'turn', ordinal, 'speaker', t.speaker, 'role', t.role,
                        'session_date', left(t.session_time, 10), 'turn_id', t.id)),
                    'metadata', CASE WHEN t.metadata <> '{}'::jsonb THEN t.metadata END)));
            -- its views: the same turn with fewer of the turns before it, down to none (passages 1, 2, …);
            -- a hit answers by its best view (dna.search's MaxP)
            IF cardinality(before) > 0 THEN
                item := item || jsonb_build_object('passages', (
                    SELECT jsonb_agg(dna.memory_text_of(turn_fields,
                                         jsonb_strip_nulls(jsonb_set(item -> 'spec', '{context}',
                                             coalesce(to_jsonb(nullif(array_to_string(before[cardinality(before) - j + 1:], ' / '), '')),
                                                      'null'::jsonb))))
                                     ORDER BY j DESC)
                    FROM generate_series(0, cardinality(before) - 1) AS j));
            END IF;
            items := items || item;
        END LOOP;
        episodes := episodes || jsonb_build_object(
            'kind', 'Episode', 'name', conversation || '/' || sess.session,
            'now', (SELECT min(l.value ->> 'time') FROM jsonb_array_elements(lines) AS l),
            'spec', jsonb_build_object(
                'title', format('%s, session %s', conversation, sess.session),
                'summary', format('%s turns between %s', jsonb_array_length(lines),
                                  (SELECT string_agg(DISTINCT split_part(l.value ->> 'line', ': ', 1), ', ')
                                   FROM jsonb_array_elements(lines) AS l WHERE position(': ' IN l.value ->> 'line') > 0)),
                'body', left((SELECT string_agg(l.value ->> 'line', E'\n' ORDER BY (l.value ->> 'turn')::integer)
                              FROM jsonb_array_elements(lines) AS l), 100000),
                'created_at', (SELECT min(l.value ->> 'time') FROM jsonb_array_elements(lines) AS l),
                'started_at', (SELECT min(l.value ->> 'time') FROM jsonb_array_elements(lines) AS l),
                'ended_at', (SELECT max(l.value ->> 'time') FROM jsonb_array_elements(lines) AS l),
                'turns', jsonb_array_length(lines),
                'conversation', jsonb_build_object('id', conversation, 'session', sess.session,
                                                   'session_date', (SELECT left(min(l.value ->> 'time'), 10)
                                                                    FROM jsonb_array_elements(lines) AS l))));
    END LOOP;
    -- items in input order (their positions are the turns'), the episodes after them
    items := (SELECT jsonb_agg(e.value - 'ord' ORDER BY (e.value ->> 'ord')::integer) FROM jsonb_array_elements(items) AS e)
             || episodes;
    -- what is indexed, in the order dna.remember_many takes vectors: each item's text, then its passages
    texts := ARRAY(SELECT x.body FROM (
                       SELECT e.o, 0 AS p, dna.memory_text_of(ARRAY(SELECT jsonb_array_elements_text(fields -> (e.value ->> 'kind'))),
                                                              e.value -> 'spec') AS body
                       FROM jsonb_array_elements(items) WITH ORDINALITY AS e(value, o)
                       UNION ALL
                       SELECT e.o, v.ord, v.body
                       FROM jsonb_array_elements(items) WITH ORDINALITY AS e(value, o)
                       CROSS JOIN LATERAL jsonb_array_elements_text(coalesce(e.value -> 'passages', '[]')) WITH ORDINALITY AS v(body, ord)
                   ) AS x ORDER BY x.o, x.p);
    RETURN jsonb_build_object('scope', scope, 'tenant', tenant, 'conversation', conversation, 'items', items,
                              'texts', to_jsonb(texts), 'digest', md5(array_to_string(texts, chr(30))),
                              'turns', n, 'episodes', jsonb_array_length(episodes));
END
$$;

COMMENT ON FUNCTION dna.conversation_plan(text, text, jsonb, text, jsonb, text, boolean, timestamptz, integer) IS
'What dna.remember_conversation writes for these turns, read-only: {scope, tenant, conversation, items (dna.remember_many '
'items: one Turn per turn in input order, then one Episode per session touched), texts (what is indexed, in the order '
'dna.remember_many takes vectors: each item''s text, dna.memory_text_of, then its passages: what a client embeds), '
'digest (md5 of the texts), turns, episodes}. turns: '
'a JSON array of {text (required), speaker (default role), role, time (ISO-8601; default the session''s time in sessions, '
'else now), session (default the session argument, else ''1''), id, metadata}; sessions: {"<session>": "<ISO-8601 time>"}. '
'A Turn: summary = text, title = speaker, context = the context_turns (0..10, default dna.conversation_context_turns() '
'= 2) turns before it in its session ("speaker: text" joined by " / "; its text: title, summary, context), and as '
'passages its views with fewer of them, down to none (a hit answers by its best view), created_at = its time, conversation = {id, session, turn '
'(its place, 1-based: stored, else next after the stored ones), speaker, role, session_date, turn_id}, metadata. An '
'Episode <conversation>/<session>: title, summary (turn count, speakers), body (every turn, "speaker: text" lines), '
'created_at = started_at, ended_at, turns, conversation {id, session, session_date}. Errors: 22023 naming the turn''s '
'position (not an object, unknown key with the one meant, blank text, wrong types, two turns of one id), 22001, 22007 '
'(bad time), 54000 (over 9900 turns), 55000 (Kinds not registered), 42501 (tenant).';

CREATE OR REPLACE FUNCTION dna.remember_conversation(
    scope text, conversation text, turns jsonb, session text DEFAULT NULL, sessions jsonb DEFAULT NULL,
    tenant text DEFAULT '', personal boolean DEFAULT false, now timestamptz DEFAULT NULL,
    embeddings vector[] DEFAULT NULL, model_id text DEFAULT NULL, digest text DEFAULT NULL,
    context_turns integer DEFAULT NULL, atomic boolean DEFAULT true)
RETURNS jsonb
LANGUAGE plpgsql
SET jit = off                -- many short statements: compiling them would cost more than running them
AS $$
#variable_conflict use_variable
DECLARE
    plan jsonb;
    written jsonb;
    n integer;
    resolved text;
BEGIN
    scope := dna.check_scope(scope);
    resolved := dna.resolve_tenant(tenant, personal);
    conversation := dna.check_key('conversation', conversation, 200);
    -- Writers of one conversation queue: a turn's place and context read the stored turns.
    PERFORM pg_advisory_xact_lock(hashtextextended(
        'dna.conversation' || chr(31) || scope || chr(31) || resolved || chr(31) || conversation, 0));
    plan := dna.conversation_plan(scope, conversation, turns, session, sessions, tenant, personal, now, context_turns);
    n := jsonb_array_length(plan -> 'texts');
    IF embeddings IS NOT NULL AND cardinality(embeddings) <> n THEN
        RAISE EXCEPTION 'embeddings must have one element per text of the plan (% texts of turns, their views and episodes), got %',
            n, cardinality(embeddings) USING ERRCODE = '22023',
            HINT = 'Embed the texts dna.conversation_plan returns, in their order.';
    END IF;
    IF embeddings IS NOT NULL AND digest IS DISTINCT FROM plan ->> 'digest' THEN
        RAISE EXCEPTION 'the conversation % changed since its texts were read (digest %, now %)', quote_literal(conversation),
            coalesce(digest, 'NULL'), plan ->> 'digest' USING ERRCODE = '40001',
            HINT = 'Read dna.conversation_plan again, embed its texts and retry (the vectors must be of these texts).';
    END IF;
    written := dna.remember_many(scope, plan -> 'items', 'Turn', CASE WHEN personal IS TRUE THEN '' ELSE tenant END,
                                 now, embeddings, model_id, personal IS TRUE, atomic);
    RETURN jsonb_build_object(
        'scope', scope, 'tenant', written -> 'tenant', 'personal', personal IS TRUE, 'conversation', conversation,
        'turns', (SELECT coalesce(jsonb_agg(e.value ORDER BY e.o), '[]'::jsonb)
                  FROM jsonb_array_elements(written -> 'results') WITH ORDINALITY AS e(value, o) WHERE e.o <= (plan ->> 'turns')::integer),
        'episodes', (SELECT coalesce(jsonb_agg(e.value - 'ord' ORDER BY e.o), '[]'::jsonb)
                     FROM jsonb_array_elements(written -> 'results') WITH ORDINALITY AS e(value, o) WHERE e.o > (plan ->> 'turns')::integer),
        'created', written -> 'created', 'updated', written -> 'updated', 'unchanged', written -> 'unchanged',
        'failed', written -> 'failed');
END
$$;

COMMENT ON FUNCTION dna.remember_conversation(text, text, jsonb, text, jsonb, text, boolean, timestamptz, vector[], text, text, integer, boolean) IS
'A conversation''s turns in one call and one transaction: writes the plan of dna.conversation_plan (same arguments; one '
'memory of Kind Turn per turn, knowing its conversation, session, place, speaker, role and time, indexed with the turns '
'before it; one Episode per session touched, with its time span) through dna.remember_many (embeddings: one vector '
'per text of the plan, in its order, under model_id; with them, digest must be the plan''s, else 40001: the conversation '
'changed since the texts were read). Writers of one conversation queue on an advisory lock. Re-sending the same turns '
'changes nothing (unchanged); sending a session''s new turns appends them. atomic as dna.remember_many (a bad turn '
'fails the call naming its position). Returns {scope, tenant, personal, conversation, turns: one result per turn in '
'input order ({ord, kind, name, action, version, recorded_at, index} or {ord, sqlstate, error, hint}), episodes: '
'[{kind, name, action, ...}], created, updated, unchanged, failed}. Errors: as dna.conversation_plan and '
'dna.remember_many; 40001 (plan changed), 22023 (embeddings of another length).';

CREATE OR REPLACE FUNCTION dna.turn_neighbours(scope text, tenant text, hits jsonb, context integer)
RETURNS jsonb
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_variable
BEGIN
    IF coalesce(context, 0) <= 0 OR hits IS NULL OR jsonb_array_length(hits) = 0 THEN
        RETURN hits;
    END IF;
    -- One GIN probe (metadata @> conversation, session) per Turn hit, in its own partition.
    RETURN (SELECT coalesce(jsonb_agg(CASE WHEN h.value ->> 'kind' = 'Turn' AND nb.around IS NOT NULL
                                           THEN h.value || jsonb_build_object('context', nb.around) ELSE h.value END
                                      ORDER BY h.o), '[]'::jsonb)
            FROM jsonb_array_elements(hits) WITH ORDINALITY AS h(value, o)
            LEFT JOIN LATERAL (
                SELECT jsonb_agg(jsonb_strip_nulls(jsonb_build_object(
                           'name', i.name, 'turn', (i.spec #>> '{conversation,turn}')::integer,
                           'speaker', i.spec #>> '{conversation,speaker}', 'role', i.spec #>> '{conversation,role}',
                           'text', i.spec ->> 'summary', 'time', i.spec ->> 'created_at'))
                           ORDER BY (i.spec #>> '{conversation,turn}')::integer) AS around
                FROM dna.dna_instances AS i
                WHERE h.value ->> 'kind' = 'Turn' AND i.scope = scope AND i.kind = 'Turn'
                  AND i.tenant = h.value ->> 'tenant'
                  AND i.metadata @> jsonb_build_object('conversation', h.value #> '{metadata,conversation}',
                                                       'session', h.value #> '{metadata,session}')
                  AND jsonb_typeof(i.spec #> '{conversation,turn}') = 'number'
                  AND (i.spec #>> '{conversation,turn}')::integer
                      BETWEEN (h.value #>> '{metadata,turn}')::integer - context AND (h.value #>> '{metadata,turn}')::integer + context
                  AND i.name <> h.value ->> 'name') AS nb ON true);
END
$$;

COMMENT ON FUNCTION dna.turn_neighbours(text, text, jsonb, integer) IS
'recall''s hits (jsonb array) with, on each hit of Kind Turn, context: the turns of its conversation and session within '
'context places before and after it (itself left out), [{name, turn, speaker, role, text, time}] in order, read in '
'the hit''s own partition (row-level security applies). context <= 0 or NULL: the hits as they are. dna.recall(context '
'=> n) calls it.';
