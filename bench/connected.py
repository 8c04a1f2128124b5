"""Connected tables in chdb (ClickHouse) and PostgreSQL, with and without the engine's vector index, beside the
same rows loaded into openqna: tool search over HTTP.

The same rows go four ways: into chdb MergeTree tables ``default.papers`` (no index: the search is brute force in
ClickHouse) and ``default.papers_hnsw`` (a ``vector_similarity('hnsw', 'cosineDistance', 384)`` index), into
pgvector tables ``papers`` and ``papers_hnsw`` (``USING hnsw (vector vector_cosine_ops)``) of a pgserver kept
under the cache, and into openqna's own store as passages with metadata ``group`` (faiss IVF beyond
``OPENQNA_EXACT_SEARCH_MAX`` vectors).  Each table is *connected* (``openqna table connect``: searched where it
is, nothing copied).  Texts and vectors are real MiniLM utterance vectors grown to ``--rows`` by noisy copies
(``corpus.grow``): random vectors are a worst case no index is built for (HNSW recall@10 0.52 on 100k random
unit vectors against 1.00 on these), and the questions are real held-out utterances of the same space.

Measured, over HTTP one at a time: ``GET /get_related_{kb}?limit=10`` unfiltered and with ``where_str=group = '3'``
(10% of rows), p50/p99, a question not asked before each time; recall@10 of each connected table against the
exact nearest rows (numpy over the same vectors, the same filter).  Baselines: the query embedding alone, the
brute-force table of the same engine, and the rows loaded into openqna.  PostgreSQL holds the first ``--pg-rows``
rows (all of them by default: its HNSW index on 1M rows builds in ~3 minutes here, after ~11 minutes of COPY).
Everything is cached under ``bench/.cache/connected-*``.

Usage: python bench/connected.py [--rows 1000000] [--pg-rows 1000000] [--queries 15]
"""

from __future__ import annotations

import argparse
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
LOADED = "papers"
FILTERS = (("unfiltered", None), ("group = '3' (10%)", "group = '3'"))


def rows(n: int) -> tuple[list[str], np.ndarray]:
    texts, vectors, _, _ = corpus.real_data()
    return corpus.grow(texts, vectors, n)


def parquet_blocks(folder: Path, names: list[str], vecs: np.ndarray, n: int):
    """Parquet files of 100k rows (id, title, group, vector), one at a time."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = folder / "block.parquet"
    for start in range(0, n, 100_000):
        stop = min(n, start + 100_000)
        pq.write_table(pa.table({"id": pa.array(range(start, stop), pa.uint64()), "title": names[start:stop],
                                 "group": [corpus.group(i) for i in range(start, stop)],
                                 "vector": pa.FixedSizeListArray.from_arrays(pa.array(vecs[start:stop].ravel()),
                                                                             DIM)}), path)
        yield path
    path.unlink()


def build_clickhouse(folder: Path, names: list[str], vecs: np.ndarray) -> str:
    from openqna.connected.clickhouse import chdb_session, close_chdb

    n = len(names)
    session = chdb_session(str(folder / "clickhouse"))
    columns = ("id UInt64, title String COMMENT 'the text', `group` String COMMENT 'one of 0..9', "
               "vector Array(Float32)")
    session.query(f"CREATE TABLE default.papers ({columns}) ENGINE = MergeTree ORDER BY id")
    t = time.perf_counter()
    for path in parquet_blocks(folder, names, vecs, n):
        session.query(f"INSERT INTO default.papers SELECT * FROM file('{path}', Parquet)")
    session.query("OPTIMIZE TABLE default.papers FINAL")
    plain = time.perf_counter() - t
    t = time.perf_counter()
    session.query(f"CREATE TABLE default.papers_hnsw ({columns}, INDEX vector_hnsw vector TYPE "
                  f"vector_similarity('hnsw', 'cosineDistance', {DIM})) ENGINE = MergeTree ORDER BY id")
    session.query("INSERT INTO default.papers_hnsw SELECT * FROM default.papers")
    session.query("OPTIMIZE TABLE default.papers_hnsw FINAL")
    indexed = time.perf_counter() - t
    close_chdb()
    return f"{n:,} rows into chdb in {plain:.0f} s, copied into the HNSW table and its index built in {indexed:.0f} s"


def build_openqna(folder: Path, names: list[str], vecs: np.ndarray) -> str:
    from openqna.kb.service import Service
    from openqna.models.embedder import LocalMiniLM
    from openqna.records import QnA
    from openqna.store.sqlite import SQLiteStore

    n = len(names)
    t = time.perf_counter()
    service = Service(SQLiteStore(folder), corpus.LookupEmbedder(LocalMiniLM.name, names, vecs))
    service.ensure_project(LOADED)
    for start in range(0, n, 50_000):
        service.upsert(LOADED, match_content=False, qnas=[
            QnA([], names[i], kind="passage", metadata={"group": corpus.group(i)}, source="papers.jsonl")
            for i in range(start, min(n, start + 50_000))])
    service.indexes.get(LOADED)  # builds the index and saves it
    service.store.close()
    return f"{n:,} rows loaded into openqna and indexed in {time.perf_counter() - t:.0f} s"


def pg_server(folder: Path, n: int):
    import pgserver

    return pgserver.get_server(folder / f"postgres-{n}", cleanup_mode="stop")


def build_postgres(folder: Path, names: list[str], vecs: np.ndarray) -> str:
    import psycopg

    n = len(names)
    server = pg_server(folder, n)
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        t = time.perf_counter()
        conn.execute(f'CREATE TABLE papers (id bigint PRIMARY KEY, title text, "group" text, vector vector({DIM}))')
        with conn.cursor().copy('COPY papers (id, title, "group", vector) FROM STDIN') as copy:
            for i in range(n):
                copy.write_row((i, names[i], corpus.group(i), "[" + ",".join(map(repr, vecs[i].tolist())) + "]"))
        conn.execute("CREATE TABLE papers_hnsw AS SELECT * FROM papers")
        conn.execute("VACUUM ANALYZE")
        loaded = time.perf_counter() - t
        t = time.perf_counter()
        conn.execute("SET maintenance_work_mem = '3GB'")
        conn.execute("SET max_parallel_maintenance_workers = 1")
        # pgvector's defaults (m 16, ef_construction 64) gave recall@10 0.78 on these 1M rows at ef_search 100-200 and
        # 0.83 at 800; ClickHouse's HNSW defaults are m 32, ef_construction 128
        conn.execute("CREATE INDEX papers_hnsw_vector ON papers_hnsw USING hnsw (vector vector_cosine_ops) "
                     "WITH (m = 32, ef_construction = 128)")
        indexed = time.perf_counter() - t
    server.cleanup()
    return (f"{n:,} rows into two PostgreSQL tables in {loaded:.0f} s, the HNSW index (m 32, ef_construction 128) "
            f"built in {indexed:.0f} s")


def ensure(folder: Path, part: str, n: int, build) -> str:
    done = folder / f"done-{part}-{n}"
    if done.exists():
        return f"reused from bench/.cache, built earlier: {done.read_text()}"
    names, vecs = rows(n)
    summary = build(folder, names, vecs)
    done.write_text(summary)
    return summary


def connect(folder: Path, pg_uri: str) -> dict[str, str]:
    """(Re)connect the four tables in openqna's store; the names of the knowledge bases and what each found."""
    from openqna.connected.clickhouse import close_chdb
    from openqna.kb.service import Service
    from openqna.kinds.connected_tables import connect_table
    from openqna.models.embedder import LocalMiniLM
    from openqna.store.sqlite import SQLiteStore

    service = Service(SQLiteStore(folder), LocalMiniLM())
    found = {}
    for kb, url, table in (("papers_ch", f"chdb://{folder / 'clickhouse'}", "default.papers"),
                           ("papers_ch_hnsw", f"chdb://{folder / 'clickhouse'}", "default.papers_hnsw"),
                           ("papers_pg", pg_uri, "public.papers"), ("papers_pg_hnsw", pg_uri, "public.papers_hnsw")):
        if kb in {k.name for k in service.knowledge_bases()}:
            service.delete_project(kb)
        info = connect_table(service, kb, url, table, vector="vector", text=["title"], title="title")
        found[kb] = info.index["name"] if info.index else "no index"
    service.connected.close()
    close_chdb()  # the server opens the chdb directory next, and one process at a time may
    service.store.close()
    return found


def exact(vecs: np.ndarray, query: np.ndarray, where: str | None) -> set[int]:
    """The ids of the 10 rows nearest to ``query`` (cosine) that ``where`` keeps."""
    score = vecs @ query
    if where:
        score[np.arange(len(vecs)) % corpus.GROUPS != 3] = -np.inf
    return set(np.argpartition(-score, 10)[:10].tolist())


def main() -> None:
    import httpx
    from psycopg.conninfo import conninfo_to_dict

    from openqna.models.embedder import LocalMiniLM

    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--pg-rows", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=15)  # a brute-force search of 1M rows takes seconds
    args = parser.parse_args()
    folder = corpus.CACHE / f"connected-{args.rows}"
    folder.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    for part, n, build in (("clickhouse", args.rows, build_clickhouse), ("openqna", args.rows, build_openqna),
                           ("postgres", args.pg_rows, build_postgres)):
        if part == "postgres" and not (folder / f"done-postgres-{n}").exists():
            shutil.rmtree(folder / f"postgres-{n}", ignore_errors=True)
        print(f"setup: {ensure(folder, part, n, build)}", flush=True)
    print(f"setup took {time.perf_counter() - t:.0f} s; vectors are real MiniLM utterance vectors grown by noisy "
          "copies, questions real held-out utterances")

    server = pg_server(folder, args.pg_rows)
    try:
        params = conninfo_to_dict(server.get_uri())
        pg_uri = f"postgresql://{params.get('user', 'postgres')}@/{params['dbname']}?host={params['host']}"
        found = connect(folder, pg_uri)
        print("`table connect` found: " + ", ".join(f"{kb} {index}" for kb, index in found.items()))
        _, _, questions, qvecs = corpus.real_data()
        floor = corpus.embedding_ms(LocalMiniLM(cache_size=0), questions[:args.queries])
        kbs = (LOADED, *found)
        q = args.queries
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        results: dict[str, tuple[list[float], list[float]]] = {}
        vecs = {"ch": rows(args.rows)[1]}
        vecs["pg"] = vecs["ch"][:args.pg_rows]
        with open(folder / "server.log", "wb") as log, httpx.Client(timeout=300) as client:
            proc = start_server(str(folder), port, log, OPENQNA_CONNECTED_TIMEOUT="120")  # brute force takes seconds
            try:
                wait_ready(base, proc)
                k = 0
                for w, kb in enumerate(kbs):
                    client.get(f"{base}/get_related_{kb}", params={"subject": questions[-1 - w]}).raise_for_status()
                    for label, where in FILTERS:
                        lat, recall = [], []
                        for j in range(k * q, (k + 1) * q):  # every search a question not asked before
                            params = {"subject": questions[j], "limit": "10", **({"where_str": where} if where else {})}
                            s = time.perf_counter()
                            r = client.get(f"{base}/get_related_{kb}", params=params)
                            lat.append((time.perf_counter() - s) * 1000)
                            r.raise_for_status()
                            hits = [json.loads(line) for line in r.json()["documents"].splitlines()]
                            assert len(hits) == 10 and (where is None or all(h["group"] == "3" for h in hits)), r.text
                            if kb != LOADED:
                                truth = exact(vecs[kb.split("_")[1]], qvecs[j], where)
                                recall.append(len(truth & {int(h["id"]) for h in hits}) / 10)
                        results[f"{kb}|{label}"] = (lat, recall)
                        k += 1
            finally:
                stop_server(proc)
    finally:
        server.cleanup()
    print(f"baseline: query embedding alone p50 {np.median(floor):.1f} ms in-process")
    print("| where_str | table | rows | loaded into openqna p50 / p99 ms | brute force in the engine p50 / p99 ms "
          "(recall@10) | engine's HNSW index p50 / p99 ms (recall@10) | index / brute force | index / loaded |")
    print("|---|---|---|---|---|---|---|---|")
    for label, _ in FILTERS:
        loaded = results[f"{LOADED}|{label}"][0]
        for engine, name, n in (("ch", "chdb", args.rows), ("pg", "PostgreSQL (pgserver)", args.pg_rows)):
            (brute, brute_recall), (hnsw, hnsw_recall) = (results[f"papers_{engine}|{label}"],
                                                         results[f"papers_{engine}_hnsw|{label}"])
            print(f"| {label} | {name} | {n:,} | {np.median(loaded):.1f} / {corpus.pct(loaded, 99):.1f} | "
                  f"{np.median(brute):.1f} / {corpus.pct(brute, 99):.1f} ({np.mean(brute_recall):.2f}) | "
                  f"**{np.median(hnsw):.1f}** / {corpus.pct(hnsw, 99):.1f} (**{np.mean(hnsw_recall):.2f}**) | "
                  f"{np.median(hnsw) / np.median(brute):.3f}x | {np.median(hnsw) / np.median(loaded):.2f}x |")
    print(f"GET /get_related_{{kb}} limit 10 over HTTP one at a time, {q} questions each; the loaded rows are the "
          f"{args.rows:,}; recall@10 against numpy's exact nearest rows under the same filter")


if __name__ == "__main__":
    main()
