"""Tail latency of the Azure query at concurrency 16 under several server configurations, interleaved.

``bench/throughput.py`` measures one configuration after another, so on a shared machine a change
of load between two of them reads as a difference between them.  This script starts one
``openqna serve`` per configuration on the same data (``bench/throughput.py``'s 10,000 QnAs and
distinct questions) and loads them in turn, round after round in a shuffled order, so each
configuration sees the same mix of quiet and busy moments; it reports each one's requests/s, p50 and
p99 (over all its rounds), errors and server CPU per request, and each figure's ratio to the first
configuration's.  Only the server under load works: the others are idle between their turns.

A configuration is ``NAME`` or ``NAME:VAR=VALUE,VAR=VALUE``: environment variables for its server,
for example ``off:OPENQNA_EMBED_BATCH=1,OPENQNA_QUERY_THREADS=4``, or ``PYTHONPATH=/path/to/src`` to
serve another checkout's code.  ``--nice -10`` (as root) runs the servers and the load ahead of the
machine's other work, so that a machine shared with other jobs measures closer to an idle one.

Usage: python bench/tail.py [--rounds 4] [--seconds 5] [--concurrency 16] CONFIG [CONFIG ...]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

HERE = Path(__file__).resolve().parent


def parse_config(raw: str) -> tuple[str, dict[str, str]]:
    name, _, assignments = raw.partition(":")
    env = dict(a.split("=", 1) for a in assignments.split(",") if a)
    return name, env


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("configs", nargs="+", help="NAME or NAME:VAR=VALUE,...; the first is the baseline")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=5.0, help="measured seconds per configuration and round")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--nice", type=int, default=0,
                        help="scheduling priority of the servers and the load (negative: ahead of other work; root)")
    args = parser.parse_args()

    import corpus
    import numpy as np
    import psutil
    import throughput as tp

    from openqna.kb.service import Service
    from openqna.models.embedder import LocalMiniLM
    from openqna.store.sqlite import SQLiteStore

    configs = [parse_config(c) for c in args.configs]
    texts, vectors, questions, _ = corpus.real_data(LocalMiniLM(cache_size=0, max_batch=1))
    kb_texts, kb_vectors = corpus.grow(texts, vectors, 10_000)
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as data, open(Path(data) / "server.log", "wb") as log:
        service = Service(SQLiteStore(data), corpus.LookupEmbedder(LocalMiniLM.name, kb_texts, kb_vectors))
        corpus.fill_openqna(service, tp.KB, kb_texts)
        service.deploy(tp.KB, "production")
        service.store.close()
        servers = {}
        try:
            for name, env in configs:
                port = tp.free_port()
                servers[name] = (f"http://127.0.0.1:{port}", tp.start_server(data, port, log, **env))
            for base, proc in servers.values():
                tp.wait_ready(base, proc)
                psutil.Process(proc.pid).nice(args.nice)
            lat: dict[str, list[float]] = {name: [] for name, _ in configs}
            rps: dict[str, list[float]] = {name: [] for name, _ in configs}
            errors = dict.fromkeys(lat, 0)
            cpu = dict.fromkeys(lat, 0.0)
            cursor = 0
            with ProcessPoolExecutor(1, mp_context=get_context("spawn"), initializer=os.nice,
                                     initargs=(args.nice,)) as client:
                # Every configuration asks the same questions in a round (the utterances differ in length, and so
                # in cost), and each server never asks one twice within its 4,096-question cache: the windows follow
                # each other round the ~5,000 questions.
                ends = [client.submit(tp.load, base, "azure", tp.KB, questions, cursor, args.concurrency,
                                      1.0, 1.0).result()["cursor"]
                        for base, _ in servers.values()]  # warm each server: index built, model loaded
                cursor = max(ends)
                for _ in range(args.rounds):
                    order = list(servers)
                    rng.shuffle(order)
                    ends = []
                    for name in order:
                        base, proc = servers[name]
                        server = psutil.Process(proc.pid)
                        cpu0 = sum(server.cpu_times()[:2])
                        r = client.submit(tp.load, base, "azure", tp.KB, questions, cursor, args.concurrency,
                                          args.seconds, 1.0).result()
                        cpu[name] += sum(server.cpu_times()[:2]) - cpu0
                        ends.append(r["cursor"])
                        lat[name] += r["latencies"]
                        rps[name].append(len(r["latencies"]) / r["seconds"])
                        errors[name] += len(r["errors"])
                    cursor = max(ends)
        finally:
            for _, proc in servers.values():
                tp.stop_server(proc)
    first = configs[0][0]
    p99 = {name: corpus.pct(xs, 99) for name, xs in lat.items()}
    mean_rps = {name: float(np.mean(xs)) for name, xs in rps.items()}
    print(f"Azure query at c={args.concurrency}, {args.rounds} interleaved rounds of {args.seconds:.0f} s per "
          f"configuration; ratios to '{first}'")
    for name, env in configs:
        print(f"- {name} ({', '.join(f'{k}={v}' for k, v in env.items()) or 'defaults'}): {mean_rps[name]:.0f} req/s "
              f"({mean_rps[name] / mean_rps[first]:.2f}x; rounds {', '.join(f'{x:.0f}' for x in rps[name])}), "
              f"p50 {np.median(lat[name]):.1f} / p99 {p99[name]:.1f} ms (p99 {p99[name] / p99[first]:.2f}x), "
              f"{errors[name]} errors, server CPU {cpu[name] / max(len(lat[name]), 1) * 1000:.1f} ms/request")


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    main()
