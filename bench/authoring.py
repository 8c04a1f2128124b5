"""Deploy and export of a 10,000-QnA project: the job's own time and what the Azure SDK waits.

The project is banking77's 10,003 training utterances, each a QnA whose answer names its
intent.  Its vectors are looked up rather than embedded (the utterances' real MiniLM vectors,
cached by ``bench/corpus.py``; the 77 answers embedded here): embedding is measured by
``bench/foundation.py``, and this script measures what comes after it.  Baseline in the same
run: copying the same rows with one SQL statement is the floor of a deploy; serialising the
records to JSON in memory is the floor of an export.

Usage: python bench/authoring.py
"""

from __future__ import annotations

import csv
import json
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))

import corpus  # noqa: E402
from azure.ai.language.questionanswering.authoring import AuthoringClient  # noqa: E402
from azure.core.credentials import AzureKeyCredential  # noqa: E402

from conftest import SHARED_DATA, LiveServer  # noqa: E402
from openqna.kb.authoring import Authoring
from openqna.kb.service import Service
from openqna.models.embedder import LocalMiniLM  # noqa: E402
from openqna.records import QnA  # noqa: E402
from openqna.store.sqlite import SQLiteStore  # noqa: E402


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    with open(SHARED_DATA / "banking77" / "train.csv") as f:
        rows = list(csv.DictReader(f))
    qnas = [QnA([r["text"].strip()], f"See our help page on {r['category'].replace('_', ' ')}.", source="banking77")
            for r in rows]
    texts, vectors, _, _ = corpus.real_data()
    lookup = corpus.LookupEmbedder(LocalMiniLM.name, texts, vectors)
    answers = sorted({q.answer for q in qnas})
    lookup.add(answers, LocalMiniLM(cache_size=0).embed(answers))
    with tempfile.TemporaryDirectory() as tmp:
        service = Service(SQLiteStore(tmp), lookup)
        service.create_project("big")
        t = timed(lambda: service.upsert("big", qnas))
        n = service.store.count_qnas("big")
        print(f"setup: {n} QnAs imported in {t:.1f}s ({n / t:.0f} QnAs/s, vectors looked up, not embedded)")
        authoring = Authoring(service)
        store = service.store
        db = store._db  # the floor: one plain copy of the rows a deploy copies (records and vectors)
        floor = timed(lambda: (db.execute("CREATE TEMP TABLE r AS SELECT * FROM records"),
                               db.execute("CREATE TEMP TABLE u AS SELECT * FROM units"),
                               db.execute("DROP TABLE r"), db.execute("DROP TABLE u")))
        deploy = timed(lambda: store.deploy("big", "production"))
        redeploy = timed(lambda: store.deploy("big", "production"))
        index = timed(lambda: service.indexes.get("big", "production"))
        print(f"deploy: {deploy:.2f}s (redeploy {redeploy:.2f}s; index build for queries {index:.2f}s); "
              f"floor (one plain copy of the same rows) {floor:.2f}s; ratio {deploy / floor:.1f}")
        floor_export = timed(lambda: json.dumps([asdict(q) for q in store.list_qnas("big")]))
        for fmt in ("json", "tsv", "excel"):
            secs = timed(lambda: authoring.export("big", fmt, "qnas"))
            print(f"export {fmt}: {secs:.2f}s; floor (records to JSON in memory) {floor_export:.2f}s; "
                  f"ratio {secs / floor_export:.1f}")
        with LiveServer(service) as live:
            client = AuthoringClient(live.url, AzureKeyCredential("k"))
            sdk_deploy = timed(lambda: client.begin_deploy_project("big", "production").result())
            sdk_export = timed(lambda: client.begin_export("big", file_format="excel").result())
        print(f"through SDK 1.1.0, end to end: deploy {sdk_deploy:.2f}s, "
              f"export excel {sdk_export:.2f}s")


if __name__ == "__main__":
    main()
