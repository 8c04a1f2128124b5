"""Compile ``where`` filter IR to SQL boolean expressions with bound parameters, one emitter per store.

No value is ever spliced into the SQL text: every constant becomes a placeholder (``?`` for SQLite,
``%s`` for psycopg) and the text contains only column SQL from ``column_sql``, operators and fixed
function names. Both emitters reproduce ``where.evaluate`` exactly (three-valued logic, ASCII case
folding, whole-second UTC DateTimes, missing arrays read as empty).

What ``column_sql(column)`` must return, per store:

* SQLite: any expression reading the value, e.g. ``json_extract(metadata, '$.price')`` or a real column.
  DateTime is ISO-8601 text (normalised here with ``datetime()``), Bool is 0/1, Array(String) is a JSON
  array text (read with ``json_each`` / ``json_array_length``).
* PostgreSQL: an expression of the matching SQL type: ``text``, ``bigint``, ``double precision``,
  ``boolean``, ``timestamptz``, and ``text[]`` for Array(String) (chosen over jsonb because ``&&``, ``@>``
  and ``cardinality`` index well with GIN and need no JSON parsing); e.g.
  ``(metadata->>'price')::double precision``.

The Azure-side nodes (MetaEq, SourceIn, KindIn, IdIn) read record fields, not typed columns, so the store
compiles those itself; here they raise TypeError.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from datetime import date, datetime

from ..filter_ast import (
    And,
    Between,
    Column,
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
    Value,
    ascii_lower,
    like_parts,
)

ColumnSQL = Callable[[Column], str]
_SQL_OPS = {"=": "=", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


def compile_sqlite(f: Filter, column_sql: ColumnSQL) -> tuple[str, list]:
    """``(sql, params)`` for SQLite's ``WHERE``; ``?`` placeholders. Needs JSON1 for array columns."""
    emitter = _SQLite(column_sql)
    return emitter.emit(f), emitter.params


def compile_postgres(f: Filter, column_sql: ColumnSQL) -> tuple[str, list]:
    """``(sql, params)`` for PostgreSQL's ``WHERE``; ``%s`` placeholders (psycopg), typed casts."""
    emitter = _Postgres(column_sql)
    return emitter.emit(f), emitter.params


class _Emitter(ABC):
    """The shared shape of both dialects; subclasses say how to bind, read a column and test arrays."""

    def __init__(self, column_sql: ColumnSQL):
        self.column_sql = column_sql
        self.params: list = []

    def emit(self, f: Filter) -> str:
        if isinstance(f, (And, Or)):
            joiner = " AND " if isinstance(f, And) else " OR "
            return "(" + joiner.join(self.emit(c) for c in f.children) + ")"
        if isinstance(f, Not):
            return f"(NOT {self.emit(f.child)})"
        if isinstance(f, Compare):
            return f"({self.ref(f.ref, ordered=f.op not in ('=', '!='))} {_SQL_OPS[f.op]} {self.bind(f.value)})"
        if isinstance(f, InList):
            values = ", ".join(self.bind(v) for v in f.values)
            return f"({self.ref(f.ref)} {'NOT IN' if f.negated else 'IN'} ({values}))"
        if isinstance(f, Between):
            word = "NOT BETWEEN" if f.negated else "BETWEEN"
            return f"({self.ref(f.ref, ordered=True)} {word} {self.bind(f.lo)} AND {self.bind(f.hi)})"
        if isinstance(f, Like):
            return self.like(f)
        if isinstance(f, IsNull):
            return f"({self.column_sql(f.column)} IS {'NOT NULL' if f.negated else 'NULL'})"
        if isinstance(f, (HasAny, HasAll)):
            return self.has(f)
        if isinstance(f, Empty):
            return f"({self.ref(Ref(f.column, 'length'))} {'<>' if f.negated else '='} {self.bind(0)})"
        raise TypeError(f"{type(f).__name__} is not a where_str node; the store compiles it")

    @abstractmethod
    def bind(self, value: Value | list[str]) -> str:
        """Append ``value`` to the parameters; return its placeholder."""

    @abstractmethod
    def ref(self, ref: Ref, *, ordered: bool = False) -> str:
        """SQL reading ``ref``; ``ordered`` when it feeds <, <=, >, >= or BETWEEN."""

    @abstractmethod
    def like(self, f: Like) -> str: ...

    @abstractmethod
    def has(self, f: HasAny | HasAll) -> str: ...


class _SQLite(_Emitter):
    def bind(self, value: Value | list[str]) -> str:
        if isinstance(value, datetime):
            value = value.isoformat(" ")[:19]  # 'YYYY-MM-DD HH:MM:SS', as SQLite's datetime() prints
        elif isinstance(value, date):
            value = value.isoformat()
        elif isinstance(value, bool):
            value = int(value)
        self.params.append(value)
        return "?"

    def ref(self, ref: Ref, *, ordered: bool = False) -> str:
        x = self.column_sql(ref.column)
        if ref.fn == "length":
            return f"coalesce(json_array_length({x}), 0)" if ref.column.type == "Array(String)" else f"length({x})"
        if ref.fn == "toDate":
            return f"date({x})"
        if ref.fn in ("lower", "upper"):
            return f"{ref.fn}({x})"  # SQLite's built-ins fold ASCII only, as ours do
        if ref.column.type == "DateTime":
            return f"datetime({x})"
        if ref.column.type == "String":
            return f"({x} COLLATE BINARY)"  # even if the store declared the column NOCASE
        return x

    def like(self, f: Like) -> str:
        """SQLite's LIKE ignores ASCII case, so LIKE becomes GLOB; ILIKE lowers both sides."""
        word = "NOT " if f.negated else ""
        parts = like_parts(f.pattern)
        if f.case_insensitive:
            pattern = "".join(ch if wild else _escape_like(ascii_lower(ch)) for wild, ch in parts)
            return f"(lower({self.ref(f.ref)}) {word}LIKE {self.bind(pattern)} ESCAPE '\\')"
        glob = "".join(("*" if ch == "%" else "?") if wild else _escape_glob(ch) for wild, ch in parts)
        return f"({self.ref(f.ref)} {word}GLOB {self.bind(glob)})"

    def has(self, f: HasAny | HasAll) -> str:
        x = self.column_sql(f.column)
        values = ", ".join(self.bind(v) for v in f.values)
        if isinstance(f, HasAny):
            return f"(EXISTS (SELECT 1 FROM json_each({x}) AS e WHERE e.value IN ({values})))"
        count = self.bind(len(f.values))
        return f"((SELECT count(DISTINCT e.value) FROM json_each({x}) AS e WHERE e.value IN ({values})) = {count})"


_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


class _Postgres(_Emitter):
    _CASTS: tuple[tuple[type, str], ...] = (
        (bool, "boolean"), (int, "bigint"), (float, "double precision"), (str, "text"),
        (datetime, "timestamptz"), (date, "date"), (list, "text[]"),
    )  # fmt: skip

    def bind(self, value: Value | list[str]) -> str:
        self.params.append(value)
        cast = next(sql for kind, sql in self._CASTS if isinstance(value, kind))
        return f"%s::{cast}"

    def ref(self, ref: Ref, *, ordered: bool = False) -> str:
        x = self.column_sql(ref.column)
        if ref.fn == "length":
            return f"coalesce(cardinality({x}), 0)" if ref.column.type == "Array(String)" else f"char_length({x})"
        if ref.fn == "toDate":
            return f"(({x}) AT TIME ZONE 'UTC')::date"
        if ref.column.type == "DateTime":
            return f"date_trunc('second', {x})"
        if ref.fn in ("lower", "upper"):
            x = _fold(x, upper=ref.fn == "upper")
        if ordered and ref.type == "String":
            return f'({x} COLLATE "C")'  # code-point order, as SQLite and Python compare
        return x

    def like(self, f: Like) -> str:
        """PostgreSQL's LIKE escapes with backslash by default, as ClickHouse does."""
        word = "NOT " if f.negated else ""
        fold = ascii_lower if f.case_insensitive else str
        pattern = "".join(ch if wild else _escape_like(fold(ch)) for wild, ch in like_parts(f.pattern))
        x = self.ref(f.ref)
        return f"({_fold(x, upper=False) if f.case_insensitive else x} {word}LIKE {self.bind(pattern)})"

    def has(self, f: HasAny | HasAll) -> str:
        operator = "&&" if isinstance(f, HasAny) else "@>"
        return f"(coalesce({self.column_sql(f.column)} {operator} {self.bind(list(f.values))}, false))"


def _fold(x: str, *, upper: bool) -> str:
    """ASCII-only case folding (PostgreSQL's lower/upper follow the locale, ClickHouse's do not)."""
    lower = _UPPER.lower()
    return f"translate({x}, '{lower if upper else _UPPER}', '{_UPPER if upper else lower}')"


def _escape_like(ch: str) -> str:
    return "\\" + ch if ch in "%_\\" else ch


def _escape_glob(ch: str) -> str:
    return f"[{ch}]" if ch in "*?[" else ch
