"""Fit ``RegimeTerms`` (retrieval/regime.py), the last step of the default confidence, on the regimes' dev splits.

Builds the knowledge bases of ``make eval``'s regimes (many questions per QnA, one question, documents,
tiny) as the evaluation does, asks every question through ``Service.ask`` with the terms left as the
identity, records the terms' inputs (``regime.inputs``) of each question's top answer on the KBs the
adaptation does not reach (the only ones the terms apply to), and fits a logistic regression of "the
top answer is right" on the **dev** questions only (an off-topic question's top answer is never right;
an exact match, confidence 1.0, is left out).  Each regime weighs the same in the fit, so the 109
document questions count as much as the 3,637 one-question ones.  Prints the ``RegimeTerms`` and each
regime's dev figures at 0.5 before and after, on those KBs.

Usage: python scripts/fit_regimes.py [DATA_DIR]   (~1 min with a warm eval/.cache)
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression

from openqna.catalog import open_store
from openqna.evaluation import FULL, SEED, datasets, faq, regime_results
from openqna.evaluation.embedcache import CachedEmbedder
from openqna.models.embedder import get_embedder
from openqna.retrieval import calibrations, regime
from openqna.service import Service

NAMES = ("logit", "gap", "passage", "heading")
THRESHOLD = 0.5


def collect(data_dir: Path) -> list[tuple[str, dict, dict[str, float]]]:
    """(regime, outcome, top answer's inputs) of every question asked of a KB the terms apply to."""
    captured: list[dict[str, float] | None] = []
    inputs = regime.inputs

    def capture(logit, allowed, *args):
        x = inputs(logit, allowed, *args)
        top = int(np.argmax(np.where(allowed, logit, -np.inf)))
        captured[-1] = {k: float(v[top]) for k, v in x.items()}
        return x

    ask = Service.ask

    def asking(self, *args, **kw):
        captured.append(None)
        return ask(self, *args, **kw)

    identity = dataclasses.replace(calibrations.CALIBRATION, regime=regime.RegimeTerms())
    regime.inputs = capture  # type: ignore[assignment]
    Service.ask = asking  # type: ignore[method-assign]
    Service.shipped_calibration = property(lambda self: identity)  # type: ignore[assignment,method-assign]
    embedder = CachedEmbedder(get_embedder("local"), Path("eval") / ".cache" / "embeddings.sqlite3")
    with tempfile.TemporaryDirectory(prefix="openqna-fit-regimes-") as tmp:
        store = open_store(tmp)
        service = Service(store, embedder)
        kbs = [faq.intent_kb(service, data, seed=SEED) for data in (datasets.banking77(data_dir),
                                                                     datasets.hwu64(data_dir))]
        kbs += [faq.chitchat_kb(service, data_dir, p, seed=SEED) for p in datasets.CHITCHAT_PERSONALITIES]
        results = regime_results(service, data_dir, FULL, SEED, THRESHOLD, kbs)
        store.close()
    embedder.close()
    outcomes = [(name, o) for name, r in results.items() for o in r["questions"]]
    assert len(outcomes) == len(captured), (len(outcomes), len(captured))
    return [(name, o, x) for (name, o), x in zip(outcomes, captured) if x is not None]


def figures(rows: list[tuple[dict, float]]) -> str:
    answered = [(o, p) for o, p in rows if p >= THRESHOLD]
    right = [o for o, _ in rows if o["right"]]
    off = [o for o, _ in rows if o["gold"] is None]
    precision = sum(o["right"] for o, _ in answered) / max(len(answered), 1)
    recall = sum(1 for o, p in rows if o["right"] and p >= THRESHOLD) / max(len(right), 1)
    rejected = sum(1 for o, p in rows if o["gold"] is None and p < THRESHOLD) / max(len(off), 1)
    return f"precision {precision:.3f} recall {recall:.3f} off-topic rejected {rejected:.3f}"


def main() -> None:
    data_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("../shared/data")
    found = [(name, o, x) for name, o, x in collect(data_dir) if o["split"] == "dev" and o["confidence"] < 1.0]
    X = np.asarray([[x[k] for k in NAMES] for _, _, x in found])
    y = np.asarray([o["right"] for _, o, _ in found])
    names = [name for name, _, _ in found]
    regimes = list(dict.fromkeys(names))
    weight = np.asarray([len(found) / len(regimes) / names.count(n) for n in names])  # each regime weighs the same
    model = LogisticRegression(C=1.0, max_iter=1000).fit(X, y, sample_weight=weight)
    w = dict(zip(NAMES, model.coef_[0].round(3).tolist()))
    terms = regime.RegimeTerms(w_logit=w["logit"], w_gap=w["gap"], w_passage=w["passage"], w_heading=w["heading"],
                               bias=round(float(model.intercept_[0]), 3))
    print(terms)
    after = model.predict_proba(X)[:, 1]
    before = 1.0 / (1.0 + np.exp(-X[:, 0]))
    for name in regimes:
        mine = [i for i, n in enumerate(names) if n == name]
        print(f"{name} dev ({len(mine)}): before {figures([(found[i][1], before[i]) for i in mine])}")
        print(f"{' ' * len(name)}       after  {figures([(found[i][1], after[i]) for i in mine])}")


if __name__ == "__main__":
    main()
