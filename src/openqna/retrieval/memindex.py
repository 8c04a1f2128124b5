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
from typing import Callable, Iterable

import numpy as np

from .. import settings
from .filters import And, Filter, IdIn, KindIn, MetaEq, Not, Or, SourceIn

K1 = 1.2
B = 0.75


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
    q_vectors: np.ndarray  # (n_questions, dim) float32
    q_terms: list[list[str]]
    a_vector: np.ndarray | None  # (dim,) float32
    a_terms: list[str]
    fields: dict = field(default_factory=dict)  # typed column values (where_str)


class _Field:
    """Units of one field, grouped contiguously by record row for reduceat."""

    def __init__(self, rows: list[int], vectors: list[np.ndarray], terms: list[list[str]], n_records: int, dim: int):
        self.n = len(rows)
        self.rows = np.asarray(rows, dtype=np.int64)
        self.matrix = np.vstack(vectors).astype(np.float32, copy=False) if vectors else np.zeros((0, dim), np.float32)
        self.lengths = np.asarray([len(t) for t in terms], dtype=np.float32)
        self.avgdl = float(self.lengths.mean()) if self.n else 1.0
        postings: dict[str, tuple[list[int], list[int]]] = {}
        for unit, unit_terms in enumerate(terms):
            counts: dict[str, int] = {}
            for term in unit_terms:
                counts[term] = counts.get(term, 0) + 1
            for term, tf in counts.items():
                units, tfs = postings.setdefault(term, ([], []))
                units.append(unit)
                tfs.append(tf)
        self.postings = {t: (np.asarray(u, np.int64), np.asarray(f, np.float32)) for t, (u, f) in postings.items()}
        # Segment starts for records that have units in this field (rows are sorted).
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
        self._ann = None
        self._ann_lock = threading.Lock()

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
    def units_of(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(unit ids of ``rows`` in order, segment start of each row that has units, which rows have units)."""
        lens = self.hi[rows] - self.lo[rows]
        has = lens > 0
        lens = lens[has]
        starts = np.cumsum(lens) - lens
        units = np.repeat(self.lo[rows[has]] - starts, lens) + np.arange(int(lens.sum()), dtype=np.int64)
        return units, starts, has

    @staticmethod
    def max_per_row(values: np.ndarray, starts: np.ndarray, has: np.ndarray, fill: float) -> np.ndarray:
        out = np.full(len(has), fill, dtype=np.float32)
        if len(starts):
            out[has] = np.maximum.reduceat(values, starts)
        return out

    def dense_rows(self, query: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Best cosine of each of ``rows`` (−1 where the record has no unit here), computed exactly."""
        units, starts, has = self.units_of(rows)
        return self.max_per_row(self.matrix[units] @ query if len(units) else units, starts, has, -1.0)

    def nearest_units(self, query: np.ndarray, k: int, allowed: np.ndarray | None) -> np.ndarray:
        """About the ``k`` units nearest ``query`` among ``allowed`` (a bool per unit; None: all).

        Exact when the field or the allowed part of it is small; otherwise from the IVF index,
        probing more lists (then exactly) when a selective filter leaves too few in the probed ones.
        """
        count = self.n if allowed is None else int(allowed.sum())
        k = min(k, count)
        if k <= 0:
            return np.zeros(0, np.int64)
        ann = self.ann()
        if ann is not None and count > settings.exact_search_max():
            found = ann.search(query, k, allowed)
            if len(found) < k:
                found = ann.search(query, k, allowed, nprobe=ann.nprobe * 8)
            if len(found) >= k:
                return found
        units = np.arange(self.n) if allowed is None else np.flatnonzero(allowed)
        sims = (self.matrix @ query) if allowed is None else self.matrix[units] @ query
        best = np.argpartition(-sims, k - 1)[:k] if k < len(units) else np.arange(len(units))
        return units[best[np.argsort(-sims[best], kind="stable")]]

    def ann(self):
        """The IVF index of this field, built on first use; None while the field is small enough to scan."""
        if self.n <= settings.exact_search_max():
            return None
        if self._ann is None:
            with self._ann_lock:
                if self._ann is None:
                    from .ann import IVFIndex

                    self._ann = IVFIndex(self.matrix)
        return self._ann

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

    def coverage_units(self, weights: dict[str, float]) -> np.ndarray:
        """Share of the query's idf mass each unit contains (0..1)."""
        cov = np.zeros(self.n, np.float32)
        total = sum(weights.values())
        if not self.n or total <= 0:
            return cov
        for term, w in weights.items():
            hit = self.postings.get(term)
            if hit is not None:
                cov[hit[0]] += w
        return cov / total


_BASIC = (MetaEq, SourceIn, KindIn, IdIn)
_NO_ROWS = np.zeros(0, np.int64)


def _has_where_nodes(f: Filter) -> bool:
    if isinstance(f, (And, Or)):
        return any(_has_where_nodes(c) for c in f.children)
    if isinstance(f, Not):
        return _has_where_nodes(f.child)
    return not isinstance(f, _BASIC)


class MemIndex:
    """The searchable state of one knowledge base deployment at one change sequence."""

    def __init__(self, records: list[IndexRecord], dim: int, version: int):
        records = sorted(records, key=lambda r: r.id)
        self.version = version
        self.dim = dim
        self.ids = np.asarray([r.id for r in records], dtype=np.int64)
        self.row_of = {r.id: i for i, r in enumerate(records)}
        self.n = len(records)
        self.context_only = np.asarray([r.context_only for r in records], dtype=bool)
        self.passage = np.asarray([r.kind != "qna" for r in records], dtype=bool)
        self._meta: dict[tuple[str, str], list[int]] = {}
        self._source: dict[str, list[int]] = {}
        self._kind: dict[str, list[int]] = {}
        self.exact: dict[str, list[int]] = {}
        # What where_str filters read: metadata (strings) and a table's typed columns by name, the
        # source as column "source" unless a column has that name, and the record's own fields under
        # "@" keys, which no column name can take.
        self.metadata = [r.metadata for r in records]
        self._where_columns = None
        self.rows = [{"@metadata": r.metadata, "@source": r.source, "@kind": r.kind, "@id": r.id,
                      "source": r.source, **r.metadata, **r.fields} for r in records]
        q_rows, q_vecs, q_terms, a_rows, a_vecs, a_terms = [], [], [], [], [], []
        for row, r in enumerate(records):
            for k, v in r.metadata.items():
                self._meta.setdefault((k.lower(), v.lower()), []).append(row)
            self._source.setdefault(r.source.lower(), []).append(row)
            self._kind.setdefault(r.kind, []).append(row)
            for key in r.question_keys:
                self.exact.setdefault(key, []).append(row)
            for i in range(len(r.q_terms)):
                q_rows.append(row)
                q_vecs.append(r.q_vectors[i])
                q_terms.append(r.q_terms[i])
            if r.a_vector is not None:
                a_rows.append(row)
                a_vecs.append(r.a_vector)
                a_terms.append(r.a_terms)
        self.q = _Field(q_rows, q_vecs, q_terms, self.n, dim)
        self.a = _Field(a_rows, a_vecs, a_terms, self.n, dim)
        # filters read these maps on every query: row arrays (memory stays proportional to the
        # records whatever the cardinality), and whole masks for the few record kinds
        self._meta_rows = {k: np.asarray(v, np.int64) for k, v in self._meta.items()}
        self._source_rows = {k: np.asarray(v, np.int64) for k, v in self._source.items()}
        self._kind_masks = {k: self._rows_mask(v) for k, v in self._kind.items()}
        self._none = np.zeros(self.n, dtype=bool)
        self._none.flags.writeable = False
        # A store that searches vectors itself (PostgreSQL's pgvector HNSW) sets this: called as
        # nearest_rows(field, query, k, filter, eligible), it returns record rows or None to search here.
        self.nearest_rows: Callable[[str, np.ndarray, int, Filter | None, np.ndarray], np.ndarray | None] | None = None

    # -- filters ---------------------------------------------------------------
    def _rows_mask(self, rows: Iterable[int]) -> np.ndarray:
        mask = np.zeros(self.n, dtype=bool)
        mask[list(rows)] = True
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
                self._where_columns = WhereColumns(self.rows)
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
