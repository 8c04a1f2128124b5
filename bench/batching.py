"""What batching buys on this machine: the question embedder's batch size against its threads, and
scoring a batch of question vectors against a knowledge base's vectors in one matrix product.

* Embedder: all-MiniLM-L6-v2 on onnxruntime with 1 and with 2 intra-op threads, batches of
  1, 2, 4, 8 and 16 distinct test questions (banking77/hwu64, the questions ``bench/throughput.py``
  asks), interleaved so a busy moment of the shared machine hits every cell.  Per text: wall time
  (what a caller waits) and CPU time (what a busy server pays).  The defaults of
  ``openqna.models.batching`` come from this table.
* Ranking: the exhaustive path multiplies the question vector by every question and answer vector
  of the knowledge base (10,000 QnAs: two 10,000 x 384 float32 matrices, 15 MB each).  One
  question at a time that is a matrix-vector product that reads both matrices from memory per
  question; a batch reads them once.  Measured on random unit vectors of that shape, one BLAS thread
  (as the server runs); and the same products with each matrix transposed into a C-contiguous copy
  (``Field.columns``), the layout the ranker multiplies since branch perf3.
* End to end in-process: 16 threads asking ``Service.ask`` at once on ``bench/throughput.py``'s
  knowledge base (10,000 QnAs), the real model, no HTTP: CPU per question (this process's CPU time,
  which the shared machine's other load does not inflate as it does wall time) with batching off and
  with the embedder's batching and the shared products (``index/products.py``); rounds interleaved.
  On the morning's Intel Xeon the shared products were measured this way and not adopted (8.39 against
  7.86 ms with the embedder's batching alone: bench/results.md at commit 37aa591, 2026-12-02 08:03 UTC, code
  at d0ce288); on the AMD EPYC a 10,000 x 384 matrix-vector product costs ~2.6 ms (memory-bound), and with
  batches padded within groups of similar lengths they paid at c=16 over HTTP (bench/tail.py, branch perf2).

Usage: python bench/batching.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SIZES = (1, 2, 4, 8, 16)


def embedder_table(rounds: int) -> None:
    import corpus

    from openqna.models.embedder import LocalMiniLM

    questions = corpus.query_texts()
    encoders = {threads: LocalMiniLM(threads=threads, cache_size=0) for threads in (1, 2)}
    for encoder in encoders.values():
        encoder.embed(questions[:16])
    wall: dict[tuple[int, int], list[float]] = {}
    cpu: dict[tuple[int, int], list[float]] = {}
    cursor = 0
    for _ in range(rounds):
        for size in SIZES:
            for _ in range(max(4, 64 // size)):
                batch = questions[cursor : cursor + size]
                cursor = (cursor + size) % (len(questions) - 16)
                for threads, encoder in encoders.items():
                    w, c = time.perf_counter(), time.process_time()
                    encoder.embed(batch)
                    wall.setdefault((threads, size), []).append((time.perf_counter() - w) / size * 1000)
                    cpu.setdefault((threads, size), []).append((time.process_time() - c) / size * 1000)
    print("| batch | 1 thread: wall / CPU ms per question | 2 threads: wall / CPU ms per question | "
          "2 threads' CPU / 1 thread's |")
    print("|---|---|---|---|")
    for size in SIZES:
        one = (np.median(wall[(1, size)]), np.median(cpu[(1, size)]))
        two = (np.median(wall[(2, size)]), np.median(cpu[(2, size)]))
        print(f"| {size} | {one[0]:.2f} / {one[1]:.2f} | {two[0]:.2f} / {two[1]:.2f} | {two[1] / one[1]:.2f} |")
    lone = np.median(wall[(2, 1)]) / np.median(wall[(1, 1)])
    busy = np.median(cpu[(2, 16)]) / np.median(cpu[(1, 16)])
    print(f"embedder: a lone question waits {lone:.2f}x as long on 2 threads as on 1; a batch of 16 costs "
          f"{busy:.2f}x the CPU on 2 threads; batch of 16 on 1 thread vs one question at a time on 2: "
          f"{np.median(cpu[(1, 16)]) / np.median(cpu[(2, 1)]):.2f}x the CPU per question")


def product_table(rounds: int) -> None:
    from threadpoolctl import threadpool_limits

    threadpool_limits(1, user_api="blas")
    rng = np.random.default_rng(0)

    def unit(n: int) -> np.ndarray:
        m = rng.standard_normal((n, 384)).astype(np.float32)
        return m / np.linalg.norm(m, axis=1, keepdims=True)

    questions, answers, queries = unit(10_000), unit(10_000), unit(16)
    row = []
    for size in SIZES:
        alone, together = [], []
        for _ in range(rounds * 6):
            t = time.perf_counter()
            for q in queries[:size]:
                questions @ q
                answers @ q
            t1 = time.perf_counter()
            questions @ queries[:size].T
            answers @ queries[:size].T
            alone.append((t1 - t) / size * 1000)
            together.append((time.perf_counter() - t1) / size * 1000)
        row.append(f"{size}: {np.median(alone):.3f} -> {np.median(together):.3f} ms ({np.median(together) / np.median(alone):.2f}x)")
    both = questions @ queries.T
    diff = max(float(np.abs(both[:, i] - questions @ queries[i]).max()) for i in range(len(queries)))
    print("ranking, 10,000 QnAs (two 10,000 x 384 matrices), question vectors scored one by one -> in one product, "
          "ms per question, by batch size: " + "; ".join(row) + f"; largest cosine difference {diff:.1e}")
    # The layout the ranker multiplies (``Field.columns``, ``index/products.py``): each matrix transposed into a
    # C-contiguous copy, against the unit-major matrix, interleaved, one question alone and batches.
    q_columns, a_columns = np.ascontiguousarray(questions.T), np.ascontiguousarray(answers.T)
    row = []
    for size in SIZES:
        units, columns = [], []
        for _ in range(rounds * 6):
            batch = queries[:size] if size > 1 else queries[0]
            t = time.perf_counter()
            questions @ batch.T
            answers @ batch.T
            t1 = time.perf_counter()
            batch @ q_columns
            batch @ a_columns
            units.append((t1 - t) / size * 1000)
            columns.append((time.perf_counter() - t1) / size * 1000)
        row.append(f"{size}: {np.median(units):.3f} -> {np.median(columns):.3f} ms "
                   f"({np.median(columns) / np.median(units):.2f}x)")
    diff = max(float(np.abs(queries[i] @ q_columns - questions @ queries[i]).max()) for i in range(len(queries)))
    same = np.array_equal(queries @ q_columns, queries @ questions.T)
    print("ranking, the same products with the unit matrices -> their columns (the ranker's layout), ms per question, "
          "by batch size: " + "; ".join(row) + f"; a question alone within {diff:.1e} of the unit-major product, "
          f"a batch of 16 {'the same floats' if same else 'not the same floats'}")


def pipeline_table(rounds: int) -> None:
    import tempfile
    from concurrent.futures import ThreadPoolExecutor

    import corpus

    from openqna.cli.main import one_blas_thread
    from openqna.kb.service import AskRequest, Service
    from openqna.models.embedder import LocalMiniLM
    from openqna.store.sqlite import SQLiteStore

    one_blas_thread()  # as the server runs
    texts, vectors, questions, _ = corpus.real_data(LocalMiniLM(cache_size=0, max_batch=1))
    kb_texts, kb_vectors = corpus.grow(texts, vectors, 10_000)
    with tempfile.TemporaryDirectory() as data:
        store = SQLiteStore(data)
        corpus.fill_openqna(Service(store, corpus.LookupEmbedder(LocalMiniLM.name, kb_texts, kb_vectors)), "bank",
                            kb_texts)
        services = {batch: Service(store, LocalMiniLM(cache_size=0, max_batch=batch)) for batch in (1, 16)}
        for service in services.values():
            service.ask("bank", "test", AskRequest(question=questions[0]))
            service.embedder.embed_questions(["warm up", "a batch"])
        # OPENQNA_EMBED_BATCH is read at each ask by the products (index/products.py): 1 scores each question alone
        configs = {"batching off": 1, "embedding and scoring batched": 16}
        cpu: dict[str, list[float]] = {name: [] for name in configs}
        cursor, per_round = 0, 320
        for _ in range(rounds * 2):
            for name, embed_batch in configs.items():
                service = services[embed_batch]
                os.environ["OPENQNA_EMBED_BATCH"] = str(embed_batch)
                start = cursor % (len(questions) - per_round)
                asked = questions[start : start + per_round]
                cursor += per_round
                c = time.process_time()
                with ThreadPoolExecutor(16) as pool:
                    list(pool.map(lambda q: service.ask("bank", "test", AskRequest(question=q, top=3)), asked))
                cpu[name].append((time.process_time() - c) / len(asked) * 1000)
        store.close()
    off = np.asarray(cpu["batching off"])
    print(f"Service.ask from 16 threads at once, 10,000 QnAs, real model, {rounds * 2} interleaved rounds of "
          f"{per_round} questions: CPU ms per question (mean; median of the paired ratios to batching off) "
          + "; ".join(f"{name} {np.mean(v):.2f} ({np.median(np.asarray(v) / off):.2f}x)" for name, v in cpu.items()))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    embedder_table(args.rounds)
    product_table(args.rounds)
    pipeline_table(args.rounds)


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    main()
