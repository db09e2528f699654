"""What PostgreSQL 15 lacks, found in SQL text: the model of tests/test_pg15_guard.py.

pydna supports PostgreSQL 15 to 18, so every statement a server may run must be PostgreSQL 15's,
except inside a version branch. :func:`violations` reads one SQL text and names each use of syntax,
a function, a setting, a catalog view or a built-in role newer than 15 (or gone after 15) that is
not inside such a branch.

Where the list comes from:

- ``SYNTAX``: the PostgreSQL 16, 17 and 18 release notes (E.x "Release 16/17/18": SQL/JSON
  constructors and IS JSON, SYSTEM_USER, non-decimal and underscored numeric literals, GRANT … WITH
  INHERIT/SET/ADMIN TRUE, COPY … DEFAULT in 16; ALTER COLUMN … SET EXPRESSION, MERGE … RETURNING and
  NOT MATCHED BY SOURCE, JSON_TABLE and the SQL/JSON query functions, jsonpath type methods, the
  MAINTAIN privilege, COPY ON_ERROR, AT LOCAL, random(min, max), %TYPE[] in 17; virtual generated
  columns, RETURNING OLD/NEW, WITHOUT OVERLAPS / PERIOD, NOT ENFORCED, NOT NULL … NOT VALID,
  COPY REJECT_LIMIT in 18).
- ``tests/pg_catalog_since_15.json``: the function, setting, view and role names of 18's catalog
  that 15's lacks (and the reverse), diffed from the two servers; the live test checks it.

A version branch is:

- a PL/pgSQL ``IF`` whose condition compares ``server_version_num`` with ``>=`` (or ``>``) a number:
  its THEN part may use what that major has;
- an ``IF v IS NOT NULL`` where ``v`` was read with ``current_setting('<setting>', true)`` (NULL
  where the setting does not exist): its THEN part may use that setting; the read itself with
  ``missing_ok`` is always allowed;
- a whole file a revision runs only from some major on (``minimum`` given by the caller: a revision
  that names the file in its ``BELOW_<major>`` tuple runs ``below_<major>/<file>`` on older servers).

Comments are not code (``--`` and ``/* */`` are dropped), nor are the prose strings of
``COMMENT ON … IS '…'``.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

CATALOG = json.loads((Path(__file__).parent / "pg_catalog_since_15.json").read_text(encoding="utf-8"))
UNKNOWN = 18  # a catalog name newer than 15 whose first major is not recorded: allowed only from 18


@dataclass(frozen=True)
class Feature:
    name: str
    since: int            # the first major that has it (99: gone after 15, never allowed)
    pattern: re.Pattern


def _f(name: str, since: int, regex: str) -> Feature:
    return Feature(name, since, re.compile(regex, re.I | re.S))


SYNTAX: tuple[Feature, ...] = (
    # 16
    _f("SQL/JSON constructor JSON_ARRAY()/JSON_ARRAYAGG()/JSON_OBJECTAGG()", 16,
       r"(?<![\w.])json_(?:array|arrayagg|objectagg)\s*\("),
    _f("SQL/JSON constructor JSON_OBJECT(k VALUE v | k: v)", 16,
       r"(?<![\w.])json_object\s*\(\s*(?:\)|(?:'(?:[^']|'')*'|[\w.]+)\s*(?::(?!:)|\bVALUE\b))"),
    _f("IS [NOT] JSON predicate", 16, r"\bIS\s+(?:NOT\s+)?JSON\b"),
    _f("SYSTEM_USER", 16, r"\bSYSTEM_USER\b"),
    _f("non-decimal integer literal (0x, 0o, 0b)", 16, r"(?<![\w.$'])0[xob][0-9a-f_]+\b"),
    _f("underscore in a numeric literal", 16, r"(?<![\w.$'])\d+(?:_\d+)+\b"),
    _f("GRANT … WITH INHERIT/SET/ADMIN TRUE|FALSE", 16, r"\bWITH\s+(?:INHERIT|SET|ADMIN)\s+(?:TRUE|FALSE)\b"),
    _f("COPY … DEFAULT option", 16, r"\bCOPY\b[^;]*\(\s*(?:[^;)]*,\s*)?DEFAULT\s+'"),
    # 17
    _f("ALTER COLUMN … SET EXPRESSION", 17, r"\bSET\s+EXPRESSION\b"),
    _f("MERGE … RETURNING", 17, r"\bMERGE\s+INTO\b[^;]*\bRETURNING\b"),
    _f("MERGE … WHEN NOT MATCHED BY SOURCE/TARGET", 17, r"\bNOT\s+MATCHED\s+BY\s+(?:SOURCE|TARGET)\b"),
    _f("merge_action()", 17, r"(?<![\w.])merge_action\s*\("),
    _f("JSON_TABLE / SQL/JSON query functions / JSON() constructors", 17,
       r"(?<![\w.])(?:json_table|json_query|json_value|json_exists|json_scalar|json_serialize|json)\s*\("),
    _f("jsonpath type method", 17,
       r"\.(?:bigint|boolean|date|decimal|integer|number|string|time|time_tz|timestamp|timestamp_tz)\s*\(\s*\)"),
    _f("MAINTAIN privilege", 17, r"\bGRANT\b[^;]*\bMAINTAIN\b"),
    _f("COPY ON_ERROR / LOG_VERBOSITY / FORCE_(NOT_)NULL *", 17,
       r"\b(?:ON_ERROR|LOG_VERBOSITY)\b|\bFORCE_(?:NOT_)?NULL\s*\*"),
    _f("AT LOCAL", 17, r"\bAT\s+LOCAL\b"),
    _f("random(min, max)", 17, r"(?<![\w.])random\s*\(\s*[^)\s]"),
    _f("infinite interval", 17, r"'[+-]?infinity'\s*::\s*interval\b|\binterval\s+'[+-]?infinity'"),
    _f("SET STATISTICS DEFAULT / SET ACCESS METHOD DEFAULT", 17,
       r"\bSET\s+(?:STATISTICS|ACCESS\s+METHOD)\s+DEFAULT\b"),
    _f("EXPLAIN (SERIALIZE | MEMORY)", 17, r"\bEXPLAIN\s*\([^)]*\b(?:SERIALIZE|MEMORY)\b"),
    _f("PL/pgSQL %TYPE[] / %ROWTYPE[]", 17, r"%(?:ROW)?TYPE\s*\[\s*\]"),
    # 18
    _f("virtual generated column (GENERATED ALWAYS AS (…) without STORED)", 18, r"\bVIRTUAL\b"),
    _f("RETURNING OLD/NEW", 18, r"\bRETURNING\s+(?:WITH\s*\(|(?:OLD|NEW)\s*\.)"),
    _f("WITHOUT OVERLAPS / PERIOD (temporal keys)", 18, r"\bWITHOUT\s+OVERLAPS\b|\(\s*[^()]*,\s*PERIOD\s+\w+\s*\)"),
    _f("NOT ENFORCED constraint", 18, r"\bNOT\s+ENFORCED\b"),
    _f("NOT NULL … NOT VALID", 18, r"\bNOT\s+NULL\s+NOT\s+VALID\b"),
    _f("COPY REJECT_LIMIT", 18, r"\bREJECT_LIMIT\b"),
    _f("json(b)_strip_nulls(…, strip_in_arrays)", 18, r"(?<![\w.])jsonb?_strip_nulls\s*\((?:[^(),]|\([^()]*\))*,"),
)

# Catalog names with the major that added them, where the release notes say (the rest: UNKNOWN).
SINCE = {
    **dict.fromkeys(["any_value", "pg_input_is_valid", "pg_input_error_info", "random_normal", "array_sample",
                     "array_shuffle", "date_add", "date_subtract", "erf", "erfc", "system_user",
                     "pg_split_walfile_name", "pg_log_standby_snapshot", "enable_presorted_aggregate",
                     "createrole_self_grant", "icu_validation_level", "reserved_connections",
                     "scram_iterations", "vacuum_buffer_usage_limit", "debug_parallel_query", "pg_stat_io",
                     "pg_create_subscription", "pg_use_reserved_connections", "debug_io_direct",
                     "gss_accept_delegation", "send_abort_for_crash", "send_abort_for_kill",
                     "max_parallel_apply_workers_per_subscription"], 16),
    **dict.fromkeys(["to_bin", "to_oct", "uuid_extract_timestamp", "uuid_extract_version", "pg_basetype",
                     "to_regtypemod", "unicode_assigned", "unicode_version", "icu_unicode_version", "xmltext",
                     "pg_column_toast_chunk_id", "pg_sync_replication_slots", "transaction_timeout",
                     "allow_alter_system", "event_triggers", "summarize_wal", "io_combine_limit",
                     "huge_pages_status", "enable_group_by_reordering", "max_notify_queue_pages",
                     "sync_replication_slots", "synchronized_standby_slots", "trace_connection_negotiation",
                     "pg_stat_checkpointer", "pg_wait_events", "pg_maintain"], 17),
}


def since(name: str) -> int:
    return SINCE.get(name, UNKNOWN)


# --- text --------------------------------------------------------------------------------------

_TOKEN = re.compile(r"--[^\n]*|/\*.*?\*/|[Ee]'(?:[^'\\]|\\.|'')*'|'(?:[^']|'')*'|\$(\w*)\$", re.S)


def code_of(sql: str) -> str:
    """``sql`` with its comments blanked (same length: offsets stay) and string literals kept;
    dollar quotes are code (function bodies), their content scanned like the rest."""
    out, pos = [], 0
    for m in _TOKEN.finditer(sql):
        out.append(sql[pos:m.start()])
        tok = m.group(0)
        out.append(re.sub(r"[^\n]", " ", tok) if tok.startswith(("--", "/*")) else tok)
        pos = m.end()
    out.append(sql[pos:])
    text = "".join(out)
    # The prose of COMMENT ON … IS '…' (adjacent literals too) is not code.
    return re.sub(r"(\bCOMMENT\s+ON\b[^;]*?\bIS\s+)((?:E?'(?:[^']|'')*'\s*)+)",
                  lambda m: m.group(1) + re.sub(r"[^\n]", " ", m.group(2)), text, flags=re.S | re.I)


@dataclass(frozen=True)
class Branch:
    start: int        # where the THEN part starts
    end: int          # where it ends (ELSIF / ELSE / END IF of the same IF)
    major: int        # what it may use: features of this major (0: none)
    settings: frozenset[str]


_IF = re.compile(r"\b(END\s+IF|ELSIF|ELSE|IF)\b", re.I)


def branches(code: str) -> list[Branch]:
    """The THEN parts of the PL/pgSQL IFs of ``code`` that are version branches."""
    missing_ok = {m.group(1).lower(): m.group(2).lower() for m in re.finditer(
        r"(\w+)\s+\w+\s*:=\s*current_setting\(\s*'([\w.]+)'\s*,\s*(?:true|'t')\s*\)", code, re.I)}
    found: list[Branch] = []
    stack: list[dict] = []  # open IFs: {"major", "settings", "start"} of the current THEN part or None
    for m in _IF.finditer(code):
        word = " ".join(m.group(1).upper().split())
        if word == "IF":
            then = re.search(r"\bTHEN\b", code[m.end():])
            semi = code.find(";", m.end())
            if then is None or (semi != -1 and m.end() + then.start() > semi):
                continue  # CREATE … IF NOT EXISTS, DROP … IF EXISTS: no PL/pgSQL IF
            condition = code[m.end():m.end() + then.start()]
            stack.append(_branch_of(condition, missing_ok) | {"start": m.end() + then.end()})
        elif stack:
            top = stack[-1]
            if top["start"] is not None:
                found.append(Branch(top["start"], m.start(), top["major"], frozenset(top["settings"])))
            if word == "END IF":
                stack.pop()
            else:  # the ELSIF/ELSE part is no version branch of this condition
                top.update(start=None)
    return [b for b in found if b.major or b.settings]


def _branch_of(condition: str, missing_ok: dict[str, str]) -> dict:
    major = 0
    if "server_version_num" in condition.lower():
        cmp = re.search(r"(>=|>)\s*(\d{5,6})\b", condition)
        if cmp:
            n = int(cmp.group(2)) + (1 if cmp.group(1) == ">" else 0)
            major = n // 10000
    settings = {missing_ok[v.lower()] for v in re.findall(r"(\w+)\s+IS\s+NOT\s+NULL", condition, re.I)
                if v.lower() in missing_ok}
    return {"major": major, "settings": settings}


# --- the check ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Violation:
    what: str
    since: int
    line: int
    text: str

    def __str__(self) -> str:
        when = "gone after 15" if self.since == 99 else f"PostgreSQL {self.since}+"
        return f"line {self.line}: {self.what} ({when}): {self.text.strip()[:120]}"


def _catalog_features() -> list[tuple[str, str, int, re.Pattern]]:
    out = []
    for name in CATALOG["functions"]:
        out.append(("function", name, since(name), re.compile(rf"(?<![\w.$]){re.escape(name)}\s*\(", re.I)))
    for name in CATALOG["removed_functions"]:
        out.append(("function", name, 99, re.compile(rf"(?<![\w.$]){re.escape(name)}\s*\(", re.I)))
    for kind in ("relations", "roles"):
        for name in CATALOG[kind]:
            out.append((kind[:-1], name, since(name), re.compile(rf"(?<![\w.$]){re.escape(name)}\b", re.I)))
    return out


_CATALOG_FEATURES = _catalog_features()
_SETTINGS = {**{n: since(n) for n in CATALOG["settings"]}, **{n: 99 for n in CATALOG["removed_settings"]}}
_SETTING_WORD = re.compile(r"(?<![\w.$])(" + "|".join(sorted(map(re.escape, _SETTINGS), key=len, reverse=True))
                           + r")\b", re.I)


def violations(sql: str, minimum: int = 15) -> list[Violation]:
    """Every use in ``sql`` of what PostgreSQL ``minimum`` lacks, outside a version branch."""
    code = code_of(sql)
    open_branches = branches(code)

    def allowed(pos: int, major: int, setting: str | None = None) -> bool:
        if major <= minimum:
            return True
        return any(b.start <= pos < b.end and ((setting is not None and setting in b.settings) or
                                               (major != 99 and b.major >= major)) for b in open_branches)

    def line(pos: int) -> tuple[int, str]:
        start = code.rfind("\n", 0, pos) + 1
        end = code.find("\n", pos)
        return code.count("\n", 0, pos) + 1, sql[start:end if end >= 0 else None]

    found: list[Violation] = []
    for feature in SYNTAX:
        for m in feature.pattern.finditer(code):
            if not allowed(m.start(), feature.since):
                found.append(Violation(feature.name, feature.since, *line(m.start())))
    for m in re.finditer(r"\bGENERATED\s+ALWAYS\s+AS\s*\(", code, re.I):
        depth, i = 1, m.end()
        while depth and i < len(code):
            depth += {"(": 1, ")": -1}.get(code[i], 0)
            i += 1
        if not re.match(r"\s*(?:'\s*\n\s*')?STORED\b", code[i:], re.I) and not allowed(m.start(), 18):
            found.append(Violation("virtual generated column (no STORED)", 18, *line(m.start())))
    for kind, name, major, pattern in _CATALOG_FEATURES:
        for m in pattern.finditer(code):
            if not allowed(m.start(), major):
                found.append(Violation(f"{kind} {name}", major, *line(m.start())))
    for m in _SETTING_WORD.finditer(code):
        name = m.group(1).lower()
        before, after = code[max(0, m.start() - 30):m.start()], code[m.end():m.end() + 20]
        if re.search(r"current_setting\(\s*'$", before, re.I) and re.match(r"'\s*,\s*(?:true|'t')\s*\)", after, re.I):
            continue  # read with missing_ok: NULL where the setting does not exist
        if not allowed(m.start(), _SETTINGS[name], name):
            found.append(Violation(f"setting {name}", _SETTINGS[name], *line(m.start())))
    return sorted(found, key=lambda v: (v.line, v.what))
