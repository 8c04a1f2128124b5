"""openqna against Chroma, LanceDB and the raw floors (numpy brute force, bm25s) on the same data.

Same documents, same vectors, same queries for everyone.  Documents: the ~18.9k unique
banking77 and hwu64 training utterances with their real MiniLM vectors; corpora beyond that
(100k) are perturbed copies ``normalize(v + noise)`` with |noise| = 0.3 (cos ~0.96 to the
original), so 100k is ~5 near-copies of each real utterance (see ``bench/corpus.py``).
Queries: 200 banking77/hwu64 test utterances, embedded once beforehand; the query embedding
is measured on its own as the common baseline every system would add.  Ground truth: exact
cosine top-10 by numpy, with and without a metadata filter keeping 10% (``group = '3'``).

openqna answers through ``Service.search`` (hybrid BM25 + dense with calibrated confidence,
not a pure vector search), so the overlap of its top-10 with the exact dense top-10 is not its
recall: it is given as "overlap with exact top-10" (as for bm25s, which is lexical only).  Its
recall@10 is measured against its own exact ranking instead: above OPENQNA_EXACT_SEARCH_MAX
(30k vectors) ``Service.search`` scores only candidates (the IVF-nearest vectors and the best
keyword matches, then exact rescoring); the same call with OPENQNA_EXACT_SEARCH_MAX above the
corpus size scores every record exactly, and "recall@10 vs its exhaustive ranking" is the
share of that exhaustive top-10 the candidate path returns (1.00 at or below 30k vectors, where
both paths are the same).
Neither figure is relevance: that is eval/report.md's BEIR SciFact table (nDCG@10 of openqna's
ranker against dense-only and BM25-only rankings of the same MiniLM vectors and texts).

Usage: python bench/peers.py [--sizes 1000 10000 100000] [--queries 200]
Needs the `bench` extra (pip install -e '.[bench]').  Writes bench/peers_latency.png.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

import corpus  # noqa: E402

K = 10
FILTER_GROUP = "3"


class NumpyFloor:
    """Exact brute force: one matrix-vector product, the filter as a boolean mask."""

    name = "numpy (exact)"

    def build(self, texts, vectors, groups, tmp):
        self.vectors = np.ascontiguousarray(vectors)
        self.mask = groups == FILTER_GROUP

    def query(self, i, filtered):
        scores = self.vectors @ self.q[i]
        if filtered:
            scores = np.where(self.mask, scores, -np.inf)
        top = np.argpartition(-scores, K)[:K]
        return top[np.argsort(-scores[top])]


class BM25Floor:
    """bm25s (lexical only; its overlap with the dense ground truth is not a recall)."""

    name = "bm25s (lexical)"

    def build(self, texts, vectors, groups, tmp):
        import bm25s

        self.bm25s = bm25s
        self.index = bm25s.BM25()
        self.index.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
        self.weights = (groups == FILTER_GROUP).astype(np.float32)

    def query(self, i, filtered):
        tokens = self.bm25s.tokenize([self.qtexts[i]], stopwords="en", show_progress=False)
        ids, _ = self.index.retrieve(tokens, k=K, show_progress=False, n_threads=1,
                                     weight_mask=self.weights if filtered else None)
        return ids[0]


class Chroma:
    name = "Chroma (HNSW)"

    def build(self, texts, vectors, groups, tmp):
        import chromadb

        client = chromadb.PersistentClient(path=str(tmp), settings=chromadb.Settings(anonymized_telemetry=False))
        self.collection = client.create_collection("bench", configuration={"hnsw": {"space": "cosine"}})
        for start in range(0, len(texts), 5000):
            end = min(len(texts), start + 5000)
            self.collection.add(ids=[str(i) for i in range(start, end)], embeddings=vectors[start:end],
                                metadatas=[{"group": g} for g in groups[start:end]])

    def query(self, i, filtered):
        r = self.collection.query(query_embeddings=self.q[i : i + 1], n_results=K, include=[],
                                  where={"group": FILTER_GROUP} if filtered else None)
        return [int(x) for x in r["ids"][0]]


class Lance:
    """LanceDB; without an index a query scans every vector (exact), with one it goes through IVF_SQ.

    IVF_SQ, because it builds fast: at 100k, IVF_HNSW_SQ and IVF_PQ took ~19x its build time
    here for the same recall (IVF_PQ lower) and latency.
    """

    def __init__(self, index: bool):
        self.index = index
        self.name = "LanceDB (IVF_SQ index)" if index else "LanceDB (flat scan)"

    def runs_at(self, n: int) -> bool:
        # a flat scan took ~0.3 s a query at 100k (it is numpy's exact floor, only slower); an IVF
        # index needs rows enough to train its partitions
        return n >= 10_000 if self.index else n <= 10_000

    def build(self, texts, vectors, groups, tmp):
        import lancedb
        import pyarrow as pa

        table = pa.table({"id": pa.array(np.arange(len(texts)), pa.int64()),
                          "group": pa.array(list(groups), pa.string()),
                          "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), vectors.shape[1])})
        self.table = lancedb.connect(str(tmp)).create_table("bench", data=table)
        if self.index:
            from lancedb.index import IvfSq

            self.table.create_index("vector", config=IvfSq(distance_type="cosine"))

    def query(self, i, filtered):
        search = self.table.search(self.q[i]).distance_type("cosine").limit(K).select(["id", "_distance"])
        if filtered:
            search = search.where(f"\"group\" = '{FILTER_GROUP}'", prefilter=True)
        return search.to_arrow()["id"].to_numpy()


class OpenQnA:
    """openqna's public API: records through Service.upsert, queries through Service.search."""

    name = "openqna (Service.search, SQLite)"

    def build(self, texts, vectors, groups, tmp):
        from openqna.kb.service import Service
        from openqna.models.embedder import LocalMiniLM
        from openqna.store.sqlite import SQLiteStore

        embedder = corpus.LookupEmbedder(LocalMiniLM.name, texts, vectors)
        embedder.add(self.qtexts, self.q)
        self.service = Service(SQLiteStore(tmp), embedder)
        write = corpus.fill_openqna(self.service, "peers", texts)
        t = time.perf_counter()
        self.service.search("peers", self.qtexts[0], limit=K)  # builds the in-memory index
        self.detail = f" (write {write:.1f} s, then index {time.perf_counter() - t:.1f} s)"
        self.row = {t: i for i, t in enumerate(texts)}

    def query(self, i, filtered):
        hits = self.service.search("peers", self.qtexts[i], limit=K,
                                   where=f"group = '{FILTER_GROUP}'" if filtered else None)
        return [self.row[h.record.questions[0]] for h in hits]

    def exhaustive(self, n_queries: int, filtered: bool) -> list[set[int]]:
        """openqna's own exact top-10s: every record scored (OPENQNA_EXACT_SEARCH_MAX above the corpus size)."""
        before = os.environ.get("OPENQNA_EXACT_SEARCH_MAX")
        os.environ["OPENQNA_EXACT_SEARCH_MAX"] = str(10**12)
        try:
            return [set(self.query(i, filtered)) for i in range(n_queries)]
        finally:
            if before is None:
                del os.environ["OPENQNA_EXACT_SEARCH_MAX"]
            else:
                os.environ["OPENQNA_EXACT_SEARCH_MAX"] = before

    def close(self):
        self.service.store.close()


def ground_truth(vectors, queries, mask=None) -> list[set[int]]:
    scores = queries @ vectors.T
    if mask is not None:
        scores[:, ~mask] = -np.inf
    return [set(np.argpartition(-row, K)[:K].tolist()) for row in scores]


def measure(peer, n_queries: int, filtered: bool, truth: list[set[int]], warmup: int = 10):
    """Latencies (ms), mean overlap with the exact top-10 and the top-10s, after ``warmup`` unmeasured queries."""
    for i in range(warmup):
        peer.query(i, filtered)
    ms, overlap, found = [], [], []
    for i in range(n_queries):
        t = time.perf_counter()
        ids = peer.query(i, filtered)
        ms.append((time.perf_counter() - t) * 1000)
        found.append({int(x) for x in ids})
        overlap.append(len(truth[i] & found[-1]) / K)
    return ms, float(np.mean(overlap)), found


def recall(found: list[set[int]], truth: list[set[int]]) -> float:
    return float(np.mean([len(f & t) / max(1, len(t)) for f, t in zip(found, truth)]))


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, filtered in zip(axes, (False, True)):
        for name, by_size in results.items():
            sizes = sorted(by_size)
            ax.plot(sizes, [by_size[s][filtered] for s in sizes], marker="o", label=name)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("documents")
        ax.set_title("top-10, 10% metadata filter" if filtered else "top-10, no filter")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("query latency p50 (ms, query vector precomputed)")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="*", default=[1_000, 10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--plot", default=str(HERE / "peers_latency.png"))
    parser.add_argument("--only", nargs="*", help="peer names containing any of these words")
    args = parser.parse_args()

    from openqna.cli.main import one_blas_thread
    from openqna.models.embedder import LocalMiniLM

    one_blas_thread()  # as `openqna serve` runs numpy (the numpy floor gets the same)

    embedder = LocalMiniLM(cache_size=0)
    texts, vectors, qtexts, qvectors = corpus.real_data(embedder)
    pick = np.random.default_rng(1).choice(len(qtexts), args.queries, replace=False)
    qtexts, qvectors = [qtexts[i] for i in pick], qvectors[pick]
    floor = corpus.embedding_ms(embedder, qtexts)
    floor_p50 = float(np.median(floor))
    del embedder
    docs, doc_vectors = corpus.grow(texts, vectors, max(args.sizes))
    groups = np.array([corpus.group(i) for i in range(len(docs))])
    print(f"data: {len(texts)} real utterances, grown to {len(docs)} documents by perturbed copies "
          f"(|noise| {corpus.NOISE}); {args.queries} queries; metadata filter keeps "
          f"{np.mean(groups == FILTER_GROUP):.0%}")
    print(f"common baseline, query embedding alone: p50 {floor_p50:.1f} ms, p99 {corpus.pct(floor, 99):.1f} ms; "
          "latencies below exclude it, ratios are p50 / embedding p50")
    peers = [NumpyFloor(), BM25Floor(), OpenQnA(), Chroma(), Lance(index=False), Lance(index=True)]
    if args.only:
        peers = [p for p in peers if any(w.lower() in p.name.lower() for w in args.only)]
    results: dict[str, dict[int, dict[bool, float]]] = {}
    for n in sorted(args.sizes):
        vecs, mask = doc_vectors[:n], groups[:n] == FILTER_GROUP
        truth = {False: ground_truth(vecs, qvectors), True: ground_truth(vecs, qvectors, mask)}
        for peer in peers:
            if isinstance(peer, Lance) and not peer.runs_at(n):
                continue
            peer.q, peer.qtexts = qvectors, qtexts
            tmp = Path(tempfile.mkdtemp(prefix="bench-peers-"))
            try:
                t = time.perf_counter()
                peer.build(docs[:n], vecs, groups[:n], tmp)
                build = time.perf_counter() - t
                line = [f"n={n:,} {peer.name}: build {build:.1f} s{getattr(peer, 'detail', '')}"]
                for filtered in (False, True):
                    ms, overlap, found = measure(peer, args.queries, filtered, truth[filtered])
                    p50 = float(np.median(ms))
                    results.setdefault(peer.name, {}).setdefault(n, {})[filtered] = p50
                    kind = "recall@10" if not isinstance(peer, (OpenQnA, BM25Floor)) else "overlap with exact top-10"
                    line.append(f"{'10% filter' if filtered else 'top-10'} p50 {p50:.2f} / p99 {corpus.pct(ms, 99):.2f} ms "
                                f"({p50 / floor_p50:.2f}x embedding), {kind} {overlap:.2f}")
                    if isinstance(peer, OpenQnA):
                        own = recall(found, peer.exhaustive(args.queries, filtered))
                        line[-1] += f", recall@10 vs its exhaustive ranking {own:.3f}"
                print("; ".join(line), flush=True)
            finally:
                if hasattr(peer, "close"):
                    peer.close()
                for attr in ("collection", "table", "service", "index", "vectors"):
                    if attr in vars(peer) and not isinstance(getattr(peer, attr), bool):
                        delattr(peer, attr)
                shutil.rmtree(tmp, ignore_errors=True)
    plot(results, Path(args.plot))
    print(f"plot: {Path(args.plot).name}")


if __name__ == "__main__":
    main()
