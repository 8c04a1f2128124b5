"""Fit ``calibrations.MULTILINGUAL`` (CJK questions ranked in the multilingual space) on CJK dev splits only.

Builds ``make eval``'s Chinese and Japanese knowledge bases (``evaluation/cjk.py``: XQuAD-zh and JSQuAD, a
paragraphs KB and a FAQ KB each) as the evaluation does, and covid-qsim-tianchi-zh's train split as an FAQ page of
real users' questions (``real_users_zh``; make eval asks its dev split), and reads the ranker's features
(``ranker.features`` on ``MemIndex.multilingual()``: E5's cosines beside the keyword features) of every record for
every **dev** question (all of the train split's):

1. weights: a softmax over each in-scope question's records (the right one against all others), for passages
   (text cosine, text coverage, text BM25) and for QnAs (question cosine, answer cosine, question and answer
   coverage) apart, as scripts/fit_ranker.py fits the English ones;
2. the last step (``regime.RegimeTerms``: the top logit, its gap to the runner-up, passage or not): a logistic
   regression of "the top answer is right" over dev questions in scope and off-topic (an off-topic question's
   top answer is never right), each KB weighing the same, so a confidence reads as the chance the answer is right.

Prints the Calibration and the dev figures at 0.5 (precision, recall, top-1).

``--cross`` fits ``calibrations.CROSSLINGUAL`` the same way on XQuAD's English KBs given the space and asked in
Chinese (``cjk.asked_in_chinese``) and its Chinese KBs asked in English (``cjk.asked_in_english``), dev splits: what a
question asked of a KB whose records are mostly in another language is read with (``multilingual.crosses``), where no
keyword is ever shared and MULTILINGUAL's keyword weights would read every right answer as a poor one.  Its features
are read on ``MemIndex.crossing()``, E5's vectors beside the universal sentence encoder's, as the server ranks such a
question.  (Fitted on the first direction alone, E5's English questions of Chinese KBs were right at 0.5 0.19-0.20
of the time; fitted on both, 0.40-0.41; the universal sentence encoder's, fitted on the first, 0.46-0.48.  On E5's
cosines alone, dev top-1 0.76, precision 0.863 and recall 0.653 at 0.5: ``calibrations.CROSSLINGUAL_E5``; with the
two models, 0.831, 0.888 and 0.731.)

``--cross --questions`` fits ``calibrations.CROSSLINGUAL_QUESTIONS`` the same way on the FAQ KBs alone, from the
question's cosine and coverage only: what ``rankerType: QuestionOnly`` across languages is read with.  ``--cross
--e5`` fits ``calibrations.CROSSLINGUAL_E5`` on E5's vectors alone (``MemIndex.multilingual()``), as a KB whose
records lack the encoder's is ranked.

``--faq`` fits ``calibrations.MULTILINGUAL_SPARSE``, the space's weights for an FAQ page (one question per QnA, no
passages): on the dev splits of the English FAQ pages with real answers of ``make eval``'s one-question regime
ranked in the space (``evaluation.space_faq``: no Chinese or Japanese FAQ page with real users' questions is in the
data), a softmax over each question's records with each KB weighing the same, over fit_regimes.py's ``COLUMNS``
(the answer read again in proportion to the KB's answer informativeness in the space); then a scale and shift that
put its top logit on MULTILINGUAL's scale (a logistic fit through MULTILINGUAL's last step, dev questions in scope
and off-topic), less ``FAQ_SHIFT`` so that 0.5 stands where English FAQ pages' does (a probability of 0.68).  The
weights hand a page over to MULTILINGUAL's own as its answers say more (``HANDOVER``), so XQuAD's and JSQuAD's FAQ
KBs, which MULTILINGUAL was fitted on, are ranked as before.

Usage: python scripts/fit_multilingual.py [DATA_DIR [CACHE]] [--cross [--questions | --e5] | --faq] [--write]   (~2 min with a warm eval/.cache; CACHE: another
embedding cache file, such as an `openqna eval --out DIR` run's DIR/.cache/embeddings.sqlite3)
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from scipy.optimize import minimize
from sklearn.linear_model import LogisticRegression

from openqna.evaluation import FULL, SEED, cjk, datasets, faq_regimes, space_faq
from openqna.evaluation.embedcache import CachedEmbedder
from openqna.evaluation.regimes import RegimeKB
from openqna.index.analyze import analyze
from openqna.kb.catalog import open_store
from openqna.kb.service import Service
from openqna.models.embedder import get_embedder
from openqna.ranking import calibrations, ranker, regime

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fit_ranker import softmax_fit  # noqa: E402  (the same softmax over each question's records)
from fit_regimes import COLUMNS, SPARSE_REGIMES, fit_sparse  # noqa: E402  (the English FAQ-page weights' columns and fit)

QNA_NAMES = ("qsim", "asim", "qcov", "acov")
PASSAGE_NAMES = ("asim", "acov", "bm25")
TERMS = ("logit", "gap", "passage")
THRESHOLD = 0.5
# MULTILINGUAL is fitted on covid-qsim-tianchi-zh's train split too (``real_users_zh``), this many of its queries: as
# many as one of the four other KBs has dev questions, so that it weighs about as much as each
TIANCHI_TRAIN, TIANCHI_QUERIES = "covid-qsim-tianchi-zh-train", 400
# Cross-lingual questions (--cross): the last step's output less this, as the FAQ last step's SHIFT places 0.5
# (scripts/fit_regimes.py); chosen on the dev figures printed for each of SHIFTS.
CROSS_SHIFT = 0.75
SHIFTS = (0.0, 0.5, 0.75, 1.0, 1.5)
# --faq: the answer informativeness (in the space) over which an FAQ page is handed over from the FAQ-page weights
# to MULTILINGUAL's own: with E5 the real FAQ pages measure 0.14-0.48 there (chit-chat 0.14-0.18, covid-q 0.44,
# deepset 0.48), the KBs MULTILINGUAL was fitted on 0.86 (JSQuAD's FAQ) and 0.92 (XQuAD-zh's); the ramp lies between,
# with a margin on each side.  Nothing between 0.5 and 0.85 was measured.  (With the universal sentence encoder:
# 0.10-0.38 against 0.65 and 0.78, and the ramp was 0.4-0.6; left there, E5's covid-q and deepset were handed half
# over, and their dev top-1 fell to 0.417 and 0.371 from 0.466 and 0.613 by the question's cosine alone.)
HANDOVER = (0.6, 0.8)
FAQ_SHIFT = 0.75  # the FAQ-page last step's shift (scripts/fit_regimes.py's SHIFT): 0.5 at a probability of 0.68


def collect(service: Service, data_dir: Path, cross: bool = False, e5_only: bool = False) -> list[dict]:
    """Per question of the CJK KBs (``cross``: XQuAD's English KBs asked in Chinese): its KB, split, the features of
    every record, which records are right."""
    out = []
    kbs = [*cjk.asked_in_chinese(service, data_dir, seed=SEED), *cjk.asked_in_english(service, data_dir, seed=SEED)
           ] if cross else [kb for name in ("xquad-zh", "jsquad")
                            for kb in cjk.paragraph_kbs(service, data_dir, name, seed=SEED)] + [
        real_users_zh(service, data_dir)]
    for kb in kbs:
        index = service.indexes.get(kb.project)
        # across languages: E5's vectors beside the universal sentence encoder's, as the server ranks them there
        # (``e5_only``: E5's alone, as it ranks a KB whose records lack the encoder's)
        both = cross and not e5_only
        view = index.crossing() if both else index.multilingual()
        assert view is not None, kb.project
        everything = np.ones(index.n, bool)
        embedder = service.multilingual.crossing if both else service.multilingual.embedder
        vectors = embedder.embed([q.text for q in kb.questions])
        for q, v in zip(kb.questions, vectors):
            f = ranker.features(view, analyze(q.text), v, everything, [])
            right = np.array([q.gold is not None and kb.is_right(int(index.ids[r]), q.gold) for r in f.rows])
            out.append({"kb": kb.project, "split": "dev" if kb.project == TIANCHI_TRAIN else q.split, "f": f,
                        "right": right, "passage": kb.include_unstructured, "inscope": q.gold is not None})
    return out


def real_users_zh(service: Service, data_dir: Path) -> RegimeKB:
    """covid-qsim-tianchi-zh's *train* split as an FAQ page (its stored questions, each its own answer, asked a sample
    of ``TIANCHI_QUERIES`` of the patients' paraphrases labelled with them; make eval asks the dev split's): Chinese
    questions as real users write them, which XQuAD's and JSQuAD's, written from the paragraph, are not.  Every one
    of its questions is fitted on."""
    return faq_regimes.real_faq_kb(service, datasets.covid_qsim_tianchi_zh(data_dir, "train"), [], seed=SEED,
                                   source="none", queries=TIANCHI_QUERIES)


def matrix(f: ranker.Features, names: tuple[str, ...]) -> np.ndarray:
    return np.stack([getattr(f, n) for n in names], axis=1).astype(np.float64)


def collect_faq_pages(data_dir: Path, cache: Path, tiny: bool = False) -> list[dict]:
    """Per question of ``space_faq``'s FAQ pages: its KB, split, the features of every record in the space, which
    records are right, the KB's answer informativeness there."""
    out = []
    with tempfile.TemporaryDirectory(prefix="openqna-fit-multilingual-") as tmp:
        store = open_store(tmp)
        service = Service(store, CachedEmbedder(get_embedder("local"), cache),
                          CachedEmbedder(get_embedder("multilingual"), cache))
        for kb in space_faq.build(service, data_dir, seed=SEED, offtopic=FULL.regime_offtopic, tiny=tiny):
            index = service.indexes.get(kb.project)
            view = index.multilingual()
            assert view is not None, kb.project
            informative = ranker.answer_informativeness(view)
            everything = np.ones(index.n, bool)
            vectors = service.multilingual.embedder.embed([q.text for q in kb.questions])
            for q, v in zip(kb.questions, vectors):
                f = ranker.features(view, analyze(q.text), v, everything, [])
                right = np.array([q.gold is not None and kb.is_right(int(index.ids[r]), q.gold) for r in f.rows])
                out.append({"kb": kb.project, "split": q.split, "right": right, "inscope": q.gold is not None,
                            "informative": informative, "n": index.n, "headings": ranker.heading_handover(view),
                            "f": {k: np.asarray(getattr(f, k), np.float64) for k in ranker.FEATURE_NAMES}})
        store.close()
    return out


def fit_faq(data_dir: Path, cache: Path) -> None:
    """``--faq``: MULTILINGUAL_SPARSE (see the module docstring)."""
    questions = collect_faq_pages(data_dir, cache, tiny=True)
    dev = [q for q in questions if q["split"] == "dev" and not q["kb"].startswith("tiny-")]
    weights = fit_sparse([(SPARSE_REGIMES[0], {"kb": q["kb"], "split": "dev"},
                           {"f": q["f"], "informative": q["informative"], "right": q["right"],
                            "eligible": np.ones(len(q["right"]), bool), "offset": None, "has_passages": False,
                            "one_question": True}) for q in dev if q["inscope"]])
    names = dict(zip(("w_" + c for c in COLUMNS), np.round(weights, 3).tolist()))
    unscaled = calibrations.Calibration(**names, handover_from=HANDOVER[0], handover_full=HANDOVER[1])
    terms = calibrations.MULTILINGUAL.regime
    assert terms is not None

    def top(q: dict, c: calibrations.Calibration) -> tuple[float, float, bool]:
        f = SimpleNamespace(**q["f"])
        z = np.asarray(c.logit(f, informative=q["informative"]), np.float64)
        g = regime.gaps(z, np.ones(len(z), bool))
        i = int(np.argmax(z))
        return float(z[i]), float(g[i]), bool(q["right"][i])

    per_kb = Counter(q["kb"] for q in dev)
    rows = [(*top(q, unscaled), 1.0 / per_kb[q["kb"]]) for q in dev]
    kbs = sorted({q["kb"] for q in questions})
    z, gap, y, w = (np.asarray(v, np.float64) for v in zip(*rows))

    def loss(v: np.ndarray) -> float:  # the last step's logit of a*z + b (the gap scales with a)
        p = 1.0 / (1.0 + np.exp(-(terms.w_logit * (v[0] * z + v[1]) + terms.w_gap * v[0] * gap + terms.bias)))
        return float(-(w * (y * np.log(p + 1e-12) + (1 - y) * np.log(1 - p + 1e-12))).sum() / w.sum())

    a, b = minimize(loss, np.array([1.0, 0.0]), method="Nelder-Mead").x
    shift = b - FAQ_SHIFT / terms.w_logit
    sparse = dataclasses.replace(unscaled, scale=round(float(a), 3), shift=round(float(shift), 3), context_boost=1.0)
    print(sparse)
    for split in ("dev", "test"):
        for kb in kbs + ["all"]:
            sel = [q for q in questions if q["split"] == split and (kb == q["kb"] or kb == "all" and q["kb"] in per_kb)]
            print(f"{split:4} {kb:36} before {faq_figures(sel, None)}\n{'':42}after  {faq_figures(sel, sparse)}")
    if "--write" in sys.argv[1:]:
        calibrations.save("MULTILINGUAL_SPARSE", sparse, fitted_by="scripts/fit_multilingual.py --faq")
        whole = calibrations.load()["MULTILINGUAL"]
        assert isinstance(whole, calibrations.Calibration)
        calibrations.save("MULTILINGUAL", dataclasses.replace(whole, sparse=sparse),
                          fitted_by="scripts/fit_multilingual.py")
        print(f"MULTILINGUAL_SPARSE written to {calibrations.DATA_FILE}")


def faq_figures(rows: list[dict], sparse: calibrations.Calibration | None) -> str:
    """Top-1, precision, recall and off-topic rejected at ``THRESHOLD`` of ``rows`` ranked as ``ranker.rank`` ranks
    an FAQ page in the space: with ``sparse`` (and its handover to MULTILINGUAL), or MULTILINGUAL alone (None)."""
    c = calibrations.MULTILINGUAL
    terms = c.regime
    assert terms is not None
    conf, right, inscope = [], [], []
    for q in rows:
        f = SimpleNamespace(**q["f"])
        own = np.asarray(c.logit(f), np.float64)
        if sparse is None:
            z = own
        else:
            z = sparse.scale * np.asarray(sparse.logit(f, informative=q["informative"]), np.float64) + sparse.shift
            share = max(ranker.handover_share(sparse, q["informative"], q["n"]), q["headings"])
            z = (1.0 - share) * z + share * own
        logit = terms.of(z, np.ones(len(z), bool), np.zeros(len(z), bool), np.zeros(len(z), bool),
                         faq_page=sparse is not None, records=q["n"])
        i = int(np.argmax(z))
        conf.append(float(1.0 / (1.0 + np.exp(-logit[i]))))
        right.append(bool(q["right"][i]))
        inscope.append(q["inscope"])
    return at_threshold(conf, right, inscope, right_at_t=True)


def at_threshold(conf: list[float], right: list[bool], inscope: list[bool], right_at_t: bool = False) -> str:
    """Top-1, and precision, recall (right at t) and off-topic rejected at ``THRESHOLD``, of top answers' confidences
    ``conf``, whether they are right, and whether their question is in scope."""
    conf_a, right_a, in_a = np.asarray(conf, float), np.asarray(right, bool), np.asarray(inscope, bool)
    if not len(conf_a):
        return "no questions"
    answered = conf_a >= THRESHOLD
    precision = right_a[answered].mean() if answered.any() else float("nan")
    recall = answered[right_a].mean() if right_a.any() else float("nan")
    share = f"  right at t {(right_a & answered)[in_a].mean():.3f}" if right_at_t else ""
    return (f"top-1 {right_a[in_a].mean():.3f}  P {precision:.3f}  R {recall:.3f}{share}"
            f"  off-topic rejected {(~answered[~in_a]).mean():.3f}")


def main() -> None:
    args = [a for a in sys.argv[1:] if a not in ("--write", "--cross", "--faq", "--questions", "--e5")]
    if "--faq" in sys.argv[1:]:
        fit_faq(Path(args[0] if args else "../shared/data"),
                Path(args[1]) if len(args) > 1 else Path("eval") / ".cache" / "embeddings.sqlite3")
        return
    cross = "--cross" in sys.argv[1:]
    questions_only = cross and "--questions" in sys.argv[1:]  # rankerType QuestionOnly across languages
    e5_only = cross and "--e5" in sys.argv[1:]  # CROSSLINGUAL_E5: across languages on E5's vectors alone
    name = ("CROSSLINGUAL_QUESTIONS" if questions_only else "CROSSLINGUAL_E5" if e5_only else "CROSSLINGUAL"
            if cross else "MULTILINGUAL")
    qna_names = ("qsim", "qcov") if questions_only else QNA_NAMES
    data_dir = Path(args[0] if args else "../shared/data")
    cache = Path(args[1]) if len(args) > 1 else Path("eval") / ".cache" / "embeddings.sqlite3"
    with tempfile.TemporaryDirectory(prefix="openqna-fit-multilingual-") as tmp:
        store = open_store(tmp)
        service = Service(store, CachedEmbedder(get_embedder("local"), cache),
                          CachedEmbedder(get_embedder("multilingual"), cache),
                          CachedEmbedder(get_embedder("multilingual-use"), cache))
        questions = collect(service, data_dir, cross, e5_only)
        store.close()
    if questions_only:  # the FAQ KBs: a passage has no question of its own to rank by
        questions = [q for q in questions if not q["passage"]]
    dev = [q for q in questions if q["split"] == "dev"]
    weights = {}
    for passage, names in ((True, PASSAGE_NAMES), (False, qna_names)):
        if questions_only and passage:
            cross_passages = calibrations.CROSSLINGUAL.passages
            assert cross_passages is not None
            weights[True] = np.asarray([getattr(cross_passages, "w_" + n) for n in names])
            continue
        groups = [(matrix(q["f"], names), q["right"].astype(float)) for q in dev
                  if q["passage"] == passage and q["inscope"] and q["right"].any()]
        weights[passage] = np.round(softmax_fit(groups, l2=1e-4), 3)
        print("passages" if passage else "QnAs", dict(zip(names, weights[passage])), f"({len(groups)} questions)")

    def logits(q: dict) -> np.ndarray:
        names = PASSAGE_NAMES if q["passage"] else qna_names
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
    qna = dict(zip(("w_" + n for n in qna_names), weights[False].tolist()))
    passage = dict(zip(("w_" + n for n in PASSAGE_NAMES), weights[True].tolist()))
    zero = dict(w_qsim=0.0, w_asim=0.0, w_qcov=0.0, w_acov=0.0, w_qmean=0.0, w_qcent=0.0, w_bm25=0.0)
    c = calibrations.Calibration(**{**zero, **qna}, scale=1.0, shift=0.0, typical=None, regime=terms,
                                 passages=calibrations.Calibration(**{**zero, **passage}, scale=1.0, shift=0.0,
                                                                   typical=None), context_boost=1.0)
    print(c)
    if "--write" in sys.argv[1:]:
        calibrations.save(name, c, fitted_by="scripts/fit_multilingual.py" + (" --cross" if cross else "")
                          + (" --questions" if questions_only else "") + (" --e5" if e5_only else ""))
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
    return at_threshold(conf, right, inscope)

if __name__ == "__main__":
    main()
