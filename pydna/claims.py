"""Claims written as text, the form the CLI teaches: ``[SUBJECT::]PREDICATE=[!]OBJECT``.

``parse_claim("User/me::prod_db=postgres17")`` → ``{"subject": "User/me", "predicate": "prod_db",
"object": "postgres17", "polarity": "asserts"}``. ``!`` before the object denies it; an empty object is
an existence claim (``predicate=`` asserts the predicate exists, ``predicate=!`` denies it). The CLI's
``--claim`` and both doors' ``claims`` (a string in place of an object) read claims with it.
"""
from __future__ import annotations

from typing import Any

FORM = "[SUBJECT::]PREDICATE=[!]OBJECT"


def parse_claim(text: str) -> dict[str, Any]:
    """The claim ``text`` writes (see the module); ``ValueError`` naming what is wrong and the form."""
    raw = text
    subject = None
    if "::" in text:
        subject, text = text.split("::", 1)
        subject = subject.strip()
        if not subject:
            raise ValueError(f"claim {raw!r}: the subject before '::' is empty ({FORM})")
    if "=" not in text:
        raise ValueError(f"claim {raw!r}: expected {FORM}, e.g. User/me::prod_db=postgres17")
    predicate, obj = text.split("=", 1)
    predicate = predicate.strip()
    if not predicate:
        raise ValueError(f"claim {raw!r}: the predicate is empty ({FORM})")
    obj = obj.strip()
    polarity = "asserts"
    if obj.startswith("!"):
        polarity, obj = "denies", obj[1:].strip()
    claim: dict[str, Any] = {"predicate": predicate, "polarity": polarity}
    if subject:
        claim["subject"] = subject
    if obj:
        claim["object"] = obj
    return claim
