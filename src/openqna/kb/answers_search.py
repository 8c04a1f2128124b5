"""OpenAI's retired Answers and Search, rebuilt on openqna's retrieval (no wire format here).

Search: each document is scored on its own, as OpenAI's engine scored it (reference/openai-answers.md §2.3): the
calibrated relevance openqna's ranker gives it as a knowledge base of that one document (question similarity, text
similarity, word overlap), less the relevance of an empty document to the same query (OpenAI's empty baseline), times
300, on OpenAI's documented scale ("usually 0 to 300").  So a document gets the same score whatever else the request
holds, and an empty one scores 0.  Answers follows OpenAI's own pipeline and the Cookbook's byte-exact prompt:
documents (or a file's lines, prefiltered) are ranked (a request's documents together, ``ranked_together``: only
their order counts there), added best-first while they fit the
model's context window less ``max_tokens`` (GPT-2 tokens, strict ``<``, scanning past a
document that does not fit), placed best-ranked last, and one completion is requested.
"""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from threading import Lock
from typing import Callable

import numpy as np

from openqna import settings
from openqna.answers.extractive import ExtractiveCompleter
from openqna.index.analyze import analyze, exact_key
from openqna.index.memindex import IndexRecord, MemIndex
from openqna.kb.service import Service
from openqna.models.completer import Completer, CompletionRequest, OpenAICompatibleCompleter
from openqna.models.gpt2 import count_tokens
from openqna.ranking import ranker
from openqna.ranking.calibrations import CALIBRATION, Calibration
from openqna.records import InvalidArgument

ANSWERS_INSTRUCTION = "Please answer the question according to the above context.\n"
CONTEXT_TEMPLATE = "===\nContext: {context}\n===\n"
SCORE_SCALE = 300.0
OLD_ENGINE_CONTEXT = 2049
OLD_ENGINES = ("ada", "babbage", "curie", "davinci")


def context_window(model: str) -> int:
    """Tokens a model's prompt plus completion may use: 2049 for the old engines, else settings."""
    configured = settings.model_context()
    if model in configured:
        return int(configured[model])
    base = model.split(":")[0].split("-")[0]
    return OLD_ENGINE_CONTEXT if base in OLD_ENGINES else int(configured.get("*", OLD_ENGINE_CONTEXT))


def get_completer(embed: Callable[[list[str]], np.ndarray]) -> Completer:
    """From settings: an OpenAI-compatible endpoint when OPENQNA_LLM_BASE_URL is set, else extractive."""
    base = settings.llm_base_url()
    if not base:
        return ExtractiveCompleter(embed)
    return OpenAICompatibleCompleter(base, settings.llm_api_key() or None, model_map=settings.llm_model_map(),
                                     default_model=settings.llm_model() or None, api=settings.llm_api(),
                                     timeout=settings.llm_timeout())


class TextVectors:
    """An LRU of ad-hoc document vectors: the same documents arrive with every Answers call."""

    def __init__(self, service: Service, size: int = 20_000):
        self.service = service
        self.size = size
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = Lock()

    def __call__(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        fresh = self.service.embedder.embed(missing) if missing else None
        with self._lock:
            for t, v in zip(missing, fresh if fresh is not None else []):
                self._cache[t] = v
            out = np.stack([self._cache[t] for t in texts]) if texts else np.zeros((0, self.service.embedder.dim))
            for t in texts:
                self._cache.move_to_end(t)
            while len(self._cache) > self.size:
                self._cache.popitem(last=False)
        return out


# One index per document text (Search: each document a knowledge base of its own), and one per request's documents
# (Answers: ranked together); clients send the same documents again (200 a request at most).
DOCUMENT_INDEXES, REQUEST_INDEXES = 4096, 64
_INDEXES: OrderedDict[str, MemIndex] = OrderedDict()
_JOINT: OrderedDict[str, MemIndex] = OrderedDict()
_INDEXES_LOCK = Lock()


def _cached(cache: OrderedDict[str, MemIndex], most: int, texts: list[str], vectors: np.ndarray) -> MemIndex:
    """The index of ``texts`` (one passage record each, with their ``vectors``) kept in ``cache``, the ``most``
    used last, made on first use."""
    key = hashlib.sha256("\x1e".join(texts).encode("utf-8", "surrogatepass")).hexdigest()
    with _INDEXES_LOCK:
        index = cache.get(key)
        if index is not None:
            cache.move_to_end(key)
            return index
    records = []
    for i, t in enumerate(texts):
        terms = analyze(t)
        records.append(IndexRecord(i, "passage", "", {}, False, [exact_key(t)], vectors[i][None, :], [terms],
                                   vectors[i], terms))
    index = MemIndex(records, vectors.shape[1], 0)
    with _INDEXES_LOCK:
        cache[key] = index
        while len(cache) > most:
            cache.popitem(last=False)
    return index


def ranked_together(question: str, texts: list[str], vectors: np.ndarray, query: np.ndarray, *,
                    reads_cjk: bool = True, calibration: Calibration = CALIBRATION) -> list[int]:
    """The positions of ``texts`` best first, ranked as one knowledge base (the words' idf read across them): how
    Answers picks the documents its prompt holds, whose order is all that counts there."""
    if not texts:
        return []
    ranked = ranker.rank(_cached(_JOINT, REQUEST_INDEXES, texts, vectors), question, query,
                         np.ones(len(texts), bool), top=len(texts), reads_cjk=reads_cjk, calibration=calibration,
                         every_record=True)
    order = [r.record_id for r in ranked]
    placed = set(order)
    return order + [i for i in range(len(texts)) if i not in placed]


def relevance(question: str, texts: list[str], vectors: np.ndarray, query: np.ndarray, *,
              reads_cjk: bool = True, calibration: Calibration = CALIBRATION) -> list[float]:
    """openqna's calibrated relevance of each text to ``question``, in input order (0..1), each text scored on its
    own (a knowledge base of that one text), so that a text's relevance never depends on the others."""
    out = []
    for text, vector in zip(texts, vectors):
        ranked = ranker.rank(_cached(_INDEXES, DOCUMENT_INDEXES, [text], vector[None, :]), question, query,
                             np.ones(1, bool), top=1, reads_cjk=reads_cjk, calibration=calibration)
        out.append(ranked[0].confidence if ranked else 0.0)
    return out


@dataclass
class AnswersRequest:
    model: str
    question: str
    examples: list[tuple[str, str]]
    examples_context: str
    documents: list[str] | None = None
    # file mode: (document index, text, metadata, score) of the file's documents the prefilter kept
    file_texts: list[tuple[int, str, object, float]] | None = None
    search_model: str = "ada"
    max_rerank: int = 200
    temperature: float = 0.0
    logprobs: int | None = None
    max_tokens: int = 16
    stop: list[str] | None = None
    n: int = 1
    return_metadata: bool = False
    return_prompt: bool = False
    user: str | None = None
    alternative_question: str | None = None


@dataclass
class AnswersResult:
    answers: list[str]
    completion_id: str
    model: str
    selected: list[dict] = field(default_factory=list)
    prompt: str = ""
    logprobs: list = field(default_factory=list)  # each answer's logprobs from the completer, when it sent them
    completions: list[str] = field(default_factory=list)  # the completer's texts the answers were read from, as sent


def answer_text(completion: str) -> str:
    """The answer in a completion of the Answers prompt: without an "A:" it begins with, up to a line the model
    began with "Q:" (it went on to write the next example), as OpenAI's transition script reads its completions.
    Only there: a document's sentence answered word for word keeps its "FAQ:" and its "Plan A:" (a replace of every
    "A:" and a cut at any "Q:" made "Read the FAQ: returns are free" "Read the FA")."""
    text = _ANSWER_MARK.sub("", completion.strip(), count=1)
    return _NEXT_QUESTION.split(text, maxsplit=1)[0].strip()


_ANSWER_MARK = re.compile(r"^A:\s*")
_NEXT_QUESTION = re.compile(r"^[ \t]*Q:", re.MULTILINE)


def build_instruction(examples: list[tuple[str, str]], examples_context: str) -> str:
    context = CONTEXT_TEMPLATE.format(context=examples_context) if examples_context else ""
    shots = "\n---\n".join(f"Q: {q}\nA: {a}" for q, a in examples)
    return (ANSWERS_INSTRUCTION + context + shots + "\n").strip() + "\n\n"


def select_by_length(infos: list[dict], budget: int) -> list[dict]:
    """Greedy in rank order: take a document iff it still fits strictly; keep scanning after a miss."""
    chosen, used = [], 0
    for info in infos:
        n = count_tokens(info["text"].strip() + " ")
        if used + n < budget:
            chosen.append(info)
            used += n
    return chosen


class Answering:
    def __init__(self, service: Service, completer: Completer):
        self.service = service
        self.completer = completer
        self.vectors = TextVectors(service)

    def relevances(self, query: str, documents: list[str]) -> list[float]:
        """Each document's relevance to ``query`` (``relevance``), then the empty baseline's, last."""
        texts = [*documents, ""]
        return relevance(query, texts, self.vectors(texts), self.vectors([query])[0],
                         reads_cjk=self.service.reads_cjk, calibration=self.service.shipped_calibration)

    def search_scores(self, query: str, documents: list[str]) -> list[float]:
        """OpenAI's search scores: ``300 × (relevance − the empty document's relevance)``, at least 0 (OpenAI's
        documentation calls its scores positive), rounded to 3 places as OpenAI's were."""
        *scores, baseline = self.relevances(query, documents)
        return [round(SCORE_SCALE * max(0.0, s - baseline), 3) for s in scores]

    def answers(self, req: AnswersRequest) -> AnswersResult:
        instruction = build_instruction(req.examples, req.examples_context)
        question_block = f"Q: {req.question}\nA:"
        window = context_window(req.model)
        leftover = window - (count_tokens(instruction) + count_tokens(CONTEXT_TEMPLATE.format(context=""))
                             + count_tokens(question_block) + req.max_tokens)
        if leftover <= 0:
            raise InvalidArgument(f"The examples, question and max_tokens need {window - leftover} tokens, more than "
                                  f"the {window} of model '{req.model}'. Shorten them or lower max_tokens.",
                                  target="max_tokens")
        query = req.alternative_question or req.question
        if req.file_texts is not None:
            ranked = [{"document": i, "text": t.strip() + " ", "score": score,
                       **({"metadata": m} if req.return_metadata else {})}
                      for i, t, m, score in sorted(req.file_texts, key=lambda x: -x[3])][: req.max_rerank]
        else:
            docs = [d.strip() + " " for d in req.documents or []]
            infos = [{"document": i, "text": d} for i, d in enumerate(docs)]
            sizes = [count_tokens(d) for d in docs]
            if infos and req.max_rerank >= len(docs) and sum(sizes) < leftover:
                # everything fits: no search, and the documents keep their order (as OpenAI's example shows)
                selected = list(infos)
                return self._complete(req, instruction, question_block, selected)
            elif infos and count_tokens(query) + max(sizes) >= window:
                raise InvalidArgument(f"The longest document and prompt pair together contains "
                                      f"{count_tokens(query) + max(sizes)} tokens, above the limit {window} for "
                                      f"semantic search. Shorten the documents.", target="documents")
            else:
                ranked = self._ranked(query, infos)[: req.max_rerank]
        selected = list(reversed(select_by_length(ranked, leftover)))  # best-ranked nearest the question
        if ranked and not selected and req.file_texts is not None:
            # the file's documents found for the question are each too long for the prompt: an empty answer would
            # not say why (inline documents that long are refused above)
            shortest = min(ranked, key=lambda d: count_tokens(d["text"]))
            raise InvalidArgument(f"The file's documents found for this question are each too long for the prompt: "
                                  f"the shortest (document {shortest['document']}) holds "
                                  f"{count_tokens(shortest['text'])} tokens, and model '{req.model}' leaves "
                                  f"{leftover} for documents after the examples, question and max_tokens. Split the "
                                  f"file's long lines into shorter documents, or lower max_tokens.", target="file")
        return self._complete(req, instruction, question_block, selected)

    def _complete(self, req: AnswersRequest, instruction: str, question_block: str,
                  selected: list[dict]) -> AnswersResult:
        context = "".join(s["text"] for s in selected).strip()
        prompt = instruction + (CONTEXT_TEMPLATE.format(context=context) if selected else "") + question_block
        completion = self.completer.complete(CompletionRequest(
            prompt, req.model, req.question, [s["text"] for s in selected], n=req.n, max_tokens=req.max_tokens,
            temperature=req.temperature, stop=req.stop, logprobs=req.logprobs,
            user=req.user))
        return AnswersResult([answer_text(t) for t in completion.texts], completion.id, completion.model, selected,
                             prompt, completion.logprobs, list(completion.texts))

    def _ranked(self, query: str, infos: list[dict]) -> list[dict]:
        """The documents best first, ranked together (``ranked_together``; scoring each on its own, as Search does,
        cost 4-5x the time with 200 documents and reads no idf across them)."""
        texts = [i["text"] for i in infos]
        order = ranked_together(query, texts, self.vectors(texts), self.vectors([query])[0],
                                reads_cjk=self.service.reads_cjk, calibration=self.service.shipped_calibration)
        return [infos[k] for k in order]
