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
Dynamic SQL (EXECUTE of a format() or a concatenation) is checked where its template parses once
its placeholders are filled (``%I``/``%s`` → an identifier ``dna_dynamic``, ``%L`` → a literal);
a table named by a placeholder counts as a distributed table.
"""
from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pglast
from pglast import parser

DYNAMIC = "dna.dna_dynamic"
CITUS = ("reference", "distributed", "dynamic")
# Volatility of the functions a self-test snippet calls (a database model reads pg_proc instead).
SNIPPET_VOLATILITY = {"now": "s", "clock_timestamp": "v", "random": "v", "coalesce": "i", "lower": "i",
                      "greatest": "i", "least": "i", "excluded": "i", "current_setting": "s", "set_config": "v"}


@dataclass(frozen=True)
class Finding:
    pattern: str
    where: str
    detail: str

    def __str__(self) -> str:
        return f"{self.pattern} {self.where}: {self.detail}"


@dataclass
class Statement:
    tree: dict                  # the parse tree (pglast JSON) of one statement
    line: int                   # line in the function body (PL/pgSQL), 0 for SQL functions
    dynamic: bool = False       # an EXECUTE whose template was filled in


@dataclass
class Function:
    name: str                   # 'dna.search'
    lang: str                   # 'sql' | 'plpgsql'
    retset: bool = False
    trigger: bool = False
    statements: list[Statement] = field(default_factory=list)
    unchecked: int = 0          # dynamic statements whose template could not be parsed


@dataclass
class Package:
    functions: dict[str, list[Function]]           # name -> overloads
    policies: list[tuple[str, str, str, dict]]     # (table, policy name, expression text, its parse tree)
    placement: dict[str, str]                      # 'dna.<table>' -> reference|distributed|per_node|local
    volatility: dict[str, str]                     # function name (no schema) -> 'i'|'s'|'v' (the least immutable)

    def all_functions(self):
        for overloads in self.functions.values():
            yield from overloads

    def place(self, table: str) -> str:
        if table == DYNAMIC:
            return "dynamic"
        return self.placement.get(table, "unknown")


# -- parsing -----------------------------------------------------------------------------------


def parse(sql: str) -> list[dict]:
    """The statements of ``sql`` as pglast JSON trees (``{"SelectStmt": {...}}``)."""
    return [s["stmt"] for s in json.loads(parser.parse_sql_json(sql)).get("stmts", [])]


def _expr_sql(query: str, mode: int) -> str:
    if mode == 0:                                   # a whole statement (execsql, FOR … IN query, RETURN QUERY)
        return query
    if mode in (3, 4, 5) and ":=" in query:         # assignment: target := expression
        return "SELECT " + query.split(":=", 1)[1]
    return "SELECT " + query


VARIANTS = 16          # at most this many texts per EXECUTE (a variable assigned in several branches)


def _fill(fmt: str, values: list[str | None]) -> str:
    """format()'s placeholders filled: %s with the argument's text when known (a string, or a
    variable holding one), else with an identifier; %I with an identifier; %L with a literal."""
    position = 0

    def one(m):
        nonlocal position
        if m.group(0) == "%%":
            return "%"
        index = int(m.group(1)[:-1]) - 1 if m.group(1) else position
        position = index + 1
        value = values[index] if index < len(values) else None
        if m.group(2) == "L":
            return "'dynamic'"
        if m.group(2) == "s" and value is not None:
            return value
        return "dna_dynamic"
    return re.sub(r"%%|%(\d+\$)?([IsL])", one, fmt)


def _product(options: list[list[str | None]]) -> list[list[str | None]]:
    out: list[list[str | None]] = [[]]
    for opts in options:
        out = [prefix + [o] for prefix in out for o in opts][:VARIANTS]
    return out


def _texts(node, env: dict[str, list[str]]) -> list[str | None]:
    """The SQL texts a PL/pgSQL string expression may build, as far as they are known: string
    constants, format(), concatenations, casts, and variables assigned such expressions (``env``,
    every branch's text); [None] when unknown. An unknown part of a concatenation becomes the
    identifier ``dna_dynamic``."""
    if "A_Const" in node:
        return [node["A_Const"].get("sval", {}).get("sval")]
    if "ColumnRef" in node:
        col = _column(node)
        return env.get(col[-1], [None]) if col and len(col) == 1 else [None]
    if "FuncCall" in node and _funcname(node["FuncCall"]) in ("format", "pg_catalog.format"):
        args = node["FuncCall"].get("args", [])
        if not args:
            return [None]
        combos = _product([_texts(a, env) for a in args])
        return [None if c[0] is None else _fill(c[0], c[1:]) for c in combos]
    if "A_Expr" in node and node["A_Expr"].get("name", [{}])[0].get("String", {}).get("sval") == "||":
        out = []
        for left, right in _product([_texts(node["A_Expr"]["lexpr"], env), _texts(node["A_Expr"]["rexpr"], env)]):
            out.append(None if left is None and right is None else
                       (left if left is not None else " dna_dynamic ") + (right if right is not None else " dna_dynamic "))
        return out
    if "TypeCast" in node:
        return _texts(node["TypeCast"]["arg"], env)
    if "CaseExpr" in node:                           # every branch's text
        case = node["CaseExpr"]
        branches = [w["CaseWhen"]["result"] for w in case.get("args", [])] + ([case["defresult"]] if "defresult" in case else [])
        return [t for b in branches for t in _texts(b, env)][:VARIANTS] or [None]
    if "CoalesceExpr" in node:
        return [t for a in node["CoalesceExpr"]["args"] for t in _texts(a, env)][:VARIANTS] or [None]
    return [None]


def _templates(tree: dict, env: dict[str, list[str]]) -> list[str]:
    """The texts an EXECUTE may run, placeholders filled (see ``_texts``); [] when unknown."""
    targets = tree.get("SelectStmt", {}).get("targetList", [])
    if len(targets) != 1:
        return []
    return list(dict.fromkeys(t for t in _texts(targets[0]["ResTarget"]["val"], env) if t is not None))


def _string_env(fn_tree) -> dict[str, list[str]]:
    """Variable -> every SQL text assigned to it (declarations' defaults and ``:=``), so that an
    EXECUTE of a query built in pieces (dna.search's lanes) is checked whole, branch by branch."""
    assigns = []

    def visit(node):
        if isinstance(node, dict):
            if "PLpgSQL_stmt_assign" in node:
                q = node["PLpgSQL_stmt_assign"]["expr"]["PLpgSQL_expr"]["query"]
                if ":=" in q:
                    target, expr = q.split(":=", 1)
                    assigns.append((target.strip(), expr))
            if "PLpgSQL_var" in node and "default_val" in node["PLpgSQL_var"]:
                assigns.append((node["PLpgSQL_var"]["refname"], node["PLpgSQL_var"]["default_val"]["PLpgSQL_expr"]["query"]))
            for v in node.values():
                visit(v)
        elif isinstance(node, list):
            for v in node:
                visit(v)
    visit(fn_tree)
    parsed = []
    for target, expr in assigns:
        try:
            trees = parse("SELECT " + expr)
        except parser.ParseError:
            continue
        if trees:
            parsed.append((target, trees[0]))
    env: dict[str, list[str]] = {}
    for _ in range(3):                                   # texts built from texts
        new: dict[str, list[str]] = {}
        for target, tree in parsed:
            for t in _templates(tree, env):
                if t not in new.setdefault(target, []):
                    new[target].append(t)
        env = {k: v[:VARIANTS] for k, v in new.items()}
    return env


def plpgsql_statements(definition: str) -> tuple[list[Statement], int]:
    """Every SQL statement and expression of a PL/pgSQL function (its CREATE FUNCTION text), parsed;
    and how many dynamic statements could not be."""
    out: list[Statement] = []
    unchecked = 0
    tree = pglast.parse_plpgsql(definition)
    env = _string_env(tree)

    def visit(node, line, dynamic_slot=False):
        nonlocal unchecked
        if isinstance(node, dict):
            line = node.get("lineno", line)
            for key, value in node.items():
                if key == "PLpgSQL_expr":
                    trees = parse(_expr_sql(value["query"], value.get("parseMode", 0)))
                    if dynamic_slot:
                        parsed_any = False
                        for template in (_templates(trees[0], env) if trees else []):
                            try:
                                dyn = parse(template)
                            except parser.ParseError:
                                continue
                            parsed_any = True
                            out.extend(Statement(t, line, dynamic=True) for t in dyn)
                        if not parsed_any:
                            unchecked += 1
                    out.extend(Statement(t, line) for t in trees)
                elif key in ("PLpgSQL_stmt_dynexecute", "PLpgSQL_stmt_dynfors"):
                    for k, v in value.items():
                        visit(v, value.get("lineno", line), dynamic_slot=(k == "query"))
                elif key == "PLpgSQL_stmt_return_query" and "dynquery" in value:
                    for k, v in value.items():
                        visit(v, value.get("lineno", line), dynamic_slot=(k == "dynquery"))
                else:
                    visit(value, line)
        elif isinstance(node, list):
            for item in node:
                visit(item, line, dynamic_slot)

    visit(tree, 0)
    return out, unchecked


def plpgsql_parseable(definition: str) -> str:
    """``definition`` with the types libpg_query's PL/pgSQL parser cannot resolve replaced, in the
    header and the DECLARE section only (statements keep every name): it resolves types of
    pg_catalog and public only ("LookupExplicitNamespace only supports pg_catalog and public"), and
    takes an unknown type for record, so ``vector[]`` becomes the refused ``_record``. A ``dna.*``
    composite becomes record (``text[]`` for an array), an extension's vector type text."""
    m = re.search(r"\bAS\s+(\$\w*\$)", definition)
    head, body = definition[:m.start()], definition[m.start():]
    name_end = head.index("(")

    def types(text: str) -> str:
        text = re.sub(r"\bdna\.\w+(\(\d+\))?\[\]", "text[]", text)
        text = re.sub(r"\bdna\.\w+%ROWTYPE", "record", text)
        return re.sub(r"\b(?:public\.)?(?:vector|halfvec|sparsevec)(\(\d+\))?", "text", text)
    head = head[:name_end] + re.sub(r"\bdna\.\w+", "record", types(head[name_end:]))
    decl, begin, rest = body.partition("\nBEGIN")
    # a declaration: "name [CONSTANT] type ..." at the start of a line; only its type is replaced
    decl = "\n".join(re.sub(r"^(\s*\w+\s+(?:CONSTANT\s+)?)dna\.\w+(?!\s*\()", r"\1record", types(line))
                     if not line.lstrip().startswith("--") else line for line in decl.split("\n"))
    return head + decl + begin + rest


# -- tree helpers ------------------------------------------------------------------------------


def _funcname(call: dict) -> str:
    return ".".join(p["String"]["sval"] for p in call["funcname"])


def _walk(node, ancestors=()):
    """(key, value, ancestors) for every node wrapper {"Kind": {...}} in the tree."""
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(value, dict) and key[:1].isupper():
                yield key, value, ancestors
                yield from _walk(value, ancestors + ((key, value),))
            else:
                yield from _walk(value, ancestors)
    elif isinstance(node, list):
        for item in node:
            yield from _walk(item, ancestors)


def _cte_names(tree) -> set[str]:
    return {v["ctename"] for k, v, _ in _walk(tree) if k == "CommonTableExpr"}


def _table(rv: dict) -> str | None:
    schema, name = rv.get("schemaname"), rv["relname"]
    if schema == "dna" or (schema is None and name.startswith("dna_")):
        return f"dna.{name}"
    return None


QUERY_LEVELS = ("SelectStmt", "UpdateStmt", "DeleteStmt", "InsertStmt")


def relation_names(tree) -> set[str]:
    """The names rows come from in a statement: every range's alias (or table name), every CTE."""
    names = set(_cte_names(tree))
    for key, value, _ in _walk(tree):
        if key == "RangeVar" or (key in ("UpdateStmt", "DeleteStmt", "InsertStmt") and "relation" in value):
            rv = value if key == "RangeVar" else value["relation"]
            names.add(rv.get("alias", {}).get("aliasname") or rv["relname"])
        elif key in ("RangeSubselect", "RangeFunction") and "alias" in value:
            names.add(value["alias"]["aliasname"])
    return names


def own_tables(kind: str, level: dict) -> set[str]:
    """The dna tables one query level scans with it: its FROM, USING and target (joins, derived
    tables) and every table its CTEs read (Citus pushes a CTE over a function down with the query
    that joins it: citus-probe B5b), not those of its sublinks, which Citus plans apart (recursive
    planning) when the level itself scans no Citus table."""
    found = set(tables(level["withClause"])) if level.get("withClause") else set()
    roots = [level.get(k) for k in ("fromClause", "usingClause") if level.get(k)]
    if kind in ("UpdateStmt", "DeleteStmt", "InsertStmt") and "relation" in level:
        roots.append({"RangeVar": level["relation"]})

    def visit(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("SubLink", "CommonTableExpr", "withClause"):
                    continue
                if key == "RangeVar":
                    t = _table(value)
                    if t:
                        found.add(t)
                elif key == "SelectStmt":               # a derived table's query (RangeSubselect)
                    for k in ("fromClause",):
                        visit(value.get(k))
                else:
                    visit(value)
        elif isinstance(node, list):
            for item in node:
                visit(item)
    visit(roots)
    return found


def tables(tree) -> set[str]:
    """The dna tables a statement names (RangeVars; the target of INSERT/UPDATE/DELETE too)."""
    ctes = _cte_names(tree)
    found = set()
    for key, value, _ in _walk(tree):
        rvs = [value] if key == "RangeVar" else [value["relation"]] if key in (
            "InsertStmt", "UpdateStmt", "DeleteStmt", "MergeStmt") and "relation" in value else []
        for rv in rvs:
            t = _table(rv)
            if t and not (rv.get("schemaname") is None and rv["relname"] in ctes):
                found.add(t)
    return found


def calls(tree) -> set[str]:
    """The functions a statement calls, qualified names as written ('dna.search', 'now')."""
    return {_funcname(v) for k, v, _ in _walk(tree) if k == "FuncCall"}


def dna_calls(tree) -> set[str]:
    return {c for c in calls(tree) if c.startswith("dna.")}


# -- building the model --------------------------------------------------------------------------


def _function_from_create(stmt: dict, definition: str) -> Function:
    create = stmt["CreateFunctionStmt"]
    name = _funcname(create)
    opts = {o["DefElem"]["defname"]: o["DefElem"].get("arg") for o in create.get("options", [])}
    lang = opts["language"]["String"]["sval"]
    ret = create.get("returnType", {})
    retset = bool(ret.get("setof")) or any(p["FunctionParameter"].get("mode") == "FUNC_PARAM_TABLE"
                                          for p in create.get("parameters", []))
    trigger = [n["String"]["sval"] for n in ret.get("names", [])][-1:] == ["trigger"]
    body = opts["as"]["List"]["items"][0]["String"]["sval"]
    fn = Function(name, lang, retset, trigger)
    if lang == "plpgsql":
        fn.statements, fn.unchecked = _plpgsql(definition)
    elif lang == "sql":
        fn.statements = [Statement(t, 0) for t in parse(body)]
    return fn


def _plpgsql(definition: str) -> tuple[list[Statement], int]:
    try:
        return plpgsql_statements(definition)
    except parser.ParseError:
        return plpgsql_statements(plpgsql_parseable(definition))


def from_sql(sql: str, placement: dict[str, str], volatility: dict[str, str] | None = None) -> Package:
    """A model of the CREATE FUNCTION and CREATE POLICY statements in ``sql`` (self-tests)."""
    functions: dict[str, list[Function]] = {}
    policies = []
    for piece in pglast.split(sql):
        for stmt in parse(piece):
            if "CreateFunctionStmt" in stmt:
                fn = _function_from_create(stmt, piece)
                functions.setdefault(fn.name, []).append(fn)
            elif "CreatePolicyStmt" in stmt:
                p = stmt["CreatePolicyStmt"]
                table = _table(p["table"]) or p["table"]["relname"]
                for key in ("qual", "with_check"):
                    if key in p:
                        policies.append((table, p["policy_name"], f"{key} of the snippet", {key: p[key]}))
    vol = dict(SNIPPET_VOLATILITY)
    vol.update(volatility or {})
    return Package(functions, policies, dict(placement), vol)


def from_database(conn) -> Package:
    """The model of a migrated database: every function of schema dna (pg_proc; PL/pgSQL bodies from
    pg_get_functiondef), every policy (pg_policies) and dna.distribution_plan()."""
    functions: dict[str, list[Function]] = {}
    rows = conn.execute("""
        SELECT 'dna.' || p.proname, l.lanname, p.proretset, p.prorettype = 'trigger'::regtype, p.prosrc,
               pg_get_functiondef(p.oid)
        FROM pg_proc AS p JOIN pg_language AS l ON l.oid = p.prolang
        WHERE p.pronamespace = 'dna'::regnamespace AND p.prokind = 'f'
        ORDER BY p.proname, p.oid""").fetchall()
    for name, lang, retset, trigger, src, definition in rows:
        fn = Function(name, lang, retset, trigger)
        if lang == "plpgsql":
            fn.statements, fn.unchecked = _plpgsql(definition)
        elif lang == "sql":
            fn.statements = [Statement(t, 0) for t in parse(src)]
        functions.setdefault(name, []).append(fn)
    policies = [(f"{s}.{t}", n, expr, parse("SELECT " + expr)[0]) for s, t, n, q, w in conn.execute(
        "SELECT schemaname, tablename, policyname, qual, with_check FROM pg_policies WHERE schemaname = 'dna' "
        "ORDER BY tablename, policyname").fetchall() for expr in (q, w) if expr]
    placement = {t: p for t, p in conn.execute("SELECT tbl::text, placement FROM dna.distribution_plan()").fetchall()}
    volatility = {n: v for n, v in conn.execute(
        "SELECT proname, max(provolatile) FROM pg_proc GROUP BY proname").fetchall()}   # 'v' > 's' > 'i'
    return Package(functions, policies, placement, volatility)


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


def _column(node) -> list[str] | None:
    if node and "ColumnRef" in node:
        return [f["String"]["sval"] for f in node["ColumnRef"]["fields"] if "String" in f]
    return None


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
