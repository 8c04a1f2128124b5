"""where_str: compile time and filtered-query latency against unfiltered search, same run.

A 10,000-row ArXiv-like table (SciFact titles as text, seeded dates and categories).
Usage: python bench/tools.py
"""

from __future__ import annotations

import gzip
import json
import random
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from conftest import SHARED_DATA  # noqa: E402
from openqna.filters.nodes import Column
from openqna.filters.sql import compile_sqlite
from openqna.filters.where_str import parse_where
from openqna.kb.service import Service
from openqna.kinds.tables import TableSchema, create_table, load_rows
from openqna.models.embedder import LocalMiniLM  # noqa: E402
from openqna.store.sqlite import SQLiteStore  # noqa: E402

FILTERS = {
    "selective (~4%)": "has(categories, 'cs.CL') AND pubdate > parseDateTime32BestEffort('2023-06-01')",
    "broad (~50%)": "pubdate > parseDateTime32BestEffort('2021-12-31')",
    "in-list + like": "categories_first IN ('cs.CL', 'stat.ML') AND title ILIKE '%cell%'",
}


def rows(n: int) -> list[dict]:
    rng = random.Random(3)
    cats = ["cs.CL", "cs.LG", "q-bio.NC", "q-bio.GN", "stat.ML"]
    out = []
    with gzip.open(SHARED_DATA / "beir-scifact" / "corpus.jsonl.gz", "rt") as f:
        titles = [json.loads(line)["title"] for line in f]
    for i in range(n):
        c = rng.sample(cats, rng.randint(1, 2))
        day = datetime(2019, 1, 1, tzinfo=timezone.utc).timestamp() + rng.randrange(6 * 365) * 86400
        out.append({"id": str(i), "title": titles[i % len(titles)], "categories": c, "categories_first": c[0],
                    "pubdate": datetime.fromtimestamp(day, timezone.utc).isoformat()})
    return out


def main() -> None:
    embedder = LocalMiniLM(cache_size=0)
    with tempfile.TemporaryDirectory() as tmp:
        service = Service(SQLiteStore(tmp), embedder)
        schema = TableSchema([Column("id", "String"), Column("title", "String"), Column("pubdate", "DateTime"),
                              Column("categories", "Array(String)"), Column("categories_first", "String")],
                             ["title"], None)
        create_table(service, "arxiv", schema)
        data = "\n".join(json.dumps(r) for r in rows(10_000)).encode()
        t = time.perf_counter()
        load_rows(service, "arxiv", "arxiv.jsonl", data, progress=True)
        print(f"load: 10,000 rows in {time.perf_counter() - t:.1f}s")
        columns = {c.name: c for c in service.columns("arxiv")}
        subjects = ["gene expression in cancer", "neural networks", "protein structure", "vaccine trials"] * 25
        for s in subjects[:5]:
            service.search("arxiv", s, limit=10)

        def lat(where: str | None) -> list[float]:
            out = []
            for s in subjects:
                t0 = time.perf_counter()
                service.search("arxiv", s, where=where, limit=10)
                out.append((time.perf_counter() - t0) * 1000)
            return out

        base = lat(None)
        print(f"unfiltered search: p50 {statistics.median(base):.1f} ms, p99 {sorted(base)[98]:.1f} ms")
        for name, where in FILTERS.items():
            t0 = time.perf_counter()
            for _ in range(200):
                parsed = parse_where(where, columns)
            parse_us = (time.perf_counter() - t0) / 200 * 1e6
            t0 = time.perf_counter()
            for _ in range(200):
                compile_sqlite(parsed, lambda c: f"json_extract(fields, '$.{c.name}')")
            compile_us = (time.perf_counter() - t0) / 200 * 1e6
            filtered = lat(where)
            print(f"{name}: parse {parse_us:.0f} µs, compile to SQL {compile_us:.0f} µs; search p50 "
                  f"{statistics.median(filtered):.1f} ms, p99 {sorted(filtered)[98]:.1f} ms; "
                  f"p50 ratio to unfiltered {statistics.median(filtered) / statistics.median(base):.2f}")


if __name__ == "__main__":
    main()
