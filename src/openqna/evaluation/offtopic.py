"""Off-topic rejection: does the confidence threshold turn away questions a KB cannot answer?

banking77's test questions are asked of the hwu64 KB and hwu64's of the banking77 KB.  At
the threshold (the design's default 0.5 unless told otherwise) we count, through real
``Service.ask`` calls with that threshold, how many off-topic questions get the default
answer, and how much in-scope top-1 accuracy the threshold costs: accuracy at 0 (the FAQ
figure) minus the share of in-scope questions answered, correctly, at the threshold.

The two sets overlap on currencies: banking77's seven exchange-rate and currency intents ask what
hwu64's ``qa_currency`` answers ("what's the exchange rate for euros?").  Questions of the
intents whose name says currency or exchange (``OVERLAP``, a rule on the names; nothing is fitted on it)
are also counted apart: the rejection of the others is that of questions with no fair answer.

The curves over all thresholds come from the top-1 confidences at threshold 0: a question
is answered at t exactly when its best confidence is at least t.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from openqna.evaluation.faq import FaqResult, KnowledgeBase
from openqna.evaluation.metrics import mean
from openqna.kb.service import AskRequest, Service

THRESHOLDS = np.round(np.linspace(0.0, 1.0, 101), 2)
OVERLAP = re.compile(r"currenc|exchange", re.IGNORECASE)  # intent names (answers) both sets cover


@dataclass
class Curves:
    """Shares of questions per threshold in ``THRESHOLDS``."""

    accuracy: list[float]  # in-scope questions answered with the right QnA
    rejected: list[float]  # in-scope questions given the default answer
    offtopic_rejected: list[float] = field(default_factory=list)  # off-topic questions given the default answer


@dataclass
class OfftopicResult:
    kb: str
    offtopic_source: str
    threshold: float
    offtopic_questions: int
    offtopic_rejected: float  # at the threshold
    top1_at_zero: float
    top1_at_threshold: float
    inscope_rejected: float
    curves: Curves
    disjoint_questions: int = 0  # off-topic questions whose own intent is not in OVERLAP
    disjoint_rejected: float = 0.0  # ... given the default answer at the threshold

    @property
    def top1_lost(self) -> float:
        return self.top1_at_zero - self.top1_at_threshold


def curves(inscope: FaqResult, offtopic_confidence: list[float] | None = None) -> Curves:
    conf = np.asarray(inscope.confidence)
    correct = np.asarray(inscope.correct)
    out = Curves([float(np.mean(correct & (conf >= t))) for t in THRESHOLDS],
                 [float(np.mean(conf < t)) for t in THRESHOLDS])
    if offtopic_confidence is not None:
        off = np.asarray(offtopic_confidence)
        out.offtopic_rejected = [float(np.mean(off < t)) for t in THRESHOLDS]
    return out


def _top(service: Service, kb: KnowledgeBase, question: str, threshold: float) -> tuple[int | None, float]:
    answer = service.ask(kb.project, "test", AskRequest(question=question, top=1, threshold=threshold))[0]
    return (answer.qna.id if answer.qna is not None else None), answer.confidence


def evaluate(service: Service, kb: KnowledgeBase, inscope: FaqResult, offtopic: KnowledgeBase,
             threshold: float) -> OfftopicResult:
    """Ask ``kb`` the questions of ``offtopic`` (none of which it can answer), and its own again at ``threshold``."""
    overlap = {q.id for q in service.store.list_qnas(offtopic.project) if OVERLAP.search(q.answer)}
    off_confidence, off_rejected, disjoint = [], [], []
    for question, own in offtopic.queries:
        off_confidence.append(_top(service, kb, question, 0.0)[1])
        off_rejected.append(_top(service, kb, question, threshold)[0] is None)
        disjoint.append(own not in overlap)
    answered_right, rejected = [], []
    for question, gold in kb.queries:
        found = _top(service, kb, question, threshold)[0]
        answered_right.append(found == gold)
        rejected.append(found is None)
    return OfftopicResult(
        kb=kb.project, offtopic_source=offtopic.project, threshold=threshold,
        offtopic_questions=len(offtopic.queries), offtopic_rejected=mean(off_rejected),
        top1_at_zero=inscope.top1["ranker"], top1_at_threshold=mean(answered_right),
        inscope_rejected=mean(rejected), curves=curves(inscope, off_confidence),
        disjoint_questions=sum(disjoint),
        disjoint_rejected=mean([r for r, d in zip(off_rejected, disjoint) if d]),
    )
