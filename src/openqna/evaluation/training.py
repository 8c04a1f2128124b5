"""Save and train in the evaluation: every regime KB trained as ``openqna train`` trains it, and its test split asked
again when the job kept a model.

Runs last, after every section that asks these KBs, so the figures above it are the untrained server's.  Each KB is
trained twice:

* **as it is**: the job sees only what the KB holds (its indexed questions, answers and headings) and judges the
  model on its own held-out questions;
* **with its dev split as a test set** (``DEV_SET``), as an owner who has kept a test set of users' questions (issue
  41's owner's loop) has one: the job judges the model on those questions too (``training.project``), and never
  trains on them;
* **with its dev split sent as feedback** (``dev_feedback``), as a bot that sends its users' questions with the QnA
  they were given (Azure's and QnA Maker's feedback records) and no test set: the job learns from them and judges by
  them, cross-validated (``training.project.feedback_folds``).

The test split is never shown to the job, so the test figures after training are as held out as the ones before.
"Before" is the regime section's own test figures; "after" asks the same test questions the same way
(``Service.ask``, top ``MRR_K``, threshold 0) once the model is in the test state.
"""

from __future__ import annotations

from typing import Any

from openqna.evaluation.regimes import MRR_K, Outcome, RegimeKB, summary
from openqna.kb.catalog import LIVE
from openqna.kb.service import AskRequest, Service
from openqna.kb.test_sets import TestSet
from openqna.kb.train_job import Trainer, TrainResult

DEV_SET = "eval-dev-split"  # the test set the second training reads: the KB's dev questions, with their QnAs


def _ask_test(service: Service, kb: RegimeKB) -> list[Outcome]:
    """The test split of ``kb`` asked as ``regimes.ask_all`` asks it, without the single-signal baselines."""
    out = []
    for q in kb.questions:
        if q.split != "test":
            continue
        answers = service.ask(kb.project, "test", AskRequest(question=q.text, top=MRR_K, threshold=0.0,
                                                             include_unstructured=kb.include_unstructured))
        ranked = [a for a in answers if a.qna is not None and a.qna.id is not None]
        rank = None if q.gold is None else next(
            (i for i, a in enumerate(ranked, 1) if kb.is_right(a.qna.id, q.gold)), None)  # type: ignore[union-attr,arg-type]
        first = ranked[0] if ranked else None
        out.append(Outcome(kb.project, q.split, q.text, q.gold, first.qna.id if first and first.qna else None, "",
                           first.confidence if first else 0.0, rank == 1, rank))
    return out


def dev_set(service: Service, kb: RegimeKB) -> TestSet:
    """``kb``'s dev split as a test set: each in-scope dev question with the QnA that answers it (by its answer when
    several QnAs do); off-topic questions as questions that should get no answer."""
    records = list(service.records(kb.project, LIVE))
    items = []
    for q in kb.questions:
        if q.split != "dev":
            continue
        right = [] if q.gold is None else [r for r in records if kb.is_right(r.id, q.gold)]  # type: ignore[arg-type]
        if q.gold is not None and not right:
            continue
        items.append({"question": q.text, "metadata": {},
                      "expected_qna_id": right[0].id if len(right) == 1 else None,
                      "expected_answer": right[0].answer if len(right) > 1 else None})
    return TestSet(DEV_SET, items)


def dev_feedback(service: Service, kb: RegimeKB) -> list[tuple[int, str, str]]:
    """``kb``'s in-scope dev questions as feedback records (QnA id, question, user id), each with the one QnA that
    answers it right (a question several QnAs answer is left out: a bot's feedback names the QnA it gave)."""
    records = list(service.records(kb.project, LIVE))
    out = []
    for q in kb.questions:
        if q.split == "dev" and q.gold is not None:
            right = [r.id for r in records if kb.is_right(r.id, q.gold)]  # type: ignore[arg-type]
            if len(right) == 1 and right[0] is not None:
                out.append((right[0], q.text, "eval"))
    return out


def _figures(service: Service, kb: RegimeKB, result: TrainResult, threshold: float, was: dict[str, Any]
             ) -> dict[str, Any]:
    """The test split after ``result``'s training: asked again when a model was kept, else ``was``."""
    if not result.kept:
        return dict(was)
    s = summary(_ask_test(service, kb), threshold)
    return {"top1": s.top1, "right_at_t": s.right_at_t, "precision": s.precision,
            "offtopic_rejected": s.offtopic_rejected}


def evaluate(service: Service, kbs: list[RegimeKB], before: dict[str, dict[str, Any]], threshold: float) -> dict:
    """``{kb: {"regime", "kept", "seconds", "held_out": [space reports], "before": {...}, "after": {...},
    "with_dev_set": {"kept", "seconds", "held_out", "after"}}}``; ``before``: each KB's test-split summary as the
    regime sections measured it."""
    trainer = Trainer(service)
    out: dict[str, dict[str, Any]] = {}
    for kb in kbs:
        was = before[kb.project]
        figures = {"top1": was["top1"], "right_at_t": was["right_at_t"], "precision": was["precision"],
                   "offtopic_rejected": was["offtopic_rejected"]}
        result = trainer.train(kb.project)
        row = {"regime": kb.regime, "kept": result.kept, "seconds": result.seconds,
               "held_out": [space.json() for space in result.spaces], "before": figures,
               "after": _figures(service, kb, result, threshold, figures)}
        trainer.forget(kb.project)  # the KB answers untrained again for whatever follows
        service.store.put_test_set(kb.project, dev_set(service, kb))
        result = trainer.train(kb.project)
        row["with_dev_set"] = {"kept": result.kept, "seconds": result.seconds,
                               "held_out": [space.json() for space in result.spaces],
                               "after": _figures(service, kb, result, threshold, figures)}
        trainer.forget(kb.project)
        service.store.delete_test_set(kb.project, DEV_SET)
        sent = dev_feedback(service, kb)
        service.store.add_feedback(kb.project, sent)
        result = trainer.train(kb.project)
        row["with_dev_feedback"] = {"kept": result.kept, "seconds": result.seconds, "feedback": len(sent),
                                    "held_out": [space.json() for space in result.spaces],
                                    "after": _figures(service, kb, result, threshold, figures)}
        trainer.forget(kb.project)
        for qna_id in {qna_id for qna_id, _, _ in sent}:
            service.store.delete_feedback(kb.project, qna_id)
        out[kb.project] = row
    return out


def _held(spaces: list[dict[str, Any]], key: str) -> str:
    """A job's per-space figures (``key``: "own" held-out questions, "testSets" or "feedbackOtherQnas"): top-1 /
    right at t before→after."""
    parts = []
    for s in spaces:
        b, a = (s["before"], s["after"]) if key == "own" else (s[key]["before"], s[key]["after"])
        if b["questions"]:
            parts.append(f"{b['top1']:.3f}→{a['top1']:.3f} / {b['rightAtThreshold']:.3f}→{a['rightAtThreshold']:.3f}"
                         f" ({b['questions']})")
    return "; ".join(parts) or "none"


def section(metrics: dict) -> list[str]:
    """The report's "Save and train" section."""
    trained = metrics.get("training")
    if not trained:
        return []
    threshold = metrics["config"]["threshold"]

    def pct(x: float | None) -> str:
        return "–" if x is None else f"{x:.3f}"

    def yes(kept: bool) -> str:
        return "**yes**" if kept else "no"

    rows, feedback_rows = [], []
    for name, t in trained.items():
        b, a = t["before"], t["after"]
        d = t.get("with_dev_set")
        da = d["after"] if d else None
        rows.append(f"| `{name}` | {t['regime']} | {pct(b['top1'])} / {pct(b['right_at_t'])} | "
                    f"{_held(t['held_out'], 'own')} | {yes(t['kept'])} | {pct(a['top1'])} / {pct(a['right_at_t'])} | "
                    + (f"{_held(d['held_out'], 'testSets')} | {yes(d['kept'])} | {pct(da['top1'])} / "
                       f"{pct(da['right_at_t'])} | {pct(da['offtopic_rejected'])} |" if d and da else "| | | |"))
        f = t.get("with_dev_feedback")
        if f:
            fa, spaces = f["after"], f["held_out"]
            how = "; ".join(f"{s['judgedBy'] or 'nothing'}, penalty {s.get('l2', 1.0):g}, offset {s.get('offset', 0):g}"
                            for s in spaces if s.get("judgedBy")) or "–"
            coverage = "; ".join(f"{s['feedbackCoverage']:.2f}" for s in spaces if s.get("judgedBy", "").startswith(
                "feedback")) or "–"
            feedback_rows.append(
                f"| `{name}` | {t['regime']} | {f['feedback']} | {coverage} | {pct(b['top1'])} / {pct(b['right_at_t'])}"
                f" | {_held(spaces, 'testSets')} | {_held(spaces, 'feedbackOtherQnas')} | {how} | {yes(f['kept'])} | "
                f"{pct(fa['top1'])} / "
                f"{pct(fa['right_at_t'])} | {pct(b['precision'])} → {pct(fa['precision'])} | "
                f"{pct(fa['offtopic_rejected'])} |")
    return ["", "## Save and train", "",
            ("Each KB above trained as `openqna train` trains it (`kb/train_job.py`), twice. *As it is*: questions"
             " it holds are held out, a query adapter is fitted on the rest and kept only if the held-out questions'"
             f" top-1 rises by a point and two questions and right at {threshold:g} does not fall. *With its dev"
             " split as a test set*: the KB's dev questions stored as a test set, as an owner keeps one (never"
             " trained on); the job then judges by them (the same rule) and the model must not lose on its own"
             " held-out questions either. Figures are top-1 / right at t, before→after with their count, per vector"
             " space. The test split is asked again after each; where no model was kept its figures are the"
             " untrained ones."), "",
            "| set | regime | test before | own held out | kept | test after | dev set as test set | kept | test after"
            " | off-topic rejected after |",
            "| --- | --- | ---: | --- | --- | ---: | --- | --- | ---: | ---: |", *rows,
            *(["", ("*With its dev split sent as feedback*: the KB's in-scope dev questions sent as feedback records,"
                    " each with the QnA that answers it (as a bot sends its users' questions with the QnA they were"
                    " given), and no test set: the job learns from them and judges by them, each asked of models"
                    " trained without its fifth of them, which also choose the adapter's penalty where nine QnAs in"
                    " ten or more have feedback; the model kept learns from all of them and is read with the"
                    " confidence offset that gives the feedback questions back their share right at t"
                    " (`training.project`). *Cross-validated*: the feedback"
                    " questions' top-1 / right at t, without → with a model. *Without their QnA's feedback*: the"
                    " same questions in folds drawn by QnA, each asked of models that learnt nothing from its QnA's"
                    " feedback, as a QnA no user has sent feedback for is asked; unless nine in ten QnAs or more have"
                    " feedback (*coverage*), a model must not lose there. The test split asks QnAs the dev split does"
                    " not (split by QnA), so it is asked as that column is. *Precision*: of the test split's answers"
                    " at t (off-topic questions included), the share right."), "",
                "| set | regime | feedback | coverage | test before | cross-validated | without their QnA's feedback"
                " | judged by | kept | test after | precision at t | off-topic rejected after |",
                "| --- | --- | ---: | ---: | ---: | --- | --- | --- | --- | ---: | ---: | ---: |", *feedback_rows]
              if feedback_rows else [])]
