"""Research helper: dump per-(query, candidate record) ranking features for dev and test sets.

Knowledge bases are built exactly as ``openqna eval`` builds them (same seeds, training splits).
Dev queries never come from a test split:

* banking77: 12 seeded-random training utterances per intent that are not in the KB;
* hwu64: the ``valid`` split;
* chit-chat: only the questions the eval *indexes*; within them, half (rounded up) are indexed
  again and the rest asked (the eval's asked questions are never seen);
* SciFact: the train claims over the full corpus;
* off-topic: the other intent set's dev queries (and for chit-chat both).

Test sets (``--test``) are the eval's own and are dumped only to measure, never to fit.
Features are computed with numpy from ``MemIndex`` public data (``index.q``, ``index.a``).

Usage: python scripts/ranker_features.py OUT.pkl [--test]
"""

from __future__ import annotations

import pickle
import random
import sys
import tempfile
from pathlib import Path

import numpy as np

from openqna.evaluation import datasets, faq
from openqna.evaluation.embedcache import cached
from openqna.formats import read_file
from openqna.index.analyze import analyze
from openqna.index.memindex import MemIndex
from openqna.index.postings import K1
from openqna.kb.service import Service
from openqna.models.embedder import get_embedder
from openqna.records import QnA
from openqna.store.sqlite import SQLiteStore

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
SEED = 20240601


def _unit_bm25(fld, terms):
    return fld.bm25_units(terms)


def _max_bm25(fld, terms) -> float:
    """The query's largest possible BM25 in a field: every term at its upper bound idf*(k1+1)."""
    return sum(fld.idf(t) * (K1 + 1.0) for t in terms if fld.postings.get(t) is not None) or 1.0


def _per_record(fld, unit_scores, n, fill, reduce=np.maximum):
    out = np.full(n, fill, np.float32)
    if fld.n:
        out[fld.seg_rows] = reduce.reduceat(unit_scores, fld.starts)
    return out


def features(index: MemIndex, qvec: np.ndarray, text: str, exclude_unit: int | None = None) -> dict[str, np.ndarray]:
    """Per-record features (all records).  ``exclude_unit`` drops one question unit (leave-one-out)."""
    n = index.n
    terms = analyze(text)
    q, a = index.q, index.a
    qs = q.matrix @ qvec
    bq = _unit_bm25(q, terms)
    wq = {t: q.idf(t) for t in set(terms) if " " not in t}
    cq = q.coverage_units(wq)
    counts = np.bincount(q.rows, minlength=n).astype(np.float32)
    if exclude_unit is not None:
        qs = qs.copy(); qs[exclude_unit] = -1.0
        bq = bq.copy(); bq[exclude_unit] = 0.0
        cq = cq.copy(); cq[exclude_unit] = 0.0
    qmax = _per_record(q, qs, n, -1.0)
    qsum = _per_record(q, np.where(qs > -1, qs, 0.0), n, 0.0, np.add)
    cnt = counts.copy()
    if exclude_unit is not None:
        cnt[q.rows[exclude_unit]] -= 1
    qmean = np.where(cnt > 0, qsum / np.maximum(cnt, 1), -1.0)
    # second best question (how many questions agree)
    asim = np.full(n, -1.0, np.float32)
    if a.n:
        asim[a.rows] = a.matrix @ qvec
    ba = np.zeros(n, np.float32)
    if a.n:
        ba[a.rows] = _unit_bm25(a, terms)
    wa = {t: a.idf(t) for t in set(terms) if " " not in t}
    ca = np.zeros(n, np.float32)
    if a.n:
        ca[a.rows] = a.coverage_units(wa)
    return {
        "qmax": qmax, "qmean": qmean, "asim": asim,
        "qcov": _per_record(q, cq, n, 0.0), "acov": ca,
        "bq": _per_record(q, bq, n, 0.0) / _max_bm25(q, terms), "ba": ba / _max_bm25(a, terms),
        "nq": cnt,
    }


def centroids(index: MemIndex, exclude_unit: int | None = None) -> np.ndarray:
    q = index.q
    m = q.matrix
    if exclude_unit is not None:
        m = m.copy(); m[exclude_unit] = 0
    c = np.zeros((index.n, m.shape[1]), np.float32)
    np.add.at(c, q.rows, m)
    return c / np.maximum(np.linalg.norm(c, axis=1, keepdims=True), 1e-9)


def dump_kb(index: MemIndex, vectors: np.ndarray, queries: list[tuple[str, int | None]], rows_cap: int | None = None):
    """For every query: dict of feature arrays over all records and the gold row (None: off-topic)."""
    out = []
    cent = centroids(index)
    for (text, gold_row), v in zip(queries, vectors):
        f = features(index, v, text)
        f["cent"] = cent @ v
        f["vec"] = v
        out.append((f, gold_row))
    return out


def loo_kb(index: MemIndex, texts: list[str], limit: int = 1500, seed: int = 1):
    """Leave-one-out: each indexed question (of a record with ≥2 questions) asked of the index without it."""
    q = index.q
    counts = np.bincount(q.rows, minlength=index.n)
    units = [u for u in range(q.n) if counts[q.rows[u]] >= 2]
    rng = random.Random(seed)
    if len(units) > limit:
        units = sorted(rng.sample(units, limit))
    out = []
    for u in units:
        f = features(index, q.matrix[u], texts[u], exclude_unit=u)
        f["cent"] = centroids(index, u) @ q.matrix[u]
        f["vec"] = q.matrix[u]
        out.append((f, int(q.rows[u]), u))
    return out


def main(out: Path, test: bool) -> None:
    tmp = tempfile.mkdtemp(prefix="rankfeat-")
    embedder = cached(get_embedder(), ROOT / "eval" / ".cache" / "embeddings.sqlite3")
    service = Service(SQLiteStore(tmp), embedder)
    result = build(service, embedder, test)
    embedder.close()
    for v in result.values():
        v["queries"] = dump_kb(v["index"], v["vectors"], v["asked"])
        v["loo"] = loo_kb(v["index"], v["texts"])
        v["q_rows"] = v["index"].q.rows
        v["q_matrix"] = v["index"].q.matrix
        v["n"] = v["index"].n
        del v["index"]
    with open(out, "wb") as f:
        pickle.dump(result, f)


def build(service: Service, embedder, test: bool) -> dict:
    """KB name -> {"index", "asked": [(text, gold row or None)], "vectors", "texts" (indexed questions), "n_in"}."""
    result = {}
    intent = {d.name: d for d in (datasets.banking77(DATA), datasets.hwu64(DATA))}
    kbs = {name: faq.intent_kb(service, d, seed=SEED) for name, d in intent.items()}
    rng = random.Random("dev")
    dev_q: dict[str, list[tuple[str, str]]] = {}
    # banking dev: held-out training utterances
    bk = service.store.list_qnas("banking77")
    in_kb = {qq for r in bk for qq in r.questions}
    dev_q["banking77"] = []
    for label, utts in intent["banking77"].train.items():
        rest = [u for u in utts if u not in in_kb]
        dev_q["banking77"] += [(u, label) for u in rng.sample(rest, min(12, len(rest)))]
    folder = DATA / "hwu64" / "valid"
    dev_q["hwu64"] = list(zip([t.strip() for t in (folder / "seq.in").read_text().splitlines()],
                              [t.strip() for t in (folder / "label").read_text().splitlines()]))
    for name in intent:
        index = service.indexes.get(name)
        row_of_answer = {r.answer: index.row_of[r.id] for r in service.store.list_qnas(name)}
        if test:
            qs = [(t, index.row_of[g]) for t, g in kbs[name].queries]
        else:
            qs = [(t, row_of_answer[datasets.humanise(lab)]) for t, lab in dev_q[name]]
        other = "hwu64" if name == "banking77" else "banking77"
        off = [(t, None) for t, _ in (kbs[other].queries if test else dev_q[other])]
        allq = qs + off
        vec = embedder.embed([t for t, _ in allq])
        texts = [qq for r in sorted(service.store.list_qnas(name), key=lambda r: r.id) for qq in r.questions]
        result[name] = {"index": index, "asked": allq, "vectors": vec, "texts": texts, "n_in": len(qs)}
        print(name, len(qs), len(off), file=sys.stderr)
    # chit-chat
    for p in datasets.CHITCHAT_PERSONALITIES:
        project = f"chitchat-{p}"
        rng2 = random.Random(f"{SEED}:{project}")
        content = read_file(datasets.chitchat_file(DATA, p))
        indexed, asked = [], []
        for qna in content.qnas:
            questions = list(qna.questions)
            rng2.shuffle(questions)
            half = (len(questions) + 1) // 2
            if test:
                indexed.append(QnA(questions[:half], qna.answer, source="c"))
                asked.append((questions[half:], qna.answer))
            else:
                seen = questions[:half]
                h2 = (len(seen) + 1) // 2
                indexed.append(QnA(seen[:h2], qna.answer, source="c"))
                asked.append((seen[h2:], qna.answer))
        name = project + ("" if test else "-dev")
        service.create_project(name)
        service.upsert(name, indexed)
        index = service.indexes.get(name)
        row_of_answer = {r.answer: index.row_of[r.id] for r in service.store.list_qnas(name)}
        qs = [(t, row_of_answer[a]) for ts, a in asked for t in ts]
        offsrc = (kbs["banking77"].queries[:150] + kbs["hwu64"].queries[:150]) if test else \
            (dev_q["banking77"][:150] + dev_q["hwu64"][:150])
        allq = qs + [(t, None) for t, _ in offsrc]
        vec = embedder.embed([t for t, _ in allq])
        texts = [qq for r in sorted(service.store.list_qnas(name), key=lambda r: r.id) for qq in r.questions]
        result[project] = {"index": index, "asked": allq, "vectors": vec, "texts": texts, "n_in": len(qs)}
        print(project, len(qs), file=sys.stderr)
    return result


if __name__ == "__main__":
    main(Path(sys.argv[1]), "--test" in sys.argv)
