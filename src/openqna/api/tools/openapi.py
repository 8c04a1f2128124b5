"""OpenAPI documents for GPT Actions: one ``get_related_{kb}`` operation per knowledge base.

GPT Actions take OpenAPI 3.0 (documented) and 3.1; both are served from one builder that
avoids the constructs on which they differ (no ``nullable``, no type arrays).  Limits that
GPT Actions enforce are respected here: an operation's description ≤ 300 characters and a
parameter's ≤ 700, so the table schema and filter hints go into the ``where_str`` parameter.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection
from urllib.parse import quote

from openqna import __version__, settings
from openqna.filters.where_str import written_name
from openqna.kb.service import KnowledgeBaseInfo
from openqna.kb.writing import name_problem

OPERATION_CHARS = 300
PARAMETER_CHARS = 700
OPERATION_ID_CHARS = 64  # GPT Actions make functions of operationIds: ^[a-zA-Z0-9_-]{1,64}$
_NOT_IN_OPERATION_ID = re.compile(r"[^A-Za-z0-9_-]")


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def where_description(kb: KnowledgeBaseInfo) -> str:
    if kb.connected:
        return connected_description(kb, PARAMETER_CHARS)
    example = _example(kb)
    rest = (". Use =, !=, <, >, IN, BETWEEN, LIKE/ILIKE, IS NULL, AND/OR/NOT, has/hasAny/hasAll(array, ...), lower(), "
            "length(), parseDateTime32BestEffort('2024-01-31'), toDate(), now() - INTERVAL 30 DAY. No subqueries. "
            f"{example}")
    head = "Optional SQL-like filter, ClickHouse syntax, over the columns: "
    return _clip(head + _columns_within(kb, PARAMETER_CHARS - len(head) - len(rest)) + rest, PARAMETER_CHARS)


def _columns_within(kb: KnowledgeBaseInfo, budget: int) -> str:
    """The columns with their types in ``budget`` characters: each with its type; else grouped by type (shorter);
    else as many names as fit and how many more there are, so the syntax and the example after them are never cut
    (a wide table's list once took the whole description)."""
    plain = ", ".join(f"{written_name(c.name)} {c.type}" for c in kb.columns) or "(none)"
    if len(plain) <= budget:
        return plain
    by_type: dict[str, list[str]] = {}
    for c in kb.columns:
        by_type.setdefault(c.type, []).append(written_name(c.name))
    grouped = "; ".join(f"{t}: {', '.join(names)}" for t, names in by_type.items())
    if len(grouped) <= budget:
        return grouped
    shown: list[str] = []
    for c in kb.columns:
        left = len(kb.columns) - len(shown) - 1
        more = f" (and {left} more columns)" if left else ""
        if len(", ".join([*shown, f"{written_name(c.name)} {c.type}"])) + len(more) > budget:
            break
        shown.append(f"{written_name(c.name)} {c.type}")
    return ", ".join(shown) + f" (and {len(kb.columns) - len(shown)} more columns)"


def connected_description(kb: KnowledgeBaseInfo, limit: int | None = None) -> str:
    """A connected table's schema as MyScale's tool descriptions show it: a ``CREATE TABLE`` sketch of the
    columns where_str may name, with the engine's types and column comments, then the syntax and an example.

    Within ``limit`` characters the comments go first, then the columns past those that fit, a last line saying how
    many more there are, so the syntax and the example are never cut (cut at 700 characters, 30 commented columns
    lost both and never said that columns were missing)."""
    assert kb.connected is not None
    names = {c.name for c in kb.columns}
    columns = [c for c in kb.connected["columns"] if c["name"] in names]
    table = kb.connected["table"]
    head = "Optional SQL WHERE condition, ClickHouse syntax, over this table:\n"
    rest = ("\nUse =, !=, <, >, IN, BETWEEN, LIKE, IS NULL, AND/OR/NOT, has/hasAny(array, ...), lower(), length(), "
            f"parseDateTime32BestEffort('2024-01-31'). No subqueries. {_example(kb)}")

    def sketch(shown: list[dict], comments: bool) -> str:
        lines = [f"  {written_name(c['name'])} {c['type']}" + ("," if i < len(shown) - 1 else "") +
                 (f" -- {c['comment']}" if comments and c["comment"] else "") for i, c in enumerate(shown)]
        if len(shown) < len(columns):
            lines.append(f"  -- (and {len(columns) - len(shown)} more columns)")
        return head + f"CREATE TABLE {table} (\n" + "\n".join(lines) + "\n)" + rest

    text = sketch(columns, True)
    if limit is None or len(text) <= limit:
        return text
    for n in range(len(columns), -1, -1):
        text = sketch(columns[:n], False)
        if len(text) <= limit:
            return text
    return _clip(text, limit)  # not even the table's name and the syntax fit


_EXAMPLES = {  # an example filter per column type, each one where_str takes (a model copies examples)
    "String": "{} = 'value'",
    "Array(String)": "has({}, 'value')",
    "DateTime": "{} > parseDateTime32BestEffort('2023-01-01')",
    "Int64": "{} > 10",
    "Float64": "{} > 10",
    "Bool": "{}",
}


def _example(kb: KnowledgeBaseInfo) -> str:
    """An example where_str: on the first array or DateTime column (the forms a model is least likely to guess),
    else on the first column of the first of ``_EXAMPLES``' other types the KB has, each written as where_str takes
    it ("n = 'value'" for an Int64 first column was refused when copied)."""
    column = next((c for c in kb.columns if c.type in ("Array(String)", "DateTime")), None)
    for kind in _EXAMPLES:
        column = column or next((c for c in kb.columns if c.type == kind), None)
    return "Example: " + _EXAMPLES[column.type].format(written_name(column.name)) if column is not None else ""


def operation_id(kb_name: str) -> str:
    """``get_related_{kb}`` as a function name; a name that has to change (a space, a dot, a letter outside
    ASCII, over 64 characters) gets a hash of itself, so it stays unique and the same in every document."""
    plain = f"get_related_{kb_name}"
    if len(plain) <= OPERATION_ID_CHARS and not _NOT_IN_OPERATION_ID.search(plain):
        return plain
    tag = "_" + hashlib.sha256(kb_name.encode()).hexdigest()[:8]
    return _NOT_IN_OPERATION_ID.sub("_", plain)[: OPERATION_ID_CHARS - len(tag)] + tag


def _operation(kb: KnowledgeBaseInfo, deployment: str | None = None) -> dict:
    what = kb.description.strip() or f"a {kb.kind} of {kb.count} records"
    description = _clip(f"Search the knowledge base '{kb.name}' ({what}) for the entries most related to a "
                        f"subject. Returns one JSON line per entry. Narrow results with where_str.", OPERATION_CHARS)
    max_limit = settings.tools_max_limit()
    return {
        "operationId": operation_id(kb.name),
        "summary": _clip(f"Search {kb.name}", OPERATION_CHARS),
        "description": description,
        "parameters": [
            {"name": "subject", "in": "query", "required": True, "schema": {"type": "string", "maxLength": 1000},
             "description": "A sentence or phrase describing the subject to find."},
            {"name": "where_str", "in": "query", "required": False, "schema": {"type": "string", "maxLength": 2000},
             "description": where_description(kb)},
            {"name": "limit", "in": "query", "required": False,
             "schema": {"type": "integer", "minimum": 1, "maximum": max_limit, "default": 4},
             "description": f"How many entries to return (1 to {max_limit})."},
        ] + ([{"name": "deployment", "in": "query", "required": True,
               "schema": {"type": "string", "enum": [deployment]},
               "description": f"The deployment searched: always '{deployment}'."}] if deployment else []),
        "responses": {
            "200": {"description": "The related entries.",
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/QueryResult"}}}},
            "400": {"description": "A parameter or the filter was refused; the message says why and what is "
                                   "allowed.",
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
        },
    }


def openapi_document(kbs: list[KnowledgeBaseInfo], server: str, version: str = "3.1",
                     deployment: str | None = None, live: Collection[str] = ()) -> dict:
    """The document for GPT Actions; with ``deployment``, every operation sends it (a required one-value parameter),
    so the GPT searches that deployment rather than the live state, except the operations of the knowledge bases
    named in ``live``, which have no deployments and are searched in their live state.  A knowledge base whose name
    no URL can route to (one made before names were checked, ``name_problem``) is left out: its calls could only
    answer 404."""
    kbs = [kb for kb in kbs if name_problem(kb.name) is None]
    return {
        "openapi": "3.1.0" if version == "3.1" else "3.0.3",
        "info": {"title": "openqna knowledge bases", "version": __version__,
                 "description": "Search knowledge bases hosted by openqna."},
        "servers": [{"url": server}],
        "paths": {f"/get_related_{quote(kb.name, safe='')}": {"get": _operation(kb, None if kb.name in live else deployment)}
                  for kb in kbs},
        "components": {
            "schemas": {
                "QueryResult": {"type": "object", "properties": {
                    "documents": {"type": "string", "description": "One JSON object per line, best first."},
                    "num_retrieved": {"type": "integer"}}, "required": ["documents", "num_retrieved"]},
                "Error": {"type": "object", "properties": {"error": {"type": "object", "properties": {
                    "code": {"type": "string"}, "message": {"type": "string"}}}}},
            },
            "securitySchemes": {"ApiKey": {"type": "apiKey", "in": "header", "name": "api-key"}},
        },
        "security": [{"ApiKey": []}],
    }
