"""A vector store file's attributes as typed columns: how records store them, and how where_str names them.

OpenAI attributes are free-form keys whose values are strings, numbers or booleans, and a key may hold a string in
one file and a number in another.  A record keeps each one in a typed column of its own, named
``attr_<str|num|bool>_<hex of key>`` (``attribute_column``), so any key, whatever its characters, is a column name
and each column has one type; OpenAI's filters pick the column by the compared value's type.  These names are
storage: results leave them out (``without_attribute_columns``: the ``attributes`` object shows the values), and
``where_str`` names an attribute by its own key (``attribute_where_columns``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from openqna.filters.nodes import Column, ColumnType

PREFIX = "attr_"
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def attribute_column(key: str, value: object) -> Column:
    """The typed column holding attribute ``key`` when its value has ``value``'s type."""
    ctype: ColumnType
    if isinstance(value, bool):
        kind, ctype = "bool", "Bool"
    elif isinstance(value, (int, float)):
        kind, ctype = "num", "Float64"
    else:
        kind, ctype = "str", "String"
    return Column(f"{PREFIX}{kind}_{key.encode().hex()}", ctype)


def attribute_fields(attributes: dict | None) -> dict[str, Any]:
    """The typed columns of ``attributes``, as a record's ``fields`` hold them."""
    return {attribute_column(k, v).name: v for k, v in (attributes or {}).items()}


def without_attribute_columns(fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` without the attributes' storage columns (the ``attributes`` object holds the same values)."""
    return {k: v for k, v in fields.items() if not k.startswith(PREFIX)}


def attribute_where_columns(attributes: Iterable[Mapping[str, Any] | None],
                            taken: Iterable[str] = ()) -> dict[str, Column]:
    """The attributes ``where_str`` may name, each under its own key, typed: key → the column that stores it.

    A key must be a plain identifier and not a name ``taken`` by another column; a key whose values have more
    than one type across the records is left out, as no one type would find them all (OpenAI's own filters,
    which compare by the value's type, still reach it).
    """
    columns: dict[str, dict[str, Column]] = {}
    for attrs in attributes:
        for key, value in (attrs or {}).items():
            column = attribute_column(key, value)
            columns.setdefault(key, {})[column.name] = column
    names = {n.lower() for n in taken}
    return {key: next(iter(stored.values())) for key, stored in sorted(columns.items())
            if len(stored) == 1 and _IDENTIFIER.match(key) and key.lower() not in names}
