"""The bundled embedding models side by side: what the accurate one (all-mpnet-base-v2 beside the universal
sentence encoder, ``OPENQNA_EMBEDDER=accurate``), the same pair with mpnet's int8 weights (``accurate-fast``),
mpnet alone and mpnet alone with its int8 weights (``mpnet-fast``) cost.

Baseline: the default model, all-MiniLM-L6-v2, measured in the same rounds (interleaved, so a busy moment of
the machine hits both).  Per round and model:
* a question embedding: p50/p99 of 100 banking77 test questions embedded one at a time (no cache);
* indexing: texts/s for 256 banking77 training utterances and for 32 SciFact abstracts (256 tokens);
* ``Service.ask`` in-process on a banking77 KB (77 QnAs, 770 questions), same questions as above.

Usage: python bench/models.py   (writes nothing; prints a small table)
"""

from __future__ import annotations

import csv
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import corpus  # noqa: E402

from openqna.evaluation import datasets  # noqa: E402
from openqna.kb.service import AskRequest, Service
from openqna.models.embedder import (  # noqa: E402
    ACCURATE_WEIGHT,
    HybridEncoder,
    LocalMiniLM,
    LocalMPNet,
    LocalMPNetInt8,
    UniversalSentenceEncoder,
)
from openqna.records import QnA  # noqa: E402
from openqna.store.base import LIVE  # noqa: E402
from openqna.store.sqlite import SQLiteStore  # noqa: E402

ROUNDS = 3
DATA = corpus.SHARED_DATA


def main() -> None:
    with open(DATA / "banking77" / "test.csv") as f:
        questions = [row["text"] for row in csv.DictReader(f)][::30][:100]
    with open(DATA / "banking77" / "train.csv") as f:
        train = list(csv.DictReader(f))
    utterances = [row["text"] for row in train[::40]][:256]
    scifact = datasets.scifact(DATA, "train")
    abstracts = [f"{t}\n{x}" for t, x in list(scifact.docs.values())[:32]]
    by_intent: dict[str, list[str]] = {}
    for row in train:
        by_intent.setdefault(row["category"], []).append(row["text"])
    qnas = [QnA(questions=texts[:10], answer=intent) for intent, texts in sorted(by_intent.items())]

    mpnet, mpnet_int8 = LocalMPNet(cache_size=0), LocalMPNetInt8(cache_size=0)
    use = UniversalSentenceEncoder(cache_size=0)
    models = {"MiniLM-L6 (default)": LocalMiniLM(cache_size=0),
              "mpnet-base + USE (accurate)": HybridEncoder(mpnet, use, ACCURATE_WEIGHT),
              "int8 mpnet-base + USE (accurate-fast)": HybridEncoder(mpnet_int8, use, ACCURATE_WEIGHT),
              "mpnet-base alone": mpnet,
              "int8 mpnet-base alone (mpnet-fast)": mpnet_int8}
    tmp = tempfile.TemporaryDirectory()
    services = {}
    for i, (name, model) in enumerate(models.items()):
        model.embed(["warm up"])
        service = Service(SQLiteStore(Path(tmp.name) / str(i)), model)
        service.create_project("banking77")
        service.upsert("banking77", qnas)
        service.ask("banking77", LIVE, AskRequest(question="warm up"))
        services[name] = service
    figures = {name: {"query": [], "ask": [], "short": [], "para": []} for name in models}
    for _ in range(ROUNDS):
        for name, model in models.items():
            fig = figures[name]
            fig["query"] += corpus.embedding_ms(model, questions)
            t = time.perf_counter()
            model.embed(utterances)
            fig["short"].append(len(utterances) / (time.perf_counter() - t))
            t = time.perf_counter()
            model.embed(abstracts)
            fig["para"].append(len(abstracts) / (time.perf_counter() - t))
            for q in questions:
                t = time.perf_counter()
                services[name].ask("banking77", LIVE, AskRequest(question=q, top=3))
                fig["ask"].append((time.perf_counter() - t) * 1000)
    base = figures["MiniLM-L6 (default)"]
    print("| model | question embedding p50 / p99 ms | Service.ask p50 / p99 ms (banking77 KB) "
          "| short texts/s | abstracts/s |")
    print("|---|---|---|---|---|")
    for name, fig in figures.items():
        q50, a50 = corpus.pct(fig["query"], 50), corpus.pct(fig["ask"], 50)
        short, para = float(np.median(fig["short"])), float(np.median(fig["para"]))
        print(f"| {name} | {q50:.1f} / {corpus.pct(fig['query'], 99):.1f} "
              f"({q50 / corpus.pct(base['query'], 50):.2f}x) | {a50:.1f} / {corpus.pct(fig['ask'], 99):.1f} "
              f"({a50 / corpus.pct(base['ask'], 50):.2f}x) | {short:.0f} ({short / np.median(base['short']):.2f}x) "
              f"| {para:.1f} ({para / np.median(base['para']):.2f}x) |")
    for int8_name, fp32_name in (("int8 mpnet-base + USE (accurate-fast)", "mpnet-base + USE (accurate)"),
                                 ("int8 mpnet-base alone (mpnet-fast)", "mpnet-base alone")):
        fast, fp32 = figures[int8_name], figures[fp32_name]
        print(f"{int8_name} against {fp32_name}: question embedding p50 "
              f"{corpus.pct(fast['query'], 50) / corpus.pct(fp32['query'], 50):.2f}x, Service.ask p50 "
              f"{corpus.pct(fast['ask'], 50) / corpus.pct(fp32['ask'], 50):.2f}x, short texts/s "
              f"{np.median(fast['short']) / np.median(fp32['short']):.2f}x, abstracts/s "
              f"{np.median(fast['para']) / np.median(fp32['para']):.2f}x")
    for service in services.values():
        service.store.close()
    tmp.cleanup()


if __name__ == "__main__":
    main()
