"""Save and train in the evaluation: every regime KB trained as ``openqna train`` trains it, and its test split asked
again when the job kept a model.

Runs last, after every section that asks these KBs, so the figures above it are the untrained server's.  The train
job sees only what the KB holds (its indexed questions, answers and headings); the questions the evaluation asks are
never shown to it, so the test figures after training are as held out as the ones before.  "Before" is the regime
section's own test figures; "after" asks the same test questions the same way (``Service.ask``, top ``MRR_K``,
threshold 0) once the model is in the test state.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from openqna.evaluation.regimes import MRR_K, Outcome, RegimeKB, summary
from openqna.kb.service import AskRequest, Service
from openqna.kb.train_job import Trainer


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


def evaluate(service: Service, kbs: list[RegimeKB], before: dict[str, dict[str, Any]], threshold: float) -> dict:
    """``{kb: {"regime", "kept", "seconds", "held_out": [space reports], "before": {...}, "after": {...}}}``;
    ``before``: each KB's test-split summary as the regime sections measured it."""
    trainer = Trainer(service)
    out: dict[str, dict[str, Any]] = {}
    for kb in kbs:
        result = trainer.train(kb.project)
        was = before[kb.project]
        figures = {"top1": was["top1"], "right_at_t": was["right_at_t"], "precision": was["precision"],
                   "offtopic_rejected": was["offtopic_rejected"]}
        after = dict(figures)
        if result.kept:
            s = summary(_ask_test(service, kb), threshold)
            after = {"top1": s.top1, "right_at_t": s.right_at_t, "precision": s.precision,
                     "offtopic_rejected": s.offtopic_rejected}
        out[kb.project] = {"regime": kb.regime, "kept": result.kept, "seconds": result.seconds,
                           "held_out": [asdict(space) for space in result.spaces], "before": figures,
                           "after": after}
        if result.kept:
            service.store.set_trained(kb.project, None)  # the KB answers untrained again for whatever follows
    return out


def section(metrics: dict) -> list[str]:
    """The report's "Save and train" section."""
    trained = metrics.get("training")
    if not trained:
        return []
    threshold = metrics["config"]["threshold"]

    def pct(x: float | None) -> str:
        return "–" if x is None else f"{x:.3f}"

    rows = []
    for name, t in trained.items():
        held = "; ".join(f"{s['before']['top1']:.3f}→{s['after']['top1']:.3f} / "
                         f"{s['before']['right_at_threshold']:.3f}→{s['after']['right_at_threshold']:.3f} "
                         f"({s['before']['questions']})" if s["before"]["questions"] else "none held out"
                         for s in t["held_out"])
        b, a = t["before"], t["after"]
        rows.append(f"| `{name}` | {t['regime']} | {held} | {'yes' if t['kept'] else 'no'} | {pct(b['top1'])} | "
                    f"{pct(a['top1'])} | {pct(b['right_at_t'])} | {pct(a['right_at_t'])} | "
                    f"{pct(b['offtopic_rejected'])} | {pct(a['offtopic_rejected'])} | {t['seconds']:.1f} |")
    return ["", "## Save and train", "",
            ("Each KB above trained as `openqna train` trains it (`kb/train_job.py`): questions it holds are held out,"
             " a query adapter is fitted on the rest and kept only if the held-out questions' top-1 rises by a point"
             f" and two questions and right at {threshold:g} does not fall (*held out*: top-1 / right at t before→after, with their"
             " count, per vector space). The test split is then asked again; where no model was kept the figures"
             " are the untrained ones."), "",
            f"| set | regime | held out | kept | test top-1 before | after | right at {threshold:g} before | after |"
            " off-topic rejected before | after | train s |",
            "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |", *rows]
