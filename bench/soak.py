"""Soak: many clients on every surface at once, for a bounded time, against a real ``openqna serve``.

32 clients (closed loop: each sends its next request when the last is answered) mix what
production traffic mixes: Azure queries, authoring updates (QnA edits followed by a deploy),
tool searches, MCP tool calls, vector-store searches and OpenAI file uploads.  Reported: errors
(any 5xx, transport failure or unexpected status: must be 0), p50/p99 per operation, the
server's RSS at start and end and its samples in between (no growth trend), and at the end a
check that every acknowledged write is there: each QnA whose update job succeeded is in the
project, each uploaded file can be read back, each deploy that succeeded is served.

``make soak`` runs it for 5 minutes on SQLite and on PostgreSQL (pgserver); ``make test``
runs 30 seconds of each (tests/test_soak.py).

Usage: python bench/soak.py [--seconds 300] [--clients 32] [--store sqlite|postgres|both] [--reads-only]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
PROJECT = "soak"
API = {"api-version": "2021-10-01"}
AUTHORING = "/language/query-knowledgebases/projects"
QUESTIONS = ["How do I reset my password?", "what are your opening hours", "can I return a product",
             "how long does shipping take", "do you ship abroad", "where is my order", "is there a warranty",
             "how do I cancel my subscription", "what payment methods are accepted", "who won the world cup"]
# (operation, weight): reads dominate, as in production
MIX = (("azure_query", 30), ("tool_search", 14), ("mcp_search", 10), ("vector_search", 12),
       ("qna_update", 14), ("deploy", 5), ("file_upload", 8), ("healthz", 7))
# --reads-only: the same reads with no writes, so the data stays constant and RSS may not grow with it
READS = tuple((op, w) for op, w in MIX if op not in ("qna_update", "deploy", "file_upload"))


@dataclass
class Outcome:
    latencies: dict[str, list[float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    added_answers: list[str] = field(default_factory=list)  # acknowledged QnA additions
    uploaded: list[str] = field(default_factory=list)  # acknowledged file ids
    deploys: int = 0
    rss_mb: list[tuple[float, float]] = field(default_factory=list)  # (seconds since start, RSS)

    def record(self, op: str, ms: float) -> None:
        self.latencies.setdefault(op, []).append(ms)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def wait_job(client: httpx.AsyncClient, location: str, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = await client.get(location)
        r.raise_for_status()
        body = r.json()
        if body["status"] in ("succeeded", "failed", "cancelled"):
            return body
        await asyncio.sleep(0.05)
    raise TimeoutError(f"job {location} did not finish in {timeout} s")


async def setup_project(client: httpx.AsyncClient) -> None:
    """A project of 200 QnAs deployed to production."""
    qnas = [{"id": i + 1, "answer": f"Answer {i}: {q}", "questions": [f"{q} ({i})"], "metadata": {"n": str(i % 7)},
             "source": "soak.tsv"} for i, q in enumerate(QUESTIONS * 20)]
    r = await client.patch(f"{AUTHORING}/{PROJECT}", params=API,
                           json={"language": "en", "settings": {"defaultAnswer": "No answer."}})
    assert r.status_code in (200, 201), r.text
    r = await client.post(f"{AUTHORING}/{PROJECT}/:import", params={**API, "format": "json"},
                          json={"assets": {"qnas": qnas}})
    assert r.status_code == 202, r.text
    assert (await wait_job(client, r.headers["operation-location"]))["status"] == "succeeded"
    r = await client.put(f"{AUTHORING}/{PROJECT}/deployments/production", params=API)
    assert (await wait_job(client, r.headers["operation-location"]))["status"] == "succeeded"


async def setup(client: httpx.AsyncClient) -> str:
    """A project of 200 QnAs deployed to production, and a vector store with one file; returns the store id."""
    await setup_project(client)
    doc = "\n\n".join(f"# {q}\n\nThe answer to '{q}' is explained here in some detail." for q in QUESTIONS)
    r = await client.post("/v1/files", data={"purpose": "assistants"}, files={"file": ("guide.md", doc.encode())})
    assert r.status_code == 200, r.text
    file_id = r.json()["id"]
    r = await client.post("/v1/vector_stores", json={"name": "soak", "file_ids": [file_id]})
    assert r.status_code == 200, r.text
    store = r.json()["id"]
    for _ in range(600):
        if (await client.get(f"/v1/vector_stores/{store}")).json()["file_counts"]["completed"] == 1:
            return store
        await asyncio.sleep(0.1)
    raise TimeoutError("the vector store's file was not indexed")


async def operation(op: str, client: httpx.AsyncClient, rng: random.Random, store: str, out: Outcome,
                    worker: int, n: int) -> None:
    q = rng.choice(QUESTIONS)
    if op == "azure_query":
        r = await client.post("/language/:query-knowledgebases",
                              params={**API, "projectName": PROJECT, "deploymentName": "production"},
                              json={"question": q, "top": 3, "confidenceScoreThreshold": 0.3})
        expect(r, 200, out, op)
    elif op == "tool_search":
        expect(await client.get(f"/get_related_{PROJECT}", params={"subject": q, "limit": 3,
                                                                    "where_str": f"n = '{rng.randrange(7)}'"}),
               200, out, op)
    elif op == "mcp_search":
        r = await client.post("/mcp", headers={"Accept": "application/json, text/event-stream"},
                              json={"jsonrpc": "2.0", "id": n, "method": "tools/call",
                                    "params": {"name": "search", "arguments": {"kb": PROJECT, "subject": q}}})
        if expect(r, 200, out, op) and "error" in r.json():
            out.errors.append(f"{op}: {r.json()['error']}")
    elif op == "vector_search":
        expect(await client.post(f"/v1/vector_stores/{store}/search", json={"query": q, "max_num_results": 5}),
               200, out, op)
    elif op == "qna_update":
        answer = f"Soak answer from client {worker}, number {n}."
        r = await client.patch(f"{AUTHORING}/{PROJECT}/qnas", params=API, json=[
            {"op": "add", "value": {"answer": answer, "questions": [f"soak question {worker}-{n}"], "source": "soak"}}])
        if expect(r, 202, out, op):
            job = await wait_job(client, r.headers["operation-location"])
            if job["status"] == "succeeded":
                out.added_answers.append(answer)
            else:
                out.errors.append(f"{op}: job {job['status']}: {job.get('errors')}")
    elif op == "deploy":
        r = await client.put(f"{AUTHORING}/{PROJECT}/deployments/production", params=API)
        if expect(r, 202, out, op):
            job = await wait_job(client, r.headers["operation-location"])
            if job["status"] == "succeeded":
                out.deploys += 1
            else:
                out.errors.append(f"{op}: job {job['status']}: {job.get('errors')}")
    elif op == "file_upload":
        lines = "\n".join(json.dumps({"text": f"{q} number {i} from client {worker}"}) for i in range(5))
        r = await client.post("/v1/files", data={"purpose": "answers"},
                              files={"file": (f"soak-{worker}-{n}.jsonl", lines.encode())})
        if expect(r, 200, out, op):
            out.uploaded.append(r.json()["id"])
    else:
        expect(await client.get("/healthz"), 200, out, op)


def expect(r: httpx.Response, status: int, out: Outcome, op: str) -> bool:
    if r.status_code != status:
        out.errors.append(f"{op}: HTTP {r.status_code}: {r.text[:200]}")
        return False
    return True


async def soak(base: str, pid: int, *, seconds: float, clients: int, seed: int = 7, reads_only: bool = False) -> dict:
    out = Outcome()
    limits = httpx.Limits(max_connections=clients + 4, max_keepalive_connections=clients + 4)
    async with httpx.AsyncClient(base_url=base, timeout=120, limits=limits) as client:
        store = await setup(client)
        ops, weights = zip(*(READS if reads_only else MIX))
        started = time.monotonic()
        out.rss_mb.append((0.0, rss_mb(pid)))

        async def sample_rss() -> None:
            while time.monotonic() - started < seconds:
                await asyncio.sleep(max(seconds / 10, 0.5))
                out.rss_mb.append((round(time.monotonic() - started, 1), rss_mb(pid)))

        async def worker(w: int) -> None:
            rng = random.Random(f"{seed}:{w}")
            n = 0
            while time.monotonic() - started < seconds:
                op = rng.choices(ops, weights)[0]
                n += 1
                t = time.perf_counter()
                try:
                    await operation(op, client, rng, store, out, w, n)
                except (httpx.HTTPError, TimeoutError, AssertionError, ValueError, KeyError) as exc:
                    out.errors.append(f"{op}: {type(exc).__name__}: {exc}")
                out.record(op, (time.perf_counter() - t) * 1000)

        await asyncio.gather(sample_rss(), *(worker(w) for w in range(clients)))
        elapsed = time.monotonic() - started
        out.rss_mb.append((round(elapsed, 1), rss_mb(pid)))
        missing = await verify(client, out)
    all_ms = [ms for values in out.latencies.values() for ms in values]
    return {
        "seconds": round(elapsed, 1), "clients": clients, "requests": len(all_ms),
        "requests_per_second": round(len(all_ms) / elapsed, 1), "errors": out.errors,
        "p50_ms": round(statistics.median(all_ms), 1), "p99_ms": round(percentile(all_ms, 99), 1),
        "per_operation": {op: {"n": len(v), "p50_ms": round(statistics.median(v), 1),
                               "p99_ms": round(percentile(v, 99), 1)} for op, v in sorted(out.latencies.items())},
        "acknowledged": {"qna_additions": len(out.added_answers), "files": len(out.uploaded), "deploys": out.deploys},
        "missing": missing, "rss_mb": [(t, round(mb, 1)) for t, mb in out.rss_mb],
    }


async def verify(client: httpx.AsyncClient, out: Outcome) -> list[str]:
    """Every acknowledged write, read back: the QnAs, the files, and a deploy that serves the last QnA."""
    missing: list[str] = []
    answers, url = set(), f"{AUTHORING}/{PROJECT}/qnas"
    params: dict | None = {**API, "maxpagesize": "1000"}  # not top: top caps the whole listing, nextLink and all
    while url:
        r = await client.get(url, params=params)
        r.raise_for_status()
        body = r.json()
        answers.update(q["answer"] for q in body["value"])
        url, params = body.get("nextLink"), None
    missing += [f"QnA '{a}'" for a in out.added_answers if a not in answers]
    for file_id in out.uploaded:
        if (await client.get(f"/v1/files/{file_id}")).status_code != 200:
            missing.append(f"file {file_id}")
    if out.added_answers:
        r = await client.put(f"{AUTHORING}/{PROJECT}/deployments/production", params=API)
        await wait_job(client, r.headers["operation-location"])
        last = out.added_answers[-1]
        r = await client.post("/language/:query-knowledgebases",
                              params={**API, "projectName": PROJECT, "deploymentName": "production"},
                              json={"question": last.replace("Soak answer from", "soak question").split(",")[0]})
        if last not in {a["answer"] for a in r.json()["answers"]} and not any(
                a["answer"].startswith("Soak answer") for a in r.json()["answers"]):
            missing.append(f"deployed QnA '{last}'")
    return missing


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


# -- running a server ---------------------------------------------------------------------------------
def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving(data_dir: Path, store_url: str = "") -> Iterator[tuple[str, int]]:
    """``openqna serve`` on ``data_dir`` (and ``store_url``, if PostgreSQL) on a free port, for as long as the block
    runs; yields its base URL and its pid.  Its log is ``data_dir/server.log`` (``server_log_errors``)."""
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OPENQNA_SAMPLE": "0", "OPENQNA_JOB_POLL_SECONDS": "0.1"}
    if store_url:
        env["OPENQNA_STORE"] = store_url
    log_path = data_dir / "server.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "openqna.cli.main", "serve", "--data", str(data_dir),
                                 "--port", str(port)], stdout=log, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"openqna serve exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
            try:
                if httpx.get(base + "/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("openqna serve did not start")
            time.sleep(0.1)
        yield base, proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def server_log_errors(data_dir: Path) -> list[str]:
    """The first tracebacks and 500s in the log of ``serving(data_dir)``."""
    lines = (data_dir / "server.log").read_text().splitlines()
    return [line for line in lines if "Traceback" in line or " 500 " in line][:20]


def run_server_soak(data_dir: Path, *, seconds: float, clients: int, store_url: str = "",
                    reads_only: bool = False) -> dict:
    """Start ``openqna serve`` on ``data_dir`` (and ``store_url``, if PostgreSQL), soak it, stop it."""
    with serving(data_dir, store_url) as (base, pid):
        result = asyncio.run(soak(base, pid, seconds=seconds, clients=clients, reads_only=reads_only))
    result["server_log_errors"] = server_log_errors(data_dir)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--store", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--reads-only", action="store_true",
                        help="only queries and searches: constant data, so RSS growth would be a leak")
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="openqna-soak-") as tmp:
        if args.store in ("sqlite", "both"):
            (Path(tmp) / "sqlite").mkdir()
            results["sqlite"] = run_server_soak(Path(tmp) / "sqlite", seconds=args.seconds, clients=args.clients,
                                                reads_only=args.reads_only)
        if args.store in ("postgres", "both"):
            import pgserver

            pg = pgserver.get_server(Path(tmp) / "pg", cleanup_mode="stop")
            try:
                pg.psql("CREATE EXTENSION IF NOT EXISTS vector;")
                (Path(tmp) / "postgres").mkdir()
                results["postgres"] = run_server_soak(Path(tmp) / "postgres", seconds=args.seconds,
                                                      clients=args.clients, store_url=pg.get_uri(),
                                                      reads_only=args.reads_only)
            finally:
                pg.cleanup()
    print(json.dumps(results, indent=2))
    bad = {name: (r["errors"][:5], r["missing"][:5]) for name, r in results.items() if r["errors"] or r["missing"]}
    if bad:
        sys.exit(f"soak failed: {bad}")


if __name__ == "__main__":
    main()
