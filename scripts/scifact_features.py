"""Research helper: passage-ranking features on BEIR SciFact (train claims to fit, test claims to measure).

The corpus is indexed as ``openqna eval`` indexes it (one passage record per abstract); for each claim the
200 best records by dense and by BM25 (text field) are the candidates.
Usage: python scripts/scifact_features.py OUT.pkl
"""

from __future__ import annotations

import pickle
import sys
import tempfile
from pathlib import Path

import numpy as np

from openqna.evaluation import datasets, passages
from openqna.evaluation.embedcache import cached
from openqna.index.analyze import analyze
from openqna.index.postings import K1
from openqna.kb.service import Service
from openqna.models.embedder import get_embedder
from openqna.store.sqlite import SQLiteStore

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"


def main(out: Path) -> None:
    embedder = cached(get_embedder(), ROOT / "eval" / ".cache" / "embeddings.sqlite3")
    service = Service(SQLiteStore(tempfile.mkdtemp()), embedder)
    test = datasets.scifact(DATA, "test")
    train = datasets.scifact(DATA, "train")
    service.create_project("scifact")
    service.upsert("scifact", [passages.passage_record(d, t, x) for d, (t, x) in test.docs.items()])
    index = service.indexes.get("scifact")
    doc_of = {q.id: q.source for q in service.store.list_qnas("scifact")}
    docs = [doc_of[int(i)] for i in index.ids]
    result = {}
    allowed = np.ones(index.n, bool)
    for split, corpus in (("train", train), ("test", test)):
        rows = []
        qids = sorted(corpus.queries)
        vecs = embedder.embed([corpus.queries[q] for q in qids])
        for qid, v in zip(qids, vecs):
            text = corpus.queries[qid]
            terms = analyze(text)
            a = index.dense(v, "a", allowed)
            qs = index.dense(v, "q", allowed)
            ba = index.bm25(terms, "a", allowed)
            bq = index.bm25(terms, "q", allowed)
            ca = index.coverage(terms, "a", allowed)
            cq = index.coverage(terms, "q", allowed)
            norm = sum(index.a.idf(t) * (K1 + 1) for t in terms if index.a.postings.get(t) is not None) or 1.0
            cand = np.union1d(np.argsort(-a)[:200], np.argsort(-ba)[:200])
            rel = np.array([docs[r] in corpus.qrels[qid] for r in cand])
            rows.append({"cand": cand, "asim": a[cand], "qsim": qs[cand], "ba": ba[cand] / norm, "bq": bq[cand] / norm,
                         "acov": ca[cand], "qcov": cq[cand], "rel": rel, "n_rel": len(corpus.qrels[qid]),
                         "a_all": a, "ba_all": ba})
        result[split] = rows
    embedder.close()
    with open(out, "wb") as f:
        pickle.dump(result, f)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
