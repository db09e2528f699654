"""The model the Citus guard rails check (tests/citus_guard.py has the checks): the SQL package's
functions, each statement of their bodies parsed by PostgreSQL's own parser (pglast: libpg_query for
SQL, its PL/pgSQL parser for function bodies), its policies and where each table goes on Citus.

Built from a migrated database (``from_database``: pg_proc, pg_policies and dna.distribution_plan()
are the ground truth) or from SQL text (``from_sql``: CREATE FUNCTION / CREATE POLICY statements, for
the self-tests' snippets). Dynamic SQL (EXECUTE of a format() or a concatenation, also of texts built
in variables, branch by branch) is parsed where its template parses once its placeholders are filled
(``%I``/``%s`` of an unknown value → the identifier ``dna_dynamic``, ``%L`` → a literal); a table named
by a placeholder counts as a distributed table.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
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
    definition: str = ""        # the CREATE FUNCTION text


@dataclass(frozen=True)
class Key:
    table: str                  # 'dna.dna_search_receipts'
    name: str                   # constraint or index name ('' in a snippet without one)
    kind: str                   # 'p' primary key, 'u' unique, 'x' exclusion, 'i' unique index
    columns: tuple[str, ...]    # the key's columns ('' for an expression)
    operators: tuple[str, ...] = ()   # an exclusion constraint's operator per column


@dataclass(frozen=True)
class Trigger:
    table: str
    name: str
    function: str               # 'dna.bm25_sync'
    when: dict | None = None    # the WHEN clause's parse tree
    transitions: tuple[str, ...] = ()   # REFERENCING OLD/NEW TABLE names


@dataclass
class Package:
    functions: dict[str, list[Function]]           # name -> overloads
    policies: list[tuple[str, str, str, dict]]     # (table, policy name, expression text, its parse tree)
    placement: dict[str, str]                      # 'dna.<table>' -> reference|distributed|per_node|local
    volatility: dict[str, str]                     # function name (no schema) -> 'i'|'s'|'v' (the least immutable)
    keys: list[Key] = field(default_factory=list)  # PRIMARY KEY / UNIQUE / EXCLUDE / unique indexes
    triggers: list[Trigger] = field(default_factory=list)
    defaults: list[tuple[str, str, dict]] = field(default_factory=list)   # (table, column, expression tree)
    delegated: set[str] = field(default_factory=set)   # verbs dna.distribute delegates to a worker

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
    constants, format(), concatenations, casts, dna.shard_explained's statement, and variables assigned such expressions (``env``,
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
    if "FuncCall" in node and _funcname(node["FuncCall"]) == "dna.shard_explained":
        # dna.shard_explained(statement, tbl, scope): the statement as given, or the same text over tbl's
        # shard on this node (a plain table there): checked as given
        args = node["FuncCall"].get("args", [])
        return _texts(args[0], env) if args else [None]
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


def _column(node) -> list[str] | None:
    if node and "ColumnRef" in node:
        return [f["String"]["sval"] for f in node["ColumnRef"]["fields"] if "String" in f]
    return None


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
    fn = Function(name, lang, retset, trigger, definition=definition)
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


def _names(items) -> tuple[str, ...]:
    return tuple(i["String"]["sval"] for i in items or [])


def _key_of(table: str, con: dict, column: str | None = None) -> Key | None:
    kind = {"CONSTR_PRIMARY": "p", "CONSTR_UNIQUE": "u", "CONSTR_EXCLUSION": "x"}.get(con.get("contype"))
    if not kind:
        return None
    if kind == "x":
        pairs = [e["List"]["items"] for e in con.get("exclusions", [])]
        cols = tuple(p[0]["IndexElem"].get("name", "") for p in pairs)
        ops = tuple(_names(p[1]["List"]["items"])[-1] for p in pairs)
        return Key(table, con.get("conname", ""), kind, cols, ops)
    return Key(table, con.get("conname", ""), kind, (column,) if column else _names(con.get("keys")))


def _table_parts(stmt: dict) -> tuple[list[Key], list[Trigger], list[tuple[str, str, dict]]]:
    """Keys, triggers and column defaults a CREATE TABLE / ALTER TABLE / CREATE INDEX / CREATE TRIGGER
    statement declares (the self-tests' snippets)."""
    keys, triggers, defaults = [], [], []
    if "CreateStmt" in stmt:
        c = stmt["CreateStmt"]
        table = _table(c["relation"]) or c["relation"]["relname"]
        for elt in c.get("tableElts", []):
            if "ColumnDef" in elt:
                col = elt["ColumnDef"]
                for con in (x["Constraint"] for x in col.get("constraints", [])):
                    if con["contype"] == "CONSTR_DEFAULT":
                        defaults.append((table, col["colname"], con["raw_expr"]))
                    elif (k := _key_of(table, con, col["colname"])):
                        keys.append(k)
            elif "Constraint" in elt and (k := _key_of(table, elt["Constraint"])):
                keys.append(k)
    elif "AlterTableStmt" in stmt:
        a = stmt["AlterTableStmt"]
        table = _table(a["relation"]) or a["relation"]["relname"]
        for cmd in (x["AlterTableCmd"] for x in a.get("cmds", [])):
            if cmd.get("subtype") == "AT_AddConstraint" and (k := _key_of(table, cmd["def"]["Constraint"])):
                keys.append(k)
    elif "IndexStmt" in stmt and stmt["IndexStmt"].get("unique"):
        i = stmt["IndexStmt"]
        table = _table(i["relation"]) or i["relation"]["relname"]
        keys.append(Key(table, i.get("idxname", ""), "i",
                        tuple(e["IndexElem"].get("name", "") for e in i.get("indexParams", []))))
    elif "CreateTrigStmt" in stmt:
        t = stmt["CreateTrigStmt"]
        triggers.append(Trigger(_table(t["relation"]) or t["relation"]["relname"], t["trigname"],
                                ".".join(_names(t["funcname"])), t.get("whenClause"),
                                tuple(r["TriggerTransition"]["name"] for r in t.get("transitionRels", []))))
    return keys, triggers, defaults


def from_sql(sql: str, placement: dict[str, str], volatility: dict[str, str] | None = None,
             delegated: set[str] | None = None) -> Package:
    """A model of the CREATE FUNCTION / POLICY / TABLE / INDEX / TRIGGER and ALTER TABLE … ADD
    CONSTRAINT statements in ``sql`` (self-tests); ``delegated``: the verbs that run on a worker."""
    functions: dict[str, list[Function]] = {}
    policies = []
    keys, triggers, defaults = [], [], []
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
            else:
                k, t, d = _table_parts(stmt)
                keys += k
                triggers += t
                defaults += d
    vol = dict(SNIPPET_VOLATILITY)
    vol.update(volatility or {})
    return Package(functions, policies, dict(placement), vol, keys, triggers, defaults, set(delegated or ()))


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
        fn = Function(name, lang, retset, trigger, definition=definition)
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
    keys = [Key(t, n, k, tuple(c), tuple(o or ())) for t, n, k, c, o in conn.execute("""
        SELECT format('dna.%I', r.relname), c.conname, c.contype::text,
               ARRAY(SELECT coalesce(a.attname::text, '') FROM unnest(c.conkey) WITH ORDINALITY AS k(attnum, n)
                     LEFT JOIN pg_attribute AS a ON a.attrelid = c.conrelid AND a.attnum = k.attnum ORDER BY k.n),
               ARRAY(SELECT o.oprname::text FROM unnest(c.conexclop) WITH ORDINALITY AS x(op, n)
                     JOIN pg_operator AS o ON o.oid = x.op ORDER BY x.n)
        FROM pg_constraint AS c JOIN pg_class AS r ON r.oid = c.conrelid
        WHERE r.relnamespace = 'dna'::regnamespace AND c.contype IN ('p', 'u', 'x')
        UNION ALL
        SELECT format('dna.%I', r.relname), x.relname, 'i',
               ARRAY(SELECT coalesce(a.attname::text, '') FROM unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, n)
                     LEFT JOIN pg_attribute AS a ON a.attrelid = i.indrelid AND a.attnum = k.attnum ORDER BY k.n), NULL
        FROM pg_index AS i JOIN pg_class AS r ON r.oid = i.indrelid JOIN pg_class AS x ON x.oid = i.indexrelid
        WHERE r.relnamespace = 'dna'::regnamespace AND i.indisunique
          AND NOT EXISTS (SELECT 1 FROM pg_constraint AS c WHERE c.conindid = i.indexrelid AND c.conrelid = i.indrelid)
        ORDER BY 1, 2""").fetchall()]
    triggers = []
    for (definition,) in conn.execute("""
            SELECT pg_get_triggerdef(g.oid) FROM pg_trigger AS g JOIN pg_class AS r ON r.oid = g.tgrelid
            WHERE r.relnamespace = 'dna'::regnamespace AND NOT g.tgisinternal ORDER BY r.relname, g.tgname""").fetchall():
        triggers += _table_parts(parse(definition)[0])[1]
    defaults = [(t, c, parse("SELECT " + e)[0]["SelectStmt"]["targetList"][0]["ResTarget"]["val"])
                for t, c, e in conn.execute("""
        SELECT format('dna.%I', r.relname), a.attname, pg_get_expr(d.adbin, d.adrelid)
        FROM pg_attrdef AS d JOIN pg_attribute AS a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
        JOIN pg_class AS r ON r.oid = d.adrelid
        WHERE r.relnamespace = 'dna'::regnamespace AND NOT a.attisdropped ORDER BY 1, 2""").fetchall()]
    delegated = {n for (n,) in conn.execute(
        "SELECT DISTINCT 'dna.' || p.proname FROM dna.delegated_verbs() AS v JOIN pg_proc AS p ON p.oid = v.fn")}
    return Package(functions, policies, placement, volatility, keys, triggers, defaults, delegated)
