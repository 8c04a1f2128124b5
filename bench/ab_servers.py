"""Two ``openqna serve`` at different code, side by side: the Azure query at concurrency 16 in interleaved rounds.

A change to the per-request path is measured against the code before it in the same run: one server runs the
source tree given with ``--base`` (another git worktree's ``src``), the other this tree's, each on its own copy of
the same knowledge base (``bench/throughput.py``'s 10,000 QnAs, with the vectors of the model the servers run).  In
each round both are asked the same fresh questions at concurrency 16, one server idle while the other is measured,
the order alternating; the machine is shared and its load moves, so each rate is held against the other's measured
seconds apart, and the ratio is reported per round and over all rounds.  Before the rounds both servers answer the
same questions one at a time and their response bodies are compared byte for byte (answers, confidences, order).

The load is ``bench/throughput.py``'s closed loop (aiohttp, the bench extra), from this process.

With ``--store postgresql`` both servers read one database of a PostgreSQL started for the run (``pgserver``).

Usage: python bench/ab_servers.py --base ../fast-path-base/src [--rounds 6] [--seconds 5] [--store sqlite|postgresql]
       [--env NAME=VALUE ...]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"


def _bodies(base: str, kb: str, questions: list[str]) -> list[bytes]:
    """The response bodies of ``questions`` asked one at a time, as the load asks them (``throughput._load``)."""
    import httpx

    with httpx.Client(timeout=60) as client:
        return [client.post(f"{base}/language/:query-knowledgebases", json={"question": q, "top": 3},
                            params={"projectName": kb, "deploymentName": "production",
                                    "api-version": "2021-10-01"}).content for q in questions]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", required=True, help="the src folder of the code to compare against (PYTHONPATH entries, colon-separated)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--same", type=int, default=300, help="questions whose answers are compared byte for byte")
    parser.add_argument("--store", choices=("sqlite", "postgresql"), default="sqlite",
                        help="postgresql: both servers on one database of a PostgreSQL of their own (pgserver)")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="a setting for both servers (repeatable); default OPENQNA_EMBEDDER=fast")
    args = parser.parse_args()
    env = {"OPENQNA_EMBEDDER": "fast", **dict(item.split("=", 1) for item in args.env)}

    import corpus
    import numpy as np
    import psutil
    import throughput as tp

    from openqna.kb.service import Service
    from openqna.models.embedder import LocalMiniLMInt8
    from openqna.store.sqlite import SQLiteStore

    fast = env.get("OPENQNA_EMBEDDER") == "fast"
    texts, vectors, questions, _ = corpus.real_data()
    kb_texts, kb_vectors = corpus.grow(texts, vectors, 10_000)
    name = "openqna-minilm"
    if fast:
        kb_vectors, name = corpus.embed_cached(kb_texts, LocalMiniLMInt8(cache_size=0, max_batch=1)), \
            LocalMiniLMInt8.name
    else:
        from openqna.models.embedder import LocalMiniLM

        name = LocalMiniLM.name
    load_start = os.getloadavg()
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory() as top, open(Path(top) / "server.log", "wb") as log:
        data = {"base": str(Path(top) / "base"), "new": str(Path(top) / "new")}
        pg = None
        if args.store == "postgresql":
            import pgserver

            from openqna.store.postgres import PostgresStore

            pg = pgserver.get_server(str(Path(top) / "pg"), cleanup_mode="stop")
            env["OPENQNA_STORE"] = pg.get_uri()
            store: SQLiteStore | PostgresStore = PostgresStore(env["OPENQNA_STORE"])
        else:
            store = SQLiteStore(data["base"])
        service = Service(store, corpus.LookupEmbedder(name, kb_texts, kb_vectors))
        corpus.fill_openqna(service, tp.KB, kb_texts)
        service.deploy(tp.KB, "production")
        service.store.close()
        if pg is None:
            shutil.copytree(data["base"], data["new"])
        trees = {"base": ":".join(str(Path(part).resolve()) for part in args.base.split(":")), "new": str(SRC)}
        procs, ports, servers = {}, {}, {}
        try:
            for side in ("base", "new"):
                ports[side] = tp.free_port()
                procs[side] = tp.start_server(data[side], ports[side], log, PYTHONPATH=f"{trees[side]}:{HERE}", **env)
            for side in procs:
                tp.wait_ready(f"http://127.0.0.1:{ports[side]}", procs[side])
                servers[side] = psutil.Process(procs[side].pid)
            same = questions[-args.same:]
            bodies = {side: _bodies(f"http://127.0.0.1:{ports[side]}", tp.KB, same) for side in procs}
            differ = sum(a != b for a, b in zip(bodies["base"], bodies["new"]))
            print(f"same answers: {len(same) - differ} of {len(same)} response bodies byte for byte the same")
            rounds = []
            cursor = 0
            for k in range(args.rounds):
                order = ("base", "new") if k % 2 == 0 else ("new", "base")
                runs = {}
                for side in order:
                    cpu0 = sum(servers[side].cpu_times()[:2])
                    r = tp.load(f"http://127.0.0.1:{ports[side]}", "azure", tp.KB, questions, cursor,
                                args.concurrency, args.seconds, 1.0)
                    r["cpu"] = sum(servers[side].cpu_times()[:2]) - cpu0
                    r["load"] = os.getloadavg()[0]
                    runs[side] = r
                cursor = max(r["cursor"] for r in runs.values())
                rounds.append(runs)
                rps = {s: len(r["latencies"]) / r["seconds"] for s, r in runs.items()}
                print(f"round {k + 1} ({' then '.join(order)}): base {rps['base']:.0f} req/s, p99 "
                      f"{corpus.pct(runs['base']['latencies'], 99):.0f} ms; new {rps['new']:.0f} req/s, p99 "
                      f"{corpus.pct(runs['new']['latencies'], 99):.0f} ms; new/base {rps['new'] / rps['base']:.2f}x; "
                      f"load average {runs[order[-1]]['load']:.2f}", flush=True)
        finally:
            for proc in procs.values():
                tp.stop_server(proc)
            if pg is not None:
                pg.cleanup()
    out = {}
    for side in ("base", "new"):
        lat = [ms for r in rounds for ms in r[side]["latencies"]]
        n = len(lat)
        out[side] = {"rps": n / sum(r[side]["seconds"] for r in rounds), "p50": float(np.median(lat)),
                     "p99": corpus.pct(lat, 99), "errors": sum(len(r[side]["errors"]) for r in rounds),
                     "cpu_ms": sum(r[side]["cpu"] for r in rounds) / max(n, 1) * 1000}
    ratios = [len(r["new"]["latencies"]) / r["new"]["seconds"] / (len(r["base"]["latencies"]) / r["base"]["seconds"])
              for r in rounds]
    for side in ("base", "new"):
        o = out[side]
        print(f"{side} ({trees[side]}): {o['rps']:.0f} req/s, p50 {o['p50']:.1f} / p99 {o['p99']:.1f} ms, "
              f"{o['errors']} errors, server CPU {o['cpu_ms']:.2f} ms/request")
    b, n = out["base"], out["new"]
    print(f"new/base at c={args.concurrency}, {args.rounds} interleaved rounds of {args.seconds:g} s "
          f"({', '.join(f'{k}={v}' for k, v in env.items())}): {n['rps'] / b['rps']:.2f}x the requests/s (median of "
          f"rounds {statistics.median(ratios):.2f}x, rounds {min(ratios):.2f}-{max(ratios):.2f}x), p99 "
          f"{n['p99'] / b['p99']:.2f}x, p50 {n['p50'] / b['p50']:.2f}x, server CPU per request "
          f"{n['cpu_ms'] / b['cpu_ms']:.2f}x; load average {load_start[0]:.2f} at the start, "
          f"{os.getloadavg()[0]:.2f} at the end; {time.perf_counter() - t_start:.0f} s")


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    main()
