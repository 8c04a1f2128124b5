"""Passage retrieval: BEIR SciFact nDCG@10 over its 300 test claims.

Each abstract becomes one passage record shaped as document import shapes a section's
chunk (``documents._passage``): the title is its question and "title, blank line, abstract"
its text, upserted through ``Service.upsert`` and searched with
``Service.ask(include_unstructured=True)``.  The text is embedded whole, so the embedder's
256-token window truncates long abstracts, as in BEIR's own runs of this model.  Abstracts
are not split by the document chunker: that would embed about 1.6 texts per abstract and
double the cold-cache time for a corpus whose documents are already passage-sized.

The baselines rank on the passage text (the ``a`` field): a title alone is not a fair
stand-in for BM25 or dense retrieval over a corpus.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path

from openqna.evaluation import datasets
from openqna.evaluation.baselines import METHODS, rank_all
from openqna.evaluation.metrics import mean, ndcg_at_k, reciprocal_rank
from openqna.kb.service import Service
from openqna.records import QnA

PROJECT = "scifact"
K = 10


@dataclass
class PassageResult:
    queries: int
    documents: int
    ndcg10: dict[str, float]
    index_seconds: float  # upsert: analysis, embedding (minus what the cache answered), SQLite
    model_seconds: float  # of which the embedding model itself ran
    query_seconds: float  # all methods for all queries


def corpus_subset(corpus: datasets.Corpus, *, queries: int | None, extra_docs: int | None,
                  seed: int) -> tuple[dict[str, str], dict[str, tuple[str, str]]]:
    """All of it by default; else a seeded sample of queries, their relevant documents and ``extra_docs`` others."""
    if queries is None:
        return corpus.queries, corpus.docs
    rng = random.Random(f"{seed}:scifact")
    qids = sorted(rng.sample(sorted(corpus.queries), queries), key=int)
    wanted = {d for q in qids for d in corpus.qrels[q]}
    others = sorted(set(corpus.docs) - wanted)
    wanted |= set(rng.sample(others, extra_docs or 0))
    return {q: corpus.queries[q] for q in qids}, {d: t for d, t in corpus.docs.items() if d in wanted}


def passage_record(doc_id: str, title: str, text: str) -> QnA:
    body = f"{title}\n\n{text}" if title else text
    return QnA([title] if title else [], body, source=doc_id, kind="passage")


def evaluate(service: Service, data_dir: Path, *, seed: int, queries: int | None = None,
             extra_docs: int | None = None) -> PassageResult:
    corpus = datasets.scifact(data_dir, "test")
    asked, docs = corpus_subset(corpus, queries=queries, extra_docs=extra_docs, seed=seed)
    model_before = getattr(service.embedder, "model_seconds", 0.0)
    start = time.perf_counter()
    service.create_project(PROJECT)
    service.upsert(PROJECT, [passage_record(d, title, text) for d, (title, text) in docs.items()])
    index_seconds = time.perf_counter() - start
    model_seconds = getattr(service.embedder, "model_seconds", 0.0) - model_before
    doc_of = {q.id: q.source for q in service.store.list_qnas(PROJECT)}
    start = time.perf_counter()
    scores: dict[str, list[float]] = {m: [] for m in METHODS}
    for qid, claim in asked.items():
        ranking = rank_all(service, PROJECT, claim, field="a", top=K, include_unstructured=True)
        for m in METHODS:
            scores[m].append(ndcg_at_k([doc_of[i] for i in ranking.ids[m]], corpus.qrels[qid], K))
    return PassageResult(len(asked), len(docs), {m: mean(v) for m, v in scores.items()},
                         index_seconds, model_seconds, time.perf_counter() - start)


@dataclass
class ParagraphResult:
    """Finding a question's own paragraph among all the set's paragraphs (one right answer each)."""

    name: str
    language: str
    queries: int
    paragraphs: int
    top1: dict[str, float]
    mrr10: dict[str, float]


def paragraph_retrieval(service: Service, data_dir: Path, name: str, *, limit: int | None = None) -> ParagraphResult:
    """Every question of a span set asked of a KB of all its paragraphs (passage records, no title).

    XQuAD's English and Chinese files are the same questions over the same paragraphs,
    translated, so the two rows compare search in Chinese with search in English directly.
    ``limit``: only the first ``limit`` paragraphs (file order) and their questions.
    """
    relative, lang = datasets.SPAN_SETS[name]
    questions = datasets.squad(data_dir, relative)
    paragraphs = list(dict.fromkeys(q.context for q in questions))[:limit]
    questions = [q for q in questions if q.context in set(paragraphs)]
    number = {p: i for i, p in enumerate(paragraphs)}
    project = f"paragraphs-{name}"
    service.create_project(project)
    service.upsert(project, [passage_record(str(i), "", p) for i, p in enumerate(paragraphs)])
    paragraph_of = {q.id: int(q.source) for q in service.store.list_qnas(project)}
    top1: dict[str, list[float]] = {m: [] for m in METHODS}
    rr: dict[str, list[float]] = {m: [] for m in METHODS}
    for q in questions:
        ranking = rank_all(service, project, q.question, field="a", top=K, include_unstructured=True)
        gold = number[q.context]
        for m in METHODS:
            found = [paragraph_of[i] for i in ranking.ids[m]]
            top1[m].append(float(bool(found) and found[0] == gold))
            rr[m].append(reciprocal_rank(found, gold, K))
    return ParagraphResult(name, lang, len(questions), len(paragraphs),
                           {m: mean(v) for m, v in top1.items()}, {m: mean(v) for m, v in rr.items()})
