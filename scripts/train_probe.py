"""Research probe for ``openqna train`` (issue 42): what a KB's query adapter (``training.adapter``) does to the full
ranker, per FAQ regime, and whether a held-out gate inside the job would decide as the dev (or test) split does.

The knowledge bases and questions are ``make eval``'s (``evaluation.build_regimes``' FAQ regimes, same seed):
many questions (banking77, hwu64, chit-chat), one question FAQ pages (chit-chat one question, covid-q,
covid-qsim-deepset) and Chinese (covid-qsim-tianchi-zh, ranked in the multilingual space).  Every question goes
through ``Service.ask`` (top 1, threshold 0), first as shipped, then with the question's vector mapped by an adapter
trained on the KB's own content only (never on the questions asked) and the KB's adaptation (``ranking.adapt``)
refitted, optionally with its held-out questions' vectors mapped too.

The gate: a seeded sample of the KB's stored questions (the adaptation's own held-out units on a KB with alternate
questions; on an FAQ page, ``GATE_SHARE`` of its QnAs' questions) is left out of the adapter's training, then asked
of the index without its own unit, with the ranker's weights, before and after; the model is kept when it wins.

Usage: python scripts/train_probe.py [--test] [--cache PATH] [--kbs a,b] [--recipes NAME,...]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from openqna.evaluation import DEFAULT_THRESHOLD, SEED, datasets, faq, faq_regimes
from openqna.evaluation.embedcache import CachedEmbedder, cached
from openqna.evaluation.regimes import RegimeKB
from openqna.index.memindex import MemIndex
from openqna.kb.service import AskRequest, Service
from openqna.models.embedder import get_embedder
from openqna.ranking import adapt, calibrations, ranker
from openqna.ranking.calibrations import Calibration
from openqna.records import QnA
from openqna.store.sqlite import SQLiteStore
from openqna.training import adapter

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
GATE_SHARE = 0.2  # of an FAQ page's questions held out for the gate
GATE_MIN, GATE_MAX = 20, 300
ADAPT_KEY = "ranking.adapt.classifier=True"  # what ``ranker`` caches the KB's adaptation under (``adapt.of``)


@dataclass(frozen=True)
class Recipe:
    name: str
    # a: alternate questions of records with 2+ questions; b: an FAQ page's question -> its record (its own question
    # left out, so its answer alone); B: every question -> its answer, among the answers only
    kinds: str = "ab"
    epochs: int = adapter.EPOCHS
    l2: float = adapter.L2
    learning_rate: float = adapter.LEARNING_RATE
    temperature: float = adapter.TEMPERATURE
    map_held_out: bool = True  # the adaptation's held-out questions mapped as the asked ones are
    final_all: bool = False  # ship a model trained on every question (else: without the gate's held-out ones)
    # accepted feedback (kind d), simulated by the dev split's in-scope questions (so only with --test): three in four
    # are trained on, and the fourth is the gate, asked through ``Service.ask``
    feedback: bool = False
    by_record: bool = False  # the gate's fourth is a fourth of the QnAs the feedback asks (else of the questions)
    pool: int = 0  # feedback from every QnA instead: this many unstored training utterances per intent (intent sets)


RECIPES = {r.name: r for r in (
    Recipe("default"),
    Recipe("no-map", map_held_out=False),
    Recipe("all", final_all=True),
    Recipe("a-only", kinds="a"), Recipe("B", kinds="B"),
    Recipe("ep4", epochs=4), Recipe("ep16", epochs=16), Recipe("ep30", epochs=30),
    Recipe("l2-1e-3", l2=1e-3), Recipe("l2-1e-1", l2=1e-1), Recipe("l2-1", l2=1.0),
    Recipe("lr3e-3", learning_rate=3e-3), Recipe("lr1e-2", learning_rate=1e-2),
    Recipe("t10", temperature=10.0), Recipe("t30", temperature=30.0),
    Recipe("fb", feedback=True), Recipe("fb-only", kinds="", feedback=True),
    Recipe("fb-rec", feedback=True, by_record=True), Recipe("pool5", feedback=True, pool=5),
    Recipe("pool5-l2-0.1", feedback=True, pool=5, l2=0.1), Recipe("pool5-l2-1", feedback=True, pool=5, l2=1.0), Recipe("fb-l2-1", feedback=True, l2=1.0),
    Recipe("fb-l2-0.1", feedback=True, l2=0.1), Recipe("fb-rec-l2-0.1", feedback=True, by_record=True, l2=0.1),
)}


@dataclass
class Figures:
    top1: float
    right_at: float
    rejected: float  # off-topic questions under the threshold
    inscope: int


@dataclass
class Row:
    kb: str
    regime: str
    recipe: str
    before: Figures
    after: Figures
    train_seconds: float
    examples: int
    gate_before: float = float("nan")
    gate_after: float = float("nan")
    gate_n: int = 0
    extra: dict = field(default_factory=dict)


class Mapped:
    """An embedder whose vectors are mapped by an adapter: the question's vector as the server would map it."""

    def __init__(self, inner, mapping: adapter.QueryAdapter) -> None:
        self.inner, self.mapping = inner, mapping
        self.name, self.dim = inner.name, inner.dim
        self.reads_cjk = getattr(inner, "reads_cjk", True)

    def embed(self, texts):
        return self.mapping.apply(self.inner.embed(texts))


def build(service: Service, *, full: bool = True) -> list[RegimeKB]:
    """The FAQ regimes' KBs, as ``evaluation.build_regimes`` builds them (``full``: and banking77 with every training
    utterance stored)."""
    seed, off_n = SEED, 300
    banking, hwu = datasets.banking77(DATA), datasets.hwu64(DATA)
    faq_kbs = [faq.intent_kb(service, d, seed=seed) for d in (banking, hwu)]
    faq_kbs += [faq.chitchat_kb(service, DATA, p, seed=seed) for p in datasets.CHITCHAT_PERSONALITIES]
    asked = {kb.project: [q for q, _ in kb.queries] for kb in faq_kbs[:2]}

    def off(source: str, salt: str) -> list[str]:
        return faq_regimes.offtopic_sample(asked[source], off_n, seed, salt)

    def other(kb: str) -> str:
        return "hwu64" if kb.startswith("banking77") else "banking77"

    built = [faq_regimes.many_question_kb(service, kb, off(other(kb.project), kb.project), seed, other(kb.project))
             for kb in faq_kbs]
    built += [faq_regimes.one_question_chitchat_kb(service, DATA, p, off("banking77", f"{p}-one"), seed=seed,
                                                   source="banking77") for p in datasets.CHITCHAT_PERSONALITIES]
    covid = datasets.covid_q(DATA)
    built.append(faq_regimes.real_faq_kb(service, covid, faq_regimes.offtopic_sample(covid.unanswered, off_n, seed,
                                                                                      covid.name),
                                         seed=seed, source="covid-q unanswered"))
    built.append(faq_regimes.real_faq_kb(service, datasets.covid_qsim_deepset(DATA), off("banking77",
                                                                                         "covid-qsim-deepset"),
                                         seed=seed, source="banking77"))
    zh_off = [q.question for q in datasets.squad(DATA, datasets.SPAN_SETS["xquad-zh"][0])]
    tianchi = faq_regimes.real_faq_kb(service, datasets.covid_qsim_tianchi_zh(DATA),
                                      faq_regimes.offtopic_sample(zh_off, off_n, seed, "tianchi"), seed=seed,
                                      source="xquad-zh questions")
    tianchi.regime = faq_regimes.ONE_ZH
    built.append(tianchi)
    if full:
        built.append(full_intent_kb(service, banking, built[0]))
    return built


def build_one(service: Service, project: str) -> RegimeKB:
    """One FAQ page of ``build`` (covid-q or covid-qsim-deepset), built alone: the same records, questions and splits."""
    banking = datasets.banking77(DATA)
    if project == "covid-q":
        covid = datasets.covid_q(DATA)
        return faq_regimes.real_faq_kb(service, covid, faq_regimes.offtopic_sample(covid.unanswered, 300, SEED,
                                                                                   covid.name),
                                       seed=SEED, source="covid-q unanswered")
    if project == "covid-qsim-deepset":
        asked = [text for text, _ in banking.test]
        return faq_regimes.real_faq_kb(service, datasets.covid_qsim_deepset(DATA),
                                       faq_regimes.offtopic_sample(asked, 300, SEED, "covid-qsim-deepset"),
                                       seed=SEED, source="banking77")
    raise ValueError(f"build_one builds covid-q and covid-qsim-deepset, not {project}")


def full_intent_kb(service: Service, data: datasets.IntentData, asked: RegimeKB) -> RegimeKB:
    """``data`` with every training utterance as a question (banking77: 10,003; too many questions × records for the
    KB adaptation's classifier), asked what ``asked`` (its many-question KB) is asked, in the same splits."""
    project = f"{data.name}-full"
    service.create_project(project)
    service.upsert(project, [QnA(list(utterances), datasets.humanise(label), source=data.name)
                             for label, utterances in data.train.items()])
    return RegimeKB(project, faq_regimes.MANY, len(data.train), asked.questions,
                    faq_regimes.by_answer(faq_regimes.answers_of(service, project)), notes="every training utterance")


def ask(service: Service, kb: RegimeKB, split: str, only: set[str] | None = None) -> Figures:
    right = right_at = rejected = inscope = off = 0
    for q in kb.questions:
        if q.split != split or (only is not None and q.text not in only):
            continue
        answers = service.ask(kb.project, "test", AskRequest(question=q.text, top=1, threshold=0.0))
        first = answers[0] if answers and answers[0].qna is not None else None
        confidence = first.confidence if first else 0.0
        if q.gold is None:
            off += 1
            rejected += confidence < DEFAULT_THRESHOLD
            continue
        inscope += 1
        ok = first is not None and first.qna.id is not None and kb.is_right(first.qna.id, q.gold)
        right += ok
        right_at += ok and confidence >= DEFAULT_THRESHOLD
    return Figures(right / max(inscope, 1), right_at / max(inscope, 1), rejected / max(off, 1), inscope)


def gate_units(index: MemIndex, seed: int = 0) -> np.ndarray:
    """The stored questions the job holds out: the adaptation's own (alternate questions) when it has enough, else a
    seeded ``GATE_SHARE`` of the QnAs' questions (an FAQ page: each then asked of its QnA's answer alone)."""
    units = adapt.held_out_units(index)
    if len(units) >= adapt.MIN_HELD_OUT:
        return units
    q = index.q
    every = adapt.canonical_units(index)
    every = every[~index.passage[q.rows[every]]]
    n = min(GATE_MAX, max(GATE_MIN, round(GATE_SHARE * len(every))), len(every) // 2)
    return np.sort(every[np.random.default_rng(seed).choice(len(every), n, replace=False)]).astype(np.int64)


def held_out_top1(index: MemIndex, c: Calibration, V: np.ndarray, units: np.ndarray) -> float:
    """Top-1 of stored questions ``units`` (vectors ``V``) asked of the index without their own unit, read with the
    weights the ranker reads the KB with (an FAQ page's own, ``ranker.weights``)."""
    w = ranker.weights(index, c)
    informative = ranker.answer_informativeness(index) if w is not c else 0.0
    terms = adapt.unit_terms(index, units)
    hits = 0
    for i in range(0, len(units), 50):
        f = SimpleNamespace(**adapt.held_out_features(index, V[i:i + 50], terms[i:i + 50], units[i:i + 50]))
        logit = np.where(index.passage[None, :], -np.inf, w.logit(f, False, informative))
        hits += int((logit.argmax(axis=1) == index.q.rows[units[i:i + 50]]).sum())
    return hits / max(len(units), 1)


def training_set(index: MemIndex, kinds: str, leave_out: np.ndarray) -> tuple[adapter.Examples, np.ndarray, np.ndarray]:
    """Examples of kinds ``kinds`` from the index's questions (not ``leave_out``), its units and their records."""
    q, a = index.q, index.a
    many = q.counts[q.rows] >= 2
    pick = ~index.passage[q.rows] & ((many & ("a" in kinds)) | (~many & ("b" in kinds)))
    pick[leave_out] = False
    us = np.flatnonzero(pick)
    units = np.concatenate([q.matrix, a.matrix]).astype(np.float32)
    unit_records = np.concatenate([q.rows, a.rows]).astype(np.int64)
    if "B" in kinds:  # answers only (the probe's variant: one fit, so no mixing with "a"'s units)
        pick = ~index.passage[q.rows]
        pick[leave_out] = False
        us = np.flatnonzero(pick)
        return adapter.Examples(q.matrix[us], q.rows[us].astype(np.int64), np.full(len(us), -1, np.int64)), \
            a.matrix.astype(np.float32), a.rows.astype(np.int64)
    return adapter.Examples(q.matrix[us], q.rows[us].astype(np.int64), us.astype(np.int64)), units, unit_records


def feedback_examples(service: Service, kb: RegimeKB, index: MemIndex, inner, by_record: bool,
                      pool: int = 0) -> tuple[adapter.Examples, set[str]]:
    """The dev split's in-scope questions as accepted feedback: three in four as examples, and the held-out fourth
    (``by_record``: the questions of a fourth of the QnAs asked).  ``pool``: instead, that many training utterances of
    every intent that the KB does not store (banking77 and hwu64 only), so that feedback reaches every QnA."""
    if pool:
        data = {"banking77": datasets.banking77, "hwu64": datasets.hwu64}[kb.project](DATA)
        stored = {t for r in service.store.list_qnas(kb.project) for t in r.questions}
        rng = random.Random(f"{SEED}:{kb.project}:pool")
        found = {t: datasets.humanise(label) for label, utterances in data.train.items()
                 for t in rng.sample([u for u in utterances if u not in stored], pool)}
        asked = sorted(found.items(), key=lambda item: hash_of(item[0]))
    else:
        asked = sorted({q.text: q.gold for q in kb.questions if q.split == "dev" and q.gold is not None}.items(),
                       key=lambda item: hash_of(item[0]))
    if by_record:
        golds = sorted({g for _, g in asked}, key=hash_of)
        held_golds = {g for i, g in enumerate(golds) if i % 4 == 0}
        held = {text for text, g in asked if g in held_golds}
    else:
        held = {text for i, (text, _) in enumerate(asked) if i % 4 == 0}
    rows: dict[str, int] = {}
    for text, gold in asked:
        if gold not in rows:
            rows[gold] = next(r for r in range(index.n) if kb.is_right(int(index.ids[r]), gold))
    train_on = [(t, g) for t, g in asked if t not in held]
    vectors = inner.embed([t for t, _ in train_on]) if train_on else np.zeros((0, index.q.dim), np.float32)
    examples = adapter.Examples(vectors.astype(np.float32), np.array([rows[g] for _, g in train_on], np.int64),
                                np.full(len(train_on), -1, np.int64))
    examples.gold = dict(asked)  # type: ignore[attr-defined]  # the probe's gate reads it
    return examples, held


def gate_top1(service: Service, kb: RegimeKB, held: set[str], fb: adapter.Examples) -> float:
    """Top-1 through ``Service.ask`` of the held-out feedback questions ``held``."""
    gold = getattr(fb, "gold", {})
    right = 0
    for text in held:
        answers = service.ask(kb.project, "test", AskRequest(question=text, top=1, threshold=0.0))
        first = answers[0].qna if answers else None
        right += first is not None and first.id is not None and kb.is_right(first.id, gold[text])
    return right / max(len(held), 1)


def hash_of(text: str) -> str:
    import hashlib
    return hashlib.sha256(text.encode()).hexdigest()


def train(index: MemIndex, r: Recipe, leave_out: np.ndarray, space: str,
          extra: adapter.Examples | None = None) -> tuple[adapter.QueryAdapter, float, int]:
    examples, units, unit_records = training_set(index, r.kinds, leave_out)
    if extra is not None:
        examples = adapter.Examples(np.concatenate([examples.queries, extra.queries]),
                                    np.concatenate([examples.targets, extra.targets]),
                                    np.concatenate([examples.self_units, extra.self_units]))
    start = time.perf_counter()
    model = adapter.fit(examples, units, unit_records, index.n, space, epochs=r.epochs, l2=r.l2,
                        learning_rate=r.learning_rate, temperature=r.temperature)
    return model, time.perf_counter() - start, len(examples.targets)


def refit_adaptation(index: MemIndex, c: Calibration, mapping: adapter.QueryAdapter | None) -> None:
    """Drop the cached adaptation of ``index`` and fit it again, its held-out questions mapped by ``mapping``."""
    state = index.__dict__.setdefault("_derived", {})
    state[ADAPT_KEY] = adapt.fit(index, lambda *a: ranker._held_out_logits(c, *a),
                                 query_map=None if mapping is None else mapping.apply)


def probe(service: Service, kb: RegimeKB, recipes: list[Recipe], split: str) -> list[Row]:
    zh = kb.regime == faq_regimes.ONE_ZH
    index = service.indexes.get(kb.project, "test")
    c = service.calibration(service.store.get_project(kb.project))
    if zh:
        view = index.multilingual()
        assert view is not None, "the Chinese KB has no multilingual space"
        index, c = view, calibrations.MULTILINGUAL
    inner = service.multilingual.embedder if zh else service.embedder
    before = ask(service, kb, split)
    gate = gate_units(index)
    gate_before = held_out_top1(index, c, index.q.matrix[gate], gate)
    rows = []
    for r in recipes:
        fb_gate, g_before = None, gate_before
        if r.feedback:
            assert split == "test" or r.pool, "feedback is simulated with the dev questions: report on --test"
            fb, held = feedback_examples(service, kb, index, inner, r.by_record, r.pool)
            model, seconds, n = train(index, r, np.zeros(0, np.int64), inner.name, fb)
            fb_gate = (gate_top1(service, kb, held, fb), held)
        else:
            model, seconds, n = train(index, r, gate, inner.name)
            g_after = held_out_top1(index, c, model.apply(index.q.matrix[gate]), gate) if n else gate_before
            if r.final_all:
                model, seconds, n = train(index, r, np.zeros(0, np.int64), inner.name)
        refit_adaptation(index, c, model if r.map_held_out else None)
        mapped = Mapped(inner, model)
        if zh:
            service.multilingual._embedder = mapped
        else:
            service.embedder = mapped
        try:
            after = ask(service, kb, split)
            if fb_gate is not None:
                g_before, g_after = fb_gate[0], gate_top1(service, kb, fb_gate[1], fb)
        finally:
            if zh:
                service.multilingual._embedder = inner
            else:
                service.embedder = inner
            index.__dict__["_derived"].pop(ADAPT_KEY, None)
        a = index.__dict__["_derived"].get(ADAPT_KEY)
        row = Row(kb.project, kb.regime, r.name, before, after, seconds, n, g_before, g_after,
                  len(gate) if fb_gate is None else len(fb_gate[1]),
                  {"norm": float(np.linalg.norm(model.matrix)), "adapt": a is not None})
        rows.append(row)
        print(line(row), flush=True)
    return rows


def line(r: Row) -> str:
    b, a = r.before, r.after
    return (f"| {r.kb} | {r.recipe} | {b.inscope} | {b.top1:.3f} | {a.top1:.3f} | {a.top1 - b.top1:+.3f} | "
            f"{b.right_at:.3f} | {a.right_at:.3f} | {a.right_at - b.right_at:+.3f} | {b.rejected:.3f} | "
            f"{a.rejected:.3f} | {r.gate_n} | {r.gate_before:.3f} | {r.gate_after:.3f} | {r.examples} | "
            f"{r.train_seconds:.1f} |")


HEADER = ("| KB | recipe | in-scope | top-1 before | after | Δ | right@0.5 before | after | Δ | off-topic rejected "
          "before | after | gate n | gate before | gate after | examples | train s |\n|" + "---|" * 17)


def finetune(service: Service, kb: RegimeKB, split: str, epochs: int, lr: float = 3e-5) -> None:
    """The older alternative, measured beside the adapter: MiniLM itself fine-tuned (SetFit-style in-batch contrastive,
    ``kb_finetune_probe.tune``'s loss) on the KB's own pairs: each question with another question of its QnA, or with
    its answer when it is the QnA's only one; then the KBs built again with the tuned model and asked the same."""
    import torch
    from kb_finetune_probe import BATCH, TEMPERATURE, Tuned
    from sentence_transformers import SentenceTransformer

    from openqna.models.onnx_export import bundled_model_dir

    random.seed(0)
    torch.manual_seed(0)
    records = service.store.list_qnas(kb.project)
    model = SentenceTransformer(str(bundled_model_dir()), device="cpu")
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr)
    start = time.perf_counter()
    model.train()
    for _ in range(epochs):
        pairs = [(q, random.choice([p for p in r.questions if p != q]) if len(r.questions) > 1 else r.answer, r.id)
                 for r in records for q in r.questions]
        random.shuffle(pairs)
        for i in range(0, len(pairs), BATCH):
            batch = pairs[i:i + BATCH]
            ids = torch.tensor([rid for *_, rid in batch])
            a = torch.nn.functional.normalize(model(model.tokenize([x for x, _, _ in batch]))["sentence_embedding"],
                                              dim=-1)
            b = torch.nn.functional.normalize(model(model.tokenize([y for _, y, _ in batch]))["sentence_embedding"],
                                              dim=-1)
            same = (ids[:, None] == ids[None, :]) & ~torch.eye(len(batch), dtype=torch.bool)
            loss = torch.nn.functional.cross_entropy((TEMPERATURE * a @ b.T).masked_fill(same, -1e4),
                                                     torch.arange(len(batch)))
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
    model.eval()
    seconds = time.perf_counter() - start
    tuned = Service(SQLiteStore(tempfile.mkdtemp(prefix="train-probe-tuned-")), Tuned(model),
                    service.multilingual.embedder)
    again = build_one(tuned, kb.project)
    before, after = ask(service, kb, split), ask(tuned, again, split)
    row = Row(kb.project, kb.regime, f"fine-tune {epochs} ep", before, after, seconds, len(records))
    print(line(row), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--test", action="store_true", help="report the test split (never choose on it)")
    parser.add_argument("--cache", type=Path, default=ROOT / "eval" / ".cache" / "embeddings.sqlite3")
    parser.add_argument("--kbs", default="", help="comma-separated project names (default: all)")
    parser.add_argument("--recipes", default="default", help=f"comma-separated, of {', '.join(RECIPES)}")
    parser.add_argument("--finetune", type=int, default=0, help="also fine-tune MiniLM this many epochs")
    parser.add_argument("--set", default="", help="override the recipes' fields: epochs=16,l2=0.1")
    args = parser.parse_args()
    recipes = [RECIPES[n] for n in args.recipes.split(",") if n]
    for item in filter(None, args.set.split(",")):
        key, value = item.split("=")
        kind = type(getattr(recipes[0], key))
        recipes = [replace(r, name=f"{r.name}+{item}", **{key: (value == "True") if kind is bool else kind(value)})
                   for r in recipes]
    embedder = cached(get_embedder(), args.cache)
    multilingual = CachedEmbedder(get_embedder("multilingual"), args.cache)
    service = Service(SQLiteStore(tempfile.mkdtemp(prefix="train-probe-")), embedder, multilingual)
    kbs = build(service)
    wanted = set(filter(None, args.kbs.split(",")))
    print(HEADER, flush=True)
    for kb in kbs:
        if not wanted or kb.project in wanted:
            if args.recipes:
                probe(service, kb, recipes, "test" if args.test else "dev")
            if args.finetune:
                finetune(service, kb, "test" if args.test else "dev", args.finetune)
    embedder.close()
    multilingual.close()


if __name__ == "__main__":
    sys.exit(main())
