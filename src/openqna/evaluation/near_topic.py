"""Near-topic questions: questions on a knowledge base's subject that none of its records answers.

Off-topic rejection elsewhere in the report asks questions from another data set (banking questions of an assistant's
KB), which a KB turns away easily.  Users also ask about what the KB is about but does not hold ("how much does openqna
cost?" of openqna's FAQ, a banking question of a bank's FAQ that lacks that topic), and on KBs of alike records those
stand as clear of the rest as right answers do.  Asked here, with ``OPENQNA_NEAR_TOPIC`` off (the default) and at
``SHARES`` (``ranking.adapt.near_margin``: each adapted KB reads its confidences lower until at most that share of its
own held-out questions, asked without their record, gets an answer at 0.5):

* the bundled sample KB (``tiny.sample_kb``): its paraphrases, its 40 near-topic questions and its 20 off-topic ones;
* the tiny banking77 cut (``tiny.banking_cut``): its intents' test questions, hwu64's, and ``NEAR`` seeded test
  questions of banking77's other intents;
* banking77 and hwu64 with ``HELD_OUT`` seeded intents left out of the KB (``held_out_kb``, built as ``faq.intent_kb``
  builds the whole sets): ``INSCOPE`` seeded test questions of the intents kept, every test question of those left
  out (near-topic), and ``FAR`` of the other set's (hwu64's tasks, ``tiny.task_questions``).

Nothing is fitted on these questions, so the figures count all of them (no dev and test splits).  An answer is counted
at the threshold when its confidence is at least it; *precision* is the share of those answers that are right (a
near-topic or off-topic question answered is wrong).
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass

from openqna.evaluation import datasets
from openqna.evaluation.document_regimes import QUESTIONS, read_questions
from openqna.evaluation.env import setting
from openqna.evaluation.faq import PER_INTENT
from openqna.evaluation.faq_regimes import answers_of, by_answer
from openqna.evaluation.regimes import Question, RegimeKB, first_answer
from openqna.evaluation.tiny import SAMPLE, TINY, task_questions
from openqna.kb.service import AskRequest, Service
from openqna.ranking import ranker
from openqna.records import QnA

SHARES = (None, 0.2, 0.1)  # OPENQNA_NEAR_TOPIC's settings asked (None: off, the default)
NEAR = 300  # near-topic questions asked of the tiny banking77 cut
HELD_OUT = 10  # intents left out of banking77 and hwu64
INSCOPE = 400  # in-scope questions asked of those
FAR = 200  # off-topic questions asked of those


@dataclass
class Figures:
    margin: float = 0.0  # logit units the KB's confidences are read lower (``Adaptation.margin``)
    held_out_answered: float | None = None  # the KB's held-out questions without their record answered at 0.5 (None: off)
    inscope: int = 0
    top1: int = 0
    right: int = 0  # in-scope questions answered right at the threshold
    wrong: int = 0  # ... answered wrong at it
    near: int = 0
    near_answered: int = 0  # near-topic questions answered at the threshold
    far: int = 0
    far_answered: int = 0

    @property
    def precision(self) -> float:
        answered = self.right + self.wrong + self.near_answered + self.far_answered
        return self.right / answered if answered else 1.0


def held_out_kb(service: Service, data: datasets.IntentData, offtopic: list[str], offtopic_source: str, *,
                seed: int) -> tuple[RegimeKB, set[str]]:
    """``data``'s KB without ``HELD_OUT`` seeded intents, its questions (``FAR`` of them of ``offtopic``), and the
    texts of the near-topic ones."""
    project = f"near-{data.name}"
    rng = random.Random(f"{seed}:{project}")
    labels = list(data.train)
    left_out = set(rng.sample(labels, HELD_OUT))
    kept = [label for label in labels if label not in left_out]
    service.create_project(project)
    service.upsert(project, [QnA(rng.sample(data.train[label], min(PER_INTENT, len(data.train[label]))),
                                 datasets.humanise(label), source=data.name) for label in kept])
    inscope = [Question(text, datasets.humanise(label)) for text, label in data.test if label not in left_out]
    near = [Question(text, None) for text, label in data.test if label in left_out]
    far = [Question(text, None) for text in offtopic]
    questions = rng.sample(inscope, min(INSCOPE, len(inscope))) + near + rng.sample(far, min(FAR, len(far)))
    kb = RegimeKB(project, "near-topic", len(kept), questions, by_answer(answers_of(service, project)),
                  notes=f"{data.name} without {HELD_OUT} intents", offtopic_source=offtopic_source)
    return kb, {q.text for q in near}


def build(service: Service, data_dir, built: list[RegimeKB], *, seed: int) -> list[tuple[RegimeKB, set[str]]]:
    """The KBs asked (see the module docstring), each with the texts of its near-topic questions."""
    out: list[tuple[RegimeKB, set[str]]] = []
    banking, hwu = datasets.banking77(data_dir), datasets.hwu64(data_dir)
    by_project = {kb.project: kb for kb in built}
    if SAMPLE in by_project:
        near = {q.question for q in read_questions(QUESTIONS / "sample-kb-near.tsv")}
        out.append((by_project[SAMPLE], near))
    cut = by_project.get("tiny-banking77")
    if cut is not None:
        kept = set(answers_of(service, cut.project).values())
        others = [Question(text, None) for text, label in banking.test if datasets.humanise(label) not in kept]
        others = random.Random(f"{seed}:near:{cut.project}").sample(others, min(NEAR, len(others)))
        out.append((RegimeKB(cut.project, TINY, cut.records, cut.questions + others, cut.is_right),
                    {q.text for q in others}))
    out.append(held_out_kb(service, banking, task_questions(hwu), "hwu64 tasks", seed=seed))
    out.append(held_out_kb(service, hwu, [text for text, _ in banking.test], banking.name, seed=seed))
    return out


def evaluate(service: Service, kbs: list[tuple[RegimeKB, set[str]]], *, threshold: float) -> dict:
    """``{kb: {share: Figures}}`` (share "off" or the setting's value), and ``"all"`` summed over the KBs."""
    out: dict[str, dict[str, dict]] = {}
    for kb, near in kbs:
        per: dict[str, dict] = {}
        for share in SHARES:
            label = "off" if share is None else f"{share:g}"
            with setting("OPENQNA_NEAR_TOPIC", "" if share is None else str(share)):
                f = Figures()
                a = ranker.kb_adaptation(service.indexes.get(kb.project, "test"), service.shipped_calibration)
                if a is not None and share is not None:
                    f.margin, f.held_out_answered = a.margin, a.near_rate_after
                for q in kb.questions:
                    top, confidence = first_answer(service, kb, AskRequest(question=q.text, top=1))
                    at = confidence >= threshold
                    if q.gold is not None:
                        ok = top is not None and kb.is_right(top, q.gold)
                        f.inscope += 1
                        f.top1 += ok
                        f.right += ok and at
                        f.wrong += (not ok) and at
                    elif q.text in near:
                        f.near += 1
                        f.near_answered += at
                    else:
                        f.far += 1
                        f.far_answered += at
            per[label] = {**asdict(f), "precision": f.precision}
        out[kb.project] = per
    return out


def _share(n: int, d: int) -> str:
    return "–" if not d else f"{n / d:.3f}"


def section(metrics: dict) -> list[str]:
    figures = metrics.get("near_topic")
    if not figures:
        return []
    t = metrics["config"]["threshold"]
    out = ["", "## Near-topic questions: what the KB is about but does not hold", "",
           ("Questions on a KB's subject that none of its records answers (`evaluation/near_topic.py`): the sample KB's"
            " near-topic questions, banking77's other intents asked of the tiny banking77 cut, and banking77 and hwu64"
            f" each without {HELD_OUT} of their intents, asked those intents' questions; with `OPENQNA_NEAR_TOPIC` off"
            " (the default) and at each share (each adapted KB reads its confidences lower by *margin* logit units,"
            " as little as keeps that share of its own held-out questions, asked without their record, under 0.5;"
            " *held out answered* is that share as read). All questions count (nothing is fitted on them); at"
            f" t = {t:g}, *precision* is the share of answers that are right, a near-topic or off-topic question"
            " answered counting as wrong."), ""]
    header = ["knowledge base", "OPENQNA_NEAR_TOPIC", "margin", "held out answered", "in-scope", "top-1",
              f"right at {t:g}", "near-topic", f"near-topic answered at {t:g}", "off-topic",
              f"off-topic answered at {t:g}", f"precision at {t:g}"]
    rows = []
    for kb, per in figures.items():
        for label, f in per.items():
            rows.append([kb, label, f"{f['margin']:g}",
                         "–" if f["held_out_answered"] is None else f"{f['held_out_answered']:.3f}", str(f["inscope"]),
                         _share(f["top1"], f["inscope"]), _share(f["right"], f["inscope"]), str(f["near"]),
                         _share(f["near_answered"], f["near"]), str(f["far"]), _share(f["far_answered"], f["far"]),
                         f"{f['precision']:.3f}"])
    out += ["| " + " | ".join(header) + " |", "| --- | --- | " + " | ".join(["---:"] * (len(header) - 2)) + " |"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out
