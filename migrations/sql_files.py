"""Read the SQL package's files for a revision.

A source checkout keeps them in ``sql/`` beside ``migrations/``; the wheel ships them as
``pydna/_sql`` beside ``pydna/_migrations``.
"""
from __future__ import annotations

import re
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.sql.elements import TextClause

_HERE = Path(__file__).resolve().parent


def server_version_num() -> int | None:
    """The ``server_version_num`` of the server a revision runs on (150000 for 15.0), for a revision
    that branches on it (a statement the server has only from some major on). Online it comes
    from what the connection learnt when it connected (no statement runs); offline (``--sql``) it is
    ``-x server_version_num=N`` when given, else None: the script is then rendered for the newest
    servers (the text every revision was released with)."""
    from alembic import context, op

    if context.is_offline_mode():
        given = context.get_x_argument(as_dictionary=True).get("server_version_num")
        return int(given) if given else None
    major, minor = op.get_bind().dialect.server_version_info[:2]  # read by the driver at connect time
    return major * 10000 + minor


def below(version_num: int) -> bool:
    """Whether the migration runs on a server older than ``version_num`` (False offline without
    ``-x server_version_num``)."""
    found = server_version_num()
    return found is not None and found < version_num


def sql_dir() -> Path:
    for candidate in (_HERE.parent / "sql", _HERE.parent / "_sql"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"pydna SQL package not found beside {_HERE}")


def plane_file(name: str, frozen_in: str | None = None) -> Path:
    """``sql/<name>``, or, for a released revision that ran an older text of a plane file,
    ``versions/<frozen_in>/<name>``: the copy of the text as that revision was released."""
    if frozen_in is not None:
        return _HERE / "versions" / frozen_in / name
    return sql_dir() / name


def read_sql(name: str, frozen_in: str | None = None) -> TextClause:
    """The text of ``sql/<name>`` (or of its frozen copy, see ``plane_file``) for ``op.execute``,
    wrapped so function bodies are not validated at CREATE time (as pg_dump does): functions of one
    plane may name objects a later statement creates. Every colon is escaped, so ``'HH24:MI:SS'``
    or ``x::int`` is never a bind parameter."""
    body = plane_file(name, frozen_in).read_text(encoding="utf-8")
    wrapped = f"SET LOCAL check_function_bodies = off;\n{body}\nSET LOCAL check_function_bodies = on;\n"
    return text(wrapped.replace(":", "\\:"))


def split_statements(sql: str) -> list[str]:
    """The statements of ``sql``, one string each, in order, without their terminating semicolons.

    Cut by PostgreSQL's own parser (``pglast``, libpg_query), so a semicolon inside a dollar-quoted
    body, a string, a quoted identifier or a comment never splits. Citus forwards an
    ``op.execute`` string to the workers as one prepared statement, which must hold exactly one
    command (``cannot insert multiple commands into a prepared statement``, citus-probe B9); every
    revision from 0018 on runs its SQL through this. Raises ``pglast.parser.ParseError`` (naming the
    position) on text PostgreSQL would not parse either."""
    import pglast  # the migration path's parser; a runtime dependency (pyproject.toml)

    return [s.strip() for s in pglast.split(sql, with_parser=True) if s.strip()]


def statements(sql: str) -> list[TextClause]:
    """``split_statements(sql)``, each escaped as ``read_sql`` escapes (no colon is a bind
    parameter), ready for one ``op.execute`` each."""
    return [text(s.replace(":", "\\:")) for s in split_statements(sql)]


def read_statements(name: str, frozen_in: str | None = None) -> list[TextClause]:
    """``read_sql(name, frozen_in)`` one statement at a time: ``SET LOCAL check_function_bodies =
    off``, every statement of the file in order, ``SET LOCAL check_function_bodies = on``. Run each
    with its own ``op.execute``: the same catalog as the whole text (tests/test_split_statements.py),
    and a text Citus accepts (B9)."""
    body = plane_file(name, frozen_in).read_text(encoding="utf-8")
    return ([text("SET LOCAL check_function_bodies = off")] + statements(body)
            + [text("SET LOCAL check_function_bodies = on")])


def defined_functions(name: str, frozen_in: str | None = None) -> set[str]:
    """The names of the ``dna.<function>``s the plane file ``name`` (or its frozen copy) defines."""
    return set(re.findall(r"CREATE OR REPLACE FUNCTION dna\.(\w+)\s*\(",
                          plane_file(name, frozen_in).read_text(encoding="utf-8")))


def drop_plane_functions(names: tuple[str, ...] | list[str], frozen_in: str | None = None) -> TextClause:
    """SQL that drops every overload of every ``dna.<function>`` defined by the plane files
    ``names`` (for a revision's downgrade: it removes exactly the functions that revision ran)."""
    functions: set[str] = set()
    for name in names:
        functions |= defined_functions(name, frozen_in)
    listed = ", ".join(f"'{f}'" for f in sorted(functions))
    return text(f"""
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT p.oid\\:\\:regprocedure FROM pg_proc AS p
             WHERE p.pronamespace = 'dna'\\:\\:regnamespace AND p.proname IN ({listed})
             ORDER BY p.oid LOOP
        EXECUTE format('DROP FUNCTION %s', f);
    END LOOP;
END
$$;
""")
