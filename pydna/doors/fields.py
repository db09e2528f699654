"""The arguments of the doors' verbs, with the JSON-schema descriptions an LLM or a client reads.

One definition per argument, shared by the MCP tools (:mod:`pydna.doors.mcp_server`) and the REST
models (:mod:`pydna.doors.rest`), so both doors describe — and bound — them alike. The ranges are
the SQL functions' own (``dna.recall``: k 0..1000; ``dna.list_memories``: 0..10000; floors 0..1);
what the schema lets through, the database still checks, and its SQLSTATE comes back.
"""
from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, Optional

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

MemoryKind = Literal["Engram", "Research", "Evidence", "Turn", "Episode"]
WritableKind = Literal["Engram", "Research", "Evidence"]   # Turn and Episode come from remember_conversation

Query = Annotated[str, Field(
    description="What to look for, in natural language (at most 10,000 characters). Matched by meaning "
                "(embeddings) and by words (BM25); a blank query returns nothing.")]
Tenant = Annotated[str, Field(
    description="The workspace partition: '' (default) = the shared base only; a workspace slug "
                "(1-63 of a-z 0-9 . _ -) = that workspace over the base, if your role is a member. Never "
                "'personal:…' (refused with SQLSTATE 42501): use personal=true for your personal memory.")]
Personal = Annotated[bool, Field(
    description="true = your personal memory (partition personal:<your oid>, resolved by the database from "
                "the identity this server runs as; no one else can read it), read over the shared base. "
                "Fails with SQLSTATE 42501 when that identity has none.")]
MemoryName = Annotated[str, Field(
    description="The memory's name, as remember returned it (e.g. rem-1a2b3c4d…) or as recall/list_memories "
                "show it.")]
Kind = Annotated[MemoryKind, Field(
    description="The memory Kind: Engram (an episodic, semantic or procedural memory; default), Research "
                "(a research note), Evidence (a piece of evidence), Turn (a conversation's turn) or Episode (a "
                "conversation's session).")]
NewKind = Annotated[WritableKind, Field(
    description="The memory Kind: Engram (an episodic, semantic or procedural memory; default), Research "
                "(a research note) or Evidence (a piece of evidence); conversations: remember_conversation.")]
Kinds = Annotated[Optional[list[MemoryKind]], Field(
    description="Only these memory Kinds (Engram, Research, Evidence, Turn, Episode); omitted = all of them.")]
DocKinds = Annotated[Optional[list[str]], Field(
    description="Only these Kinds (documents, e.g. Doc; memories: Engram, Research, Evidence); omitted = all.")]
Now = Annotated[Optional[datetime], Field(
    description="World (valid) time to act or read at, ISO-8601 (e.g. 2026-07-09T15:00:00Z; no zone = UTC). "
                "Omitted = the database's now(). A memory forgotten before this time is not in force.")]
AsOf = Annotated[Optional[datetime], Field(
    description="Transaction time, ISO-8601: answer with what the system believed at that moment (the "
                "memories and texts as they were recorded then, before later edits or forgets). Omitted = "
                "current belief. A read with as_of never writes. Differs from now: now moves the world "
                "clock, as_of moves the record.")]
RecallK = Annotated[int, Field(ge=0, le=1000, description="How many memories to return (0-1000; default 5).")]
SearchK = Annotated[int, Field(ge=0, le=1000, description="How many hits to return (0-1000; default 10).")]
Reconsolidate = Annotated[bool, Field(
    description="true (default) = strengthen the memories this recall surfaces (retention rises, the cue "
                "is logged), as recalling does; false = a pure read. Reads with as_of never write.")]
Actor = Annotated[Optional[str], Field(
    description="Who is asking, recorded with the cue (default: the database login).")]
Summary = Annotated[Optional[str], Field(
    description="The memory itself, one or two sentences (at most 280 characters); required for an Engram.")]
Area = Annotated[Optional[str], Field(
    description="Where it belongs, as Kind/name or a path (e.g. Feature/kernel, ops/deploys).")]
Affect = Annotated[Optional[Literal["triumph", "regret", "surprise", "wistful", "ominous", "neutral"]], Field(
    description="The feeling attached (weights recall): triumph, regret, surprise, wistful, ominous, neutral "
                "(default).")]
Tags = Annotated[Optional[list[str]], Field(
    description="Topic tags (the first 5 become co-topics of the encoding context).")]
SourceRefs = Annotated[Optional[list[str]], Field(
    description="Source references, e.g. Doc/rrf or a URL.")]
NewName = Annotated[Optional[str], Field(
    description="A name for the memory; omitted = a stable hash of its text (remembering "
                                "the same text again updates it instead of duplicating it).")]
Title = Annotated[Optional[str], Field(description="A title (a Research or Evidence memory needs a title, summary or body).")]
Body = Annotated[Optional[str], Field(description="Longer text, beside the summary.")]
SupersededBy = Annotated[Optional[str], Field(
    description="The name of the memory that replaces this one, if any (recorded).")]
RevivedBy = Annotated[Optional[str], Field(description="Who or what revives it (recorded).")]
IncludeForgotten = Annotated[bool, Field(description="true = include forgotten memories (default false).")]
ListLimit = Annotated[int, Field(ge=0, le=10000, description="At most this many memories, newest first (0-10000; default 100).")]
Apply = Annotated[bool, Field(
    description="false (default) = a dry run: writes nothing, reports stale memories, merge candidates and "
                "contradictions. true = forget (never delete) the stale memories.")]
StaleFloor = Annotated[float, Field(
    ge=0, le=1, description="A memory is stale when its retention (0-1, Ebbinghaus R = exp(-t/S)) is below this "
                            "(default 0.15).")]
MergeFloor = Annotated[float, Field(
    ge=0, le=1, description="Merge candidates share at least this Jaccard overlap of terms (0-1; default 0.5).")]
NamePrefix = Annotated[Optional[str], Field(description="Only documents whose name starts with this.")]
ValidTime = Annotated[Optional[datetime], Field(
    description="World time, ISO-8601: leave out memories not in force then (default: now). Documents that "
                "are not memories are always in force.")]
IncludeRetired = Annotated[bool, Field(description="true = also return forgotten memories (default false).")]
SearchOffset = Annotated[int, Field(
    ge=0, le=9000, description="Skip this many ranks (0-9000; default 0): the hits are ranks offset+1 .. offset+k of "
                               "one ranking, so page p of size k is offset (p-1)*k; the answer's next_offset starts the "
                               "next page (null: none).")]
RecallOffset = Annotated[int, Field(
    ge=0, le=1000, description="Skip this many ranks (offset + k at most 1000; default 0): the memories are ranks "
                               "offset+1 .. offset+k of the recall with k = offset + k; the answer's next_offset starts "
                               "the next page (null: none).")]
ListOffset = Annotated[int, Field(
    ge=0, le=1000000, description="Skip this many memories of the listing's order (newest first, then name; "
                                  "0-1000000; default 0); the answer's next_offset starts the next page (null: none).")]


class Claim(BaseModel):
    """A declared claim: SUBJECT::PREDICATE=OBJECT, compared per subject by consolidate."""

    predicate: Annotated[str, Field(description="What is claimed, e.g. deploy_day.")]
    object: Annotated[Optional[str], Field(
        description="Its value, e.g. thursday; omitted = an existence claim.")] = None
    subject: Annotated[Optional[str], Field(
        description="What it is about, as Kind/name (e.g. Service/api); omitted = the memory's "
                                    "first Kind/name referent (its area or source refs).")] = None
    polarity: Annotated[Literal["asserts", "denies"], Field(description="asserts (default) or denies.")] = "asserts"

    def as_spec(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


def _claim_text(value: Any) -> Any:
    """A claim given as text, the CLI's form (``User/me::prod_db=postgres17``), as its object."""
    if isinstance(value, str):
        from pydna.claims import parse_claim

        return parse_claim(value)          # ValueError: the field's 422 / tool error names the form
    return value


Claims = Annotated[Optional[list[Annotated[Claim, BeforeValidator(_claim_text)]]], Field(
    description="Claims to declare, each an object or the text [SUBJECT::]PREDICATE=[!]OBJECT (e.g. "
                "\"User/me::prod_db=postgres17\"; ! denies). Declare one only when a LATER value of the same predicate "
                "would make this memory false (a plan, a location, a status); consolidate reports contradictions "
                "between them.")]


Filter = Annotated[Optional[dict[str, Any]], Field(
    description="Narrow by metadata (applied inside the search before the top k), a JSON object: "
                "{\"field\": value} is equality; {\"field\": {op: value}} with op eq, ne, in, nin (lists), gt, gte, "
                "lt, lte (numbers or ISO-8601 timestamps), exists (true/false), contains / contains_any (array "
                "fields such as tags); {\"and\": [...]}, {\"or\": [...]}, {\"not\": {...}}; \"a.b\" is a nested "
                "field. A memory's fields: its metadata plus tags, area, affect, memory_type, created_at, "
                "valid_from, valid_to, and for a conversation's turn conversation, session, turn, speaker, role. "
                "E.g. {\"tags\": {\"contains\": \"ops\"}, \"created_at\": {\"gte\": \"2026-05-01\"}}. A malformed "
                "filter fails with SQLSTATE 22023 and a hint.")]
Diversity = Annotated[Optional[Literal["collapse", "mmr", "off"]], Field(
    description="collapse (default) = a hit whose passage is a near-duplicate of a higher-ranked one (the same text, "
                "or a cosine >= duplicate_similarity) is left out; mmr = collapse, then Maximal Marginal Relevance "
                "(mmr_lambda) orders the rest; off = every hit, duplicates too.")]
RecallDiversity = Annotated[Optional[Literal["collapse", "off"]], Field(
    description="collapse (default) = a memory whose text is a near-duplicate of a higher-ranked one is left out; "
                "off = every memory, duplicates too.")]
DuplicateSimilarity = Annotated[Optional[float], Field(
    gt=0, le=1, description="The cosine (0-1] between two passages' vectors at or above which the lower-ranked one "
                            "is a duplicate (e.g. 0.9); omitted = 1, the cosine rule off: the text alone decides.")]
MmrLambda = Annotated[Optional[float], Field(
    ge=0, le=1, description="MMR's relevance weight (0-1; 1 = the ranking as fused): only with diversity mmr, which "
                            "it selects when diversity is omitted; omitted = 0.7.")]
Metadata = Annotated[Optional[dict[str, Any]], Field(
    description="Metadata to keep with the memory (a JSON object, e.g. {\"user\": \"u1\", \"project\": \"kernel\"}), "
                "which filters read; it may not use the memory's own field names (tags, area, created_at, ...).")]
FilterJson = Annotated[Optional[str], Field(
    description="The metadata filter as JSON text (see the filter of POST /v1/search), e.g. "
                "{\"tags\":{\"contains\":\"ops\"}}; a malformed one fails with SQLSTATE 22023.")]


class MemoryItem(BaseModel):
    """One memory of a batch (remember_many): the fields of remember, each optional but the text."""

    model_config = ConfigDict(extra="forbid")

    summary: Summary = None
    kind: NewKind = "Engram"
    name: NewName = None
    now: Now = None
    area: Area = None
    affect: Affect = None
    tags: Tags = None
    source_refs: SourceRefs = None
    claims: Claims = None
    title: Title = None
    body: Body = None
    metadata: Metadata = None

    def as_item(self) -> dict[str, Any]:
        out = self.model_dump(exclude_none=True, exclude={"claims"})
        if self.claims:
            out["claims"] = [c.as_spec() for c in self.claims]
        return out


MemoryItems = Annotated[list[MemoryItem], Field(
    min_length=1, max_length=10000,
    description="The memories to write, in order (1-10,000): each as remember takes it (summary required for an "
                "Engram; name, kind, now, area, affect, tags, source_refs, claims, title, body, metadata).")]
Atomic = Annotated[bool, Field(
    description="true (default) = all or nothing: a bad item fails the call naming its position (item 3: ...) and "
                "nothing is written; false = write the good items and report the bad ones in results.")]


class TurnItem(BaseModel):
    """One turn of a conversation (remember_conversation)."""

    model_config = ConfigDict(extra="forbid")

    text: Annotated[str, Field(min_length=1, description="What was said (required).")]
    speaker: Annotated[Optional[str], Field(description="Who said it (a name; default: role).")] = None
    role: Annotated[Optional[str], Field(description="user, assistant, system or tool (free text).")] = None
    time: Annotated[Optional[datetime], Field(
        description="When, ISO-8601 (default: its session's time in sessions, else now).")] = None
    session: Annotated[Optional[str], Field(description="Its session (default: the call's session, else '1').")] = None
    id: Annotated[Optional[str], Field(
        description="Its id in the conversation (a message id); omitted = derived from its content, so re-sending "
                    "it changes nothing.")] = None
    metadata: Metadata = None

    def as_turn(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


Conversation = Annotated[str, Field(
    min_length=1, max_length=200, description="The conversation's id (a thread, a chat), 1-200 characters.")]
Turns = Annotated[list[TurnItem], Field(
    min_length=1, max_length=9900, description="The turns, in the order they were said (1-9,900 per call); send a "
                                               "session's new turns to append them.")]
Session = Annotated[Optional[str], Field(
    description="The session of turns that name none (default '1'): a sitting, a day, a thread's episode.")]
Sessions = Annotated[Optional[dict[str, datetime]], Field(
    description="When each session took place, {session: ISO-8601 time}: the time of its turns that give none.")]
Context = Annotated[int, Field(
    ge=0, le=20, description="With each hit that is a conversation's turn, also return the n turns before and after "
                             "it in its session (context); 0 (default) = none.")]
