"""Real texts and their real MiniLM vectors, shared by the throughput, peers and cold-start benchmarks.

Embedding is the slow part (a few hundred texts/s here), so the vectors of the unique
banking77 and hwu64 training utterances (the corpus) and of their test utterances (the
queries) are computed once and cached under ``bench/.cache/`` (gitignored), keyed by the
texts and the embedder's name.  Corpora larger than the real texts are made of
perturbed copies, ``normalize(v + noise)``: see :func:`grow`.

openqna is filled only through ``Service.upsert`` with :class:`LookupEmbedder`, the public
seam, so these benchmarks keep working when the retrieval and store internals change.
"""

from __future__ import annotations

import csv
import hashlib
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CACHE = HERE / ".cache"
sys.path.insert(0, str(REPO / "tests"))

from conftest import SHARED_DATA  # noqa: E402
from openqna.records import QnA  # noqa: E402

# |noise| = NOISE for unit vectors: a copy keeps cos ~0.89 with its original.  Measured on
# these utterances: a real text's nearest other text is at cos 0.92 (median) and its 10th at
# 0.86, so a copy sits where a close real paraphrase would: neighbourhoods stay meaningful
# without the copies collapsing onto their originals.
NOISE = 0.5
GROUPS = 10  # metadata "group" = i % 10: a filter on one group keeps ~10%


def _unique(texts: list[str]) -> list[str]:
    return list(dict.fromkeys(t.strip() for t in texts if t.strip()))


def corpus_texts() -> list[str]:
    """The unique banking77 and hwu64 training utterances (~18.9k)."""
    with open(SHARED_DATA / "banking77" / "train.csv") as f:
        out = [row["text"] for row in csv.DictReader(f)]
    out += (SHARED_DATA / "hwu64" / "train" / "seq.in").read_text().splitlines()
    return _unique(out)


def query_texts() -> list[str]:
    """The unique banking77 and hwu64 test and validation utterances not in the corpus (~5k)."""
    with open(SHARED_DATA / "banking77" / "test.csv") as f:
        out = [row["text"] for row in csv.DictReader(f)]
    for part in ("test", "valid"):
        out += (SHARED_DATA / "hwu64" / part / "seq.in").read_text().splitlines()
    seen = set(corpus_texts())
    return [t for t in _unique(out) if t not in seen]


def embed_cached(texts: list[str], embedder) -> np.ndarray:
    """Vectors of ``texts`` from ``embedder``, cached on disk by content."""
    key = hashlib.sha256("\n".join([embedder.name, *texts]).encode()).hexdigest()[:16]
    path = CACHE / f"vectors-{key}.npy"
    if path.exists():
        return np.load(path)
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    vectors = np.zeros((len(texts), embedder.dim), np.float32)
    for start in range(0, len(order), 256):
        chunk = order[start : start + 256]
        vectors[chunk] = embedder.embed([texts[i] for i in chunk])
    CACHE.mkdir(exist_ok=True)
    np.save(path, vectors)
    return vectors


def real_data(embedder=None) -> tuple[list[str], np.ndarray, list[str], np.ndarray]:
    """(corpus texts, their vectors, query texts, their vectors), embedded by the bundled MiniLM."""
    if embedder is None:
        from openqna.models.embedder import LocalMiniLM

        embedder = LocalMiniLM(cache_size=0)
    corpus, queries = corpus_texts(), query_texts()
    return corpus, embed_cached(corpus, embedder), queries, embed_cached(queries, embedder)


def grow(texts: list[str], vectors: np.ndarray, n: int, seed: int = 0) -> tuple[list[str], np.ndarray]:
    """``n`` documents: the real ones first, then perturbed copies ``normalize(v + noise)`` of them.

    A copy's text is its original's, numbered so that every document is distinct.
    """
    rng = np.random.default_rng(seed)
    base = len(texts)
    idx = np.arange(n) % base
    out = vectors[idx].copy()
    copies = np.arange(n) >= base
    noise = rng.standard_normal((int(copies.sum()), vectors.shape[1])).astype(np.float32)
    noise *= NOISE / np.sqrt(vectors.shape[1])
    out[copies] += noise
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    names = [texts[j] if i < base else f"{texts[j]} ({i // base})" for i, j in enumerate(idx)]
    return names, out


def group(i: int) -> str:
    return str(i % GROUPS)


class LookupEmbedder:
    """The Embedder protocol over precomputed vectors: same name and space as the real model.

    Lets openqna be filled and queried without paying for the model, so its figures compare
    with the peers', which get precomputed vectors too.
    """

    def __init__(self, name: str, texts: list[str], vectors: np.ndarray, fallback=None):
        """``fallback``, an embedder of the same space, embeds texts it was not given: the ranker embeds a long
        question's asking sentences apart (``kb/focus.py``), texts no list of questions holds."""
        self.name, self.dim = name, vectors.shape[1]
        self._row = {t: i for i, t in enumerate(texts)}
        self._vectors = vectors
        self._fallback = fallback

    def add(self, texts: list[str], vectors: np.ndarray) -> None:
        start = len(self._vectors)
        self._vectors = np.concatenate([self._vectors, vectors])
        self._row.update((t, start + i) for i, t in enumerate(texts))

    def embed(self, texts) -> np.ndarray:
        if self._fallback is not None and any(t not in self._row for t in texts):
            unknown = [t for t in dict.fromkeys(texts) if t not in self._row]
            self.add(unknown, self._fallback.embed(unknown))
        return self._vectors[[self._row[t] for t in texts]]


def fill_openqna(service, project: str, texts: list[str], batch: int = 5000) -> float:
    """Write one QnA per text (question = answer = text, metadata group) through ``Service.upsert``.

    The service's embedder must know every text (a :class:`LookupEmbedder`).  Returns seconds.
    """
    service.ensure_project(project)
    t = time.perf_counter()
    for start in range(0, len(texts), batch):
        service.upsert(project, match_content=False, qnas=[QnA([text], text, metadata={"group": group(i)})
                                 for i, text in enumerate(texts[start : start + batch], start)])
    return time.perf_counter() - t


def embedding_ms(embedder, questions: list[str]) -> list[float]:
    """Milliseconds to embed each question alone: the floor every query pays (use an embedder without a cache)."""
    out = []
    for q in questions:
        t = time.perf_counter()
        embedder.embed([q])
        out.append((time.perf_counter() - t) * 1000)
    return out


def pct(xs, p: float) -> float:
    return float(np.percentile(np.asarray(xs, dtype=float), p))
