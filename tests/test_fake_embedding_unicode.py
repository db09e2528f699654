"""dna.fake_embed and the Python fake embedder are bit-identical for any Unicode text (issue 13 item 2):
the reference is Python's str.lower() (the DNA SDK's fake_embed_one); the SQL side must not depend on
the database's collation (lower() of 'İ' is 'i' under libc, 'i̇' — i and a combining dot — in Python)."""
from __future__ import annotations

import struct
from array import array

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pydna.embeddings import fake_embed_one

SPECIAL = ["İ", "İstanbul", "ẞ", "ß", "ΣΑΣ ΟΔΟΣ", "K", "Kelvin", "e\u0301cole", "ﬁle", "Ǆ", "Ⅸ", "ｆｕｌｌ",
           "x\u0307y", "ǅungla", "ΐ", "ŉ", "İİİ", "KK", "Dİ", "٣٤", "𝐀𝐁"]


def _sql_vector(sql, text: str, dims: int = 384) -> bytes:
    raw = sql.execute("SELECT vector_send(dna.fake_embed(%s, %s))", (text, dims)).fetchone()[0]
    n, _ = struct.unpack(">hh", raw[:4])
    return array("f", struct.unpack(f">{n}f", raw[4:])).tobytes()


def _py_vector(text: str, dims: int = 384) -> bytes:
    return array("f", fake_embed_one(text, dims)).tobytes()


def test_special_cases_are_bit_identical(sql):
    for text in SPECIAL:
        assert _sql_vector(sql, text) == _py_vector(text), text
    # İstanbul: Python lowers İ to i + U+0307 (a separator), so the tokens are 'i' and 'stanbul'.
    assert _py_vector("İstanbul") == _py_vector("i stanbul") != _py_vector("istanbul")


_TEXT = st.lists(st.one_of(st.sampled_from(list("İKẞßΣσςAZaz09 \u0301\u0307") + SPECIAL),
                           # any character PostgreSQL can store: no lone surrogates (not UTF-8), no NUL
                           st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")),
                  max_size=20).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=_TEXT, dims=st.sampled_from([384, 7, 1]))
def test_any_text_is_bit_identical(sql, text, dims):
    text = text.replace("\x00", "")  # PostgreSQL text holds no NUL
    assert _sql_vector(sql, text, dims) == _py_vector(text, dims)
