"""An embedder that remembers: vectors on disk keyed by sha256(model name, text).

Embedding the SciFact corpus takes minutes on two cores; a rerun of the evaluation should
not pay for it again.  The wrapper keeps the inner embedder's ``name`` and ``dim``, so the
service records the same vector space and nothing downstream can tell it is there; it only
answers repeated texts from the cache.  It also counts the seconds the model itself spent,
which is the honest embedding cost of a run.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from openqna.models.embedder import Embedder, HybridEncoder

_FLUSH_EVERY = 1024


class CachedEmbedder:
    def __init__(self, inner: Embedder, path: Path):
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.reads_cjk = getattr(inner, "reads_cjk", True)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS vectors(key TEXT PRIMARY KEY, vector BLOB NOT NULL) WITHOUT ROWID")
        self._memory: dict[str, np.ndarray] = {}
        self._pending: list[tuple[str, bytes]] = []
        self.model_seconds = 0.0
        self.hits = 0
        self.misses = 0
        if hasattr(inner, "embed_passages"):  # E5: answers and passages read apart, cached apart
            self.embed_passages = lambda texts: self._cached(texts, inner.embed_passages, "passage\x00")

    def _key(self, text: str, kind: str = "") -> str:
        return hashlib.sha256(f"{self.name}\x00{kind}{text}".encode()).hexdigest()

    def _load(self, keys: list[str]) -> None:
        wanted = [k for k in dict.fromkeys(keys) if k not in self._memory]
        for start in range(0, len(wanted), 500):
            batch = wanted[start : start + 500]
            rows = self._db.execute(
                f"SELECT key, vector FROM vectors WHERE key IN ({','.join('?' * len(batch))})", batch)
            for key, blob in rows:
                self._memory[key] = np.frombuffer(blob, dtype=np.float32)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._cached(texts, self.inner.embed)

    def _cached(self, texts: Sequence[str], run: Callable[[list[str]], np.ndarray], kind: str = "") -> np.ndarray:
        texts = list(texts)
        keys = [self._key(t, kind) for t in texts]
        self._load(keys)
        missing = list(dict.fromkeys(t for t, k in zip(texts, keys) if k not in self._memory))
        self.misses += len(missing)
        self.hits += len(texts) - len(missing)
        if missing:
            start = time.perf_counter()
            vectors = run(missing)
            self.model_seconds += time.perf_counter() - start
            for text, vector in zip(missing, vectors):
                key = self._key(text, kind)
                vector = np.array(vector, dtype=np.float32)
                self._memory[key] = vector
                self._pending.append((key, vector.tobytes()))
            if len(self._pending) >= _FLUSH_EVERY:
                self.flush()
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for row, key in enumerate(keys):
            out[row] = self._memory[key]
        return out

    def flush(self) -> None:
        if self._pending:
            self._db.execute("BEGIN")
            self._db.executemany("INSERT OR REPLACE INTO vectors VALUES(?, ?)", self._pending)
            self._db.execute("COMMIT")
            self._pending.clear()

    def close(self) -> None:
        self.flush()
        self._db.close()


class CachedHybrid(HybridEncoder):
    """A ``HybridEncoder`` whose two encoders are cached apart: one encoder's vectors then serve every
    combination it is part of (mpnet's serve both ``OPENQNA_EMBEDDER=mpnet`` and ``accurate``)."""

    def __init__(self, inner: HybridEncoder, path: Path):
        self.parts = [CachedEmbedder(inner.a, path), CachedEmbedder(inner.b, path)]
        super().__init__(self.parts[0], self.parts[1], inner.weight)

    model_seconds = property(lambda self: sum(p.model_seconds for p in self.parts))
    misses = property(lambda self: max(p.misses for p in self.parts))
    hits = property(lambda self: min(p.hits for p in self.parts))

    def close(self) -> None:
        for part in self.parts:
            part.close()


def cached(inner: Embedder, path: Path) -> CachedEmbedder | CachedHybrid:
    """``inner`` behind the vector cache at ``path`` (a hybrid's encoders each behind their own)."""
    return CachedHybrid(inner, path) if isinstance(inner, HybridEncoder) else CachedEmbedder(inner, path)
