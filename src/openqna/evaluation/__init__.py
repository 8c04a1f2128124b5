"""Answer-quality evaluation on the shared public data sets (``openqna eval``).

Everything is measured through the code the server runs: a ``Service`` over a fresh
SQLite store (in a temporary directory) with the real local embedder, wrapped only by an
on-disk vector cache so reruns skip re-embedding unchanged texts.  One module per task
family: ``faq`` (top-1 and MRR@5), ``offtopic`` (rejection at the confidence threshold),
``passages`` (SciFact nDCG@10; finding a question's paragraph in English, Chinese and
Japanese), ``spans`` (EM/F1 of answer spans); ``baselines`` ranks the
same index with BM25, dense and RRF; ``report`` writes ``report.md`` and the plots.
``regimes`` asks the kinds of knowledge base users have (``faq_regimes``: many and one question per
QnA; ``documents``: imported manuals and papers with hand-written questions; ``tiny``: KBs of a dozen
or two QnAs), each with off-topic questions and a dev and a test split, and keeps every outcome;
``conversations``, ``typo_questions`` and ``long_questions`` ask the same KBs again as a second turn, misspelt,
and inside a long message; ``near_topic`` asks some of them, and intent sets without some of their intents,
questions on their subject that they hold no answer for, with ``OPENQNA_NEAR_TOPIC`` off and on.

Nothing here is fitted or tuned: the knowledge bases come from training splits, the
questions asked from test splits, and every sample is drawn with a fixed seed.  The only
thing fitted is what a deployment fits itself: each KB's adaptation (``ranking.adapt``) from
its own indexed questions; the ranker is also measured without it.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from openqna.evaluation import (
    cjk,
    cjk_report,
    conversations,
    datasets,
    faq,
    faq_regimes,
    filters,
    guard,
    long_questions,
    near_topic,
    offtopic,
    passages,
    regimes,
    report,
    space_faq,
    spans,
    tiny,
    training,
    typo_questions,
)
from openqna.evaluation.document_regimes import DOCUMENTS, document_kbs
from openqna.evaluation.embedcache import CachedEmbedder, CachedHybrid, cached
from openqna.evaluation.env import setting
from openqna.kb.catalog import open_store
from openqna.kb.service import Service
from openqna.models.embedder import Embedder, get_embedder
from openqna.ranking import ranker

SEED = 20240601
DEFAULT_THRESHOLD = 0.5


@dataclass(frozen=True)
class Plan:
    """How much of each data set to use; ``None`` means all of it."""

    intents: int | None = None
    per_intent_queries: int | None = None
    chitchat_answers: int | None = None
    scifact_queries: int | None = None
    scifact_extra_docs: int | None = None
    span_questions: dict[str, int | None] = field(default_factory=lambda: dict.fromkeys(datasets.SPAN_SETS))
    paragraphs: dict[str, int | None] = field(default_factory=lambda: dict.fromkeys(datasets.SPAN_SETS))
    # the regimes: off-topic questions per KB, per chit-chat answer asked, documents (None: all) and
    # answerable questions per document (None: all)
    regime_offtopic: int | None = 300
    tiny_offtopic: int | None = 40
    per_answer_queries: int | None = None
    documents: tuple[str, ...] | None = None
    document_questions: int | None = None
    conversation_questions: int | None = 150  # off-topic and in-scope questions per KB asked as a second turn
    faq_queries: int | None = None  # of each real FAQ page's queries (covid-q, ...), a seeded sample of this many
    faq_entries: int | None = None  # ... and of its entries, their gold entries and this many others


FULL = Plan(span_questions={"xquad-en": None, "xquad-zh": None, "jsquad": 1500})
QUICK = Plan(intents=12, per_intent_queries=3, chitchat_answers=12, scifact_queries=6, scifact_extra_docs=30,
             span_questions=dict.fromkeys(datasets.SPAN_SETS, 12), paragraphs=dict.fromkeys(datasets.SPAN_SETS, 4),
             regime_offtopic=6, tiny_offtopic=6, per_answer_queries=3,
             documents=("structured.docx", "product-manual.pdf"), document_questions=3, faq_queries=24, faq_entries=24,
             conversation_questions=6)


def run_eval(data_dir: Path, out_dir: Path, *, quick: bool = False, threshold: float = DEFAULT_THRESHOLD,
             seed: int = SEED, progress: bool = False, only: str | None = None) -> dict:
    """Run every task, write ``out_dir/report.md`` and its plots, and return all metrics.

    ``quick`` runs small seeded subsets (well under a minute, for tests); ``threshold`` is the
    confidence below which a question gets the default answer.  Vectors are cached in
    ``out_dir/.cache``; ``out_dir/metrics.json`` holds the returned dict.  ``only="cjk"`` runs the
    Chinese and Japanese part alone (``cjk`` and the CJK span sets; a few minutes warm), for work on it.
    """
    data_dir, out_dir = Path(data_dir), Path(out_dir)
    plan = QUICK if quick else FULL
    if only == CJK_ONLY:
        return _run_cjk(data_dir, out_dir, plan, quick, threshold, seed)
    if only is not None:
        raise ValueError(f"only must be None or {CJK_ONLY!r}, not {only!r}")
    started = time.perf_counter()
    timing: dict[str, float] = {}

    def step(name: str, since: float) -> None:
        timing[name] = round(time.perf_counter() - since, 1)
        if progress:
            print(f"eval: {name} done in {timing[name]:.1f} s", file=sys.stderr)

    out_dir.mkdir(parents=True, exist_ok=True)
    with _fresh_service(out_dir, get_embedder("local")) as (service, embedder):
        metrics: dict = {"config": {"quick": quick, "threshold": threshold, "seed": seed,
                                    "embedder": embedder.name, "data_dir": str(data_dir),
                                    "per_intent_questions": faq.PER_INTENT}}
        kbs, faq_results, off = _faq_and_offtopic(service, data_dir, plan, seed, threshold, step)
        banking, hwu = kbs[0], kbs[1]
        t = time.perf_counter()
        adaptations = {kb.project: adaptation_of(service, kb.project) for kb in kbs}
        with setting("OPENQNA_KB_ADAPT", "0"):  # the same ranker without each KB's own adaptation
            plain = {kb.project: faq.evaluate(service, kb, baselines=False) for kb in kbs}
            plain_off = {kb.project: offtopic.evaluate(service, kb, plain[kb.project], other, threshold)
                         for kb, other in ((banking, hwu), (hwu, banking))}
        step("without_adaptation", t)
        t = time.perf_counter()
        scifact = passages.evaluate(service, data_dir, seed=seed, queries=plan.scifact_queries,
                                    extra_docs=plan.scifact_extra_docs)
        step("passages", t)
        t = time.perf_counter()
        paragraph_results = {name: passages.paragraph_retrieval(service, data_dir, name, limit=limit)
                             for name, limit in plan.paragraphs.items()}
        step("paragraphs", t)
        t = time.perf_counter()
        span_results = {name: spans.evaluate(service, data_dir, name, seed=seed, limit=limit)
                        for name, limit in plan.span_questions.items()}
        step("spans", t)
        t = time.perf_counter()
        built = build_regimes(service, data_dir, plan, seed, kbs)
        metrics["regimes"] = ask_regimes(service, built, threshold)
        step("regimes", t)
        t = time.perf_counter()
        metrics["conversations"] = conversations.evaluate(service, built, seed=seed, threshold=threshold,
                                                          per_kb=plan.conversation_questions)
        step("conversations", t)
        if not quick:
            t = time.perf_counter()
            metrics["near_topic"] = near_topic.evaluate(service, near_topic.build(service, data_dir, built, seed=seed),
                                                        threshold=threshold)
            step("near_topic", t)
        t = time.perf_counter()
        cjk_built = cjk.build(service, data_dir, seed=seed, limit=plan.paragraphs["jsquad"])
        metrics["cjk"] = cjk.evaluate(service, cjk_built, threshold=threshold)
        step("cjk", t)
        t = time.perf_counter()
        metrics["typos"] = typo_questions.evaluate(service, built + cjk_built, seed=seed, threshold=threshold,
                                                   per_kb=plan.conversation_questions)
        step("typos", t)
        t = time.perf_counter()
        metrics["long_questions"] = long_questions.evaluate(service, built + cjk_built, seed=seed,
                                                            threshold=threshold, per_kb=plan.conversation_questions)
        step("long_questions", t)
        t = time.perf_counter()
        metrics["cjk_faq_pages"] = _faq_pages_in_space(data_dir, out_dir, plan, seed, threshold)
        step("cjk_faq_pages", t)
        t = time.perf_counter()
        before = {kb: by_split["test"] for section in (*metrics["regimes"].values(), metrics["cjk"])
                  for kb, by_split in section["summary"].items() if kb != "all"}
        metrics["training"] = training.evaluate(
            service, [kb for kb in built + cjk_built if kb.project in before], before, threshold)
        step("training", t)
        t = time.perf_counter()  # last: on copies of the KBs, which no section above reads
        metrics["filters"] = filters.evaluate(service, built, seed=seed, threshold=threshold,
                                              per_kb=plan.conversation_questions)
        step("filters", t)

    metrics["faq"] = {name: {"records": r.kb.records, "indexed_questions": r.kb.indexed_questions,
                             "queries": len(r.kb.queries), "top1": r.top1, "mrr5": r.mrr5}
                      for name, r in faq_results.items()}
    metrics["offtopic"] = {name: {**{k: v for k, v in asdict(r).items() if k != "curves"}, "top1_lost": r.top1_lost}
                           for name, r in off.items()}
    metrics["without_adaptation"] = {
        "faq": {name: {"top1": r.top1["ranker"], "mrr5": r.mrr5["ranker"]} for name, r in plain.items()},
        "offtopic": {name: {**{k: v for k, v in asdict(r).items() if k != "curves"}, "top1_lost": r.top1_lost}
                     for name, r in plain_off.items()}}
    metrics["adaptation"] = adaptations
    metrics["passages"] = {"scifact": asdict(scifact)}
    metrics["paragraphs"] = {name: asdict(r) for name, r in paragraph_results.items()}
    metrics["spans"] = {name: asdict(r) for name, r in span_results.items()}
    metrics["curves"] = {"thresholds": offtopic.THRESHOLDS.tolist(),
                         **{name: asdict(off[name].curves) if name in off else
                            asdict(offtopic.curves(r)) for name, r in faq_results.items()}}
    t = time.perf_counter()
    metrics["accurate"] = _accurate_model(data_dir, out_dir, plan, seed, threshold)
    metrics["mpnet_alone"] = _accurate_model(data_dir, out_dir, plan, seed, threshold, spec="mpnet")
    step("accurate_model", t)
    t = time.perf_counter()
    metrics["fast"] = model_on_every_set(FAST, data_dir, out_dir, plan, seed, threshold)
    step("fast_model", t)
    t = time.perf_counter()
    # mpnet over every regime, fp32 and int8, each pair: 140 s of a quick run's 190, for figures a smoke test does not read
    for (fp32_key, int8_key, fp32_spec, int8_spec, *_), name in zip(report.INT8_PAIRS,
                                                                    ("accurate_fast_model", "mpnet_fast_model")):
        if quick:
            metrics[fp32_key] = metrics[int8_key] = {"missing": "not run by a quick run"}
        else:
            metrics[fp32_key] = model_on_every_set(fp32_spec, data_dir, out_dir, plan, seed, threshold)
            metrics[int8_key] = model_on_every_set(int8_spec, data_dir, out_dir, plan, seed, threshold)
        step(name, t)
        t = time.perf_counter()
    metrics["timing"] = {**timing, "embedding_model_seconds": round(embedder.model_seconds, 1),
                         "texts_embedded": embedder.misses, "texts_from_cache": embedder.hits}
    if not quick:  # a quick run's subsets are not the report's sets: nothing to hold them against
        committed = guard.committed_figures(guard.committed_report(out_dir / "report.md") or "")
        verdict = guard.check(metrics, committed)
        metrics["guard"] = {"committed": committed, "below_floor": verdict.below_floor,
                            "regressed": verdict.regressed, "ok": verdict.ok, "message": verdict.message()}
    t = time.perf_counter()
    metrics["plots"] = report.write_plots(out_dir, metrics)
    step("plots", t)
    metrics["timing"]["total_seconds"] = round(time.perf_counter() - started, 1)
    report.write_report(out_dir, metrics)
    (out_dir / "metrics.json").write_text(json.dumps(metrics, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return metrics


def _faq_and_offtopic(service: Service, data_dir: Path, plan: Plan, seed: int, threshold: float, step):
    """The FAQ knowledge bases built in ``service``, each one's FAQ results, and the two intent KBs' off-topic results."""
    t = time.perf_counter()
    kbs = [faq.intent_kb(service, data, seed=seed, intents=plan.intents, per_intent_queries=plan.per_intent_queries)
           for data in (datasets.banking77(data_dir), datasets.hwu64(data_dir))]
    kbs += [faq.chitchat_kb(service, data_dir, p, seed=seed, answers=plan.chitchat_answers)
            for p in datasets.CHITCHAT_PERSONALITIES]
    # The questions are asked one at a time, as users ask them; embedding them in batches first only
    # fills the vector cache sooner (a batch and a single text embed alike, tests/test_embedder.py).
    service.embedder.embed([q for kb in kbs for q, _ in kb.queries])
    step("faq_build", t)
    t = time.perf_counter()
    faq_results = {kb.project: faq.evaluate(service, kb) for kb in kbs}
    step("faq", t)
    t = time.perf_counter()
    banking, hwu = kbs[0], kbs[1]
    off = {kb.project: offtopic.evaluate(service, kb, faq_results[kb.project], other, threshold)
           for kb, other in ((banking, hwu), (hwu, banking))}
    step("offtopic", t)
    return kbs, faq_results, off


def regime_results(service: Service, data_dir: Path, plan: Plan, seed: int, threshold: float,
                   faq_kbs: list[faq.KnowledgeBase]) -> dict:
    """Every regime's knowledge bases built in ``service`` and asked; summaries and per-question outcomes."""
    return ask_regimes(service, build_regimes(service, data_dir, plan, seed, faq_kbs), threshold)


def build_regimes(service: Service, data_dir: Path, plan: Plan, seed: int,
                  faq_kbs: list[faq.KnowledgeBase]) -> list[regimes.RegimeKB]:
    """Every regime's knowledge bases, built in ``service`` (``faq_kbs``: the FAQ matching KBs, built already)."""
    banking, hwu = datasets.banking77(data_dir), datasets.hwu64(data_dir)
    by_name = {kb.project: kb for kb in faq_kbs}
    asked = {name: [q for q, _ in by_name[name].queries] for name in ("banking77", "hwu64")}

    def off(source: str, salt: str, size: int | None = plan.regime_offtopic) -> list[str]:
        return faq_regimes.offtopic_sample(asked[source], size, seed, salt)

    def other(kb: str) -> str:
        return "hwu64" if kb.startswith("banking77") else "banking77"

    built: list[regimes.RegimeKB] = [faq_regimes.many_question_kb(service, kb, off(other(kb.project), kb.project),
                                                                  seed, other(kb.project)) for kb in faq_kbs]
    built += [faq_regimes.one_question_intent_kb(service, data, off(other(data.name), f"{data.name}-one"),
                                                 seed=seed, intents=plan.intents,
                                                 per_intent_queries=plan.per_intent_queries, source=other(data.name))
              for data in (banking, hwu)]
    built += [faq_regimes.one_question_chitchat_kb(service, data_dir, p, off("banking77", f"{p}-one"), seed=seed,
                                                   answers=plan.chitchat_answers,
                                                   per_answer_queries=plan.per_answer_queries, source="banking77")
              for p in datasets.CHITCHAT_PERSONALITIES]
    # FAQ pages with real answers and one question each: real users' questions (covid-q, off-topic: its questions
    # that no entry answers), annotators' paraphrases (covid-qsim-deepset) and Chinese patients' questions matched
    # to stored ones (covid-qsim-tianchi-zh, whose entries have no answer text)
    covid = datasets.covid_q(data_dir)
    built.append(faq_regimes.real_faq_kb(
        service, covid, faq_regimes.offtopic_sample(covid.unanswered, plan.regime_offtopic, seed, covid.name),
        seed=seed, source="covid-q questions no entry answers", queries=plan.faq_queries, entries=plan.faq_entries))
    built.append(faq_regimes.real_faq_kb(service, datasets.covid_qsim_deepset(data_dir),
                                         off("banking77", "covid-qsim-deepset"), seed=seed, source="banking77",
                                         queries=plan.faq_queries, entries=plan.faq_entries))
    zh_off = [q.question for q in datasets.squad(data_dir, datasets.SPAN_SETS["xquad-zh"][0])]
    tianchi = faq_regimes.real_faq_kb(
        service, datasets.covid_qsim_tianchi_zh(data_dir),
        faq_regimes.offtopic_sample(zh_off, plan.regime_offtopic, seed, "tianchi"), seed=seed,
        source="xquad-zh questions", queries=plan.faq_queries, entries=plan.faq_entries)
    tianchi.regime, tianchi.notes = faq_regimes.ONE_ZH, "no answer texts: each entry's answer is its question"
    built.append(tianchi)
    # an FAQ page whose answers say a lot: Wikipedia paragraphs, each stored with one question written about it
    # and asked the others (cjk.paragraph_kbs; the same splits as the CJK section's English FAQ KB); its questions
    # were written from the paragraph, so it is a regime of its own, not an FAQ page's
    for kb in cjk.paragraph_kbs(service, data_dir, "xquad-en", seed=seed, limit=plan.paragraphs["xquad-en"],
                                kinds=("faq",), prefix="one-question", regime=faq_regimes.PARAGRAPH_FAQ):
        kb.offtopic_source = "questions about paragraphs left out"
        built.append(kb)
    built += document_kbs(service, data_dir, seed=seed, documents=plan.documents,
                          per_document=plan.document_questions)
    built.append(tiny.sample_kb(service, seed=seed))
    built.append(tiny.faq_cut(service, covid, covid.unanswered, seed=seed, source="covid-q questions no entry answers"))
    built.append(tiny.faq_cut(service, datasets.covid_qsim_deepset(data_dir), [text for text, _ in banking.test],
                              seed=seed, source="banking77"))
    tasks = tiny.task_questions(hwu)
    built += [tiny.chitchat_cut(service, data_dir, p, size,
                                faq_regimes.offtopic_sample(tasks, plan.tiny_offtopic, seed, f"tiny-{p}"),
                                seed=seed, per_answer_queries=plan.per_answer_queries)
              for p, size in tiny.CHITCHAT_CUTS.items()]
    built.append(tiny.banking_cut(service, banking, off("hwu64", "tiny-banking77", plan.tiny_offtopic), seed=seed,
                                  per_intent_queries=plan.per_intent_queries))
    service.embedder.embed([q.text for kb in built for q in kb.questions])  # fills the cache only, as above
    return built


def ask_regimes(service: Service, built: list[regimes.RegimeKB], threshold: float) -> dict:
    """Each regime's KBs of ``built`` asked: summaries (per KB and split) and every outcome."""
    out: dict = {}
    for name in REGIMES:
        mine = [kb for kb in built if kb.regime == name]
        outcomes = [o for kb in mine for o in regimes.ask_all(service, kb)]
        out[name] = {
            "kbs": {kb.project: {"records": kb.records, "questions": len(kb.questions),
                                 "offtopic": sum(q.gold is None for q in kb.questions),
                                 "offtopic_source": kb.offtopic_source, "notes": kb.notes} for kb in mine},
            "summary": {group: {split: asdict(s) for split, s in by_split.items()}
                        for group, by_split in regimes.summaries(outcomes, threshold).items()},
            "subsets": subsets(outcomes, threshold),
            "questions": [asdict(o) for o in outcomes]}
    return out


# Questions a data set marks as written by its own author (covid-q's "author_written"), left out of a KB's subset
# of the questions real users (and other FAQ sites) asked.
AUTHOR_WRITTEN = "author_written"


def subsets(outcomes: list[regimes.Outcome], threshold: float) -> dict:
    """``{"KB, real users": {split: summary}}`` for every KB some of whose in-scope questions have an ``origin``:
    its questions without the ones its data set's author wrote (off-topic ones kept)."""
    marked = {o.kb for o in outcomes if o.origin == AUTHOR_WRITTEN}
    out = {}
    for kb in sorted(marked):
        mine = [o for o in outcomes if o.kb == kb and o.origin != AUTHOR_WRITTEN]
        out[f"{kb}, real users"] = {split: asdict(regimes.summary([o for o in mine if o.split == split], threshold))
                                    for split in regimes.SPLITS}
    return out


REGIMES = (faq_regimes.MANY, faq_regimes.ONE, faq_regimes.ONE_ZH, faq_regimes.ONE_INTENT, faq_regimes.PARAGRAPH_FAQ,
           DOCUMENTS, tiny.TINY)
CJK_ONLY = "cjk"


def _run_cjk(data_dir: Path, out_dir: Path, plan: Plan, quick: bool, threshold: float, seed: int) -> dict:
    """``run_eval(only="cjk")``: the CJK knowledge bases (and their typo'd questions) and the span sets, report.md
    with their sections only."""
    started = time.perf_counter()
    out_dir.mkdir(parents=True, exist_ok=True)
    with _fresh_service(out_dir, get_embedder("local")) as (service, embedder):
        metrics: dict = {"config": {"quick": quick, "threshold": threshold, "seed": seed,
                                    "embedder": embedder.name, "data_dir": str(data_dir), "only": CJK_ONLY}}
        cjk_built = cjk.build(service, data_dir, seed=seed, limit=plan.paragraphs["jsquad"])
        metrics["cjk"] = cjk.evaluate(service, cjk_built, threshold=threshold)
        metrics["typos"] = typo_questions.evaluate(service, cjk_built, seed=seed, threshold=threshold,
                                                   per_kb=plan.conversation_questions)
        metrics["spans"] = {name: asdict(spans.evaluate(service, data_dir, name, seed=seed, limit=limit))
                            for name, limit in plan.span_questions.items()}
    metrics["cjk_faq_pages"] = _faq_pages_in_space(data_dir, out_dir, plan, seed, threshold)
    metrics["timing"] = {"total_seconds": round(time.perf_counter() - started, 1)}
    report = cjk_report.render_only(metrics) + "\n".join(typo_questions.section(metrics)) + "\n"
    (out_dir / "report.md").write_text(report, encoding="utf-8")
    (out_dir / "metrics.json").write_text(json.dumps(metrics, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return metrics


def _faq_pages_in_space(data_dir: Path, out_dir: Path, plan: Plan, seed: int, threshold: float) -> dict:
    """``space_faq.evaluate`` in a service of its own (its KBs have the regimes' names)."""
    with _fresh_service(out_dir, get_embedder("local")) as (service, _):
        return space_faq.evaluate(service, data_dir, seed=seed, threshold=threshold, offtopic=plan.regime_offtopic,
                                  queries=plan.faq_queries, entries=plan.faq_entries, answers=plan.chitchat_answers,
                                  per_answer=plan.per_answer_queries)


ACCURATE = "accurate"


def _accurate_model(data_dir: Path, out_dir: Path, plan: Plan, seed: int, threshold: float,
                    spec: str = ACCURATE) -> dict:
    """FAQ matching and off-topic rejection again with the accurate embedder (``OPENQNA_EMBEDDER=accurate``),
    or another (``spec``: "mpnet", its transformer alone, shows what the second encoder adds).

    Its own store and calibration (``calibrations.calibration_for``); a hybrid's two encoders are cached apart, so
    mpnet's vectors serve both runs.  ``{"missing": why}`` when the model is not installed (``openqna[mpnet]``).
    """
    try:
        inner = get_embedder(spec)
    except RuntimeError as exc:
        return {"missing": str(exc)}
    started = time.perf_counter()
    with _fresh_service(out_dir, inner, multilingual=False) as (service, embedder):
        kbs, results, off = _faq_and_offtopic(service, data_dir, plan, seed, threshold, lambda *_: None)
        adaptations = {kb.project: adaptation_of(service, kb.project) for kb in kbs}
    return {"embedder": embedder.name, "setting": f"OPENQNA_EMBEDDER={spec}",
            "faq": {name: {"records": r.kb.records, "indexed_questions": r.kb.indexed_questions,
                           "queries": len(r.kb.queries), "top1": r.top1, "mrr5": r.mrr5}
                    for name, r in results.items()},
            "offtopic": {name: {**{k: v for k, v in asdict(r).items() if k != "curves"}, "top1_lost": r.top1_lost}
                         for name, r in off.items()},
            "adaptation": adaptations,
            "seconds": round(time.perf_counter() - started, 1),
            "embedding_model_seconds": round(embedder.model_seconds, 1), "texts_embedded": embedder.misses}


FAST = "fast"


def model_on_every_set(spec: str, data_dir: Path, out_dir: Path, plan: Plan, seed: int, threshold: float) -> dict:
    """Every set of the guard table again with the model ``OPENQNA_EMBEDDER=spec`` names (the int8 MiniLM, ``fast``;
    the accurate pair and its int8 mpnet, ``accurate`` and ``accurate-fast``, and mpnet alone and its int8 weights,
    ``mpnet`` and ``mpnet-fast``, side by side in the report: ``report.INT8_PAIRS``): the
    regimes and the Chinese and Japanese KBs built and asked as above, in a store of their own, with the multilingual
    space as above.

    Only for reading beside the default's figures (report.md's sections on them): the guard reads
    ``metrics["regimes"]`` and ``metrics["cjk"]``, never these.  Per set and split the summaries; no per-question
    outcomes.  Its vectors are cached under its own name (``minilm-l6-v2/onnx-int8``, say), apart from the default's.
    """
    try:
        inner = get_embedder(spec)
    except RuntimeError as exc:
        return {"missing": str(exc)}
    started = time.perf_counter()
    with _fresh_service(out_dir, inner) as (service, embedder):
        kbs = [faq.intent_kb(service, data, seed=seed, intents=plan.intents,
                             per_intent_queries=plan.per_intent_queries)
               for data in (datasets.banking77(data_dir), datasets.hwu64(data_dir))]
        kbs += [faq.chitchat_kb(service, data_dir, p, seed=seed, answers=plan.chitchat_answers)
                for p in datasets.CHITCHAT_PERSONALITIES]
        asked = ask_regimes(service, build_regimes(service, data_dir, plan, seed, kbs), threshold)
        by_cjk = cjk.evaluate(service, cjk.build(service, data_dir, seed=seed, limit=plan.paragraphs["jsquad"]),
                              threshold=threshold)

    def without_outcomes(section: dict) -> dict:
        return {k: v for k, v in section.items() if k != "questions"}

    return {"embedder": embedder.name, "setting": f"OPENQNA_EMBEDDER={spec}",
            "regimes": {name: without_outcomes(r) for name, r in asked.items()}, "cjk": without_outcomes(by_cjk),
            "seconds": round(time.perf_counter() - started, 1),
            "embedding_model_seconds": round(embedder.model_seconds, 1), "texts_embedded": embedder.misses}


@contextmanager
def _fresh_service(out_dir: Path, inner: Embedder, *,
                   multilingual: bool = True) -> Iterator[tuple[Service, CachedEmbedder | CachedHybrid]]:
    """A ``Service`` over a fresh SQLite store in a temporary folder, embedding with ``inner`` (and the multilingual
    space's encoder, unless not ``multilingual``: then the service loads the bundled one on first need) behind the
    vector cache in ``out_dir/.cache``; yields it and the cached embedder, whose counts the reports read.  The
    store and the caches are closed when the block ends."""
    cache = out_dir / ".cache" / "embeddings.sqlite3"
    embedder = cached(inner, cache)
    second = CachedEmbedder(get_embedder("multilingual"), cache) if multilingual else None
    use = CachedEmbedder(get_embedder("multilingual-use"), cache) if multilingual else None
    try:
        with tempfile.TemporaryDirectory(prefix="openqna-eval-") as tmp:
            store = open_store(tmp)
            try:
                yield Service(store, embedder, second, use), embedder
            finally:
                store.close()
    finally:
        embedder.close()
        for encoder in (second, use):
            if encoder is not None:
                encoder.close()


def adaptation_of(service: Service, project: str) -> dict | None:
    """What the KB's own adaptation (``ranking.adapt``) chose, as the ranker uses it."""
    a = ranker.kb_adaptation(service.indexes.get(project), service.shipped_calibration)
    if a is None:
        return None
    return {"held_out": a.held_out, "offset": round(a.offset, 3), "weight": a.weight,
            "top1_without": a.top1_without, "top1_with": a.top1_with}


__all__ = ["DEFAULT_THRESHOLD", "FULL", "QUICK", "SEED", "Plan", "run_eval"]
