"""``where_str`` filters (DESIGN decision 5): the typed schema, the filter IR and its reference semantics.

``where_parse.parse_where`` turns a ClickHouse-flavoured boolean expression into the nodes below, checked
against a knowledge base's typed schema; ``where_compile`` emits SQLite and PostgreSQL with bound
parameters. ``evaluate`` here is the reference: every emitter must select exactly the rows it accepts,
so the semantics are spelled out once:

* SQL three-valued logic, as ClickHouse and the SQL stores have it: a comparison with NULL is unknown,
  NOT unknown is unknown, and a row is selected only when the whole filter is true.
* Array(String) columns are never NULL: a missing array reads as ``[]`` (ClickHouse arrays are not
  Nullable), so ``NOT has(tags, 'x')`` selects rows without tags.
* DateTime values are UTC with whole seconds (ClickHouse's DateTime resolution); naive values are UTC.
  Stores keep them as ISO-8601 text (SQLite) or ``timestamptz`` (PostgreSQL).
* ``lower``/``upper``/ILIKE fold ASCII letters only, as ClickHouse's ``lower``/``upper`` and SQLite's
  built-ins do, so every backend agrees on non-ASCII text.
* ``length`` counts characters (ClickHouse's ``lengthUTF8``), or elements of an array.
* LIKE: ``%`` is any run, ``_`` one character, a backslash makes the next character literal.

The IR is closed and small: leaf predicates read a column, optionally through one function (``Ref``),
and are combined with the ``And``/``Or``/``Not`` nodes of ``filters``.
"""

from __future__ import annotations

import calendar
import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from functools import lru_cache
from typing import Literal, get_args

from ..records import InvalidArgument
from .filters import And, IdIn, KindIn, MetaEq, Not, Or, SourceIn, matches

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
    """LIKE / ILIKE with ClickHouse pattern syntax (``%``, ``_``, backslash escapes); ILIKE folds ASCII."""

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


class WhereError(InvalidArgument):
    """A refused ``where_str``.

    The message names what was refused and then everything that is allowed (columns with types,
    operators, functions), because the caller is usually an LLM that corrects itself from it.
    """

    def __init__(self, reason: str, schema: Schema):
        super().__init__(f"where_str refused: {reason}. Allowed: {allowed_syntax(schema)}", target="where_str")
        self.reason = reason


def allowed_syntax(schema: Schema) -> str:
    """The whole filter language in one paragraph, generated from the schema (also fit for tool descriptions)."""
    columns = ", ".join(f"{c.name} {c.type}" for c in schema.values()) or "(none)"
    return (
        f"columns {columns}; "
        "operators = != < <= > >=, AND, OR, NOT, [NOT] IN ('a', 'b'), [NOT] BETWEEN x AND y, "
        "[NOT] LIKE / ILIKE '%pattern_' (backslash escapes), IS [NOT] NULL; "
        "functions has(arr, 'v'), hasAny(arr, ['v', ...]), hasAll(arr, ['v', ...]), empty(x), notEmpty(x), "
        "length(x), lower(s), upper(s), toDate(dt or '2024-05-01'), toDateTime('...'), "
        "parseDateTimeBestEffort('...'), parseDateTime32BestEffort('...'), now(), today(), "
        "now() - INTERVAL n SECOND|MINUTE|HOUR|DAY|WEEK|MONTH|QUARTER|YEAR; "
        "literals 'string', 12, 1.5, true, false, ['a', 'b']; "
        "a comparison puts a column (or f(column)) on one side and a constant on the other"
    )


# ---------------------------------------------------------------------------------------------- constants
# Folding and typing of constants. Raise ValueError with a reason; the parser turns it into a WhereError.

_INT64 = (-(2**63), 2**63 - 1)
_INTERVAL_SECONDS = {"SECOND": 1, "MINUTE": 60, "HOUR": 3600, "DAY": 86400, "WEEK": 7 * 86400}
_INTERVAL_MONTHS = {"MONTH": 1, "QUARTER": 3, "YEAR": 12}
INTERVAL_UNITS: tuple[str, ...] = (*_INTERVAL_SECONDS, *_INTERVAL_MONTHS)


@dataclass(frozen=True)
class Interval:
    """``INTERVAL n unit`` while folding; it only ever shifts a date or datetime, never reaches the IR."""

    n: int
    unit: str

    def shift(self, moment: date, sign: int) -> date:
        if self.unit in _INTERVAL_MONTHS:  # calendar months, day clamped to the month's end as ClickHouse does
            months = moment.year * 12 + moment.month - 1 + sign * self.n * _INTERVAL_MONTHS[self.unit]
            year, month = divmod(months, 12)
            day = min(moment.day, calendar.monthrange(year, month + 1)[1])
            return moment.replace(year=year, month=month + 1, day=day)
        seconds = sign * self.n * _INTERVAL_SECONDS[self.unit]
        if seconds % 86400:
            moment = as_datetime(moment)  # Date + INTERVAL 1 HOUR is a DateTime
        return moment + timedelta(seconds=seconds)


def is_plain_date(value: object) -> bool:
    return isinstance(value, date) and not isinstance(value, datetime)


def is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def as_datetime(value: date) -> datetime:
    """A Date as ClickHouse widens it next to a DateTime: midnight UTC."""
    return value if isinstance(value, datetime) else datetime.combine(value, time(), UTC)


def add(a: object, b: object, sign: int) -> object:
    """``a + b`` (sign 1) or ``a - b`` (sign -1) on folded constants, as ClickHouse computes them:
    date ± INTERVAL, DateTime ± seconds, Date ± days, number ± number."""
    try:
        if isinstance(a, date) and isinstance(b, Interval):
            return b.shift(a, sign)
        if sign == 1 and isinstance(a, Interval) and isinstance(b, date):
            return a.shift(b, 1)
        if isinstance(a, datetime) and isinstance(b, int) and not isinstance(b, bool):
            return a + timedelta(seconds=sign * b)
        if isinstance(a, date) and isinstance(b, int) and not isinstance(b, bool):
            return a + timedelta(days=sign * b)
    except (OverflowError, ValueError):
        raise ValueError("date arithmetic out of range") from None
    if is_number(a) and is_number(b):
        return a + sign * b
    raise ValueError(f"cannot compute {describe_value(a)} {'+' if sign == 1 else '-'} {describe_value(b)}")


_MONTH_FORMATS = ("%b %d %Y", "%B %d %Y", "%d %b %Y", "%d %B %Y")


def parse_datetime_text(text: str) -> datetime:
    """Our best effort at ClickHouse's: ISO-8601 (``Z``/offsets honoured, naive is UTC), ``YYYY-MM``,
    ``YYYY``, ``Jan 15, 2025`` and ``15 January 2025``; narrower on purpose, every accepted form is
    unambiguous."""
    s = text.strip()
    if re.fullmatch(r"\d{4}", s):
        s += "-01-01"
    elif re.fullmatch(r"\d{4}-\d{2}", s):
        s += "-01"
    try:
        return utc_seconds(datetime.fromisoformat(s))
    except OverflowError:  # an offset pushes it past year 1 or 9999
        raise ValueError(f"date/time out of range: {describe_value(text)}") from None
    except ValueError:
        pass
    for fmt in _MONTH_FORMATS:
        try:
            return utc_seconds(datetime.strptime(" ".join(s.replace(",", " ").split()), fmt))
        except ValueError:
            continue
    raise ValueError(
        f"unrecognised date/time {describe_value(text)} (write e.g. '2024-05-01' or '2024-05-01 13:45:00')"
    )


def unix_time(seconds: int) -> datetime:
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, ValueError, OSError):
        raise ValueError(f"unix time out of range: {describe_value(seconds)}") from None


def number(text: str) -> int | float:
    """A numeric literal; Int64 range and finiteness are checked where the type is known."""
    try:
        value: int | float = int(text)
    except ValueError:
        value = float(text)  # ValueError propagates: not a number
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"number out of range: {describe_value(text)}")
    return value


_NUMERIC_TEXT = re.compile(r"\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*\Z")


def coerce(value: object, kind: ValueType, label: str) -> Value:
    """``value`` as the type a predicate compares with (``label`` names the column side in messages).

    ClickHouse converts a string next to a number or DateTime column; we do the same, in Python, and
    refuse what it could not convert (``price = 'abc'``, ``is_active > 'yes'``).
    """
    if isinstance(value, (list, Interval)):
        # ValueError, not TypeError: it is the refusal channel the parser turns into a WhereError
        raise ValueError(f"{label} ({kind}) takes a single value, not {describe_value(value)}")  # noqa: TRY004
    if kind == "String":
        if not isinstance(value, str):
            raise ValueError(f"{label} is String: compare it with a quoted string, not {describe_value(value)}")
        if "\x00" in value:
            raise ValueError("NUL characters are not allowed in strings")
        return value
    if kind in ("Int64", "Float64"):
        if isinstance(value, str) and _NUMERIC_TEXT.match(value):
            value = number(value.strip())
        if not is_number(value):
            raise ValueError(f"{label} is {kind}: it needs a number, not {describe_value(value)}")
        if isinstance(value, int) and not _INT64[0] <= value <= _INT64[1]:
            raise ValueError(f"integer out of the Int64 range: {describe_value(value)}")
        return value
    if kind == "Bool":
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise ValueError(f"{label} is Bool: it needs true or false, not {describe_value(value)}")
    if kind == "DateTime":
        if isinstance(value, str):
            return parse_datetime_text(value)
        if isinstance(value, date):
            return as_datetime(value)
        if is_number(value) and isinstance(value, int):
            return unix_time(value)
        raise ValueError(
            f"{label} is DateTime: it needs a date/time such as '2024-05-01 13:00:00', "
            f"parseDateTime32BestEffort('...') or now() - INTERVAL 7 DAY, not {describe_value(value)}"
        )
    if kind == "Date":
        if isinstance(value, str):
            value = parse_datetime_text(value)
            if value.time() != time():
                raise ValueError(f"{label} is Date: it needs a date such as '2024-05-01', not a date with a time")
            return value.date()
        if is_plain_date(value):
            return value
        raise ValueError(
            f"{label} is Date: compare it with '2024-05-01', toDate(...) or today(), not {describe_value(value)}"
        )
    raise ValueError(f"{label} is {kind} and takes no single value")


def describe_value(value: object) -> str:
    """A constant as an error message shows it (user text clipped, so messages stay short)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value if len(value) <= 40 else value[:39] + "…")
    if isinstance(value, datetime):
        return f"DateTime '{value:%Y-%m-%d %H:%M:%S}'"
    if isinstance(value, date):
        return f"Date '{value.isoformat()}'"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, Interval):
        return "an INTERVAL"
    text = str(value)
    return text if len(text) <= 40 else text[:39] + "…"


# ---------------------------------------------------------------------------------------------- semantics

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_ASCII_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def ascii_lower(s: str) -> str:
    return s.translate(_ASCII_LOWER)


def ascii_upper(s: str) -> str:
    return s.translate(_ASCII_UPPER)


def utc_seconds(dt: datetime) -> datetime:
    """A datetime as ClickHouse's DateTime holds it: UTC (naive means UTC), whole seconds."""
    dt = dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)
    return dt.replace(microsecond=0)


def like_parts(pattern: str) -> tuple[tuple[bool, str], ...]:
    """A LIKE pattern as ``(is_wildcard, char)`` pairs; each emitter renders them in its own syntax."""
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


@lru_cache(maxsize=256)
def _like_regex(pattern: str, case_insensitive: bool) -> re.Pattern[str]:
    out = []
    for wildcard, ch in like_parts(pattern):
        if wildcard:
            out.append(".*" if ch == "%" else ".")
        else:
            out.append(re.escape(ascii_lower(ch) if case_insensitive else ch))
    return re.compile("".join(out), re.DOTALL)


_OPS: dict[str, Callable[[object, object], bool]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _read(ref: Ref, row: Mapping[str, object]) -> object:
    """The value ``ref`` yields for ``row`` (None for NULL), normalised as the module docstring says."""
    raw = row.get(ref.column.name)
    if ref.column.type == "Array(String)":
        raw = list(raw) if raw is not None else []
    elif raw is None:
        return None
    elif ref.column.type == "DateTime":
        raw = utc_seconds(raw if isinstance(raw, datetime) else datetime.fromisoformat(str(raw)))
    if ref.fn == "lower":
        return ascii_lower(raw)
    if ref.fn == "upper":
        return ascii_upper(raw)
    if ref.fn == "length":
        return len(raw)
    if ref.fn == "toDate":
        return raw.date()
    return raw


def _not(v: bool | None) -> bool | None:
    return None if v is None else not v


def _truth(f: Filter, row: Mapping[str, object]) -> bool | None:
    """Three-valued truth of ``f`` on ``row``: True, False or None (unknown)."""
    if isinstance(f, (And, Or)):
        decisive = isinstance(f, Or)  # the child value that decides the whole node
        result: bool | None = not decisive
        for child in f.children:
            v = _truth(child, row)
            if v is decisive:
                return decisive
            if v is None:
                result = None
        return result
    if isinstance(f, Not):
        return _not(_truth(f.child, row))
    if isinstance(f, (MetaEq, SourceIn, KindIn, IdIn)):
        return matches(
            f,
            metadata=row.get("@metadata") or {},
            source=row.get("@source") or "",
            kind=row.get("@kind") or "",
            record_id=row.get("@id"),
        )
    if isinstance(f, IsNull):
        return (row.get(f.column.name) is not None) is f.negated
    if isinstance(f, (HasAny, HasAll)):
        items = set(_read(Ref(f.column), row))
        test = any if isinstance(f, HasAny) else all
        return test(v in items for v in f.values)
    if isinstance(f, Empty):
        v = _read(Ref(f.column), row)
        return None if v is None else (len(v) == 0) is not f.negated
    v = _read(f.ref, row)
    if v is None:
        return None
    if isinstance(f, Compare):
        return _OPS[f.op](v, f.value)
    if isinstance(f, InList):
        return (v in f.values) is not f.negated
    if isinstance(f, Between):
        return (f.lo <= v <= f.hi) is not f.negated
    if isinstance(f, Like):
        text = ascii_lower(v) if f.case_insensitive else v
        return (_like_regex(f.pattern, f.case_insensitive).fullmatch(text) is not None) is not f.negated
    raise TypeError(f"unknown filter node {f!r}")


def evaluate(f: Filter, row: Mapping[str, object]) -> bool:
    """Whether ``row`` passes ``f``: the reference semantics every store must reproduce.

    ``row`` maps column names to values (str, int, float, bool, datetime or ISO-8601 text for DateTime,
    list of str or None for arrays). The Azure-side nodes (MetaEq, SourceIn, KindIn, IdIn) read the record
    fields from the keys ``@metadata``, ``@source``, ``@kind`` and ``@id`` (never column names).
    """
    return _truth(f, row) is True
