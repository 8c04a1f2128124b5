"""``where_str`` constants: folded and typed in Python before any filter node is built.

``filters.where_str`` evaluates every column-free expression here (``now() - INTERVAL 7 DAY``,
``parseDateTime32BestEffort('2024-05-01')``, ``'12'`` next to an Int64 column), so a node only ever
holds a typed Python value and no target has to interpret user text.  Functions raise ValueError with a
reason; the parser turns it into a ``WhereError``.  ``tables`` reuses ``parse_datetime_text`` so a
loaded row and a filter read dates the same way.
"""

from __future__ import annotations

import calendar
import math
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Literal, TypeGuard, overload

from openqna.filters.nodes import Value, ValueType

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


def is_plain_date(value: object) -> TypeGuard[date]:
    return isinstance(value, date) and not isinstance(value, datetime)


def is_number(value: object) -> TypeGuard[int | float]:  # bool is not a number here
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


_SLASHED = re.compile(r"(\d{4})/(\d{1,2})/(\d{1,2})((?:[ T]\d{2}:\d{2}(?::\d{2})?)?)")


def parse_datetime_text(text: str) -> datetime:
    """Our best effort at ClickHouse's: ISO-8601 (``Z``/offsets honoured, naive is UTC), ``YYYY/MM/DD``, ``YYYY-MM``,
    ``YYYY``, ``Jan 15, 2025`` and ``15 January 2025``; narrower on purpose, every accepted form is
    unambiguous."""
    s = text.strip()
    slashed = _SLASHED.fullmatch(s)  # 2020/03/17 (year first, so unambiguous), as ClickHouse's BestEffort reads it
    if slashed:
        y, m, d, rest = slashed.groups()
        s = f"{y}-{int(m):02d}-{int(d):02d}" + (f" {rest[1:]}" if rest else "")
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


@overload
def coerce(value: object, kind: Literal["String"], label: str) -> str: ...
@overload
def coerce(value: object, kind: Literal["DateTime"], label: str) -> datetime: ...
@overload
def coerce(value: object, kind: ValueType, label: str) -> Value: ...
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


def utc_seconds(dt: datetime) -> datetime:
    """A datetime as ClickHouse's DateTime holds it: UTC (naive means UTC), whole seconds."""
    dt = dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)
    return dt.replace(microsecond=0)
