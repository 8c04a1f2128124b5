"""Fit the ranker's logistic calibration for vector-store passages on training data only.

Corpus: BEIR SciFact abstracts cut and recorded exactly as vector stores do
(``vector_store_records.chunk_record``: 800/400 GPT-2-token chunks, ≤ 256-token windows as
questions, the chunk as answer): the gold abstracts of the train claims plus 1,500 others.
In-scope queries: 400 train claims (never test); off-topic queries: 300 banking77 and hwu64
training utterances.  Each query contributes its gold records (positives) and its 8
best-looking wrong records (negatives), as scripts/fit_calibration.py does for FAQs.

Usage: python scripts/fit_passage_calibration.py [embedding-cache.sqlite3] [--write]
"""

from __future__ import annotations

import csv
import random
import sys
import tempfile
from pathlib import Path

import numpy as np

from openqna.evaluation import datasets
from openqna.evaluation.embedcache import cached
from openqna.index.analyze import analyze
from openqna.ingest import Block, ParsedDocument, chunk_document
from openqna.kb.service import Service
from openqna.kinds.vector_store_records import chunk_record
from openqna.models import gpt2
from openqna.models.embedder import get_embedder
from openqna.ranking import calibrations
from openqna.ranking.calibrations import Calibration
from openqna.store.sqlite import SQLiteStore

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
rng = random.Random(11)
NAMES = ["qsim", "asim", "qcov", "acov"]


def offtopic(n: int) -> list[str]:
    with open(DATA / "banking77" / "train.csv") as f:
        banking = [row["text"] for row in csv.DictReader(f)]
    hwu = (DATA / "hwu64" / "train" / "seq.in").read_text().splitlines()
    return rng.sample(banking, n // 2) + rng.sample(hwu, n - n // 2)


def features(service: Service, question: str):
    index = service.indexes.get("scifact")
    allowed = np.ones(index.n, dtype=bool)
    vector = service.embedder.embed([question])[0]
    terms = analyze(question)
    return index, np.stack([
        np.maximum(index.dense(vector, "q", allowed), 0), np.maximum(index.dense(vector, "a", allowed), 0),
        index.coverage(terms, "q", allowed), index.coverage(terms, "a", allowed)], axis=1)


def fit(X, y, l2=1e-3, iters=50):
    Xb = np.hstack([X, np.ones((len(X), 1))])
    w = np.zeros(Xb.shape[1])
    for _ in range(iters):  # Newton's method
        p = 1 / (1 + np.exp(-(Xb @ w)))
        g = Xb.T @ (p - y) + l2 * w
        H = (Xb * (p * (1 - p))[:, None]).T @ Xb + l2 * np.eye(len(w))
        w -= np.linalg.solve(H, g)
    return w


def main(cache: Path, tmp: str) -> None:
    corpus = datasets.scifact(DATA, "train")
    claims = rng.sample(sorted(corpus.queries), 400)
    gold = {d for q in claims for d in corpus.qrels[q]}
    docs = sorted(gold | set(rng.sample(sorted(set(corpus.docs) - gold), 1500)))
    service = Service(SQLiteStore(tmp), cached(get_embedder(), cache))
    service.create_project("scifact")
    records = []
    for d in docs:
        title, text = corpus.docs[d]
        doc = ParsedDocument(d, title, [Block("heading", title, level=1), Block("paragraph", text)])
        records += [chunk_record(d, d, c, None) for c in chunk_document(doc, max_tokens=800, overlap_tokens=400,
                                                                         count_tokens=gpt2.count_tokens)]
    service.upsert("scifact", records, progress=True)
    source_of = {q.id: q.source for q in service.store.list_qnas("scifact")}
    sources = [source_of[int(i)] for i in service.indexes.get("scifact").ids]
    X, y = [], []
    for question, wanted in [(corpus.queries[q], corpus.qrels[q]) for q in claims] + \
                            [(q, set()) for q in offtopic(300)]:
        index, F = features(service, question)
        order = np.argsort(-(F[:, 0] + 0.3 * F[:, 2]))
        wrong = [r for r in order[:10] if sources[r] not in wanted][:8]
        right = [r for r in range(index.n) if sources[r] in wanted]
        for r in wrong:
            X.append(F[r]), y.append(0.0)
        for r in right:
            X.append(F[r]), y.append(1.0)
    X, y = np.asarray(X), np.asarray(y)
    # The answer vector saw only a chunk's first 256 word pieces, and on short chunks it repeats the
    # window: the shipped model uses the best window alone (the other variants are printed to compare).
    fits = {}
    for name, cols in (("all four", [0, 1, 2, 3]), ("windows + chunk coverage", [0, 2, 3]), ("window coverage only", [2]),
                       ("windows only", [0, 2])):
        w = fits[name] = fit(X[:, cols], y)
        logit = X[:, cols] @ w[:-1] + w[-1]
        accuracy = float(((logit > 0) == (y > 0.5)).mean())
        print(f"{name}: {dict(zip([NAMES[c] for c in cols], np.round(w[:-1], 3).tolist()))} bias {w[-1]:.3f}"
              f"  accuracy at 0.5: {accuracy:.3f}  ({len(y)} pairs, {int(y.sum())} positive)")
    lexical = fits["window coverage only"]
    shipped = Calibration(w_qsim=round(float(w[0]), 3), w_qcov=round(float(w[1]), 3), bias=round(float(w[2]), 3),
                          # for questions the embedder cannot read (ranker.rank's reads_cjk): the fit without vectors
                          lexical=Calibration(w_qcov=round(float(lexical[0]), 3), bias=round(float(lexical[1]), 3)),
                          context_boost=1.0)
    print(shipped)
    if "--write" in sys.argv[1:]:
        name = calibrations.entry_for("passage", service.embedder.name)
        calibrations.save(name, shipped, fitted_by="scripts/fit_passage_calibration.py", use="passage",
                          embedder=service.embedder.name)
        print(f"{name} written to {calibrations.DATA_FILE}")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        args = [a for a in sys.argv[1:] if a != "--write"]
        main(Path(args[0]) if args else Path(tmp) / "embeddings.sqlite3", tmp)
