"""API keys of the REST door: what a request presents, how it is looked up, and the role switch.

A DBA creates keys in SQL (``SELECT dna.create_api_key('alice', 'laptop')``, shown once) and revokes
them (``SELECT dna.revoke_api_key('dna_1a2b3c4d5e6f')``); ``sql/doors.sql`` explains why a sha256 of
the key is a sound stored form. The door presents ``Authorization: Bearer <key>``; :func:`enter_role`
finds the key's role by hash and switches the transaction to it, in one statement, before any verb
runs. The switch is ``set_config('role', …, true)`` — ``SET LOCAL ROLE``: it ends with the transaction,
so a pooled connection goes back to the pool as the door's own login role.
"""
from __future__ import annotations

import hashlib

import psycopg

from pydna.doors.verbs import DoorError

#: Finds an active key by its hash and, when its role may be used, switches the transaction to it.
#: A role that is gone, a superuser or BYPASSRLS (outside the privacy model) is not switched to.
LOOKUP_SQL = """
SELECT k.role_name, r.rolname IS NOT NULL AS role_exists,
       coalesce(r.rolsuper OR r.rolbypassrls, false) AS privileged,
       CASE WHEN r.rolname IS NOT NULL AND NOT (r.rolsuper OR r.rolbypassrls)
            THEN set_config('role', k.role_name, true) END AS switched
FROM dna.dna_api_keys AS k
LEFT JOIN pg_catalog.pg_roles AS r ON r.rolname = k.role_name
WHERE k.key_hash = %s AND k.revoked_at IS NULL
"""


def key_hash(key: str) -> bytes:
    """The stored form of ``key``: sha256 of its UTF-8 bytes, as ``dna.api_key_hash`` computes it."""
    return hashlib.sha256(key.encode("utf-8")).digest()


def unauthorized(message: str) -> DoorError:
    return DoorError(401, message, extra={"www_authenticate": "Bearer"})


def enter_role(conn: psycopg.Connection, key: str | None) -> str:
    """Inside the request's transaction on ``conn`` (the door's login role): look ``key`` up and
    ``SET LOCAL ROLE`` to its role; returns the role name. Raises :class:`DoorError` 401 for a missing,
    unknown or revoked key, 403 when the key's role is gone or outside the privacy model, and 500
    (naming the GRANT) when the door's login role may not switch to that role."""
    if not key:
        raise unauthorized("an API key is required: send the header 'Authorization: Bearer <key>' "
                           "(create one with the CLI, `dna keys create <role> --door <login role>`, or in SQL, "
                           "SELECT dna.create_api_key('<role>', '<label>'))")
    try:
        row = conn.execute(LOOKUP_SQL, (key_hash(key),)).fetchone()
    except psycopg.errors.InsufficientPrivilege as exc:
        login = conn.info.user
        if "set role" in (exc.diag.message_primary or "").lower():
            raise DoorError(500, f"the server's login role {login!r} may not switch to the key's role: "
                                 f"{exc.diag.message_primary}", sqlstate=exc.sqlstate,
                            hint=f"A DBA grants the membership: GRANT <role> TO {login};") from None
        raise DoorError(500, f"the server's login role {login!r} cannot read the API keys: "
                             f"{exc.diag.message_primary}", sqlstate=exc.sqlstate,
                        hint=f"A DBA runs: SELECT dna.grant_door_role('{login}');") from None
    if row is None:
        raise unauthorized("unknown or revoked API key")
    role, exists, privileged, _ = row
    if not exists:
        raise DoorError(403, f"the role {role!r} of this API key no longer exists")
    if privileged:
        raise DoorError(403, f"the role {role!r} of this API key is a superuser or has BYPASSRLS: outside the "
                             "privacy model, refused", hint="Map API keys to ordinary application roles.")
    return role
