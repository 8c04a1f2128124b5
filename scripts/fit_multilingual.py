"""Fit ``calibrations.MULTILINGUAL`` (CJK questions ranked in the multilingual space) on CJK dev splits only.

Builds ``make eval``'s Chinese and Japanese knowledge bases (``evaluation/cjk.py``: XQuAD-zh and JSQuAD, a
paragraphs KB and a FAQ KB each) as the evaluation does, and reads the ranker's features (``ranker.features``
on ``MemIndex.multilingual()``: the universal sentence encoder's cosines beside the keyword features) of every
record for every **dev** question:

1. weights: a softmax over each in-scope question's records (the right one against all others), for passages
   (text cosine, text coverage, text BM25) and for QnAs (question cosine, answer cosine, question and answer
   coverage) apart, as scripts/fit_ranker.py fits the English ones;
2. the last step (``regime.RegimeTerms``: the top logit, its gap to the runner-up, passage or not): a logistic
   regression of "the top answer is right" over dev questions in scope and off-topic (an off-topic question's
   top answer is never right), each KB weighing the same, so a confidence reads as the chance the answer is right.

Prints the Calibration and the dev figures at 0.5 (precision, recall, top-1).

``--cross`` fits ``calibrations.CROSSLINGUAL`` the same way on XQuAD's English KBs given the space and asked in
Chinese (``cjk.asked_in_chinese``, dev splits): what a CJK question asked of a KB whose records are mostly not CJK is
read with (``multilingual.crosses``), where no keyword is ever shared and MULTILINGUAL's keyword weights would read
every right answer as a poor one.

Usage: python scripts/fit_multilingual.py [DATA_DIR [CACHE]] [--cross] [--write]   (~2 min with a warm eval/.cache; CACHE: another
embedding cache file, such as an `openqna eval --out DIR` run's DIR/.cache/embeddings.sqlite3)
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression

from openqna.evaluation import SEED, cjk
from openqna.evaluation.embedcache import CachedEmbedder
from openqna.index.analyze import analyze
from openqna.kb.catalog import open_store
from openqna.kb.service import Service
from openqna.models.embedder import get_embedder
from openqna.ranking import calibrations, ranker, regime

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fit_ranker import softmax_fit  # noqa: E402  (the same softmax over each question's records)

QNA_NAMES = ("qsim", "asim", "qcov", "acov")
PASSAGE_NAMES = ("asim", "acov", "bm25")
TERMS = ("logit", "gap", "passage")
THRESHOLD = 0.5
# Cross-lingual questions (--cross): the last step's output less this, as the FAQ last step's SHIFT places 0.5
# (scripts/fit_regimes.py); chosen on the dev figures printed for each of SHIFTS.
CROSS_SHIFT = 0.75
SHIFTS = (0.0, 0.5, 0.75, 1.0, 1.5)


def collect(service: Service, data_dir: Path, cross: bool = False) -> list[dict]:
    """Per question of the CJK KBs (``cross``: XQuAD's English KBs asked in Chinese): its KB, split, the features of
    every record, which records are right."""
    out = []
    kbs = cjk.asked_in_chinese(service, data_dir, seed=SEED) if cross else [
        kb for name in ("xquad-zh", "jsquad") for kb in cjk.paragraph_kbs(service, data_dir, name, seed=SEED)]
    for kb in kbs:
        index = service.indexes.get(kb.project)
        view = index.multilingual()
        assert view is not None, kb.project
        everything = np.ones(index.n, bool)
        vectors = service.multilingual.embedder.embed([q.text for q in kb.questions])
        for q, v in zip(kb.questions, vectors):
            f = ranker.features(view, analyze(q.text), v, everything, [])
            right = np.array([q.gold is not None and kb.is_right(int(index.ids[r]), q.gold) for r in f.rows])
            out.append({"kb": kb.project, "split": q.split, "f": f, "right": right,
                        "passage": kb.include_unstructured, "inscope": q.gold is not None})
    return out


def matrix(f: ranker.Features, names: tuple[str, ...]) -> np.ndarray:
    return np.stack([getattr(f, n) for n in names], axis=1).astype(np.float64)


def main() -> None:
    args = [a for a in sys.argv[1:] if a not in ("--write", "--cross")]
    cross = "--cross" in sys.argv[1:]
    name = "CROSSLINGUAL" if cross else "MULTILINGUAL"
    data_dir = Path(args[0] if args else "../shared/data")
    cache = Path(args[1]) if len(args) > 1 else Path("eval") / ".cache" / "embeddings.sqlite3"
    with tempfile.TemporaryDirectory(prefix="openqna-fit-multilingual-") as tmp:
        store = open_store(tmp)
        service = Service(store, CachedEmbedder(get_embedder("local"), cache),
                          CachedEmbedder(get_embedder("multilingual"), cache))
        questions = collect(service, data_dir, cross)
        store.close()
    dev = [q for q in questions if q["split"] == "dev"]
    weights = {}
    for passage, names in ((True, PASSAGE_NAMES), (False, QNA_NAMES)):
        groups = [(matrix(q["f"], names), q["right"].astype(float)) for q in dev
                  if q["passage"] == passage and q["inscope"] and q["right"].any()]
        weights[passage] = np.round(softmax_fit(groups, l2=1e-4), 3)
        print("passages" if passage else "QnAs", dict(zip(names, weights[passage])), f"({len(groups)} questions)")

    def logits(q: dict) -> np.ndarray:
        names = PASSAGE_NAMES if q["passage"] else QNA_NAMES
        return matrix(q["f"], names) @ weights[q["passage"]]

    X, y, w = [], [], []
    per_kb = {kb: sum(q["kb"] == kb for q in dev) for kb in {q["kb"] for q in dev}}
    for q in dev:
        z = logits(q)
        x = regime.inputs(z, np.ones(len(z), bool), np.full(len(z), q["passage"]), np.zeros(len(z), bool))
        top = int(np.argmax(z))
        X.append([x[t][top] for t in TERMS])
        y.append(bool(q["right"][top]))
        w.append(1.0 / per_kb[q["kb"]])
    model = LogisticRegression(C=10.0).fit(np.asarray(X), np.asarray(y), sample_weight=np.asarray(w) * len(w))
    coef = np.round(model.coef_[0], 3)
    terms = regime.RegimeTerms(w_logit=float(coef[0]), w_gap=float(coef[1]), w_passage=float(coef[2]),
                               bias=round(float(model.intercept_[0]), 3))
    if cross:  # where 0.5 stands: the dev figures for each shift, CROSS_SHIFT chosen
        for shift in SHIFTS:
            dev_figures = figures(dev, logits, dataclasses.replace(terms, shift=shift))
            print(f"shift {shift}{' (chosen)' if shift == CROSS_SHIFT else ''}: dev {dev_figures}")
        terms = dataclasses.replace(terms, shift=CROSS_SHIFT)
    qna = dict(zip(("w_" + n for n in QNA_NAMES), weights[False].tolist()))
    passage = dict(zip(("w_" + n for n in PASSAGE_NAMES), weights[True].tolist()))
    zero = dict(w_qsim=0.0, w_asim=0.0, w_qcov=0.0, w_acov=0.0, w_qmean=0.0, w_qcent=0.0, w_bm25=0.0)
    c = calibrations.Calibration(**{**zero, **qna}, scale=1.0, shift=0.0, typical=None, regime=terms,
                                 passages=calibrations.Calibration(**{**zero, **passage}, scale=1.0, shift=0.0,
                                                                   typical=None), context_boost=1.0)
    print(c)
    if "--write" in sys.argv[1:]:
        calibrations.save(name, c, fitted_by="scripts/fit_multilingual.py" + (" --cross" if cross else ""))
        print(f"{name} written to {calibrations.DATA_FILE}")
    for split in ("dev", "test"):
        for kb in sorted({q["kb"] for q in questions}) + ["all"]:
            rows = [q for q in questions if q["split"] == split and kb in ("all", q["kb"])]
            print(f"{split:4} {kb:32} {figures(rows, logits, terms)}")


def figures(rows: list[dict], logits, terms: regime.RegimeTerms) -> str:
    """Top-1, and precision, recall and off-topic rejected at ``THRESHOLD``, of ``rows`` read with ``terms``."""
    conf, right, inscope = [], [], []
    for q in rows:
        z = logits(q)
        x = regime.inputs(z, np.ones(len(z), bool), np.full(len(z), q["passage"]), np.zeros(len(z), bool))
        top = int(np.argmax(z))
        conf.append(float(1 / (1 + np.exp(-terms.logit({k: v[top:top + 1] for k, v in x.items()})[0]))))
        right.append(bool(q["right"][top]))
        inscope.append(q["inscope"])
    conf_a, right_a, in_a = np.asarray(conf), np.asarray(right), np.asarray(inscope)
    answered = conf_a >= THRESHOLD
    precision = right_a[answered].mean() if answered.any() else float("nan")
    recall = answered[right_a].mean() if right_a.any() else float("nan")
    return (f"top-1 {right_a[in_a].mean():.3f}  P {precision:.3f}  R {recall:.3f}"
            f"  off-topic rejected {(~answered[~in_a]).mean():.3f}")

if __name__ == "__main__":
    main()
