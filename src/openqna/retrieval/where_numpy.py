"""``where_str`` filters evaluated as numpy masks over a whole index at once.

``where.evaluate`` is the reference, one row at a time.  Here every column a filter reads
(through its function, e.g. ``lower(title)``) is read once per index with the reference's
own ``_read`` and kept as an object array plus a NULL mask; a query then combines
vectorised comparisons with SQL's three-valued logic as (true, unknown) mask pairs.  The
test suite checks that both give the same rows on every legit and generated filter.
"""

from __future__ import annotations

from datetime import datetime
from typing import Callable

import numpy as np

from .filters import And, IdIn, KindIn, MetaEq, Not, Or, SourceIn
from .where import (
    _OPS,
    Between,
    Compare,
    Empty,
    HasAll,
    HasAny,
    InList,
    IsNull,
    Like,
    Ref,
    _like_regex,
    _read,
    ascii_lower,
    evaluate,
)

Masks = tuple[np.ndarray, np.ndarray]  # (true, unknown)


Column = tuple[np.ndarray, list]  # (a code per row, -1 where NULL or absent; the distinct values)


def encode_columns(rows: list[dict]) -> dict[str, Column]:
    """The columns of ``rows`` (every key but the record's own "@" keys), each as codes into its distinct values."""
    out: dict[str, Column] = {}
    for name in sorted({k for row in rows for k in row if not k.startswith("@")}):
        codes = np.full(len(rows), -1, np.int32)
        values: list = []
        seen: dict = {}
        for i, row in enumerate(rows):
            v = row.get(name)
            if v is None:
                continue
            key = (type(v), v if isinstance(v, (str, int, float, bool, datetime)) else id(v))  # 1 and True differ
            code = seen.get(key)
            if code is None:
                code = seen[key] = len(values)
                values.append(v)
            codes[i] = code
        out[name] = (codes, values)
    return out


class WhereColumns:
    """Per-index cache of the values each Ref reads, as object arrays with a NULL mask.

    Built over the index's rows, or, for an index loaded from a snapshot, over its columns as
    ``encode_columns`` wrote them (loaded on first use; a function then reads each distinct
    value once instead of each row) with ``basic`` giving the masks of MetaEq/SourceIn/KindIn/IdIn.
    """

    def __init__(self, rows: list[dict] | None, *, n: int | None = None,
                 columns: Callable[[], dict[str, Column]] | None = None,
                 basic: Callable[[object], np.ndarray] | None = None):
        self.rows = rows
        self.n = len(rows) if rows is not None else int(n or 0)
        self._load_columns, self._columns = columns, None
        self.basic = basic
        self._cache: dict = {}

    def _column(self, name: str) -> Column:
        if self._columns is None:
            self._columns = self._load_columns()
        return self._columns.get(name) or (np.full(self.n, -1, np.int32), [])

    def values(self, ref: Ref) -> tuple[np.ndarray, np.ndarray]:
        hit = self._cache.get(ref)
        if hit is None:
            if self.rows is None:
                codes, distinct = self._column(ref.column.name)
                mapped = np.empty(len(distinct) + 1, dtype=object)
                for i, v in enumerate(distinct):
                    mapped[i] = _read(ref, {ref.column.name: v})
                mapped[-1] = _read(ref, {})  # code -1: NULL or absent
                vals = mapped[codes]
            else:
                vals = np.empty(self.n, dtype=object)
                vals[:] = [_read(ref, row) for row in self.rows]
            null = np.fromiter((v is None for v in vals), dtype=bool, count=self.n)
            hit = self._cache[ref] = (vals, null)
        return hit

    def numbers(self, ref: Ref) -> tuple[np.ndarray, np.ndarray] | None:
        """The Ref's values as float64 (DateTimes as POSIX seconds), when that is exact; else None."""
        key = ("numbers", ref)
        if key not in self._cache:
            vals, null = self.values(ref)
            live = vals[~null]
            out = None
            if all(type(v) is float or (type(v) is int and abs(v) < 2**53) for v in live):
                out = np.where(null, 0.0, vals).astype(np.float64)
            elif all(isinstance(v, datetime) for v in live):
                out = np.zeros(self.n, np.float64)
                out[~null] = [v.timestamp() for v in live]
            self._cache[key] = (out, null) if out is not None else None  # type: ignore[index]
        return self._cache[key]  # type: ignore[return-value]

    def members(self, ref: Ref) -> dict[str, np.ndarray]:
        """For an Array(String) column: each element value and the rows whose array holds it."""
        key = ("members", ref)
        if key not in self._cache:
            vals, _ = self.values(ref)
            rows: dict[str, list[int]] = {}
            for i, items in enumerate(vals):
                for item in set(items):
                    rows.setdefault(item, []).append(i)
            index = {}
            for item, where in rows.items():
                mask = np.zeros(self.n, dtype=bool)
                mask[where] = True
                index[item] = mask
            self._cache[key] = index  # type: ignore[assignment]
        return self._cache[key]  # type: ignore[return-value]

    def present(self, name: str) -> np.ndarray:
        if self.rows is None:
            return self._column(name)[0] >= 0
        return np.fromiter((row.get(name) is not None for row in self.rows), dtype=bool, count=self.n)


def _apply(vals: np.ndarray, null: np.ndarray, test: Callable[[object], bool]) -> np.ndarray:
    out = np.zeros(len(vals), dtype=bool)
    idx = np.flatnonzero(~null)
    if len(idx):
        out[idx] = np.fromiter((test(v) for v in vals[idx]), dtype=bool, count=len(idx))
    return out


def _masks(f, cols: WhereColumns) -> Masks:
    n = cols.n
    none = np.zeros(n, dtype=bool)
    if isinstance(f, And):
        parts = [_masks(c, cols) for c in f.children]
        true = np.logical_and.reduce([t for t, _ in parts])
        false = np.logical_or.reduce([~t & ~u for t, u in parts])
        return true, ~true & ~false
    if isinstance(f, Or):
        parts = [_masks(c, cols) for c in f.children]
        true = np.logical_or.reduce([t for t, _ in parts])
        unknown = np.logical_or.reduce([u for _, u in parts]) & ~true
        return true, unknown
    if isinstance(f, Not):
        t, u = _masks(f.child, cols)
        return ~t & ~u, u
    if isinstance(f, (MetaEq, SourceIn, KindIn, IdIn)):
        if cols.rows is None:
            return cols.basic(f), none
        return np.fromiter((evaluate(f, row) for row in cols.rows), dtype=bool, count=n), none
    if isinstance(f, IsNull):
        present = cols.present(f.column.name)
        return (present if f.negated else ~present), none
    if isinstance(f, (HasAny, HasAll)):
        members = cols.members(Ref(f.column))
        masks = [members.get(v, none) for v in f.values]
        if not masks:
            return (none.copy() if isinstance(f, HasAny) else ~none), none
        combine = np.logical_or.reduce if isinstance(f, HasAny) else np.logical_and.reduce
        return combine(masks), none
    if isinstance(f, Empty):
        vals, null = cols.values(Ref(f.column))
        return _apply(vals, null, lambda v: (len(v) == 0) is not f.negated), null
    numbers = cols.numbers(f.ref) if isinstance(f, (Compare, Between)) else None
    if numbers is not None:
        arr, null = numbers
        if isinstance(f, Compare) and _numeric(f.value):
            return _NP_OPS[f.op](arr, _as_float(f.value)) & ~null, null
        if isinstance(f, Between) and _numeric(f.lo) and _numeric(f.hi):
            inside = (arr >= _as_float(f.lo)) & (arr <= _as_float(f.hi))
            return (inside != f.negated) & ~null, null
    vals, null = cols.values(f.ref)
    if isinstance(f, Compare):
        op, value = _OPS[f.op], f.value
        return _apply(vals, null, lambda v: op(v, value)), null
    if isinstance(f, InList):
        values = f.values
        return _apply(vals, null, lambda v: (v in values) is not f.negated), null
    if isinstance(f, Between):
        return _apply(vals, null, lambda v: (f.lo <= v <= f.hi) is not f.negated), null
    if isinstance(f, Like):
        regex = _like_regex(f.pattern, f.case_insensitive)
        fold = ascii_lower if f.case_insensitive else (lambda s: s)
        return _apply(vals, null, lambda v: (regex.fullmatch(fold(v)) is not None) is not f.negated), null
    raise TypeError(f"unknown filter node {f!r}")


_NP_OPS = {"=": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal, ">": np.greater,
           ">=": np.greater_equal}


def _numeric(v: object) -> bool:
    return type(v) is float or (type(v) is int and abs(v) < 2**53) or isinstance(v, datetime)


def _as_float(v: object) -> float:
    return v.timestamp() if isinstance(v, datetime) else float(v)  # type: ignore[arg-type]


def where_mask(f, cols: WhereColumns) -> np.ndarray:
    """Rows for which ``f`` is true (unknown counts as not selected, as in SQL)."""
    return _masks(f, cols)[0]
