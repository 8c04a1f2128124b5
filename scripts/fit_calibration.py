"""Fit the ranker's logistic calibration on training splits only (never test).

KBs: banking77 and hwu64 intents (10 training utterances each as alternate
questions, the intent name as the answer) and the professional chit-chat KB
(every other question indexed).  In-scope queries: other training utterances
(for chit-chat: the held-out questions); off-topic queries: the other intent
data set's training utterances.  Each query contributes its gold record
(positive) and its 8 best-looking wrong records (negatives).

Usage: python scripts/fit_calibration.py  -> prints Calibration(...) weights.
"""

from __future__ import annotations

import csv
import random
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from openqna.models.embedder import get_embedder
from openqna.records import QnA
from openqna.retrieval.analyze import analyze
from openqna.retrieval.filters import KindIn
from openqna.service import Service
from openqna.store.sqlite import SQLiteStore

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
rng = random.Random(7)


def banking():
    by = defaultdict(list)
    with open(DATA / "banking77" / "train.csv") as f:
        for row in csv.DictReader(f):
            by[row["category"]].append(row["text"])
    return by


def hwu():
    by = defaultdict(list)
    texts = (DATA / "hwu64" / "train" / "seq.in").read_text().splitlines()
    labels = (DATA / "hwu64" / "train" / "label").read_text().splitlines()
    for t, l in zip(texts, labels):
        by[l].append(t)
    return by


def intent_kb(by):
    qnas, queries = [], []
    for label, utts in sorted(by.items()):
        utts = utts[:]
        rng.shuffle(utts)
        qnas.append(QnA(utts[:10], label.replace("_", " "), source="intents"))
        queries.extend((u, label.replace("_", " ")) for u in utts[10:13])
    return qnas, queries


def chitchat():
    by = defaultdict(list)
    with open(DATA / "ms-qna-chitchat" / "qna_chitchat_the_professional.tsv") as f:
        next(f)
        for line in f:
            q, a = line.rstrip("\n").split("\t")[:2]
            by[a.strip()].append(q.strip())
    qnas, queries = [], []
    for a, qs in by.items():
        qnas.append(QnA(qs[::2], a, source="chitchat"))
        queries.extend((q, a) for q in qs[1::2])
    return qnas, queries


def features(service, project, question):
    index = service.store.search_index(project)
    allowed = index.mask(KindIn(("qna",)))
    vector = service.embedder.embed([question])[0]
    terms = analyze(question)
    return index, np.stack([
        np.maximum(index.dense(vector, "q", allowed), 0), np.maximum(index.dense(vector, "a", allowed), 0),
        index.coverage(terms, "q", allowed), index.coverage(terms, "a", allowed)], axis=1)


def fit(X, y, offset, l2=1e-3, iters=50):
    Xb = np.hstack([X, np.ones((len(X), 1))])
    w = np.zeros(Xb.shape[1])
    for _ in range(iters):  # Newton's method
        p = 1 / (1 + np.exp(-(Xb @ w + offset)))
        g = Xb.T @ (p - y) + l2 * w
        H = (Xb * (p * (1 - p))[:, None]).T @ Xb + l2 * np.eye(len(w))
        w -= np.linalg.solve(H, g)
    return w


def main(tmp: str) -> None:
    service = Service(SQLiteStore(tmp), get_embedder())
    kbs = {"banking": intent_kb(banking()), "hwu": intent_kb(hwu()), "chitchat": chitchat()}
    for name, (qnas, _) in kbs.items():
        service.create_project(name)
        service.upsert(name, qnas, progress=True)
    answer_of = {name: {q.id: q.answer for q in service.store.list_qnas(name)} for name in kbs}
    X, y = [], []
    off = {"banking": "hwu", "hwu": "banking", "chitchat": "banking"}
    for name, (_, queries) in kbs.items():
        sample = rng.sample(queries, min(400, len(queries)))
        offtopic = rng.sample(kbs[off[name]][1], min(300, len(kbs[off[name]][1])))
        for question, gold in sample + [(q, None) for q, _ in offtopic]:
            index, F = features(service, name, question)
            order = np.argsort(-(F[:, 0] + 0.3 * F[:, 2]))
            wrong = [r for r in order[:10] if answer_of[name][int(index.ids[r])] != gold][:8]
            for r in wrong:
                X.append(F[r]); y.append(0.0)
            if gold is not None:
                row = next(r for r in range(index.n) if answer_of[name][int(index.ids[r])] == gold)
                X.append(F[row]); y.append(1.0)
    X, y = np.asarray(X), np.asarray(y)
    # Intent KBs have label names for answers, so the data cannot tell how much a real answer's
    # text should count; answer weights are fixed small and positive, the rest is fitted around them.
    w_asim, w_acov = 1.0, 0.5
    w = fit(X[:, [0, 2]], y, w_asim * X[:, 1] + w_acov * X[:, 3])
    logit = X[:, 0] * w[0] + X[:, 1] * w_asim + X[:, 2] * w[1] + X[:, 3] * w_acov + w[2]
    accuracy = float(((logit > 0) == (y > 0.5)).mean())
    print(f"Calibration(w_qsim={w[0]:.3f}, w_asim={w_asim}, w_qcov={w[1]:.3f}, w_acov={w_acov}, bias={w[2]:.3f})"
          f"  # {len(y)} pairs, accuracy at 0.5: {accuracy:.3f}")


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        main(sys.argv[1] if len(sys.argv) > 1 else tmp)
