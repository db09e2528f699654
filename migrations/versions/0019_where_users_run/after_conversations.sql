-- 0019_where_users_run, topic conversations (issue 25 item 2): run after the plane files. The memory
-- Kinds of a conversation (sql/conversations.sql): Turn (what was said: its text, speaker and the turns
-- before it are indexed) and Episode (a session: its turns and time span). Both recallable and retired
-- only by forget; every version kept.
INSERT INTO dna.dna_kinds (kind, api_version, traits, version_retention, embed_fields, description)
SELECT 'Turn', 'dna/v1', ARRAY['memory.recallable', 'record.invalidate-only'], NULL, ARRAY['title', 'summary', 'context'],
       'A turn of a conversation (dna.remember_conversation): summary = what was said, title = its speaker, context = the '
       'turns before it; spec.conversation = {id, session, turn, speaker, role, session_date}.'
WHERE NOT EXISTS (SELECT 1 FROM dna.dna_kinds AS k WHERE k.kind = 'Turn');
INSERT INTO dna.dna_kinds (kind, api_version, traits, version_retention, embed_fields, description)
SELECT 'Episode', 'dna/v1', ARRAY['memory.recallable', 'record.invalidate-only'], NULL, ARRAY['title', 'summary', 'body'],
       'A session of a conversation remembered as an episode (dna.remember_conversation): its turns (body), speakers and '
       'time span (started_at, ended_at).'
WHERE NOT EXISTS (SELECT 1 FROM dna.dna_kinds AS k WHERE k.kind = 'Episode');
