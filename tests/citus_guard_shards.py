"""The Citus guard rails for what runs on a shard (tests/test_citus_guard_rails.py runs them): the
patterns a live cluster found that tests/citus_guard.py did not see (D1-D3, D5, D7, D8 of
../shared/research/citus-probe-3.md). Same model (tests/citus_guard_model.py), same Findings.

Patterns:
  K1   a PRIMARY KEY, UNIQUE or EXCLUDE constraint, or a unique index, of a distributed table whose
       key does not include ``scope`` (for EXCLUDE: ``scope WITH =``): Citus refuses it (D3);
  W1   a trigger WHEN clause or a column default of a Citus table that calls a dna function which
       (transitively) reads a Citus table: the shard's executor evaluates it on the worker, where no
       trigger exemption applies (D5);
  Q1   nextval / currval / setval of a sequence in a function that runs on a worker (a trigger
       function of a Citus table, a delegated verb, or a function they call), unless a column default
       of a Citus table uses the sequence (then Citus creates it on every node): Citus creates any
       other sequence on the coordinator only (D7);
  T1   a statement that reads a trigger's transition table (REFERENCING OLD/NEW TABLE) and names a
       Citus table: Citus plans it, and the plan cannot see the transition table (D8);
  BR   a branch of a CASE in a function of ``BRANCHED`` that fails when evaluated: each WHEN and THEN
       is run once on a server with the function's arguments and variables bound (typed NULLs), so a
       branch only a Citus server reaches is planned on one node too (D1).
"""
from __future__ import annotations

import pglast
import psycopg
from pglast.stream import RawStream
from pglast.visitors import Visitor

from citus_guard import transitive_reads
from citus_guard_model import CITUS, Finding, Package, _funcname, _walk, dna_calls, tables

# The functions whose CASE branches BR evaluates: the placement names dna.distribute and
# dna.distribution act on, read from pg_dist_partition only where Citus is installed.
BRANCHED = ("dna.citus_placement", "dna.citus_placement_name")
SEQUENCE_FUNCTIONS = ("nextval", "currval", "setval")


def _citus(pkg: Package, names) -> set[str]:
    return {t for t in names if pkg.place(t) in CITUS}


# -- K1 ------------------------------------------------------------------------------------------


def check_keys(pkg: Package) -> list[Finding]:
    """K1: every key of a distributed table includes scope (an exclusion constraint: scope WITH =)."""
    out = []
    for key in pkg.keys:
        if pkg.place(key.table) not in ("distributed", "dynamic"):
            continue
        what = {"p": "PRIMARY KEY", "u": "UNIQUE", "x": "EXCLUDE", "i": "unique index"}[key.kind]
        if key.kind == "x":
            ok = any(c == "scope" and op == "=" for c, op in zip(key.columns, key.operators))
        else:
            ok = "scope" in key.columns
        if not ok:
            out.append(Finding("K1", f"{key.table} {key.name}".strip(),
                               f"{what} ({', '.join(key.columns)}) does not include scope"
                               + (" WITH =" if key.kind == "x" else "")))
    return out


# -- W1 ------------------------------------------------------------------------------------------


def check_shard_expressions(pkg: Package) -> list[Finding]:
    """W1: a WHEN clause or a column default of a Citus table reads no Citus table (through a call)."""
    out = []
    reads = transitive_reads(pkg)
    exprs = [(f"trigger {t.name} ON {t.table}", "WHEN", t.table, t.when) for t in pkg.triggers if t.when]
    exprs += [(f"{table}.{column}", "DEFAULT", table, tree) for table, column, tree in pkg.defaults]
    for where, what, table, tree in exprs:
        if pkg.place(table) not in CITUS:
            continue
        for callee in sorted(dna_calls(tree)):
            hit = _citus(pkg, reads.get(callee, ()))
            if hit:
                out.append(Finding("W1", where, f"{what} calls {callee}(), which reads {sorted(hit)}"))
    return out


# -- Q1 ------------------------------------------------------------------------------------------


def _callees(pkg: Package) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for fn in pkg.all_functions():
        for st in fn.statements:
            out.setdefault(fn.name, set()).update(dna_calls(st.tree))
    return out


def worker_functions(pkg: Package) -> dict[str, str]:
    """Function -> why it runs on a worker: a trigger function of a Citus table, a function its WHEN
    clause or a column default of a Citus table calls, a delegated verb, or a function one of those
    calls (transitively)."""
    why: dict[str, str] = {}
    for t in pkg.triggers:
        if pkg.place(t.table) in CITUS:
            why.setdefault(t.function, f"trigger {t.name} ON {t.table}")
            for c in dna_calls(t.when or {}):
                why.setdefault(c, f"the WHEN clause of trigger {t.name} ON {t.table}")
    for table, column, tree in pkg.defaults:
        if pkg.place(table) in CITUS:
            for c in dna_calls(tree):
                why.setdefault(c, f"the default of {table}.{column}")
    for name in sorted(pkg.delegated):
        why.setdefault(name, f"delegated verb {name}")
    callees = _callees(pkg)
    todo = list(why)
    while todo:
        name = todo.pop()
        for c in sorted(callees.get(name, ())):
            if c not in why:
                why[c] = f"{why[name]}, through {name}"
                todo.append(c)
    return why


def _sequence_of(call: dict) -> str | None:
    args = call.get("args") or []
    if not args:
        return None
    node = args[0]
    while "TypeCast" in node:
        node = node["TypeCast"]["arg"]
    value = node.get("A_Const", {}).get("sval", {}).get("sval")
    if value is None:
        return None
    return value if "." in value else f"public.{value}"


def propagated_sequences(pkg: Package) -> set[str]:
    """The sequences a column default of a Citus table uses: Citus creates those on every node."""
    out = set()
    for table, _column, tree in pkg.defaults:
        if pkg.place(table) in CITUS:
            for key, value, _ in _walk(tree):
                if key == "FuncCall" and _funcname(value).split(".")[-1] in SEQUENCE_FUNCTIONS:
                    seq = _sequence_of(value)
                    if seq:
                        out.add(seq)
    return out


def check_worker_sequences(pkg: Package) -> list[Finding]:
    """Q1: no coordinator-only sequence is used from a function that runs on a worker."""
    out = []
    why = worker_functions(pkg)
    everywhere = propagated_sequences(pkg)
    for fn in pkg.all_functions():
        if fn.name not in why:
            continue
        for st in fn.statements:
            for key, value, _ in _walk(st.tree):
                if key != "FuncCall" or _funcname(value).split(".")[-1] not in SEQUENCE_FUNCTIONS:
                    continue
                seq = _sequence_of(value)
                if seq is None or seq not in everywhere:
                    out.append(Finding("Q1", f"{fn.name} line {st.line}" + (" (dynamic)" if st.dynamic else ""),
                                       f"{_funcname(value)}({seq or '?'}) runs on a worker ({why[fn.name]}); Citus "
                                       f"creates only the sequences of Citus tables' column defaults on every node"))
    return sorted(set(out), key=str)


# -- T1 ------------------------------------------------------------------------------------------


def check_transition_tables(pkg: Package) -> list[Finding]:
    """T1: no statement that Citus plans (it names a Citus table) reads a transition table."""
    out = []
    transitions: dict[str, set[str]] = {}
    for t in pkg.triggers:
        if t.transitions and pkg.place(t.table) in CITUS:
            transitions.setdefault(t.function, set()).update(t.transitions)
    for fn in pkg.all_functions():
        names = transitions.get(fn.name)
        if not names:
            continue
        for st in fn.statements:
            read = {v["relname"] for k, v, _ in _walk(st.tree)
                    if k == "RangeVar" and v.get("schemaname") is None and v["relname"] in names}
            hit = _citus(pkg, tables(st.tree))
            if read and hit:
                out.append(Finding("T1", f"{fn.name} line {st.line}" + (" (dynamic)" if st.dynamic else ""),
                                   f"reads transition table(s) {sorted(read)} in a statement on {sorted(hit)}"))
    return sorted(set(out), key=str)


CHECKS = {"keys": check_keys, "shard_expressions": check_shard_expressions,
          "worker_sequences": check_worker_sequences, "transition_tables": check_transition_tables}


# -- BR: every CASE branch evaluated once ----------------------------------------------------------


class _Cases(Visitor):
    def __init__(self):
        self.parts: list[str] = []

    def visit_CaseExpr(self, _parent, node):
        for w in node.args:
            self.parts += [RawStream()(w.expr), RawStream()(w.result)]
        if node.defresult is not None:
            self.parts.append(RawStream()(node.defresult))


def _pg_type(name: str) -> str:
    return '"char"' if name == "char" else name


def branches(definition: str) -> tuple[list[str], dict[str, str]]:
    """The WHEN conditions and results of every CASE of a CREATE FUNCTION text (SQL or PL/pgSQL),
    deparsed, and the names they may read with their types (arguments and declared variables)."""
    create = pglast.parse_sql(definition)[0].stmt
    names = {p.name: RawStream()(p.argType) for p in create.parameters or () if p.name}
    lang = next(o.arg.sval for o in create.options if o.defname == "language")
    body = next(o.arg[0].sval for o in create.options if o.defname == "as")
    texts = []
    if lang == "plpgsql":
        tree = pglast.parse_plpgsql(definition)
        for datum in tree[0]["PLpgSQL_function"]["datums"]:
            var = datum.get("PLpgSQL_var")
            if var and var["refname"] != "found" and not var["refname"].startswith("$"):
                names[var["refname"]] = _pg_type(var["datatype"]["PLpgSQL_type"]["typname"])

        def visit(node):
            if isinstance(node, dict):
                for key, value in node.items():
                    if key == "PLpgSQL_expr":
                        q = value["query"]
                        texts.append(q if value.get("parseMode", 0) == 0 else "SELECT " + q.split(":=", 1)[-1])
                    else:
                        visit(value)
            elif isinstance(node, list):
                for item in node:
                    visit(item)
        visit(tree)
    else:
        texts.append(body)
    cases = _Cases()
    for text in texts:
        try:
            cases(pglast.parse_sql(text))
        except pglast.parser.ParseError:
            continue
    return cases.parts, names


def check_branches(conn, definitions: dict[str, str]) -> list[Finding]:
    """BR: each part of every CASE of each function (name -> CREATE FUNCTION text) evaluated once on
    ``conn`` with its names bound to typed NULLs; a part that fails is a finding (its SQLSTATE)."""
    out = []
    for name, definition in definitions.items():
        parts, names = branches(definition)
        bound = ", ".join(f'NULL::{t} AS "{n}"' for n, t in names.items()) or "1 AS dna_nothing"
        for i, part in enumerate(parts):
            try:
                with conn.transaction():
                    conn.execute(f"SELECT ({part}) IS NULL FROM (SELECT {bound}) AS v")
            except psycopg.Error as e:
                out.append(Finding("BR", name, f"CASE part {i + 1} {part!r}: {e.sqlstate} {e.diag.message_primary}"))
    return out


def definitions_of(conn, names=BRANCHED) -> dict[str, str]:
    """name -> pg_get_functiondef of every overload (name#oid when overloaded) in a database."""
    rows = conn.execute("SELECT 'dna.' || p.proname, p.oid, pg_get_functiondef(p.oid) FROM pg_proc AS p "
                        "WHERE p.pronamespace = 'dna'::regnamespace AND 'dna.' || p.proname = ANY (%s) ORDER BY 1, 2",
                        (list(names),)).fetchall()
    return {f"{n}#{oid}" if [r[0] for r in rows].count(n) > 1 else n: d for n, oid, d in rows}
