"""One million passages in the embedded store: start-up, query latency and memory of ``openqna serve``.

Texts are real: the SciFact abstracts cut into passages of two sentences (~14k), repeated
with a copy number to reach 1,000,000.  Vectors are synthetic but in the model's space: the
real MiniLM vectors of the banking77/hwu64 training utterances grown by perturbed copies
(``corpus.grow``), one per passage, so questions embedded by the server's own model land in
meaningful neighbourhoods.  Every passage has metadata ``group`` (``i % 10``).

Building that store takes minutes (writing 1M passages, then the first index build, which is
saved beside it), so it is cached under ``bench/.cache/million-*`` and rebuilt only when
it is missing or its saved index is stale; the figures measured here come from a fresh
``openqna serve`` process on that store:

- start-up: launch -> ``/healthz`` answers (the saved index is loaded before it does) -> first
  answered tool search; target <= 5 s;
- ``GET /get_related_{kb}`` over HTTP, one at a time, 200 questions, without and with
  ``where_str=group = '3'`` (10%); target p99 <= 100 ms;
- RSS after those queries; target <= 4 GB.

Baselines from the same run: the query embedding alone (in-process) and ``/healthz``.

Usage: python bench/million.py [--passages 1000000]
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import shutil
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import corpus  # noqa: E402
from throughput import free_port, start_server, stop_server, wait_ready  # noqa: E402

KB = "scifact-million"
QUERIES = 200


def passages() -> list[str]:
    out = []
    with gzip.open(corpus.SHARED_DATA / "beir-scifact" / "corpus.jsonl.gz", "rt") as f:
        for line in f:
            sentences = re.split(r"(?<=[.!?])\s+", json.loads(line)["text"].strip())
            out += [" ".join(sentences[i:i + 2]) for i in range(0, len(sentences), 2) if sentences[i].strip()]
    return out


def build(folder: Path, n: int) -> str:
    """Write ``n`` passages into a new store in ``folder`` and build (and save) its index; a summary."""
    from openqna.kb.service import Service
    from openqna.models.embedder import LocalMiniLM
    from openqna.records import QnA
    from openqna.store.sqlite import SQLiteStore

    texts = passages()
    base, base_vectors, _, _ = corpus.real_data()
    _, vectors = corpus.grow(base, base_vectors, n)
    names = [texts[i % len(texts)] + ("" if i < len(texts) else f" ({i // len(texts)})") for i in range(n)]
    embedder = corpus.LookupEmbedder(LocalMiniLM.name, names, vectors)
    service = Service(SQLiteStore(folder), embedder)
    service.ensure_project(KB)
    t = time.perf_counter()
    for start in range(0, n, 50_000):
        service.upsert(KB, match_content=False, qnas=[
            QnA([], names[i], kind="passage", metadata={"group": corpus.group(i)}, source="scifact.md")
            for i in range(start, min(n, start + 50_000))])
    written = time.perf_counter() - t
    t = time.perf_counter()
    service.indexes.get(KB)  # builds the index and saves it (with its IVF index)
    indexed = time.perf_counter() - t
    service.store.close()
    return (f"{n:,} passages ({len(texts):,} distinct SciFact passages) written in {written:.0f} s; "
            f"index built and saved in {indexed:.0f} s")


def ensure_store(n: int) -> tuple[Path, str]:
    from openqna.index import saved_index
    from openqna.index.index_cache import IndexCache
    from openqna.store.sqlite import SQLiteStore

    folder = corpus.CACHE / f"million-{n}"
    if (folder / "done").exists():
        store = SQLiteStore(folder)
        saved = IndexCache(store).saved()
        store.close()
        if saved:
            return folder, "store and saved index reused from bench/.cache"
        t = time.perf_counter()  # the saved index's format changed since: rebuild the index only
        IndexCache(SQLiteStore(folder)).get(KB)
        return folder, f"store reused from bench/.cache; index rebuilt and saved in {time.perf_counter() - t:.0f} s"
    shutil.rmtree(folder, ignore_errors=True)
    summary = build(folder, n)
    (folder / "done").touch()
    assert saved_index.FORMAT  # the cache is keyed by the store; the saved index checks its own format
    return folder, summary


def main() -> None:
    import httpx
    import psutil

    parser = argparse.ArgumentParser()
    parser.add_argument("--passages", type=int, default=1_000_000)
    args = parser.parse_args()

    t = time.perf_counter()
    folder, how = ensure_store(args.passages)
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**30
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux
    print(f"setup: {how} ({time.perf_counter() - t:.0f} s, peak RSS of this process {peak:.1f} GiB); data folder "
          f"{size:.1f} GiB")

    from openqna.models.embedder import LocalMiniLM

    _, _, questions, _ = corpus.real_data()
    questions = questions[:2 * QUERIES + 1]  # each search a question not asked before (the embedder caches)
    floor = corpus.embedding_ms(LocalMiniLM(cache_size=0), questions[:QUERIES])

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    url = f"{base}/get_related_{KB}"
    with open(folder / "server.log", "wb") as log, httpx.Client(timeout=300) as client:
        t = time.perf_counter()
        proc = start_server(str(folder), port, log)
        try:
            ready = wait_ready(base, proc)
            r = client.get(url, params={"subject": questions[0]})
            r.raise_for_status()
            assert r.json()["num_retrieved"], r.text
            first = time.perf_counter() - t
            health = []
            for _ in range(50):
                s = time.perf_counter()
                client.get(f"{base}/healthz").raise_for_status()
                health.append((time.perf_counter() - s) * 1000)
            rows = {}
            for n, (label, where) in enumerate((("unfiltered", None), ("where_str group = '3' (10%)", "group = '3'"))):
                lat = []
                for q in questions[1 + n * QUERIES:1 + (n + 1) * QUERIES]:
                    params = {"subject": q, "limit": "10", **({"where_str": where} if where else {})}
                    s = time.perf_counter()
                    r = client.get(url, params=params)
                    lat.append((time.perf_counter() - s) * 1000)
                    r.raise_for_status()
                    hits = [json.loads(line) for line in r.json()["documents"].splitlines()]
                    assert len(hits) == 10 and (where is None or all(h["group"] == "3" for h in hits)), r.text
                rows[label] = lat
            rss = psutil.Process(proc.pid).memory_info().rss / 2**30
        finally:
            stop_server(proc)
    print(f"start-up: serve launched -> /healthz {ready:.1f} s (saved index loaded before it listens) -> first "
          f"answered tool search {first:.1f} s (target <= 5 s: {'met' if first <= 5 else 'NOT met'})")
    f50 = np.median(floor)
    print(f"baselines: query embedding alone p50 {f50:.1f} / p99 {corpus.pct(floor, 99):.1f} ms in-process; "
          f"GET /healthz p50 {np.median(health):.1f} ms")
    for label, lat in rows.items():
        p50, p99 = np.median(lat), corpus.pct(lat, 99)
        print(f"GET /get_related_{KB} limit 10, {label}, over HTTP one at a time ({len(lat)} questions): "
              f"p50 {p50:.1f} / p99 {p99:.1f} ms = {p50 / f50:.1f}x the embedding p50 (target p99 <= 100 ms: "
              f"{'met' if p99 <= 100 else 'NOT met'})")
    print(f"server RSS after {2 * QUERIES + 1} searches: {rss:.2f} GiB (target <= 4 GiB: "
          f"{'met' if rss <= 4 else 'NOT met'})")


if __name__ == "__main__":
    main()
