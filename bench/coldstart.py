"""Cold start and memory of ``openqna serve`` with 100,000 QnAs in the SQLite store.

Time from launching the process to its first answered Azure query, and its RSS after 50
warm-up queries, twice: the first launch (the in-memory index is built from the store on the
first query and saved, see ``index/saved_index.py``) and a restart (the saved index is
loaded before ``/healthz`` answers).  Baseline in the same run: the same for a store whose knowledge base is
empty.  The 100k QnAs are the real banking77/hwu64 utterances and perturbed copies with their
vectors (see ``bench/corpus.py``), written before the server starts.

Usage: python bench/coldstart.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import corpus  # noqa: E402
from throughput import free_port, start_server, stop_server  # noqa: E402

KB = "big"


def first_answer(data: str, questions: list[str], more: bool = False) -> tuple:
    """(seconds to /healthz, seconds to the first answered query, RSS MiB after 50 more queries,
    milliseconds of each of the 200 queries after those, asked one at a time over HTTP, and with
    ``more`` the same for the other routes, by label)."""
    import httpx
    import psutil

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    url = f"{base}/language/:query-knowledgebases"
    params = {"projectName": KB, "deploymentName": "production", "api-version": "2021-10-01"}
    with open(Path(data) / "server.log", "wb") as log, httpx.Client(timeout=300) as client:
        t = time.perf_counter()
        proc = start_server(data, port, log)
        try:
            ready = None
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"openqna serve exited with {proc.returncode}")
                try:
                    if ready is None and client.get(f"{base}/healthz").status_code == 200:
                        ready = time.perf_counter() - t
                    if ready is not None:
                        r = client.post(url, params=params, json={"question": questions[0], "top": 3})
                        r.raise_for_status()
                        assert r.json()["answers"], r.text
                        answered = time.perf_counter() - t
                        break
                except httpx.TransportError:
                    time.sleep(0.02)
            for q in questions[1:51]:
                client.post(url, params=params, json={"question": q, "top": 3}).raise_for_status()
            rss = psutil.Process(proc.pid).memory_info().rss / 2**20
            latencies = []
            for q in questions[51:251]:
                s = time.perf_counter()
                client.post(url, params=params, json={"question": q, "top": 3}).raise_for_status()
                latencies.append((time.perf_counter() - s) * 1000)
            others = {}
            if more:  # the other routes at 100k, after the RSS reading (tools search the live index: built here)
                tools = f"{base}/get_related_{KB}"
                group = {"metadataFilter": {"metadata": [{"key": "group", "value": "3"}]}}
                routes = {
                    "Azure query with a metadata filter (10%)":
                        lambda q: client.post(url, params=params, json={"question": q, "top": 3, "filters": group}),
                    "tool search, limit 10": lambda q: client.get(tools, params={"subject": q, "limit": "10"}),
                    "tool search, limit 10, where_str group = '3' (10%)":
                        lambda q: client.get(tools, params={"subject": q, "limit": "10", "where_str": "group = '3'"}),
                }
                for n, (label, call) in enumerate(routes.items()):
                    call(questions[0]).raise_for_status()  # warm: the first tool search loads the live index
                    lat = []
                    for q in questions[451 + 200 * n:651 + 200 * n]:  # unseen: the embedder's cache misses
                        s = time.perf_counter()
                        call(q).raise_for_status()
                        lat.append((time.perf_counter() - s) * 1000)
                    others[label] = lat
        finally:
            stop_server(proc)
    return ready, answered, rss, latencies, others


def main() -> None:
    from openqna.kb.service import Service
    from openqna.models.embedder import LocalMiniLM
    from openqna.store.sqlite import SQLiteStore

    texts, vectors, questions, _ = corpus.real_data()
    docs, doc_vectors = corpus.grow(texts, vectors, 100_000)
    rows = {}
    for label, n in (("empty knowledge base", 0), ("100k QnAs", len(docs))):
        with tempfile.TemporaryDirectory() as data:
            service = Service(SQLiteStore(data), corpus.LookupEmbedder(LocalMiniLM.name, docs[:n], doc_vectors[:n]))
            written = corpus.fill_openqna(service, KB, docs[:n])
            service.deploy(KB, "production")
            size = (Path(data) / "openqna.sqlite3").stat().st_size / 2**20
            service.store.close()
            launches = ("first launch",) if n == 0 else ("first launch (index built on the first query, then saved)",
                                                          "restart (saved index loaded before /healthz)")
            for launch in launches:
                rows[(label, launch)] = first_answer(data, questions, more=launch.startswith("restart"))
                ready, answered, rss, lat, others = rows[(label, launch)]
                print(f"{label}, {launch}: store {size:.0f} MiB (written in {written:.1f} s); serve launched -> "
                      f"/healthz {ready:.1f} s -> first answered query {answered:.1f} s; RSS after 50 queries "
                      f"{rss:.0f} MiB; then Azure query over HTTP, one at a time: p50 {np.median(lat):.1f} / p99 "
                      f"{np.percentile(lat, 99):.1f} ms ({len(lat)} queries)")
                for route, lat in others.items():
                    print(f"{label}, {launch}: {route} over HTTP, one at a time: p50 {np.median(lat):.1f} / p99 "
                          f"{np.percentile(lat, 99):.1f} ms ({len(lat)} queries)")
    (_, e_answer, e_rss, e_lat, _), (_, b_answer, b_rss, b_lat, _), (_, r_answer, r_rss, r_lat, _) = rows.values()
    print(f"100k vs empty: first answer {b_answer / e_answer:.1f}x the time (+{b_answer - e_answer:.1f} s) on the "
          f"first launch, {r_answer / e_answer:.1f}x (+{r_answer - e_answer:.1f} s) on a restart; RSS {r_rss / e_rss:.1f}x "
          f"(+{r_rss - e_rss:.0f} MiB) on a restart, {b_rss / e_rss:.1f}x on the first launch; HTTP query p50 "
          f"{np.median(r_lat) / np.median(e_lat):.2f}x the empty knowledge base's (which embeds the question and "
          "answers the default answer)")


if __name__ == "__main__":
    main()
