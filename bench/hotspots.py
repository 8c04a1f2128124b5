"""Where a busy server's time goes: py-spy samples of a real ``openqna serve`` answering Azure queries
at concurrency 16, with batching off (``OPENQNA_EMBED_BATCH=1``, ``OPENQNA_QUERY_THREADS=4``: how
questions were served before issue 29) and with the defaults, in one run.

The knowledge base and the questions are ``bench/throughput.py``'s (10,000 QnAs, distinct test
questions, so every request pays for its embedding).  py-spy samples every Python thread 200 times a
second; the figures are the share of the samples (of threads that were not idle) in which a function
is running (self) or on the stack (inclusive).  onnxruntime's own threads are native and not
sampled: the model's time shows as ``Session.run`` on the thread that called it.  py-spy's samples are
wall time of threads it finds running, so beside them the server's CPU time is read per thread
(``psutil``, named from py-spy's thread names) over the same load: the event loop (HTTP, routing,
JSON), the query threads (ranking, the store), the embedding and products workers, and onnxruntime's
own threads.

With ``--env NAME=VALUE`` (repeatable) both servers run with those settings as well, and the knowledge base is
filled with the vectors of the model they run: ``--env OPENQNA_EMBEDDER=fast`` profiles the int8 model's server.

Usage: python bench/hotspots.py [--seconds 8] [--env NAME=VALUE ...]   (needs py-spy, the bench extra)
"""

from __future__ import annotations

import argparse
import collections
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

HERE = Path(__file__).resolve().parent
TOP = 12


def summary(raw: Path) -> tuple[int, collections.Counter[str], collections.Counter[str]]:
    """(samples, self counts, inclusive counts) by function from py-spy's raw (collapsed stacks) output."""
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = [re.sub(r" \((.*?):\d+\)$", r" (\1)", f) for f in stack.split(";")[1:]]  # [0] is the thread
        if not frames:
            continue
        total += int(count)
        own[frames[-1]] += int(count)
        for f in set(frames):
            inclusive[f] += int(count)
    return total, own, inclusive


def thread_names(raw: Path) -> dict[int, str]:
    """Thread id -> name, from py-spy's raw output recorded with ``--threads`` (``thread (TID): NAME;frame;...``)."""
    names = {}
    for line in raw.read_text().splitlines():
        if m := re.match(r"thread \((\d+)\): ([^;]*)", line):
            names[int(m.group(1))] = m.group(2).strip()
    return names


def thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds (user + system) of each thread of process ``pid``."""
    import psutil

    return {t.id: t.user_time + t.system_time for t in psutil.Process(pid).threads()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="a setting for both servers (repeatable), e.g. OPENQNA_EMBEDDER=fast")
    args = parser.parse_args()
    settings = dict(item.split("=", 1) for item in args.env)

    import corpus
    import throughput as tp

    from openqna.kb.service import Service
    from openqna.models.embedder import LocalMiniLM, LocalMiniLMInt8
    from openqna.store.sqlite import SQLiteStore

    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    texts, vectors, questions, _ = corpus.real_data(LocalMiniLM(cache_size=0, max_batch=1))
    kb_texts, kb_vectors = corpus.grow(texts, vectors, 10_000)
    model = LocalMiniLM
    if settings.get("OPENQNA_EMBEDDER") == "fast":  # the int8 model's own vectors (a vector space of its own)
        model = LocalMiniLMInt8
        kb_vectors = corpus.embed_cached(kb_texts, LocalMiniLMInt8(cache_size=0, max_batch=1))
    with tempfile.TemporaryDirectory() as data, open(Path(data) / "server.log", "wb") as log:
        service = Service(SQLiteStore(data), corpus.LookupEmbedder(model.name, kb_texts, kb_vectors))
        corpus.fill_openqna(service, tp.KB, kb_texts)
        service.deploy(tp.KB, "production")
        service.store.close()
        cursor = 0
        runs = {"batching off (OPENQNA_EMBED_BATCH=1, OPENQNA_QUERY_THREADS=4)":
                {"OPENQNA_EMBED_BATCH": "1", "OPENQNA_QUERY_THREADS": "4"}, "defaults (batching on)": {}}
        for label, env in runs.items():
            port = tp.free_port()
            base = f"http://127.0.0.1:{port}"
            proc = tp.start_server(data, port, log, **{**env, **settings})
            raw = Path(data) / "profile.txt"
            try:
                tp.wait_ready(base, proc)
                with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as client:
                    client.submit(tp.load, base, "azure", tp.KB, questions, cursor, 16, 2.0, 1.0).result()  # warm
                    record = subprocess.Popen([spy, "record", "-p", str(proc.pid), "-d", str(int(args.seconds)),
                                               "-r", "200", "-f", "raw", "--threads", "-o", str(raw), "--nonblocking"],
                                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    time.sleep(0.5)
                    before = thread_cpu(proc.pid)
                    r = client.submit(tp.load, base, "azure", tp.KB, questions, cursor + 2000, 16,
                                      args.seconds, 0.0).result()
                    after = thread_cpu(proc.pid)
                    record.wait()
                cursor = r["cursor"]
            finally:
                tp.stop_server(proc)
            total, own, inclusive = summary(raw)
            rps = len(r["latencies"]) / r["seconds"]
            label += "".join(f", {k}={v}" for k, v in settings.items())
            print(f"{label}: Azure query at c=16, {rps:.0f} req/s while sampled; {total} samples; top self: "
                  + "; ".join(f"{c / total:.1%} {f}" for f, c in own.most_common(TOP)))
            parts = ["Session.run (onnxruntime/capi/onnxruntime_inference_collection.py)",
                     "rank (openqna/ranking/ranker.py)", "multiply (openqna/index/products.py)",
                     "MicroBatcher._serve (openqna/models/batching.py)", "Runner.run (asyncio/runners.py)"]
            names = thread_names(raw)
            by_thread: collections.Counter[str] = collections.Counter()
            for tid, seconds in after.items():
                by_thread[names.get(tid, "onnxruntime's own threads (not sampled)")] += seconds - before.get(tid, 0.0)
            n = max(len(r["latencies"]), 1)
            print(f"{label}: server CPU by thread, ms a request ({sum(by_thread.values()) / n * 1000:.1f} in all): "
                  + "; ".join(f"{cpu / n * 1000:.2f} {name}" for name, cpu in by_thread.most_common()
                              if cpu / n * 1000 >= 0.005)
                  + " (MainThread: the event loop, HTTP, routing, JSON; AnyIO worker thread: the query threads, "
                  "ranking and the store; openqna-embed, openqna-products: the batchers' workers)")
            print(f"{label}: inclusive: " + "; ".join(f"{inclusive[p] / total:.1%} {p}" for p in parts)
                  + " (multiply: the batch's question vectors times the KB's, on the products worker, outside rank; "
                  "MicroBatcher._serve: the embedding and products workers; Runner.run: the event loop's own work: "
                  "HTTP, JSON, routing)")


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    main()
