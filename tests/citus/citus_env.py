"""Where the opt-in Citus suite runs (tests/citus/conftest.py).

``DNA_TEST_CITUS_DSN`` names a database on a Citus coordinator, as a superuser, whose ``pg_dist_node``
lists the workers (``../shared/citus/cluster start DIR PORT 2`` prints one). The suite never writes
there: each test module gets a database of its own on every node (``DistributedDatabase``: CREATE
DATABASE and CREATE EXTENSION citus on each node, the workers added on the coordinator), migrated to
head and distributed with ``SHARD_COUNT`` shards per table. Each test starts from it with every dna
table emptied (``reset``: one TRUNCATE, the reference tables' seed rows restored, the per-node maps
copied to the workers again); a test that changed the schema (a function, a trigger, a policy, a
table) gets the database rebuilt instead.
"""
from __future__ import annotations

import importlib.util
import itertools
import os
import sys
import time
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.types.json import Jsonb

from pydna import migrate

CITUS_DSN = os.environ.get("DNA_TEST_CITUS_DSN")
SHARD_COUNT = int(os.environ.get("DNA_TEST_CITUS_SHARDS", "4"))
_counter = itertools.count()

# What a test may change that reset puts back only by rebuilding the database, part by part.
_SCHEMA = {
    "functions": "SELECT p.oid::regprocedure::text || ' ' || md5(p.prosrc) FROM pg_proc AS p "
                 "WHERE p.pronamespace = 'dna'::regnamespace",
    "triggers": "SELECT g.tgrelid::regclass::text || ' ' || g.tgname || ' ' || g.tgenabled::text "
                "FROM pg_trigger AS g JOIN pg_class AS c ON c.oid = g.tgrelid "
                "WHERE c.relnamespace = 'dna'::regnamespace AND NOT g.tgisinternal",
    "relations": "SELECT c.relname || ' ' || c.relkind::text || ' ' || c.relowner::regrole::text FROM pg_class AS c "
                 "WHERE c.relnamespace = 'dna'::regnamespace",
    "policies": "SELECT p.polrelid::regclass::text || ' ' || p.polname || ' ' || pg_get_expr(p.polqual, p.polrelid) "
                "FROM pg_policy AS p JOIN pg_class AS c ON c.oid = p.polrelid WHERE c.relnamespace = 'dna'::regnamespace",
    "citus": "SELECT logicalrelid::text || ' ' || partmethod::text FROM pg_dist_partition",
}


def schema_of(conn) -> dict[str, frozenset[str]]:
    return {part: frozenset(r[0] for r in conn.execute(q)) for part, q in _SCHEMA.items()}


def server():
    """tests/conftest.py's Server for the coordinator (loaded by path: both files are named conftest)."""
    spec = importlib.util.spec_from_file_location("dna_tests_root_conftest", Path(__file__).resolve().parents[1] / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Server(CITUS_DSN)


class Cluster:
    """The coordinator of ``dsn`` and the primary workers its metadata lists."""

    def __init__(self, dsn: str):
        self.dsn = dsn
        params = conninfo_to_dict(dsn)
        self.host = params.get("host") or "localhost"
        self.port = int(params.get("port") or 5432)
        with psycopg.connect(dsn, autocommit=True) as conn:
            version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'citus'").fetchone()
            assert version, f"DNA_TEST_CITUS_DSN ({dsn}) names a database without the citus extension"
            self.citus_version = version[0]
            self.workers = conn.execute("SELECT nodename, nodeport FROM pg_dist_node WHERE noderole = 'primary' "
                                        "AND groupid <> 0 ORDER BY nodeport").fetchall()
        assert self.workers, f"the coordinator of {dsn} lists no worker (citus_add_node)"

    def node_dsn(self, host: str, port: int, dbname: str) -> str:
        return make_conninfo(self.dsn, host=host, port=port, dbname=dbname)

    def coordinator_dsn(self, dbname: str) -> str:
        return make_conninfo(self.dsn, dbname=dbname)

    def nodes(self):
        return list(self.workers) + [(self.host, self.port)]

    def create_database(self, name: str) -> str:
        """``name`` on every node with the citus extension, the workers added on the coordinator."""
        for host, port in self.nodes():
            with psycopg.connect(self.node_dsn(host, port, "postgres"), autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                conn.execute(f'CREATE DATABASE "{name}"')
            with psycopg.connect(self.node_dsn(host, port, name), autocommit=True) as conn:
                conn.execute("CREATE EXTENSION citus")
        dsn = self.coordinator_dsn(name)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SELECT citus_set_coordinator_host(%s, %s)", (self.host, self.port))
            for host, port in self.workers:
                conn.execute("SELECT citus_add_node(%s, %s)", (host, port))
        return dsn

    def drop_database(self, name: str) -> None:
        for host, port in self.nodes():
            with psycopg.connect(self.node_dsn(host, port, "postgres"), autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def migrate_and_distribute(dsn: str, shard_count: int | None = SHARD_COUNT) -> dict:
    """``dna db upgrade`` on the coordinator, then ``SELECT dna.distribute(shard_count)``; its report."""
    migrate.upgrade(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        report = conn.execute("SELECT dna.distribute(%s)", (shard_count,)).fetchone()[0]
        state = conn.execute("SELECT dna.distribution()").fetchone()[0]
    assert state["distributed"], state
    return report


class DistributedDatabase:
    """A database of its own on every node, migrated and distributed, and the reset between tests."""

    def __init__(self, cluster: Cluster, label: str = "m", shard_count: int | None = SHARD_COUNT):
        self.cluster = cluster
        self.shard_count = shard_count
        self.name = f"dna_citus_{os.getpid()}_{label}_{next(_counter)}"[:63]
        self.timings: dict[str, float] = {}
        self.rebuilds: list[list[str]] = []
        self._build()

    def _build(self) -> None:
        t0 = time.perf_counter()
        self.dsn = self.cluster.create_database(self.name)
        t1 = time.perf_counter()
        self.report = migrate_and_distribute(self.dsn, self.shard_count)
        t2 = time.perf_counter()
        self.timings = {"create_s": t1 - t0, "migrate_distribute_s": t2 - t1}
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            self.schema = schema_of(conn)
            plan = conn.execute("SELECT tbl::text, placement FROM dna.distribution_plan() ORDER BY ord").fetchall()
            self.emptied = [t for t, p in plan if p != "reference"]
            self.reference = {t: conn.execute(f"SELECT coalesce(jsonb_agg(to_jsonb(x)), '[]') FROM {t} AS x").fetchone()[0]
                              for t, p in plan if p == "reference"}

    def reset(self) -> None:
        """Every dna table as ``dna.distribute`` left it: emptied, the reference tables' seed rows back,
        the per-node maps (empty) copied to the workers. A changed schema: the database rebuilt."""
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            now = schema_of(conn)
            if now != self.schema:
                conn.close()
                changed = {k: sorted(now[k] ^ self.schema[k])[:6] for k in now if now[k] != self.schema[k]}
                self.rebuilds.append(sorted(changed))
                sys.stderr.write(f"\n{self.name}: rebuilt, the test changed {changed}\n")
                self.cluster.drop_database(self.name)
                self._build()
                return
            conn.execute("TRUNCATE " + ", ".join(self.emptied))
            for table, rows in self.reference.items():
                now = conn.execute(f"SELECT coalesce(jsonb_agg(to_jsonb(x)), '[]') FROM {table} AS x").fetchone()[0]
                if sorted(map(repr, now)) != sorted(map(repr, rows)):
                    conn.execute(f"DELETE FROM {table}")
                    conn.execute(f"INSERT INTO {table} SELECT * FROM jsonb_populate_recordset(NULL::{table}, %s)",
                                 (Jsonb(rows),))
            conn.execute("SELECT dna.sync_tenancy_maps()")

    def drop(self) -> None:
        self.cluster.drop_database(self.name)
