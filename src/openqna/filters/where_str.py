"""Parse a ClickHouse-flavoured ``where_str`` into Filter nodes (``openqna.filters.nodes``), refusing the rest.

``filters.syntax.read_tree`` reads the text within caps into a sqlglot tree.  The security lives in the
allow-list walk here: it accepts a handful of node shapes, resolves names against the schema, folds
every constant in Python (``filters.values``) and builds our own nodes, so no user text ever reaches a
target: openqna's index evaluates the nodes as masks (``filters.masks``) and ``filters.sql`` binds
every value when a SQL engine runs them.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from functools import lru_cache
from typing import NoReturn

from sqlglot import exp

from openqna.filters.evaluate import WhereError
from openqna.filters.nodes import (
    And,
    Between,
    Column,
    Compare,
    CompareOp,
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
    Value,
    ascii_lower,
    ascii_upper,
    like_parts,
)
from openqna.filters.syntax import DIALECT, clip, read_tree
from openqna.filters.values import (
    INTERVAL_UNITS,
    Interval,
    add,
    coerce,
    describe_value,
    is_number,
    is_plain_date,
    number,
    parse_datetime_text,
    utc_seconds,
)

MAX_LIST = 200  # values in one IN list or array literal
_COMPARISONS: dict[type, CompareOp] = {
    exp.EQ: "=", exp.NEQ: "!=", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">=",
}  # fmt: skip
_FLIPPED: dict[str, CompareOp] = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_NAMED_NODES: dict[type, str] = {
    exp.Cast: "CAST / ::", exp.Lambda: "lambdas (->)", exp.Placeholder: "query parameters",
    exp.Parameter: "query parameters", exp.Star: "*", exp.Bracket: "indexing x[i]", exp.NullSafeEQ: "<=>",
    exp.Escape: "ESCAPE (backslash already escapes % and _)", exp.Concat: "string concatenation",
}  # fmt: skip
_CONSTANT_CONDITION = (
    "constant conditions such as 1=1 or true are not allowed (a condition tests a column); "
    "omit where_str to search without a filter"
)
_DATE_FUNCS = {"todate", "todatetime", "parsedatetimebesteffort", "parsedatetime32besteffort"}
_TERM_FUNCS = {"lower", "upper", "length"} | _DATE_FUNCS


def parse_where(text: str, schema: Schema, *, now: datetime | None = None) -> Filter:
    """Parse ``text`` into a typed filter over ``schema``'s columns, or raise ``WhereError``.

    Column names match exactly, or case-insensitively when that is unambiguous (LLMs write ``Price``).
    ``now`` pins ``now()``/``today()`` (UTC); it defaults to the current time.
    """
    try:
        return _parse(text, schema, now)
    except WhereError as exc:  # its list of columns as a filter must write them (`select` in backticks)
        if exc.named:
            raise
        raise WhereError(exc.reason, schema, names=written_name) from None


def _parse(text: str, schema: Schema, now: datetime | None) -> Filter:
    tree = read_tree(text, schema)
    moment = utc_seconds(now or datetime.now(UTC))
    return _Lowering(schema, moment).condition(tree)


@lru_cache(maxsize=4096)
def written_name(name: str) -> str:
    """``name`` as a ``where_str`` writes it: as it is, or in backticks when it reads as a keyword there (a column
    named ``select``, ``and`` or ``null``), which is what tool descriptions show a model."""
    try:
        _parse(f"{name} = 'x'", {name: Column(name, "String")}, None)
    except (WhereError, ValueError):
        return f"`{name}`"
    return name


def _unparen(node: exp.Expr) -> exp.Expr:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def _has_column(node: exp.Expr) -> bool:
    return node.find(exp.Column) is not None


class _Lowering:
    """The allow-list walk: sqlglot nodes in, IR out; anything unrecognised is refused."""

    def __init__(self, schema: Schema, now: datetime):
        self.schema = schema
        self.now = now

    def refuse(self, reason: str) -> NoReturn:
        raise WhereError(reason, self.schema)

    def only(self, node: exp.Expr, *allowed: str) -> None:
        """Refuse syntax this node carries beyond the arguments we understand (GLOBAL IN, SYMMETRIC, ...)."""
        for key, value in node.args.items():
            if key not in allowed and value not in (None, False, [], ""):
                self.refuse(f"not allowed: {self.what(node)} with {key.upper().replace('_', ' ')}")

    def what(self, node: exp.Expr) -> str:
        if isinstance(node, exp.Anonymous):
            return f"function {node.name}()"
        for kind, name in _NAMED_NODES.items():
            if isinstance(node, kind):
                return name
        if isinstance(node, exp.Func):
            return f"function {node.sql_name()}()"
        return f"{type(node).__name__} ({clip(node.sql(dialect=DIALECT), 40)!r})"

    # ------------------------------------------------------------------ conditions

    def condition(self, node: exp.Expr) -> Filter:
        node = _unparen(node)
        if isinstance(node, (exp.And, exp.Or)):
            return self.chain(node)
        if isinstance(node, exp.Not):
            self.only(node, "this")
            inner = _unparen(node.this)
            if isinstance(inner, exp.In):
                return self.in_list(inner, negated=True)
            if isinstance(inner, exp.Between):
                return self.between(inner, negated=True)
            if isinstance(inner, exp.Is):
                return self.is_null(inner, negated=True)
            return Not(self.condition(inner))
        if type(node) in _COMPARISONS:
            return self.comparison(node, _COMPARISONS[type(node)])
        if isinstance(node, exp.In):
            return self.in_list(node, negated=False)
        if isinstance(node, exp.Between):
            return self.between(node, negated=False)
        if isinstance(node, (exp.Like, exp.ILike)):
            return self.like(node)
        if isinstance(node, exp.Is):
            return self.is_null(node, negated=False)
        if isinstance(node, exp.Anonymous):
            return self.predicate_call(node)
        if isinstance(node, exp.Column):
            column = self.column(node)
            if column.type != "Bool":
                self.refuse(f"{column.name} ({column.type}) is not a condition by itself: compare it with a value")
            return Compare(Ref(column), "=", True)
        if not _has_column(node):
            self.constant(node)  # a disallowed function gets its own message
            self.refuse(_CONSTANT_CONDITION)
        self.refuse(f"not allowed: {self.what(node)}")

    def chain(self, node: exp.And | exp.Or) -> Filter:
        """Flatten a left-deep AND/OR chain without recursion (long chains are legitimate)."""
        kind = type(node)
        children: list[Filter] = []
        pending = [node]
        while pending:
            current = pending.pop()
            if type(current) is kind:
                self.only(current, "this", "expression")
                pending += [current.expression, current.this]
            else:
                children.append(self.condition(current))
        return (And if kind is exp.And else Or)(tuple(children))

    def comparison(self, node: exp.Expr, op: CompareOp) -> Filter:
        self.only(node, "this", "expression")
        left, right = node.this, node.expression
        if _has_column(right) and not _has_column(left):
            left, right, op = right, left, _FLIPPED[op]
        if not _has_column(left):
            for side in (left, right):
                self.constant(side)  # a disallowed function gets its own message
            self.refuse(_CONSTANT_CONDITION)
        ref = self.term(left)
        if _has_column(right):
            self.term(right)  # an unknown name gets its own message
            self.refuse("compare a column with a constant, not with another column")
        value = self.constant(right)
        if value is None:
            self.refuse(f"'{op} NULL' is never true: use {ref} IS NULL or IS NOT NULL")
        if ref.type == "Array(String)":
            self.refuse(self.array_hint(ref.column))
        if ref.type == "Bool" and op not in ("=", "!="):
            self.refuse(f"{ref} is Bool: compare it with = or != true/false, or use it alone as a condition")
        return Compare(ref, op, self.coerce(value, ref))

    def in_list(self, node: exp.In, *, negated: bool) -> Filter:
        if node.args.get("field"):
            self.refuse("IN needs a parenthesised list of constants, e.g. x IN ('a', 'b')")
        self.only(node, "this", "expressions")
        if not node.expressions:
            self.refuse("empty IN list")
        if len(node.expressions) > MAX_LIST:
            self.refuse(f"IN list has {len(node.expressions)} values (max {MAX_LIST})")
        ref = self.term(node.this)
        if ref.type == "Array(String)":
            self.refuse(self.array_hint(ref.column))
        values = []
        for item in node.expressions:
            value = self.constant(item)
            if value is None:
                self.refuse(f"NULL in an IN list never matches: use {ref} IS NULL")
            values.append(self.coerce(value, ref))
        return InList(ref, tuple(values), negated)

    def between(self, node: exp.Between, *, negated: bool) -> Filter:
        self.only(node, "this", "low", "high")
        ref = self.term(node.this)
        if ref.type in ("Array(String)", "Bool"):
            self.refuse(f"BETWEEN does not apply to {ref} ({ref.type})")
        low, high = self.constant(node.args["low"]), self.constant(node.args["high"])
        if low is None or high is None:
            self.refuse("BETWEEN bounds cannot be NULL")
        return Between(ref, self.coerce(low, ref), self.coerce(high, ref), negated)

    def like(self, node: exp.Like | exp.ILike) -> Filter:
        self.only(node, "this", "expression", "negate")
        word = "ILIKE" if isinstance(node, exp.ILike) else "LIKE"
        ref = self.term(node.this)
        if ref.type != "String":
            self.refuse(f"{word} applies to String columns; {ref} is {ref.type}")
        pattern = self.constant(node.expression)
        if not isinstance(pattern, str):
            self.refuse(f"{word} needs a quoted pattern such as '%word%', not {describe_value(pattern)}")
        try:
            like_parts(pattern)
        except ValueError as e:
            self.refuse(str(e))
        checked = self.coerce(pattern, ref)
        assert isinstance(checked, str)  # a String column (checked above) coerces a str pattern to itself
        return Like(ref, checked, isinstance(node, exp.ILike), bool(node.args.get("negate")))

    def is_null(self, node: exp.Is, *, negated: bool) -> Filter:
        self.only(node, "this", "expression")
        if not isinstance(node.expression, exp.Null):
            self.refuse("IS only takes NULL: use IS NULL or IS NOT NULL (compare Bool columns with = true)")
        ref = self.term(node.this)
        if ref.fn:
            self.refuse(f"IS [NOT] NULL applies to a column name, not {ref}")
        column = ref.column
        if column.type == "Array(String)":
            self.refuse(f"{column.name} is Array(String) and never NULL: use empty() or notEmpty()")
        return IsNull(column, negated)

    def predicate_call(self, node: exp.Anonymous) -> Filter:
        name = node.name.lower()
        args = node.expressions
        if name in ("has", "hasany", "hasall"):
            if len(args) != 2:
                second = "a value" if name == "has" else "an array"
                self.refuse(f"{node.name}() takes 2 arguments: an Array(String) column and {second}")
            if not _has_column(args[0]) and isinstance(_unparen(args[1]), exp.Column):
                self.refuse(f"write {args[1].sql(dialect=DIALECT)} IN ('a', 'b') to test a column against a list")
            column = self.array_column(args[0], node.name)
            if name == "has":
                value = self.constant(args[1])
                return HasAny(column, (self.element(value, node.name),))
            values = self.constant(args[1])
            if not isinstance(values, list):
                self.refuse(f"{node.name}() takes an array literal such as ['a', 'b'] as its second argument")
            if not values:
                self.refuse(f"{node.name}() needs a non-empty array")
            distinct = tuple(dict.fromkeys(self.element(v, node.name) for v in values))
            return (HasAny if name == "hasany" else HasAll)(column, distinct)
        if name in ("empty", "notempty"):
            if len(args) != 1 or not isinstance(target := _unparen(args[0]), exp.Column):
                self.refuse(f"{node.name}() takes one column")
            column = self.column(target)
            if column.type not in ("String", "Array(String)"):
                self.refuse(f"{node.name}() applies to String and Array(String); {column.name} is {column.type}")
            return Empty(column, negated=name == "notempty")
        if name in _TERM_FUNCS or name in ("now", "today"):
            self.refuse(f"{node.name}() is a value, not a condition: compare it, e.g. {node.name}(...) = ...")
        self.refuse(f"function not allowed: {node.name}()")

    def array_column(self, node: exp.Expr, function: str) -> Column:
        node = _unparen(node)
        if not isinstance(node, exp.Column):
            self.refuse(f"{function}() takes an Array(String) column as its first argument")
        column = self.column(node)
        if column.type != "Array(String)":
            self.refuse(f"{function}() needs an Array(String) column; {column.name} is {column.type}")
        return column

    def element(self, value: object, function: str) -> str:
        if not isinstance(value, str):
            self.refuse(f"{function}() compares array elements with quoted strings, not {describe_value(value)}")
        try:
            return coerce(value, "String", "an array element")
        except ValueError as e:
            self.refuse(str(e))

    def array_hint(self, column: Column) -> str:
        c = column.name
        return f"{c} is Array(String): use has({c}, 'v'), hasAny/hasAll({c}, ['v', ...]), length({c}) or empty({c})"

    # ------------------------------------------------------------------ terms

    def column(self, node: exp.Column) -> Column:
        if any(node.args.get(k) for k in ("table", "db", "catalog")):
            self.refuse("qualified names such as t.column are not allowed: use the bare column name")
        self.only(node, "this")
        ident = node.this
        if not isinstance(ident, exp.Identifier):
            self.refuse(f"not a column name: {clip(node.sql(dialect=DIALECT), 40)!r}")
        name = ident.name
        found = self.schema.get(name)
        if found is None:
            folded = [c for c in self.schema.values() if c.name.lower() == name.lower()]
            if len(folded) > 1:  # "unknown column" sent the caller looking for a column that is there twice
                self.refuse(f"ambiguous column {clip(name, 40)!r}: " + " or ".join(
                    written_name(c.name) for c in folded[:5]) + "; write it as the schema does")
            found = folded[0] if folded else None
        if found is None:
            hint = " (double quotes and backticks name columns; write strings in single quotes)" if ident.quoted else ""
            self.refuse(f"unknown column {clip(name, 40)!r}{hint}")
        return found

    def term(self, node: exp.Expr) -> Ref:
        """The column side of a predicate: ``column`` or ``f(column)`` for an allowed f."""
        node = _unparen(node)
        if isinstance(node, exp.Column):
            return Ref(self.column(node))
        if isinstance(node, exp.Anonymous) and node.name.lower() in _TERM_FUNCS:
            name = node.name.lower()
            if len(node.expressions) != 1 or not isinstance(target := _unparen(node.expressions[0]), exp.Column):
                self.refuse(f"{node.name}() takes exactly one column here (functions apply to a column directly)")
            column = self.column(target)
            if name == "lower" and column.type == "String":
                return Ref(column, "lower")
            if name == "upper" and column.type == "String":
                return Ref(column, "upper")
            if name == "length" and column.type in ("String", "Array(String)"):
                return Ref(column, "length")
            if name == "todate" and column.type == "DateTime":
                return Ref(column, "toDate")
            if name in _DATE_FUNCS and column.type == "DateTime":
                return Ref(column)  # toDateTime / parseDateTime*BestEffort of a DateTime is itself
            self.refuse(f"{node.name}() does not apply to {column.name} ({column.type})")
        if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.Neg)):
            self.refuse("arithmetic on columns is not allowed: compare the column itself with a constant")
        if isinstance(node, exp.Anonymous):
            self.refuse(f"function not allowed: {node.name}()")
        self.refuse(f"not allowed: {self.what(node)}")

    # ------------------------------------------------------------------ constants

    def constant(self, node: exp.Expr) -> object:
        """Fold a column-free expression to a Python value (None for NULL, list for [..], Interval)."""
        node = _unparen(node)
        try:
            if isinstance(node, exp.Literal):
                self.only(node, "this", "is_string")
                return node.this if node.is_string else number(node.this)
            if isinstance(node, exp.Boolean):
                return bool(node.this)
            if isinstance(node, exp.Null):
                return None
            if isinstance(node, exp.Neg):
                value = self.constant(node.this)
                if not is_number(value):
                    self.refuse(f"unary minus needs a number, not {describe_value(value)}")
                return -value
            if isinstance(node, exp.Array):
                self.only(node, "expressions", "bracket_notation")
                if len(node.expressions) > MAX_LIST:
                    self.refuse(f"array has {len(node.expressions)} values (max {MAX_LIST})")
                return [self.constant(item) for item in node.expressions]
            if isinstance(node, exp.Interval):
                return self.interval(node)
            if isinstance(node, (exp.Add, exp.Sub)):
                self.only(node, "this", "expression")
                sign = 1 if isinstance(node, exp.Add) else -1
                return add(self.constant(node.this), self.constant(node.expression), sign)
            if isinstance(node, exp.Anonymous):
                return self.call(node)
        except ValueError as e:
            self.refuse(str(e))
        if isinstance(node, exp.Column):
            self.column(node)  # an unknown name gets its own message
            self.refuse(f"only constants are allowed here, not the column {node.name}")
        if isinstance(node, exp.Tuple):
            self.refuse("tuples are not allowed: write arrays as ['a', 'b'] and IN lists as x IN ('a', 'b')")
        self.refuse(f"not allowed: {self.what(node)}")

    def interval(self, node: exp.Interval) -> Interval:
        self.only(node, "this", "unit")
        unit = node.args.get("unit")
        name = unit.name.upper().removesuffix("S") if isinstance(unit, exp.Var) else ""
        amount = self.constant(node.this) if node.this is not None else None
        if isinstance(amount, str) and re.fullmatch(r"\s*[-+]?\d{1,12}\s*", amount):
            amount = int(amount)
        if name not in INTERVAL_UNITS or not is_number(amount) or not isinstance(amount, int):
            units = ", ".join(INTERVAL_UNITS)
            self.refuse(f"INTERVAL needs a whole number and a unit ({units}), e.g. INTERVAL 7 DAY")
        if abs(amount) > 10**9:
            self.refuse(f"INTERVAL {amount} {name} is too long: the amount is at most 1000000000")
        return Interval(amount, name)

    def call(self, node: exp.Anonymous) -> object:
        """A function of constants: now(), today(), toDate('...'), lower('ABC'), ..."""
        name = node.name.lower()
        if name in ("now", "today"):
            if node.expressions:
                self.refuse(f"{node.name}() takes no arguments (the time zone is UTC)")
            return self.now if name == "now" else self.now.date()
        if name not in _TERM_FUNCS:
            self.refuse(f"function not allowed: {node.name}()")
        if len(node.expressions) != 1:
            self.refuse(f"{node.name}() takes one argument")
        arg = self.constant(node.expressions[0])
        if name in ("lower", "upper") and isinstance(arg, str):
            return ascii_lower(arg) if name == "lower" else ascii_upper(arg)
        if name == "length" and isinstance(arg, (str, list)):
            return len(arg)
        if name == "todate" and isinstance(arg, (str, date)):
            return arg if is_plain_date(arg) else coerce(arg, "DateTime", "toDate()").date()
        if name == "todatetime" and (isinstance(arg, date) or is_number(arg)):
            return coerce(arg, "DateTime", "toDateTime()")
        if name in _DATE_FUNCS and isinstance(arg, str):
            return parse_datetime_text(arg)
        self.refuse(f"{node.name}() does not take {describe_value(arg)}")

    def coerce(self, value: object, ref: Ref) -> Value:
        try:
            return coerce(value, ref.type, str(ref))
        except ValueError as e:
            self.refuse(str(e))
