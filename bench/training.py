"""Save and train (``openqna train``): what training costs, and what a trained model costs a question.

* Training time of the train job (``kb/train_job.py``: reading the live records, the held-out split, fitting the
  adapter, the ranker's verdict before and after) on two knowledge bases of real banking77 utterances: banking77's
  77 intents with all 10,003 training utterances as their questions, and a 1,000-QnA FAQ of one question each (an
  utterance, its answer another utterance), the second again with 2,000 more utterances sent as users' feedback
  (each tied to a QnA; what is measured is what judging by them costs: embedding them, and the cross-validation's
  fits, ``training.project.feedback_folds``).  Baseline: embedding the same KB's texts (its questions and answers)
  with the model, what importing it costs, measured in the same run.
* A question's p50/p99 against a knowledge base with a trained model and against the same content without one
  (the default), both through ``Service.ask`` with the real model embedding each question (no cache), 400 hwu64 and
  banking77 test questions, the two projects alternating.  The model is the job's when it kept one, else an adapter
  fitted the same way and stored anyway, so the serving cost is measured either way.
* Memory: the model's bytes, and the process's RSS before and after the trained model is loaded.

Usage: python bench/training.py   (writes nothing; prints a small table)
"""

from __future__ import annotations

import csv
import resource
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import corpus  # noqa: E402
import numpy as np  # noqa: E402

from openqna.evaluation.datasets import humanise  # noqa: E402
from openqna.kb.service import AskRequest, Service  # noqa: E402
from openqna.kb.train_job import Trainer  # noqa: E402
from openqna.models.embedder import LocalMiniLM  # noqa: E402
from openqna.records import QnA  # noqa: E402
from openqna.store.sqlite import SQLiteStore  # noqa: E402
from openqna.training.adapter import fit  # noqa: E402
from openqna.training.model import TrainedModel  # noqa: E402
from openqna.training.project import examples  # noqa: E402

QUESTIONS = 400
FAQ_QNAS = 1000
FEEDBACK = 2000
FED = f"FAQ ({FAQ_QNAS:,} QnAs) with {FEEDBACK:,} users' questions as feedback"


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    import tempfile

    model = LocalMiniLM(cache_size=0, max_batch=1)
    texts, vectors, queries, _ = corpus.real_data(model)
    with open(corpus.SHARED_DATA / "banking77" / "train.csv", newline="", encoding="utf-8") as f:
        rows = [(r["text"].strip(), r["category"]) for r in csv.DictReader(f) if r["text"].strip()]
    intents: dict[str, list[str]] = {}
    for text, label in rows:
        intents.setdefault(label, []).append(text)
    answers = [humanise(label) for label in intents]
    lookup = corpus.LookupEmbedder(model.name, texts, vectors)
    lookup.add(answers, model.embed(answers))
    faq = [QnA([texts[i]], texts[i + FAQ_QNAS]) for i in range(FAQ_QNAS)]
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "data")
        writer = Service(store, lookup)
        asker = Service(store, model)
        kbs = {"banking77 (77 QnAs, 10,003 questions)": [QnA(list(dict.fromkeys(qs)), humanise(label))
                                                          for label, qs in intents.items()],
               f"FAQ ({FAQ_QNAS:,} QnAs, one question each)": faq,
               FED: faq}
        print("| knowledge base | embedding its texts (baseline) s | training s | kept | held-out top-1 before -> after |")
        print("|---|---|---|---|---|")
        for i, (name, qnas) in enumerate(kbs.items()):
            project = f"kb{i}"
            writer.create_project(project)
            writer.upsert(project, qnas)
            kb_texts = [t for q in qnas for t in [*q.questions, q.answer]]
            t = time.perf_counter()
            for start in range(0, len(kb_texts), 64):
                model.embed(kb_texts[start:start + 64])
            write_s = time.perf_counter() - t
            if name == FED:  # users' questions: other utterances, each tied to a QnA (its cost, not its labels)
                fed = texts[2 * FAQ_QNAS:2 * FAQ_QNAS + FEEDBACK]
                ids = [q.id for q in store.list_qnas(project)]
                store.add_feedback(project, [(ids[i % len(ids)], text, "bench") for i, text in enumerate(fed)])
            result = Trainer(asker).train(project)
            s = result.spaces[0]
            b, a = (s.test_sets_before, s.test_sets_after) if s.judged_by.startswith("feedback") else (s.before, s.after)
            print(f"| {name} | {write_s:.1f} | {result.seconds:.1f} ({result.seconds / write_s:.2f}x) | "
                  f"{'yes' if result.kept else 'no'} | {b.top1:.3f} -> {a.top1:.3f} "
                  f"({b.questions} questions{', cross-validated' if b is s.test_sets_before else ''}) |")

        # serving: kb0's content again as "trained", with a model stored whatever the job decided
        writer.create_project("trained")
        writer.upsert("trained", kbs["banking77 (77 QnAs, 10,003 questions)"])
        trained = store.get_trained("kb0")
        if trained is None:
            index = asker.indexes.get("trained")
            train, units, unit_records = examples(index, [])
            blob = TrainedModel({model.name: fit(train, units, unit_records, index.n, model.name)}).to_bytes()
        else:
            blob = trained.data
        store.set_trained("trained", blob)
        asked = queries[:: max(1, len(queries) // QUESTIONS)][:QUESTIONS]
        for project in ("kb0", "trained"):
            asker.ask(project, "test", AskRequest(question="warm up"))
        before_rss = rss_mb()
        ms: dict[str, list[float]] = {"kb0": [], "trained": []}
        for i, q in enumerate(asked):
            for project in (("kb0", "trained") if i % 2 == 0 else ("trained", "kb0")):
                t = time.perf_counter()
                asker.ask(project, "test", AskRequest(question=q))
                ms[project].append((time.perf_counter() - t) * 1000)
        base50 = corpus.pct(ms["kb0"], 50)
        model_bytes = TrainedModel.from_bytes(blob).nbytes
        print()
        print("| banking77 asked | question p50 / p99 ms |")
        print("|---|---|")
        print(f"| without a trained model (the default) | {base50:.1f} / {corpus.pct(ms['kb0'], 99):.1f} |")
        print(f"| with one | {corpus.pct(ms['trained'], 50):.1f} / {corpus.pct(ms['trained'], 99):.1f} "
              f"({corpus.pct(ms['trained'], 50) / base50:.2f}x the p50) |")
        print(f"trained model: {model_bytes / 1e6:.2f} MB in memory ({len(blob) / 1e6:.2f} MB stored); process "
              f"max RSS {before_rss:.0f} MB before asking, {rss_mb():.0f} MB after; {len(asked)} questions, "
              f"median of each project's, alternating; models in memory "
              f"{asker.trained.loaded_bytes / 1e6:.2f} MB")
        store.close()
    assert np.isfinite(base50)


if __name__ == "__main__":
    main()
