"""HTTP throughput of a real ``openqna serve`` at concurrency 1, 4 and 16.

The server runs as a process of its own on a SQLite store holding a knowledge base of
10,000 QnAs (banking77 and hwu64 training utterances with their real MiniLM vectors, see
``bench/corpus.py``) and an OpenAI vector store of SciFact abstracts uploaded through
``/v1/files``.  The load comes from another process (asyncio + aiohttp, closed loop: each of
N connections sends its next request when the last one is answered).  Every request asks a
question the server has not seen recently (the cycle of ~5,000 test utterances is longer
than the embedder's 4,096-entry query cache), so every request pays for its embedding: the Azure
runs, the first to ask questions, ask ones the server has never seen, from the first on.

Endpoints: the Azure query (``POST /language/:query-knowledgebases``), the tool search
(``GET /get_related_{kb}``) and ``POST /v1/vector_stores/{id}/search``.  Baselines from the
same run: ``GET /healthz`` of the same server (HTTP stack alone), the embedder's own
single-query throughput in-process (the model alone, no batcher; on the first 300 questions, and
again after the server stopped on the questions the Azure run at concurrency 16 asked, which
that run's ratio uses: the utterances differ in length, so a rate on other texts misleads by up
to 20%; and the same questions in the server's batches on one thread, the most one embedding worker can
do), ``Service.ask`` in-process one
question at a time (on the first questions the Azure run at concurrency 1 asks), and the same server
restarted with batching off and the query pool of before (``OPENQNA_EMBED_BATCH=1``,
``OPENQNA_QUERY_THREADS=4``), asked the questions the Azure runs at concurrency 1 and 16 asked.  Targets (issue 29): the Azure query at
concurrency 16 (a run three times as long as the others) at >= 1.0x the embedder's one-at-a-time
rate (>= 150 queries/s) with no errors and
p99 <= 150 ms; at concurrency 1, p50 over HTTP <= 1.3x the in-process ask; server CPU per request
<= 1.2x the in-process ask's.

The int8 MiniLM (``OPENQNA_EMBEDDER=fast``) in the same run (``measure_fast``): the same QnAs filled with its own
vectors (a vector space of its own) in a store of their own, its in-process ask and its server at c=1 on the
questions the default's c=1 run asked, and at c=16 its server and the default's side by side in interleaved rounds
on the same questions, each round followed by both models alone one question at a time on them.  Targets (issue 43;
int8 is not the default, so both models are held to them, from the rounds): the Azure query at c=16 at >= 1.3x the
fp32 model's one-at-a-time rate on the same questions, p99 <= 150 ms, no errors; at c=1, p50 over HTTP <= 1.3x the
in-process ask with the same model.

Usage: python bench/throughput.py [--seconds 5] [--fast-env NAME=VALUE ...]
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

HERE = Path(__file__).resolve().parent
KB = "bank"
LEVELS = (1, 4, 16)
TARGET = 150.0
ISSUE43_RATIO = 1.3


# -- the load generator (runs in its own process: keep imports light) ---------------------------------
async def _load(base: str | list[str], kind: str, target: str, questions: list[str], start: int, concurrency: int,
                seconds: float, warmup: float, deployment: str = "production") -> dict:
    """``base``: one server's URL, or several that the requests take in turn (bench/scale.py's two servers)."""
    import aiohttp

    bases = [base] if isinstance(base, str) else base
    latencies: list[float] = []
    errors: list[str] = []
    cursor = start
    sent = 0
    connector = aiohttp.TCPConnector(limit=concurrency * len(bases))
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(q: str) -> tuple[int, float]:
            nonlocal sent
            base = bases[sent % len(bases)]
            sent += 1
            t = time.perf_counter()
            if kind == "azure":
                r = session.post(f"{base}/language/:query-knowledgebases", json={"question": q, "top": 3},
                                 params={"projectName": target, "deploymentName": deployment,
                                         "api-version": "2021-10-01"})
            elif kind == "tools":
                r = session.get(f"{base}/get_related_{target}", params={"subject": q})
            elif kind == "vector_store":
                r = session.post(f"{base}/v1/vector_stores/{target}/search", json={"query": q, "max_num_results": 10})
            else:
                r = session.get(f"{base}/healthz")
            async with r as resp:
                await resp.read()
                return resp.status, (time.perf_counter() - t) * 1000

        async def worker(deadline: float, record: bool) -> None:
            nonlocal cursor
            while time.perf_counter() < deadline:
                q = questions[cursor % len(questions)]
                cursor += 1
                try:
                    status, ms = await one(q)
                    if record:
                        latencies.append(ms)
                        if status != 200:
                            errors.append(str(status))
                except Exception as exc:  # a refused or dropped connection is an error, not a crash
                    if record:
                        errors.append(type(exc).__name__)

        await asyncio.gather(*(worker(time.perf_counter() + warmup, False) for _ in range(concurrency)))
        cpu0, t0 = time.process_time(), time.perf_counter()
        await asyncio.gather(*(worker(t0 + seconds, True) for _ in range(concurrency)))
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    return {"latencies": latencies, "errors": errors, "seconds": wall, "client_cpu": cpu, "cursor": cursor}


def load(*args) -> dict:
    return asyncio.run(_load(*args))


# -- the server ----------------------------------------------------------------------------------------
def one_by_one(call, items) -> tuple[list[float], float]:
    """``call(item)`` for each item in turn: the seconds of each, and the process's CPU ms per item."""
    seconds, cpu = [], time.process_time()
    for item in items:
        t = time.perf_counter()
        call(item)
        seconds.append(time.perf_counter() - t)
    return seconds, (time.process_time() - cpu) / len(seconds) * 1000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(data: str, port: int, log, **env: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "openqna.cli.main", "serve", "--data", data, "--port", str(port),
                             "--no-sample"], stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "HF_HUB_OFFLINE": "1", **env})


def wait_ready(base: str, proc: subprocess.Popen, timeout: float = 300) -> float:
    """Seconds until GET /healthz answers 200."""
    import httpx

    t = time.perf_counter()
    while time.perf_counter() - t < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"openqna serve exited with {proc.returncode}")
        try:
            if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                return time.perf_counter() - t
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise RuntimeError("openqna serve did not start")


def stop_server(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def scifact_markdown(n: int) -> bytes:
    lines = []
    with gzip.open(Path(__file__).resolve().parents[2] / "shared" / "data" / "beir-scifact" / "corpus.jsonl.gz",
                   "rt") as f:
        for line, _ in zip(f, range(n)):
            doc = json.loads(line)
            lines += [f"# {doc['title']}", "", doc["text"], ""]
    return "\n".join(lines).encode()


def make_vector_store(base: str, n_abstracts: int) -> tuple[str, float]:
    """Upload SciFact abstracts as one Markdown file and wait for the vector store; (id, seconds)."""
    import httpx

    t = time.perf_counter()
    with httpx.Client(base_url=base, timeout=120) as client:
        f = client.post("/v1/files", data={"purpose": "assistants"},
                        files={"file": ("scifact.md", scifact_markdown(n_abstracts), "text/markdown")})
        f.raise_for_status()
        vs = client.post("/v1/vector_stores", json={"name": "scifact", "file_ids": [f.json()["id"]]})
        vs.raise_for_status()
        vs_id = vs.json()["id"]
        while (state := client.get(f"/v1/vector_stores/{vs_id}").json())["status"] != "completed":
            time.sleep(0.2)
        if state["file_counts"]["completed"] != 1:
            raise RuntimeError(f"vector store file failed: {state}")
    return vs_id, time.perf_counter() - t


def azure_run(client, base: str, server, questions: list[str], start: int, concurrency: int, seconds: float) -> dict:
    """One closed-loop Azure query run from ``start`` in ``questions``: its latencies, errors, seconds, server CPU."""
    cpu0 = sum(server.cpu_times()[:2])
    r = client.submit(load, base, "azure", KB, questions, start, concurrency, seconds, 1.0).result()
    return {"latencies": r["latencies"], "errors": len(r["errors"]), "seconds": r["seconds"],
            "server_cpu": sum(server.cpu_times()[:2]) - cpu0, "window": (start, r["cursor"])}


def warm(base: str, question: str) -> None:
    """One Azure query, so that the server has loaded its index before a measured run."""
    import httpx

    httpx.post(f"{base}/language/:query-knowledgebases", json={"question": question, "top": 3}, timeout=300,
               params={"projectName": KB, "deploymentName": "production", "api-version": "2021-10-01"}
               ).raise_for_status()


def summed(runs: list[dict]) -> dict:
    """Runs taken together: requests/s, p50, p99, errors and server CPU per request."""
    import corpus
    import numpy as np

    lat = [ms for r in runs for ms in r["latencies"]]
    seconds = sum(r["seconds"] for r in runs)
    return {"rps": len(lat) / seconds, "p50": float(np.median(lat)), "p99": corpus.pct(lat, 99),
            "errors": sum(r["errors"] for r in runs), "cpu_ms": sum(r["server_cpu"] for r in runs) / len(lat) * 1000}


FAST_ROUNDS = 3


def measure_fast(default_data: str, kb_texts: list[str], questions: list[str], window: dict, seconds: float, log,
                 env: dict[str, str]) -> dict:
    """The int8 MiniLM (``OPENQNA_EMBEDDER=fast``, issue 43) against the default, in interleaved rounds.

    The same 10,000 QnAs filled with the int8 model's own vectors (a vector space of its own: cached like the
    default's, ``corpus.embed_cached``) in a store of their own; its in-process ask one question at a time on the
    questions the default's Azure run at c=1 asked first, then its server at c=1 on the questions that run asked.
    At c=16 the default's server (restarted on its data) and the int8 server run side by side, idle in turn, asked
    the same fresh questions in each of ``FAST_ROUNDS`` rounds (which goes first alternates), and after each round
    both models alone, in-process, one question at a time, on the round's questions: the machine is shared, and
    its load moves within a run, so each rate is held against rates measured seconds apart.
    """
    import corpus
    import numpy as np
    import psutil

    from openqna.kb.service import AskRequest, Service
    from openqna.models.embedder import LocalMiniLM, LocalMiniLMInt8
    from openqna.store.sqlite import SQLiteStore

    models = {"default": LocalMiniLM(cache_size=0, max_batch=1), "fast": LocalMiniLMInt8(cache_size=0, max_batch=1)}
    vectors = corpus.embed_cached(kb_texts, models["fast"])
    out: dict = {"rounds": []}
    with tempfile.TemporaryDirectory() as data:
        service = Service(SQLiteStore(data), corpus.LookupEmbedder(LocalMiniLMInt8.name, kb_texts, vectors))
        corpus.fill_openqna(service, KB, kb_texts)
        service.deploy(KB, "production")
        real = Service(service.store, models["fast"])
        real.ask(KB, "production", AskRequest(question=questions[0]))  # builds the in-memory index
        asks, out["ask_cpu"] = one_by_one(lambda q: real.ask(KB, "production", AskRequest(question=q, top=3)),
                                          questions[:200])
        out["ask_p50"] = float(np.median(asks)) * 1000
        service.store.close()
        procs, bases = {}, {}
        try:
            for name, folder, extra in (("default", default_data, {}),
                                        ("fast", data, {"OPENQNA_EMBEDDER": "fast", **env})):
                port = free_port()
                bases[name], procs[name] = f"http://127.0.0.1:{port}", start_server(folder, port, log, **extra)
            for name in procs:
                wait_ready(bases[name], procs[name])
                warm(bases[name], questions[-1])
            servers = {name: psutil.Process(proc.pid) for name, proc in procs.items()}
            with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as client:
                out["c1"] = summed([azure_run(client, bases["fast"], servers["fast"], questions,
                                              window[("azure", 1)][0], 1, seconds)])
                cursor = window[("azure", 16)][0]
                for k in range(FAST_ROUNDS):
                    order = ("default", "fast") if k % 2 == 0 else ("fast", "default")
                    runs = {name: azure_run(client, bases[name], servers[name], questions, cursor, 16, seconds)
                            for name in order}
                    end = max(r["window"][1] for r in runs.values())
                    asked = [questions[i % len(questions)] for i in range(cursor, end)]
                    asked = asked[::max(1, len(asked) // 300)]
                    alone = {}
                    for name, model in models.items():
                        model.embed([asked[0]])
                        took, _ = one_by_one(lambda q, m=model: m.embed([q]), asked)
                        alone[name] = len(took) / sum(took)
                    out["rounds"].append({"runs": runs, "alone": alone})
                    cursor = end
        finally:
            for proc in procs.values():
                stop_server(proc)
    for name in models:
        out[name] = summed([r["runs"][name] for r in out["rounds"]])
        out[f"{name}_alone"] = float(np.mean([r["alone"][name] for r in out["rounds"]]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0, help="measured seconds per endpoint and level")
    parser.add_argument("--abstracts", type=int, default=30, help="SciFact abstracts in the vector store")
    parser.add_argument("--fast-env", action="append", default=[], metavar="NAME=VALUE",
                        help="a setting for the server run with OPENQNA_EMBEDDER=fast only (repeatable)")
    args = parser.parse_args()
    fast_env = dict(item.split("=", 1) for item in args.fast_env)

    import corpus
    import numpy as np
    import psutil

    from openqna import settings
    from openqna.cli.main import one_blas_thread
    from openqna.kb.service import AskRequest, Service
    from openqna.models.embedder import LocalMiniLM
    from openqna.store.sqlite import SQLiteStore

    embedder = LocalMiniLM(cache_size=0, max_batch=1)  # the model itself, one question at a time, no batcher
    one_blas_thread()  # as the server runs
    texts, vectors, questions, qvectors = corpus.real_data(embedder)
    kb_texts, kb_vectors = corpus.grow(texts, vectors, 10_000)
    floor, floor_cpu = one_by_one(lambda q: embedder.embed([q]), questions[:300])
    floor_qps = len(floor) / sum(floor)
    print(f"embedder alone, in-process, one query at a time: {floor_qps:.0f} queries/s "
          f"(p50 {np.median(floor) * 1000:.1f} ms, CPU {floor_cpu:.1f} ms/query); server: one `openqna serve` "
          f"process, OPENQNA_THREADS={os.environ.get('OPENQNA_THREADS', '2')}, "
          f"OPENQNA_QUERY_THREADS={os.environ.get('OPENQNA_QUERY_THREADS', 'auto')} (= 8 x cores by default)")

    with tempfile.TemporaryDirectory() as data, open(Path(data) / "server.log", "wb") as log:
        lookup = corpus.LookupEmbedder(LocalMiniLM.name, kb_texts, kb_vectors, fallback=embedder)
        service = Service(SQLiteStore(data), lookup)
        corpus.fill_openqna(service, KB, kb_texts)
        service.deploy(KB, "production")
        lookup.add(questions[300:500], qvectors[300:500])
        service.ask(KB, "production", AskRequest(question=questions[300]))  # builds the in-memory index
        ask, ask_cpu = one_by_one(lambda q: service.ask(KB, "production", AskRequest(question=q, top=3)),
                                  questions[300:500])
        print(f"Service.ask in-process with the question vector precomputed (ranking and store, no HTTP, no "
              f"embedding): p50 {np.median(ask) * 1000:.1f} ms, CPU {ask_cpu:.1f} ms/query; with the embedder's "
              f"CPU that is {floor_cpu + ask_cpu:.1f} ms of CPU per question before HTTP")
        # The same questions through Service.ask in-process with the real model, one at a time: what a
        # question costs before HTTP (the baseline of the server's c=1 latency and CPU per request).
        real = Service(service.store, LocalMiniLM(cache_size=0, max_batch=1))
        real.ask(KB, "production", AskRequest(question=questions[0]))
        # on the first questions the server's Azure run at c=1 asks (``cursor`` below)
        real_ask, real_cpu = one_by_one(lambda q: real.ask(KB, "production", AskRequest(question=q, top=3)),
                                        questions[:200])
        real_p50 = float(np.median(real_ask)) * 1000
        print(f"Service.ask in-process with the model, one question at a time: p50 {real_p50:.1f} ms, CPU "
              f"{real_cpu:.1f} ms/query")
        service.store.close()
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        proc = start_server(data, port, log)
        try:
            ready = wait_ready(base, proc)
            vs_id, vs_seconds = make_vector_store(base, args.abstracts)
            print(f"setup: {len(kb_texts)} QnAs in knowledge base '{KB}'; server ready in {ready:.1f} s; vector store "
                  f"of {args.abstracts} SciFact abstracts processed in {vs_seconds:.1f} s")
            server = psutil.Process(proc.pid)
            targets = {"healthz": "", "azure": KB, "tools": KB, "vector_store": vs_id}
            labels = {"healthz": "GET /healthz (baseline)", "azure": "Azure :query-knowledgebases",
                      "tools": f"GET /get_related_{KB}", "vector_store": "vector store search"}
            cursor = 0
            best, cpu_ms, p50_ms, p99_ms, window = {}, {}, {}, {}, {}
            with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as client:
                for kind, target in targets.items():
                    row = []
                    for c in LEVELS:
                        seconds = args.seconds / 2 if kind == "healthz" else args.seconds
                        if (kind, c) == ("azure", 16):  # the issue's figure: three times as long, less noise
                            seconds = args.seconds * 3
                        cpu0 = sum(server.cpu_times()[:2])
                        r = client.submit(load, base, kind, target, questions, cursor, c, seconds, 1.0).result()
                        server_cpu = sum(server.cpu_times()[:2]) - cpu0
                        window[(kind, c)] = (cursor, r["cursor"])
                        if kind != "healthz":  # asks no question: the Azure runs then ask ones the server never saw
                            cursor = r["cursor"]
                        n, lat = len(r["latencies"]), r["latencies"]
                        rps = n / r["seconds"]
                        best[(kind, c)] = rps
                        p50_ms[(kind, c)], p99_ms[(kind, c)] = float(np.median(lat)), corpus.pct(lat, 99)
                        errs = f"{len(r['errors'])} errors" + (f" ({', '.join(sorted(set(r['errors'])))})"
                                                               if r["errors"] else "")
                        cpu_ms[(kind, c)] = server_cpu / max(n, 1) * 1000
                        row.append(f"c={c}: {rps:.0f} req/s, p50 {np.median(lat):.1f} / p99 "
                                   f"{corpus.pct(lat, 99):.1f} ms, {errs}, server CPU "
                                   f"{server_cpu / r['seconds'] * 100:.0f}% = {cpu_ms[(kind, c)]:.1f} ms/request "
                                   f"(client {r['client_cpu'] / r['seconds'] * 100:.0f}%)")
                    ratio = "" if kind == "healthz" else (
                        f"; at c=16: {best[(kind, 16)] / best[('healthz', 16)]:.2f}x /healthz, "
                        f"{best[(kind, 16)] / floor_qps:.2f}x the embedder alone")
                    print(f"{labels[kind]}: " + "; ".join(row) + ratio)
            rss = server.memory_info().rss / 2**20
        finally:
            stop_server(proc)
        # Same run, one change: batching off, with the query pool of before (4 threads), i.e. every question
        # embedded and scored alone as before issue 29: what batching buys.
        proc = start_server(data, port, log, OPENQNA_EMBED_BATCH="1", OPENQNA_QUERY_THREADS="4")
        alone: dict[int, float] = {}
        try:
            wait_ready(base, proc)
            server = psutil.Process(proc.pid)
            with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as client:
                for c in (1, 16):  # the questions the batching server was asked at this concurrency
                    cpu0 = sum(server.cpu_times()[:2])
                    r = client.submit(load, base, "azure", KB, questions, window[("azure", c)][0], c, args.seconds,
                                      1.0).result()
                    server_cpu = sum(server.cpu_times()[:2]) - cpu0
                    n = len(r["latencies"])
                    alone[c] = n / r["seconds"]
                    print(f"Azure query with batching off (OPENQNA_EMBED_BATCH=1, OPENQNA_QUERY_THREADS=4; server "
                          f"restarted), c={c}: {alone[c]:.0f} req/s, p50 {np.median(r['latencies']):.1f} / p99 "
                          f"{corpus.pct(r['latencies'], 99):.1f} ms, {len(r['errors'])} errors, server CPU "
                          f"{server_cpu / max(n, 1) * 1000:.1f} ms/request")
        finally:
            stop_server(proc)
        print(f"batching on vs off, Azure query at c=16: {best[('azure', 16)] / alone[16]:.2f}x the requests/s; "
              f"at c=1: {best[('azure', 1)] / alone[1]:.2f}x")
        fast = measure_fast(data, kb_texts, questions, window, args.seconds, log, fast_env)
        setting = "".join(f", {k}={v}" for k, v in fast_env.items())
        print(f"Service.ask in-process with the int8 model (OPENQNA_EMBEDDER=fast, the same QnAs with its own vectors), "
              f"one question at a time: p50 {fast['ask_p50']:.1f} ms, CPU {fast['ask_cpu']:.1f} ms/query")
        f = fast["c1"]
        print(f"Azure query with the int8 model (OPENQNA_EMBEDDER=fast{setting}; its own server, the questions the "
              f"default's run at c=1 asked), c=1: {f['rps']:.0f} req/s, p50 {f['p50']:.1f} / p99 {f['p99']:.1f} ms, "
              f"{f['errors']} errors, server CPU {f['cpu_ms']:.1f} ms/request; {f['rps'] / best[('azure', 1)]:.2f}x "
              f"the default's requests/s, p50 {f['p50'] / fast['ask_p50']:.2f}x its in-process ask")
        for name, label in (("default", "the default (fp32)"), ("fast", f"int8 (OPENQNA_EMBEDDER=fast{setting})")):
            f = fast[name]
            print(f"Azure query at c=16, {label}, {FAST_ROUNDS} interleaved rounds of {args.seconds:g} s beside the "
                  f"other model's server, the same questions in each round: {f['rps']:.0f} req/s, p50 {f['p50']:.1f} / "
                  f"p99 {f['p99']:.1f} ms, {f['errors']} errors, server CPU {f['cpu_ms']:.1f} ms/request; the model "
                  f"alone one question at a time on the rounds' questions {fast[name + '_alone']:.0f} queries/s")
        per_round = [len(r["runs"]["fast"]["latencies"]) / r["runs"]["fast"]["seconds"] / r["alone"]["default"]
                     for r in fast["rounds"]]
        print(f"int8 against fp32 at c=16 in the same rounds: {fast['fast']['rps'] / fast['default']['rps']:.2f}x the "
              f"requests/s; int8's requests/s {fast['fast']['rps'] / fast['default_alone']:.2f}x the fp32 model's "
              f"one-at-a-time rate (rounds {min(per_round):.2f}-{max(per_round):.2f}x); int8 alone "
              f"{fast['fast_alone'] / fast['default_alone']:.2f}x fp32 alone")
    # The embedder alone again, one question at a time, on the questions the Azure run at c=16 asked (the cursor
    # wraps round a list of banking77 and hwu64 utterances of different lengths, so the first 300 may be longer
    # or shorter on average than the run's): its rate on the same texts, measured with the server stopped.
    start, end = window[("azure", 16)]
    asked = [questions[i % len(questions)] for i in range(start, end)]
    asked = asked[::max(1, len(asked) // 600)]
    embedder = LocalMiniLM(cache_size=0, max_batch=1)
    embedder.embed([asked[0]])
    same, same_cpu = one_by_one(lambda q: embedder.embed([q]), asked)
    same_qps = len(same) / sum(same)
    print(f"embedder alone, one query at a time, on {len(asked)} of the {end - start} questions of the Azure run at "
          f"c=16: {same_qps:.0f} queries/s (p50 {np.median(same) * 1000:.1f} ms, CPU {same_cpu:.1f} ms/query), "
          f"{same_qps / floor_qps:.2f}x its rate on the first 300")
    # What one embedding worker can do at most: the same questions in the server's batches (OPENQNA_EMBED_BATCH)
    # on the batch session's one thread, back to back. The server runs one such worker per two cores, so its rate at
    # c=16 can not pass this (its batches are this size or smaller, and the worker needs the interpreter between
    # two of them), while the rate one at a time uses both cores for each question.
    size = settings.embed_batch()
    batches = [asked[i:i + size] for i in range(0, len(asked), size)]
    embedder.embed_questions(batches[0])
    batched, _ = one_by_one(embedder.embed_questions, batches)
    ceiling = len(asked) / sum(batched)
    print(f"embedder in batches of {size} on one thread (one embedding worker's most), on the same questions: "
          f"{ceiling:.0f} queries/s ({sum(batched) / len(asked) * 1000:.2f} ms a question), {ceiling / same_qps:.2f}x "
          f"its one-at-a-time rate; the Azure run at c=16 reached {best[('azure', 16)] / ceiling:.2f}x this ceiling")
    azure16, cores = best[("azure", 16)], os.cpu_count() or 1
    ratio16, cpu_ratio, c1_ratio = azure16 / same_qps, cpu_ms[("azure", 16)] / real_cpu, p50_ms[("azure", 1)] / real_p50
    print(f"issue 29: Azure query at c=16 {ratio16:.2f}x the embedder's one-at-a-time rate on the same questions "
          f"({azure16 / floor_qps:.2f}x its rate on the first 300) (target >= 1.0: "
          f"{'met' if ratio16 >= 1.0 else 'NOT met'}), p99 {p99_ms[('azure', 16)]:.0f} ms (target <= 150: "
          f"{'met' if p99_ms[('azure', 16)] <= 150 else 'NOT met'}); c=1 p50 over HTTP {c1_ratio:.2f}x the in-process "
          f"ask (target <= 1.3: {'met' if c1_ratio <= 1.3 else 'NOT met'}); server CPU per request at c=16 "
          f"{cpu_ratio:.2f}x the in-process ask's (target <= 1.2: {'met' if cpu_ratio <= 1.2 else 'NOT met'})")
    # Issue 43: with int8 weights, the Azure query at c=16 at >= 1.3x the fp32 model's one-at-a-time rate in the same
    # run, p99 <= 150 ms, no errors; at c=1 the p50 over HTTP <= 1.3x the in-process ask. int8 is not the default,
    # so the default is held to the same targets beside it: both from the interleaved rounds at c=16.
    rows = []
    for name, label, c1 in (("default", "default (fp32)", c1_ratio), ("fast", "fast (int8)",
                                                                      fast["c1"]["p50"] / fast["ask_p50"])):
        f = fast[name]
        ratio = f["rps"] / fast["default_alone"]
        met = ratio >= ISSUE43_RATIO and f["p99"] <= 150 and f["errors"] == 0 and c1 <= 1.3
        rows.append(f"{label}: c=16 {ratio:.2f}x the fp32 model's one-at-a-time rate on the same questions "
                    f"(target >= {ISSUE43_RATIO}: {'met' if ratio >= ISSUE43_RATIO else 'NOT met'}), p99 "
                    f"{f['p99']:.0f} ms ({'met' if f['p99'] <= 150 else 'NOT met'}), {f['errors']} errors; c=1 p50 "
                    f"over HTTP {c1:.2f}x the in-process ask with the same model ({'met' if c1 <= 1.3 else 'NOT met'});"
                    f" {'all met' if met else 'NOT all met'}")
    print("issue 43 (int8 is not the default: both): " + "; ".join(rows))
    print(f"target >= {TARGET:.0f} queries/s at c=16 with no errors: Azure query {azure16:.0f}/s "
          f"({'met' if azure16 >= TARGET else 'NOT met'}); its server CPU cost {cpu_ms[('azure', 16)]:.1f} ms/request "
          f"caps it at {cores * 1000 / cpu_ms[('azure', 16)]:.0f}/s on {cores} idle cores (server CPU near "
          f"{cores * 100}% = CPU-bound, far below it = waiting); server RSS after the run {rss:.0f} MiB")


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    main()
