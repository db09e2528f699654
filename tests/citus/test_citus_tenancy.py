"""tests/test_tenancy.py on a Citus coordinator (tests/citus/conftest.py): INV-PERSONAL with real login
roles, through the per-node tenancy maps (roles created on the coordinator reach the workers; the maps
are copied by dna.sync_tenancy_maps, which the world's seeding runs after writing them).

The module's database outlives its tests, so its roles are off-boarded there (dna.revoke_app_role)
before they are dropped (D10 of ../shared/research/citus-probe-3.md: DROP ROLE refused while the
grants of dna.grant_app_role stand). The migration test stays on one node (the downgrade on Citus is
tests/citus/test_citus_distribute.py's)."""
import psycopg
import pytest

import test_tenancy
from test_tenancy import *  # noqa: F401,F403

del test_downgrade_removes_exactly_the_tenancy_revision  # noqa: F821


@pytest.fixture(scope="module")
def roles(pg_server, citus_database):
    admin = pg_server.dsn(pg_server.maintenance_db)
    with psycopg.connect(admin, autocommit=True) as conn:
        for role in test_tenancy.ROLES.values():
            conn.execute(f"DROP ROLE IF EXISTS {role}")
            conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{test_tenancy.PASSWORD}'")
    yield test_tenancy.ROLES
    with psycopg.connect(citus_database.dsn, autocommit=True) as conn:
        for role in test_tenancy.ROLES.values():
            conn.execute("SELECT dna.revoke_app_role(%s)", (role,))
    with psycopg.connect(admin, autocommit=True) as conn:
        for role in test_tenancy.ROLES.values():
            conn.execute(f"DROP ROLE IF EXISTS {role}")
