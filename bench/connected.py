"""A connected ClickHouse table (chdb) beside the same rows loaded into openqna: tool search over HTTP.

The same ``--rows`` rows (default 1,000,000) go two ways: into a chdb MergeTree table
``default.papers (id, title, group, vector Array(Float32))`` that is *connected*
(``openqna table connect``: searched in ClickHouse, ``cosineDistance`` brute force, nothing copied),
and into openqna's own store as passages with metadata ``group``, indexed by openqna (faiss IVF
beyond ``OPENQNA_EXACT_SEARCH_MAX`` vectors).  Texts are SciFact titles numbered per copy; vectors are
synthetic: random unit vectors of 384 dimensions from a fixed seed (the same vector for a row on both
sides), so the figures are about speed, not relevance.  One ``openqna serve`` process serves both
knowledge bases; questions are real SciFact queries, embedded by the server's own model on both paths.

Measured, over HTTP one at a time: ``GET /get_related_{kb}?limit=10`` unfiltered and with
``where_str=group = '3'`` (10% of rows), p50/p99, with the query embedding alone as the baseline.
Both stores are cached under ``bench/.cache/connected-{rows}``.

Usage: python bench/connected.py [--rows 1000000] [--queries 15]
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import corpus  # noqa: E402
from throughput import free_port, start_server, stop_server, wait_ready  # noqa: E402

DIM = 384
LOADED, CONNECTED = "papers", "papers_ch"


def titles() -> list[str]:
    with gzip.open(corpus.SHARED_DATA / "beir-scifact" / "corpus.jsonl.gz", "rt") as f:
        return [t for t in (json.loads(line)["title"].strip() for line in f) if t]


def vectors(start: int, stop: int) -> np.ndarray:
    """Rows start..stop of the synthetic unit vectors (one seed per block of 100k, so any slice is cheap)."""
    out = []
    for block in range(start // 100_000, (stop - 1) // 100_000 + 1):
        v = np.random.default_rng(block).standard_normal((100_000, DIM), dtype=np.float32)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        lo, hi = max(start, block * 100_000), min(stop, (block + 1) * 100_000)
        out.append(v[lo - block * 100_000:hi - block * 100_000])
    return np.vstack(out)


def build(folder: Path, n: int) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from openqna.connected.clickhouse import chdb_session, close_chdb
    from openqna.kb.service import Service
    from openqna.kinds.connected_tables import connect_table
    from openqna.models.embedder import LocalMiniLM
    from openqna.records import QnA
    from openqna.store.sqlite import SQLiteStore

    names = titles()
    text = [f"{names[i % len(names)]} ({i})" for i in range(n)]
    t = time.perf_counter()
    session = chdb_session(str(folder / "clickhouse"))
    session.query("CREATE TABLE default.papers (id UInt64, title String COMMENT 'paper title', "
                  "`group` String COMMENT 'one of 0..9', vector Array(Float32)) ENGINE = MergeTree ORDER BY id")
    parquet = folder / "block.parquet"
    for start in range(0, n, 100_000):
        stop = min(n, start + 100_000)
        v = vectors(start, stop)
        table = pa.table({"id": pa.array(range(start, stop), pa.uint64()), "title": text[start:stop],
                          "group": [corpus.group(i) for i in range(start, stop)],
                          "vector": pa.FixedSizeListArray.from_arrays(pa.array(v.ravel()), DIM)})
        pq.write_table(table, parquet)
        session.query(f"INSERT INTO default.papers SELECT * FROM file('{parquet}', Parquet)")
    parquet.unlink()
    session.query("OPTIMIZE TABLE default.papers FINAL")
    close_chdb()
    in_clickhouse = time.perf_counter() - t

    t = time.perf_counter()
    lookup = corpus.LookupEmbedder(LocalMiniLM.name, text, vectors(0, n))
    service = Service(SQLiteStore(folder), lookup)
    service.ensure_project(LOADED)
    for start in range(0, n, 50_000):
        service.upsert(LOADED, match_content=False, qnas=[
            QnA([], text[i], kind="passage", metadata={"group": corpus.group(i)}, source="papers.jsonl")
            for i in range(start, min(n, start + 50_000))])
    service.indexes.get(LOADED)  # builds the index and saves it
    loaded = time.perf_counter() - t
    connect_table(service, CONNECTED, f"chdb://{folder / 'clickhouse'}", "default.papers", vector="vector",
                  text=["title"], title="title")
    service.connected.close()
    close_chdb()  # the server opens the chdb directory next, and one process at a time may
    service.store.close()
    return f"{n:,} rows into chdb in {in_clickhouse:.0f} s; loaded into openqna and indexed in {loaded:.0f} s"


def ensure(n: int) -> tuple[Path, str]:
    folder = corpus.CACHE / f"connected-{n}"
    if (folder / "done").exists():
        return folder, f"both stores reused from bench/.cache, built earlier: {(folder / 'done').read_text()}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    summary = build(folder, n)
    (folder / "done").write_text(summary)
    return folder, summary


def main() -> None:
    import httpx

    from openqna.models.embedder import LocalMiniLM

    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=15)  # a brute-force search of 1M rows takes seconds
    args = parser.parse_args()
    t = time.perf_counter()
    folder, how = ensure(args.rows)
    print(f"setup: {how} ({time.perf_counter() - t:.0f} s); vectors are synthetic (random unit vectors, seeded), "
          f"texts are SciFact titles")

    _, _, questions, _ = corpus.real_data()
    q = args.queries
    questions = questions[:4 * q + 2]  # every search a question not asked before (the embedder caches)
    floor = corpus.embedding_ms(LocalMiniLM(cache_size=0), questions[:q])
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    results: dict[str, list[float]] = {}
    with open(folder / "server.log", "wb") as log, httpx.Client(timeout=300) as client:
        proc = start_server(str(folder), port, log, OPENQNA_CONNECTED_TIMEOUT="120")  # brute force takes seconds
        try:
            wait_ready(base, proc)
            k = 0
            for w, kb in enumerate((LOADED, CONNECTED)):
                client.get(f"{base}/get_related_{kb}", params={"subject": questions[-1 - w]}).raise_for_status()
                for label, where in (("unfiltered", None), ("group = '3' (10%)", "group = '3'")):
                    lat = []
                    for question in questions[k * q:(k + 1) * q]:
                        params = {"subject": question, "limit": "10", **({"where_str": where} if where else {})}
                        s = time.perf_counter()
                        r = client.get(f"{base}/get_related_{kb}", params=params)
                        lat.append((time.perf_counter() - s) * 1000)
                        r.raise_for_status()
                        hits = [json.loads(line) for line in r.json()["documents"].splitlines()]
                        assert len(hits) == 10 and (where is None or all(h["group"] == "3" for h in hits)), r.text
                    results[f"{kb}|{label}"] = lat
                    k += 1
        finally:
            stop_server(proc)
    f50 = float(np.median(floor))
    print(f"baseline: query embedding alone p50 {f50:.1f} ms in-process")
    print("| where_str | loaded into openqna p50 / p99 ms | connected chdb table p50 / p99 ms | connected / loaded |")
    print("|---|---|---|---|")
    for label in ("unfiltered", "group = '3' (10%)"):
        a, b = results[f"{LOADED}|{label}"], results[f"{CONNECTED}|{label}"]
        print(f"| {label} | {np.median(a):.1f} / {corpus.pct(a, 99):.1f} | {np.median(b):.1f} / "
              f"{corpus.pct(b, 99):.1f} | {np.median(b) / np.median(a):.1f}x |")
    print(f"{args.rows:,} rows, GET /get_related_{{kb}} limit 10 over HTTP one at a time, {q} questions each")


if __name__ == "__main__":
    main()
