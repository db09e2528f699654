"""The plans of every statement a verb runs, nested ones included, read on a single node.

Citus refuses (or silently mis-executes) some statement shapes that PostgreSQL runs fine, so a
single-node test cannot see the error itself; it can see the shapes. ``Plans`` loads auto_explain on a
superuser connection (``auto_explain.log_level = notice``: every plan comes back to the client as a
NOTICE, JSON, VERBOSE, nested statements included) and reads them:

- ``unscoped_writes``: UPDATE/DELETE on a scope-keyed table whose scan of the target table is not pinned
  to one scope (``scope = <constant or parameter>``): Citus runs it on every shard (issue 16, B7).
- ``unscoped_reads``: scans of a scope-keyed table without such a condition (S3: a correlated sublink
  ``s.scope = t.scope`` scatters to every shard).
- ``nested_reads``: statements that scan ``dna_*`` tables and also call, in an expression or a FROM,
  a ``dna`` function that itself reads ``dna_*`` tables: Citus pushes the statement to a shard and refuses
  the nested distributed read (B5). Which functions read tables is computed from ``pg_proc``.

Triggers are exempt on Citus (a nested read in a trigger is allowed): ``TRIGGER_STATEMENTS`` names the
statement texts of trigger functions, which the checks skip.
"""
from __future__ import annotations

import json
import re
from contextlib import contextmanager

# Distributed by scope (issue 16); the small maps and dna_kinds / dna_models / dna_search_config are
# reference (or per-node) tables, not scope-routed.
SCOPE_KEYED = re.compile(r"^(dna_instances|dna_versions|dna_search_docs_\d+|dna_bm25_\w+|dna_search_receipts|"
                         r"dna_document_sources)$")
_PINNED = re.compile(r"\bscope = ('(?:[^']|'')*'::text|\$\d+)")


def _walk(node):
    yield node
    for child in node.get("Plans", []):
        yield from _walk(child)


def _walk_subplans(node, in_subplan=False):
    in_subplan = in_subplan or node.get("Parent Relationship") == "SubPlan"
    yield node, in_subplan
    for child in node.get("Plans", []):
        yield from _walk_subplans(child, in_subplan)


def _conditions(node) -> str:
    return " ".join(str(node.get(key, "")) for key in ("Index Cond", "Filter", "Recheck Cond", "TID Cond"))


def _expressions(node) -> str:
    parts = [_conditions(node), str(node.get("Join Filter", "")), str(node.get("Hash Cond", "")),
             str(node.get("Function Call", "")), " ".join(node.get("Output", []) or [])]
    return " ".join(parts)


class Plans:
    def __init__(self, conn):
        self.conn = conn
        self.plans: list[dict] = []
        self._on = False
        conn.add_notice_handler(self._notice)
        conn.execute("LOAD 'auto_explain'")
        readers = conn.execute(r"""
            WITH RECURSIVE f AS (
                SELECT p.oid, p.proname, p.prosrc FROM pg_proc AS p WHERE p.pronamespace = 'dna'::regnamespace),
            r AS (
                SELECT f.proname FROM f WHERE f.prosrc ~ '(dna\.dna_\w+|FROM %\d?\$?s|JOIN %\d?\$?s|dna\.%I)'
                UNION
                SELECT f.proname FROM f JOIN r ON f.prosrc ~ ('dna\.' || r.proname || '\s*\('))
            SELECT array_agg(proname ORDER BY proname) FROM r""").fetchone()[0]
        self.readers = set(readers or ())
        self.trigger_bodies = [row[0] for row in conn.execute(
            "SELECT p.prosrc FROM pg_proc AS p WHERE p.pronamespace = 'dna'::regnamespace "
            "AND p.prorettype = 'trigger'::regtype")]

    def _notice(self, diag):
        if not self._on:
            return
        text = diag.message_primary or ""
        if "plan:" in text:
            self.plans.append(json.loads(text.split("plan:", 1)[1]))

    @contextmanager
    def capture(self):
        self.plans = []
        self.conn.execute("SET auto_explain.log_min_duration = 0; SET auto_explain.log_nested_statements = on; "
                          "SET auto_explain.log_level = notice; SET auto_explain.log_format = json; "
                          "SET auto_explain.log_verbose = on")
        self._on = True
        try:
            yield self
        finally:
            self._on = False
            self.conn.execute("SET auto_explain.log_min_duration = -1")

    def _in_trigger(self, plan) -> bool:
        text = " ".join(plan.get("Query Text", "").split())
        return any(text and text in " ".join(body.split()) for body in self.trigger_bodies)

    def statements(self, include_triggers=False):
        for plan in self.plans:
            if include_triggers or not self._in_trigger(plan):
                yield plan

    def unscoped_writes(self) -> list[str]:
        """UPDATE/DELETE statements on a scope-keyed table not pinned to one scope (B7)."""
        bad = []
        for plan in self.statements(include_triggers=True):
            for node in _walk(plan["Plan"]):
                if node.get("Node Type") != "ModifyTable" or node.get("Operation") not in ("Update", "Delete"):
                    continue
                target = node.get("Relation Name", "")
                if not SCOPE_KEYED.match(target):
                    continue
                scans = [n for n in _walk(node) if n is not node and n.get("Relation Name") == target
                         and n.get("Alias") == node.get("Alias")]            # the target's own scan
                if not any(_PINNED.search(_conditions(n)) for n in scans):
                    bad.append(plan["Query Text"])
        return bad

    def unscoped_reads(self) -> list[str]:
        """Scans of a scope-keyed table with no scope condition at all, or, inside a correlated sublink
        (SubPlan), none pinned to one scope (S3: ``s.scope = t.scope`` in a NOT EXISTS under an OR)."""
        bad = []
        for plan in self.statements(include_triggers=True):
            for node, in_subplan in _walk_subplans(plan["Plan"]):
                name = node.get("Relation Name", "")
                if node.get("Node Type") == "ModifyTable" or not SCOPE_KEYED.match(name):
                    continue
                cond = _conditions(node)
                if _PINNED.search(cond):
                    continue
                if in_subplan or not re.search(r"\bscope = ", cond):
                    bad.append(f"{name} ({node.get('Alias')}): {plan['Query Text'][:300]}")
        return bad

    def nested_reads(self) -> list[str]:
        """Statements that read dna_* tables and call a function that reads dna_* tables (B5)."""
        bad = []
        for plan in self.statements():
            nodes = list(_walk(plan["Plan"]))
            if not any(str(n.get("Relation Name", "")).startswith("dna_") for n in nodes):
                continue
            called = set()
            for n in nodes:
                called |= set(re.findall(r"\bdna\.(\w+)\(", _expressions(n)))
                if n.get("Node Type") == "Function Scan" and n.get("Schema") == "dna":
                    called.add(n.get("Function Name"))
            nested = sorted(called & self.readers)
            if nested:
                bad.append(f"{nested}: {plan['Query Text'][:300]}")
        return bad
