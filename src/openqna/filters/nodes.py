"""The Filter AST (DESIGN decision 5): plain data that every surface produces and every target consumes.

Azure's metadata/source filters and ``where_str`` both become these nodes.  They live at the top of the
package, beside ``records``, because both sides of the store seam read them: retrieval evaluates them
(``filters.evaluate`` is the reference, ``filters.masks`` the masks over openqna's own index) and
``filters.sql`` compiles them to SQL with bound parameters; a store must not import retrieval.

Two families of leaves:

* record fields, as Azure filters name them: ``MetaEq`` (metadata key = value, compared lower-cased, as
  Azure stores them), ``SourceIn``, ``KindIn``, ``IdIn``;
* typed columns of a knowledge base's schema, as ``where_str`` names them (``Compare``, ``InList``,
  ``Between``, ``Like``, ``IsNull``, ``HasAny``, ``HasAll``, ``Empty``), each reading a ``Column``
  directly or through one function (``Ref``);

combined by ``And``, ``Or`` and ``Not``.  The value helpers at the end (ASCII case folding, the LIKE
pattern syntax) define what the nodes mean, so every evaluator and every SQL dialect shares them.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import date, datetime
from typing import Literal, get_args

# ---------------------------------------------------------------------------------------------- record fields


@dataclass(frozen=True)
class MetaEq:
    """Metadata ``key`` equals ``value`` (both compared lower-cased)."""

    key: str
    value: str


@dataclass(frozen=True)
class SourceIn:
    """The record's source is one of ``sources`` (exact, case-insensitive)."""

    sources: tuple[str, ...]


@dataclass(frozen=True)
class KindIn:
    """The record is of one of these kinds ("qna", "passage")."""

    kinds: tuple[str, ...]


@dataclass(frozen=True)
class IdIn:
    ids: tuple[int, ...]


@dataclass(frozen=True)
class And:
    children: tuple[Filter, ...]


@dataclass(frozen=True)
class Or:
    children: tuple[Filter, ...]


@dataclass(frozen=True)
class Not:
    child: Filter


# ---------------------------------------------------------------------------------------------- typed columns

ColumnType = Literal["String", "Int64", "Float64", "Bool", "DateTime", "Array(String)"]
COLUMN_TYPES: tuple[str, ...] = get_args(ColumnType)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class Column:
    """A typed metadata column of a knowledge base.

    Names are plain identifiers so a store can put them into SQL (a column name, a JSON path such as
    ``'$.price'``) without quoting worries; ``where_str`` can only name columns that exist here.
    """

    name: str
    type: ColumnType

    def __post_init__(self) -> None:
        if not _IDENTIFIER.match(self.name):
            raise ValueError(f"column name must be an identifier ([A-Za-z_][A-Za-z0-9_]*), got {self.name!r}")
        if self.type not in COLUMN_TYPES:
            raise ValueError(f"column type must be one of {', '.join(COLUMN_TYPES)}, got {self.type!r}")


Schema = Mapping[str, Column]


def schema_of(*columns: Column) -> dict[str, Column]:
    """A schema keyed by column name."""
    return {c.name: c for c in columns}


Fn = Literal["lower", "upper", "length", "toDate"]
# What a Ref yields: a column type, or "Date" for toDate(column).
ValueType = Literal["String", "Int64", "Float64", "Bool", "DateTime", "Date", "Array(String)"]
Value = str | int | float | bool | datetime | date
CompareOp = Literal["=", "!=", "<", "<=", ">", ">="]


@dataclass(frozen=True)
class Ref:
    """A column as a predicate reads it, optionally through one function: ``lower(title)``, ``length(tags)``."""

    column: Column
    fn: Fn | None = None

    @property
    def type(self) -> ValueType:
        if self.fn in ("lower", "upper"):
            return "String"
        if self.fn == "length":
            return "Int64"
        if self.fn == "toDate":
            return "Date"
        return self.column.type

    def __str__(self) -> str:
        return f"{self.fn}({self.column.name})" if self.fn else self.column.name


@dataclass(frozen=True)
class Compare:
    """``ref op value``; the value already has the ref's type (a string next to a DateTime is a datetime)."""

    ref: Ref
    op: CompareOp
    value: Value


@dataclass(frozen=True)
class InList:
    ref: Ref
    values: tuple[Value, ...]
    negated: bool = False


@dataclass(frozen=True)
class Between:
    """``lo <= ref <= hi`` (inclusive, as in SQL)."""

    ref: Ref
    lo: Value
    hi: Value
    negated: bool = False


@dataclass(frozen=True)
class Like:
    """LIKE / ILIKE with ClickHouse pattern syntax (``%``, ``_``, backslash escapes); ILIKE folds Unicode case
    (``case_fold``), as ClickHouse's ILIKE does."""

    ref: Ref
    pattern: str
    case_insensitive: bool = False
    negated: bool = False


@dataclass(frozen=True)
class IsNull:
    """``column IS [NOT] NULL``; never on arrays, which are not nullable."""

    column: Column
    negated: bool = False


@dataclass(frozen=True)
class HasAny:
    """The array column contains at least one of ``values``; ``has(c, v)`` is ``HasAny(c, (v,))``."""

    column: Column
    values: tuple[str, ...]


@dataclass(frozen=True)
class HasAll:
    """The array column contains every one of ``values`` (distinct, non-empty)."""

    column: Column
    values: tuple[str, ...]


@dataclass(frozen=True)
class Empty:
    """``empty(column)``, or ``notEmpty(column)`` when negated; for String and Array(String) columns."""

    column: Column
    negated: bool = False


Filter = (
    MetaEq | SourceIn | KindIn | IdIn | And | Or | Not
    | Compare | InList | Between | Like | IsNull | HasAny | HasAll | Empty
)
RECORD_NODES = (MetaEq, SourceIn, KindIn, IdIn)  # the leaves that read record fields, not typed columns


def with_columns(f: Filter, columns: Mapping[str, Column]) -> Filter:
    """``f`` reading ``columns[name]`` wherever it reads a column named ``name``: a filter parsed over the names a
    caller uses, turned to the columns that hold them (a vector store's attributes, ``kb/attribute_columns.py``)."""
    def column(c: Column) -> Column:
        return columns.get(c.name, c)

    if isinstance(f, (And, Or)):
        return type(f)(tuple(with_columns(child, columns) for child in f.children))
    if isinstance(f, Not):
        return Not(with_columns(f.child, columns))
    if isinstance(f, (Compare, InList, Between, Like)):
        return replace(f, ref=Ref(column(f.ref.column), f.ref.fn))
    if isinstance(f, (IsNull, HasAny, HasAll, Empty)):
        return replace(f, column=column(f.column))
    return f


def folded(f: Filter, names: frozenset[str]) -> Filter:
    """``f`` with the strings it compares columns ``names`` with lower-cased (``str.lower``), for columns whose
    stored values are: a QnA's metadata values are kept lower-cased (``records.QnA``), as Azure's metadata filters
    compare them, so ``color = 'Dark Blue'`` matched nothing.  A column read through a function is left as written
    (``upper(color) = 'DARK BLUE'`` says what it means)."""
    def low(v: Value) -> Value:
        return v.lower() if isinstance(v, str) else v

    if isinstance(f, (And, Or)):
        return type(f)(tuple(folded(child, names) for child in f.children))
    if isinstance(f, Not):
        return Not(folded(f.child, names))
    if isinstance(f, (Compare, InList, Between, Like)) and f.ref.fn is None and f.ref.column.name in names:
        if isinstance(f, Compare):
            return replace(f, value=low(f.value))
        if isinstance(f, InList):
            return replace(f, values=tuple(low(v) for v in f.values))
        if isinstance(f, Between):
            return replace(f, lo=low(f.lo), hi=low(f.hi))
        return replace(f, pattern=f.pattern.lower())
    return f


# ---------------------------------------------------------------------------------------------- value semantics

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_ASCII_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def ascii_lower(s: str) -> str:
    """``lower`` as ClickHouse and SQLite have it: ASCII letters only, so every backend agrees."""
    return s.translate(_ASCII_LOWER)


def ascii_upper(s: str) -> str:
    return s.translate(_ASCII_UPPER)


class _CaseFolds(dict[int, str]):
    """Each code point's ILIKE folding, computed on first use (``str.translate`` looks each one up)."""

    def __missing__(self, point: int) -> str:
        ch = chr(point)
        lower = ch.lower()
        self[point] = lower if len(lower) == 1 and unicodedata.category(ch) != "Lt" else ch
        return self[point]


_CASE_FOLDS = _CaseFolds()


def case_fold(s: str) -> str:
    """What ILIKE compares: each character lower-cased, one for one (İ and titlecase letters such as ǅ kept).

    ClickHouse's (MyScale's) ILIKE folds so, and ``'CAFÉ Straße' ILIKE 'café%'`` holds.  Measured on chdb 26.9
    over 3,422 pairs of a character and one of its case variants inside a longer pattern (``'abÉcd' ILIKE
    'abécd'``, and with ``%`` and ``_``): the same answer for every pair below U+1300 but three that ClickHouse
    does not fold there (Μ/μ, Ι/ι, ϴ/θ after ``ab``; ``'ΜΙΚΡΟ' ILIKE 'μικρο'`` holds); among them the misses ``'ﬁle' ILIKE 'fi%'``, ``'Straße' ILIKE
    'STRASSE'``, ``'İstanbul' ILIKE 'i%'``, ``'ı' ILIKE 'I'``, ``'ǅ' ILIKE 'ǆ'``, ``'ΟΔΥΣΣΕΥΣ' ILIKE
    'οδυσσευς'``.  Python's ``re.IGNORECASE`` folds İ and ı with i and ς with σ, and ``str.casefold`` expands ß and
    ﬁ.  Letters cased from Unicode 8 on (Cherokee, Georgian Mtavruli, Osage, Adlam, ...) and circled letters fold
    here only.  A pattern whose only literal is one letter (``'ς%'``) goes through RE2 in ClickHouse, which also
    folds ſ/s, ς/σ, µ/μ and ϐ/β.
    """
    return s.lower() if s.isascii() else s.translate(_CASE_FOLDS)


def like_parts(pattern: str) -> tuple[tuple[bool, str], ...]:
    """A LIKE pattern as ``(is_wildcard, char)`` pairs; each evaluator and dialect renders them its own way.

    ``%`` is any run, ``_`` one character, a backslash makes the next character literal; a pattern that
    ends in a lone backslash raises ValueError (the parser refuses it).
    """
    parts: list[tuple[bool, str]] = []
    chars = iter(pattern)
    for ch in chars:
        if ch == "\\":
            escaped = next(chars, None)
            if escaped is None:
                raise ValueError("a LIKE pattern cannot end with a lone backslash (write \\\\ for a backslash)")
            parts.append((False, escaped))
        else:
            parts.append((ch in "%_", ch))
    return tuple(parts)
