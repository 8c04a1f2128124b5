"""Fit the default ranker's weights for FAQ pages (``calibrations.SPARSE``) and its last step on every KB
(``regime.RegimeTerms``, ``calibrations.REGIME``) on the dev splits of ``make eval``'s regimes.

Builds the knowledge bases of the regimes (many questions per QnA, one question, documents, tiny) as the
evaluation does, asks every question through ``Service.ask``, and keeps every candidate's features (the ranker
scores every record of these small KBs).  Then, on the **dev** questions only:

1. ``SPARSE``: a softmax over each in-scope question's records (the right records' probability maximised, a
   little L2), on the one-question regime's KBs (FAQ pages with real answers, ``SPARSE_REGIMES``), each KB weighing
   the same, over ``COLUMNS`` (dense alone over both fields and the answer features again times the KB's answer
   informativeness among them).  The ranker uses them on FAQ pages without passages the adaptation does not reach.
2. ``REGIME``: a logistic regression of "the top answer is right" on the terms of ``regime.inputs`` of each
   question's top answer (an off-topic question's is never right; an exact match, confidence 1.0, is left out),
   each regime but ``NOT_FITTED`` weighing the same, with the logit, gap and share weights bounded at 0 (``regime``'s docstring).
   The many-question KBs are asked twice, adapted and as a KB that cannot adapt (too large, or adaptation off)
   ranks them, the two halves sharing their regime's weight; the FAQ pages' logit and gap (``SPARSE``'s scale)
   and the adapted KBs' have weights of their own.
3. ``RIVAL``, "none of these" (below), and ``SHIFT``: each regime's dev precision and recall at 0.5 are printed for a grid of shifts; the chosen one is below.

The embedding model is ``OPENQNA_EMBEDDER``'s (the default's unless set): each model's fits read its own vectors and
start from its own FAQ calibration (``calibrations.calibration_for``).  ``--write`` writes the default's as ``SPARSE``
and ``REGIME``, another model's as entries of its own (``PARTS``: ``BALANCED_SPARSE`` and ``BALANCED_REGIME`` for
``BALANCED_CALIBRATION``), which its calibration then names as its parts.

Usage: [OPENQNA_EMBEDDER=balanced] python scripts/fit_regimes.py [DATA_DIR] [--write]   (~4 min with a warm
eval/.cache; FIT_REGIMES_CACHE=file.pkl keeps what was asked, so that a second run only refits)
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from scipy.optimize import minimize

from openqna.evaluation import FULL, SEED, datasets, faq, faq_regimes, regime_results
from openqna.evaluation import regimes as regimes_module
from openqna.evaluation.embedcache import cached
from openqna.evaluation.env import setting
from openqna.index.analyze import analyze, exact_key
from openqna.kb.catalog import open_store
from openqna.kb.service import Service
from openqna.models.embedder import get_embedder
from openqna.ranking import calibrations, ranker, regime

THRESHOLD = 0.5
# 0.5 stands where the fitted probability that the top answer is right is 0.68, the same on every kind of KB.  On
# the dev splits below, a shift of 1.0 puts the many-question and tiny KBs' precision at 0.5 near 90% (the issue's
# target) but leaves Azure's documented sample request on the Surface Pro 4 manual, which the issue requires at 0.5
# or more, at 0.45; 0.75 answers it at 0.51 for about a point of precision on the many-question dev split.
SHIFT = 0.75
SHIFTS = (0.0, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0)
# "none of these" (``regime.shares``), in calibrated logits (0 is an even chance).  No rival fits the dev splits best
# (log-loss 0.3696 against 0.3782 at -1), but they have no filters: a filter that leaves one record gives it all the
# mass without one.  tests/test_service.py asks the Surface FAQ page a charging question with a filter that leaves
# only the password QnA: -2 puts it at 0.31, above Bot Framework's default threshold of 0.3; -1 at 0.14.  The dev
# figures at 0.5 are within a point of -2's (printed below for the chosen rival).
RIVAL = -1.0
RIVALS = (None, -4.0, -2.0, -1.0, 0.0, 1.0, 2.0)
# The many-question KBs asked again without their adaptation (as a KB too large to adapt, or with OPENQNA_KB_ADAPT=0,
# ranks them): fitted with the many-question regime, the two halves sharing its weight.
NOT_ADAPTED = "many questions, not adapted"
# softmax columns of the FAQ-page weights: the question and answer features, dense alone over both (dmax), the
# answer's BM25, and the answer features again times the KB's answer informativeness (``ranker``); the question mean
# and centroid equal the best question on these KBs, so they are not columns
COLUMNS = ("qsim", "asim", "qcov", "acov", "dmax", "bm25", "asim_informative", "acov_informative",
           "bm25_informative")
# The regimes the FAQ-page weights are fitted on: FAQ pages with real answers.  The intent sets cut to one question
# (their answers are intent names) and XQuAD's FAQ (its questions were written from the answer) made the previous
# fit read answers more than real FAQ pages reward (issue 38); they are measured, never fitted on.
SPARSE_REGIMES = (faq_regimes.ONE,)
# Regimes left out of the last step's fit: the intent sets with intent names for answers (not what users have), and
# the Chinese one (ranked in the multilingual space, with a calibration of its own).  XQuAD's FAQ is fitted on here:
# the last step only reads how sure the ranker is, and with it every one-question dev KB's recall at 0.5 rose (covid-q
# 0.417 -> 0.466 at precision 0.791 -> 0.817; the regime 0.405 -> 0.463 at 0.791 -> 0.792).
NOT_FITTED = (faq_regimes.ONE_INTENT, faq_regimes.ONE_ZH)
TERMS = ("logit", "gap", "share", "passage", "heading", "adapted", "adapted_logit", "adapted_gap", "faq_page",
         "faq_page_logit", "faq_page_gap", "log_records")
BOUNDED = {"logit", "gap", "share", "adapted_logit", "faq_page_logit"}


def collect(data_dir: Path) -> list[tuple[str, dict, dict]]:
    """(regime, outcome, candidates) of every question: each candidate's features, kind, and whether it is right."""
    captured: list[dict | None] = []
    kbs_seen: dict[str, regimes_module.RegimeKB] = {}
    rank, ask, ask_all = ranker.rank, Service.ask, regimes_module.ask_all

    def ranking(index, question, vector, eligible, **kw):
        out = rank(index, question, vector, eligible, **kw)
        c = kw["calibration"]
        exact = list(index.exact.get(exact_key(question), ()))
        f = ranker.features(index, analyze(question if kw.get("keywords") is None else kw["keywords"]), vector,
                            eligible, exact, kw.get("flt"))
        adaptation = ranker._adaptation(index, c)
        extra = None if adaptation is None else adaptation.logit(vector, f.rows)
        captured[-1] = dict(rows=f.rows, ids=index.ids[f.rows].copy(),
                            f={k: np.asarray(getattr(f, k), np.float64) for k in ranker.FEATURE_NAMES},
                            passage=index.passage[f.rows].copy(), heading=ranker.headings(index)[f.rows].copy(),
                            eligible=eligible[f.rows].copy(), n=index.n, has_passages=index.has_passages,
                            one_question=index.mostly_one_question,
                            informative=ranker.answer_informativeness(index),
                            extra=None if extra is None else np.asarray(extra, np.float64),
                            offset=None if adaptation is None else adaptation.offset,
                            exact=np.isin(f.rows, exact))
        return out

    def asking(self, *args, **kw):
        captured.append(None)
        return ask(self, *args, **kw)

    def asking_all(service, kb):
        kbs_seen[kb.project] = kb
        return ask_all(service, kb)

    ranker.rank, Service.ask, regimes_module.ask_all = ranking, asking, asking_all  # type: ignore[method-assign]
    embedder = cached(get_embedder(), Path("eval") / ".cache" / "embeddings.sqlite3")
    with tempfile.TemporaryDirectory(prefix="openqna-fit-regimes-") as tmp:
        store = open_store(tmp)
        service = Service(store, embedder)
        kbs = [faq.intent_kb(service, data, seed=SEED) for data in (datasets.banking77(data_dir),
                                                                     datasets.hwu64(data_dir))]
        kbs += [faq.chitchat_kb(service, data_dir, p, seed=SEED) for p in datasets.CHITCHAT_PERSONALITIES]
        results = regime_results(service, data_dir, FULL, SEED, THRESHOLD, kbs)
        # the same intent sets ranked as a KB that cannot adapt (too large, or adaptation off) ranks them
        many = [kb for kb in kbs_seen.values() if kb.regime == faq_regimes.MANY]
        with setting("OPENQNA_KB_ADAPT", "0"):
            results[NOT_ADAPTED] = {"questions": [dataclasses.asdict(o) for kb in many
                                                  for o in regimes_module.ask_all(service, kb)]}
        store.close()
    embedder.close()
    outcomes = [(name, o) for name, r in results.items() for o in r["questions"]]
    assert len(outcomes) == len(captured), (len(outcomes), len(captured))
    out = []
    for (name, o), cap in zip(outcomes, captured):
        assert cap is not None
        kb = kbs_seen[o["kb"]]
        cap["right"] = np.asarray([o["gold"] is not None and kb.is_right(int(i), o["gold"]) for i in cap["ids"]])
        out.append((name, o, cap))
    return out


def columns(cap: dict) -> np.ndarray:
    f, r = cap["f"], cap["informative"]
    return np.stack([f["qsim"], f["asim"], f["qcov"], f["acov"], np.maximum(f["qsim"], f["asim"]), f["bm25"],
                     r * f["asim"], r * f["acov"], r * f["bm25"]], 1)


def fit_sparse(found: list[tuple[str, dict, dict]]) -> np.ndarray:
    dev = [(o, cap) for name, o, cap in found if name in SPARSE_REGIMES and o["split"] == "dev"
           and faq_page(cap) and cap["right"].any()]
    per_kb: dict[str, int] = defaultdict(int)
    for o, _ in dev:
        per_kb[o["kb"]] += 1
    data = [(1.0 / per_kb[o["kb"]], columns(cap)[cap["eligible"]], cap["right"][cap["eligible"]]) for o, cap in dev]
    total = sum(w for w, _, _ in data)

    def loss(w: np.ndarray, l2: float = 0.003) -> tuple[float, np.ndarray]:
        value, grad = 0.0, np.zeros_like(w)
        for weight, X, right in data:
            s = X @ w
            p = np.exp(s - s.max())
            p /= p.sum()
            pr = p[right].sum()
            value -= weight * np.log(pr + 1e-12)
            grad += weight * (p @ X - p[right] @ X[right] / (pr + 1e-12))
        return value / total + l2 * w @ w, grad / total + 2 * l2 * w

    return minimize(loss, np.ones(len(COLUMNS)), jac=True, method="L-BFGS-B").x


def faq_page(cap: dict) -> bool:
    """Whether the ranker reads this KB with the FAQ-page weights (``ranker._sparse``)."""
    return cap["offset"] is None and not cap["has_passages"] and cap["one_question"]


def logits(cap: dict, sparse: calibrations.Calibration, c: calibrations.Calibration) -> np.ndarray:
    """Every candidate's logit before the last step, as ``ranker.rank`` computes it with ``c`` (the model's FAQ
    calibration) and ``sparse``."""
    f = SimpleNamespace(**cap["f"])
    if faq_page(cap):
        z = np.asarray(sparse.scale * sparse.logit(f, informative=cap["informative"]) + sparse.shift, np.float64)
        share = ranker.passage_share(cap["informative"], cap["n"])  # an FAQ page whose answers read as passages
        if share and c.passages is not None:
            z = (1.0 - share) * z + share * (c.passages.scale * c.passages.logit(f) + c.passages.shift)
    else:
        z = c.logit(f)
        if cap["offset"] is not None:
            z = z + (cap["extra"] if cap["extra"] is not None else 0.0) - cap["offset"]
        else:
            assert c.typical is not None
            z = z - c.typical
        z = c.scale * z + c.shift
    assert c.passages is not None
    return np.where(cap["passage"], c.passages.scale * c.passages.logit(f) + c.passages.shift, z)


def top_terms(cap: dict, sparse: calibrations.Calibration, c: calibrations.Calibration, rival: float | None
              ) -> tuple[dict[str, float], bool, bool]:
    """The last step's inputs of the top candidate, whether it is an exact match, and whether it is right."""
    z = logits(cap, sparse, c)
    adapted = cap["offset"] is not None
    x = regime.inputs(z, cap["eligible"], cap["passage"], cap["heading"], adapted=adapted, faq_page=faq_page(cap),
                      records=cap["n"], rival=rival)
    top = int(np.argmax(np.where(cap["eligible"], z, -np.inf)))
    terms = {k: float(v[top]) for k, v in x.items()}
    terms["adapted_logit"] = terms["adapted"] * terms["logit"]
    terms["adapted_gap"] = terms["adapted"] * terms["gap"]
    terms["faq_page_logit"] = terms["faq_page"] * terms["logit"]
    terms["faq_page_gap"] = terms["faq_page"] * terms["gap"]
    terms["log_records"] = terms.pop("log_records")
    return terms, bool(cap["exact"][top]), bool(cap["right"][top])


def platt(found: list[tuple[str, dict, dict]], w: calibrations.Calibration) -> tuple[float, float]:
    """Scale and shift that make the sparse weights' top logit a probability of being right (one-question dev)."""
    z, y = [], []
    for name, o, cap in found:
        if name not in SPARSE_REGIMES or o["split"] != "dev" or not faq_page(cap):
            continue
        s = np.where(cap["eligible"], w.logit(SimpleNamespace(**cap["f"]), informative=cap["informative"]), -np.inf)
        top = int(np.argmax(s))
        if not cap["exact"][top]:
            z.append(float(s[top]))
            y.append(float(cap["right"][top]))
    v = fit_terms(np.asarray(z)[:, None], np.asarray(y), np.ones(len(z)), bounds=[(0.0, None), (None, None)])
    return float(v[0]), float(v[1])


def question_weights(names: list[str]) -> np.ndarray:
    """Each question's weight: every regime weighs the same, each of a regime's groups of questions the same
    within it (the not-adapted half shares the many-question regime's weight), and each question of a group too."""
    count = Counter(names)
    regime_of = {n: faq_regimes.MANY if n == NOT_ADAPTED else n for n in count}
    groups = Counter(regime_of.values())
    return np.asarray([len(names) / len(groups) / groups[regime_of[n]] / count[n] for n in names])


def fit_terms(X: np.ndarray, y: np.ndarray, weight: np.ndarray,
              bounds: list[tuple[float | None, float | None]] | None = None) -> np.ndarray:
    A = np.c_[X, np.ones(len(X))]

    def loss(v: np.ndarray, l2: float = 1e-3) -> tuple[float, np.ndarray]:
        p = 1.0 / (1.0 + np.exp(-(A @ v)))
        value = -(weight * (y * np.log(p + 1e-12) + (1 - y) * np.log(1 - p + 1e-12))).sum() / weight.sum()
        reg = np.r_[v[:-1], 0.0]
        return value + l2 * reg @ reg, (weight * (p - y)) @ A / weight.sum() + 2 * l2 * reg

    if bounds is None:
        bounds = [(0.0, None) if t in BOUNDED else (None, None) for t in TERMS] + [(None, None)]
    return minimize(loss, np.zeros(A.shape[1]), jac=True, method="L-BFGS-B", bounds=bounds).x


def log_loss(X: np.ndarray, y: np.ndarray, weight: np.ndarray, v: np.ndarray) -> float:
    p = np.clip(1.0 / (1.0 + np.exp(-(X @ v[:-1] + v[-1]))), 1e-12, 1 - 1e-12)
    return float(-(weight * (y * np.log(p) + (1 - y) * np.log(1 - p))).sum() / weight.sum())


def figures(rows: list[tuple[dict, float]]) -> str:
    answered = [o for o, p in rows if p >= THRESHOLD]
    right = [p for o, p in rows if o["right_top"]]
    off = [p for o, p in rows if o["gold"] is None]
    inscope = [o for o, _ in rows if o["gold"] is not None]
    precision = sum(o["right_top"] for o in answered) / max(len(answered), 1)
    recall = sum(p >= THRESHOLD for p in right) / max(len(right), 1)
    rejected = sum(p < THRESHOLD for p in off) / max(len(off), 1)
    top1 = sum(o["right_top"] for o in inscope) / max(len(inscope), 1)
    return f"top-1 {top1:.3f}  precision {precision:.3f}  recall {recall:.3f}  off-topic rejected {rejected:.3f}"


# The entries each model's fits are written as, by the name of the model's FAQ calibration (``--write``)
PARTS = {"CALIBRATION": ("SPARSE", "REGIME"),
         "BALANCED_CALIBRATION": ("BALANCED_SPARSE", "BALANCED_REGIME"),
         "ACCURATE_CALIBRATION": ("ACCURATE_SPARSE", "ACCURATE_REGIME"),
         "MPNET_CALIBRATION": ("MPNET_SPARSE", "MPNET_REGIME")}


def write(entry: str, sparse: calibrations.Calibration, terms: regime.RegimeTerms) -> None:
    """Save the fits as the parts of the calibration ``entry`` (the default's: ``SPARSE`` and ``REGIME``)."""
    if entry not in PARTS:
        raise SystemExit(f"no entries named for {entry}'s fits: add them to PARTS in {__file__}")
    names = PARTS[entry]
    setting = os.environ.get("OPENQNA_EMBEDDER")
    by = ("" if entry == "CALIBRATION" or not setting else f"OPENQNA_EMBEDDER={setting} ") + "scripts/fit_regimes.py"
    calibrations.save(names[0], sparse, fitted_by=by)
    calibrations.save(names[1], terms, fitted_by=by)
    if entry != "CALIBRATION":  # the model's calibration names them as its parts
        fits = calibrations.load()
        whole = fits[entry]
        assert isinstance(whole, calibrations.Calibration)
        old = json.loads(calibrations.DATA_FILE.read_text(encoding="utf-8"))["fits"][entry]
        calibrations.save(entry, dataclasses.replace(whole, sparse=fits[names[0]], regime=fits[names[1]]),
                          fitted_by=old["fitted_by"], use=old.get("use"), embedder=old.get("embedder"))
    print(f"{' and '.join(names)} written to {calibrations.DATA_FILE}")


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "--write"]
    data_dir = Path(args[0]) if args else Path("../shared/data")
    model = get_embedder().name
    base = calibrations.calibration_for(model)
    entry = calibrations.served("faq").get(model)
    if entry is None and "--write" in sys.argv[1:]:  # it is ranked with MiniLM's: its fits would replace MiniLM's
        raise SystemExit(f"{model} has no FAQ calibration of its own: fit one first "
                         f"(scripts/fit_ranker.py --write with the same OPENQNA_EMBEDDER), then its parts here")
    entry = entry or "CALIBRATION"
    print(f"embedder {model}: fits from {entry}")
    cache = os.environ.get("FIT_REGIMES_CACHE")  # a pickle of what was collected, to refit without asking again
    if cache and Path(cache).exists():
        found = pickle.loads(Path(cache).read_bytes())
    else:
        found = collect(data_dir)
        if cache:
            Path(cache).write_bytes(pickle.dumps(found))
    w = fit_sparse(found)
    qna = dict(zip(COLUMNS, (round(float(v), 3) for v in w)))
    print("softmax weights (all columns):", qna)
    sparse = calibrations.Calibration(w_qsim=qna["qsim"], w_asim=qna["asim"], w_qcov=qna["qcov"], w_acov=qna["acov"],
                                      w_qmean=0.0, w_qcent=0.0, w_bm25=qna["bm25"], w_dmax=qna["dmax"],
                                      w_asim_informative=qna["asim_informative"],
                                      w_acov_informative=qna["acov_informative"],
                                      w_bm25_informative=qna["bm25_informative"], scale=1.0, shift=0.0, typical=None, context_boost=1.0)
    scale, shift = platt(found, sparse)
    sparse = dataclasses.replace(sparse, scale=round(scale, 3), shift=round(shift, 3))
    print("SPARSE =", sparse)
    chosen = None
    for rival in RIVALS:  # the dev log-loss of each "none of these"; RIVAL is used
        rows = []
        for name, o, cap in found:
            terms, exact, right = top_terms(cap, sparse, base, rival)
            rows.append((name, dict(o, right_top=right, exact=exact), terms))
        dev = [(name, o, t) for name, o, t in rows if o["split"] == "dev" and not o["exact"] and name not in NOT_FITTED]
        X = np.asarray([[t[k] for k in TERMS] for _, _, t in dev])
        y = np.asarray([o["right_top"] for _, o, _ in dev], np.float64)
        names = [name for name, _, _ in dev]
        weight = question_weights(names)
        v = fit_terms(X, y, weight)
        loss = log_loss(X, y, weight, v)
        print(f"rival {rival}: dev log-loss {loss:.4f}")
        if rival == RIVAL:
            chosen = (rival, rows, v)
    assert chosen is not None
    rival, rows, v = chosen
    fitted = dict(zip(TERMS, (round(float(x), 3) for x in v[:-1])))
    terms = regime.RegimeTerms(
        w_logit=fitted["logit"], w_gap=fitted["gap"], w_share=fitted["share"], w_passage=fitted["passage"],
        w_heading=fitted["heading"], w_adapted=fitted["adapted"], w_adapted_logit=fitted["adapted_logit"],
        w_adapted_gap=fitted["adapted_gap"], w_faq_page=fitted["faq_page"], w_faq_page_logit=fitted["faq_page_logit"],
        w_faq_page_gap=fitted["faq_page_gap"], w_log_records=fitted["log_records"], bias=round(float(v[-1]), 3),
        shift=SHIFT, rival=rival)
    print("REGIME =", terms)
    if "--write" in sys.argv[1:]:
        write(entry, sparse, terms)
    for shift in SHIFTS:
        print(f"shift {shift}{' (chosen)' if shift == SHIFT else ''}:")
        for split in ("dev",):  # the test splits are for `make eval`'s report only
            groups = [(name, lambda n, o, name=name: n == name) for name in dict.fromkeys(n for n, _, _ in rows)]
            groups += [(f"  {kb}", lambda n, o, kb=kb: o["kb"] == kb)
                       for kb in dict.fromkeys(o["kb"] for n, o, _ in rows if n in SPARSE_REGIMES)]
            for name, member in groups:
                mine = [(o, t) for n, o, t in rows if member(n, o) and o["split"] == split]
                z = np.asarray([[t[k] for k in TERMS] for _, t in mine]) @ v[:-1] + v[-1] - shift
                p = np.where([o["exact"] for o, _ in mine], 1.0, 1.0 / (1.0 + np.exp(-z)))
                print(f"  {split:4} {name:15} {figures([(o, float(q)) for (o, _), q in zip(mine, p)])}")


if __name__ == "__main__":
    main()
