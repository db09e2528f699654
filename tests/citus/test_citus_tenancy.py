"""tests/test_tenancy.py on a Citus coordinator (tests/citus/conftest.py): INV-PERSONAL with real login
roles, through the per-node tenancy maps (roles created on the coordinator reach the workers; the maps
are copied by dna.sync_tenancy_maps, which the world's seeding runs after writing them)."""
from test_tenancy import *  # noqa: F401,F403
