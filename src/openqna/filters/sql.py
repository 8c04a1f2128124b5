"""The one Filter → SQL compiler: every node of ``openqna.filters.nodes``, values always bound, one dialect per engine.

No value is ever spliced into the SQL text: every constant becomes a placeholder and the text holds
only what the target supplies (``column_sql`` and ``RecordSQL``, trusted SQL built from identifiers),
operators and fixed function names.  Each dialect selects exactly the rows ``filters.evaluate.evaluate``
accepts (three-valued logic, ASCII case folding for ``lower``/``upper`` and Unicode for ILIKE, whole-second UTC
DateTimes, missing arrays read as empty); ``tests/test_sql_filter.py`` checks that on a real engine per dialect.

Which path runs where (``filters/evaluate.py`` says the same from the other side):

* openqna's own index, SQLite and PostgreSQL stores alike, filters with ``filters.masks`` masks: the mask
  is needed in memory anyway (BM25 candidates, eligibility) and costs well under a millisecond.
* PostgreSQL: ``store.postgres_vector.filter_to_sql`` compiles here for pgvector's search inside the
  database: ``vector_search_sql``, and ``nearest_rows`` when OPENQNA_PG_VECTOR_SEARCH=pgvector and the
  filter keeps every record of the index.  A filter that leaves records out searches in memory: measured
  with ``bench/pg_filters.py`` (20,000 records of 384 dimensions, k=100, p50 ms, two runs on a shared
  2-core machine), memory against pgvector with this SQL: no filter 7.7/16 against 31/48, Azure
  metadata keeping 25% 8.0/20 against 38/114, where_str keeping 90% 13/44 against 21/67, 19% 1.0/14
  against 41/110, 4% 0.16/0.14 against 106/359.  The mask itself is cached per filter; its first
  evaluation costs 13-240 ms (the column's distinct values), once per index version.
* ClickHouse: for knowledge bases that live in a user's own ClickHouse/MyScale table (typed columns
  String, Int64, Float64, Bool, DateTime, Array(String), any of them Nullable but the arrays):
  ``connected.clickhouse`` sends it with the vector search of a connected table (and
  ``connected.pgvector`` sends the PostgreSQL dialect for a connected pgvector table).
  Placeholders are ClickHouse query parameters (``{p0:String}``) and the values come back as a dict
  of Python values for the client to send.
* SQLite: no store calls it (openqna's SQLite store filters its index in memory); it is the engine
  the where_str corpus and fuzzers of ``tests/test_where.py`` run against, and ``bench/tools.py``
  times it.  Its ILIKE calls ``openqna_case_fold``, which ``add_sqlite_functions`` puts on a connection
  (SQLite's ``lower`` and LIKE fold ASCII only).

``column_sql(column)`` returns SQL reading a typed column, per dialect:

* SQLite: any expression, e.g. ``json_extract(metadata, '$.price')``.  DateTime is ISO-8601 text, Bool
  0/1, Array(String) JSON array text.
* PostgreSQL: an expression of the matching type: ``text``, ``bigint``, ``double precision``,
  ``boolean``, ``timestamptz``, ``text[]`` (``&&``, ``@>`` and ``cardinality`` need no JSON parsing
  and index with GIN).
* ClickHouse: the column itself (String, Int64, Float64, Bool, DateTime, Array(String)).

``RecordSQL`` says where Azure's record-field leaves (MetaEq, SourceIn, KindIn, IdIn) read; a target
without one refuses them with TypeError.
"""

from __future__ import annotations

import sqlite3
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, ClassVar

from openqna.filters.nodes import (
    RECORD_NODES,
    And,
    Between,
    Column,
    Compare,
    Empty,
    Filter,
    HasAll,
    HasAny,
    IdIn,
    InList,
    IsNull,
    KindIn,
    Like,
    MetaEq,
    Not,
    Or,
    Ref,
    SourceIn,
    Value,
    ValueType,
    case_fold,
    like_parts,
)

ColumnSQL = Callable[[Column], str]
BindType = ValueType | str  # a column type, or "Array(Int64)" for record ids
_SQL_OPS = {"=": "=", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


@dataclass(frozen=True)
class RecordSQL:
    """SQL reading a record's own fields: ``metadata`` (a JSON object, or a ClickHouse Map(String, String)),
    ``source``, ``kind`` and ``id``."""

    metadata: str
    source: str
    kind: str
    id: str


def compile_sqlite(f: Filter, column_sql: ColumnSQL, record: RecordSQL | None = None) -> tuple[str, list[Any]]:
    """``(sql, params)`` for SQLite's ``WHERE``; ``?`` placeholders. Needs JSON1 for arrays and metadata, and
    ``add_sqlite_functions`` on the connection for ILIKE."""
    dialect = SQLite(column_sql, record)
    return dialect.emit(f), dialect.params


def add_sqlite_functions(conn: sqlite3.Connection) -> None:
    """Give ``conn`` the functions ``compile_sqlite``'s SQL calls: ``openqna_case_fold`` (``nodes.case_fold``)."""
    conn.create_function("openqna_case_fold", 1, _sqlite_case_fold, deterministic=True)


def _sqlite_case_fold(value: str | None) -> str | None:
    return case_fold(value) if isinstance(value, str) else value


def compile_postgres(f: Filter, column_sql: ColumnSQL, record: RecordSQL | None = None) -> tuple[str, list[Any]]:
    """``(sql, params)`` for PostgreSQL's ``WHERE``; ``%s`` placeholders (psycopg), each with its cast."""
    dialect = Postgres(column_sql, record)
    return dialect.emit(f), dialect.params


def compile_clickhouse(f: Filter, column_sql: ColumnSQL,
                       record: RecordSQL | None = None) -> tuple[str, dict[str, object]]:
    """``(sql, params)`` for ClickHouse's ``WHERE``: typed query parameters ``{p0:Type}`` and their values
    by name (str, int, float, bool, datetime in UTC, date, list of str or int)."""
    dialect = ClickHouse(column_sql, record)
    sql = dialect.emit(f)
    return sql, {f"p{i}": v for i, v in enumerate(dialect.params)}


class Dialect(ABC):
    """The shape every dialect shares; a subclass says how to bind, read a column, match LIKE and arrays."""

    def __init__(self, column_sql: ColumnSQL, record: RecordSQL | None):
        self.column_sql = column_sql
        self.record = record
        self.params: list[Any] = []

    def emit(self, f: Filter) -> str:
        if isinstance(f, (And, Or)):
            if not f.children:
                return "(1=1)" if isinstance(f, And) else "(1=0)"
            joiner = " AND " if isinstance(f, And) else " OR "
            return "(" + joiner.join(self.emit(c) for c in f.children) + ")"
        if isinstance(f, Not):
            return f"(NOT {self.emit(f.child)})"
        if isinstance(f, Compare):
            ref = self.ref(f.ref, ordered=f.op not in ("=", "!="))
            return f"({ref} {_SQL_OPS[f.op]} {self.bind(f.value, _bind_type(f.value, f.ref))})"
        if isinstance(f, InList):
            values = ", ".join(self.bind(v, _bind_type(v, f.ref)) for v in f.values)
            return f"({self.ref(f.ref)} {'NOT IN' if f.negated else 'IN'} ({values}))"
        if isinstance(f, Between):
            word = "NOT BETWEEN" if f.negated else "BETWEEN"
            lo, hi = self.bind(f.lo, _bind_type(f.lo, f.ref)), self.bind(f.hi, _bind_type(f.hi, f.ref))
            return f"({self.ref(f.ref, ordered=True)} {word} {lo} AND {hi})"
        if isinstance(f, Like):
            return self.like(f)
        if isinstance(f, IsNull):
            return f"({self.column_sql(f.column)} IS {'NOT NULL' if f.negated else 'NULL'})"
        if isinstance(f, (HasAny, HasAll)):
            return self.has(f)
        if isinstance(f, Empty):
            return f"({self.ref(Ref(f.column, 'length'))} {'<>' if f.negated else '='} {self.bind(0, 'Int64')})"
        if isinstance(f, RECORD_NODES):
            if self.record is None:
                raise TypeError(f"{type(f).__name__} reads record fields, and this target has none")
            return self.record_field(f, self.record)
        raise TypeError(f"unknown filter node {f!r}")

    @abstractmethod
    def bind(self, value: Value | list[Any], kind: BindType) -> str:
        """Append ``value`` (of SQL type ``kind``) to the parameters; return its placeholder."""

    @abstractmethod
    def ref(self, ref: Ref, *, ordered: bool = False) -> str:
        """SQL reading ``ref``; ``ordered`` when it feeds <, <=, >, >= or BETWEEN."""

    @abstractmethod
    def like(self, f: Like) -> str: ...

    @abstractmethod
    def has(self, f: HasAny | HasAll) -> str: ...

    @abstractmethod
    def record_field(self, f: MetaEq | SourceIn | KindIn | IdIn, record: RecordSQL) -> str: ...


class SQLite(Dialect):
    def bind(self, value: Value | list[Any], kind: BindType) -> str:
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
        """SQLite's LIKE ignores ASCII case, so LIKE becomes GLOB; ILIKE case-folds both sides (Unicode, as
        ClickHouse's ILIKE: SQLite's own ``lower`` and LIKE fold ASCII only)."""
        word = "NOT " if f.negated else ""
        parts = like_parts(f.pattern)
        if f.case_insensitive:
            pattern = "".join(ch if wild else _escape_like(case_fold(ch)) for wild, ch in parts)
            folded = f"openqna_case_fold({self.ref(f.ref)})"
            return f"({folded} {word}LIKE {self.bind(pattern, 'String')} ESCAPE '\\')"
        glob = "".join(("*" if ch == "%" else "?") if wild else _escape_glob(ch) for wild, ch in parts)
        return f"({self.ref(f.ref)} {word}GLOB {self.bind(glob, 'String')})"

    def has(self, f: HasAny | HasAll) -> str:
        x = self.column_sql(f.column)
        values = ", ".join(self.bind(v, "String") for v in f.values)
        if isinstance(f, HasAny):
            return f"(EXISTS (SELECT 1 FROM json_each({x}) AS e WHERE e.value IN ({values})))"
        count = self.bind(len(f.values), "Int64")
        return f"((SELECT count(DISTINCT e.value) FROM json_each({x}) AS e WHERE e.value IN ({values})) = {count})"

    def record_field(self, f: MetaEq | SourceIn | KindIn | IdIn, record: RecordSQL) -> str:
        if isinstance(f, MetaEq):
            key, value = self.bind(f.key.lower(), "String"), self.bind(f.value.lower(), "String")
            return f"(EXISTS (SELECT 1 FROM json_each({record.metadata}) AS m WHERE lower(m.key) = {key}" \
                   f" AND lower(m.value) = {value}))"
        if isinstance(f, SourceIn):
            return f"(lower({record.source}) IN ({', '.join(self.bind(s.lower(), 'String') for s in f.sources)}))"
        if isinstance(f, KindIn):
            return f"({record.kind} IN ({', '.join(self.bind(k, 'String') for k in f.kinds)}))"
        return f"({record.id} IN ({', '.join(self.bind(int(i), 'Int64') for i in f.ids)}))"


def _bind_type(value: Value, ref: Ref) -> BindType:
    """The SQL type to bind ``value`` as: the ref's, but Float64 for a fraction next to an Int64 (``stock > 2.5``
    compares, as in ClickHouse; bound as Int64 it is rounded by a cast, or refused)."""
    return "Float64" if ref.type == "Int64" and isinstance(value, float) else ref.type


_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


class Postgres(Dialect):
    _CASTS: ClassVar[dict[str, str]] = {
        "String": "text", "Int64": "bigint", "Float64": "double precision", "Bool": "boolean",
        "DateTime": "timestamptz", "Date": "date", "Array(String)": "text[]", "Array(Int64)": "bigint[]",
    }  # fmt: skip

    def bind(self, value: Value | list[Any], kind: BindType) -> str:
        self.params.append(value)
        return f"%s::{self._CASTS[kind]}"

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
        """PostgreSQL's LIKE escapes with backslash by default, as ClickHouse does.

        ILIKE folds case as the database's LC_CTYPE says: with a UTF-8 one (pgserver's ``C.UTF-8``, ``en_US.UTF-8``)
        letters of every script fold as ``nodes.case_fold`` does, but İ matches i and I, and ǅ matches ǆ
        (``tests/test_sql_filter.py`` pins both); under the ``C`` locale ILIKE folds ASCII only."""
        word = "NOT " if f.negated else ""
        pattern = "".join(ch if wild else _escape_like(ch) for wild, ch in like_parts(f.pattern))
        like = "ILIKE" if f.case_insensitive else "LIKE"
        return f"({self.ref(f.ref)} {word}{like} {self.bind(pattern, 'String')})"

    def has(self, f: HasAny | HasAll) -> str:
        operator = "&&" if isinstance(f, HasAny) else "@>"
        return f"(coalesce({self.column_sql(f.column)} {operator} {self.bind(list(f.values), 'Array(String)')}, false))"

    def record_field(self, f: MetaEq | SourceIn | KindIn | IdIn, record: RecordSQL) -> str:
        """Metadata and source compare lower-cased, as the index's masks do (PostgreSQL's ``lower`` follows
        the database's locale, so it may fold some non-ASCII letters differently from Python's)."""
        if isinstance(f, MetaEq):
            key, value = self.bind(f.key.lower(), "String"), self.bind(f.value.lower(), "String")
            return f"(EXISTS (SELECT 1 FROM json_each_text({record.metadata}) AS m WHERE lower(m.key) = {key}" \
                   f" AND lower(m.value) = {value}))"
        if isinstance(f, SourceIn):
            return f"(lower({record.source}) = ANY({self.bind([s.lower() for s in f.sources], 'Array(String)')}))"
        if isinstance(f, KindIn):
            return f"({record.kind} = ANY({self.bind(list(f.kinds), 'Array(String)')}))"
        return f"({record.id} = ANY({self.bind([int(i) for i in f.ids], 'Array(Int64)')}))"


class ClickHouse(Dialect):
    """ClickHouse's own functions, so a filter reads as the ``where_str`` it came from.

    ``lower``/``upper`` fold ASCII only, strings compare as bytes (code-point order in UTF-8), and
    DateTimes compare as instants, bound in UTC.  ILIKE is ClickHouse's own, which folds Unicode letters
    (``nodes.case_fold`` says how closely the other paths follow it).
    """

    _TYPES: ClassVar[dict[str, str]] = {"DateTime": "DateTime('UTC')"}

    def bind(self, value: Value | list[Any], kind: BindType) -> str:
        name = f"p{len(self.params)}"
        self.params.append(value)
        return f"{{{name}:{self._TYPES.get(kind, kind)}}}"

    def ref(self, ref: Ref, *, ordered: bool = False) -> str:
        x = self.column_sql(ref.column)
        if ref.fn == "length":
            return f"length({x})" if ref.column.type == "Array(String)" else f"lengthUTF8({x})"
        if ref.fn == "toDate":
            return f"toDate({x}, 'UTC')"
        if ref.fn in ("lower", "upper"):
            return f"{ref.fn}({x})"
        if ref.column.type == "DateTime":  # a DateTime64 to its whole second, as shown and as PostgreSQL reads it
            return f"toDateTime({x}, 'UTC')"
        return x

    def like(self, f: Like) -> str:
        word = "NOT " if f.negated else ""
        pattern = "".join(ch if wild else _escape_like(ch) for wild, ch in like_parts(f.pattern))
        like = "ILIKE" if f.case_insensitive else "LIKE"
        return f"({self.ref(f.ref)} {word}{like} {self.bind(pattern, 'String')})"

    def has(self, f: HasAny | HasAll) -> str:
        function = "hasAny" if isinstance(f, HasAny) else "hasAll"
        return f"({function}({self.column_sql(f.column)}, {self.bind(list(f.values), 'Array(String)')}))"

    def record_field(self, f: MetaEq | SourceIn | KindIn | IdIn, record: RecordSQL) -> str:
        """Metadata is a Map(String, String); keys, values and sources compare with ``lowerUTF8``."""
        if isinstance(f, MetaEq):
            key, value = self.bind(f.key.lower(), "String"), self.bind(f.value.lower(), "String")
            return (f"(arrayExists((k, v) -> lowerUTF8(k) = {key} AND lowerUTF8(v) = {value},"
                    f" mapKeys({record.metadata}), mapValues({record.metadata})))")
        if isinstance(f, SourceIn):
            return f"(has({self.bind([s.lower() for s in f.sources], 'Array(String)')}, lowerUTF8({record.source})))"
        if isinstance(f, KindIn):
            return f"(has({self.bind(list(f.kinds), 'Array(String)')}, {record.kind}))"
        return f"(has({self.bind([int(i) for i in f.ids], 'Array(Int64)')}, {record.id}))"


def _fold(x: str, *, upper: bool) -> str:
    """ASCII-only case folding (PostgreSQL's lower/upper follow the locale, ClickHouse's do not)."""
    lower = _UPPER.lower()
    return f"translate({x}, '{lower if upper else _UPPER}', '{_UPPER if upper else lower}')"


def _escape_like(ch: str) -> str:
    return "\\" + ch if ch in "%_\\" else ch


def _escape_glob(ch: str) -> str:
    return f"[{ch}]" if ch in "*?[" else ch
