"""``where_str`` as a language: what it refuses (``WhereError``), what it allows, and what it means.

``evaluate`` here is the reference semantics of every Filter node (``openqna.filters.nodes``), one row at a
time.  Which path actually runs where:

* every question on openqna's own index (SQLite and PostgreSQL stores alike): ``filters.masks.where_mask``,
  masks over the whole index, built from this module's ``read_value``/``COMPARE_OPS``/``like_regex``
  once per distinct value; measured faster than PostgreSQL's filtered pgvector search at every
  selectivity (``filters/sql.py`` has the numbers);
* SQL: ``filters.sql`` compiles the same nodes with bound values for PostgreSQL (pgvector's search
  inside the database, only where it does not lose), ClickHouse (tables in a user's own
  ClickHouse/MyScale) and SQLite (tests and bench only); each dialect runs on a real engine in the
  tests against ``evaluate`` on the same rows;
* ``evaluate`` itself: the tests' oracle, and ``filters.masks``'s record-field masks over plain rows.

The semantics are spelled out once, here:

* SQL three-valued logic, as ClickHouse and the SQL stores have it: a comparison with NULL is unknown,
  NOT unknown is unknown, and a row is selected only when the whole filter is true.
* Array(String) columns are never NULL: a missing array reads as ``[]`` (ClickHouse arrays are not
  Nullable), so ``NOT has(tags, 'x')`` selects rows without tags.
* DateTime values are UTC with whole seconds (ClickHouse's DateTime resolution); naive values are UTC.
  Stores keep them as ISO-8601 text (SQLite, PostgreSQL's JSON) or ``timestamptz``/``DateTime``.
* ``lower``/``upper`` fold ASCII letters only, as ClickHouse's ``lower``/``upper`` and SQLite's built-ins do.
  ILIKE folds Unicode letters (``nodes.case_fold``), as ClickHouse's ILIKE does: ``'CAFÉ Straße' ILIKE 'café%'``.
* ``length`` counts characters (ClickHouse's ``lengthUTF8``), or elements of an array.
* LIKE: ``%`` is any run, ``_`` one character, a backslash makes the next character literal.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping
from datetime import datetime
from functools import lru_cache
from typing import Any

from openqna.filters.match import matches
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
    Schema,
    ascii_lower,
    ascii_upper,
    case_fold,
    like_parts,
)
from openqna.filters.values import utc_seconds
from openqna.records import InvalidArgument


class WhereError(InvalidArgument):
    """A refused ``where_str``.

    The message names what was refused and then everything that is allowed (columns with types,
    operators, functions), because the caller is usually an LLM that corrects itself from it.
    """

    def __init__(self, reason: str, schema: Schema, *, names: Callable[[str], str] | None = None):
        super().__init__(f"where_str refused: {reason}. Allowed: {allowed_syntax(schema, names)}", target="where_str")
        self.reason = reason
        self.named = names is not None


def allowed_syntax(schema: Schema, names: Callable[[str], str] | None = None) -> str:
    """The whole filter language in one paragraph, generated from the schema (also fit for tool descriptions);
    ``names`` writes a column's name as a filter must (``where_str.written_name``: `select` in backticks)."""
    write = names or (lambda name: name)
    columns = ", ".join(f"{write(c.name)} {c.type}" for c in schema.values())
    return (
        f"columns {columns or '(none)'}; "
        "operators = != < <= > >=, AND, OR, NOT, [NOT] IN ('a', 'b'), [NOT] BETWEEN x AND y, "
        "[NOT] LIKE / ILIKE '%pattern_' (backslash escapes), IS [NOT] NULL; "
        "functions has(arr, 'v'), hasAny(arr, ['v', ...]), hasAll(arr, ['v', ...]), empty(x), notEmpty(x), "
        "length(x), lower(s), upper(s), toDate(dt or '2024-05-01'), toDateTime('...'), "
        "parseDateTimeBestEffort('...'), parseDateTime32BestEffort('...'), now(), today(), "
        "now() - INTERVAL n SECOND|MINUTE|HOUR|DAY|WEEK|MONTH|QUARTER|YEAR; "
        "literals 'string', 12, 1.5, true, false, ['a', 'b']; "
        "a comparison puts a column (or f(column)) on one side and a constant on the other"
    )


# ---------------------------------------------------------------------------------------------- semantics

@lru_cache(maxsize=256)
def like_regex(pattern: str, case_insensitive: bool) -> re.Pattern[str]:
    """A LIKE pattern as a regular expression to ``fullmatch`` (ILIKE: against ``case_fold`` of the text).

    Linear in the text whatever the pattern: each ``%`` but the last is an atomic group that takes the earliest
    place where the run of literals and ``_`` after it fits, and never gives it back (an earlier place always
    leaves at least as much for the rest).  As plain ``.*``, ``'%a%a%a%a%ab'`` backtracked for 36 s over a
    200-character value, holding the GIL: one where_str stalled the whole server.
    """
    runs = [""]  # the pattern split at each %: runs of literals and _
    for wildcard, ch in like_parts(pattern):
        if wildcard and ch == "%":
            runs.append("")
        else:
            runs[-1] += "." if wildcard else re.escape(case_fold(ch) if case_insensitive else ch)
    if len(runs) == 1:
        return re.compile(runs[0], re.DOTALL)
    middle = "".join(f"(?>.*?{run})" for run in runs[1:-1])
    return re.compile(f"{runs[0]}{middle}.*{runs[-1]}", re.DOTALL)


# Python's operators are the reference comparisons: values are already typed alike (filters.values.coerce).
COMPARE_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def read_value(ref: Ref, row: Mapping[str, Any]) -> Any:
    """The value ``ref`` yields for ``row`` (None for NULL), normalised as the module docstring says.

    Row values are dynamic (see ``evaluate``); the schema, not the checker, says what type each column holds.
    """
    raw: Any = row.get(ref.column.name)
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


def _truth(f: Filter, row: Mapping[str, Any]) -> bool | None:
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
    if isinstance(f, RECORD_NODES):
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
        items = set(read_value(Ref(f.column), row))
        test = any if isinstance(f, HasAny) else all
        return test(v in items for v in f.values)
    if isinstance(f, Empty):
        v = read_value(Ref(f.column), row)
        return None if v is None else (len(v) == 0) is not f.negated
    v = read_value(f.ref, row)
    if v is None:
        return None
    if isinstance(f, Compare):
        return COMPARE_OPS[f.op](v, f.value)
    if isinstance(f, InList):
        return (v in f.values) is not f.negated
    if isinstance(f, Between):
        return (f.lo <= v <= f.hi) is not f.negated
    if isinstance(f, Like):
        text = case_fold(v) if f.case_insensitive else v
        return (like_regex(f.pattern, f.case_insensitive).fullmatch(text) is not None) is not f.negated
    raise TypeError(f"unknown filter node {f!r}")


def evaluate(f: Filter, row: Mapping[str, Any]) -> bool:
    """Whether ``row`` passes ``f``: the reference semantics every store must reproduce.

    ``row`` maps column names to values (str, int, float, bool, datetime or ISO-8601 text for DateTime,
    list of str or None for arrays). The Azure-side nodes (MetaEq, SourceIn, KindIn, IdIn) read the record
    fields from the keys ``@metadata``, ``@source``, ``@kind`` and ``@id`` (never column names).
    """
    return _truth(f, row) is True
