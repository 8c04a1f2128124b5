"""Fit ``calibrations.QUERY_TEXT``, the confidence of Azure's :query-text (``Service.answer_from_text``).

:query-text ranks the passages (``service.passages_of``) of up to five ad-hoc records by their cosine with the
question and the share of the question's words they hold.  Data: XQuAD's English questions whose paragraph
falls in the dev half (a hash of the paragraph: no test paragraph is seen), each asked of five records as a
caller sends them: its own paragraph and four other dev paragraphs, or (every other question, as an
off-topic call) five other paragraphs.  A passage is right when it holds the gold answer.  Two logistic
regressions of right-or-not: on cosine and word share (``QUERY_TEXT``), and on word share alone (its
``lexical`` part, for what the embedder cannot read).

Usage: python scripts/fit_query_text.py [DATA_DIR] [--write]   (~1 min)
"""

from __future__ import annotations

import hashlib
import random
import sys
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression

from openqna.evaluation import SEED, datasets
from openqna.evaluation.embedcache import CachedEmbedder
from openqna.index.analyze import analyze
from openqna.kb.service import passages_of
from openqna.models.embedder import get_embedder
from openqna.ranking import calibrations
from openqna.ranking.calibrations import Calibration

RECORDS = 5


def dev_questions(data_dir: Path) -> list[datasets.SpanQuestion]:
    questions = datasets.squad(data_dir, datasets.SPAN_SETS["xquad-en"][0])
    return [q for q in questions if int(hashlib.sha256(f"{SEED}:{q.context}".encode()).hexdigest(), 16) % 2 == 0]


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "--write"]
    data_dir = Path(args[0]) if args else Path("../shared/data")
    questions = dev_questions(data_dir)
    paragraphs = list(dict.fromkeys(q.context for q in questions))
    pieces = {p: [p[s:e] for s, e in passages_of(p)] for p in paragraphs}
    embedder = CachedEmbedder(get_embedder("local"), Path("eval") / ".cache" / "embeddings.sqlite3")
    texts = list(dict.fromkeys(t for p in paragraphs for t in pieces[p]))
    vectors = dict(zip(texts, embedder.embed(texts)))
    asked = embedder.embed([q.question for q in questions])
    embedder.close()
    rows, labels = [], []
    for n, (q, qv) in enumerate(zip(questions, asked)):
        rng = random.Random(f"{SEED}:{q.id}")
        others = rng.sample([p for p in paragraphs if p != q.context], RECORDS - (n % 2 == 0))
        q_terms = set(analyze(q.question, bigrams=False))
        for p in ([q.context] if n % 2 == 0 else []) + others:
            for text in pieces[p]:
                overlap = len(q_terms & set(analyze(text, bigrams=False))) / max(len(q_terms), 1)
                rows.append((float(vectors[text] @ qv), overlap))
                labels.append(p == q.context and any(a in text for a in q.answers))
    X, y = np.asarray(rows), np.asarray(labels)
    print(f"{len(questions)} dev questions, {len(paragraphs)} paragraphs, {len(y)} passages, {y.sum()} right")
    full = LogisticRegression(C=1.0, max_iter=1000).fit(X, y)
    lexical = LogisticRegression(C=1.0, max_iter=1000).fit(X[:, 1:], y)
    print(f"full: w_qsim={full.coef_[0][0]:.3f} w_qcov={full.coef_[0][1]:.3f} bias={full.intercept_[0]:.3f}")
    print(f"lexical: w_qcov={lexical.coef_[0][0]:.3f} bias={lexical.intercept_[0]:.3f}")
    p = full.predict_proba(X)[:, 1]
    print(f"at 0.5: precision {y[p >= 0.5].mean():.3f} recall {(p[y] >= 0.5).mean():.3f}")
    fit = Calibration(w_qsim=round(float(full.coef_[0][0]), 3), w_qcov=round(float(full.coef_[0][1]), 3),
                      bias=round(float(full.intercept_[0]), 3),
                      lexical=Calibration(w_qcov=round(float(lexical.coef_[0][0]), 3),
                                          bias=round(float(lexical.intercept_[0]), 3)), context_boost=1.0)
    print(fit)
    if "--write" in sys.argv[1:]:
        calibrations.save("QUERY_TEXT", fit, fitted_by="scripts/fit_query_text.py")
        print(f"QUERY_TEXT written to {calibrations.DATA_FILE}")


if __name__ == "__main__":
    main()
