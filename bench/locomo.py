"""LoCoMo dev split: does ``dna.recall`` find the evidence turns at least as well as ``dna.search``,
through the conversation verb and through the old one-memory-per-turn path?

Data and protocol: ``../shared/data/locomo-dev/`` (README there; LoCoMo, Maharana et al., ACL 2024,
CC BY-NC 4.0, evaluation only). Two conversations (conv-26, conv-30), one scope each:

- every turn is remembered as one Engram through ``dna.remember`` — text ``"<speaker>: <text>"``
  (trimmed, as ``dna.memory_text`` trims; spec.summary; a turn longer than the summary's 280 characters is cut at its last space before
  280 and the rest goes to spec.body, so ``dna.memory_text`` is the turn's text exactly), name = its
  ``dia_id``, ``now`` = its session's date-time (so valid_from and created_at are the session time),
  embedded by the ONNX provider (all-MiniLM-L6-v2 int8, ``w8a8``) through ``bench/embcache.py``;
- every question of category 1–4 (5 is adversarial: skipped) is asked with k = 10 at the sample's
  last session date-time, read-only (``reconsolidate => false``);
- and, the conversation path: each sample is one conversation handed to
  ``dna.remember_conversation`` (a turn = ``{speaker, text, session, id: dia_id}``, the sessions' date-times as
  ``sessions``), once per ``--context-turns`` value (the turns before each turn its indexed text holds; default:
  ``dna.conversation_context_turns()``), into a scope of its own, its texts from ``dna.conversation_plan`` embedded by
  the same provider; a hit ``<sample>/<dia_id>`` is the turn ``dia_id``;
- evidence ids are normalised (``"D8:6; D9:17"`` split, ``D:11:26`` → ``D11:26``, ``D30:05`` →
  ``D30:5``), ids of turns that do not exist dropped, questions left without evidence skipped
  (231 scored questions);
- R@5 / R@10 = the fraction of the question's evidence turns in the top 5 / 10, averaged over
  questions; any@10 = at least one evidence turn in the top 10.

Systems, each called once per question, interleaved (question by question, every system in turn)
so that their timings share the machine's load. The conversation path (``--context-turns C``, one scope
per value): ``recall C`` (``dna.recall`` over Kind Turn, read-only, with recall's defaults) and ``search
C`` (``dna.search`` over Kind Turn), and, for the last C, ``recall C + context 1``: the same recall with
``context => 1``, scored on its hits together with the turns it shows beside each (what an agent reads:
up to 30 turns, so its R@5/R@10 are not those of a top 10); the old per-turn path:

- ``recall``: ``dna.recall`` read-only (hybrid: dense + lexical lanes, memory re-rank);
- ``recall lexical``: ``dna.recall`` without a query embedding;
- ``recall dense``: ``dna.recall`` with the scope's search weights set to (dense 1, lexical 0)
  inside a transaction that is rolled back (``dna.set_search_config``; only the recall is timed);
- ``recall decay=written`` / ``recall decay=off``: ``dna.recall`` read-only with ``decay => 'written'``
  (a memory never recalled decays from its session time) and ``decay => 'off'`` (the default
  ``surfaced`` counts from last_surfaced, which read-only recalls never write: it equals ``off`` here);
- ``search``: ``dna.search`` over the same memories (kinds Engram, valid_time = the question's
  time, no memory logic), and ``search lexical`` / ``search dense`` (weights (1, 0));
- ``recall rrf`` / ``search rrf``: the same calls with the scope's fusion set to RRF (the default
  before revision 0016; ``dna.set_search_config(scope, fusion => 'rrf')`` in a transaction that is
  rolled back, as for ``recall dense``).
Extra recall variants (``--recall-variant name=SQL-expression``) are run the same way: a
variant names a function with ``dna.recall``'s arguments (e.g. a prototype in a scratch schema),
optionally with extra named arguments, e.g. ``--recall-variant 'nodecay=dna.recall(%(args)s, decay => false)'``;
a variant whose name ends in `` dense`` or `` rrf`` runs under that scope setting.

Also printed for every recall system: the share of its top 10 that came from search-pool places
11 and beyond (the hit's ``rank_search``, or ``rank_recall`` before issue 15), and how many of those
were evidence.

Usage (from the repository root; the embedded server of ``--home`` is started when no ``--dsn``)::

    .venv/bin/python bench/locomo.py --data ../shared/data/locomo-dev/locomo-dev.json [--dsn DSN] [--home /tmp/pydna-locomo] [--reuse]
        [--systems recall,search,...] [--recall-variant NAME=EXPR ...] [--context-turns 0,1,2]
        [--out bench/results/locomo.json]

``--reuse`` keeps the database ``dna_bench_locomo`` when it already holds the dev turns (only the
queries run; the plane functions are those of the database: re-migrate or drop it after changing
``sql/``). Prints a table per category and overall, p50/p95 per call beside each other, the load
average, and writes JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
BENCH = Path(__file__).resolve().parent
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

DATABASE = "dna_bench_locomo"
K = 10
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
SUMMARY_MAX = 280

# Every system is one SQL statement; %(...)s are the question's parameters.
RECALL_ARGS = ("%(scope)s, %(q)s, %(vec)s, %(model)s, kinds => '{Engram}', k => 10, "
               "reconsolidate => false, now => %(now)s")
RECALL_LEX_ARGS = ("%(scope)s, %(q)s, NULL, %(model)s, kinds => '{Engram}', k => 10, "
                   "reconsolidate => false, now => %(now)s")
# The conversation path: a scope per context_turns value, its turns of Kind Turn.
CONV_RECALL_ARGS = ("%(conv)s, %(q)s, %(vec)s, %(model)s, kinds => '{Turn}', k => 10, "
                    "reconsolidate => false, now => %(now)s")
CONV_SEARCH_SQL = ("SELECT coalesce(jsonb_agg(jsonb_build_object('name', s.name, 'score', s.score) ORDER BY s.score DESC, "
                   "s.kind, s.name, s.tenant), '[]') FROM dna.search(%(conv)s, %(q)s, %(vec)s, %(model)s, k => 10, "
                   "kinds => '{Turn}', valid_time => %(now)s) AS s")
SEARCH_SQL = ("SELECT coalesce(jsonb_agg(jsonb_build_object('name', s.name, 'score', s.score) ORDER BY s.score DESC, "
              "s.kind, s.name, s.tenant), '[]') FROM dna.search(%(scope)s, %(q)s, {vec}, %(model)s, k => 10, "
              "kinds => '{{Engram}}', valid_time => %(now)s{weights}) AS s")
SYSTEMS = {
    "recall": {"sql": "SELECT dna.recall(" + RECALL_ARGS + ")", "kind": "recall"},
    "recall lexical": {"sql": "SELECT dna.recall(" + RECALL_LEX_ARGS + ")", "kind": "recall"},
    "recall dense": {"sql": "SELECT dna.recall(" + RECALL_ARGS + ")", "kind": "recall", "config": "weights => '{1,0}'"},
    "recall decay=written": {"sql": "SELECT dna.recall(" + RECALL_ARGS + ", decay => 'written')", "kind": "recall"},
    "recall decay=off": {"sql": "SELECT dna.recall(" + RECALL_ARGS + ", decay => 'off')", "kind": "recall"},
    "search": {"sql": SEARCH_SQL.format(vec="%(vec)s", weights=""), "kind": "search"},
    "search lexical": {"sql": SEARCH_SQL.format(vec="NULL", weights=""), "kind": "search"},
    "search dense": {"sql": SEARCH_SQL.format(vec="%(vec)s", weights=", weights => '{1,0}'"), "kind": "search"},
    # the scope's fusion set to RRF (the default before revision 0016) for the one call, rolled back
    "recall rrf": {"sql": "SELECT dna.recall(" + RECALL_ARGS + ")", "kind": "recall", "config": "fusion => 'rrf'"},
    "search rrf": {"sql": SEARCH_SQL.format(vec="%(vec)s", weights=""), "kind": "search", "config": "fusion => 'rrf'"},
}


def parse_session_time(text: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` → an aware UTC datetime."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)


def normalise_evidence(evidence: list[str]) -> list[str]:
    """Split ``"D8:6; D9:17"``, ``D:11:26`` → ``D11:26``, ``D30:05`` → ``D30:5`` (README)."""
    out: list[str] = []
    for item in evidence:
        for part in re.split(r"[;,]", item):
            part = part.strip().replace(" ", "")
            if not part:
                continue
            m = re.fullmatch(r"D:?(\d+):(\d+)", part)
            if m:
                part = f"D{int(m.group(1))}:{int(m.group(2))}"
            out.append(part)
    return list(dict.fromkeys(out))


def split_text(text: str) -> dict:
    """The spec of one turn: summary (<= 280 chars, cut at a space) and body, joining to ``text``."""
    if len(text) <= SUMMARY_MAX:
        return {"summary": text}
    cut = text.rfind(" ", 0, SUMMARY_MAX + 1)
    if cut <= 0:
        cut = SUMMARY_MAX
        return {"summary": text[:cut], "body": text[cut:]}
    return {"summary": text[:cut], "body": text[cut + 1:]}


def load_samples(path: Path) -> list[dict]:
    """Turns and scored questions of each sample."""
    samples = []
    for s in json.loads(path.read_text(encoding="utf-8")):
        conv = s["conversation"]
        sessions = sorted((int(m.group(1)), key) for key in conv
                          if (m := re.fullmatch(r"session_(\d+)", key)))
        turns = []
        for n, key in sessions:
            at = parse_session_time(conv[f"session_{n}_date_time"])
            for t in conv[key]:
                turns.append({"name": t["dia_id"], "text": f"{t['speaker']}: {t['text']}".strip(), "now": at,
                              "session": n, "speaker": t["speaker"], "said": t["text"].strip() or "…"})
        ids = {t["name"] for t in turns}
        last = max(t["now"] for t in turns)
        questions = []
        for qa in s["qa"]:
            cat = int(qa["category"])
            if cat not in CATEGORIES:
                continue
            ev = [e for e in normalise_evidence(qa.get("evidence") or []) if e in ids]
            if not ev:
                continue
            questions.append({"q": qa["question"], "category": cat, "evidence": ev, "now": last})
        samples.append({"sample_id": s["sample_id"], "scope": f"locomo-{s['sample_id']}", "turns": turns,
                        "questions": questions})
    return samples


def provider(compute: str = "w8a8"):
    from embcache import CachedEmbedder
    from pydna.embeddings import OnnxEmbeddingProvider

    return CachedEmbedder(OnnxEmbeddingProvider(compute=compute))


def database(server_dsn: str, reuse: bool, samples: list[dict], emb, contexts: list[int | None] = ()) -> tuple[str, bool]:
    """The bench database's DSN (migrated to head) and whether it was (re)loaded."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from pydna import migrate

    params = conninfo_to_dict(server_dsn)
    params["dbname"] = DATABASE
    dsn = make_conninfo(**params)
    want = sum(len(s["turns"]) for s in samples)
    if reuse:
        try:
            with psycopg.connect(dsn) as conn:
                have = conn.execute("SELECT count(*) FROM dna.dna_search_docs_384 WHERE kind = 'Engram' "
                                    "AND scope LIKE 'locomo-%%' AND model_id = %s", (emb.model_id,)).fetchone()[0]
                conv = {c: conn.execute("SELECT count(*) FROM dna.dna_instances WHERE kind = 'Turn' AND scope = ANY (%s)",
                                        ([conv_scope(s, c) for s in samples],)).fetchone()[0] for c in contexts}
            if have == want:
                for c, n in conv.items():
                    if n != want:
                        remember_conversations(dsn, samples, emb, c)
                return dsn, False
        except psycopg.Error:
            pass
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{DATABASE}"')
    migrate.upgrade(dsn)
    remember_all(dsn, samples, emb)
    for c in contexts:
        remember_conversations(dsn, samples, emb, c)
    return dsn, True


def remember_all(dsn: str, samples: list[dict], emb) -> None:
    import psycopg
    from pgvector import Vector
    from pgvector.psycopg import register_vector
    from psycopg.types.json import Jsonb

    with psycopg.connect(dsn, autocommit=True) as conn:
        register_vector(conn)
        conn.execute("SELECT dna.register_model(%s, %s)", (emb.model_id, emb.dims))
        for s in samples:
            specs = [split_text(t["text"]) for t in s["turns"]]
            texts = [conn.execute("SELECT dna.memory_text('Engram', %s)", (Jsonb(sp),)).fetchone()[0] for sp in specs]
            assert texts == [t["text"] for t in s["turns"]], "memory_text must be the turn's text"
            vectors = [Vector([float(x) for x in v]) for v in emb.embed(texts)]
            with conn.transaction():
                for t, sp, vec in zip(s["turns"], specs, vectors):   # in conversation order
                    conn.execute("SELECT dna.remember(%s, %s, name => %s, now => %s, embedding => %s, model_id => %s)",
                                 (s["scope"], Jsonb(sp), t["name"], t["now"], vec, emb.model_id))
        emb.flush()
        conn.execute("VACUUM ANALYZE dna.dna_instances")
        conn.execute("VACUUM ANALYZE dna.dna_versions")
        conn.execute(f"VACUUM ANALYZE dna.dna_search_docs_{emb.dims}")


def remember_conversations(dsn: str, samples: list[dict], emb, context_turns: int | None) -> None:
    """The conversation path: each sample one ``dna.remember_conversation`` call into its scope for
    ``context_turns`` (the texts of its plan embedded by ``emb``)."""
    import psycopg
    from pgvector import Vector
    from pgvector.psycopg import register_vector
    from psycopg.types.json import Jsonb

    with psycopg.connect(dsn, autocommit=True) as conn:
        register_vector(conn)
        conn.execute("SELECT dna.register_model(%s, %s)", (emb.model_id, emb.dims))
        for s in samples:
            turns, sessions = conversation_turns(s)
            args = (conv_scope(s, context_turns), s["sample_id"], Jsonb(turns), Jsonb(sessions), context_turns)
            plan = conn.execute("SELECT dna.conversation_plan(%s, %s, %s, sessions => %s, context_turns => %s) - 'items'",
                                args).fetchone()[0]
            vectors = [Vector([float(x) for x in v]) for v in emb.embed(plan["texts"])]
            out = conn.execute("SELECT dna.remember_conversation(%s, %s, %s, sessions => %s, context_turns => %s, "
                               "embeddings => %s, model_id => %s, digest => %s) - 'turns'",
                               (*args, vectors, emb.model_id, plan["digest"])).fetchone()[0]
            assert out["failed"] == 0, out
        emb.flush()
        conn.execute("VACUUM ANALYZE dna.dna_instances")
        conn.execute(f"VACUUM ANALYZE dna.dna_search_docs_{emb.dims}")


def conversation_turns(sample: dict) -> tuple[list[dict], dict[str, str]]:
    """A sample's turns as dna.remember_conversation takes them, and its sessions' times."""
    turns = [{"speaker": t["speaker"], "text": t["said"], "session": str(t["session"]), "id": t["name"]}
             for t in sample["turns"]]
    sessions = {str(t["session"]): t["now"].isoformat() for t in sample["turns"]}
    return turns, sessions


def conv_scope(sample: dict, context_turns: int | None) -> str:
    return f"locomo-conv{'' if context_turns is None else context_turns}-{sample['sample_id']}"


def names_of(kind: str, answer) -> tuple[list[str], list[dict]]:
    hits = answer["hits"] if kind.startswith("recall") else answer
    if kind == "recall+context":            # each hit, then the turns shown beside it (context => n)
        names = []
        for h in hits:
            for n in [h["name"], *(c["name"] for c in h.get("context") or [])]:
                if n not in names:
                    names.append(n)
        return [n.rsplit("/", 1)[-1] for n in names], hits
    # a conversation's turn is named <sample>/<dia_id>
    return [h["name"].rsplit("/", 1)[-1] for h in hits], hits


def pool_places(hits: list[dict]) -> list[int | None]:
    """Each hit's place in the search pool recall re-ranked (rank_recall), when the answer says it."""
    return [h.get("rank_recall", h.get("rank_search")) for h in hits]


def run(dsn: str, samples: list[dict], emb, systems: dict[str, dict], repeats: int = 1,
        contexts: list[int | None] = ()) -> dict:
    import psycopg
    from pgvector import Vector
    from pgvector.psycopg import register_vector

    questions = [dict(q, scope=s["scope"], sample=s["sample_id"]) for s in samples for q in s["questions"]]
    qvecs = emb.embed([q["q"] for q in questions])
    emb.flush()
    per: dict[str, list[dict]] = {name: [] for name in systems}
    times: dict[str, list[float]] = {name: [] for name in systems}
    with psycopg.connect(dsn, autocommit=True) as conn:
        register_vector(conn)

        def call(name: str, spec: dict, params: dict):
            if spec.get("config"):
                with conn.transaction(force_rollback=True):
                    conn.execute("SELECT dna.set_search_config(%s, " + spec["config"] + ")", (params["scope"],))
                    t0 = time.perf_counter()
                    answer = conn.execute(spec["sql"], params).fetchone()[0]
                    return answer, time.perf_counter() - t0
            t0 = time.perf_counter()
            answer = conn.execute(spec["sql"], params).fetchone()[0]
            return answer, time.perf_counter() - t0

        for i, (q, vec) in enumerate(zip(questions, qvecs)):
            params = {"scope": q["scope"], "q": q["q"], "vec": Vector([float(x) for x in vec]),
                      "model": emb.model_id, "now": q["now"], "sample": q["sample"]}
            for c in contexts:
                params[f"conv{'' if c is None else c}"] = conv_scope({"sample_id": q["sample"]}, c)
            if i < 10:                                        # warm-up (plans, caches), not timed
                for name, spec in systems.items():
                    call(name, spec, params)
            for rep in range(repeats):
                order = list(systems.items())
                if (i + rep) % 2:
                    order.reverse()                           # no system always runs first
                for name, spec in order:
                    answer, dt = call(name, spec, params)
                    times[name].append(dt * 1000)
                    if rep == 0:
                        got, hits = names_of(spec["kind"], answer)
                        per[name].append({"got": got, "places": pool_places(hits)})
    load = os.getloadavg()
    results = {}
    for name in systems:
        rows = []
        for q, r in zip(questions, per[name]):
            ev = set(q["evidence"])
            top5, top10 = r["got"][:5], r["got"][:K]
            if systems[name]["kind"] == "recall+context":   # the hits and their neighbours, as recall shows them
                top5, top10 = r["got"], r["got"]
            rows.append({"category": q["category"], "r5": len(ev & set(top5)) / len(ev),
                         "r10": len(ev & set(top10)) / len(ev), "any10": float(bool(ev & set(top10))),
                         "deep": sum(1 for p in r["places"][:K] if p is not None and p > K),
                         "deep_evidence": sum(1 for n, p in zip(r["got"][:K], r["places"][:K])
                                              if p is not None and p > K and n in ev),
                         "slots": len(top10)})
        table = {}
        for cat in list(CATEGORIES) + [0]:
            sel = [x for x in rows if cat == 0 or x["category"] == cat]
            label = "overall" if cat == 0 else CATEGORIES[cat]
            table[label] = {"n": len(sel), **{m: round(statistics.fmean(x[m] for x in sel), 4) for m in ("r5", "r10", "any10")}}
        slots = sum(x["slots"] for x in rows)
        deep = sum(x["deep"] for x in rows)
        ms = sorted(times[name])
        results[name] = {"scores": table, "per_question": [{"r10": x["r10"]} for x in rows],
                         "deep_share": round(deep / slots, 4) if slots else None,
                         "deep_evidence_share": round(sum(x["deep_evidence"] for x in rows) / deep, 4) if deep else None,
                         "p50_ms": round(statistics.median(ms), 2),
                         "p95_ms": round(ms[min(len(ms) - 1, int(0.95 * len(ms)))], 2), "calls": len(ms)}
    return {"questions": len(questions), "results": results, "load_average_after": [round(x, 2) for x in load]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", help="LoCoMo's dev split, a JSON file (bench/data_sets.py says where to get it)")
    ap.add_argument("--dsn", default=os.environ.get("DNA_DATABASE_URL"), help="server DSN (a role with CREATEDB)")
    ap.add_argument("--home", default="/tmp/pydna-locomo", help="embedded server home when no --dsn")
    ap.add_argument("--reuse", action="store_true", help="keep a loaded dna_bench_locomo database")
    ap.add_argument("--systems", default="recall,search", help="old per-turn path systems, comma-separated subset of: "
                    + ", ".join(SYSTEMS) + " (named 'per-turn <system>')")
    ap.add_argument("--recall-variant", action="append", default=[], metavar="NAME=EXPR",
                    help="an extra recall system: EXPR is a SQL call with %%(args)s for dna.recall's arguments, "
                         "%%(lexargs)s for them without the query embedding")
    ap.add_argument("--compute", default="w8a8", choices=("w8a8", "float32"),
                    help="ONNX compute (docs/embeddings.md): w8a8 (default) or float32")
    ap.add_argument("--repeats", type=int, default=1, help="timed calls per question and system")
    ap.add_argument("--context-turns", default="default",
                    help="conversation path: comma-separated context_turns values ('default': "
                         "dna.conversation_context_turns()); 'none' skips the path")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "locomo.json"))
    args = ap.parse_args(argv)
    from data_sets import locomo_file  # bench/data_sets.py (bench/ is on sys.path)
    args.data = locomo_file(args.data, ap)

    samples = load_samples(Path(args.data))
    emb = provider(args.compute)
    server_dsn = args.dsn
    if not server_dsn:
        from pydna import server

        server_dsn = server.start(Path(args.home))
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    contexts: list[int | None] = [] if args.context_turns == "none" else [
        None if c.strip() == "default" else int(c) for c in args.context_turns.split(",") if c.strip()]
    dsn, loaded = database(server_dsn, args.reuse, samples, emb, contexts)
    load_s = time.perf_counter() - t0
    systems = {}
    for c in contexts:                                          # the conversation path first
        tag = "" if c is None else f" c{c}"
        scope = f"%(conv{'' if c is None else c})s"
        systems[f"recall{tag}"] = {"sql": "SELECT dna.recall(" + CONV_RECALL_ARGS.replace("%(conv)s", scope) + ")",
                                   "kind": "recall"}
        systems[f"search{tag}"] = {"sql": CONV_SEARCH_SQL.replace("%(conv)s", scope), "kind": "search"}
        if c is None or c == contexts[-1]:
            systems[f"recall{tag} + context 1"] = {
                "sql": "SELECT dna.recall(" + CONV_RECALL_ARGS.replace("%(conv)s", scope) + ", context => 1)",
                "kind": "recall+context"}
    systems.update({("per-turn " + n.strip()): SYSTEMS[n.strip()] for n in args.systems.split(",") if n.strip()})
    for item in args.recall_variant:
        name, _, expr = item.partition("=")
        config = "weights => '{1,0}'" if name.endswith(" dense") else "fusion => 'rrf'" if name.endswith(" rrf") else None
        conv = "%(conv)s" if None in contexts or not contexts else f"%(conv{contexts[0]})s"
        systems[name] = {"sql": "SELECT " + expr.replace("%(args)s", RECALL_ARGS).replace("%(lexargs)s", RECALL_LEX_ARGS)
                         .replace("%(convargs)s", CONV_RECALL_ARGS.replace("%(conv)s", conv)),
                         "kind": "recall", "config": config}
    out = run(dsn, samples, emb, systems, args.repeats, contexts)

    from rich.console import Console
    from rich.table import Table

    console = Console()
    labels = list(CATEGORIES.values()) + ["overall"]
    n_by = {lab: out["results"][next(iter(systems))]["scores"][lab]["n"] for lab in labels}
    for metric, title in (("r10", "R@10"), ("r5", "R@5"), ("any10", "any@10")):
        table = Table(title=f"LoCoMo dev ({out['questions']} questions, k = {K}): {title}")
        table.add_column("system", no_wrap=True)
        for lab in labels:
            table.add_column(f"{lab} ({n_by[lab]})", justify="right")
        for name, r in out["results"].items():
            table.add_row(name, *[f"{r['scores'][lab][metric]:.3f}" for lab in labels])
        console.print(table)
    table = Table(title="per call (interleaved, same run)")
    for col in ("system", "p50 ms", "p95 ms", "calls", "top 10 from pool place > 10", "of which evidence"):
        table.add_column(col, justify="left" if col == "system" else "right")
    for name, r in out["results"].items():
        table.add_row(name, f"{r['p50_ms']:.2f}", f"{r['p95_ms']:.2f}", str(r["calls"]),
                      "-" if r["deep_share"] is None else f"{r['deep_share']:.1%}",
                      "-" if r["deep_evidence_share"] is None else f"{r['deep_evidence_share']:.1%}")
    console.print(table)
    console.print(f"load average (1, 5, 15 min) before {', '.join(f'{x:.2f}' for x in load_before)}, after "
                  f"{', '.join(f'{x:.2f}' for x in out['load_average_after'])} on {os.cpu_count()} CPUs; "
                  f"{'loaded' if loaded else 'reused'} database in {load_s:.1f} s")
    payload = {"benchmark": "locomo-dev", "k": K, "model_id": emb.model_id, **out,
               "systems": {n: s["sql"] for n, s in systems.items()},
               "machine": {"python": platform.python_version(), "platform": platform.platform(),
                           "cpus": os.cpu_count(), "load_average_before": [round(x, 2) for x in load_before]},
               "command": "python bench/locomo.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    console.print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
