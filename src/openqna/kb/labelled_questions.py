"""Questions whose right answer someone confirmed, and the test sets made of them (issue 41, item 1).

A knowledge base's users and owner label questions as they go, and until now the labels were lost:

* an owner **accepts** a suggestion (an active-learning suggestion, or a question from the query log added to a QnA
  in Analytics): the question now belongs to that QnA.  ``acceptances`` sees this in any edit that adds the
  question to the QnA (the console's Accept, Azure's ``PATCH .../qnas``, ``openqna suggestions --accept``), and
  the store keeps it (``accepted_questions``, schema 9);
* a user's client sends **feedback** (Azure's ``:feedback``, QnA Maker's ``train``) naming the QnA the user chose
  for the question asked.  A logged question with such feedback is labelled by it.

``labelled_questions`` reads both into test-set items, so that ``openqna test`` can check that the knowledge base
keeps answering them.  Nothing is guessed: a logged question that nobody confirmed (the answer it got is only what
the ranker chose) is left out, and so is a question whose feedback names more than one QnA, or whose QnA was
deleted since.  An owner's acceptance outranks users' feedback on the same question; a later acceptance of the
same question outranks an earlier one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from openqna.formats.test_set_files import MAX_QUESTIONS
from openqna.kb.query_log import question_key
from openqna.records import QnA
from openqna.store import Store
from openqna.store.base import AcceptedQuestion

__all__ = ["Labelled", "acceptances", "labelled_questions", "suggested_questions"]


def suggested_questions(clusters: list[dict]) -> set[str]:
    """The questions of QnA Maker suggestion clusters (``AlternateQuestionList[].Question``, any case of the keys)."""
    out = set()
    for cluster in clusters:
        fields = {k.lower(): v for k, v in cluster.items()}
        for alternate in fields.get("alternatequestionlist") or []:
            question = {k.lower(): v for k, v in alternate.items()}.get("question") if isinstance(alternate, dict) \
                else None
            if isinstance(question, str) and question.strip():
                out.add(question.strip())
    return out


def acceptances(before: QnA, after: QnA, feedback: list[str], logged: set[str]) -> list[AcceptedQuestion]:
    """The questions an edit from ``before`` to ``after`` (one QnA) accepted: each question it added that was a
    pending suggestion of the QnA (``feedback`` sent for it, or its suggestion clusters; ``via`` ``suggestion``) or
    was asked of a deployment (``logged``: the query log's ``question_key``\\ s; ``via`` ``log``)."""
    if before.id is None:
        return []
    had = {q.casefold() for q in before.questions}
    pending = {q.casefold() for q in [*feedback, *suggested_questions(before.suggested_questions)]}
    out = []
    for question in after.questions:
        if question.casefold() in had:
            continue
        if question.casefold() in pending:
            out.append(AcceptedQuestion(before.id, question, "suggestion"))
        elif question_key(question) in logged:
            out.append(AcceptedQuestion(before.id, question, "log"))
    return out


@dataclass
class Labelled:
    """Test-set items (``question``, ``expected_qna_id``, ``metadata``, and ``origin``: ``accepted`` or
    ``feedback``) and what was left out: ``gone`` (their QnA was deleted), ``ambiguous`` (feedback naming more than
    one QnA) and ``over`` (beyond the 2,000 a set holds; the oldest go)."""

    items: list[dict[str, Any]] = field(default_factory=list)
    accepted: int = 0
    feedback: int = 0
    gone: int = 0
    ambiguous: int = 0
    over: int = 0

    def report(self) -> dict[str, Any]:
        return {"questions": len(self.items), "accepted": self.accepted, "feedback": self.feedback,
                "skipped": {"gone": self.gone, "ambiguous": self.ambiguous, "over": self.over}}


def labelled_questions(store: Store, project: str) -> Labelled:
    """Every question of ``project`` with a confirmed QnA: accepted suggestions, then logged questions with feedback
    naming one QnA (see the module's docstring), each question once."""
    qnas = [q for q in store.list_qnas(project) if q.kind == "qna"]
    live = {q.id for q in qnas}
    # the QnA that holds an accepted question now: a merge or a move of the question took it elsewhere, and the set
    # still expected the QnA it was accepted into (a miss), or left it out as gone
    holder = {question_key(text): q.id for q in qnas if q.id is not None for text in q.questions}
    out = Labelled()
    labels: dict[str, tuple[str, int, str]] = {}  # question key -> (question, qna id, origin)
    for a in store.list_accepted(project):  # oldest first: a later acceptance of the question replaces it
        key = question_key(a.question)
        labels.pop(key, None)
        labels[key] = (a.question, holder.get(key, a.qna_id), "accepted")
    logged = {question_key(q) for q in store.queried_questions(project)}
    named: dict[str, dict[int, str]] = {}
    for qna_id, items in store.list_feedback(project).items():
        for question, _count in items:
            key = question_key(question)
            if key in logged and key not in labels:
                named.setdefault(key, {}).setdefault(qna_id, question)
    for key, by_qna in named.items():
        if len(by_qna) > 1:
            out.ambiguous += 1
            continue
        ((qna_id, question),) = by_qna.items()
        labels[key] = (question, qna_id, "feedback")
    for question, qna_id, origin in labels.values():
        if qna_id not in live:
            out.gone += 1
            continue
        out.items.append({"question": question, "expected_qna_id": qna_id, "expected_answer": None, "metadata": {},
                          "origin": origin})
    if len(out.items) > MAX_QUESTIONS:
        out.over = len(out.items) - MAX_QUESTIONS
        out.items = out.items[out.over:]
    out.accepted = sum(i["origin"] == "accepted" for i in out.items)
    out.feedback = len(out.items) - out.accepted
    return out
