"""The opt-in Citus suite (a package, so its conftest is not the top-level ``conftest`` other tests import)."""
