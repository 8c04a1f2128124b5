"""The knowledge-base regimes of issue 22, asked one question at a time, with dev and test splits.

A *regime* is a kind of knowledge base users have: intent sets with many alternate questions per
QnA, FAQ pages with one question per QnA, documents (section QnAs and passages), tiny KBs.  Each
regime is a list of knowledge bases, each asked its in-scope questions and questions it cannot
answer (``gold`` is ``None``).  Every question goes through ``Service.ask`` at threshold 0 with
``top=MRR_K``, and its outcome is kept (question, gold, top record, confidence, right?) so a later
fitting script can read the dev split from ``metrics.json``.

Splits (``split``) are deterministic: within a stratum (a KB's in-scope questions of one gold
record set, or its off-topic questions) items are ordered by a hash of (seed, key) and alternate
dev, test.  The key is what must not leak between splits: the gold QnA for sets whose questions
are paraphrases of the same few QnAs (a test question never shares its gold QnA with a dev
question), the question itself for hand-written document questions.

The figures (``summary``): top-1 and MRR@5 over in-scope questions; at the threshold, precision
(of top answers at or above it, the share that are right; an off-topic question answered counts
as wrong), recall (of right top answers, the share at or above it) and the share of off-topic
questions rejected; and reliability bins (top-1 confidence against the share right).
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from openqna.evaluation.baselines import SIGNALS, single_signal_tops
from openqna.evaluation.metrics import calibration, reliability
from openqna.kb.service import AskRequest, Service

MRR_K = 5
SPLITS = ("dev", "test")


@dataclass
class Question:
    text: str
    gold: str | None  # a label the KB's ``is_right`` understands; None: the KB cannot answer it
    split: str = ""  # "dev" or "test", set by ``assign_splits``
    origin: str = ""  # where the question comes from, where the data set says (covid-q: search engines, ...)


@dataclass
class RegimeKB:
    """A knowledge base built in the service, the questions it is asked and how an answer is judged."""

    project: str
    regime: str
    records: int
    questions: list[Question]
    is_right: Callable[[int, str], bool]  # (record id, gold) -> right?
    include_unstructured: bool = False
    notes: str = ""
    offtopic_source: str = ""


@dataclass
class Outcome:
    kb: str
    split: str
    question: str
    gold: str | None
    top: int | None  # record id of the first answer (None: no candidate at all)
    top_text: str
    confidence: float
    right: bool  # the first answer is right (always False for an off-topic question)
    rank: int | None = None  # 1-based rank of the first right answer within MRR_K, None if absent
    # each single signal's (``baselines.SIGNALS``): is its first record right (in-scope questions only)
    signals: dict[str, bool] = field(default_factory=dict)
    origin: str = ""


def split_of_keys(keys: Iterable[Hashable], seed: int, salt: str) -> dict[Hashable, str]:
    """Half of the distinct ``keys`` (every other one in hash order) "dev", the rest "test"."""
    distinct = list(dict.fromkeys(keys))
    ordered = sorted(distinct, key=lambda k: hashlib.sha256(f"{seed}:{salt}:{k}".encode()).hexdigest())
    return {k: SPLITS[i % 2] for i, k in enumerate(ordered)}


def assign_splits(questions: Sequence[Question], seed: int, salt: str, *, by_gold: bool) -> None:
    """Set each question's split, stratified into in-scope and off-topic questions.

    ``by_gold``: in-scope questions are split by their gold label (all paraphrases of one QnA fall
    in the same split); otherwise by their text.  Off-topic questions are always split by text.
    """
    inscope = [q for q in questions if q.gold is not None]
    off = [q for q in questions if q.gold is None]
    dev_test = split_of_keys((q.gold if by_gold else q.text for q in inscope), seed, f"{salt}:in")
    for q in inscope:
        q.split = dev_test[q.gold if by_gold else q.text]
    dev_test = split_of_keys((q.text for q in off), seed, f"{salt}:off")
    for q in off:
        q.split = dev_test[q.text]


def ask_all(service: Service, kb: RegimeKB) -> list[Outcome]:
    """Every question of ``kb`` through ``Service.ask`` (threshold 0, top ``MRR_K``)."""
    out = []
    for q in kb.questions:
        answers = service.ask(kb.project, "test", AskRequest(question=q.text, top=MRR_K, threshold=0.0,
                                                             include_unstructured=kb.include_unstructured))
        ranked = [(a.qna, a.confidence) for a in answers if a.qna is not None]
        gold = q.gold
        rank = None if gold is None else next(
            (i for i, (record, _) in enumerate(ranked, 1) if record.id is not None and kb.is_right(record.id, gold)),
            None)
        top, confidence = ranked[0] if ranked else (None, 0.0)
        signals = {} if gold is None else {
            name: first is not None and kb.is_right(first, gold)
            for name, first in single_signal_tops(service, kb.project, q.text,
                                                  include_unstructured=kb.include_unstructured).items()}
        out.append(Outcome(
            kb=kb.project, split=q.split, question=q.text, gold=gold, top=top.id if top else None,
            top_text=(top.questions[0] if top.questions else top.answer[:80]) if top else "",
            confidence=confidence, right=rank == 1, rank=rank, signals=signals, origin=q.origin))
    return out


@dataclass
class Summary:
    """The figures of one regime (or one KB) on one split."""

    questions: int
    inscope: int
    offtopic: int
    top1: float
    mrr5: float
    precision: float | None  # None when nothing is answered at the threshold
    recall: float | None  # None when no top answer is right
    offtopic_rejected: float | None  # None without off-topic questions
    answered: float  # share of all questions answered at the threshold
    bins: list[dict] = field(default_factory=list)
    right_at_t: float = 0.0  # of in-scope questions, the share whose top answer is right at or above the threshold
    signals: dict[str, float] = field(default_factory=dict)  # each single signal's top-1 (``baselines.SIGNALS``)
    # per single signal, the in-scope questions only the ranker's first answer gets right, and only the signal's
    discord: dict[str, list[int]] = field(default_factory=dict)


def summary(outcomes: Sequence[Outcome], threshold: float) -> Summary:
    inscope = [o for o in outcomes if o.gold is not None]
    c = calibration([o.confidence for o in outcomes], [o.right for o in outcomes],
                    [o.gold is not None for o in outcomes], threshold)
    return Summary(
        questions=len(outcomes), inscope=len(inscope), offtopic=len(outcomes) - len(inscope),
        top1=sum(o.right for o in inscope) / len(inscope) if inscope else 0.0,
        mrr5=sum(1.0 / o.rank for o in inscope if o.rank and o.rank <= MRR_K) / len(inscope) if inscope else 0.0,
        precision=c.precision, recall=c.recall, offtopic_rejected=c.offtopic_rejected, answered=c.answered,
        bins=reliability([o.confidence for o in outcomes], [o.right for o in outcomes]),
        right_at_t=sum(o.right and o.confidence >= threshold for o in inscope) / len(inscope) if inscope else 0.0,
        signals={name: sum(o.signals.get(name, False) for o in inscope) / len(inscope) if inscope else 0.0
                 for name in SIGNALS},
        discord={name: [sum(o.right and not o.signals.get(name, False) for o in inscope),
                        sum(o.signals.get(name, False) and not o.right for o in inscope)] for name in SIGNALS})


def summaries(outcomes: Sequence[Outcome], threshold: float) -> dict[str, dict[str, Summary]]:
    """``{"all" | kb: {"dev" | "test": Summary}}`` for one regime's outcomes."""
    by_kb: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        by_kb[o.kb].append(o)
    groups = {"all": list(outcomes), **by_kb}
    return {name: {s: summary([o for o in group if o.split == s], threshold) for s in SPLITS}
            for name, group in groups.items()}


def first_answer(service: Service, kb: RegimeKB, req: AskRequest) -> tuple[int | None, float]:
    """The record id and confidence of ``req``'s first answer in ``kb`` (None, 0.0: the default answer)."""
    answers = service.ask(kb.project, "test", req)
    first = answers[0] if answers else None
    if first is None or first.qna is None:
        return None, 0.0
    return first.qna.id, first.confidence


def by_split_and_total(per_kb: dict[str, dict[str, Any]], empty: Callable[[], Any]) -> dict:
    """``{"kbs": {kb: {split: counts}}, "all": {split: counts}}`` of dataclasses of counts per KB and split, the
    total of each split summed field by field (``empty()`` makes a zero one)."""
    total = {split: empty() for split in SPLITS}
    for figures in per_kb.values():
        for split, f in figures.items():
            for name, value in asdict(f).items():
                setattr(total[split], name, getattr(total[split], name) + value)
    return {"kbs": {kb: {s: asdict(f) for s, f in figures.items()} for kb, figures in per_kb.items()},
            "all": {s: asdict(f) for s, f in total.items()}}
