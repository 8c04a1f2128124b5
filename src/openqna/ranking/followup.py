"""Follow-up questions in a conversation (Azure's ``context.previousUserQuery``).

"How long does that take?" after "How do I charge my Surface Pro 4?" cannot be answered
alone, and pasting the two questions together answers the previous one again (the QnA
"Charge your Surface Pro 4" wins on its question; the time is in "Power and charging").
So the previous question is used only when the current one needs it, and then as context:

1. *Does it need context?*  It refers back (it, that, 它, それ …), has at most one content
   word, or alone it reaches no confidence of 0.5, the calibrated "probably right" mark.
2. *Context, current first.*  The query vector is the current question's plus
   ``PREVIOUS_WEIGHT`` times the previous one's; the terms are the current question's only.
3. *A follow-up asks for a detail.*  Details live in sentences, so in the best few candidates
   the answer sentence closest to that vector counts as one more question of its record: where
   it is closer than the record's best question, the logit gains what the ranker would give
   the record with that question added (best, mean and centroid question cosines read through
   the ranker's own weights, ``ranker.question_gain``).  No new weight is fitted for this.

4. *Context adds evidence, never confidence from nothing.*  A record's confidence may rise above
   what the question alone gives it only when the question matches the record: it is a follow-up
   prompt of the previous answer whose display text the question asks (``prompt_matches``), or
   the question's own words are found in the record's questions or answer (``WORDS``).  Every
   other record keeps at most its confidence without context (``capped``): "tell me a joke" after
   "How do I start the server?" is not about starting the server, however close the two
   questions' blend lies to it (it answered that QnA at 0.92; a follow-up prompt got +1 logit
   whatever was asked).

``PREVIOUS_WEIGHT`` was chosen on 15 follow-ups written for the Contoso benefits sample (five
of them are the training conversations in ``tests/test_followup.py``), never on the Surface
Pro 4 ones; with the fused ranker 0.7 still scores best there (12/15 first, the other three
in the top three; 0.3: 12/15 with three outside the top three; 0.5: 10/15; 1.0: 11/15).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING, Callable

import numpy as np

from openqna.answers.span import sentence_spans
from openqna.index.analyze import analyze, exact_key, normalise

if TYPE_CHECKING:
    from openqna.index.memindex import MemIndex
    from openqna.ranking.ranker import Ranked

PREVIOUS_WEIGHT = 0.7
CANDIDATES = 5
CONFIDENT = 0.5
MAX_SENTENCES = 16  # embedded per follow-up: those sharing most words with the two questions
MAX_SENTENCE_CHARS = 300
POOL = 50  # records ranked with and without context, of which the capped ones are chosen
WORDS = 0.5  # a record holds the question's own words when it holds at least this share of its content words
PROMPT_WORDS = 0.5  # a prompt is asked when the question holds at least this share of its display text's words

_ANAPHORS = frozenset(
    "it its that this these those they them their there one ones he she him her such same".split()
)
_CJK_ANAPHORS = ("它", "这", "那", "其", "该", "それ", "これ", "あれ", "その", "この", "あの", "そこ", "ここ")
_WORD = re.compile(r"[^\W_]+")
_QUESTION_WORDS = frozenset("how what when where which who whom whose why much many long".split())


def refers_back(question: str) -> bool:
    """True when the question leans on what came before: an anaphor or no more than one content word."""
    text = normalise(question)
    if any(w in _ANAPHORS for w in _WORD.findall(text)) or any(a in text for a in _CJK_ANAPHORS):
        return True
    content = [t for t in analyze(question, bigrams=False) if t not in _QUESTION_WORDS]
    return len(content) <= 1


def needs_context(question: str, confidence_alone: float) -> bool:
    return refers_back(question) or confidence_alone < CONFIDENT


def context_vector(current: np.ndarray, previous: np.ndarray) -> np.ndarray:
    """The current question's vector, nudged towards the previous one (current weighs more)."""
    v = current + PREVIOUS_WEIGHT * previous
    return v / max(float(np.linalg.norm(v)), 1e-12)


def sentence_offsets(vector: np.ndarray, answers: dict[int, str], question_sims: dict[int, float],
                     embed: Callable[[list[str]], np.ndarray],
                     gain: Callable[[list[int], np.ndarray], np.ndarray], words: str) -> dict[int, float]:
    """Logits to add to candidates whose answer holds a sentence closer to ``vector`` than their best question.

    The sentence counts as one more question of its record: ``gain(record ids, sentence vectors)``
    is the logit the ranker itself would gain from it (``ranker.question_gain``), so no new weight
    is introduced.  Only the ``MAX_SENTENCES`` sentences sharing most terms with ``words`` (the
    two questions) are embedded, which bounds the cost of answers that are long tables.
    """
    pieces: list[tuple[int, str]] = []
    for rid, text in answers.items():
        spans = sentence_spans(text)
        # a heading-derived answer starts with its title in bold: that is the question, not a detail
        if len(spans) > 1 and text.lstrip().startswith("**"):
            spans = spans[1:]
        pieces.extend((rid, text[s:e][:MAX_SENTENCE_CHARS]) for s, e in spans)
    if not pieces:
        return {}
    if len(pieces) > MAX_SENTENCES:
        terms = set(analyze(words, bigrams=False))
        shared = [len(terms & set(analyze(t, bigrams=False))) for _, t in pieces]
        keep = sorted(sorted(range(len(pieces)), key=lambda i: -shared[i])[:MAX_SENTENCES])
        pieces = [pieces[i] for i in keep]
    # one at a time: the embedder's query cache then keeps the sentences of answers that follow-ups
    # keep landing on, and no batch pads short sentences to the longest
    vectors = np.concatenate([embed([t]) for _, t in pieces])
    sims = vectors @ vector
    best: dict[int, int] = {}  # record id -> its closest sentence
    for i, (rid, _) in enumerate(pieces):
        if rid not in best or sims[i] > sims[best[rid]]:
            best[rid] = i
    closer = [rid for rid, i in best.items() if sims[i] > question_sims.get(rid, 0.0)]
    if not closer:
        return {}
    gains = gain(closer, vectors[[best[rid] for rid in closer]])
    return {rid: max(0.0, float(g)) for rid, g in zip(closer, gains)}


def _content(text: str) -> set[str]:
    return {t for t in analyze(text, bigrams=False) if t not in _QUESTION_WORDS}


def prompt_matches(question: str, prompts: dict[int, str]) -> set[int]:
    """The prompt targets (id -> display text) whose display text ``question`` asks: the same text, or at least
    ``PROMPT_WORDS`` of the display text's content words among the question's."""
    key, words = exact_key(question), _content(question)
    out = set()
    for target, display in prompts.items():
        shown = _content(display)
        if exact_key(display) == key or (shown and len(shown & words) / len(shown) >= PROMPT_WORDS):
            out.add(target)
    return out


def records_with_words(index: MemIndex, question: str) -> set[int]:
    """Ids of the records whose questions or answer hold at least ``WORDS`` of ``question``'s content words (its
    analysed terms less question words such as "how" and "long")."""
    words = _content(question)
    if not words:
        return set()
    counts: dict[int, int] = {}
    for term in words:
        rows: set[int] = set()
        for fld in (index.q, index.a):
            hit = fld.postings.get(term)
            if hit is not None:
                rows.update(fld.rows[hit[0]].tolist())
        for row in rows:
            counts[row] = counts.get(row, 0) + 1
    return {int(index.ids[row]) for row, n in counts.items() if n / len(words) >= WORDS}


def capped(contextual: list[Ranked], alone: list[Ranked], evidence: set[int], pool: int = POOL,
           prompted: set[int] | frozenset[int] = frozenset()) -> list[Ranked]:
    """The records of ``contextual`` (ranked with the conversation) and of ``alone`` (the question without it), best
    first: a record of ``evidence`` gets the better of its two confidences, any other its confidence alone, so the
    context lifts what the question matches and never lowers a record below what the question alone gives it.

    ``alone`` holds the best ``pool`` records: a record missing from a full pool has at most the pool's lowest
    confidence, from one that is not full 0.  Among equal confidences a record of ``prompted`` (a prompt whose
    display text was asked word for word) comes first: a manual may have two sections of that heading, and the
    prompt names one.
    """
    was = {r.record_id: r for r in alone}
    floor = min(r.confidence for r in alone) if len(alone) >= pool else 0.0
    out = []
    for r in contextual:
        before = was.get(r.record_id)
        if before is None:  # not among the best without context
            out.append(r if r.record_id in evidence or r.confidence <= floor else replace(r, confidence=floor))
        elif r.record_id in evidence and r.confidence > before.confidence:
            out.append(r)
        else:  # the context neither lifts a record without evidence nor lowers one below its own
            out.append(replace(before, parts=r.parts) if r.parts else before)
    seen = {r.record_id for r in out}
    out += [r for r in alone if r.record_id not in seen]
    return sorted(out, key=lambda r: (-r.confidence, r.record_id not in prompted))
