"""Vector store search at 10k and 100k chunks: in-process and ``POST /v1/vector_stores/{id}/search``.

Setup, in-process through the public seams: a vector store with ten files attached by the
real ingestion job (one short file each, attributes ``group`` = 0..9), then the chunks of a
10k- or 100k-chunk upload written as those files' chunk records through ``Service.upsert``
with a :class:`corpus.LookupEmbedder` (texts: the banking77/hwu64 utterances and perturbed
copies, ``corpus.grow``; chunk ``i`` belongs to file ``i % 10``).  That is the store such an
upload leaves, without the minutes of chunking and embedding it would take here.  The first
search builds the index (and saves it); then:

- in-process: ``VectorStores.search`` with the real embedder, 200 questions unfiltered and
  200 others with the attribute filter ``group = 3`` (10% of the chunks);
- over HTTP: a fresh ``openqna serve`` on that store, the same, one request at a time.

No question is asked twice of one process (the embedder caches).

Baseline in the same run: the query embedding alone.  Usage: python bench/vector_store.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import corpus  # noqa: E402
from throughput import free_port, start_server, stop_server, wait_ready  # noqa: E402

FILES = 10
QUERIES = 200
FILTER = {"type": "eq", "key": "group", "value": "3"}


def chunk_records(file_ids: list[str], texts: list[str]):
    """The records ingestion gives a file's short chunks (``vector_store_records.chunk_record``; a short chunk's only
    embedding window is its text), chunk ``i`` in file ``i % FILES``."""
    from openqna.kinds.vector_store_records import attribute_fields
    from openqna.records import QnA

    for i, text in enumerate(texts):
        g = i % FILES
        attributes = {"group": str(g)}
        fields = {"file_id": file_ids[g], "filename": f"group-{g}.txt", "chunk_index": i // FILES,
                  "attributes": attributes, **attribute_fields(attributes)}
        yield QnA([text], text, source=file_ids[g], kind="passage", fields=fields)


def build(data: str, texts: list[str], vectors: np.ndarray) -> tuple[str, float, float]:
    """A vector store of ``len(texts)`` chunks in the store at ``data``: (its id, seconds writing, seconds indexing)."""
    from openqna.ingest.chunker import Chunk
    from openqna.kb.jobs import JobRunner
    from openqna.kb.service import Service
    from openqna.kinds import openai_files
    from openqna.kinds.vector_store_records import chunk_record
    from openqna.kinds.vector_stores import Attach, VectorStores
    from openqna.models.embedder import LocalMiniLM
    from openqna.store.sqlite import SQLiteStore

    service = Service(SQLiteStore(data), corpus.LookupEmbedder(LocalMiniLM.name, texts, vectors))
    jobs = JobRunner(service.store, {}, poll_seconds=0.05)
    stores = VectorStores(service, jobs)
    vs = stores.create(name=f"bench-{len(texts)}")
    file_ids = [openai_files.upload(service, f"group-{g}.txt", texts[g].encode(), "assistants").id
                for g in range(FILES)]
    for g, file_id in enumerate(file_ids):  # the real job: chunks, embeds and writes each file's one chunk
        stores.attach(vs.id, Attach(file_id, {"group": str(g)}))
    while (view := stores.get(vs.id)).status != "completed":
        time.sleep(0.05)
    jobs.shutdown()
    assert view.file_counts.completed == FILES, view
    records = list(chunk_records(file_ids, texts))
    first = chunk_record(file_ids[0], "group-0.txt", Chunk(texts[0], [], None, None, "group-0.txt", 0),
                         {"group": "0"})
    assert (first.questions, first.answer, first.fields) == (records[0].questions, records[0].answer,
                                                              records[0].fields), "chunk_records drifted"
    t = time.perf_counter()
    for start in range(0, len(records), 5000):
        service.upsert(vs.id, records[start:start + 5000], match_content=False)
    written = time.perf_counter() - t
    t = time.perf_counter()
    service.indexes.get(vs.id)  # built, and saved when large enough
    indexed = time.perf_counter() - t
    service.store.close()
    return vs.id, written, indexed


def in_process(data: str, store_id: str, questions: list[str]) -> dict[str, list[float]]:
    from openqna.api.openai.vector_stores_api import filter_from
    from openqna.kb.jobs import JobRunner
    from openqna.kb.service import Service
    from openqna.kinds.vector_stores import VectorStores
    from openqna.models.embedder import LocalMiniLM
    from openqna.store.sqlite import SQLiteStore

    service = Service(SQLiteStore(data), LocalMiniLM())
    stores = VectorStores(service, JobRunner(service.store, {}))
    where = filter_from(FILTER)  # what the HTTP route makes of the same filter
    out = {}
    for n, (label, flt) in enumerate((("unfiltered", None), ("attribute filter group = 3 (10%)", where))):
        stores.search(store_id, [questions[0]], limit=10, where=flt)  # warm
        lat = []
        for q in questions[1 + n * QUERIES:1 + (n + 1) * QUERIES]:  # unseen: the embedder caches
            s = time.perf_counter()
            results, _ = stores.search(store_id, [q], limit=10, where=flt)
            lat.append((time.perf_counter() - s) * 1000)
            assert len(results) == 10 and (flt is None or all(r.attributes == {"group": "3"} for r in results))
        out[label] = lat
    service.store.close()
    return out


def over_http(data: str, store_id: str, questions: list[str]) -> dict[str, list[float]]:
    import httpx

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    out = {}
    with open(Path(data) / "server.log", "wb") as log, httpx.Client(base_url=base, timeout=300) as client:
        proc = start_server(data, port, log)
        try:
            wait_ready(base, proc)
            for n, (label, extra) in enumerate((("unfiltered", {}),
                                                ("attribute filter group = 3 (10%)", {"filters": FILTER}))):
                client.post(f"/v1/vector_stores/{store_id}/search",
                            json={"query": questions[0], **extra}).raise_for_status()
                lat = []
                for q in questions[1 + n * QUERIES:1 + (n + 1) * QUERIES]:
                    s = time.perf_counter()
                    r = client.post(f"/v1/vector_stores/{store_id}/search",
                                    json={"query": q, "max_num_results": 10, **extra})
                    lat.append((time.perf_counter() - s) * 1000)
                    r.raise_for_status()
                    hits = r.json()["data"]
                    assert len(hits) == 10 and (not extra or all(h["attributes"] == {"group": "3"} for h in hits)), \
                        r.text
                out[label] = lat
        finally:
            stop_server(proc)
    return out


def main() -> None:
    from openqna.cli.main import one_blas_thread
    from openqna.models.embedder import LocalMiniLM

    one_blas_thread()  # as `openqna serve` runs numpy
    texts, vectors, questions, _ = corpus.real_data()
    questions = questions[:2 * QUERIES + 1]
    floor = corpus.embedding_ms(LocalMiniLM(cache_size=0), questions[:QUERIES])
    f50 = float(np.median(floor))
    print(f"baseline, query embedding alone: p50 {f50:.1f} / p99 {corpus.pct(floor, 99):.1f} ms")
    docs, doc_vectors = corpus.grow(texts, vectors, 100_000)
    for n in (10_000, 100_000):
        with tempfile.TemporaryDirectory(prefix="bench-vs-") as data:
            store_id, written, indexed = build(data, docs[:n], doc_vectors[:n])
            print(f"{n:,} chunks in {FILES} files: written in {written:.1f} s, index built in {indexed:.1f} s")
            rows = {"in-process VectorStores.search": in_process(data, store_id, questions),
                    "POST /v1/vector_stores/{id}/search over HTTP": over_http(data, store_id, questions)}
            for how, by_label in rows.items():
                for label, lat in by_label.items():
                    p50 = float(np.median(lat))
                    print(f"{n:,} chunks, {how}, top 10, {label}: p50 {p50:.1f} / p99 {corpus.pct(lat, 99):.1f} ms "
                          f"= {p50 / f50:.1f}x the embedding p50 ({len(lat)} questions)")


if __name__ == "__main__":
    main()
