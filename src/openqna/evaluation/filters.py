"""Filters: a metadata or source filter restricts which records answer, not what a confidence means.

The records a filter leaves out stay rivals of those it keeps in the ranker's last step, read ``regime.FILTERED_OUT``
lower (the filter is some evidence that the question is about what it keeps), except records that store a question a
kept record stores too: the same question answered for another tenant, product or audience, which is what metadata is
for.  Measured on copies of the regimes' knowledge bases (the originals are left as they are), asked with Azure's
metadata filter as ``Service.ask`` takes it:

* *categories*: each record put in one of ``CATEGORIES`` categories by a hash of its id (a category a bot filters on
  that says nothing of the question); each in-scope question asked with the filter of its right answer's category
  (right at the threshold, and the precision of the answers at it), without a filter, and with the filter of a
  category that holds none of its right answers (the share still answered at the threshold: every one wrong); the
  off-topic questions with a seeded category's filter;
* *tenants*: the one-question FAQ pages kept once per tenant (every QnA twice, the same questions, the second
  copy's answer told apart, metadata ``tenant`` a or b), each in-scope question asked with ``tenant = a``: the copy
  the filter leaves out must not take the confidence of the one it keeps (right at the threshold, against the same
  questions of the page kept once, unfiltered).

``scripts/filters_probe.py`` chose the discount on the dev splits (``--discounts`` compares others).
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

from openqna.evaluation.regimes import SPLITS, RegimeKB, by_split_and_total, first_answer
from openqna.filters.nodes import MetaEq
from openqna.kb.service import AskRequest, Service
from openqna.records import QnA

KBS = ("banking77", "covid-q", "covid-qsim-deepset", "chitchat-professional-one-question", "tiny-sample-kb")
TENANT_KBS = ("covid-q", "covid-qsim-deepset", "chitchat-professional-one-question")
CATEGORIES = 4


@dataclass
class Figures:
    inscope: int = 0
    right: int = 0  # with the filter of its right answer's category: right at the threshold
    wrong: int = 0  # ... answered at the threshold, wrong
    right_unfiltered: int = 0  # the same questions without a filter
    left_out: int = 0  # asked with a filter that leaves every right answer out
    left_out_answered: int = 0  # ... answered at the threshold all the same
    offtopic: int = 0
    offtopic_answered: int = 0
    tenant_questions: int = 0
    tenant_right: int = 0  # the page kept once per tenant, asked with a tenant's filter: right at the threshold
    tenant_wrong: int = 0
    once_right: int = 0  # the same questions of the page kept once, unfiltered


def category(record_id: int) -> str:
    """A record's category: one of ``CATEGORIES``, by a hash of its id."""
    return f"c{int(hashlib.sha256(str(record_id).encode()).hexdigest(), 16) % CATEGORIES}"


def _made(service: Service, project: str) -> bool:
    """Whether ``project`` exists already (a second run in the same service asks the copies made by the first)."""
    return any(p.name == project for p in service.store.list_projects())


def categorised_copy(service: Service, kb: RegimeKB) -> RegimeKB:
    """``kb``'s records, ids and questions in a project of their own, each record in its ``category``."""
    project = f"{kb.project}-categories"
    if _made(service, project):
        return RegimeKB(project, kb.regime, kb.records, kb.questions, kb.is_right, kb.include_unstructured)
    service.create_project(project)
    service.upsert(project, [QnA(q.questions, q.answer, id=q.id, source=q.source, kind=q.kind, dialog=q.dialog,
                                 metadata={**q.metadata, "category": category(q.id or 0)})
                             for q in service.store.list_qnas(kb.project)])
    return RegimeKB(project, kb.regime, kb.records, kb.questions, kb.is_right, kb.include_unstructured)


def tenants_copy(service: Service, kb: RegimeKB) -> RegimeKB:
    """``kb`` kept once per tenant: tenant a's records with the ids ``kb``'s have (so ``kb.is_right`` judges them),
    tenant b's after them, the same questions, each answer told apart."""
    project = f"{kb.project}-tenants"
    if _made(service, project):
        return RegimeKB(project, kb.regime, 2 * kb.records, kb.questions, kb.is_right, kb.include_unstructured)
    qnas = service.store.list_qnas(kb.project)
    service.create_project(project)
    service.upsert(project, [QnA(q.questions, q.answer, id=q.id, source=q.source, metadata={"tenant": "a"})
                             for q in qnas])
    service.upsert(project, [QnA(q.questions, q.answer + " (tenant b)", source=q.source, metadata={"tenant": "b"})
                             for q in qnas])
    return RegimeKB(project, kb.regime, 2 * kb.records, kb.questions, kb.is_right, kb.include_unstructured)


def evaluate(service: Service, kbs: list[RegimeKB], *, seed: int, threshold: float, per_kb: int | None = 150) -> dict:
    """``{kb: {split: Figures}}`` and ``"all"`` for the KBs of ``KBS`` among ``kbs`` (``per_kb``: at most this many
    in-scope and off-topic questions of each, seeded)."""
    out: dict[str, dict[str, Figures]] = {}
    for kb in (k for k in kbs if k.project in KBS):
        rng = random.Random(f"{seed}:filters:{kb.project}")
        figures = {split: Figures() for split in SPLITS}
        copy = categorised_copy(service, kb)
        tenants = tenants_copy(service, kb) if kb.project in TENANT_KBS else None
        ids = [q.id or 0 for q in service.store.list_qnas(kb.project)]
        unstructured = kb.include_unstructured

        def asked(question: str, key: str | None = None, value: str = "") -> AskRequest:
            return AskRequest(question=question, top=1, include_unstructured=unstructured,
                              filter=None if key is None else MetaEq(key, value))

        def right(found: tuple[int | None, float], gold: str) -> tuple[bool, bool]:
            """(right at the threshold, answered at it but wrong)"""
            top, confidence = found
            sure = confidence >= threshold
            ok = top is not None and kb.is_right(top, gold)
            return sure and ok, sure and not ok

        off = [q for q in kb.questions if q.gold is None]
        inscope = [q for q in kb.questions if q.gold is not None]
        for q in rng.sample(off, min(len(off), per_kb or len(off))):
            f = figures[q.split]
            f.offtopic += 1
            found = first_answer(service, copy, asked(q.text, "category", f"c{rng.randrange(CATEGORIES)}"))
            f.offtopic_answered += found[1] >= threshold
        for q in rng.sample(inscope, min(len(inscope), per_kb or len(inscope))):
            assert q.gold is not None
            f = figures[q.split]
            golds = [i for i in ids if kb.is_right(i, q.gold)]
            if not golds:
                continue
            f.inscope += 1
            ok, bad = right(first_answer(service, copy, asked(q.text, "category", category(golds[0]))), q.gold)
            f.right, f.wrong = f.right + ok, f.wrong + bad
            f.right_unfiltered += right(first_answer(service, copy, asked(q.text)), q.gold)[0]
            others = sorted({f"c{i}" for i in range(CATEGORIES)} - {category(i) for i in golds})
            if others:
                f.left_out += 1
                found = first_answer(service, copy, asked(q.text, "category", rng.choice(others)))
                f.left_out_answered += found[1] >= threshold
            if tenants is not None:
                f.tenant_questions += 1
                ok, bad = right(first_answer(service, tenants, asked(q.text, "tenant", "a")), q.gold)
                f.tenant_right, f.tenant_wrong = f.tenant_right + ok, f.tenant_wrong + bad
                f.once_right += right(first_answer(service, kb, asked(q.text)), q.gold)[0]
        out[kb.project] = figures
    return by_split_and_total(out, Figures)


def _pct(n: int, d: int) -> str:
    return "–" if not d else f"{100 * n / d:.1f}%"


def section(metrics: dict) -> list[str]:
    c = metrics.get("filters")
    if not c:
        return []
    t = metrics["config"]["threshold"]
    out = ["", "## Filters: a filter restricts the answers, not the scale", "",
           ("Copies of the regimes' knowledge bases with each record put in one of four categories at random"
            " (`evaluation/filters.py`), asked with a metadata filter, the records a filter leaves out read as rivals"
            " of those it keeps, one logit unit lower (`regime.FILTERED_OUT`), except records storing a question a"
            f" kept record stores. At t = {t:g}: *right with its filter*, the share of in-scope questions asked with"
            " the filter of their right answer's category whose top answer is right at or above t (without a filter"
            " in brackets); *precision*, of those answers at or above t, the share right; *answer left out*, the"
            " share of in-scope questions asked with a filter that leaves every right answer out that are still"
            " answered at or above t (all wrongly); *off-topic answered*, with a random category's filter;"
            " *per tenant*, the FAQ pages kept once per tenant (the same questions, metadata `tenant` a or b) asked"
            " with `tenant = a`: right at or above t (the page kept once, unfiltered, in brackets) and precision."),
           ""]
    header = ["knowledge base", "split", "right with its filter", "precision", "answer left out",
              "off-topic answered", "per tenant: right", "per tenant: precision"]
    out += ["| " + " | ".join(header) + " |", "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for kb, figures in [*c["kbs"].items(), ("all", c["all"])]:
        for split in SPLITS:
            f = figures[split]
            tenant = (f"{_pct(f['tenant_right'], f['tenant_questions'])} "
                      f"({_pct(f['once_right'], f['tenant_questions'])})") if f["tenant_questions"] else "–"
            out.append("| " + " | ".join([
                kb if kb != "all" else "**all**", split,
                f"{_pct(f['right'], f['inscope'])} ({_pct(f['right_unfiltered'], f['inscope'])}) of {f['inscope']:,}",
                _pct(f["right"], f["right"] + f["wrong"]),
                f"{_pct(f['left_out_answered'], f['left_out'])} of {f['left_out']:,}",
                f"{_pct(f['offtopic_answered'], f['offtopic'])} of {f['offtopic']:,}",
                tenant,
                _pct(f["tenant_right"], f["tenant_right"] + f["tenant_wrong"]) if f["tenant_questions"] else "–",
            ]) + " |")
    return out
