"""Operator maintenance: commands an operator runs on purpose (``compact`` also ends ``dna index`` and
``Client.index``), never a side effect of a verb.

- ``compact(conn, scope)``: ``dna.bm25_compact`` — seals the BM25 memtable into impact-ordered
  segments and merges them. It changes no answer (``dna.bm25`` scores the same documents the same
  way before and after); it keeps the lexical lane fast after many writes.
- ``drop_vector_index(conn, width)`` / ``build_vector_index(conn, width, ...)``: the HNSW index
  ``dna.dna_search_docs_<width>_embedding_hnsw`` of one width table, exactly as the head defines it
  (``vector_index_sql``). pgvector builds an HNSW index much faster over loaded rows than it
  maintains one row by row, so a large load drops it, loads, and builds it again
  (``docs/bulk-load.md``). Without the index the dense lane of that width does exact scans: the same
  answers or better (exact instead of approximate nearest neighbours), slower on large tables.

The CLI exposes them as ``dna db compact`` and ``dna db vector-index drop|build``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from psycopg import sql

from pydna.sqlcalls import captured_notices

#: pgvector cannot index ``vector`` above 2000 dimensions; wider tables index ``halfvec`` (up to
#: 4000), as migrations/versions/0001_foundation.py does.
HNSW_MAX_DIMS = 2000

#: The HNSW build parameters of every width table's index since revision 0025_dense_graph (its fragment
#: after_dense_graph.sql builds the same): pgvector's default m, twice its default ef_construction. On 1M
#: SciFact-derived rows the default graph (ef_construction 64) stops at recall@10 0.947 against an exact
#: scan even at ef_search 1000; this one reaches 0.966 at 600 (bench/RESULTS.md, "Dense recall").
HNSW_BUILD = "m = 16, ef_construction = 128"


def vector_index_name(width: int) -> str:
    """The HNSW index of ``dna.dna_search_docs_<width>`` (unqualified; it lives in schema ``dna``)."""
    return f"dna_search_docs_{width}_embedding_hnsw"


def vector_index_sql(width: int, if_not_exists: bool = True) -> sql.Composed:
    """The ``CREATE INDEX`` of the HNSW index of ``width`` as the head defines it (revision 0001's
    target, revision 0025's ``WITH (HNSW_BUILD)``): ``vector_cosine_ops`` on ``embedding`` for widths
    <= 2000, ``halfvec_cosine_ops`` on ``(embedding::halfvec(W))`` above (dna.search's dense lane
    orders by that expression there)."""
    if width <= HNSW_MAX_DIMS:
        target = sql.SQL("embedding vector_cosine_ops")
    else:
        target = sql.SQL("(embedding::halfvec({})) halfvec_cosine_ops").format(sql.Literal(width))
    return sql.SQL("CREATE INDEX {if_not_exists}{name} ON dna.{table} USING hnsw ({target}) WITH ({build})").format(
        if_not_exists=sql.SQL("IF NOT EXISTS " if if_not_exists else ""),
        name=sql.Identifier(vector_index_name(width)),
        table=sql.Identifier(f"dna_search_docs_{width}"), target=target, build=sql.SQL(HNSW_BUILD))


def check_width(conn, width: int) -> None:
    """Raise ``ValueError`` naming the widths that have a search table when ``width`` has none."""
    widths = [w for (w,) in conn.execute("SELECT dna.search_widths()").fetchall()]
    if width not in widths:
        raise ValueError(f"no search table for width {width} (widths with a table: "
                         f"{', '.join(map(str, widths)) or 'none'})")


def vector_index_state(conn, width: int) -> dict[str, Any] | None:
    """``{index, valid, definition, bytes}`` of the HNSW index of ``width``, None when it is absent.
    ``valid`` is False for the leftover of a failed ``CREATE INDEX CONCURRENTLY`` (drop it, build it)."""
    row = conn.execute(
        "SELECT i.indisvalid, pg_get_indexdef(c.oid), pg_relation_size(c.oid) FROM pg_class AS c "
        "JOIN pg_index AS i ON i.indexrelid = c.oid WHERE c.relnamespace = 'dna'::regnamespace "
        "AND c.relname = %s", (vector_index_name(width),)).fetchone()
    if row is None:
        return None
    return {"index": f"dna.{vector_index_name(width)}", "valid": row[0], "definition": row[1], "bytes": row[2]}


def compact(conn, scope: str | None = None, model_id: str | None = None, tenant: str | None = None,
            full_merge: bool = False) -> dict[str, Any]:
    """Run ``dna.bm25_compact`` in a transaction of its own and return its report,
    ``{"partitions": [{scope, model_id, tenant, status: ok|busy, sealed_documents, merged_segments,
    segments, tombstones}]}``. ``scope``/``model_id``/``tenant``: None = every one. ``full_merge``:
    merge each partition into one segment (after a bulk load). Idempotent; safe beside reads and
    writes (a partition whose lock stays taken is reported ``busy``). Raises ``psycopg.Error`` as
    the server does."""
    with conn.transaction():
        return conn.execute("SELECT dna.bm25_compact(%s, %s, %s, full_merge => %s)",
                            (scope, model_id, tenant, full_merge)).fetchone()[0]


def compaction_lines(report: dict[str, Any]) -> list[str]:
    """One line per partition of a ``compact`` report, e.g. ``scope docs · dna-fake-hash-v1 ·
    tenant '': sealed 5 documents, merged 0 segments → 1 segment, 0 tombstones`` (``busy``: the
    partition's lock stayed taken by another compaction or a long write; run it again)."""
    lines = []
    for p in report.get("partitions", []):
        where = f"scope {p['scope']} · {p['model_id']} · tenant {p['tenant']!r}"
        if p.get("status") != "ok":
            lines.append(f"{where}: {p.get('status')} (its lock stayed taken: run it again)")
            continue
        lines.append(f"{where}: sealed {_n(p['sealed_documents'], 'document')}, merged "
                     f"{_n(p['merged_segments'], 'segment')} → {_n(p['segments'], 'segment')}, "
                     f"{_n(p['tombstones'], 'tombstone')}")
    return lines or ["nothing to compact: no documents are indexed in this scope (or in any, without --scope)"]


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


@dataclass
class VectorIndexResult:
    """What ``drop_vector_index`` / ``build_vector_index`` did. ``changed``: the index was dropped or
    built by this call (False: it was already absent / present). ``state``: as ``vector_index_state``
    afterwards. ``settings``: the maintenance settings the build ran with; ``notices``: what pgvector
    said (e.g. that the graph no longer fits into maintenance_work_mem)."""

    width: int
    index: str
    changed: bool
    state: dict[str, Any] | None
    settings: dict[str, str] = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)


def drop_vector_index(conn, width: int) -> VectorIndexResult:
    """``DROP INDEX IF EXISTS`` the HNSW index of ``width`` (DDL: an operator command). The dense
    lane of that width then does exact scans. Raises ``ValueError`` for a width without a table."""
    check_width(conn, width)
    before = vector_index_state(conn, width)
    with conn.transaction():
        conn.execute(sql.SQL("DROP INDEX IF EXISTS dna.{}").format(sql.Identifier(vector_index_name(width))))
    return VectorIndexResult(width, f"dna.{vector_index_name(width)}", before is not None, None)


def build_vector_index(conn, width: int, maintenance_work_mem: str | None = "1GB",
                       workers: int | None = 1) -> VectorIndexResult:
    """``CREATE INDEX IF NOT EXISTS`` the HNSW index of ``width`` (``vector_index_sql``), with
    ``maintenance_work_mem`` (a PostgreSQL memory value, e.g. ``"1GB"``; None = the server's) and
    ``max_parallel_maintenance_workers = workers`` (parallel build processes besides the leader,
    capped by the server's max_parallel_workers / max_worker_processes; None = the server's) set for
    this transaction only. Idempotent: an existing index is left as it is. The build takes a SHARE
    lock on the table: reads go on, writes to that width wait until it is done. Raises
    ``ValueError`` for a width without a table or ``workers < 0``, ``psycopg.Error`` for a value the
    server refuses (22023 for a bad memory value)."""
    if workers is not None and workers < 0:
        raise ValueError(f"workers must be >= 0, got {workers}")
    check_width(conn, width)
    existed = vector_index_state(conn, width) is not None
    with conn.transaction(), captured_notices(conn) as notices:
        if maintenance_work_mem is not None:
            conn.execute("SELECT set_config('maintenance_work_mem', %s, true)", (maintenance_work_mem,))
        if workers is not None:
            conn.execute("SELECT set_config('max_parallel_maintenance_workers', %s, true)", (str(workers),))
        settings = dict(conn.execute(
            "SELECT name, current_setting(name) FROM unnest(ARRAY['maintenance_work_mem', "
            "'max_parallel_maintenance_workers']) AS name").fetchall())
        conn.execute(vector_index_sql(width))
    return VectorIndexResult(width, f"dna.{vector_index_name(width)}", not existed, vector_index_state(conn, width),
                             settings, list(notices))
