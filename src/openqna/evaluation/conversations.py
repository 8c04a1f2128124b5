"""Conversations: what the context of a previous turn (Azure's ``context``, QnA Maker's) does to a confidence.

Each knowledge base of the regimes is asked again, as the second turn of a conversation whose first turn was
answered by a seeded-random QnA of it (``previousQnaId`` that QnA, ``previousUserQuery`` its first question; a QnA
with follow-up prompts when the KB has any, as after an answer that shows prompts):

* *off-topic follow-ups*: the KB's off-topic questions (the regime's, in the regime's splits). The context must
  add evidence, never confidence from nothing: the share answered at or above the threshold is the figure
  (``followup.capped``; target: at most 5%);
* *prompts*: every follow-up prompt's display text, asked after its QnA: the share whose first answer is the
  prompt's target at or above the threshold (target: all);
* *in-scope, topic switch*: the KB's in-scope questions after an unrelated turn: right at the threshold with the
  context against without it (the context must not cost a question its answer).

Both surfaces build the same request from a context (``api.azure.runtime.question_and_context``), so these figures are
Azure's and QnA Maker's alike.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from openqna.evaluation.regimes import SPLITS, RegimeKB, by_split_and_total, first_answer
from openqna.kb.service import AskRequest, Service

KBS = ("tiny-sample-kb", "banking77", "covid-q", "covid-qsim-deepset", "chitchat-professional-one-question",
       "doc-multi-turn", "doc-multiturn-contosobenefits", "doc-product-manual")


@dataclass
class Figures:
    offtopic: int = 0
    offtopic_answered: int = 0  # at or above the threshold, with the context
    offtopic_answered_alone: int = 0  # ... the same questions without it
    prompts: int = 0
    prompts_right: int = 0
    inscope: int = 0
    inscope_right: int = 0  # right at the threshold, with an unrelated previous turn
    inscope_right_alone: int = 0


def evaluate(service: Service, kbs: list[RegimeKB], *, seed: int, threshold: float,
             per_kb: int | None = 150) -> dict:
    """``{kb: {split: Figures}}`` and ``"all"`` for the KBs of ``KBS`` among ``kbs`` (``per_kb``: at most this
    many off-topic and in-scope questions of each, seeded)."""
    out: dict[str, dict[str, Figures]] = {}
    for kb in (k for k in kbs if k.project in KBS):
        rng = random.Random(f"{seed}:conversation:{kb.project}")
        qnas = [q for q in service.store.list_qnas(kb.project) if q.kind == "qna" and q.questions]
        with_prompts = [q for q in qnas if q.dialog.prompts]
        openers = with_prompts or qnas
        figures = {split: Figures() for split in SPLITS}
        unstructured = kb.include_unstructured

        def asked(question: str, previous=None) -> AskRequest:
            return AskRequest(question=question, top=1, include_unstructured=unstructured,
                              previous_qna_id=None if previous is None else previous.id,
                              previous_user_query=None if previous is None else previous.questions[0])

        off = [q for q in kb.questions if q.gold is None]
        inscope = [q for q in kb.questions if q.gold is not None]
        for q in rng.sample(off, min(len(off), per_kb or len(off))):
            f = figures[q.split]
            f.offtopic += 1
            f.offtopic_answered += first_answer(service, kb, asked(q.text, rng.choice(openers)))[1] >= threshold
            f.offtopic_answered_alone += first_answer(service, kb, asked(q.text))[1] >= threshold
        for q in rng.sample(inscope, min(len(inscope), per_kb or len(inscope))):
            f = figures[q.split]
            f.inscope += 1
            top, confidence = first_answer(service, kb, asked(q.text, rng.choice(openers)))
            f.inscope_right += top is not None and confidence >= threshold and kb.is_right(top, q.gold)
            top, confidence = first_answer(service, kb, asked(q.text))
            f.inscope_right_alone += top is not None and confidence >= threshold and kb.is_right(top, q.gold)
        for parent in with_prompts:  # prompts are the author's, in neither split: counted in both
            for p in parent.dialog.prompts:
                top, confidence = first_answer(service, kb, asked(p.display_text, parent))
                for split in SPLITS:
                    figures[split].prompts += 1
                    figures[split].prompts_right += top == p.qna_id and confidence >= threshold
        out[kb.project] = figures
    return by_split_and_total(out, Figures)


def _pct(n: int, d: int) -> str:
    return "–" if not d else f"{100 * n / d:.1f}% of {d:,}"


def section(metrics: dict) -> list[str]:
    c = metrics.get("conversations")
    if not c:
        return []
    t = metrics["config"]["threshold"]
    out = ["", "## Conversations: context adds evidence, never confidence from nothing", "",
           ("Each knowledge base asked again as the second turn of a conversation: `previousQnaId` a seeded-random"
            " QnA (one with follow-up prompts where the KB has any) and `previousUserQuery` its first question"
            f" (`evaluation/conversations.py`). At t = {t:g}: *off-topic answered*, the share of the KB's off-topic"
            " questions answered at or above t with the context (without it in brackets; target ≤ 5%); *prompts*,"
            " the share of follow-up prompts whose display text, asked after its QnA, gets the prompt's target at"
            " or above t (target: all); *in-scope right*, the share of in-scope questions answered right at or"
            " above t after an unrelated turn (without it in brackets)."), ""]
    rows = []
    for kb, figures in [*c["kbs"].items(), ("all", c["all"])]:
        for split in SPLITS:
            f = figures[split]
            rows.append([kb if kb != "all" else "**all**", split,
                         f"{_pct(f['offtopic_answered'], f['offtopic'])} ({_pct(f['offtopic_answered_alone'], f['offtopic']).split(' of')[0]})",
                         _pct(f["prompts_right"], f["prompts"]),
                         f"{_pct(f['inscope_right'], f['inscope'])} ({_pct(f['inscope_right_alone'], f['inscope']).split(' of')[0]})"])
    header = ["knowledge base", "split", "off-topic answered", "prompts", "in-scope right"]
    out += ["| " + " | ".join(header) + " |", "| --- | --- | ---: | ---: | ---: |"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out
