"""An in-process search index derived from the store (DESIGN decision 7).

The store is the source of truth; this index is built from its rows by the index cache
(``index_cache.py``) and answers the two retrieval primitives with numpy: dense similarity
and BM25, per record, for the question field ("q", one unit per question) and the answer
field ("a", one unit per answer or passage), each a ``Field`` (``field.py``, its terms in
``postings.py``).  Filters are evaluated to a boolean mask over records with inverted maps,
then pushed into both primitives, so a selective filter still yields every matching record.

A knowledge base with vectors in the multilingual space (``Service``'s second embedder, for
Chinese, Japanese and Korean) also holds them, as fields "mq" and "ma" of the same units without
terms; ``multilingual()`` is the same index searched in that space.  An index none of whose
records has them holds nothing more (``mq`` and ``ma`` are None).  Such a knowledge base also holds the same
texts' vectors by the universal sentence encoder ("uq" and "ua"): ``crossing()`` searches both models at once,
for a question that crosses languages.

Why this file is over 500 lines: the masks of every filter node, the two primitives and the
multilingual view read the same per-record arrays; the fields and postings already live apart
(``field.py``, ``postings.py``), and the filter masks are the next cut.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from openqna import settings
from openqna.filters.match import And, Filter, IdIn, KindIn, MetaEq, Not, Or, SourceIn
from openqna.index.field import Field
from openqna.index.postings import Postings

if TYPE_CHECKING:
    from openqna.filters.masks import Column, WhereColumns


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
    fields: dict[str, Any] = field(default_factory=dict)  # typed column values (where_str)
    mq_vectors: list[np.ndarray] = field(default_factory=list)  # the multilingual space's, one per question or none
    ma_vector: np.ndarray | None = None
    uq_vectors: list[np.ndarray] = field(default_factory=list)  # the universal sentence encoder's, as mq_vectors
    ua_vector: np.ndarray | None = None


MULTILINGUAL_DIM = 384  # of the multilingual space's vectors (models.embedder.MultilingualE5)
USE_DIM = 512  # of the universal sentence encoder's, read beside them across languages (``MemIndex.crossing``)
CROSSING_DIM = MULTILINGUAL_DIM + USE_DIM


Units = tuple[list[int], list[np.ndarray], list[list[str]]]  # a field's new units: record rows, vectors, terms
_BASIC = (MetaEq, SourceIn, KindIn, IdIn)
_NO_ROWS = np.zeros(0, np.int64)
T = TypeVar("T")


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
        self.rows: list[dict[str, Any]] = []
        self.exact: dict[str, list[int]] = {}
        self._where_columns: WhereColumns | None = None
        maps = self._maps(records, 0)
        self.meta_rows, self.source_rows = maps[0], maps[1]
        self.kind_masks = {k: self._rows_mask(v) for k, v in maps[2].items()}
        q, a = self._units(records, 0)
        self.q = Field(q[0], q[1], q[2], self.n, dim)
        self.a = Field(a[0], a[1], a[2], self.n, dim)
        mq, ma, uq, ua = self._multilingual_units(records, 0)
        self.mq = _multilingual_field(None, None, *mq, self.n)
        self.ma = _multilingual_field(None, None, *ma, self.n)
        self.uq = _multilingual_field(None, None, *uq, self.n, USE_DIM)
        self.ua = _multilingual_field(None, None, *ua, self.n, USE_DIM)
        self._finish()

    # Per-record Python state.  An index loaded from disk (index/saved_index.py) reads it
    # from disk on first use: a query without a where_str or an id filter never needs it.
    _lazy: Callable[[], dict[str, Any]] | None = None
    _metadata: list[dict[str, str]]
    _where_rows: list[dict[str, Any]]
    _hashes: dict[int, str] | None
    _row_of: dict[int, int] | None = None
    # a saved index's where_str columns (filters.masks.encode_columns)
    _where_source: Callable[[], dict[str, Column]] | None = None

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
    def rows(self) -> list[dict[str, Any]]:
        """Per record, what where_str filters read (see ``_maps``)."""
        self._load_lazy()
        return self._where_rows

    @rows.setter
    def rows(self, value: list[dict[str, Any]]) -> None:
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
    def from_saved(cls, *, version: int, dim: int, n: int, ids: np.ndarray, context_only: np.ndarray,
                   passage: np.ndarray, exact: dict[str, list[int]], meta_rows: dict[tuple[str, str], np.ndarray],
                   source_rows: dict[str, np.ndarray], kind_rows: dict[str, np.ndarray], metadata_keys: list[str],
                   q: Field, a: Field, records: Callable[[], dict[str, Any]],
                   where_columns: Callable[[], dict[str, Column]], mq: Field | None = None,
                   ma: Field | None = None, uq: Field | None = None, ua: Field | None = None) -> MemIndex:
        """An index read back from disk (``index/saved_index.py``), its arrays possibly memory maps.

        ``records()`` reads the per-record state (metadata, where_str rows, content hashes) and
        ``where_columns()`` the encoded where_str columns, each on first use: a query without a
        where_str or an id filter never needs them.
        """
        index = object.__new__(cls)
        index.version, index.dim, index.n = version, dim, n
        index.ids, index.context_only, index.passage = ids, context_only, passage
        index.exact, index.meta_rows, index.source_rows = exact, meta_rows, source_rows
        index.kind_masks = {k: index._rows_mask(rows) for k, rows in kind_rows.items()}
        index._where_columns = None
        index._lazy, index._where_source = records, where_columns
        index.q, index.a, index.mq, index.ma, index.uq, index.ua = q, a, mq, ma, uq, ua
        index._finish()
        index._metadata_keys = metadata_keys
        return index

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
        maps: tuple[dict[Any, list[np.ndarray]], ...] = ({}, {}, {})  # meta_rows, source_rows, kind rows
        for part, first in zip(parts, firsts):
            for key, rows in part.exact.items():
                new.exact.setdefault(key, []).extend(r + int(first) for r in rows)
            kinds = {k: np.flatnonzero(m) for k, m in part.kind_masks.items()}
            owns: tuple[dict[Any, np.ndarray], ...] = (part.meta_rows, part.source_rows, kinds)
            for joined, own in zip(maps, owns):
                for key, key_rows in own.items():
                    joined.setdefault(key, []).append(key_rows + first)
        new.meta_rows, new.source_rows, kinds = ({k: np.concatenate(v) for k, v in m.items()} for m in maps)
        new._where_columns = None
        new.kind_masks = {k: new._rows_mask(v) for k, v in kinds.items()}
        for name in ("q", "a", "mq", "ma", "uq", "ua"):
            fields = [getattr(p, name) for p in parts]
            if name in ("mq", "ma", "uq", "ua"):
                if all(f is None for f in fields):
                    setattr(new, name, None)
                    continue
                width = USE_DIM if name in ("uq", "ua") else MULTILINGUAL_DIM
                fields = [_empty_multilingual(p.n, width) if f is None else f for f, p in zip(fields, parts)]
            dim = fields[0].dim
            unit_firsts = np.cumsum([0] + [f.n for f in fields])
            vocab: dict[str, int] = {}
            tids, units, tfs = [], [], []
            for fld, first in zip(fields, unit_firsts):
                joined_tids = np.fromiter((vocab.setdefault(t, len(vocab)) for t in fld.postings.vocab), np.int64,
                                          count=len(fld.postings.vocab))  # this part's term ids -> joined ids
                tids.append(joined_tids[fld.postings.tids].astype(np.int32))
                units.append((fld.postings.units + first).astype(np.int32))
                tfs.append(fld.postings.tfs)
            tids_all = np.concatenate(tids) if tids else np.zeros(0, np.int32)
            order = np.argsort(tids_all, kind="stable")  # parts come in unit order: units stay sorted per term
            postings = Postings(vocab, tids_all[order], np.concatenate(units)[order] if units else tids_all,
                                 np.concatenate(tfs)[order] if tfs else np.zeros(0, np.float32))
            field_rows = np.concatenate([f.rows + first for f, first in zip(fields, firsts)]) if fields else None
            setattr(new, name, Field(field_rows if field_rows is not None else np.zeros(0, np.int64),
                                      np.concatenate([f.matrix for f in fields]),
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
        self._multilingual: MemIndex | None = None
        self._crossing: MemIndex | None = None

    def derived(self, name: str, compute: Callable[[], T]) -> T:
        """``compute()``, once for this index version: the one home of what other layers derive from an index.

        Ranking keeps its per-KB state here (the KB's adaptation, its headings, its answers' informativeness, the
        typo vocabulary) and asking the deployment's synonym groups prepared for matching (``analyze.Synonyms``),
        read from the store on first need: a change of content or synonyms moves the change sequence, so the next
        question gets a new index that starts without any of it, and nothing here keeps an old version alive.  The multilingual view is an index of its own.
        Two threads may compute the same name at once; both get an equal value and one is kept.
        """
        state: dict[str, Any] = self.__dict__.setdefault("_derived", {})
        if name not in state:
            state[name] = compute()
        value: T = state[name]
        return value

    def multilingual(self) -> MemIndex | None:
        """This index with its units' vectors in the multilingual space, or None when not every unit has one.

        The same records, terms, filters and maps (shared, not copied); only the vectors differ, so the
        ranker scores it as it scores any index.  A store's own vector search (``nearest_rows``) searches
        the main space only and is left out.  Made once per index version.
        """
        if self._multilingual is None:
            q = self.q.with_vectors(self.mq if self.mq is not None else _empty_multilingual(self.n))
            a = self.a.with_vectors(self.ma if self.ma is not None else _empty_multilingual(self.n))
            if q is None or a is None or (self.mq is None and self.ma is None):
                return None
            view = copy.copy(self)
            view.q, view.a, view.dim, view.nearest_rows = q, a, MULTILINGUAL_DIM, None
            view.mq = view.ma = view.uq = view.ua = None
            view.__dict__.pop("_derived", None)  # derived from other vectors: the view derives its own
            self._multilingual = view
        return self._multilingual

    def crossing(self) -> MemIndex | None:
        """This index with its units' vectors in the multilingual space and the universal sentence encoder's side by
        side, each weighing half (``[e5, use] / sqrt(2)``: a dot product is the mean of the two models' cosines), or
        None when not every unit has both.

        A question that crosses languages (``multilingual.crosses``) is ranked here: the two models err on different
        questions, and their mean cosine found the answer more often than E5's alone on every cross-lingual dev and
        test split of make eval (XQuAD's English KBs asked in Chinese, its Chinese ones in English: +6 to +8 points
        of top-1 by cosine alone), where it cost JSQuAD 3 points asked in its own language: so only across.  Made
        once per index version, on the first such question (its vectors are copied: 896 floats a unit).
        """
        if self._crossing is None:
            view = self.multilingual()
            if view is None or self.uq is None and self.ua is None:
                return None
            q = self.q.with_vectors(_side_by_side(self.mq, self.uq, self.n))
            a = self.a.with_vectors(_side_by_side(self.ma, self.ua, self.n))
            if q is None or a is None:
                return None
            crossing = copy.copy(view)
            crossing.q, crossing.a, crossing.dim = q, a, CROSSING_DIM
            crossing.__dict__.pop("_derived", None)
            self._crossing = crossing
        return self._crossing

    def multilingual_units(self) -> int:
        """How many units have a vector in the multilingual space (all of them: ``multilingual()`` is not None)."""
        return sum(f.n for f in (self.mq, self.ma) if f is not None)

    @cached_property
    def only_passages(self) -> bool:
        """Whether every record is a passage (a vector store, a document KB): nothing reads its question fields."""
        return bool(self.passage.all())

    @cached_property
    def mostly_one_question(self) -> bool:
        """Whether at least half of the QnA records have a single question (an FAQ page, not an intent set)."""
        counts = self.q.counts[~self.passage] if self.n else np.zeros(0)
        return bool(len(counts)) and float(np.mean(counts <= 1)) >= 0.5

    @cached_property
    def has_passages(self) -> bool:
        """Whether some record is a passage (a document KB, say, rather than an FAQ page)."""
        return bool(self.passage.any())

    def metadata_keys(self) -> list[str]:
        """Every metadata key some record has, sorted (computed once per index version)."""
        if self._metadata_keys is None:
            self._metadata_keys = sorted({k for metadata in self.metadata for k in metadata})
        return self._metadata_keys

    def _maps(self, records: list[IndexRecord], first_row: int
              ) -> tuple[dict[tuple[str, str], np.ndarray], dict[str, np.ndarray], dict[str, list[int]]]:
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
    def _units(records: list[IndexRecord], first_row: int) -> tuple[Units, Units]:
        q_rows: list[int] = []
        q_vecs: list[np.ndarray] = []
        q_terms: list[list[str]] = []
        a_rows: list[int] = []
        a_vecs: list[np.ndarray] = []
        a_terms: list[list[str]] = []
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

    @staticmethod
    def _multilingual_units(records: list[IndexRecord], first_row: int) -> list[tuple[list[int], list[np.ndarray]]]:
        """The records' units in the multilingual space, as ``_units`` (no terms): (rows, vectors) of "mq", "ma", "uq"
        and "ua".

        A vector of another length in "mq" or "ma" was made by the space's model before this one (the universal
        sentence encoder's 512 dimensions): it is left out, so the index has no multilingual view until the records
        are embedded again (``Service.upgrade_multilingual``), and its CJK questions are ranked by their keywords
        meanwhile."""
        out: list[tuple[list[int], list[np.ndarray]]] = []
        for many, one, width in (("mq_vectors", "ma_vector", MULTILINGUAL_DIM), ("uq_vectors", "ua_vector", USE_DIM)):
            q_rows: list[int] = []
            q_vecs: list[np.ndarray] = []
            a_rows: list[int] = []
            a_vecs: list[np.ndarray] = []
            for row, r in enumerate(records, first_row):
                mine = [v for v in getattr(r, many) if len(v) == width]
                q_rows.extend([row] * len(mine))
                q_vecs.extend(mine)
                vector = getattr(r, one)
                if vector is not None and len(vector) == width:
                    a_rows.append(row)
                    a_vecs.append(vector)
            out += [(q_rows, q_vecs), (a_rows, a_vecs)]
        return out

    def updated(self, removed: Iterable[int], added: list[IndexRecord], version: int,
                hashes: dict[int, str] | None) -> "MemIndex":
        """A new index: this one without the records ``removed`` (ids), plus ``added``, at ``version``.

        Costs about the size of the change plus a few vectorised passes over the arrays, where
        building from scratch parses every record again (seconds at 100k records); kept records
        keep their relative order and added ones come after them.  This index stays valid.
        """
        added = sorted(added, key=lambda r: r.id)
        drop = np.fromiter({int(i) for i in removed} | {r.id for r in added}, np.int64)
        rec_keep = ~np.isin(self.ids, drop)
        rec_new = np.cumsum(rec_keep) - 1
        kept = np.flatnonzero(rec_keep)
        n_kept = len(kept)
        # only new records (no record dropped or replaced): every row keeps its number, so the Python structures
        # are copied as they are instead of renumbered row by row (seconds at a million records)
        appended = n_kept == self.n

        def renumber(rows: np.ndarray) -> np.ndarray:
            renumbered: np.ndarray = rec_new[rows[rec_keep[rows]]]
            return renumbered

        new = object.__new__(MemIndex)
        new.version, new.dim, new.hashes = version, self.dim, hashes
        new.ids = np.concatenate((self.ids[kept], np.asarray([r.id for r in added], np.int64)))
        new.n = len(new.ids)
        new.context_only = np.concatenate((self.context_only[kept], np.asarray([r.context_only for r in added], bool)))
        new.passage = np.concatenate((self.passage[kept], np.asarray([r.kind != "qna" for r in added], bool)))
        if appended:
            new.metadata, new.rows = list(self.metadata), list(self.rows)
            new.exact = dict(self.exact)
            for key in {key for r in added for key in r.question_keys if key in new.exact}:
                new.exact[key] = list(new.exact[key])  # _maps appends to them: this index's lists stay as they are
        else:
            metadata, rows_of = self.metadata, self.rows  # properties: read once, not per record
            new.metadata = [metadata[i] for i in kept.tolist()]
            new.rows = [rows_of[i] for i in kept.tolist()]
            new.exact = {}
            for key, rows in self.exact.items():
                rows = [int(rec_new[r]) for r in rows if rec_keep[r]]
                if rows:
                    new.exact[key] = rows
        new._where_columns = None
        meta, source, kind = new._maps(added, n_kept)

        def merged(old: dict[Any, np.ndarray], extra: dict[Any, np.ndarray]) -> dict[Any, np.ndarray]:
            out = {k: renumber(v) for k, v in old.items()}
            for k, v in extra.items():
                out[k] = np.concatenate((out[k], v)) if k in out else v
            return {k: v for k, v in out.items() if len(v)}

        new.meta_rows = merged(self.meta_rows, meta)
        new.source_rows = merged(self.source_rows, source)
        kinds = {k: renumber(np.flatnonzero(m)) for k, m in self.kind_masks.items()}
        for k, rows in kind.items():
            kinds[k] = np.concatenate((kinds.get(k, np.zeros(0, np.int64)), np.asarray(rows, np.int64)))
        new.kind_masks = {k: new._rows_mask(v) for k, v in kinds.items() if len(v)}
        q, a = self._units(added, n_kept)
        new.q = self.q.updated(rec_keep, rec_new, *q, new.n)
        new.a = self.a.updated(rec_keep, rec_new, *a, new.n)
        mq, ma, uq, ua = self._multilingual_units(added, n_kept)
        new.mq = _multilingual_field(self.mq, (rec_keep, rec_new), *mq, new.n)
        new.ma = _multilingual_field(self.ma, (rec_keep, rec_new), *ma, new.n)
        new.uq = _multilingual_field(self.uq, (rec_keep, rec_new), *uq, new.n, USE_DIM)
        new.ua = _multilingual_field(self.ua, (rec_keep, rec_new), *ua, new.n, USE_DIM)
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
            from openqna.filters.masks import WhereColumns, where_mask

            if self._where_columns is None:
                source = self._where_source
                self._where_columns = WhereColumns(self.rows) if source is None else \
                    WhereColumns(None, n=self.n, columns=source, basic=self.mask)
            return where_mask(f, self._where_columns)
        if isinstance(f, MetaEq):
            return self._rows([self.meta_rows.get((f.key.lower(), f.value.lower()), _NO_ROWS)])
        if isinstance(f, SourceIn):
            return self._rows(self.source_rows.get(s.lower(), _NO_ROWS) for s in f.sources)
        if isinstance(f, KindIn):
            return self._any(self.kind_masks.get(k, self._none) for k in f.kinds)
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

    # -- primitives the ranker scores with --------------------------------------------
    def bm25(self, terms: list[str], field: str, allowed: np.ndarray) -> np.ndarray:
        """Best BM25 score per record in ``field`` (0 where nothing matches or not allowed)."""
        fld = self.q if field == "q" else self.a
        scores = fld.per_record_max(fld.bm25_units(terms), 0.0)
        scores[~allowed] = 0.0
        return scores

    def dense(self, query: np.ndarray, field: str, allowed: np.ndarray, products: np.ndarray | None = None
              ) -> np.ndarray:
        fld = self.q if field == "q" else self.a
        sims = fld.dense(query, products)
        sims[~allowed] = -1.0
        return sims

    def coverage(self, terms: list[str], field: str, allowed: np.ndarray) -> np.ndarray:
        """Best idf-weighted share of the query's unigrams found in one unit of ``field``."""
        fld = self.q if field == "q" else self.a
        weights = {t: fld.idf(t) for t in set(terms) if " " not in t}
        cov = fld.per_record_max(fld.coverage_units(weights), 0.0)
        cov[~allowed] = 0.0
        return cov



def _empty_multilingual(n_records: int, dim: int = MULTILINGUAL_DIM) -> Field:
    return Field([], np.zeros((0, dim), np.float32), [], n_records, dim)


def _side_by_side(e5: Field | None, use: Field | None, n_records: int) -> Field:
    """``e5``'s and ``use``'s vectors of the same units side by side, each over sqrt(2) (``MemIndex.crossing``); an
    empty field when either is missing or they differ in units, which ``Field.with_vectors`` then refuses."""
    e5 = e5 if e5 is not None else _empty_multilingual(n_records)
    use = use if use is not None else _empty_multilingual(n_records, USE_DIM)
    if e5.n != use.n or not np.array_equal(e5.rows, use.rows):
        return _empty_multilingual(n_records, CROSSING_DIM)
    matrix = np.hstack((e5.matrix, use.matrix)).astype(np.float32) * np.float32(np.sqrt(0.5))
    return Field(e5.rows, matrix, [[] for _ in range(e5.n)], n_records, CROSSING_DIM)


def _multilingual_field(old: Field | None, change: tuple[np.ndarray, np.ndarray] | None, rows: list[int],
                        vectors: list[np.ndarray], n_records: int, dim: int = MULTILINGUAL_DIM) -> Field | None:
    """A multilingual field of ``n_records`` (vectors of ``dim``): ``old`` with ``change`` (``Field.updated``'s record
    maps) and the units ``rows``/``vectors`` added, or just those; None when it would hold no unit (English-only
    indexes hold nothing)."""
    if old is None and not rows:
        return None
    if change is None:
        return Field(rows, vectors, [[] for _ in rows], n_records, dim)
    rec_keep, rec_new = change
    base = old if old is not None else _empty_multilingual(len(rec_keep), dim)
    new = base.updated(rec_keep, rec_new, rows, vectors, [[] for _ in rows], n_records)
    return new if new.n else None
