"""Real FAQ pages ranked in the multilingual space, as a Chinese or Japanese FAQ page is ranked.

A CJK question of a CJK knowledge base is ranked in the multilingual space (``ranking.multilingual``) with
``calibrations.MULTILINGUAL``, whose weights were fitted on XQuAD-zh's and JSQuAD's knowledge bases: questions
written from a Wikipedia paragraph, which pay off reading the answer (answer coverage weighed 18.5 against the
question cosine's 2.4).  A real FAQ page asked by its users is another thing: issue 38 found the same bias in the
English ranker, and issue 42 measured a Japanese FAQ with real users' questions at hit@1 0.344.  ``../shared/data``
has no Chinese or Japanese FAQ page with real answers and real users' questions, so this module ranks the English
ones of ``make eval``'s one-question regime (covid-q, deepset's COVID-QA FAQ bank, the chit-chat KBs cut to one
question; the same KBs, questions, splits and off-topic questions) in the space, exactly as a CJK FAQ page's
questions are ranked there: multilingual-e5-small's vectors and the keyword features of the same index,
read by ``ranker.rank`` with the multilingual calibration.  ``scripts/fit_multilingual.py --faq`` fits the space's
FAQ-page weights (``calibrations.MULTILINGUAL_SPARSE``) on their dev splits; ``make eval`` reports their test splits.
"""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from openqna.evaluation import datasets, faq_regimes
from openqna.evaluation.baselines import signal_tops
from openqna.evaluation.env import setting
from openqna.evaluation.regimes import MRR_K, SPLITS, Outcome, RegimeKB, Summary, summary
from openqna.evaluation.tiny import faq_cut
from openqna.kb.service import Service
from openqna.ranking import calibrations, ranker
from openqna.ranking.calibrations import Calibration


def build(service: Service, data_dir: Path, *, seed: int, offtopic: int | None, queries: int | None = None,
          answers: int | None = None, per_answer: int | None = None, tiny: bool = True,
          entries: int | None = None) -> list[RegimeKB]:
    """The one-question regime's FAQ pages with real answers, built in ``service`` with the multilingual space (the
    regime's own builders, so the same questions and splits; ``offtopic``, ``queries``, ``answers`` and
    ``per_answer``: ``Plan.regime_offtopic``, ``faq_queries``, ``chitchat_answers`` and ``per_answer_queries``),
    and with ``tiny`` the tiny regime's cuts of covid-q and deepset's page (12 entries each, never fitted on)."""
    banking = [q for q, _ in datasets.banking77(data_dir).test]
    covid = datasets.covid_q(data_dir)
    with setting("OPENQNA_MULTILINGUAL", "on"):
        kbs = [faq_regimes.real_faq_kb(service, covid,
                                       faq_regimes.offtopic_sample(covid.unanswered, offtopic, seed, covid.name),
                                       seed=seed, source="covid-q questions no entry answers", queries=queries,
                                       entries=entries),
               faq_regimes.real_faq_kb(service, datasets.covid_qsim_deepset(data_dir),
                                       faq_regimes.offtopic_sample(banking, offtopic, seed, "covid-qsim-deepset"),
                                       seed=seed, source="banking77", queries=queries, entries=entries)]
        kbs += [faq_regimes.one_question_chitchat_kb(
            service, data_dir, p, faq_regimes.offtopic_sample(banking, offtopic, seed, f"{p}-one"), seed=seed,
            answers=answers, per_answer_queries=per_answer, source="banking77")
            for p in datasets.CHITCHAT_PERSONALITIES]
        if tiny:
            kbs.append(faq_cut(service, covid, covid.unanswered, seed=seed,
                               source="covid-q questions no entry answers"))
            kbs.append(faq_cut(service, datasets.covid_qsim_deepset(data_dir), banking, seed=seed,
                               source="banking77"))
    return kbs


def before() -> Calibration:
    """The multilingual calibration as it was before it had FAQ-page weights of its own."""
    return replace(calibrations.MULTILINGUAL, sparse=None)


def ask(service: Service, kb: RegimeKB, calibration: Calibration | None = None) -> list[Outcome]:
    """Every question of ``kb`` ranked on its multilingual view with ``calibration`` (the shipped
    ``calibrations.MULTILINGUAL`` when None), every record eligible, top ``MRR_K``."""
    index = service.indexes.get(kb.project)
    view = index.multilingual()
    if view is None:
        raise ValueError(f"{kb.project} has no vectors in the multilingual space")
    c = calibrations.MULTILINGUAL if calibration is None else calibration
    vectors = service.multilingual.embedder.embed([q.text for q in kb.questions])
    eligible = np.ones(index.n, bool)
    out = []
    for q, v in zip(kb.questions, vectors):
        ranked = ranker.rank(view, q.text, v, eligible, top=MRR_K, calibration=c)
        gold = q.gold
        rank = None if gold is None else next(
            (i for i, r in enumerate(ranked, 1) if kb.is_right(r.record_id, gold)), None)
        top = ranked[0] if ranked else None
        signals = {} if gold is None else {  # the guard's single signals, read in the space
            name: first is not None and kb.is_right(first, gold)
            for name, first in signal_tops(view, q.text, v).items()}
        out.append(Outcome(kb=kb.project, split=q.split, question=q.text, gold=gold,
                           top=None if top is None else top.record_id, top_text="",
                           confidence=0.0 if top is None else top.confidence, right=rank == 1, rank=rank,
                           signals=signals, origin=q.origin))
    return out


def evaluate(service: Service, data_dir: Path, *, seed: int, threshold: float, offtopic: int | None,
             queries: int | None = None, answers: int | None = None, per_answer: int | None = None,
             entries: int | None = None) -> dict:
    """``build``'s KBs (in ``service``, which must not hold the regimes' KBs of the same names) asked before
    (``before()``) and after (the shipped calibration): per KB and split, the summaries, and each KB's answer
    informativeness in the space (``ranker.answer_informativeness``) and the share of it read with
    MULTILINGUAL's own weights (``ranker.handover_share``, ``ranker.heading_handover``)."""
    kbs = build(service, data_dir, seed=seed, offtopic=offtopic, queries=queries, answers=answers,
                per_answer=per_answer, entries=entries)
    sparse = calibrations.MULTILINGUAL.sparse
    out: dict = {"kbs": {}}
    for kb in kbs:
        view = service.indexes.get(kb.project).multilingual()
        assert view is not None
        informative = ranker.answer_informativeness(view)
        figures = {}
        for name, c in (("before", before()), ("after", None)):
            outcomes = ask(service, kb, c)
            figures[name] = {split: _figures(summary([o for o in outcomes if o.split == split], threshold))
                             for split in SPLITS}
        out["kbs"][kb.project] = {
            "records": kb.records, "informativeness": round(informative, 3),
            "handover": 0.0 if sparse is None else round(max(ranker.handover_share(sparse, informative, view.n),
                                                             ranker.heading_handover(view)), 3),
            "fitted": not kb.project.startswith("tiny-"), **figures}
    return out


FIGURES = ("inscope", "offtopic", "top1", "mrr5", "precision", "recall", "right_at_t", "offtopic_rejected", "signals",
           "discord")
# The guard (``guard.sets_of``) holds these sets, after, by this name: "covid-q in the multilingual space"
IN_SPACE = " in the multilingual space"


def _figures(s: Summary) -> dict:
    return {k: v for k, v in asdict(s).items() if k in FIGURES}
