"""Ask ``make eval``'s regimes with the model in ``OPENQNA_EMBEDDER`` and print each set's test figures.

Builds the regimes' knowledge bases exactly as ``openqna eval`` does (the full plan, its seed), ranks with the
calibration shipped for that model (``calibrations.calibration_for``), and prints, per set of the guard table, the
test split's top-1, right at 0.5, precision at 0.5 and off-topic rejected, beside the best single signal of the same
model's vectors.  For measuring another embedding model against the committed ``eval/report.md`` (the default's);
nothing is fitted here.  The dev split's figures are printed too: a choice between fits is made on them.

Usage: OPENQNA_EMBEDDER=balanced python scripts/regimes_for_embedder.py [DATA_DIR] [--json OUT]
(vectors cached in eval/.cache; about 6 minutes cold for the balanced model on two cores)
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from openqna.evaluation import FULL, SEED, ask_regimes, build_regimes, datasets, faq, guard
from openqna.evaluation.embedcache import CachedEmbedder, cached
from openqna.kb.catalog import open_store
from openqna.kb.service import Service
from openqna.models.embedder import get_embedder

ROOT = Path(__file__).resolve().parents[1]
THRESHOLD = 0.5


def main(argv: list[str]) -> None:
    out = Path(argv[argv.index("--json") + 1]) if "--json" in argv else None
    rest = [a for i, a in enumerate(argv) if a != "--json" and (i == 0 or argv[i - 1] != "--json")]
    data = Path(rest[0]) if rest else ROOT.parent / "shared" / "data"
    cache = ROOT / "eval" / ".cache"
    cache.mkdir(parents=True, exist_ok=True)
    embedder = cached(get_embedder(), cache / "embeddings.sqlite3")  # a hybrid's two encoders cached apart
    multilingual = CachedEmbedder(get_embedder("multilingual"), cache / "embeddings.sqlite3")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="openqna-regimes-") as tmp:
        store = open_store(tmp)
        try:
            service = Service(store, embedder, multilingual)
            kbs = [faq.intent_kb(service, d, seed=SEED) for d in (datasets.banking77(data), datasets.hwu64(data))]
            kbs += [faq.chitchat_kb(service, data, p, seed=SEED) for p in datasets.CHITCHAT_PERSONALITIES]
            metrics = {"regimes": ask_regimes(service, build_regimes(service, data, FULL, SEED, kbs), THRESHOLD)}
        finally:
            store.close()
    embedder.close()
    multilingual.close()
    tests = {kb: splits["test"] for r in metrics["regimes"].values()
             for kb, splits in (r["summary"] | r.get("subsets", {})).items()}
    devs = {kb: splits["dev"] for r in metrics["regimes"].values()
            for kb, splits in (r["summary"] | r.get("subsets", {})).items()}
    print(f"embedder {embedder.name}; test splits at t = {THRESHOLD}")
    print("| set | regime | top-1 | right at t | precision at t | off-topic rejected | best signal | floor met "
          "| dev: top-1 / right at t / precision at t (best signal) |")
    print("|---|---|---:|---:|---:|---:|---:|---|---:|")
    for s in guard.sets_of(metrics):
        name, best = s.best_signal
        t = tests[s.name]
        print(f"| `{s.name}` | {s.regime} | {s.top1:.3f} | {s.right_at_t:.3f} | {t.get('precision') or 0:.3f} | "
              f"{t.get('offtopic_rejected') or 0:.3f} | {best:.3f} ({name}) | {'yes' if s.floor_met else '**no**'} | "
              f"{dev_figures(devs.get(s.name, {}))} |")
    print(f"{time.perf_counter() - started:.0f} s", file=sys.stderr)
    if out is not None:
        out.write_text(json.dumps({"embedder": embedder.name, "tests": tests, "devs": devs}, indent=1, ensure_ascii=False) + "\n")


def dev_figures(d: dict) -> str:
    """The dev split's top-1, right at t and precision at t (what a choice between fits may look at)."""
    if not d.get("inscope"):
        return "–"
    signals = d.get("signals") or {}
    best = max(signals, key=signals.get) if signals else None
    return (f"{d['top1']:.3f} / {d.get('right_at_t') or 0:.3f} / {d.get('precision') or 0:.3f}"
            + (f" (best signal {signals[best]:.3f}, {best})" if best else ""))


if __name__ == "__main__":
    main(sys.argv[1:])
