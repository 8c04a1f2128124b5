"""Read a ``where_str`` into a sqlglot tree, safely: caps first, then ClickHouse's lexical rules.

Why sqlglot as the front end: it implements ClickHouse's lexical rules (backslash and ``''`` escapes,
backtick and double-quoted identifiers, ``[..]`` arrays, ``INTERVAL``), so we agree with the engine about
where a string ends, the usual root cause of injection.  The tree it returns is untrusted: the
allow-list walk of ``filters.where_str`` turns it into filter nodes or refuses it.

Why caps before parsing: sqlglot's parser is recursive (``RecursionError`` at ~45 nested parentheses) and
long flat chains are slow, so length and a nesting estimate are checked on the tokens first.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, ClassVar

from sqlglot import exp
from sqlglot.dialects.clickhouse import ClickHouse
from sqlglot.errors import ParseError, SqlglotError
from sqlglot.parsers.clickhouse import ClickHouseParser  # ClickHouse.Parser, named where the checker sees a class
from sqlglot.tokens import Token, TokenType

from openqna.filters.evaluate import WhereError
from openqna.filters.nodes import Schema

MAX_LENGTH = 2000  # characters; a filter is a sentence, not a document
MAX_DEPTH = 24  # nesting estimate on tokens; sqlglot needs ~25 Python frames per level
MAX_NODES = 800  # sqlglot nodes; bounds the walk (150 OR-ed comparisons are ~750)
_MAX_TREE_DEPTH = 100  # backstop for our own recursive walk


class WhereClickHouse(ClickHouse):
    """ClickHouse syntax with (almost) no function table.

    Every call then stays ``exp.Anonymous`` under the name the caller wrote, with all its arguments;
    sqlglot otherwise maps calls to typed nodes, renames them (``arrayJoin`` becomes ``EXPLODE``) and
    silently drops extra arguments (``length(x, y)`` becomes ``LENGTH(x)``). Only the parsers with special
    syntax stay: ``CAST(x AS T)``, and ``and()``/``or()``, which are plain AND/OR.
    """

    class Parser(ClickHouseParser):
        FUNCTIONS: ClassVar[dict[str, Callable[..., Any]]] = {}
        FUNCTION_PARSERS: ClassVar[dict[str, Callable[..., Any]]] = {
            name: parser
            for name, parser in ClickHouseParser.FUNCTION_PARSERS.items()
            if name in ("CAST", "TRY_CAST", "AND", "OR")
        }

        def _warn_unsupported(self) -> None:
            """sqlglot would log user text and fall back to an opaque ``Command``; refuse instead."""
            self.raise_error("statement syntax is not allowed")


DIALECT = WhereClickHouse()
_OPEN = {TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE}
_CLOSE = {TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE}
_PREFIX = {TokenType.NOT, TokenType.DASH, TokenType.PLUS}
_RESET = {TokenType.AND, TokenType.OR, TokenType.COMMA}
_STATEMENT_WORDS = {
    "SELECT", "UNION", "FROM", "WITH", "SETTINGS", "FORMAT", "INTO", "DROP", "INSERT", "ALTER",
    "DELETE", "UPDATE", "CREATE", "LIMIT", "ORDER", "GROUP", "HAVING", "JOIN", "EXCEPT", "INTERSECT",
}  # fmt: skip


def read_tree(text: str, schema: Schema) -> exp.Expr:
    """``text`` as a sqlglot condition tree within the caps, or ``WhereError`` (``schema`` is for its message)."""
    tokens = _tokens(text, schema)
    try:
        tree = DIALECT.parser().parse_into(exp.Condition, tokens, text)[0]
    except RecursionError:
        raise WhereError(f"expression nested too deeply (max {MAX_DEPTH} levels)", schema) from None
    except ParseError as e:
        raise WhereError(_syntax_reason(e), schema) from None
    except Exception:  # noqa: BLE001 - sqlglot trips on some garbage (IndexError on 'ELSE'): refuse it
        raise WhereError("not a boolean expression", schema) from None
    if tree is None:  # sqlglot returns no expression for inputs such as a lone '+'
        raise WhereError("not a boolean expression", schema)
    _check_size(tree, schema)
    return tree


def _tokens(text: str, schema: Schema) -> list[Token]:
    """Tokenize after the cheap caps; refuse comments, ';' and deep nesting before the recursive parser."""
    if not isinstance(text, str):
        raise WhereError("where_str must be a string", schema)
    if len(text) > MAX_LENGTH:
        raise WhereError(f"filter is {len(text)} characters long (max {MAX_LENGTH})", schema)
    if "\x00" in text:
        raise WhereError("NUL characters are not allowed", schema)
    if re.search(r"[\ud800-\udfff]", text):
        raise WhereError("the filter is not valid Unicode (lone surrogate)", schema)
    try:
        tokens = DIALECT.tokenize(text)
    except SqlglotError:
        reason = "unreadable filter: unterminated string or quoted name, or a stray character"
        raise WhereError(reason, schema) from None
    if not tokens:
        raise WhereError("empty filter (omit where_str to search without a filter)", schema)
    prefixes = [0]  # one slot per open bracket: NOT / unary signs pending at that level
    for token in tokens:
        if token.comments:
            raise WhereError("comments (--, #, /* */) are not allowed", schema)
        kind = token.token_type
        if kind == TokenType.SEMICOLON:
            raise WhereError("';' is not allowed: where_str is one boolean expression, not statements", schema)
        if kind in _OPEN:
            prefixes.append(0)
        elif kind in _CLOSE and len(prefixes) > 1:
            prefixes.pop()
        elif kind in _PREFIX:
            prefixes[-1] += 1
        elif kind in _RESET:
            prefixes[-1] = 0
        if len(prefixes) - 1 + sum(prefixes) > MAX_DEPTH:
            reason = f"expression nested too deeply (max {MAX_DEPTH} levels of parentheses, brackets and NOT)"
            raise WhereError(reason, schema)
    return tokens


# sqlglot says an operator lacks an operand as "Required keyword: 'expression' missing for <class
# 'sqlglot.expressions.core.And'>": the parser's internals, which tell a caller nothing.  Its node names, in words.
_MISSING_OPERAND = re.compile(r"Required keyword: '\w+' missing for <class '[\w.]*?(\w+)'>")
_COMPARISONS = {"EQ": "=", "NEQ": "!=", "GT": ">", "GTE": ">=", "LT": "<", "LTE": "<="}
_NEEDS = {
    "And": "AND needs a condition on both sides (category = 'news' AND year > 2020)",
    "Or": "OR needs a condition on both sides (category = 'news' OR category = 'blog')",
    "Not": "NOT needs a condition after it (NOT category = 'news')",
    "Between": "BETWEEN needs a low and a high bound joined by AND (year BETWEEN 2020 AND 2023)",
    "Like": "LIKE needs a column before it and a pattern in single quotes after it (title LIKE '%guide%')",
    "ILike": "ILIKE needs a column before it and a pattern in single quotes after it (title ILIKE '%guide%')",
    "In": "IN needs a list of values in parentheses after it (category IN ('news', 'blog'))",
    "Neg": "'-' needs a number after it",
} | {name: f"{op} needs a column on one side and a value on the other (year {op} 2020)"
     for name, op in _COMPARISONS.items()}


def _syntax_reason(e: ParseError) -> str:
    detail = e.errors[0] if e.errors else {}
    near = str(detail.get("highlight", ""))
    if near.upper() in _STATEMENT_WORDS:
        return f"{near.upper()} is not allowed: where_str is one boolean expression over the columns, not a query"
    description = str(detail.get("description", "invalid syntax"))
    missing = _MISSING_OPERAND.search(description)
    if missing:
        return _NEEDS.get(missing.group(1), "an operator is missing a condition or a value on one side")
    if "<class" in description or "sqlglot" in description:  # never show the parser's internals
        description = "invalid syntax"
    if description == "Expecting )":
        description = "a closing parenthesis is missing"
    elif description == "Invalid expression / Unexpected token":
        description = "unexpected here (are an operator, a quote or a parenthesis missing?)"
    return f"syntax error near {clip(near)!r} (column {detail.get('col', '?')}): {clip(description, 80)}"


def _check_size(tree: exp.Expr, schema: Schema) -> None:
    """Cap node count and depth (AND/OR chains count as one level: the walk flattens them without
    recursion), and name the commonest attack, a subquery, wherever it hides."""
    count = 0
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        count += 1
        if count > MAX_NODES:
            raise WhereError(f"filter too large (more than {MAX_NODES} syntax nodes)", schema)
        if depth > _MAX_TREE_DEPTH:
            raise WhereError(f"expression nested too deeply (max {MAX_DEPTH} levels)", schema)
        if isinstance(node, (exp.Query, exp.Subquery, exp.Exists)):
            raise WhereError("subqueries (SELECT, EXISTS, IN (SELECT ...)) are not allowed", schema)
        for child in node.iter_expressions():
            chained = isinstance(node, (exp.And, exp.Or)) and type(child) is type(node)
            stack.append((child, depth if chained else depth + 1))


def clip(text: str, limit: int = 60) -> str:
    """User text shortened for an error message (messages stay short whatever the input)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
