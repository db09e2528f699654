"""A corpus generated in the repository (no data read from outside it) for the answer-equality test
(tests/citus/test_citus_equality.py) and the Citus smoke (tests/citus/smoke.py): documents shaped like
SciFact's abstracts (a title, a body of 40-400 words, a tenth of them long enough to be cut into
passages), two Kinds, names under three prefixes, a workspace overlay, the queries, and a memory
script with history. Deterministic: the same seed gives the same texts on every machine (Python's
``random.Random`` is specified to)."""
from __future__ import annotations

import random
from dataclasses import dataclass

SEED = 24
PREFIXES = ("alpha/", "beta/", "gamma/")
KINDS = ("Doc", "Paper")
WORKSPACE = "acme"
# Words the queries share with the documents; the rest of the vocabulary is made of syllables.
TOPICS = ("fusion", "rank", "memory", "vector", "lexical", "shard", "scope", "tenant", "passage", "recall",
          "index", "cosine", "cluster", "protein", "cell", "gene", "therapy", "trial", "dose", "risk")
SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "qui", "dor", "fen", "gal", "hu",
             "jin", "ber", "col", "dax", "eph")


@dataclass(frozen=True)
class Doc:
    kind: str
    name: str
    title: str
    body: str
    tenant: str = ""

    def record(self) -> dict:
        return {"kind": self.kind, "name": self.name, "title": self.title, "body": self.body, "tenant": self.tenant}


def vocabulary(rng: random.Random, size: int = 900) -> list[str]:
    """Made-up words, the topic words spread among the 300 most frequent (Zipf ranks)."""
    words: list[str] = []
    seen = set(TOPICS)
    while len(words) < size - len(TOPICS):
        w = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4)))
        if w not in seen:
            seen.add(w)
            words.append(w)
    for i, topic in enumerate(TOPICS):
        words.insert(3 + i * 15, topic)
    return words


def _zipf(rng: random.Random, words: list[str], n: int) -> list[str]:
    weights = [1.0 / (i + 1) ** 1.07 for i in range(len(words))]
    return rng.choices(words, weights=weights, k=n)


def _sentence_text(rng: random.Random, words: list[str], n: int) -> str:
    out, sentence = [], []
    for w in _zipf(rng, words, n):
        sentence.append(w)
        if len(sentence) >= rng.randint(8, 18):
            out.append(" ".join(sentence).capitalize() + ".")
            sentence = []
    if sentence:
        out.append(" ".join(sentence).capitalize() + ".")
    paragraphs, para = [], []
    for s in out:
        para.append(s)
        if len(para) >= rng.randint(3, 6):
            paragraphs.append(" ".join(para))
            para = []
    if para:
        paragraphs.append(" ".join(para))
    return "\n\n".join(paragraphs)


def documents(n: int = 400, scope_seed: int = 0) -> list[Doc]:
    """``n`` documents: kinds Doc (70 %) and Paper, names ``<prefix>doc-<i>``, a tenth of them long."""
    rng = random.Random(SEED * 1000 + scope_seed)
    words = vocabulary(random.Random(SEED))
    docs = []
    for i in range(n):
        length = rng.randint(600, 900) if i % 10 == 7 else rng.randint(40, 400)
        docs.append(Doc(kind=KINDS[0] if rng.random() < 0.7 else KINDS[1],
                        name=f"{PREFIXES[i % len(PREFIXES)]}doc-{i:04d}",
                        title=" ".join(_zipf(rng, words, rng.randint(4, 8))).capitalize(),
                        body=_sentence_text(rng, words, length)))
    return docs


def overlay(base: list[Doc], n: int = 30) -> list[Doc]:
    """The workspace's rows: the first two thirds shadow base documents (same kind and name, a text
    of their own), the rest are new."""
    rng = random.Random(SEED + 7)
    words = vocabulary(random.Random(SEED))
    out = []
    for i in range(n):
        if i < 2 * n // 3:
            d = base[i * 3]
            out.append(Doc(d.kind, d.name, d.title + " revised", _sentence_text(rng, words, rng.randint(40, 200)),
                           WORKSPACE))
        else:
            out.append(Doc("Doc", f"ws/doc-{i:03d}", "Workspace note " + str(i),
                           _sentence_text(rng, words, rng.randint(40, 200)), WORKSPACE))
    return out


def queries(docs: list[Doc], n: int = 40) -> list[str]:
    """``n`` queries: most are 2-4 words of one document's body (so they hit), some a topic word and a
    rare word, one matches nothing."""
    rng = random.Random(SEED + 1)
    out = []
    for i in range(n - 1):
        if i % 5 == 4:
            out.append(f"{rng.choice(TOPICS)} {rng.choice(rng.choice(docs).body.split()).strip('.').lower()}")
        else:
            words = [w.strip(".").lower() for w in rng.choice(docs).body.split()]
            start = rng.randrange(max(1, len(words) - 4))
            out.append(" ".join(words[start:start + rng.randint(2, 4)]))
    out.append("zzqx nothingmatches")
    return out


def memories(n: int = 16) -> list[tuple[str, dict]]:
    """(name, spec) of the memories the script remembers; some share words so recall ranks them."""
    rng = random.Random(SEED + 2)
    words = vocabulary(random.Random(SEED))
    out = []
    for i in range(n):
        summary = f"{TOPICS[i % len(TOPICS)]} {TOPICS[(i * 7) % len(TOPICS)]} " + \
                  " ".join(_zipf(rng, words, rng.randint(6, 14)))
        spec = {"summary": summary, "importance": round(rng.uniform(0.2, 0.95), 2)}
        if i % 4 == 1:
            spec["claims"] = [{"subject": "item-1", "predicate": "status", "object": ("open", "closed")[(i // 4) % 2]}]
        out.append((f"mem-{i:02d}", spec))
    return out
