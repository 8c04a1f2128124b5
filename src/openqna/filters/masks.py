"""``where_str`` filters evaluated as numpy masks over a whole index at once.

``where.evaluate`` is the reference, one row at a time.  Here every column a filter reads
is held as codes into its distinct values; the reference's own ``read_value`` (through the
filter's function, e.g. ``lower(title)``) and each predicate run once per distinct value,
and a query combines the resulting row masks with SQL's three-valued logic as (true,
unknown) mask pairs.  The test suite checks that both give the same rows on every legit and
generated filter.

This is the path every where_str filter takes on openqna's own index, whatever the store:
``MemIndex.mask`` calls ``where_mask``.  SQL (``filters.sql``) runs only inside engines.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeGuard

import numpy as np

from openqna.filters.evaluate import COMPARE_OPS, evaluate, like_regex, read_value
from openqna.filters.nodes import (
    RECORD_NODES,
    And,
    Between,
    Compare,
    Empty,
    Filter,
    HasAll,
    HasAny,
    InList,
    IsNull,
    Like,
    Not,
    Or,
    Ref,
    case_fold,
)

Masks = tuple[np.ndarray, np.ndarray]  # (true, unknown)


Column = tuple[np.ndarray, list[Any]]  # (a code per row, -1 where NULL or absent; the distinct values)


def encode_columns(rows: list[dict[str, Any]]) -> dict[str, Column]:
    """The columns of ``rows`` (every key but the record's own "@" keys), each as codes into its distinct values."""
    out: dict[str, Column] = {}
    for name in sorted({k for row in rows for k in row if not k.startswith("@")}):
        codes = np.full(len(rows), -1, np.int32)
        values: list[Any] = []
        seen: dict[tuple[type, object], int] = {}
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

    Every column is held as codes into its distinct values (``encode_columns``), so a function
    such as ``lower(title)`` and a predicate such as ``= 'x'`` run once per distinct value and
    reach the rows by the codes: a metadata filter over 1M passages costs a gather, not a
    million Python calls.  Columns come from the index's rows, encoded on first use, or from an
    index snapshot (``columns``, loaded on first use), whose ``basic`` gives the masks of
    MetaEq/SourceIn/KindIn/IdIn (the rows' "@" keys are not encoded).
    """

    def __init__(self, rows: list[dict[str, Any]] | None, *, n: int | None = None,
                 columns: Callable[[], dict[str, Column]] | None = None,
                 basic: Callable[[Filter], np.ndarray] | None = None):
        self.rows = rows
        self.n = len(rows) if rows is not None else int(n or 0)
        if rows is not None:
            columns = columns or (lambda: encode_columns(rows))
            basic = basic or (lambda f: np.fromiter((evaluate(f, row) for row in rows), dtype=bool, count=self.n))
        # Made from rows, or from a saved index's columns and basic: neither is None once in use.
        self._load_columns = columns
        self._columns: dict[str, Column] | None = None
        self.basic = basic
        self._cache: dict[Any, Any] = {}  # by Ref: values(); by (what, Ref): coded(), numbers(), members()
        self.masks: dict[Filter, np.ndarray] = {}  # the last filters' masks (read only): a repeated filter costs a copy

    def _column(self, name: str) -> Column:
        if self._columns is None:
            assert self._load_columns is not None  # see __init__: given rows or a saved index's columns
            self._columns = self._load_columns()
        return self._columns.get(name) or (np.full(self.n, -1, np.int32), [])

    def coded(self, ref: Ref) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(a code per row, what ``ref`` reads from each distinct value, which of those are NULL); code -1 is last."""
        key = ("coded", ref)
        hit: tuple[np.ndarray, np.ndarray, np.ndarray] | None = self._cache.get(key)
        if hit is None:
            codes, distinct = self._column(ref.column.name)
            mapped = np.empty(len(distinct) + 1, dtype=object)
            for i, v in enumerate(distinct):
                mapped[i] = read_value(ref, {ref.column.name: v})
            mapped[-1] = read_value(ref, {})  # code -1: NULL or absent
            null = np.fromiter((v is None for v in mapped), dtype=bool, count=len(mapped))
            hit = self._cache[key] = (codes, mapped, null)
        return hit

    def values(self, ref: Ref) -> tuple[np.ndarray, np.ndarray]:
        hit: tuple[np.ndarray, np.ndarray] | None = self._cache.get(ref)
        if hit is None:
            codes, mapped, null = self.coded(ref)
            hit = self._cache[ref] = (mapped[codes], null[codes])
        return hit

    def numbers(self, ref: Ref) -> tuple[np.ndarray, np.ndarray] | None:
        """The Ref's values as float64 (DateTimes as POSIX seconds), when that is exact; else None."""
        key = ("numbers", ref)
        if key not in self._cache:
            codes, mapped, null = self.coded(ref)
            live = mapped[~null]
            out: np.ndarray | None = None
            if all(type(v) is float or (type(v) is int and abs(v) < 2**53) for v in live):
                out = np.where(null, 0.0, mapped).astype(np.float64)
            elif all(isinstance(v, datetime) for v in live):
                out = np.zeros(len(mapped), np.float64)
                out[~null] = [v.timestamp() for v in live]
            self._cache[key] = (out[codes], null[codes]) if out is not None else None
        found: tuple[np.ndarray, np.ndarray] | None = self._cache[key]
        return found

    def members(self, ref: Ref) -> dict[str, np.ndarray]:
        """For an Array(String) column: each element value and the rows whose array holds it."""
        key = ("members", ref)
        if key not in self._cache:
            vals, _ = self.values(ref)
            rows: dict[str, list[int]] = {}
            for i, items in enumerate(vals):
                for item in set(items):
                    rows.setdefault(item, []).append(i)
            index: dict[str, np.ndarray] = {}
            for item, where in rows.items():
                mask = np.zeros(self.n, dtype=bool)
                mask[where] = True
                index[item] = mask
            self._cache[key] = index
        members: dict[str, np.ndarray] = self._cache[key]
        return members

    def present(self, name: str) -> np.ndarray:
        return self._column(name)[0] >= 0


def _apply(cols: WhereColumns, ref: Ref, test: Callable[[Any], bool]) -> Masks:
    """``test`` run once per distinct non-NULL value of ``ref``, spread to the rows by their codes."""
    codes, mapped, null = cols.coded(ref)
    ok = np.zeros(len(mapped), dtype=bool)
    idx = np.flatnonzero(~null)
    if len(idx):
        ok[idx] = np.fromiter((test(v) for v in mapped[idx]), dtype=bool, count=len(idx))
    return ok[codes], null[codes]


def _masks(f: Filter, cols: WhereColumns) -> Masks:
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
    if isinstance(f, RECORD_NODES):
        assert cols.basic is not None  # see WhereColumns.__init__: given rows or a saved index's basic
        return cols.basic(f), none
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
        return _apply(cols, Ref(f.column), lambda v: (len(v) == 0) is not f.negated)
    numbers = cols.numbers(f.ref) if isinstance(f, (Compare, Between)) else None
    if numbers is not None:
        arr, null = numbers
        if isinstance(f, Compare) and _numeric(f.value):
            return _NP_OPS[f.op](arr, _as_float(f.value)) & ~null, null
        if isinstance(f, Between) and _numeric(f.lo) and _numeric(f.hi):
            inside = (arr >= _as_float(f.lo)) & (arr <= _as_float(f.hi))
            return (inside != f.negated) & ~null, null
    if isinstance(f, Compare):
        op, value = COMPARE_OPS[f.op], f.value
        return _apply(cols, f.ref, lambda v: op(v, value))
    if isinstance(f, InList):
        values = f.values
        return _apply(cols, f.ref, lambda v: (v in values) is not f.negated)
    if isinstance(f, Between):
        return _apply(cols, f.ref, lambda v: (f.lo <= v <= f.hi) is not f.negated)
    if isinstance(f, Like):
        regex = like_regex(f.pattern, f.case_insensitive)
        fold = case_fold if f.case_insensitive else (lambda s: s)
        return _apply(cols, f.ref, lambda v: (regex.fullmatch(fold(v)) is not None) is not f.negated)
    raise TypeError(f"unknown filter node {f!r}")


_NP_OPS = {"=": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal, ">": np.greater,
           ">=": np.greater_equal}


def _numeric(v: object) -> TypeGuard[int | float | datetime]:  # float64 holds it exactly
    return type(v) is float or (type(v) is int and abs(v) < 2**53) or isinstance(v, datetime)


def _as_float(v: int | float | datetime) -> float:
    return v.timestamp() if isinstance(v, datetime) else float(v)


_MASKS_KEPT = 16


def where_mask(f: Filter, cols: WhereColumns) -> np.ndarray:
    """Rows for which ``f`` is true (unknown counts as not selected, as in SQL); a new array the caller may change."""
    mask = cols.masks.get(f)
    if mask is None:
        mask = _masks(f, cols)[0].copy()  # never a view of a cached column index
        mask.flags.writeable = False
        if len(cols.masks) >= _MASKS_KEPT:
            cols.masks.clear()
        cols.masks[f] = mask
    return mask.copy()
