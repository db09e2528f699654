"""The Citus guard rails' checker (tests/test_citus_guard_rails.py runs it): finds, in the SQL package,
the patterns a Citus coordinator refuses or silently answers differently for
(../shared/research/citus-probe.md, B1-B9 and S1-S4). Pure Python over PostgreSQL's own parser
(pglast: libpg_query for SQL, its PL/pgSQL parser for function bodies); no Citus needed.

The model it checks (``Package``) is built either from a migrated database (``from_database``:
pg_proc, pg_policies and dna.distribution_plan() are the ground truth) or from SQL text
(``from_sql``: CREATE FUNCTION / CREATE POLICY statements, for the self-tests' snippets). Each
``check_*`` returns ``Finding``s; a finding names the pattern, the function (or policy, or revision)
and what was seen.

Patterns:
  B1   a sublink in a row-level-security policy of a Citus table;
  B5c  a policy of a Citus table calling a function that (transitively) reads a Citus table;
  B3   a non-IMMUTABLE function (or CURRENT_TIMESTAMP & co.) in ``ON CONFLICT DO UPDATE SET/WHERE``;
  B6   ``INSERT … ON CONFLICT`` into a reference table;
  B4   a LANGUAGE sql set-returning function whose body reads a Citus table;
  B5   a statement that touches a Citus table and calls a dna function that (transitively) reads
       one (trigger functions are exempt: Citus runs nested reads from triggers);
  B7   UPDATE/DELETE of a distributed (scope-keyed) table whose WHERE pins no scope;
  B9   an ``op.execute`` of a revision from 0018 on that holds more than one statement;
  S3   a correlated ``a.scope = b.scope`` inside a sublink under an OR;
  S2   ``set_config('dna.…')`` whose setting a trigger (transitively) reads with current_setting.
Dynamic SQL: see tests/citus_guard_model.py.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pglast

from citus_guard_model import (CITUS, DYNAMIC, QUERY_LEVELS, Finding, Function, Package, Statement,
                               _column, _funcname, _table, _walk, calls, dna_calls, from_database, from_sql,
                               own_tables, parse, plpgsql_parseable, plpgsql_statements, relation_names, tables)

# The model's API, re-exported: the tests import one module.
__all__ = ["CITUS", "DYNAMIC", "Finding", "Function", "Package", "Statement", "calls", "dna_calls", "from_database",
           "from_sql", "parse", "plpgsql_parseable", "plpgsql_statements", "tables", "CHECKS", "check_policies",
           "check_on_conflict", "check_sql_srfs", "check_nested_reads", "check_unscoped_writes",
           "check_scope_sublinks", "check_session_settings", "transitive_reads", "revision_sources",
           "check_revision_source", "count_statements"]


# -- reads, transitively ---------------------------------------------------------------------------


def transitive_reads(pkg: Package) -> dict[str, set[str]]:
    """Function name -> the tables it and every dna function it calls name (all overloads)."""
    direct: dict[str, set[str]] = {}
    callees: dict[str, set[str]] = {}
    for fn in pkg.all_functions():
        for st in fn.statements:
            direct.setdefault(fn.name, set()).update(tables(st.tree))
            callees.setdefault(fn.name, set()).update(dna_calls(st.tree))
    reads = {name: set(ts) for name, ts in direct.items()}
    changed = True
    while changed:
        changed = False
        for name, cs in callees.items():
            for c in cs:
                extra = reads.get(c, set()) - reads.setdefault(name, set())
                if extra:
                    reads[name] |= extra
                    changed = True
    return reads


def _citus_tables(pkg: Package, names) -> set[str]:
    return {t for t in names if pkg.place(t) in CITUS}


# -- the checks -------------------------------------------------------------------------------------


def check_policies(pkg: Package) -> list[Finding]:
    """B1 and B5c, on the policies of tables that become Citus tables."""
    out = []
    reads = transitive_reads(pkg)
    for table, name, expr, tree in pkg.policies:
        if pkg.place(table) not in CITUS:
            continue                                        # a per-node or coordinator-local table
        if any(k == "SubLink" for k, _v, _a in _walk(tree)):
            out.append(Finding("B1", f"policy {name} ON {table}", f"sublink in {expr!r}"))
        for callee in sorted(dna_calls(tree)):
            hit = _citus_tables(pkg, reads.get(callee, ()))
            if hit:
                out.append(Finding("B5c", f"policy {name} ON {table}",
                                   f"{callee}() reads Citus table(s) {sorted(hit)}"))
    return out


def _not_immutable(pkg: Package, node) -> list[str]:
    bad = []
    for key, value, _ in _walk(node):
        if key == "FuncCall":
            name = _funcname(value).split(".")[-1]
            if pkg.volatility.get(name, "v") != "i":
                bad.append(f"{_funcname(value)}()")
        elif key == "SQLValueFunction":
            bad.append(value["op"].removeprefix("SVFOP_"))
        elif key == "SubLink":
            bad.append("a sublink")
    return bad


def check_on_conflict(pkg: Package) -> list[Finding]:
    """B3 and B6."""
    out = []
    for fn in pkg.all_functions():
        for st in fn.statements:
            for key, value, _ in _walk(st.tree):
                if key != "InsertStmt" or "onConflictClause" not in value:
                    continue
                target = _table(value["relation"]) or value["relation"]["relname"]
                where = f"{fn.name} line {st.line}"
                clause = value["onConflictClause"]
                if pkg.place(target) == "reference":
                    out.append(Finding("B6", where, f"INSERT … ON CONFLICT into reference table {target}"))
                if clause.get("action") == "ONCONFLICT_UPDATE" and pkg.place(target) in CITUS:
                    bad = _not_immutable(pkg, {"t": clause.get("targetList", []), "w": clause.get("whereClause", {})})
                    if bad:
                        out.append(Finding("B3", where, f"DO UPDATE on {target} uses {', '.join(sorted(set(bad)))}"))
    return out


def check_sql_srfs(pkg: Package) -> list[Finding]:
    """B4."""
    out = []
    for fn in pkg.all_functions():
        if fn.lang == "sql" and fn.retset:
            hit = _citus_tables(pkg, set().union(*(tables(s.tree) for s in fn.statements)) if fn.statements else set())
            if hit:
                out.append(Finding("B4", fn.name, f"LANGUAGE sql set-returning function reads {sorted(hit)}"))
    return out


def check_nested_reads(pkg: Package) -> list[Finding]:
    """B5: a call of a dna function that (transitively) reads a Citus table, made from a query level
    (or a sublink of one) that scans a Citus table itself: Citus pushes that level to a shard, and
    the call's own reads would be distributed queries from inside a shard query. A call whose
    enclosing levels scan no Citus table (a PERFORM, a CTE or sublink over a function only) runs
    where the statement runs, on the coordinator or in the delegated call."""
    out = []
    reads = transitive_reads(pkg)
    for fn in pkg.all_functions():
        if fn.trigger:
            continue
        for st in fn.statements:
            for key, value, anc in _walk(st.tree):
                if key != "FuncCall" or not _funcname(value).startswith("dna."):
                    continue
                callee = _funcname(value)
                hit = _citus_tables(pkg, reads.get(callee, ()))
                if not hit:
                    continue
                scanned = set()
                for k, v in list(anc) + [next(iter(st.tree.items()))]:
                    if k in QUERY_LEVELS:
                        scanned |= _citus_tables(pkg, own_tables(k, v))
                if scanned:
                    out.append(Finding("B5", f"{fn.name} line {st.line}" + (" (dynamic)" if st.dynamic else ""),
                                       f"a query on {sorted(scanned)} calls {callee}(), which reads {sorted(hit)}"))
    return sorted(set(out), key=str)


def _conjuncts(node):
    if not node:
        return []
    if "BoolExpr" in node and node["BoolExpr"]["boolop"] == "AND_EXPR":
        return [c for a in node["BoolExpr"]["args"] for c in _conjuncts(a)]
    return [node]


def _pins_scope(where, alias: str | None, table: str, relations: set[str]) -> bool:
    """A top-level conjunct ``[alias.]scope = <value>`` (or ``= ANY``/``IN``), where the value is no
    column of another relation of the statement (``relations``; ``NEW.scope`` or a loop record's
    field is a value)."""
    names = {alias, table.split(".")[-1]} - {None}
    for c in _conjuncts(where):
        e = c.get("A_Expr")
        if not e or e.get("kind") not in ("AEXPR_OP", "AEXPR_OP_ANY", "AEXPR_IN"):
            continue
        if e.get("name", [{}])[0].get("String", {}).get("sval") != "=":
            continue
        for side, other in ((e.get("lexpr"), e.get("rexpr")), (e.get("rexpr"), e.get("lexpr"))):
            col = _column(side)
            if not col or col[-1] != "scope" or (len(col) == 2 and col[0] not in names) or len(col) > 2:
                continue
            o = _column(other)
            if o and len(o) == 2 and o[0] not in names and o[0] in relations:
                continue                                     # joined to another relation's scope
            if o and len(o) == 1 and len(col) == 1:
                continue                                     # scope = scope: a tautology
            return True
    return False


def check_unscoped_writes(pkg: Package) -> list[Finding]:
    """B7: UPDATE/DELETE of a distributed table without a scope in its WHERE."""
    out = []
    for fn in pkg.all_functions():
        for st in fn.statements:
            for key, value, _ in _walk(st.tree):
                if key not in ("UpdateStmt", "DeleteStmt"):
                    continue
                rv = value["relation"]
                target = _table(rv)
                if not target or pkg.place(target) not in ("distributed", "dynamic"):
                    continue
                alias = rv.get("alias", {}).get("aliasname")
                if not _pins_scope(value.get("whereClause"), alias, target, relation_names(st.tree)):
                    verb = "UPDATE" if key == "UpdateStmt" else "DELETE"
                    out.append(Finding("B7", f"{fn.name} line {st.line}" + (" (dynamic)" if st.dynamic else ""),
                                       f"{verb} of {target} does not pin scope"))
    return sorted(set(out), key=str)


def check_scope_sublinks(pkg: Package) -> list[Finding]:
    """S3: a correlated ``a.scope = b.scope`` in a sublink under an OR."""
    out = []
    for fn in pkg.all_functions():
        for st in fn.statements:
            for key, value, anc in _walk(st.tree):
                if key != "A_Expr" or value.get("name", [{}])[0].get("String", {}).get("sval") != "=":
                    continue
                left, right = _column(value.get("lexpr")), _column(value.get("rexpr"))
                if not (left and right and len(left) == 2 and len(right) == 2 and left[1] == right[1] == "scope"
                        and left[0] != right[0] and {left[0], right[0]} <= relation_names(st.tree)):
                    continue
                kinds = [k for k, _v in anc]
                under_or = any(k == "BoolExpr" and v["boolop"] == "OR_EXPR" for k, v in anc[:max(
                    (i for i, k in enumerate(kinds) if k == "SubLink"), default=-1) + 1])
                if "SubLink" in kinds and under_or:
                    out.append(Finding("S3", f"{fn.name} line {st.line}",
                                       f"correlated {'.'.join(left)} = {'.'.join(right)} in a sublink under OR"))
    return sorted(set(out), key=str)


def _setting_calls(tree, fname: str) -> set[str]:
    keys = set()
    for key, value, _ in _walk(tree):
        if key == "FuncCall" and _funcname(value).split(".")[-1] == fname and value.get("args"):
            first = value["args"][0]
            if "A_Const" in first and "sval" in first["A_Const"]:
                keys.add(first["A_Const"]["sval"]["sval"])
    return keys


def check_session_settings(pkg: Package) -> list[Finding]:
    """S2: a dna.* setting written with set_config and read by a trigger (directly or through calls)."""
    reads_setting: dict[str, set[str]] = {}
    callees: dict[str, set[str]] = {}
    for fn in pkg.all_functions():
        for st in fn.statements:
            reads_setting.setdefault(fn.name, set()).update(_setting_calls(st.tree, "current_setting"))
            callees.setdefault(fn.name, set()).update(dna_calls(st.tree))

    def read_by(name, seen=()):
        got = set(reads_setting.get(name, ()))
        for c in callees.get(name, ()):
            if c not in seen:
                got |= read_by(c, seen + (name,))
        return got
    trigger_reads = set()
    for fn in pkg.all_functions():
        if fn.trigger:
            trigger_reads |= read_by(fn.name)
    out = []
    for fn in pkg.all_functions():
        for st in fn.statements:
            for key in sorted(_setting_calls(st.tree, "set_config")):
                if key.startswith("dna.") and key in trigger_reads:
                    out.append(Finding("S2", f"{fn.name} line {st.line}",
                                       f"set_config({key!r}) is read by a trigger: it does not reach the workers"))
    return sorted(set(out), key=str)


CHECKS = {"policies": check_policies, "on_conflict": check_on_conflict, "sql_srfs": check_sql_srfs,
          "nested_reads": check_nested_reads, "unscoped_writes": check_unscoped_writes,
          "scope_sublinks": check_scope_sublinks, "session_settings": check_session_settings}


# -- B9: the revisions' op.execute strings ------------------------------------------------------------


def revision_sources(versions: Path, first: int = 18) -> list[Path]:
    return sorted(p for p in versions.glob("[0-9][0-9][0-9][0-9]_*.py") if int(p.name[:4]) >= first)


def check_revision_source(path: Path, source: str | None = None) -> list[Finding]:
    """B9, statically: every ``op.execute(...)`` argument of a revision must be one statement. A string
    (or f-string, placeholders filled) is split by the parser; ``read_sql(...)`` (a whole file) and
    ``"…".join(...)`` are refused; any other expression (a name, ``statement`` from read_statements)
    is left to the runtime check."""
    source = source if source is not None else path.read_text(encoding="utf-8")
    out = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "execute"
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "op" and node.args):
            continue
        arg = node.args[0]
        where = f"{path.name} line {node.lineno}"
        if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Name) and arg.func.id in ("read_sql", "text"):
            if arg.func.id == "read_sql":
                out.append(Finding("B9", where, "op.execute(read_sql(...)) runs a whole file in one string"))
            continue
        if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and arg.func.attr == "join":
            out.append(Finding("B9", where, "op.execute of a joined string (several statements in one)"))
            continue
        text = None
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            text = arg.value
        elif isinstance(arg, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "dna_dynamic" for v in arg.values)
        if text is not None and count_statements(text) > 1:
            out.append(Finding("B9", where, f"op.execute of {count_statements(text)} statements in one string"))
    return out


def count_statements(sql: str) -> int:
    return len([s for s in pglast.split(sql) if s.strip()])
