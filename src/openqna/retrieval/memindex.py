"""An in-process search index derived from the store (DESIGN decision 7).

The store is the source of truth; this index is rebuilt from it and answers the
two retrieval primitives with numpy: dense similarity and BM25, per record, for
the question field ("q", one unit per question) and the answer field ("a", one
unit per answer or passage).  Filters are evaluated to a boolean mask over
records with inverted maps, then pushed into both primitives, so a selective
filter still yields every matching record.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable, Iterable

import numpy as np

from .. import settings
from .filters import And, Filter, IdIn, KindIn, MetaEq, Not, Or, SourceIn

K1 = 1.2
B = 0.75
_GATHER_MAX = 5000  # a filter leaving at most this many units of a field is searched exactly


def bm25_idf(n_docs: int, df: int) -> float:
    """Lucene's non-negative idf; shared with every store so scores agree."""
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


@dataclass
class IndexRecord:
    """What the index needs of a record: identity, filterable fields, and its units."""

    id: int
    kind: str
    source: str
    metadata: dict[str, str]
    context_only: bool
    question_keys: list[str]  # exact-match keys of the questions
    q_vectors: list[np.ndarray] | np.ndarray  # one (dim,) float32 vector per question
    q_terms: list[list[str]]
    a_vector: np.ndarray | None  # (dim,) float32
    a_terms: list[str]
    fields: dict = field(default_factory=dict)  # typed column values (where_str)


class _Postings:
    """Term -> (units, term frequencies), held as one CSR table so it builds and renumbers with numpy."""

    def __init__(self, vocab: dict[str, int], tids: np.ndarray, units: np.ndarray, tfs: np.ndarray,
                 start: np.ndarray | None = None):
        self.vocab = vocab  # term -> term id; only grows
        self.tids, self.units, self.tfs = tids, units, tfs  # sorted by (term id, unit)
        # where each term's postings begin (given by a snapshot: searching a memory map reads it from disk)
        self.start = np.searchsorted(tids, np.arange(len(vocab) + 1)) if start is None else start

    @staticmethod
    def entries(terms: list[list[str]], vocab: dict[str, int], first_unit: int = 0
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(term ids, units, tfs) of ``terms`` (one list per unit, numbered from ``first_unit``); grows ``vocab``."""
        tids = np.fromiter((vocab.setdefault(t, len(vocab)) for unit in terms for t in unit), dtype=np.int64)
        units = np.repeat(np.arange(first_unit, first_unit + len(terms), dtype=np.int64),
                          [len(unit) for unit in terms])
        span = max(1, first_unit + len(terms))
        keys, tfs = np.unique(tids * span + units, return_counts=True)
        # int32 halves the largest arrays of a big index (postings outnumber vectors tens of times)
        return (keys // span).astype(np.int32), (keys % span).astype(np.int32), tfs.astype(np.float32)

    @classmethod
    def build(cls, terms: list[list[str]]) -> "_Postings":
        vocab: dict[str, int] = {}
        return cls(vocab, *cls.entries(terms, vocab))

    def renumbered(self, unit_keep: np.ndarray, unit_new: np.ndarray, terms: list[list[str]],
                   first_unit: int) -> "_Postings":
        """These postings without the dropped units (renumbered) plus ``terms`` of new units from ``first_unit``."""
        vocab = dict(self.vocab)
        keep = unit_keep[self.units]
        tids, units, tfs = self.entries(terms, vocab, first_unit)
        tids = np.concatenate((self.tids[keep], tids))
        order = np.argsort(tids, kind="stable")  # kept units come first within a term and stay in order
        units = np.concatenate((unit_new[self.units[keep]].astype(np.int32), units))
        return _Postings(vocab, tids[order], units[order], np.concatenate((self.tfs[keep], tfs))[order])

    def get(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        tid = self.vocab.get(term)
        if tid is None or self.start[tid] == self.start[tid + 1]:
            return None
        s, e = self.start[tid], self.start[tid + 1]
        return self.units[s:e], self.tfs[s:e]


class _Ann:
    """A field's IVF index, shared by the versions of one index lineage: ids are unit keys, not positions."""

    def __init__(self, matrix: np.ndarray, keys: np.ndarray):
        from .ann import IVFIndex

        self.ivf = IVFIndex(matrix, keys)
        self.trained_on = len(keys)
        self.changed = 0  # units added or removed since it was trained


class _Field:
    """Units of one field; each record's units are contiguous (segments), for reduceat."""

    def __init__(self, rows: list[int] | np.ndarray, vectors: list[np.ndarray] | np.ndarray,
                 terms: list[list[str]] | None, n_records: int, dim: int, *,
                 lengths: np.ndarray | None = None, postings: _Postings | None = None,
                 keys: np.ndarray | None = None, next_key: int | None = None, ann: _Ann | None = None,
                 sum_norms: np.ndarray | None = None):
        self.n = len(rows)
        self.dim = dim
        self.rows = np.asarray(rows, dtype=np.int64)
        if isinstance(vectors, np.ndarray):
            self.matrix = vectors.astype(np.float32, copy=False).reshape(self.n, dim)
        else:
            self.matrix = np.vstack(vectors).astype(np.float32, copy=False) if vectors else np.zeros((0, dim), np.float32)
        self.lengths = lengths if lengths is not None else np.asarray([len(t) for t in terms or []], dtype=np.float32)
        self.avgdl = float(self.lengths.mean()) if self.n else 1.0
        self.postings = postings if postings is not None else _Postings.build(terms or [])
        # stable keys of the units (ids in the shared IVF index) and the next unused one
        self.keys = keys if keys is not None else np.arange(self.n, dtype=np.int64)
        self.next_key = next_key if next_key is not None else self.n
        # segment starts (one segment per record that has units here) and their record rows
        if self.n:
            change = np.flatnonzero(np.diff(self.rows)) + 1
            self.starts = np.concatenate(([0], change))
        else:
            self.starts = np.zeros(0, np.int64)
        self.seg_rows = self.rows[self.starts] if self.n else np.zeros(0, np.int64)
        self.n_records = n_records
        # the units of record row r are lo[r]:hi[r] (none when lo[r] == hi[r])
        self.lo = np.zeros(n_records, np.int64)
        self.hi = np.zeros(n_records, np.int64)
        if self.n:
            self.lo[self.seg_rows] = self.starts
            self.hi[self.seg_rows] = np.concatenate((self.starts[1:], [self.n]))
        self._ann = ann
        self._position: np.ndarray | None = None  # unit key -> unit position in this version
        self.counts = self.hi - self.lo
        # length of the sum of each record's unit vectors: cosine with their centroid = summed cosines / this
        if sum_norms is not None:
            self.sum_norms = sum_norms
        else:
            self.sum_norms = np.zeros(n_records, np.float32)
            if self.n:
                self.sum_norms[self.seg_rows] = np.linalg.norm(np.add.reduceat(self.matrix, self.starts), axis=1)
        self._ann_lock = threading.Lock()

    def updated(self, rec_keep: np.ndarray, rec_new: np.ndarray, rows: list[int], vectors: list[np.ndarray],
                terms: list[list[str]], n_records: int) -> "_Field":
        """This field without the units of dropped records, plus new units (``rows`` are new record rows)."""
        unit_keep = rec_keep[self.rows] if self.n else np.zeros(0, dtype=bool)
        unit_new = np.cumsum(unit_keep) - 1
        kept = int(unit_keep.sum())
        new_matrix = np.vstack(vectors).astype(np.float32, copy=False) if vectors else np.zeros((0, self.dim), np.float32)
        new_keys = np.arange(self.next_key, self.next_key + len(rows), dtype=np.int64)
        ann = self._ann
        if ann is not None:
            dropped = self.keys[~unit_keep]
            ann.changed += len(dropped) + len(rows)
            if ann.changed > ann.trained_on:  # drifted too far from what it was trained on: retrain lazily
                ann = None
            else:
                ann.ivf.remove(dropped)
                ann.ivf.add(new_matrix, new_keys)
        # records are kept or replaced whole: kept ones keep their centroid norms, new ones get theirs
        sum_norms = np.zeros(n_records, np.float32)
        sum_norms[:int(rec_keep.sum())] = self.sum_norms[rec_keep]
        if len(rows):
            new_rows = np.asarray(rows, np.int64)
            starts = np.concatenate(([0], np.flatnonzero(np.diff(new_rows)) + 1))
            sum_norms[new_rows[starts]] = np.linalg.norm(np.add.reduceat(new_matrix, starts), axis=1)
        return _Field(
            np.concatenate((rec_new[self.rows[unit_keep]], np.asarray(rows, np.int64))),
            np.concatenate((self.matrix[unit_keep], new_matrix)), None, n_records, self.dim,
            lengths=np.concatenate((self.lengths[unit_keep], np.asarray([len(t) for t in terms], np.float32))),
            postings=self.postings.renumbered(unit_keep, unit_new, terms, kept),
            keys=np.concatenate((self.keys[unit_keep], new_keys)), next_key=self.next_key + len(rows), ann=ann,
            sum_norms=sum_norms)

    def idf(self, term: str) -> float:
        hit = self.postings.get(term)
        return bm25_idf(self.n, 0 if hit is None else len(hit[0]))

    def per_record_max(self, unit_scores: np.ndarray, fill: float) -> np.ndarray:
        out = np.full(self.n_records, fill, dtype=np.float32)
        if self.n:
            out[self.seg_rows] = np.maximum.reduceat(unit_scores, self.starts)
        return out

    def dense(self, query: np.ndarray) -> np.ndarray:
        """Best cosine per record (−1 where the record has no unit in this field)."""
        if not self.n:
            return np.full(self.n_records, -1.0, np.float32)
        return self.per_record_max(self.matrix @ query, -1.0)

    # -- candidate mode: scores for some record rows only -----------------------------
    @cached_property
    def one_per_record(self) -> bool:
        """Whether every record has exactly one unit here (unit i is record row i), as answers are."""
        return self.n == self.n_records and bool((self.counts == 1).all())

    def unit_mask(self, record_mask: np.ndarray) -> np.ndarray:
        """``record_mask`` (a bool per record row) as a bool per unit; read only (it may be ``record_mask``)."""
        return record_mask if self.one_per_record else record_mask[self.rows]

    def units_of(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(unit ids of ``rows`` in order, segment start of each row that has units, which rows have units)."""
        if self.one_per_record:  # answers, and single-question QnAs: unit i is row i
            return rows.astype(np.int64, copy=False), np.arange(len(rows)), np.ones(len(rows), dtype=bool)
        lens = self.hi[rows] - self.lo[rows]
        has = lens > 0
        lens = lens[has]
        starts = np.cumsum(lens) - lens
        units = np.repeat(self.lo[rows[has]] - starts, lens) + np.arange(int(lens.sum()), dtype=np.int64)
        return units, starts, has

    @staticmethod
    def max_per_row(values: np.ndarray, starts: np.ndarray, has: np.ndarray, fill: float) -> np.ndarray:
        out = np.full(len(has), fill, dtype=np.float32)
        if len(starts) == len(values):  # one value a row (the reduceat would copy them)
            out[has] = values
        elif len(starts):
            out[has] = np.maximum.reduceat(values, starts)
        return out

    def dense_rows(self, query: np.ndarray, rows: np.ndarray, units_of: tuple | None = None) -> np.ndarray:
        """Best cosine of each of ``rows`` (−1 where the record has no unit here), computed exactly.

        ``units_of``: ``self.units_of(rows)`` when the caller has it already.
        """
        units, starts, has = units_of or self.units_of(rows)
        return self.max_per_row(self.matrix[units] @ query if len(units) else units, starts, has, -1.0)

    def similarities(self, query: np.ndarray, rows: np.ndarray, units_of: tuple | None = None
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For each of ``rows``: best, mean, and centroid cosine of its units (−1 where it has none).

        ``units_of``: ``self.units_of(rows)`` when the caller has it already.
        """
        if units_of is None and len(rows) == self.n_records and np.array_equal(rows, np.arange(self.n_records)):
            # every record, in order (the exhaustive path): no gather, one product
            sims = self.matrix @ query if self.n else np.zeros(0, np.float32)
            has = self.hi > self.lo
            best = self.per_record_max(sims, -1.0)
            total = np.zeros(self.n_records, np.float32)
            if self.n:
                total[self.seg_rows] = np.add.reduceat(sims, self.starts)
        else:
            units, starts, has = units_of or self.units_of(rows)
            sims = self.matrix[units] @ query if len(units) else np.zeros(0, np.float32)
            best = self.max_per_row(sims, starts, has, -1.0)
            total = np.zeros(len(rows), np.float32)
            if len(starts) == len(sims):
                total[has] = sims
            elif len(starts):
                total[has] = np.add.reduceat(sims, starts)
        mean = np.where(has, total / np.maximum(self.counts[rows], 1), -1.0).astype(np.float32)
        centroid = np.where(has, total / np.maximum(self.sum_norms[rows], 1e-9), -1.0).astype(np.float32)
        return best, mean, centroid

    def nearest_units(self, query: np.ndarray, k: int, allowed: np.ndarray | None) -> np.ndarray:
        """About the ``k`` units nearest ``query`` among ``allowed`` (a bool per unit; None: all).

        Exact when the field or the allowed part of it is small; otherwise from the IVF index,
        probing more lists (then exactly) when a selective filter leaves too few in the probed ones.
        """
        count = self.n if allowed is None else int(np.count_nonzero(allowed))
        k = min(k, count)
        if k <= 0:
            return np.zeros(0, np.int64)
        if count > max(_GATHER_MAX, 20 * k) and self.ann() is not None:
            ivf = self._ann.ivf
            position = self._positions()
            key_allowed = allowed
            if allowed is not None and self.next_key != self.n:  # else keys are positions: no change since built
                key_allowed = np.zeros(self.next_key, dtype=bool)
                key_allowed[self.keys[allowed]] = True
            # a filter keeping a share s of the units leaves about s of each probed list: probe 1/s as many
            nprobe = int(math.ceil(ivf.nprobe * self.n / count))
            for attempt in (nprobe, 4 * nprobe):
                keys = ivf.search(query, k, key_allowed, nprobe=attempt)
                # another version of this index may have added keys since: not units of this one
                found = position[keys[keys < len(position)]]
                found = found[found >= 0]
                if len(found) >= k or attempt >= ivf.nlist:
                    return found if len(found) >= k else self._exact_units(query, k, allowed)
        return self._exact_units(query, k, allowed)

    def _exact_units(self, query: np.ndarray, k: int, allowed: np.ndarray | None) -> np.ndarray:
        units = np.arange(self.n) if allowed is None else np.flatnonzero(allowed)
        sims = (self.matrix @ query) if allowed is None else self.matrix[units] @ query
        best = np.argpartition(-sims, k - 1)[:k] if k < len(units) else np.arange(len(units))
        return units[best[np.argsort(-sims[best], kind="stable")]]

    def _positions(self) -> np.ndarray:
        if self._position is None:
            position = np.full(self.next_key, -1, dtype=np.int64)
            position[self.keys] = np.arange(self.n)
            self._position = position
        return self._position

    def ann(self):
        """The IVF index of this field, built on first use; None while the field is small enough to scan."""
        if self.n <= settings.exact_search_max():
            return None
        if self._ann is None:
            with self._ann_lock:
                if self._ann is None:
                    self._ann = _Ann(self.matrix, self.keys)
        return self._ann.ivf

    def bm25_units(self, terms: Iterable[str]) -> np.ndarray:
        scores = np.zeros(self.n, np.float32)
        if not self.n:
            return scores
        norm = K1 * (1.0 - B + B * self.lengths / self.avgdl)
        for term in terms:
            hit = self.postings.get(term)
            if hit is None:
                continue
            units, tf = hit
            idf = bm25_idf(self.n, len(units))
            scores[units] += idf * tf * (K1 + 1.0) / (tf + norm[units])
        return scores

    def bm25_at(self, terms: Iterable[str], units: np.ndarray) -> np.ndarray:
        """``bm25_units(terms)[units]`` (the same floats), reading only ``units``: for a few candidates of a large
        field, a binary search in each term's postings instead of a pass over every unit."""
        if len(units) * 8 > self.n:
            return self.bm25_units(terms)[units]
        scores = np.zeros(len(units), np.float32)
        norm = K1 * (1.0 - B + B * self.lengths[units] / self.avgdl)
        for term in terms:
            hit = self.postings.get(term)
            if hit is None:
                continue
            posted, tfs = hit  # posted is sorted
            at = np.minimum(np.searchsorted(posted, units), len(posted) - 1)
            tf = np.where(posted[at] == units, tfs[at], np.float32(0.0))
            idf = bm25_idf(self.n, len(posted))
            scores += idf * tf * (K1 + 1.0) / (tf + norm)
        return scores

    def coverage_units(self, weights: dict[str, float]) -> np.ndarray:
        """Share of the query's idf mass each unit contains (0..1)."""
        cov, total, _ = self._coverage_mass(weights)
        return cov / total if total > 0 else cov

    def _coverage_mass(self, weights: dict[str, float]) -> tuple[np.ndarray, float, np.ndarray]:
        """(idf mass of the query each unit contains, the query's whole mass, the postings read: units, repeated)."""
        total = float(sum(weights.values()))
        units, mass = [], []
        if self.n and total > 0:
            for term, w in weights.items():
                hit = self.postings.get(term)
                if hit is not None:
                    units.append(hit[0])
                    mass.append(w)
        if not units:
            return np.zeros(self.n), total, _NO_ROWS
        # one bincount: ~3x faster than adding each term's postings in turn (~10k postings at 100k units)
        read = np.concatenate(units)
        weight = np.repeat(np.asarray(mass, np.float64), [len(u) for u in units])
        return np.bincount(read, weight, minlength=self.n), total, read

    def coverage_top(self, weights: dict[str, float], k: int, allowed: np.ndarray | None
                     ) -> tuple[np.ndarray, float, np.ndarray]:
        """(idf mass per unit, the query's whole mass, the ≤ ``k`` allowed units holding the most of it).

        The units are the exact top ``k`` (ties aside), found without sorting the ~10k units that
        share a word with the query (~0.1-0.3 ms here): a sample of the postings read gives a mass
        that a few times ``k`` postings reach, and only the units at or above it are sorted.
        """
        cov, total, read = self._coverage_mass(weights)
        if allowed is not None:
            read = read[allowed[read]]
        if not len(read):
            return cov, total, _NO_ROWS
        step = max(1, len(read) // _SAMPLE)
        sample = cov[read[::step]]
        # postings, not units: a unit holding several of the words is read once for each
        aboves = [above for above in (4 * k // step, 16 * k // step) if above < len(sample)]
        if aboves:  # the two ranks in sorted order, without sorting the sample
            sample = np.partition(sample, [len(sample) - 1 - above for above in aboves])
        top = None
        for above in aboves:
            keep = cov >= sample[-1 - above]
            if allowed is not None:
                keep &= allowed
            top = np.flatnonzero(keep)
            if len(top) >= k:
                break
        if top is None or len(top) < k:
            keep = cov > 0
            top = np.flatnonzero(keep if allowed is None else keep & allowed)
        if len(top) > k:
            top = top[np.argpartition(-cov[top], k - 1)[:k]]
        return cov, total, top


_BASIC = (MetaEq, SourceIn, KindIn, IdIn)
_NO_ROWS = np.zeros(0, np.int64)
_SAMPLE = 2048  # postings coverage_top samples


def _has_where_nodes(f: Filter) -> bool:
    if isinstance(f, (And, Or)):
        return any(_has_where_nodes(c) for c in f.children)
    if isinstance(f, Not):
        return _has_where_nodes(f.child)
    return not isinstance(f, _BASIC)


class MemIndex:
    """The searchable state of one knowledge base deployment at one change sequence."""

    def __init__(self, records: list[IndexRecord], dim: int, version: int,
                 hashes: dict[int, str] | None = None):
        """``hashes``: each record's content hash, which lets ``updated`` apply later changes in place."""
        records = sorted(records, key=lambda r: r.id)
        self.version = version
        self.dim = dim
        self.hashes = hashes
        self.ids = np.asarray([r.id for r in records], dtype=np.int64)
        self.n = len(records)
        self.context_only = np.asarray([r.context_only for r in records], dtype=bool)
        self.passage = np.asarray([r.kind != "qna" for r in records], dtype=bool)
        self.metadata: list[dict[str, str]] = []
        self.rows: list[dict] = []
        self.exact: dict[str, list[int]] = {}
        self._where_columns = None
        maps = self._maps(records, 0)
        self._meta_rows, self._source_rows = maps[0], maps[1]
        self._kind_masks = {k: self._rows_mask(v) for k, v in maps[2].items()}
        q, a = self._units(records, 0)
        self.q = _Field(q[0], q[1], q[2], self.n, dim)
        self.a = _Field(a[0], a[1], a[2], self.n, dim)
        self._finish()

    # Per-record Python state.  An index loaded from a snapshot (retrieval/snapshot.py) reads it
    # from disk on first use: a query without a where_str or an id filter never needs it.
    _lazy: Callable[[], dict] | None = None
    _metadata: list[dict[str, str]]
    _where_rows: list[dict]
    _hashes: dict[int, str] | None
    _row_of: dict[int, int] | None = None
    _where_source: Callable[[], dict] | None = None  # a snapshot's where_str columns (where_numpy.encode_columns)

    def _load_lazy(self) -> None:
        if self._lazy is not None:
            state = self._lazy()
            self._metadata, self._where_rows, self._hashes = state["metadata"], state["rows"], state["hashes"]
            self._lazy = None

    @property
    def metadata(self) -> list[dict[str, str]]:
        self._load_lazy()
        return self._metadata

    @metadata.setter
    def metadata(self, value: list[dict[str, str]]) -> None:
        self._metadata = value

    @property
    def rows(self) -> list[dict]:
        """Per record, what where_str filters read (see ``_maps``)."""
        self._load_lazy()
        return self._where_rows

    @rows.setter
    def rows(self, value: list[dict]) -> None:
        self._where_rows = value

    @property
    def hashes(self) -> dict[int, str] | None:
        self._load_lazy()
        return self._hashes

    @hashes.setter
    def hashes(self, value: dict[int, str] | None) -> None:
        self._hashes = value

    @property
    def row_of(self) -> dict[int, int]:
        """Record id -> row."""
        if self._row_of is None:
            self._row_of = {int(rid): i for i, rid in enumerate(self.ids.tolist())}
        return self._row_of

    @classmethod
    def build(cls, batches: Iterable[list[IndexRecord]], dim: int, version: int,
              hashes: dict[int, str] | None = None) -> "MemIndex":
        """The index ``MemIndex(all records)`` would be, built from ``batches`` of records in ascending id order.

        Each batch becomes a small index and the records' Python objects are dropped before the
        next batch is read, so a million passages never sit in memory as objects all at once
        (building from one list of them peaked at 14 GB); the parts' arrays are then joined.
        """
        parts = [cls(batch, dim, version) for batch in batches]
        if not parts:
            return cls([], dim, version, hashes)
        if len(parts) == 1:
            parts[0].hashes = hashes
            return parts[0]
        return cls._joined(parts, dim, version, hashes)

    @classmethod
    def _joined(cls, parts: list["MemIndex"], dim: int, version: int, hashes: dict[int, str] | None) -> "MemIndex":
        new = object.__new__(cls)
        new.version, new.dim, new.hashes = version, dim, hashes
        firsts = np.cumsum([0] + [p.n for p in parts])  # first record row of each part
        new.ids = np.concatenate([p.ids for p in parts]) if parts else np.zeros(0, np.int64)
        new.n = len(new.ids)
        new.context_only = np.concatenate([p.context_only for p in parts]) if parts else np.zeros(0, bool)
        new.passage = np.concatenate([p.passage for p in parts]) if parts else np.zeros(0, bool)
        new.metadata = [m for p in parts for m in p.metadata]
        new.rows = [r for p in parts for r in p.rows]
        new.exact = {}
        maps: tuple[dict, dict, dict] = ({}, {}, {})
        for part, first in zip(parts, firsts):
            for key, rows in part.exact.items():
                new.exact.setdefault(key, []).extend(r + int(first) for r in rows)
            kinds = {k: np.flatnonzero(m) for k, m in part._kind_masks.items()}
            for joined, own in zip(maps, (part._meta_rows, part._source_rows, kinds)):
                for key, rows in own.items():
                    joined.setdefault(key, []).append(rows + first)
        new._meta_rows, new._source_rows, kinds = ({k: np.concatenate(v) for k, v in m.items()} for m in maps)
        new._where_columns = None
        new._kind_masks = {k: new._rows_mask(v) for k, v in kinds.items()}
        for name in ("q", "a"):
            fields = [getattr(p, name) for p in parts]
            unit_firsts = np.cumsum([0] + [f.n for f in fields])
            vocab: dict[str, int] = {}
            tids, units, tfs = [], [], []
            for fld, first in zip(fields, unit_firsts):
                own = np.fromiter((vocab.setdefault(t, len(vocab)) for t in fld.postings.vocab), np.int64,
                                  count=len(fld.postings.vocab))  # this part's term ids -> joined ids
                tids.append(own[fld.postings.tids].astype(np.int32))
                units.append((fld.postings.units + first).astype(np.int32))
                tfs.append(fld.postings.tfs)
            tids_all = np.concatenate(tids) if tids else np.zeros(0, np.int32)
            order = np.argsort(tids_all, kind="stable")  # parts come in unit order: units stay sorted per term
            postings = _Postings(vocab, tids_all[order], np.concatenate(units)[order] if units else tids_all,
                                 np.concatenate(tfs)[order] if tfs else np.zeros(0, np.float32))
            rows = np.concatenate([f.rows + first for f, first in zip(fields, firsts)]) if fields else None
            setattr(new, name, _Field(rows if rows is not None else np.zeros(0, np.int64),
                                      np.concatenate([f.matrix for f in fields]) if fields else np.zeros((0, dim)),
                                      None, new.n, dim, lengths=np.concatenate([f.lengths for f in fields]),
                                      postings=postings, sum_norms=np.concatenate([f.sum_norms for f in fields])))
        new._finish()
        return new

    def _finish(self) -> None:
        self._metadata_keys: list[str] | None = None
        self._row_of = None
        self._none = np.zeros(self.n, dtype=bool)
        self._none.flags.writeable = False
        # The index cache sets this when it was handed a store's own vector search (pgvector's HNSW): called as
        # nearest_rows(field, query, k, filter, eligible), it returns record rows or None to search here.
        self.nearest_rows: Callable[[str, np.ndarray, int, Filter | None, np.ndarray], np.ndarray | None] | None = None

    @cached_property
    def only_passages(self) -> bool:
        """Whether every record is a passage (a vector store, a document KB): nothing reads its question fields."""
        return bool(self.passage.all())

    def metadata_keys(self) -> list[str]:
        """Every metadata key some record has, sorted (computed once per index version)."""
        if self._metadata_keys is None:
            self._metadata_keys = sorted({k for metadata in self.metadata for k in metadata})
        return self._metadata_keys

    def _maps(self, records: list[IndexRecord], first_row: int) -> tuple[dict, dict, dict]:
        """Appends ``records`` (rows from ``first_row``) to metadata, rows and exact; returns their filter maps."""
        meta: dict[tuple[str, str], list[int]] = {}
        source: dict[str, list[int]] = {}
        kind: dict[str, list[int]] = {}
        for row, r in enumerate(records, first_row):
            for k, v in r.metadata.items():
                meta.setdefault((k.lower(), v.lower()), []).append(row)
            source.setdefault(r.source.lower(), []).append(row)
            kind.setdefault(r.kind, []).append(row)
            for key in r.question_keys:
                self.exact.setdefault(key, []).append(row)
            # What where_str filters read: metadata (strings) and a table's typed columns by name, the
            # source as column "source" unless a column has that name, and the record's own fields under
            # "@" keys, which no column name can take.
            self.metadata.append(r.metadata)
            self.rows.append({"@metadata": r.metadata, "@source": r.source, "@kind": r.kind, "@id": r.id,
                              "source": r.source, **r.metadata, **r.fields})
        # filters read these maps on every query: row arrays (memory stays proportional to the
        # records whatever the cardinality)
        return ({k: np.asarray(v, np.int64) for k, v in meta.items()},
                {k: np.asarray(v, np.int64) for k, v in source.items()}, kind)

    @staticmethod
    def _units(records: list[IndexRecord], first_row: int) -> tuple[tuple, tuple]:
        q_rows, q_vecs, q_terms, a_rows, a_vecs, a_terms = [], [], [], [], [], []
        for row, r in enumerate(records, first_row):
            for i in range(len(r.q_terms)):
                q_rows.append(row)
                q_vecs.append(r.q_vectors[i])
                q_terms.append(r.q_terms[i])
            if r.a_vector is not None:
                a_rows.append(row)
                a_vecs.append(r.a_vector)
                a_terms.append(r.a_terms)
        return (q_rows, q_vecs, q_terms), (a_rows, a_vecs, a_terms)

    def updated(self, removed: Iterable[int], added: list[IndexRecord], version: int,
                hashes: dict[int, str] | None) -> "MemIndex":
        """A new index: this one without the records ``removed`` (ids), plus ``added``, at ``version``.

        Costs about the size of the change plus a few vectorised passes over the arrays, where
        building from scratch parses every record again (seconds at 100k records); kept records
        keep their relative order and added ones come after them.  This index stays valid.
        """
        added = sorted(added, key=lambda r: r.id)
        drop = {int(i) for i in removed} | {r.id for r in added}
        rec_keep = np.asarray([int(i) not in drop for i in self.ids.tolist()], dtype=bool)
        rec_new = np.cumsum(rec_keep) - 1
        kept = np.flatnonzero(rec_keep)
        n_kept = len(kept)

        def renumber(rows: np.ndarray) -> np.ndarray:
            return rec_new[rows[rec_keep[rows]]]

        new = object.__new__(MemIndex)
        new.version, new.dim, new.hashes = version, self.dim, hashes
        new.ids = np.concatenate((self.ids[kept], np.asarray([r.id for r in added], np.int64)))
        new.n = len(new.ids)
        new.context_only = np.concatenate((self.context_only[kept], np.asarray([r.context_only for r in added], bool)))
        new.passage = np.concatenate((self.passage[kept], np.asarray([r.kind != "qna" for r in added], bool)))
        new.metadata = [self.metadata[i] for i in kept]
        new.rows = [self.rows[i] for i in kept]
        new.exact = {}
        for key, rows in self.exact.items():
            rows = [int(rec_new[r]) for r in rows if rec_keep[r]]
            if rows:
                new.exact[key] = rows
        new._where_columns = None
        meta, source, kind = new._maps(added, n_kept)

        def merged(old: dict, extra: dict) -> dict:
            out = {k: renumber(v) for k, v in old.items()}
            for k, v in extra.items():
                out[k] = np.concatenate((out[k], v)) if k in out else v
            return {k: v for k, v in out.items() if len(v)}

        new._meta_rows = merged(self._meta_rows, meta)
        new._source_rows = merged(self._source_rows, source)
        kinds = {k: renumber(np.flatnonzero(m)) for k, m in self._kind_masks.items()}
        for k, rows in kind.items():
            kinds[k] = np.concatenate((kinds.get(k, np.zeros(0, np.int64)), np.asarray(rows, np.int64)))
        new._kind_masks = {k: new._rows_mask(v) for k, v in kinds.items() if len(v)}
        q, a = self._units(added, n_kept)
        new.q = self.q.updated(rec_keep, rec_new, *q, new.n)
        new.a = self.a.updated(rec_keep, rec_new, *a, new.n)
        new._finish()
        return new

    # -- filters ---------------------------------------------------------------
    def _rows_mask(self, rows: Iterable[int] | np.ndarray) -> np.ndarray:
        mask = np.zeros(self.n, dtype=bool)
        mask[rows if isinstance(rows, np.ndarray) else np.fromiter(rows, np.int64)] = True
        return mask

    def _any(self, masks: Iterable[np.ndarray]) -> np.ndarray:
        out = np.zeros(self.n, dtype=bool)
        for m in masks:
            out |= m
        return out

    def _rows(self, arrays: Iterable[np.ndarray]) -> np.ndarray:
        out = np.zeros(self.n, dtype=bool)
        for rows in arrays:
            out[rows] = True
        return out

    def mask(self, f: Filter | None) -> np.ndarray:
        """Boolean mask over records that pass ``f``."""
        if f is None:
            return np.ones(self.n, dtype=bool)
        if _has_where_nodes(f):  # typed where_str predicates: column arrays built once per index
            from .where_numpy import WhereColumns, where_mask

            if self._where_columns is None:
                source = self._where_source
                self._where_columns = WhereColumns(self.rows) if source is None else \
                    WhereColumns(None, n=self.n, columns=source, basic=self.mask)
            return where_mask(f, self._where_columns)
        if isinstance(f, MetaEq):
            return self._rows([self._meta_rows.get((f.key.lower(), f.value.lower()), _NO_ROWS)])
        if isinstance(f, SourceIn):
            return self._rows(self._source_rows.get(s.lower(), _NO_ROWS) for s in f.sources)
        if isinstance(f, KindIn):
            return self._any(self._kind_masks.get(k, self._none) for k in f.kinds)
        if isinstance(f, IdIn):
            return self._rows_mask(self.row_of[i] for i in f.ids if i in self.row_of)
        if isinstance(f, And):
            out = np.ones(self.n, dtype=bool)
            for child in f.children:
                out &= self.mask(child)
            return out
        if isinstance(f, Or):
            out = np.zeros(self.n, dtype=bool)
            for child in f.children:
                out |= self.mask(child)
            return out
        if isinstance(f, Not):
            return ~self.mask(f.child)
        raise TypeError(f"unknown filter node {f!r}")

    def exhaustive(self) -> bool:
        """Whether a query scores every record (small index) rather than candidates (OPENQNA_EXACT_SEARCH_MAX)."""
        return self.q.n + self.a.n <= settings.exact_search_max()

    # -- primitives used by the store's search API -------------------------------
    def bm25(self, terms: list[str], field: str, allowed: np.ndarray) -> np.ndarray:
        """Best BM25 score per record in ``field`` (0 where nothing matches or not allowed)."""
        fld = self.q if field == "q" else self.a
        scores = fld.per_record_max(fld.bm25_units(terms), 0.0)
        scores[~allowed] = 0.0
        return scores

    def dense(self, query: np.ndarray, field: str, allowed: np.ndarray) -> np.ndarray:
        fld = self.q if field == "q" else self.a
        sims = fld.dense(query)
        sims[~allowed] = -1.0
        return sims

    def coverage(self, terms: list[str], field: str, allowed: np.ndarray) -> np.ndarray:
        """Best idf-weighted share of the query's unigrams found in one unit of ``field``."""
        fld = self.q if field == "q" else self.a
        weights = {t: fld.idf(t) for t in set(terms) if " " not in t}
        cov = fld.per_record_max(fld.coverage_units(weights), 0.0)
        cov[~allowed] = 0.0
        return cov

