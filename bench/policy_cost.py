"""The privacy model's price: the application role's backend CPU beside the superuser's, on the same rows
(issue 26 item 4, revision 0021 topic policy_inline).

One database at head, loaded once (fake embedder, fixed ``now``):

- scope ``base``: ``--memories`` base memories and ``--docs`` base documents (written by the superuser);
- scope ``mix``: the same numbers of base memories and documents, plus as many personal memories and
  personal documents of the application role (a real LOGIN role, ``dna.grant_app_role``, mapped to an
  identity; row-level security is ENABLEd and FORCEd on every protected table).

The superuser is mapped to the same identity, so ``personal => true`` as the superuser reads the same
partition without row-level security: same rows, same answers (every answer is compared). Three row sets:
``base`` (scope base), ``mix shared`` (scope mix, personal => false: the personal rows of the scope pass
through the policy before they are left out) and ``mix personal`` (personal => true: base + personal).
Calls: dna.search lexical and hybrid (k = 10), dna.recall (k = 5, reconsolidate => false) and
dna.list_memories (100 rows).

Each call runs once per query as the superuser and once as the role, alternating which goes first, on two
connections kept open (one warm-up pass unmeasured). The role is timed under two policy forms installed in
turn on every protected table, each block with its own superuser peer: ``inline`` (head's
dna.tenant_policy(): the test of dna.tenant_visible written out, the list an InitPlan) and ``call``
(0018-0020's ``tenant = '' OR dna.tenant_visible(tenant, (SELECT dna.visible_tenants()))``). Backend CPU
from ``/proc/<backend pid>/schedstat`` (ns; the server must run on this machine); per call and row set
the p50 over queries x passes, the ratio role / superuser of the p50s and of the totals; the 1-minute load
average before and after each block. Prints a table, writes JSON. Usage::

    python bench/policy_cost.py [--dsn SUPERUSER_DSN] [--memories 3000] [--docs 1000] [--queries 20]
                                [--passes 2] [--out bench/results/policy_cost.json]

Without ``--dsn`` an embedded server is started under a temporary DNA_HOME (stopped at the end). The
database ``dna_bench_policy`` is dropped and recreated; the role ``dna_bench_policy_app`` is (re)created.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psycopg
from psycopg import sql as pgsql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
from pydna import migrate  # noqa: E402
from scale import BackendCpu  # noqa: E402

DB, ROLE, PASSWORD, IDENTITY = "dna_bench_policy", "dna_bench_policy_app", "dna-bench-policy", "bench-oid"
MODEL = "dna-fake-hash-v1"
NOW = "2026-12-01 12:00:00+00"
WORDS = ("alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega river stone cloud "
         "garden engine signal harbor meadow lantern copper violet ember quartz falcon").split()
OLD_POLICY = "tenant = '' OR dna.tenant_visible(tenant, (SELECT dna.visible_tenants()))"
ROWSETS = {"base": ("base", False), "mix shared": ("mix", False), "mix personal": ("mix", True)}
CALLS = {
    "search lexical": "SELECT array_agg(kind || '/' || name || ':' || round(score::numeric, 9) ORDER BY score DESC, kind, name) "
                      "FROM dna.search(%(scope)s, %(q)s, personal => %(p)s, k => 10)",
    "search hybrid": "SELECT array_agg(kind || '/' || name || ':' || round(score::numeric, 9) ORDER BY score DESC, kind, name) "
                     "FROM dna.search(%(scope)s, %(q)s, dna.fake_embed(%(q)s), personal => %(p)s, k => 10)",
    "recall": "SELECT dna.recall(%(scope)s, %(q)s, dna.fake_embed(%(q)s), personal => %(p)s, reconsolidate => false, "
              "now => %(now)s) -> 'hits'",
    "list_memories": "SELECT dna.list_memories(%(scope)s, personal => %(p)s, now => %(now)s) -> 'memories'",
}
# One statement writes n rows: text i is 8 words of the vocabulary (+ ' note <i>'), its fake embedding.
_TEXT = ("LATERAL (SELECT array_to_string(ARRAY(SELECT w[1 + (g * k + k * k + %(salt)s) %% %(nw)s] "
         "FROM generate_series(1, 8) AS k), ' ') || ' note ' || g AS t) AS y")
REMEMBER = ("SELECT count(dna.remember(%(scope)s, jsonb_build_object('summary', t), name => %(prefix)s || g, "
            "personal => %(p)s, embedding => dna.fake_embed(t), now => %(now)s)) "
            "FROM generate_series(1, %(n)s) AS g, LATERAL (SELECT %(words)s::text[] AS w) AS x, " + _TEXT)
INDEX = ("SELECT count(dna.index_document(%(scope)s, 'Doc', %(prefix)s || g, t, dna.fake_embed(t), %(model)s, "
         "personal => %(p)s)) FROM generate_series(1, %(n)s) AS g, LATERAL (SELECT %(words)s::text[] AS w) AS x, " + _TEXT)


def with_user(dsn: str, user: str, password: str | None) -> str:
    params = conninfo_to_dict(dsn)
    params.update(user=user, dbname=DB)
    if password is None:
        params.pop("password", None)
    else:
        params["password"] = password
    return make_conninfo(**params)


def setup(server_dsn: str, memories: int, docs: int) -> tuple[str, str]:
    """Create and migrate the database, the role and the rows; the superuser's and the role's DSNs."""
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(pgsql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(pgsql.Identifier(DB)))
        conn.execute(pgsql.SQL("CREATE DATABASE {}").format(pgsql.Identifier(DB)))
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (ROLE,)).fetchone() is None:
            conn.execute(pgsql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(pgsql.Identifier(ROLE),
                                                                             pgsql.Literal(PASSWORD)))
    admin = make_conninfo(**{**conninfo_to_dict(server_dsn), "dbname": DB})
    migrate.upgrade(admin, "head")
    app = with_user(admin, ROLE, PASSWORD)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("SELECT dna.grant_app_role(%s)", (ROLE,))
        conn.execute("INSERT INTO dna.dna_identities (role_name, oid) VALUES (%s, %s), (current_user, %s)",
                     (ROLE, IDENTITY, IDENTITY))
        for scope in ("base", "mix"):
            common = {"scope": scope, "p": False, "now": NOW, "words": list(WORDS), "nw": len(WORDS), "model": MODEL}
            conn.execute(REMEMBER, {**common, "prefix": "b", "n": memories, "salt": 0})
            conn.execute(INDEX, {**common, "prefix": "bd", "n": docs, "salt": 3})
    with psycopg.connect(app, autocommit=True) as conn:
        common = {"scope": "mix", "p": True, "now": NOW, "words": list(WORDS), "nw": len(WORDS), "model": MODEL}
        conn.execute(REMEMBER, {**common, "prefix": "p", "n": memories, "salt": 1})
        conn.execute(INDEX, {**common, "prefix": "pd", "n": docs, "salt": 5})
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
    return admin, app


def set_policy(admin: str, form: str) -> str:
    """Install one policy form on every protected table; its text as pg_policies shows it."""
    with psycopg.connect(admin, autocommit=True) as conn:
        expr = conn.execute("SELECT dna.tenant_policy(false)").fetchone()[0] if form == "inline" else OLD_POLICY
        tables = [r[0] for r in conn.execute("SELECT t::text FROM dna.protected_tables() AS t")]
        for t in tables:
            conn.execute(f"ALTER POLICY dna_tenant_isolation ON {t} USING ({expr}) WITH CHECK ({expr})")
        return conn.execute("SELECT qual FROM pg_policies WHERE schemaname = 'dna' AND tablename = 'dna_instances'"
                            ).fetchone()[0]


def queries(n: int) -> list[str]:
    return [" ".join(WORDS[(i * k + 2 * k) % len(WORDS)] for k in (1, 3, 7)) for i in range(n)]


def timed(conn, cpu: BackendCpu, query: str, params: dict) -> tuple[float, object]:
    before = cpu.read()
    answer = conn.execute(query, params).fetchone()[0]
    return (cpu.read() - before) / 1e6, answer


def run_block(admin: str, app: str, qs: list[str], passes: int) -> dict:
    out = {"load_before": os.getloadavg()[0]}
    cpu_ms = {(c, r, who): [] for c in CALLS for r in ROWSETS for who in ("su", "app")}
    differ: list[str] = []
    with psycopg.connect(admin, autocommit=True) as su, psycopg.connect(app, autocommit=True) as role:
        conns = {"su": (su, BackendCpu(su)), "app": (role, BackendCpu(role))}
        if conns["su"][1].path is None or conns["app"][1].path is None:
            raise SystemExit("policy_cost.py needs the server on this machine (/proc/<backend pid>/schedstat)")
        for conn, _ in conns.values():
            conn.execute("SET jit = off")
            # the verbs' plans cached and the first-statement cost of the maps paid before timing
            for rowset, (scope, personal) in ROWSETS.items():
                for call, text in CALLS.items():
                    conn.execute(text, {"scope": scope, "q": qs[0], "p": personal, "now": NOW}).fetchone()
        turn = 0
        for _ in range(passes):
            for q in qs:
                for rowset, (scope, personal) in ROWSETS.items():
                    for call, text in CALLS.items():
                        params = {"scope": scope, "q": q, "p": personal, "now": NOW}
                        order = ("su", "app") if turn % 2 == 0 else ("app", "su")
                        turn += 1
                        answers = {}
                        for who in order:
                            conn, cpu = conns[who]
                            ms, answers[who] = timed(conn, cpu, text, params)
                            cpu_ms[(call, rowset, who)].append(ms)
                        if answers["su"] != answers["app"]:
                            differ.append(f"{call} / {rowset} / {q!r}")
    out["load_after"] = os.getloadavg()[0]
    rows = []
    for call in CALLS:
        for rowset in ROWSETS:
            su_ms, app_ms = cpu_ms[(call, rowset, "su")], cpu_ms[(call, rowset, "app")]
            rows.append({"call": call, "rows": rowset,
                         "su_p50": statistics.median(su_ms), "app_p50": statistics.median(app_ms),
                         "ratio_p50": statistics.median(app_ms) / statistics.median(su_ms),
                         "ratio_total": sum(app_ms) / sum(su_ms), "n": len(su_ms)})
    out["rows"] = rows
    out["answers_differ"] = differ
    out["answers_compared"] = len(qs) * passes * len(CALLS) * len(ROWSETS)
    return out


def print_table(blocks: dict) -> None:
    forms = list(blocks)
    head = "| call | rows | " + " | ".join(f"su p50 ({f}) | role p50 ({f}) | role / su ({f})" for f in forms) + " |"
    print(head)
    print("|" + "---|" * (2 + 3 * len(forms)))
    for i, row in enumerate(blocks[forms[0]]["rows"]):
        cells = []
        for f in forms:
            r = blocks[f]["rows"][i]
            cells.append(f"{r['su_p50']:.1f} | {r['app_p50']:.1f} | ×{r['ratio_p50']:.2f} (Σ ×{r['ratio_total']:.2f})")
        print(f"| {row['call']} | {row['rows']} | " + " | ".join(cells) + " |")
    print("| load average (1 min) | | " + " | ".join(
        f"{blocks[f]['load_before']:.2f} → {blocks[f]['load_after']:.2f} | | " for f in forms) + "|")
    for f in forms:
        print(f"{f}: answers compared {blocks[f]['answers_compared']}, differing {len(blocks[f]['answers_differ'])}"
              + (f": {blocks[f]['answers_differ'][:5]}" if blocks[f]["answers_differ"] else ""))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dsn", help="a superuser's DSN on a server on this machine (default: an embedded server)")
    ap.add_argument("--memories", type=int, default=3000, help="base memories per scope, and personal ones in mix")
    ap.add_argument("--docs", type=int, default=1000, help="base documents per scope, and personal ones in mix")
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--forms", default="inline,call", help="policy forms to time, in order (inline, call)")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "policy_cost.json"))
    args = ap.parse_args(argv)
    home = None
    server_dsn = args.dsn
    if server_dsn is None:
        from pydna import server

        home = Path(tempfile.mkdtemp(prefix="pydna-policy-cost-"))
        server_dsn = server.start(home)
    try:
        t0 = time.time()
        admin, app = setup(server_dsn, args.memories, args.docs)
        load_s = time.time() - t0
        with psycopg.connect(admin) as conn:
            version = conn.execute("SHOW server_version").fetchone()[0]
            counts = conn.execute("SELECT scope, tenant <> '' AS personal, count(*) FROM dna.dna_search_docs_384 "
                                  "GROUP BY 1, 2 ORDER BY 1, 2").fetchall()
        qs = queries(args.queries)
        blocks, policies = {}, {}
        for form in [f.strip() for f in args.forms.split(",") if f.strip()]:
            policies[form] = set_policy(admin, form)
            blocks[form] = run_block(admin, app, qs, args.passes)
        set_policy(admin, "inline")
        print(f"PostgreSQL {version}, {platform.node()}, {os.cpu_count()} cores; loaded in {load_s:.0f} s; "
              f"rows of dna_search_docs_384 (scope, personal, n): {counts}")
        print(f"backend CPU ms (schedstat), p50 of {args.queries} queries x {args.passes} passes; "
              "role / su = ratio of the p50s (Σ: of the totals)")
        print_table(blocks)
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "server": version,
                                   "host": platform.node(), "cores": os.cpu_count(), "memories": args.memories,
                                   "docs": args.docs, "queries": args.queries, "passes": args.passes,
                                   "rows": [list(r) for r in counts], "policies": policies, "blocks": blocks},
                                  indent=2))
        print(f"wrote {out}")
    finally:
        if home is not None:
            from pydna import server

            server.stop(home)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
