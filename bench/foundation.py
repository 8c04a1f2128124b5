"""Foundation figures: import throughput and Azure SDK query latency, with baselines from the same run.

* Import: QnAs/s for the professional chit-chat KB through ``Service.import_content``,
  against the embedder alone on the same texts (the physical floor).
* Query: p50/p99 of 1,000 questions through the official Azure SDK over HTTP, against
  ``Service.ask`` in-process on the same questions.

Usage: python bench/foundation.py   (writes nothing; prints a small table)
"""

from __future__ import annotations

import csv
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from azure.ai.language.questionanswering import QuestionAnsweringClient  # noqa: E402
from azure.core.credentials import AzureKeyCredential  # noqa: E402

from conftest import CHITCHAT, SHARED_DATA, LiveServer  # noqa: E402
from openqna.formats import read_file  # noqa: E402
from openqna.kb.service import AskRequest, Service
from openqna.models.embedder import LocalMiniLM  # noqa: E402
from openqna.store.sqlite import SQLiteStore  # noqa: E402

ROUNDS = 5


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main() -> None:
    embedder = LocalMiniLM(cache_size=0)  # every query pays for its embedding, as a new question would
    embedder.embed(["warm up"])
    content = read_file(CHITCHAT)
    # the distinct texts: what an import has to embed (it embeds a repeated answer once)
    texts = list(dict.fromkeys(t for q in content.qnas for t in (*q.questions, q.answer)))
    with tempfile.TemporaryDirectory() as tmp:
        service = Service(SQLiteStore(tmp), embedder)
        by_length = sorted(texts, key=len)
        raws, raws_sorted, imports = [], [], []
        for attempt in range(ROUNDS):  # interleaved, so a busy moment of the machine hits all three
            t0 = time.perf_counter()
            for start in range(0, len(texts), 128):
                embedder.embed(texts[start : start + 128])
            raws.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            for start in range(0, len(by_length), 128):
                embedder.embed(by_length[start : start + 128])
            raws_sorted.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            service.import_content("chitchat" if attempt == 0 else f"chitchat{attempt}", read_file(CHITCHAT))
            imports.append(time.perf_counter() - t0)
        raw, raw_sorted, imported = (statistics.median(x) for x in (raws, raws_sorted, imports))
        n = len(content.qnas)
        print(f"import (median of {ROUNDS} interleaved rounds): {n} QnAs ({len(texts)} distinct texts) in {imported:.2f}s = "
              f"{n / imported:.1f} QnAs/s; embedder alone {raw:.2f}s in file order, {raw_sorted:.2f}s sorted by "
              f"length; import/embedder-floor time ratio {imported / raw_sorted:.2f} "
              f"(= {raw_sorted / imported:.0%} of the embedder's throughput)")

        with open(SHARED_DATA / "banking77" / "test.csv") as f:
            questions = [row["text"] for row in csv.DictReader(f)][:500]
        questions += [q for qna in content.qnas for q in qna.questions][:500]
        service.deploy("chitchat", "production")
        inproc = []
        for q in questions:
            t = time.perf_counter()
            service.ask("chitchat", "production", AskRequest(question=q, top=3))
            inproc.append((time.perf_counter() - t) * 1000)
        with LiveServer(service) as live, QuestionAnsweringClient(live.url, AzureKeyCredential("k")) as client:
            for q in questions[:20]:
                client.get_answers(question=q, project_name="chitchat", deployment_name="production")
            sdk = []
            for q in questions:
                t = time.perf_counter()
                client.get_answers(question=q, project_name="chitchat", deployment_name="production", top=3)
                sdk.append((time.perf_counter() - t) * 1000)
        print(f"query: {len(questions)} questions (500 banking77, 500 chit-chat), top 3, embedding included")
        print(f"  in-process ask: p50 {statistics.median(inproc):.2f} ms, p99 {pct(inproc, 99):.2f} ms")
        print(f"  Azure SDK/HTTP: p50 {statistics.median(sdk):.2f} ms, p99 {pct(sdk, 99):.2f} ms; "
              f"p50 ratio SDK/in-process {statistics.median(sdk) / statistics.median(inproc):.2f}")


if __name__ == "__main__":
    main()
