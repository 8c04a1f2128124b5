"""``where_str`` filters evaluated as numpy masks over a whole index at once.

``where.evaluate`` is the reference, one row at a time.  Here every column a filter reads
(through its function, e.g. ``lower(title)``) is read once per index with the reference's
own ``_read`` and kept as an object array plus a NULL mask; a query then combines
vectorised comparisons with SQL's three-valued logic as (true, unknown) mask pairs.  A test
the numbers cannot vectorise (strings, LIKE, IN) runs once per distinct value of the column,
not once per row (a column is factorised into codes once per index).  The test suite checks
that both give the same rows on every legit and generated filter.
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


class WhereColumns:
    """Per-index cache of the values each Ref reads, as object arrays with a NULL mask."""

    def __init__(self, rows: list[dict]):
        self.rows = rows
        self.n = len(rows)
        self._cache: dict = {}
        self.masks: dict = {}  # the last filters' masks (read only): a repeated filter costs a copy

    def values(self, ref: Ref) -> tuple[np.ndarray, np.ndarray]:
        hit = self._cache.get(ref)
        if hit is None:
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

    def codes(self, ref: Ref) -> tuple[np.ndarray, list] | None:
        """The Ref's values factorised: each row's code (-1 for NULL) and the distinct values; None if unhashable."""
        key = ("codes", ref)
        if key not in self._cache:
            vals, _ = self.values(ref)
            ids: dict = {}
            try:  # keyed with the type too: True, 1 and 1.0 are equal and hash alike, but are distinct values
                codes = np.fromiter((-1 if v is None else ids.setdefault((type(v), v), len(ids)) for v in vals),
                                    dtype=np.int32, count=self.n)
                self._cache[key] = (codes, [v for _, v in ids])  # type: ignore[assignment]
            except TypeError:  # arrays (lists) are not hashable
                self._cache[key] = None  # type: ignore[assignment]
        return self._cache[key]  # type: ignore[return-value]

    def present(self, name: str) -> np.ndarray:
        return np.fromiter((row.get(name) is not None for row in self.rows), dtype=bool, count=self.n)


def _apply(cols: WhereColumns, ref: Ref, test: Callable[[object], bool]) -> np.ndarray:
    """Rows whose (non-NULL) value passes ``test``, testing each distinct value once when the column allows."""
    factorised = cols.codes(ref)
    if factorised is not None:
        codes, distinct = factorised
        passes = np.zeros(len(distinct) + 1, dtype=bool)  # the last one is code -1: NULL
        passes[:-1] = np.fromiter((test(v) for v in distinct), dtype=bool, count=len(distinct))
        return passes[codes]
    vals, null = cols.values(ref)
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
        ref = Ref(f.column)
        return _apply(cols, ref, lambda v: (len(v) == 0) is not f.negated), cols.values(ref)[1]
    numbers = cols.numbers(f.ref) if isinstance(f, (Compare, Between)) else None
    if numbers is not None:
        arr, null = numbers
        if isinstance(f, Compare) and _numeric(f.value):
            return _NP_OPS[f.op](arr, _as_float(f.value)) & ~null, null
        if isinstance(f, Between) and _numeric(f.lo) and _numeric(f.hi):
            inside = (arr >= _as_float(f.lo)) & (arr <= _as_float(f.hi))
            return (inside != f.negated) & ~null, null
    null = cols.values(f.ref)[1]
    if isinstance(f, Compare):
        op, value = _OPS[f.op], f.value
        return _apply(cols, f.ref, lambda v: op(v, value)), null
    if isinstance(f, InList):
        values = f.values
        return _apply(cols, f.ref, lambda v: (v in values) is not f.negated), null
    if isinstance(f, Between):
        return _apply(cols, f.ref, lambda v: (f.lo <= v <= f.hi) is not f.negated), null
    if isinstance(f, Like):
        regex = _like_regex(f.pattern, f.case_insensitive)
        fold = ascii_lower if f.case_insensitive else (lambda s: s)
        return _apply(cols, f.ref, lambda v: (regex.fullmatch(fold(v)) is not None) is not f.negated), null
    raise TypeError(f"unknown filter node {f!r}")


_NP_OPS = {"=": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal, ">": np.greater,
           ">=": np.greater_equal}


def _numeric(v: object) -> bool:
    return type(v) is float or (type(v) is int and abs(v) < 2**53) or isinstance(v, datetime)


def _as_float(v: object) -> float:
    return v.timestamp() if isinstance(v, datetime) else float(v)  # type: ignore[arg-type]


_MASKS_KEPT = 16


def where_mask(f, cols: WhereColumns) -> np.ndarray:
    """Rows for which ``f`` is true (unknown counts as not selected, as in SQL); a new array the caller may change."""
    mask = cols.masks.get(f)
    if mask is None:
        mask = _masks(f, cols)[0].copy()  # never a view of a cached column index
        mask.flags.writeable = False
        if len(cols.masks) >= _MASKS_KEPT:
            cols.masks.clear()
        cols.masks[f] = mask
    return mask.copy()
