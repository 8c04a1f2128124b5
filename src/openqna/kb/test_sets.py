"""Test sets: questions with the QnA each should get, run against a deployment or ``test`` (issue 41, item 1).

QnA Maker's batch testing, kept in the project.  A set is imported from a file (``formats/test_set_files.py``); a run
asks every question as Azure's runtime would (top 3, threshold 0, the item's metadata as a filter) and reads:

* ``top1``: the share of answerable questions whose top answer is the expected QnA;
* ``right_at_threshold``: the share of answerable questions answered with the expected QnA at a confidence at or
  above the project's threshold (``threshold``);
* ``no_answer_rejected``: the share of no-answer questions whose top confidence is below that threshold (they get
  the default answer);
* ``wrong``: every question not right at the threshold, with what it got instead (the confusion list).

A share is ``None`` when the set has no question of its kind.  An expected answer text is matched to the QnAs of
the state being run: a QnA whose answer is the same text once runs of whitespace are one space and case is folded
(``answer_key``); any QnA with that answer counts as right.  When none has it, the question counts as wrong, with
the text as its expectation.  Runs are stored, and two runs compare question by question (``diff_runs``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from openqna.clock import now_iso
from openqna.filters.match import MetaEq, all_of
from openqna.kb.asking import AskRequest
from openqna.kb.catalog import LIVE
from openqna.records import NotFound, QnA
from openqna.store import Project
from openqna.store.base import TestRun, TestSet

__all__ = ["DEFAULT_THRESHOLD", "SETTINGS_KEY", "answer_key", "diff_runs", "labelled_questions", "no_answer_questions",
           "project_threshold", "run_test_set", "summary_json"]

SETTINGS_KEY = "testThreshold"  # a project setting: the threshold runs read "right" at (default below)
DEFAULT_THRESHOLD = 0.5  # as `openqna calibrate` reads in-scope and off-topic shares
TOP = 3


def project_threshold(project: Project) -> float:
    """The confidence a project's answers should reach: its ``testThreshold`` setting, else 0.5."""
    value = project.settings.get(SETTINGS_KEY)
    return DEFAULT_THRESHOLD if value is None else float(value)


def answer_key(text: str) -> str:
    """How an expected answer text is matched to a QnA's answer: whitespace runs as one space, case folded."""
    return " ".join(text.split()).casefold()


def _share(hits: list[bool]) -> float | None:
    return round(sum(hits) / len(hits), 4) if hits else None


def run_test_set(service: Any, project: str, test_set: TestSet, deployment: str = LIVE,
                 threshold: float | None = None) -> TestRun:
    """Ask every question of ``test_set`` of ``deployment`` (``test``: the live state) and store the run."""
    proj = service.project(project)
    at = project_threshold(proj) if threshold is None else threshold
    if deployment.lower() == LIVE:
        deployment = LIVE
    elif not service.has_deployment(project, deployment):
        raise NotFound(f"Deployment '{deployment}' of project '{project}' was not found: deploy first, or run "
                       "against test.")
    records = {q.id: q for q in service.records(project, deployment)}
    by_answer = _by_answer(records.values())
    results: list[dict[str, Any]] = []
    for item in test_set.items:
        qna_id, text = item.get("expected_qna_id"), item.get("expected_answer")
        accepted = _accepted(item, by_answer)
        no_answer = not qna_id and not text
        flt = all_of(*(MetaEq(k, v) for k, v in (item.get("metadata") or {}).items()))
        answers = service.ask(project, deployment, AskRequest(question=item["question"], top=TOP, threshold=0.0,
                                                              filter=flt))
        top = next((a for a in answers if a.qna is not None), None)
        got = top.qna.id if top is not None and top.qna is not None else None
        confidence = top.confidence if top is not None else 0.0
        top1 = got is not None and got in accepted
        right = confidence < at if no_answer else top1 and confidence >= at
        expected: int | str | None = None if no_answer else accepted[0] if accepted else text
        results.append({
            "question": item["question"], "expected": expected, "no_answer": no_answer,
            "expected_question": _first_question(records, accepted[0]) if accepted else None,
            "got": got, "got_question": _first_question(records, got), "confidence": confidence,
            "top1": top1, "right": right, "metadata": item.get("metadata") or {}})
    answerable = [r for r in results if not r["no_answer"]]
    # expected a QnA this state does not hold (an id no QnA has, or one deleted since; an answer no QnA gives):
    # counted wrong as any miss, and said, since no model or edit of the ranking can make it right
    missing = sum(1 for r in answerable if r["expected_question"] is None)
    summary = {"questions": len(results), "answerable": len(answerable),
               "no_answer": len(results) - len(answerable), "expected_missing": missing,
               "top1": _share([r["top1"] for r in answerable]),
               "right_at_threshold": _share([r["right"] for r in answerable]),
               "no_answer_rejected": _share([r["right"] for r in results if r["no_answer"]]),
               "threshold": at}
    run = TestRun(0, test_set.name, deployment, now_iso(), at, summary, results)
    return service.store.add_test_run(project, run)


def _by_answer(records: Iterable[QnA]) -> dict[str, list[int]]:
    by_answer: dict[str, list[int]] = {}
    for q in records:
        by_answer.setdefault(answer_key(q.answer), []).append(q.id)  # type: ignore[arg-type]
    return by_answer


def _accepted(item: dict[str, Any], by_answer: dict[str, list[int]]) -> list[int]:
    """The QnAs that answer a test set's ``item`` right: its expected QnA, or every QnA with its expected answer."""
    qna_id, text = item.get("expected_qna_id"), item.get("expected_answer")
    return [qna_id] if qna_id else by_answer.get(answer_key(text), []) if text else []


def no_answer_questions(service: Any, project: str) -> list[str]:
    """Every question of the project's test sets that should get no answer (an item that expects neither a QnA nor
    an answer), once each, as ``openqna train`` checks a model does not answer them more often."""
    items = [item for test_set in service.store.list_test_sets(project) for item in test_set.items]
    return list(dict.fromkeys(item["question"] for item in items
                              if not item.get("expected_qna_id") and not item.get("expected_answer")))


def labelled_questions(service: Any, project: str) -> list[tuple[str, frozenset[int]]]:
    """Every answerable question of the project's test sets with the live QnAs that answer it right (once per
    question text; a question no live QnA answers is left out), as ``openqna train`` judges a model by them.
    An item's metadata is not read: the question is asked of the whole project."""
    items = [item for test_set in service.store.list_test_sets(project) for item in test_set.items]
    by_answer = (_by_answer(service.records(project, LIVE)) if any(i.get("expected_answer") for i in items)
                 else {})
    out: dict[str, frozenset[int]] = {}
    for item in items:
        accepted = frozenset(_accepted(item, by_answer))
        if accepted and item["question"] not in out:
            out[item["question"]] = accepted
    return list(out.items())


def _first_question(records: dict, qna_id: int | None) -> str | None:
    q = records.get(qna_id) if qna_id is not None else None
    return q.questions[0] if q is not None and q.questions else None


def wrong_of(run: TestRun) -> list[dict[str, Any]]:
    """The confusion list: each question not right at the threshold, what it expected and what it got instead."""
    return [{"question": r["question"], "expected": r["expected"], "got": r["got"], "confidence": r["confidence"],
             "expected_question": r["expected_question"], "got_question": r["got_question"]}
            for r in run.results if not r["right"]]


def summary_json(run: TestRun, *, with_results: bool = False) -> dict[str, Any]:
    """A run as ``openqna test --json`` prints it and the HTTP API returns it."""
    out: dict[str, Any] = {**run.summary, "wrong": wrong_of(run) if run.results or with_results else None,
                           "run_id": run.id, "test_set": run.test_set, "deployment": run.deployment,
                           "created": run.created}
    if out["wrong"] is None:
        del out["wrong"]
    if with_results:
        out["results"] = run.results
    return out


def diff_runs(old: TestRun, new: TestRun) -> dict[str, Any]:
    """Question by question, what changed from run ``old`` to run ``new``: those that went from right to wrong
    (``worse``) and from wrong to right (``better``), each with what it got in either run, and the questions only one
    run asked.  A question is matched by its text and metadata."""

    def key(r: dict[str, Any]) -> tuple[str, tuple[tuple[str, str], ...]]:
        return r["question"], tuple(sorted((r.get("metadata") or {}).items()))

    before = {key(r): r for r in old.results}
    after = {key(r): r for r in new.results}

    def change(k: tuple[str, Any]) -> dict[str, Any]:
        a, b = before[k], after[k]
        return {"question": a["question"], "expected": b["expected"],
                "before": {"got": a["got"], "got_question": a["got_question"], "confidence": a["confidence"]},
                "after": {"got": b["got"], "got_question": b["got_question"], "confidence": b["confidence"]}}

    both = [k for k in after if k in before]
    return {"old": old.id, "new": new.id,
            "worse": [change(k) for k in both if before[k]["right"] and not after[k]["right"]],
            "better": [change(k) for k in both if not before[k]["right"] and after[k]["right"]],
            "only_old": [before[k]["question"] for k in before if k not in after],
            "only_new": [after[k]["question"] for k in after if k not in before],
            "summary": {name: {"old": old.summary.get(name), "new": new.summary.get(name)}
                        for name in ("questions", "top1", "right_at_threshold", "no_answer_rejected")}}
