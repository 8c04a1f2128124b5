"""Research probe: what per-knowledge-base fine-tuning of the default encoder would add (dev data only).

SetFit-style: all-MiniLM-L6-v2 (the bundled sentence-transformers folder, in torch) is fine-tuned on one
development KB's own questions with an in-batch contrastive loss (each question against another question
of its QnA, the batch's other QnAs as negatives), then the KB is indexed again with the tuned model and
its development questions are ranked by the shipped ranker, with and without the KB's adaptation
(``ranking.adapt``).  The KBs and questions are ``scripts/ranker_features.py``'s development ones: no
test split is read.  Off-topic development questions are asked too, at the shipped threshold (0.5), to
show what tuning does to the confidence: the adaptation's held-out questions were trained on, so the
KB's typical score it measures is optimistic.

Nothing here is served; it measures a direction (see the closing notes of issue 4).

With ``--test`` the same is measured on the evaluation's test KBs and questions (``make eval``'s), to report
how far the settings chosen on development data carry; never use it to choose them.  With ``--accurate``
the model is ``OPENQNA_EMBEDDER=accurate``: its all-mpnet-base-v2 half is tuned, the universal sentence encoder
beside it is kept, and both runs rank with the accurate model's calibration.

Usage: python scripts/kb_finetune_probe.py [--test] [--accurate] KB [EPOCHS] [LR]   (KB: banking77, hwu64, chitchat-professional, ...)
Needs the dev extra (sentence-transformers, torch).  MiniLM on banking77 takes about 40 s an epoch on 2 cores.
"""

from __future__ import annotations

import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ranker_features  # noqa: E402

from openqna.evaluation.embedcache import cached  # noqa: E402
from openqna.index.analyze import analyze
from openqna.kb.service import Service
from openqna.models.embedder import HybridEncoder, get_embedder  # noqa: E402
from openqna.models.onnx_export import bundled_model_dir, mpnet_model_dir  # noqa: E402
from openqna.ranking import adapt, calibrations, ranker
from openqna.records import QnA  # noqa: E402
from openqna.store.sqlite import SQLiteStore  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BATCH = 32
TEMPERATURE = 20.0


class Tuned:
    """The fine-tuned model as an openqna embedder (its own vector-space name)."""

    name = "kb-tuned"
    reads_cjk = False

    def __init__(self, model: SentenceTransformer) -> None:
        self.model = model
        # sentence-transformers 6 renamed the method; the dev extra allows >= 3
        dimension = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        self.dim = dimension()

    def embed(self, texts):
        with torch.no_grad():
            return self.model.encode(list(texts), batch_size=64, normalize_embeddings=True,
                                     convert_to_numpy=True).astype(np.float32)

    def close(self) -> None:
        pass


def measure(label: str, embedder, c: calibrations.Calibration, records, asked, n_in: int, project: str) -> None:
    """Index ``records`` with ``embedder`` and rank the questions ``asked`` (answer text or None) with ``c``."""
    service = Service(SQLiteStore(tempfile.mkdtemp()), embedder)
    service.create_project(project)
    service.upsert(project, [QnA(list(r.questions), r.answer, source="probe") for r in records])
    index = service.indexes.get(project)
    row_of = {r.answer: index.row_of[r.id] for r in service.store.list_qnas(project)}
    a = adapt.fit(index, lambda *x: ranker._held_out_logits(c, *x))
    vectors = embedder.embed([t for t, _ in asked])
    everything = np.ones(index.n, bool)
    dense = plain = adapted = rejected = kept = 0
    for i, ((text, answer), v) in enumerate(zip(asked, vectors)):
        f = ranker.features(index, analyze(text), v, everything, [])
        logit = c.logit(f)
        extra = a.logit(v, f.rows) if a is not None else None
        full = logit if extra is None else logit + extra
        confidence = ranker.sigmoid(c.scale * (full.max() - (a.offset if a else c.typical)) + c.shift)
        if i < n_in:
            gold = row_of[answer]
            dense += int(f.rows[f.qsim.argmax()] == gold)
            plain += int(f.rows[logit.argmax()] == gold)
            right = f.rows[full.argmax()] == gold
            adapted += int(right)
            kept += int(right and confidence >= 0.5)
        else:
            rejected += int(confidence < 0.5)
    off = len(asked) - n_in
    print(f"{label}: dense {dense / n_in:.3f}, ranker {plain / n_in:.3f}, adapted {adapted / n_in:.3f} "
          f"(classifier weight {a.weight if a else '-'}, typical score {a.offset if a else c.typical:.2f}); "
          f"at 0.5: top-1 lost {(adapted - kept) / n_in:.3f}, off-topic rejected {rejected / max(off, 1):.3f}",
          flush=True)


def tune(model: SentenceTransformer, records, epochs: int, lr: float) -> None:
    by_record = {r.id: list(r.questions) for r in records if len(r.questions) >= 2}
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    for epoch in range(epochs):
        start = time.time()
        pairs = [(q, random.choice([p for p in qs if p != q] or qs), rid) for rid, qs in by_record.items() for q in qs]
        random.shuffle(pairs)
        for i in range(0, len(pairs), BATCH):
            batch = pairs[i:i + BATCH]
            ids = torch.tensor([rid for *_, rid in batch])
            a = torch.nn.functional.normalize(model(model.tokenize([x for x, _, _ in batch]))["sentence_embedding"], dim=-1)
            b = torch.nn.functional.normalize(model(model.tokenize([y for _, y, _ in batch]))["sentence_embedding"], dim=-1)
            scores = TEMPERATURE * a @ b.T
            same = (ids[:, None] == ids[None, :]) & ~torch.eye(len(batch), dtype=torch.bool)
            loss = torch.nn.functional.cross_entropy(scores.masked_fill(same, -1e4), torch.arange(len(batch)))
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
        print(f"epoch {epoch + 1}: {len(pairs)} pairs, loss {loss.item():.3f}, {time.time() - start:.0f} s", flush=True)
    model.eval()


def main(kb: str, epochs: int, lr: float, test: bool, accurate: bool) -> None:
    random.seed(0)
    torch.manual_seed(0)
    base = cached(get_embedder("accurate" if accurate else "local"), ROOT / "eval" / ".cache" / "embeddings.sqlite3")
    c = calibrations.calibration_for(base.name)
    service = Service(SQLiteStore(tempfile.mkdtemp()), base)
    kbs = ranker_features.build(service, base, test=test)
    project = kb + ("-dev" if kb.startswith("chitchat") and not test else "")
    records = service.store.list_qnas(project)
    answer_of = {kbs[kb]["index"].row_of[r.id]: r.answer for r in records}
    asked = [(t, None if g is None else answer_of[g]) for t, g in kbs[kb]["asked"]]
    n_in = kbs[kb]["n_in"]
    measure(f"shipped {base.name}", base, c, records, asked, n_in, project)
    model = SentenceTransformer(str(mpnet_model_dir() if accurate else bundled_model_dir()), device="cpu")
    tune(model, records, epochs, lr)
    tuned = HybridEncoder(Tuned(model), base.b, base.weight) if accurate else Tuned(model)
    measure(f"tuned on the KB ({epochs} epochs, lr {lr:g})", tuned, c, records, asked, n_in, project)
    base.close()


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    main(args[0], int(args[1]) if len(args) > 1 else 3, float(args[2]) if len(args) > 2 else 3e-5,
         "--test" in sys.argv, "--accurate" in sys.argv)
