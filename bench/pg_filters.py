"""Filtered nearest neighbours on PostgreSQL: pgvector with the compiled filter against the in-memory index.

Which path should ``PostgresStore`` take when a question carries a filter (an Azure metadata filter or a
``where_str``)?  (a) pgvector's HNSW scan inside the database with ``filters.sql``'s SQL in the
WHERE clause (``vector_search_sql``, which also looks the deployment up: one short query), or (b) the
index's own mask (``MemIndex.mask``, numpy masks for where_str) handed to the in-memory vector search
as a selector.  Both run here on the same records and queries, same run.
The mask is timed on its own: the ranker computes it in either case (BM25 candidates, eligibility).

Usage: python bench/pg_filters.py [records] [queries]   (defaults 20000 and 50; starts pgserver)
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import numpy as np

from openqna.filters.nodes import Column, MetaEq
from openqna.filters.where_str import parse_where
from openqna.index.analyze import analyze
from openqna.index.index_cache import IndexCache, engine_search
from openqna.records import Dialog, QnA
from openqna.store import Project, StoredQnA, Unit
from openqna.store.postgres import PostgresStore
from openqna.store.postgres_vector import filter_to_sql

DIM = 384
K = 100  # ranker.CANDIDATES
SCHEMA = {"price": Column("price", "Float64"), "cat": Column("cat", "String"),
          "tags": Column("tags", "Array(String)"), "published": Column("published", "DateTime")}
FILTERS = {
    "none": None,
    "Azure metadata (25%)": MetaEq("bucket", "1"),
    "where_str broad (~90%)": "price > 10",
    "where_str medium (~19%)": "cat = 'c1' AND published > parseDateTime32BestEffort('2020-01-01')",
    "where_str selective (~4%)": "has(tags, 't7') AND price BETWEEN 20 AND 60",
}


def build(store: PostgresStore, n: int) -> None:
    rng = np.random.default_rng(7)
    schema = {"columns": [{"name": c.name, "type": c.type} for c in SCHEMA.values()]}
    store.create_project(Project("bench", settings={"schema": schema}))
    start = datetime(2018, 1, 1, tzinfo=UTC)
    batch = []
    for i in range(n):
        v = rng.standard_normal((2, DIM)).astype(np.float32)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        fields = {"price": float(rng.uniform(0, 100)), "cat": f"c{i % 4}",
                  "tags": [f"t{t}" for t in rng.choice(20, 2, replace=False)],
                  "published": (start + timedelta(days=int(rng.integers(0, 3000)))).isoformat()}
        qna = QnA([f"question {i}"], f"answer {i}", None, "bench", {"bucket": str(i % 4)}, Dialog(), "qna",
                  [], fields)
        units = [Unit("q", 0, analyze(f"question {i}"), v[0]), Unit("a", 0, analyze(f"answer {i}"), v[1])]
        batch.append(StoredQnA(qna, units, f"h{i}"))
        if len(batch) == 2000:
            store.put_qnas("bench", batch)
            batch = []
    if batch:
        store.put_qnas("bench", batch)


def p50(fn: Callable[[np.ndarray], object], queries: np.ndarray) -> float:
    """Median milliseconds of ``fn`` over ``queries``."""
    out = []
    for q in queries:
        t = time.perf_counter()
        fn(q)
        out.append((time.perf_counter() - t) * 1000)
    return statistics.median(out)


def main() -> None:
    import pgserver

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    nq = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    server = pgserver.get_server(tempfile.mkdtemp(prefix="openqna-bench-pg-"), cleanup_mode="delete")
    store = PostgresStore(server.get_uri(), pool_size=2)
    t = time.perf_counter()
    build(store, n)
    store.ensure_vector_index(DIM)
    index = IndexCache(store, nearest=engine_search(store)).get("bench")
    print(f"{n} records, {DIM} dims, HNSW built: {time.perf_counter() - t:.0f}s")
    rng = np.random.default_rng(1)
    queries = rng.standard_normal((nq, DIM)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    print(f"{'filter':28} {'kept':>6} {'1st mask ms':>11} {'mask ms':>8} {'memory ms':>10} {'pgvector+SQL ms':>16}")
    for name, raw in FILTERS.items():
        flt = parse_where(raw, SCHEMA) if isinstance(raw, str) else raw
        t = time.perf_counter()
        fresh = index.mask(flt)  # the first evaluation of a filter, column codes included; repeats are cached
        first_ms = (time.perf_counter() - t) * 1000
        mask_ms = p50(lambda q, f=flt: index.mask(f), queries[:10])
        allowed = None if fresh.all() else index.q.unit_mask(fresh)
        memory = p50(lambda q, a=allowed: index.q.nearest_units(q, K, a), queries)
        sql, params = filter_to_sql(flt)
        pg = p50(lambda q, s=sql, p=params: store.vector_search_sql("bench", "test", q, K, s, p), queries)
        print(f"{name:28} {fresh.mean():6.0%} {first_ms:11.1f} {mask_ms:8.2f} {memory:10.2f} {pg:16.2f}")
    store.close()


if __name__ == "__main__":
    main()
