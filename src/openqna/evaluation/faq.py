"""FAQ matching: is the right QnA first (top-1 accuracy), and how high is it (MRR@5)?

Knowledge bases, built through ``Service.upsert`` like any import:

* banking77 and hwu64: one QnA per intent, ``PER_INTENT`` seeded-random training utterances
  as its questions and the humanised intent name as its answer; the test utterances are
  the user questions.
* the three QnA Maker chit-chat KBs, read with the server's own TSV reader: each answer's
  questions are shuffled (seeded), the first half (rounded up) is indexed and the rest asked.

Every question goes through ``Service.ask`` and through the baselines of ``baselines.py``
on the same index.  The per-question top-1 confidence is kept for the threshold curves.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from openqna.evaluation import datasets
from openqna.evaluation.baselines import METHODS, rank_all
from openqna.evaluation.metrics import mean, reciprocal_rank
from openqna.formats import read_file
from openqna.kb.service import Service
from openqna.records import QnA

PER_INTENT = 10
MRR_K = 5


@dataclass
class KnowledgeBase:
    project: str  # also the data set's display name
    queries: list[tuple[str, int]]  # (user question, gold record id)
    records: int
    indexed_questions: int


@dataclass
class FaqResult:
    kb: KnowledgeBase
    top1: dict[str, float]
    mrr5: dict[str, float]
    confidence: list[float] = field(default_factory=list)  # ranker's top-1 confidence per question
    correct: list[bool] = field(default_factory=list)  # ranker's top-1 is the gold QnA


def _ids_by_answer(service: Service, project: str) -> dict[str, int]:
    return {q.answer: q.id for q in service.store.list_qnas(project)}


def intent_kb(service: Service, data: datasets.IntentData, *, seed: int, intents: int | None = None,
              per_intent_queries: int | None = None) -> KnowledgeBase:
    rng = random.Random(f"{seed}:{data.name}")
    labels = list(data.train)[:intents]
    qnas = [QnA(rng.sample(data.train[label], min(PER_INTENT, len(data.train[label]))), datasets.humanise(label),
                source=data.name) for label in labels]
    service.create_project(data.name)
    service.upsert(data.name, qnas)
    ids = _ids_by_answer(service, data.name)
    taken: dict[str, int] = {}
    queries = []
    for text, label in data.test:
        if label in labels and taken.get(label, 0) < (per_intent_queries or len(data.test)):
            taken[label] = taken.get(label, 0) + 1
            queries.append((text, ids[datasets.humanise(label)]))
    return KnowledgeBase(data.name, queries, len(qnas), sum(len(q.questions) for q in qnas))


def chitchat_kb(service: Service, data_dir: Path, personality: str, *, seed: int,
                answers: int | None = None) -> KnowledgeBase:
    project = f"chitchat-{personality}"
    rng = random.Random(f"{seed}:{project}")
    content = read_file(datasets.chitchat_file(data_dir, personality))
    indexed, asked = [], []
    for qna in content.qnas[:answers]:
        questions = list(qna.questions)
        rng.shuffle(questions)
        half = (len(questions) + 1) // 2
        qna.questions = questions[:half]
        indexed.append(qna)
        asked.append((questions[half:], qna.answer))
    service.create_project(project)
    service.upsert(project, indexed)
    ids = _ids_by_answer(service, project)
    queries = [(q, ids[answer]) for questions, answer in asked for q in questions]
    return KnowledgeBase(project, queries, len(indexed), sum(len(q.questions) for q in indexed))


def evaluate(service: Service, kb: KnowledgeBase, *, baselines: bool = True) -> FaqResult:
    """Top-1 and MRR@5 of every method (``baselines=False``: of the ranker only)."""
    methods = METHODS if baselines else ("ranker",)
    hits: dict[str, list[float]] = {m: [] for m in methods}
    rr: dict[str, list[float]] = {m: [] for m in methods}
    result = FaqResult(kb, {}, {})
    for question, gold in kb.queries:
        ranking = rank_all(service, kb.project, question, field="q", top=MRR_K, baselines=baselines)
        for m in methods:
            ids = ranking.ids[m]
            hits[m].append(float(bool(ids) and ids[0] == gold))
            rr[m].append(reciprocal_rank(ids, gold, MRR_K))
        result.confidence.append(ranking.confidence)
        result.correct.append(bool(hits["ranker"][-1]))
    result.top1 = {m: mean(hits[m]) for m in methods}
    result.mrr5 = {m: mean(rr[m]) for m in methods}
    return result
