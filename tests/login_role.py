"""A LOGIN role with the application grants, for tests that compare the application role with the
superuser on the same rows (tests/test_policy_bound.py, tests/test_policy_personal.py)."""
from __future__ import annotations

import contextlib

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo


@contextlib.contextmanager
def mapped_login_role(pg_server, dna_dsn, sql, role: str, password: str, oid: str):
    """Create ``role`` (LOGIN, ``dna.grant_app_role``), map it and the superuser of ``sql`` to identity
    ``oid`` (so both see the same personal rows), yield an autocommit connection as the role; drop the
    role and what it owns afterwards."""
    admin = pg_server.dsn(pg_server.maintenance_db)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP ROLE IF EXISTS {role}")
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
    sql.execute("SELECT dna.grant_app_role(%s)", (role,))
    sql.execute("INSERT INTO dna.dna_identities (role_name, oid) VALUES (%s, %s), (current_user, %s)",
                (role, oid, oid))
    params = conninfo_to_dict(dna_dsn)
    params.update(user=role, password=password)
    try:
        with psycopg.connect(make_conninfo(**params), autocommit=True) as conn:
            yield conn
    finally:
        sql.execute(f"DROP OWNED BY {role}")
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"DROP ROLE IF EXISTS {role}")
