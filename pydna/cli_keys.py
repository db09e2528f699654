"""``dna keys``: API keys of the REST door (``dna serve``) in one command each, as the DBA.

    dna keys create ROLE [--label L] [--door LOGIN] [--identity OID]   # prints the key, once
    dna keys list [--all] [--json]                                    # key_id, role, label, created, revoked
    dna keys revoke KEY_ID                                            # by key_id (dna_ + 12 hex) or the key

``create`` runs, in one transaction, what docs/doors take eight statements for: the role (``CREATE
ROLE … NOLOGIN`` when it does not exist), ``dna.grant_app_role``, the role's identity for personal memory
(``dna.dna_identities``; ``--identity``, default the role's name, kept when the role has one), with
``--door`` the membership the door's login role needs (``GRANT ROLE TO LOGIN``) and
``dna.grant_door_role``, then ``dna.create_api_key``. On a Citus coordinator the identity map is copied
to the workers (``dna.sync_tenancy_maps``). Every step is the SQL a DBA could type; what they refuse
(a superuser or BYPASSRLS role: 42501; a label over 200 characters: 22001) is one red line, nothing kept.
Runs as the DSN's role, which must be the DBA (on the embedded server: its superuser).
"""
from __future__ import annotations

from typing import Annotated, Any, Optional

import typer

from pydna.cli_common import CliError, database_dsn, echo_json, stderr, stdout

keys_app = typer.Typer(help="API keys of the REST door (dna serve): create, list, revoke (as the DBA).",
                       no_args_is_help=True)


def _admin_conn(ctx: typer.Context):
    """A connection as the DBA: the DSN given, or the embedded server's superuser."""
    import psycopg

    from pydna import server

    return psycopg.connect(server.admin_dsn_for(database_dsn(ctx)))


def _role(conn, name: str) -> dict[str, Any] | None:
    row = conn.execute("SELECT rolcanlogin, rolsuper OR rolbypassrls FROM pg_catalog.pg_roles WHERE rolname = %s",
                       (name,)).fetchone()
    return None if row is None else {"login": row[0], "privileged": row[1]}


@keys_app.command("create")
def keys_create(
    ctx: typer.Context,
    role: Annotated[str, typer.Argument(help="The database role the key acts as (created NOLOGIN when missing).")],
    label: Annotated[str, typer.Option("--label", help="What the key is for (at most 200 characters).")] = "",
    door: Annotated[Optional[str], typer.Option(
        "--door", help="The login role `dna serve` connects as: granted ROLE and the key lookup "
                       "(dna.grant_door_role). It must exist (a LOGIN role with its password).",
        show_default=False)] = None,
    identity: Annotated[Optional[str], typer.Option(
        "--identity", help="The identity of ROLE's personal memory (dna.dna_identities); default: ROLE's name, "
                           "or the identity ROLE already has.", show_default=False)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print {key, key_id, role, ...} as JSON.")] = False,
) -> None:
    """Create an API key for ROLE, and everything ROLE and the door need first; print the key, once.

    Only the key goes to stdout (`KEY=$(dna keys create alice --door dna_door)`); what was done is on
    stderr. Only the key's sha256 is stored: a lost key is revoked and replaced, never shown again."""
    from psycopg import sql

    err = stderr()
    done: list[str] = []
    with _admin_conn(ctx) as conn:
        with conn.transaction():
            found = _role(conn, role)
            if found is None:
                conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(role)))
                done.append(f"created role {role} (NOLOGIN)")
            elif found["privileged"]:
                raise CliError(f"role {role!r} is a superuser or has BYPASSRLS: row-level security never applies "
                               "to it, so a key mapped to it would be outside the privacy model (42501); map keys "
                               "to ordinary application roles")
            conn.execute("SELECT dna.grant_app_role(%s)", (role,))
            done.append(f"granted {role} what the verbs need (dna.grant_app_role)")
            had = conn.execute("SELECT oid FROM dna.dna_identities WHERE role_name = %s", (role,)).fetchone()
            if had is None or (identity is not None and had[0] != identity):
                oid = identity or role
                conn.execute("INSERT INTO dna.dna_identities (role_name, oid) VALUES (%s, %s) "
                             "ON CONFLICT (role_name) DO UPDATE SET oid = excluded.oid", (role, oid))
                done.append(f"identity of {role}: {oid} (personal memory)")
                if conn.execute("SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')").fetchone()[0]:
                    conn.execute("SELECT dna.sync_tenancy_maps()")
                    done.append("identity map copied to the workers (dna.sync_tenancy_maps)")
            else:
                oid = had[0]
            if door is not None:
                found_door = _role(conn, door)
                if found_door is None:
                    raise CliError(f"no role {door!r}: create the door's login role first, e.g. "
                                   f"CREATE ROLE {door} LOGIN NOINHERIT PASSWORD '…';")
                conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(role), sql.Identifier(door)))
                conn.execute("SELECT dna.grant_door_role(%s)", (door,))
                done.append(f"{door} may act as {role} (GRANT {role} TO {door}) and look keys up (dna.grant_door_role)")
            key = conn.execute("SELECT dna.create_api_key(%s, %s)", (role, label)).fetchone()[0]
    result = {"key": key, "key_id": key[:16], "role": role, "label": label, "identity": oid, "door": door,
              "done": done}
    if as_json:
        echo_json(result)
        return
    for line in done:
        err.print(line, markup=False, soft_wrap=True)
    err.print(f"key {key[:16]} for role {role}: shown this once (only its sha256 is kept); "
              f"revoke with `dna keys revoke {key[:16]}`", markup=False, soft_wrap=True)
    typer.echo(key)


@keys_app.command("list")
def keys_list(
    ctx: typer.Context,
    all_: Annotated[bool, typer.Option("--all", help="Include revoked keys.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the keys as JSON.")] = False,
) -> None:
    """List the API keys (never the keys themselves: their key_id, role, label, who created them, when)."""
    with _admin_conn(ctx) as conn:
        rows = conn.execute(
            "SELECT key_id, role_name, label, created_by, created_at, revoked_at FROM dna.dna_api_keys "
            "WHERE %s OR revoked_at IS NULL ORDER BY created_at, key_id", (all_,)).fetchall()
    keys = [{"key_id": r[0], "role": r[1], "label": r[2], "created_by": r[3], "created_at": r[4].isoformat(),
             "revoked_at": r[5].isoformat() if r[5] else None} for r in rows]
    if as_json:
        echo_json(keys)
        return
    out = stdout()
    if not keys:
        out.print("no API keys" + ("" if all_ else " in use (--all: revoked ones too)"), markup=False)
        return
    for k in keys:
        state = f"revoked {k['revoked_at']}" if k["revoked_at"] else "active"
        out.print(f"{k['key_id']}  {k['role']}  {k['label'] or '-'}  created {k['created_at']} by {k['created_by']}  "
                  f"{state}", markup=False, soft_wrap=True)


@keys_app.command("revoke")
def keys_revoke(
    ctx: typer.Context,
    key: Annotated[str, typer.Argument(help="The key_id (dna_ + 12 hex digits, from `dna keys list`) or the key.")],
) -> None:
    """Revoke an API key (dna.revoke_api_key): the door refuses it (401) from the next request on."""
    with _admin_conn(ctx) as conn:
        n = conn.execute("SELECT dna.revoke_api_key(%s)", (key,)).fetchone()[0]
    stdout().print(f"revoked {key[:16]}" if n else f"{key[:16]} was already revoked", markup=False)
