"""/v1/answers in documents mode with 200 documents, excluding the LLM.

200 SciFact abstracts (too many tokens to all fit, so they are ranked and packed) and 30
SciFact claims as questions.  The completer is a no-op, so the figure is openqna's own
work: embedding the documents (cold: first sight; warm: from the document cache),
ranking, GPT-2 token counting and packing.  Baseline in the same run: embedding the
question alone (the least any semantic answer costs).

Usage: python bench/answers.py
"""

from __future__ import annotations

import gzip
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from conftest import SHARED_DATA  # noqa: E402
from openqna.kb.answers_search import Answering, AnswersRequest
from openqna.kb.service import Service
from openqna.models.completer import Completion  # noqa: E402
from openqna.models.embedder import LocalMiniLM  # noqa: E402
from openqna.store.sqlite import SQLiteStore  # noqa: E402


class NoLLM:
    def complete(self, request):
        return Completion("cmpl-bench", "none", [""] * request.n)


def main() -> None:
    with gzip.open(SHARED_DATA / "beir-scifact" / "corpus.jsonl.gz", "rt") as f:
        docs = [json.loads(line)["text"] for _, line in zip(range(200), f)]
    claims = [json.loads(line)["text"] for line in (SHARED_DATA / "beir-scifact" / "queries.jsonl").open()][:30]
    embedder = LocalMiniLM(cache_size=0)
    with tempfile.TemporaryDirectory() as tmp:
        answering = Answering(Service(SQLiteStore(tmp), embedder), NoLLM())

        def ask(q: str) -> float:
            t = time.perf_counter()
            answering.answers(AnswersRequest(model="curie", question=q, examples=[("q", "a")], examples_context="",
                                             documents=docs, max_tokens=16))
            return (time.perf_counter() - t) * 1000

        cold = ask(claims[0])
        warm = [ask(q) for q in claims]
        floor = []
        for q in claims:
            t = time.perf_counter()
            embedder.embed([q])
            floor.append((time.perf_counter() - t) * 1000)
    p50, p99 = statistics.median(warm), sorted(warm)[-1]
    print(f"/v1/answers, documents mode, 200 documents, no LLM: cold {cold:.0f} ms (embeds all 200); "
          f"warm p50 {p50:.1f} ms, max of 30 {p99:.1f} ms; question embedding alone p50 "
          f"{statistics.median(floor):.1f} ms; warm p50 / floor {p50 / statistics.median(floor):.1f}")


if __name__ == "__main__":
    main()
