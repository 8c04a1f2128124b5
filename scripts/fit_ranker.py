"""Fit the default ranker's ``Calibration`` on development data only (never a test split).

FAQ weights: a softmax over every record of the KB per question (the right record against all
others), over the features the ranker computes (``ranker.features``), on the dev KBs and queries
of ``scripts/ranker_features.py``: banking77 (training utterances not in the KB), hwu64 (its
validation split), chit-chat (questions the evaluation indexes, split again).
Confidence: each dev KB's own adaptation (``ranking.adapt``: held-out alternate questions)
gives its typical logit (a percentile of its held-out right answers' logits: the median unless another
rejects more off-topic dev questions); ``typical`` is the median over the dev KBs; ``scale`` is the slope of a logistic fit of
right-vs-off-topic on the adapted logit and ``shift`` puts 0.5 where banking77's and hwu64's dev
questions lose at most ``LOSS`` of top-1.  Passages: the same softmax over SciFact *train* claims'
candidates (asim, acov, answer BM25), then a logistic fit of relevant vs best wrong for the scale.

Lexical (``--lexical``): the same two fits with the keyword features alone (FAQ: question and
answer coverage; passages: text coverage and BM25), for the questions the embedder cannot read
(``ranker.rank``'s ``reads_cjk``); FAQ confidence 0.5 loses at most ``LOSS`` of the lexical
top-1 on banking77's and hwu64's dev questions, as above, with no KB adaptation.

Usage: python scripts/fit_ranker.py [--lexical] [--write]   (prints the Calibration, and with --write writes it into
src/openqna/ranking/calibrations.json for the embedder in OPENQNA_EMBEDDER; ~2 min with a warm eval/.cache)
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ranker_features  # noqa: E402

from openqna.evaluation import datasets, passages  # noqa: E402
from openqna.evaluation.embedcache import cached  # noqa: E402
from openqna.index.analyze import analyze
from openqna.kb.service import Service
from openqna.models.embedder import get_embedder  # noqa: E402
from openqna.ranking import adapt, calibrations, ranker
from openqna.store.sqlite import SQLiteStore  # noqa: E402

FAQ_NAMES = ("qsim", "asim", "qcov", "acov", "qmean", "qcent")
PASSAGE_NAMES = ("asim", "acov", "bm25")
LOSS = 0.025
PERCENTILES = (50, 25, 10, 5)  # ties keep the median, the steadiest estimate
ROOT = Path(__file__).resolve().parents[1]


def matrix(f: ranker.Features, names) -> np.ndarray:
    return np.stack([getattr(f, n) for n in names], axis=1).astype(np.float64)


def softmax_fit(groups: list[tuple[np.ndarray, np.ndarray]], l2: float = 1e-5) -> np.ndarray:
    """Weights maximising the softmax likelihood of the relevant rows (target spread over them) per group."""
    dim = groups[0][0].shape[1]

    def loss(w):
        total, grad = 0.0, np.zeros(dim)
        for X, target in groups:
            z = X @ w
            z -= z.max()
            p = np.exp(z)
            p /= p.sum()
            total -= float(target @ np.log(p + 1e-12))
            grad -= target @ X - p @ X
        return total / len(groups) + l2 * w @ w, grad / len(groups) + 2 * l2 * w

    return minimize(loss, np.zeros(dim), jac=True, method="L-BFGS-B").x


def logistic_slope(z: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    def loss(p):
        s = 1 / (1 + np.exp(-(p[0] * z + p[1])))
        return -np.mean(y * np.log(s + 1e-12) + (1 - y) * np.log(1 - s + 1e-12))

    a, b = minimize(loss, np.array([1.0, 0.0]), method="Nelder-Mead").x
    return float(a), float(b)


def dev_features(kbs) -> dict[str, list[ranker.Features]]:
    """The ranker's features of every dev question (in scope and off-topic) of each dev KB, every record scored."""
    feats = {}
    for name, kb in kbs.items():
        index = kb["index"]
        everything = np.ones(index.n, bool)
        feats[name] = [ranker.features(index, analyze(t), v, everything, []) for (t, _), v in
                       zip(kb["asked"], kb["vectors"])]
    return feats


def dev_groups(kbs, feats, names) -> list[tuple[np.ndarray, np.ndarray]]:
    """(features ``names`` of every record, one-hot right record) for each in-scope dev question."""
    groups = []
    for name, kb in kbs.items():
        for f, (_, gold) in zip(feats[name][: kb["n_in"]], kb["asked"][: kb["n_in"]]):
            target = np.zeros(len(f.rows))
            target[gold] = 1.0
            groups.append((matrix(f, names), target))
    return groups


def faq(service, embedder) -> calibrations.Calibration:
    kbs = ranker_features.build(service, embedder, test=False)
    feats = dev_features(kbs)
    w = softmax_fit(dev_groups(kbs, feats, FAQ_NAMES))
    c = calibrations.Calibration(**dict(zip(("w_" + n for n in FAQ_NAMES), np.round(w, 3).tolist())),
                           bias=0.0, w_bm25=0.0, scale=1.0, shift=0.0, typical=0.0, context_boost=1.0)
    print("FAQ weights", dict(zip(FAQ_NAMES, np.round(w, 3))), file=sys.stderr)
    # each KB's adaptation, then the adapted top logit of every dev question
    tops = {}
    for name, kb in kbs.items():
        index = kb["index"]
        a = adapt.fit(index, lambda *args: ranker._held_out_logits(c, *args))
        rows = []
        for f, v, (_, gold) in zip(feats[name], kb["vectors"], kb["asked"]):
            logit = c.logit(f)
            extra = a.logit(v, f.rows) if a is not None else None
            if extra is not None:
                logit = logit + extra
            top = int(np.argmax(logit))
            rows.append((logit[top], gold is not None, gold is not None and top == gold))
        tops[name] = (np.asarray(rows, dtype=float), a)
        print(f"{name}: offset {a.offset:.2f} classifier weight {a.weight} held-out top-1 "
              f"{a.top1_without:.3f} -> {a.top1_with:.3f}", file=sys.stderr)
    best = None
    for pct in PERCENTILES:  # which percentile of a KB's held-out right answers to read confidence against
        z = {name: r[:, 0] - np.percentile(a.right, pct) for name, (r, a) in tops.items()}
        t = threshold(tops, z)
        rejected = min(np.mean(z[n][r[:, 1] == 0] < t) for n, (r, _) in tops.items() if n in ("banking77", "hwu64"))
        print(f"percentile {pct}: threshold {t:.2f}, off-topic rejected ≥ {rejected:.3f}", file=sys.stderr)
        if best is None or rejected > best[0] + 1e-9:
            best = (rejected, pct, t, z)
    _, pct, t, z = best
    typical = float(np.median([np.percentile(a.right, pct) for _, a in tops.values()]))
    print(f"PERCENTILE = {pct}", file=sys.stderr)
    zs = np.concatenate([z[n][(r[:, 2] == 1) | (r[:, 1] == 0)] for n, (r, _) in tops.items()])
    ys = np.concatenate([r[:, 2][(r[:, 2] == 1) | (r[:, 1] == 0)] for r, _ in tops.values()])
    scale, _ = logistic_slope(zs, ys)
    for n, (r, _) in tops.items():
        inscope = r[:, 1] == 1
        print(f"  {n}: top-1 lost {np.mean((r[inscope, 2] == 1) & (z[n][inscope] < t)):.3f}, off-topic rejected "
              f"{np.mean(z[n][~inscope] < t):.3f}", file=sys.stderr)
    return dataclasses.replace(c, scale=round(scale, 3), shift=round(float(-scale * t), 3), typical=round(typical, 3))


def faq_lexical(service, embedder) -> calibrations.Calibration:
    kbs = ranker_features.build(service, embedder, test=False)
    names = ("qcov", "acov")
    feats = dev_features(kbs)
    w = softmax_fit(dev_groups(kbs, feats, names))
    c = calibrations.Calibration(w_qsim=0.0, w_asim=0.0, w_qmean=0.0, w_qcent=0.0, w_bm25=0.0, bias=0.0,
                           w_qcov=round(float(w[0]), 3), w_acov=round(float(w[1]), 3), scale=1.0, shift=0.0,
                           typical=None, context_boost=1.0)
    tops = {}
    for name, kb in kbs.items():
        rows = []
        for f, (_, gold) in zip(feats[name], kb["asked"]):
            logit = c.logit(f)
            top = int(np.argmax(logit))
            rows.append((logit[top], gold is not None, gold is not None and top == gold))
        tops[name] = (np.asarray(rows, dtype=float), None)
    z = {name: r[:, 0] for name, (r, _) in tops.items()}
    t = threshold(tops, z)
    zs = np.concatenate([z[n][(r[:, 2] == 1) | (r[:, 1] == 0)] for n, (r, _) in tops.items()])
    ys = np.concatenate([r[:, 2][(r[:, 2] == 1) | (r[:, 1] == 0)] for r, _ in tops.values()])
    scale, _ = logistic_slope(zs, ys)
    for n, (r, _) in tops.items():
        inscope = r[:, 1] == 1
        print(f"  lexical {n}: top-1 {np.mean(r[inscope, 2]):.3f}, lost {np.mean((r[inscope, 2] == 1) & (z[n][inscope] < t)):.3f}, "
              f"off-topic rejected {np.mean(z[n][~inscope] < t):.3f}", file=sys.stderr)
    return dataclasses.replace(c, scale=round(scale, 3), shift=round(float(-scale * t), 3))


def threshold(tops, z) -> float:
    """The highest z that loses at most LOSS of top-1 on banking77's and hwu64's dev questions."""
    t = -10.0
    for cand in np.arange(-10.0, 10.0, 0.05):
        lost = max(np.mean((r[:, 2] == 1) & (z[n] < cand)) / np.mean(r[:, 1] == 1)
                   for n, (r, _) in tops.items() if n in ("banking77", "hwu64"))
        if lost > LOSS:
            break
        t = float(cand)
    return t


def passage(service, embedder, names=PASSAGE_NAMES) -> calibrations.Calibration:
    data = ranker_features.DATA
    corpus = datasets.scifact(data, "train")
    service.create_project("scifact")
    service.upsert("scifact", [passages.passage_record(d, t, x) for d, (t, x) in corpus.docs.items()])
    index = service.indexes.get("scifact")
    doc = {q.id: q.source for q in service.store.list_qnas("scifact")}
    docs = np.asarray([doc[int(i)] for i in index.ids])
    qids = sorted(corpus.queries)
    vectors = embedder.embed([corpus.queries[q] for q in qids])
    everything = np.ones(index.n, bool)
    groups, cands = [], []
    for qid, v in zip(qids, vectors):
        f = ranker.features(index, analyze(corpus.queries[qid]), v, everything, [])
        rel = np.isin(docs, list(corpus.qrels[qid])).astype(float)
        X = matrix(f, names)
        keep = np.union1d(np.argsort(-f.asim)[:200], np.argsort(-f.bm25)[:200])
        if rel[keep].any():
            groups.append((X[keep], rel[keep] / rel[keep].sum()))
        cands.append((X, rel))
    w = softmax_fit(groups)
    zs, ys = [], []
    for X, rel in cands:
        logit = X @ w
        top = np.argsort(-logit)[:10]
        zs += logit[top].tolist()
        ys += rel[top].tolist()
    scale, shift = logistic_slope(np.asarray(zs), np.asarray(ys))
    print("passage weights", dict(zip(names, np.round(w, 3))), file=sys.stderr)
    weights = dict(zip(names, (round(float(x), 3) for x in w)))
    return calibrations.Calibration(w_qsim=0.0, w_asim=weights.get("asim", 0.0), w_qcov=0.0, w_acov=weights["acov"],
                              w_qmean=0.0, w_qcent=0.0, w_bm25=weights["bm25"], bias=0.0,
                              scale=round(scale, 3), shift=round(shift, 3), typical=None, context_boost=1.0)


def main() -> None:
    embedder = cached(get_embedder(), ROOT / "eval" / ".cache" / "embeddings.sqlite3")
    with tempfile.TemporaryDirectory() as tmp:
        service = Service(SQLiteStore(tmp), embedder)
        if "--lexical" in sys.argv[1:]:
            c = faq_lexical(service, embedder)
            p = passage(service, embedder, names=("acov", "bm25"))
        else:
            c = faq(service, embedder)
            p = passage(service, embedder)
    embedder.close()
    fit = dataclasses.replace(c, passages=p)
    print(fit)
    if "--write" in sys.argv[1:]:
        script = " ".join(["scripts/fit_ranker.py"] + [a for a in sys.argv[1:] if a == "--lexical"])
        if "--lexical" in sys.argv[1:]:
            calibrations.save("LEXICAL", fit, fitted_by=script)
        else:
            name = calibrations.entry_for("faq", embedder.name)
            calibrations.save(name, fit, fitted_by=script, use="faq", embedder=embedder.name)
        print(f"written to {calibrations.DATA_FILE}", file=sys.stderr)


if __name__ == "__main__":
    main()
