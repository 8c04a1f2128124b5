"""What a metadata filter does to a confidence (``regime.FILTERED_OUT``): the records it leaves out read as rivals of
the ones it keeps, a little lower, or not at all (the behaviour before), or as much as they are.

The knowledge bases are ``make eval``'s (same builders and seed): banking77 with many questions per QnA, the FAQ pages
covid-q, covid-qsim-deepset and chit-chat (professional) cut to one question, and the bundled sample.  Each record is
put in one of ``CATEGORIES`` categories by a hash of its id (a category a bot filters on that says nothing of the
question), and each question of the chosen split is asked through ``Service.ask`` (top 1) three ways:

* with the filter of its right answer's category: *right at t* and *precision* (of answers at ≥ t, the share right);
* with the filter of another category, which leaves its right answers out: *wrong filter answered*, the share still
  answered at ≥ t (every one of them wrong);
* off-topic questions with a random category's filter: *off-topic answered*.

And the three FAQ pages kept once per tenant (every QnA twice, the same questions, the answers told apart, metadata
``tenant`` a or b), asked with ``tenant = a``: what metadata is for, where the copy a filter leaves out must not take
the confidence of the one it keeps.

Usage: python scripts/filters_probe.py [--split dev|test] [--discounts inf,0,1,2]   (dev for choosing, test to report)
"""

from __future__ import annotations

import argparse
import hashlib
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

from openqna.evaluation import _fresh_service, datasets, faq, faq_regimes, tiny  # noqa: E402
from openqna.evaluation.regimes import RegimeKB  # noqa: E402
from openqna.filters.nodes import MetaEq  # noqa: E402
from openqna.kb.asking import AskRequest  # noqa: E402
from openqna.kb.service import Service  # noqa: E402
from openqna.models.embedder import get_embedder  # noqa: E402
from openqna.ranking import regime  # noqa: E402
from openqna.records import QnA  # noqa: E402

DATA = HERE.parent.parent / "shared" / "data"
SEED = 20240601
THRESHOLD = 0.5
CATEGORIES = 4


def category(record_id: int) -> str:
    return f"c{int(hashlib.sha256(str(record_id).encode()).hexdigest(), 16) % CATEGORIES}"


def first(service: Service, project: str, question: str, flt) -> tuple[int | None, float]:
    answers = [a for a in service.ask(project, "test", AskRequest(question=question, top=1, filter=flt)) if a.qna]
    return (answers[0].qna.id, answers[0].confidence) if answers else (None, 0.0)


def categorise(service: Service, kb: RegimeKB) -> None:
    """Every record of ``kb`` put in its ``category``."""
    service.upsert(kb.project, [QnA(q.questions, q.answer, id=q.id, source=q.source,
                                    metadata={**q.metadata, "category": category(q.id or 0)})
                                for q in service.store.list_qnas(kb.project)])


def categorised(service: Service, kb: RegimeKB, split: str) -> dict[str, float]:
    ids = [q.id or 0 for q in service.store.list_qnas(kb.project)]
    n = right = wrong = filtered_out = answered_anyway = off = off_answered = 0
    for q in kb.questions:
        if q.split != split:
            continue
        rng = random.Random(q.text)
        if q.gold is None:
            _, confidence = first(service, kb.project, q.text, MetaEq("category", f"c{rng.randrange(CATEGORIES)}"))
            off, off_answered = off + 1, off_answered + (confidence >= THRESHOLD)
            continue
        golds = [i for i in ids if kb.is_right(i, q.gold)]
        record, confidence = first(service, kb.project, q.text, MetaEq("category", category(golds[0])))
        ok = record is not None and kb.is_right(record, q.gold)
        n, right, wrong = n + 1, right + (ok and confidence >= THRESHOLD), wrong + (not ok and confidence >= THRESHOLD)
        others = sorted({f"c{i}" for i in range(CATEGORIES)} - {category(i) for i in golds})
        if others:
            _, confidence = first(service, kb.project, q.text, MetaEq("category", rng.choice(others)))
            filtered_out, answered_anyway = filtered_out + 1, answered_anyway + (confidence >= THRESHOLD)
    return {"right at t": right / n, "precision": right / max(right + wrong, 1),
            "wrong filter answered": answered_anyway / max(filtered_out, 1), "off-topic answered": off_answered / max(off, 1)}


def tenants(service: Service, kb: RegimeKB, split: str) -> dict[str, float]:
    qnas = service.store.list_qnas(kb.project)
    project = f"{kb.project}-tenants"
    if project not in {p.name for p in service.store.list_projects()}:
        service.create_project(project)
        service.upsert(project, [QnA(q.questions, q.answer + suffix, metadata={"tenant": tenant}, source=q.source)
                                 for tenant, suffix in (("a", ""), ("b", " (b)")) for q in qnas])
    copy = {q.answer: q.id for q in service.store.list_qnas(project) if q.metadata.get("tenant") == "a"}
    answer_of = {q.id or 0: q.answer for q in qnas}
    n = right = wrong = 0
    for q in kb.questions:
        if q.split != split or q.gold is None:
            continue
        golds = {copy[answer] for i, answer in answer_of.items() if kb.is_right(i, q.gold)}
        record, confidence = first(service, project, q.text, MetaEq("tenant", "a"))
        n, right, wrong = (n + 1, right + (record in golds and confidence >= THRESHOLD),
                           wrong + (record not in golds and confidence >= THRESHOLD))
    return {"right at t": right / n, "precision": right / max(right + wrong, 1)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--split", choices=("dev", "test"), default="dev")
    parser.add_argument("--discounts", default="inf,0,1,2", help="regime.FILTERED_OUT values, comma-separated")
    args = parser.parse_args()
    discounts = [float(x) for x in args.discounts.split(",")]
    with _fresh_service(HERE.parent / "eval", get_embedder("local")) as (service, _):
        banking, hwu = datasets.banking77(DATA), datasets.hwu64(DATA)
        intents = faq.intent_kb(service, banking, seed=SEED)
        covid = datasets.covid_q(DATA)
        asked_elsewhere = [text for text, _ in banking.test]
        kbs = [faq_regimes.many_question_kb(service, intents, faq_regimes.offtopic_sample(
                   [text for text, _ in hwu.test], 150, SEED, "filters"), SEED, "hwu64"),
               faq_regimes.real_faq_kb(service, covid, faq_regimes.offtopic_sample(covid.unanswered, 150, SEED, "f"),
                                       seed=SEED, source="covid-q"),
               faq_regimes.real_faq_kb(service, datasets.covid_qsim_deepset(DATA),
                                       faq_regimes.offtopic_sample(asked_elsewhere, 150, SEED, "d"), seed=SEED,
                                       source="banking77"),
               faq_regimes.one_question_chitchat_kb(service, DATA, "professional",
                                                    faq_regimes.offtopic_sample(asked_elsewhere, 150, SEED, "p"),
                                                    seed=SEED),
               tiny.sample_kb(service, seed=SEED)]
        print(f"split {args.split}, threshold {THRESHOLD}, {CATEGORIES} categories; per discount "
              "(regime.FILTERED_OUT; inf: the records a filter leaves out are no rivals)")
        for kb in kbs:
            categorise(service, kb)
            for d in discounts:
                regime.FILTERED_OUT = d
                figures = categorised(service, kb, args.split)
                print(f"{kb.project} at {d}: " + ", ".join(f"{k} {v:.3f}" for k, v in figures.items()), flush=True)
        for kb in kbs[1:4]:
            for d in discounts:
                regime.FILTERED_OUT = d
                figures = tenants(service, kb, args.split)
                print(f"{kb.project} kept per tenant at {d}: " + ", ".join(f"{k} {v:.3f}" for k, v in figures.items()),
                      flush=True)


if __name__ == "__main__":
    main()
