"""The int8 MiniLM (``OPENQNA_EMBEDDER=fast``) against the fp32 one it is quantized from (the default).

Baseline: the fp32 model, measured in the same run, interleaved with the int8 one so a busy moment of the machine
hits both.  Both without the question cache and without batching (``cache_size=0``, ``max_batch=1``), on the
default threads:
* a question embedding: p50/p99 of 400 hwu64 test questions embedded one at a time, the two models alternating
  (which goes first alternates too);
* indexing: texts/s for 1,000 banking77 training utterances embedded in one call, three rounds, the median;
* how far int8 moves the vectors: cosine with fp32's, min and mean, over all 1,400 texts.

Usage: python bench/int8.py   (writes nothing; prints a small table)
"""

from __future__ import annotations

import csv
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import corpus  # noqa: E402

from openqna.models.embedder import LocalMiniLM, LocalMiniLMInt8  # noqa: E402

QUESTIONS = 400
TEXTS = 1000
ROUNDS = 3
DATA = corpus.SHARED_DATA


def main() -> None:
    hwu = (DATA / "hwu64" / "test" / "seq.in").read_text(encoding="utf-8").splitlines()
    questions = [q.strip() for q in hwu if q.strip()]
    questions = questions[:: max(1, len(questions) // QUESTIONS)][:QUESTIONS]
    with open(DATA / "banking77" / "train.csv", newline="", encoding="utf-8") as f:
        utterances = [row["text"] for row in csv.DictReader(f)]
    texts = utterances[:: max(1, len(utterances) // TEXTS)][:TEXTS]

    models = {"fp32 (local, the default)": LocalMiniLM(cache_size=0, max_batch=1),
              "int8 (fast)": LocalMiniLMInt8(cache_size=0, max_batch=1)}
    pair = list(models.values())
    for model in pair:
        model.embed(["warm up"])
    query_ms: dict[str, list[float]] = {name: [] for name in models}
    vectors: dict[str, list[np.ndarray]] = {name: [] for name in models}
    for i, q in enumerate(questions):
        for name in (list(models) if i % 2 == 0 else list(models)[::-1]):
            t = time.perf_counter()
            v = models[name].embed([q])
            query_ms[name].append((time.perf_counter() - t) * 1000)
            vectors[name].append(v)
    rate: dict[str, list[float]] = {name: [] for name in models}
    for _ in range(ROUNDS):
        for name, model in models.items():
            t = time.perf_counter()
            v = model.embed(texts)
            rate[name].append(len(texts) / (time.perf_counter() - t))
            if len(vectors[name]) == len(questions):
                vectors[name].append(v)

    fp32, int8 = list(models)
    cosines = (np.concatenate(vectors[fp32]) * np.concatenate(vectors[int8])).sum(axis=1)
    base_q, base_rate = corpus.pct(query_ms[fp32], 50), float(np.median(rate[fp32]))
    print("| model | question embedding p50 / p99 ms | indexing texts/s |")
    print("|---|---|---|")
    for name in models:
        q50, r = corpus.pct(query_ms[name], 50), float(np.median(rate[name]))
        print(f"| {name} | {q50:.2f} / {corpus.pct(query_ms[name], 99):.2f} ({q50 / base_q:.2f}x) "
              f"| {r:.0f} ({r / base_rate:.2f}x) |")
    print(f"int8 against fp32: question embedding p50 {base_q / corpus.pct(query_ms[int8], 50):.2f}x as fast, "
          f"indexing {np.median(rate[int8]) / base_rate:.2f}x the texts/s; cosine of the vectors min "
          f"{cosines.min():.4f}, mean {cosines.mean():.4f} ({len(cosines)} texts: {len(questions)} hwu64 questions, "
          f"{len(texts)} banking77 utterances)")


if __name__ == "__main__":
    main()
