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
