"""OpenAI's Vector Stores API (``/v1/vector_stores/...``) over the core in ``kinds/vector_stores.py``.

Code written for ``client.vector_stores`` (and its ``*_and_poll`` helpers) runs against openqna by
changing only the base URL.  Requests are validated as OpenAI's schema does (unknown fields
refused, chunking 100..4096 tokens with an overlap of at most half, attributes ≤ 16 flat pairs,
filters eq/ne/gt/gte/lt/lte/in/nin and and/or) and refused in OpenAI's error envelope.

Attaching is asynchronous, as at OpenAI: the answer says ``in_progress`` and carries
``openai-poll-after-ms`` so the SDK's pollers ask again soon.  Search notes: ``rewrite_query`` is
accepted and the queries are searched (and echoed in ``search_query``) unchanged; every
``ranking_options.ranker`` value runs the same calibrated hybrid ranker (there is no separate
re-ranker to switch off); several queries are searched one by one and a chunk keeps its best
score; a blank query (valid in OpenAI's schema, which sets the string no minimum length) matches nothing,
so only blank queries give an empty page, while an empty array is refused (``minItems: 1``); ``has_more``
says whether more chunks passed the threshold than ``max_num_results``, and ``next_page`` is always null
(there is no next page to fetch).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from openqna.api import numbers
from openqna.api.concurrency import run_query
from openqna.api.credentials import secret_from_headers
from openqna.api.openai.answers_api import (
    Body,
    Invalid,
    Refused,
    error_response,
    may_not,
    openai_error,
    read_json,
    unauthorized,
    visible_to,
)
from openqna.auth.keys import Authorizer, allows, lacks_role, reaches, scope_of
from openqna.filters.nodes import And, Compare, Filter, InList, Or
from openqna.kb.attribute_columns import attribute_column
from openqna.kinds.vector_store_records import attribute_ref
from openqna.kinds.vector_stores import (
    Attach,
    Chunking,
    FileBatch,
    FileCounts,
    VectorStore,
    VectorStoreFile,
    VectorStores,
    store_place,
)
from openqna.records import InvalidArgument, NotFound, OpenQnAError

CREATE_FIELDS = {"file_ids", "name", "description", "expires_after", "chunking_strategy", "metadata"}
MODIFY_FIELDS = {"name", "expires_after", "metadata"}
ATTACH_FIELDS = {"file_id", "attributes", "chunking_strategy"}
BATCH_FIELDS = {"file_ids", "files", "attributes", "chunking_strategy"}
SEARCH_FIELDS = {"query", "rewrite_query", "max_num_results", "filters", "ranking_options"}
RANKERS = ("none", "auto", "default-2024-11-15", "default_2024_08_21")
FILE_STATUSES = ("in_progress", "completed", "failed", "cancelled")
COMPARISONS = {"eq": "=", "ne": "!=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
MAX_FILTER_DEPTH = 16
MAX_QUERIES = 50
POLL_AFTER_MS = "200"


def _refuse(message: str, param: str) -> InvalidArgument:
    return InvalidArgument(message, target=param)


def _scalar(value: object) -> bool:
    """A string, a boolean or a number a float holds: OpenAI's numbers are floats (so are the SDK's attributes)."""
    if isinstance(value, (str, bool)):
        return True
    if isinstance(value, int):  # math.isfinite(10**400) raises OverflowError
        return abs(value) <= sys.float_info.max
    return isinstance(value, float) and math.isfinite(value)


def _count(raw: dict, key: str, lo: int, hi: int, param: str) -> int:
    value = raw.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise _refuse(f"'{param}' must be an integer between {lo} and {hi}; got {value!r}.", param)
    return value


def _only(raw: dict, allowed: set[str], param: str) -> None:
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise _refuse(f"Unrecognized argument in '{param}': {', '.join(unknown)}.", f"{param}.{unknown[0]}")


# -- request parts ---------------------------------------------------------------------------------------
def chunking_from(raw: Any, param: str = "chunking_strategy") -> Chunking:
    """``{"type": "auto"}`` (800/400) or ``{"type": "static", "static": {...}}``; absent means auto."""
    if raw is None:
        return Chunking()
    if not isinstance(raw, dict) or raw.get("type") not in ("auto", "static"):
        raise _refuse(f"'{param}' must be {{\"type\": \"auto\"}} or {{\"type\": \"static\", \"static\": "
                      "{\"max_chunk_size_tokens\": ..., \"chunk_overlap_tokens\": ...}}.", f"{param}.type")
    if raw["type"] == "auto":
        _only(raw, {"type"}, param)
        return Chunking()
    _only(raw, {"type", "static"}, param)
    static = raw.get("static")
    if not isinstance(static, dict):
        raise _refuse(f"'{param}.static' is required when the type is 'static'.", f"{param}.static")
    _only(static, {"max_chunk_size_tokens", "chunk_overlap_tokens"}, f"{param}.static")
    size = _count(static, "max_chunk_size_tokens", 100, 4096, f"{param}.static.max_chunk_size_tokens")
    overlap = static.get("chunk_overlap_tokens")
    if isinstance(overlap, bool) or not isinstance(overlap, int) or not 0 <= overlap <= size // 2:
        raise _refuse(f"'{param}.static.chunk_overlap_tokens' must be an integer from 0 to half of "
                      f"max_chunk_size_tokens ({size // 2}); got {overlap!r}.", f"{param}.static.chunk_overlap_tokens")
    return Chunking(size, overlap)


def attributes_from(raw: Any, param: str = "attributes") -> dict | None:
    """At most 16 pairs; keys of 1..64 characters; values strings (≤ 512), numbers or booleans."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or len(raw) > 16:
        raise _refuse(f"'{param}' must be an object with at most 16 keys.", param)
    for key, value in raw.items():
        if not 1 <= len(key) <= 64:
            raise _refuse(f"'{param}' keys must be 1 to 64 characters; got {key[:80]!r}.", param)
        if not _scalar(value) or (isinstance(value, str) and len(value) > 512):
            raise _refuse(f"'{param}.{key}' must be a string of at most 512 characters, a number or a boolean.",
                          f"{param}.{key}")
    return dict(raw)


def metadata_from(raw: Any) -> dict[str, str]:
    if not isinstance(raw, dict) or len(raw) > 16 or not all(
            isinstance(v, str) and len(k) <= 64 and len(v) <= 512 for k, v in raw.items()):
        raise _refuse("'metadata' must be an object of at most 16 string pairs (keys ≤ 64 characters, values "
                      "≤ 512).", "metadata")
    return dict(raw)


def expires_after_from(raw: Any) -> dict:
    if not isinstance(raw, dict) or raw.get("anchor") != "last_active_at":
        raise _refuse("'expires_after' must be {\"anchor\": \"last_active_at\", \"days\": 1..365}.",
                      "expires_after.anchor")
    _only(raw, {"anchor", "days"}, "expires_after")
    return {"anchor": "last_active_at", "days": _count(raw, "days", 1, 365, "expires_after.days")}


def queries_from(body: dict) -> list[str]:
    """``query``: a string or an array of 1 to MAX_QUERIES strings, refused in OpenAI's validation words.

    A blank string is valid (the schema sets no minimum length) and matches nothing; an empty array is not
    (``minItems: 1``).
    """
    if "query" not in body:
        raise Invalid("Missing required parameter: 'query'.", "query", "missing_required_parameter")
    query = body["query"]
    if isinstance(query, str):
        return [query]
    if not isinstance(query, list):
        raise Invalid(f"Invalid type for 'query': expected a string or an array of strings, but got "
                            f"{json_type(query)} instead.", "query", "invalid_type")
    if not query:
        raise Invalid("Invalid 'query': empty array. Expected an array with minimum length 1, but got an "
                            "empty array instead.", "query", "empty_array")
    if len(query) > MAX_QUERIES:
        raise Invalid(f"Invalid 'query': array too long. Expected an array with maximum length {MAX_QUERIES}, "
                            f"but got an array with length {len(query)} instead.", "query", "array_above_max_length")
    for n, q in enumerate(query):
        if not isinstance(q, str):
            raise Invalid(f"Invalid type for 'query[{n}]': expected a string, but got {json_type(q)} instead.",
                                f"query[{n}]", "invalid_type")
    return query


def json_type(value: Any) -> str:
    """How OpenAI's validation errors name a JSON value's type."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "an integer" if isinstance(value, int) else "a decimal"
    return "an object" if isinstance(value, dict) else "an array" if isinstance(value, list) else "a string"


def filter_from(raw: Any, depth: int = 0) -> Filter:
    """OpenAI's comparison/compound filter on file attributes as the typed filter IR."""
    def refuse(message: str) -> InvalidArgument:
        return _refuse(f"Invalid 'filters': {message}", "filters")

    if depth > MAX_FILTER_DEPTH:
        raise refuse(f"filters nest at most {MAX_FILTER_DEPTH} levels deep.")
    if not isinstance(raw, dict):
        raise refuse("each filter must be an object with a 'type'.")
    kind = raw.get("type")
    if kind in ("and", "or"):
        _only(raw, {"type", "filters"}, "filters")
        children = raw.get("filters")
        if not isinstance(children, list) or not children:
            raise refuse(f"an '{kind}' filter needs a non-empty 'filters' array.")
        nodes = tuple(filter_from(child, depth + 1) for child in children)
        return And(nodes) if kind == "and" else Or(nodes)
    if not isinstance(kind, str) or kind not in COMPARISONS and kind not in ("in", "nin"):
        raise refuse(f"'type' must be one of eq, ne, gt, gte, lt, lte, in, nin, and, or; got {kind!r}.")
    _only(raw, {"type", "key", "value"}, "filters")
    key, value = raw.get("key"), raw.get("value")
    if not isinstance(key, str) or not key:
        raise refuse(f"a '{kind}' filter needs a non-empty string 'key'.")
    if kind in ("in", "nin"):
        # OpenAI's schema: an array of strings and numbers (a boolean is compared with eq or ne)
        if not isinstance(value, list) or not value or not all(_scalar(v) and not isinstance(v, bool) for v in value):
            raise refuse(f"the 'value' of an '{kind}' filter must be a non-empty array of strings or numbers.")
        by_type: dict[str, list] = {}
        for v in value:  # one IN per value type: a string attribute is only compared with strings
            by_type.setdefault(attribute_column(key, v).name, []).append(v)
        lists = tuple(InList(attribute_ref(key, vs[0]), tuple(vs), negated=kind == "nin") for vs in by_type.values())
        return lists[0] if len(lists) == 1 else Or(lists)
    if not _scalar(value):
        raise refuse(f"the 'value' of an '{kind}' filter must be a string, a number or a boolean.")
    return Compare(attribute_ref(key, value), COMPARISONS[kind], value)


# -- responses ---------------------------------------------------------------------------------------------
def counts_json(c: FileCounts) -> dict:
    return {"in_progress": c.in_progress, "completed": c.completed, "failed": c.failed, "cancelled": c.cancelled,
            "total": c.total}


def store_json(s: VectorStore) -> dict:
    """A VectorStoreObject; ``expires_after`` is an optional object in the spec, so it is absent when unset."""
    out = {"id": s.id, "object": "vector_store", "created_at": s.created_at, "name": s.name,
           "usage_bytes": s.usage_bytes, "status": s.status, "file_counts": counts_json(s.file_counts),
           "expires_at": s.expires_at, "last_active_at": s.last_active_at, "metadata": s.metadata}
    if s.expires_after is not None:
        out["expires_after"] = s.expires_after
    return out


def vs_file_json(f: VectorStoreFile) -> dict:
    return {"id": f.id, "object": "vector_store.file", "usage_bytes": f.usage_bytes, "created_at": f.created_at,
            "vector_store_id": f.vector_store_id, "status": f.status, "last_error": f.last_error,
            "chunking_strategy": {"type": "static", "static": {"max_chunk_size_tokens": f.chunking.max_tokens,
                                                               "chunk_overlap_tokens": f.chunking.overlap_tokens}},
            "attributes": f.attributes or {}}


def batch_json(b: FileBatch) -> dict:
    return {"id": b.id, "object": "vector_store.files_batch", "created_at": b.created_at,
            "vector_store_id": b.vector_store_id, "status": b.status, "file_counts": counts_json(b.file_counts)}


def reply(body: dict, *, in_progress: bool = False) -> JSONResponse:
    """JSON; an object still in progress tells the SDK's pollers when to ask again."""
    return JSONResponse(body, headers={"openai-poll-after-ms": POLL_AFTER_MS} if in_progress else None)


def page(request: Request, items: list, render: Callable[[Any], dict],
         place: Callable[[str], tuple[int, str] | None]) -> JSONResponse:
    """OpenAI's cursor list: ``limit`` 1..100 (20), ``order`` asc|desc (desc), ``after``/``before`` ids.

    ``items`` come oldest first, by ``(seq, id)``.  A cursor not among them (deleted or detached since, or left out
    by a ``filter``) pages from where ``place`` says it stands in that order: looked up among the items only, it was
    a 400 that ended the SDK's auto-paging when another client deleted the last object of a page.  A cursor ``place``
    knows no place of is refused: an empty page would end the SDK's iteration as if the list were done.
    ``has_more`` says whether the list goes on past this page in the direction of travel (``before`` travels
    backwards), which is what stops the SDK's pagination.  ``place`` reads the store: call this in a thread.
    """
    q = request.query_params
    raw_limit = q.get("limit", "20")
    limit = numbers.count(raw_limit)
    if limit is None or not 1 <= limit <= 100:
        raise _refuse(f"'limit' must be an integer between 1 and 100; got {raw_limit!r}.", "limit")
    order = q.get("order", "desc")
    if order not in ("asc", "desc"):
        raise _refuse(f"'order' must be 'asc' or 'desc'; got {order!r}.", "order")
    descending = order == "desc"
    items = items[::-1] if descending else list(items)
    ids = [item.id for item in items]
    places: dict[str, int] = {}
    for param in ("after", "before"):
        cursor = q.get(param)
        if cursor is None:
            continue
        if cursor in ids:
            places[param] = ids.index(cursor) + (param == "after")
        elif (key := place(cursor)) is not None:  # gone: the items on its side of it
            places[param] = sum(1 for item in items if ((item.seq, item.id) > key if descending
                                                        else (item.seq, item.id) < key))
        else:
            raise _refuse(f"'{param}' names no object of this list: {cursor!r}.", param)
    window = items[places.get("after", 0):places.get("before", len(items))]
    backwards = q.get("before") is not None and q.get("after") is None
    chosen = window[-limit:] if backwards else window[:limit]
    data = [render(item) for item in chosen]
    return JSONResponse({"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
                         "last_id": data[-1]["id"] if data else None, "has_more": len(window) > limit})


class VectorStoreRoutes:
    def __init__(self, core: VectorStores, authorizer: Authorizer):
        self.core = core
        self.authorizer = authorizer
        self.purged_at = 0.0

    def routes(self) -> list[Route]:
        base = "/v1/vector_stores/{vector_store_id}"
        return [
            Route("/v1/vector_stores", self.stores, methods=["GET", "POST"]),
            Route(base, self.one_store, methods=["GET", "POST", "DELETE"]),
            Route(base + "/search", self.search, methods=["POST"]),
            Route(base + "/files", self.files, methods=["GET", "POST"]),
            Route(base + "/files/{file_id}", self.one_file, methods=["GET", "POST", "DELETE"]),
            Route(base + "/files/{file_id}/content", self.file_content, methods=["GET"]),
            Route(base + "/file_batches", self.create_batch, methods=["POST"]),
            Route(base + "/file_batches/{batch_id}", self.batch, methods=["GET"]),
            Route(base + "/file_batches/{batch_id}/cancel", self.cancel_batch, methods=["POST"]),
            Route(base + "/file_batches/{batch_id}/files", self.batch_files, methods=["GET"]),
        ]

    # -- plumbing ------------------------------------------------------------------------------------
    async def _guard(self, request: Request, role: str, work) -> Response:
        """Check the caller's role, then that it reaches the store the path names (``auth.keys.reaches``).

        A store the caller does not reach answers 404, as if it did not exist (as ``/v1/files`` does); one it
        reaches with too low a role for the call answers 403.
        """
        try:
            key, denied = self.authorizer.check(secret_from_headers(request.headers))
            if denied:
                return unauthorized(denied)
            if not allows(key, role=role):
                assert key is not None  # an open server (no caller) allows every role
                return openai_error(403, lacks_role(key, role), kind="permission_error")
            store_id = request.path_params.get("vector_store_id")
            if store_id is not None:
                scope = await run_in_threadpool(self.core.scope, store_id)
                if not reaches(key, "query", store_id, scope):
                    raise NotFound(f"No vector store found with id '{store_id}'.")
                if not reaches(key, role, store_id, scope):
                    return may_not(key, f"vector store '{store_id}'")
            request.state.key = key
            if time.monotonic() - self.purged_at >= 1.0:  # expired files leave the stores (reads hide them at once)
                self.purged_at = time.monotonic()
                await run_in_threadpool(self.core.expire_files)
            return await work()
        except Refused as exc:
            return exc.response
        except OpenQnAError as exc:
            return error_response(exc)

    async def _body(self, request: Request, allowed: set[str]) -> Body:
        return Body(await read_json(request, empty={}), allowed)

    # -- stores ----------------------------------------------------------------------------------------
    async def stores(self, request: Request) -> Response:
        async def listing() -> Response:
            key = request.state.key
            found = await run_in_threadpool(self.core.list_stores,
                                            lambda sid, scope: reaches(key, "query", sid, scope))
            return page(request, found, store_json, store_place)

        async def create() -> Response:
            body = await self._body(request, CREATE_FIELDS)
            chunking = chunking_from(body.raw.get("chunking_strategy"))
            file_ids = list(dict.fromkeys(body.strings("file_ids", max_items=500) or []))
            kwargs = {"name": body.string("name", default="") or "",
                      "description": body.string("description", default="") or "",
                      "metadata": metadata_from(body.raw["metadata"]) if body.present("metadata") else {},
                      "expires_after": expires_after_from(body.raw["expires_after"])
                      if body.present("expires_after") else None,
                      "files": [Attach(f, None, chunking) for f in file_ids],
                      "scope": scope_of(request.state.key, "author"), "visible": visible_to(request.state.key)}
            store = await run_in_threadpool(lambda: self.core.create(**kwargs))
            return reply(store_json(store), in_progress=store.status == "in_progress")

        if request.method == "GET":
            return await self._guard(request, "query", listing)
        return await self._guard(request, "author", create)

    async def one_store(self, request: Request) -> Response:
        store_id = request.path_params["vector_store_id"]

        async def work() -> Response:
            if request.method == "DELETE":
                await run_in_threadpool(self.core.delete, store_id)
                return JSONResponse({"id": store_id, "object": "vector_store.deleted", "deleted": True})
            if request.method == "POST":
                body = await self._body(request, MODIFY_FIELDS)
                name = body.string("name")
                metadata = metadata_from(body.raw["metadata"]) if body.present("metadata") else None
                if "metadata" in body.raw and body.raw["metadata"] is None:
                    metadata = {}
                expires = expires_after_from(body.raw["expires_after"]) if body.present("expires_after") else None
                clear = "expires_after" in body.raw and body.raw["expires_after"] is None
                store = await run_in_threadpool(lambda: self.core.modify(
                    store_id, name=name, metadata=metadata, expires_after=expires, clear_expiry=clear))
            else:
                store = await run_in_threadpool(self.core.get, store_id)
            return reply(store_json(store), in_progress=store.status == "in_progress")

        return await self._guard(request, "query" if request.method == "GET" else "author", work)

    # -- files -------------------------------------------------------------------------------------------
    @staticmethod
    def _status_filter(request: Request, files: list[VectorStoreFile]) -> list[VectorStoreFile]:
        wanted = request.query_params.get("filter")
        if wanted is None:
            return files
        if wanted not in FILE_STATUSES:
            raise _refuse(f"'filter' must be one of {', '.join(FILE_STATUSES)}; got {wanted!r}.", "filter")
        return [f for f in files if f.status == wanted]

    async def files(self, request: Request) -> Response:
        store_id = request.path_params["vector_store_id"]

        async def listing() -> Response:
            files = await run_in_threadpool(self.core.list_files, store_id)
            return await run_in_threadpool(page, request, self._status_filter(request, files), vs_file_json,
                                           lambda cursor: self.core.file_place(store_id, cursor))

        async def attach() -> Response:
            body = await self._body(request, ATTACH_FIELDS)
            item = Attach(body.string("file_id", required=True), attributes_from(body.raw.get("attributes")),
                          chunking_from(body.raw.get("chunking_strategy")))
            f = await run_in_threadpool(self.core.attach, store_id, item, visible_to(request.state.key))
            return reply(vs_file_json(f), in_progress=f.status == "in_progress")

        if request.method == "GET":
            return await self._guard(request, "query", listing)
        return await self._guard(request, "author", attach)

    async def one_file(self, request: Request) -> Response:
        store_id, file_id = request.path_params["vector_store_id"], request.path_params["file_id"]

        async def work() -> Response:
            if request.method == "DELETE":
                await run_in_threadpool(self.core.detach, store_id, file_id)
                return JSONResponse({"id": file_id, "object": "vector_store.file.deleted", "deleted": True})
            if request.method == "POST":
                body = await self._body(request, {"attributes"})
                if "attributes" not in body.raw:
                    raise _refuse("'attributes' is a required property", "attributes")
                attributes = attributes_from(body.raw["attributes"])
                f = await run_in_threadpool(self.core.update_attributes, store_id, file_id, attributes)
            else:
                f = await run_in_threadpool(self.core.get_file, store_id, file_id)
            return reply(vs_file_json(f), in_progress=f.status == "in_progress")

        return await self._guard(request, "query" if request.method == "GET" else "author", work)

    async def file_content(self, request: Request) -> Response:
        async def work() -> Response:
            texts = await run_in_threadpool(self.core.content, request.path_params["vector_store_id"],
                                            request.path_params["file_id"])
            return JSONResponse({"object": "vector_store.file_content.page",
                                 "data": [{"type": "text", "text": t} for t in texts],
                                 "has_more": False, "next_page": None})

        return await self._guard(request, "query", work)

    # -- batches -------------------------------------------------------------------------------------------
    async def create_batch(self, request: Request) -> Response:
        store_id = request.path_params["vector_store_id"]

        async def work() -> Response:
            body = await self._body(request, BATCH_FIELDS)
            attributes = attributes_from(body.raw.get("attributes"))
            chunking = chunking_from(body.raw.get("chunking_strategy"))
            if body.present("file_ids") == body.present("files"):
                raise _refuse("Provide exactly one of 'file_ids' or 'files'.", "file_ids")
            if body.present("file_ids"):
                ids = body.strings("file_ids", min_items=1, max_items=2000)
                items = [Attach(f, attributes, chunking) for f in dict.fromkeys(ids)]
            else:
                raw = body.raw["files"]
                if not isinstance(raw, list) or not 1 <= len(raw) <= 2000:
                    raise _refuse("'files' must be an array of 1 to 2000 objects.", "files")
                items = []
                for n, entry in enumerate(raw):
                    if not isinstance(entry, dict) or not isinstance(entry.get("file_id"), str):
                        raise _refuse(f"'files[{n}]' must be an object with a string 'file_id'.", f"files[{n}]")
                    _only(entry, {"file_id", "attributes", "chunking_strategy"}, f"files[{n}]")
                    items.append(Attach(entry["file_id"], attributes_from(entry.get("attributes"), f"files[{n}].attributes"),
                                        chunking_from(entry.get("chunking_strategy"), f"files[{n}].chunking_strategy")))
                if len({i.file_id for i in items}) != len(items):
                    raise _refuse("'files' names a file more than once.", "files")
            batch = await run_in_threadpool(self.core.create_batch, store_id, items, visible_to(request.state.key))
            return reply(batch_json(batch), in_progress=batch.status == "in_progress")

        return await self._guard(request, "author", work)

    async def batch(self, request: Request) -> Response:
        async def work() -> Response:
            b = await run_in_threadpool(self.core.get_batch, request.path_params["vector_store_id"],
                                        request.path_params["batch_id"])
            return reply(batch_json(b), in_progress=b.status == "in_progress")

        return await self._guard(request, "query", work)

    async def cancel_batch(self, request: Request) -> Response:
        async def work() -> Response:
            b = await run_in_threadpool(self.core.cancel_batch, request.path_params["vector_store_id"],
                                        request.path_params["batch_id"])
            return reply(batch_json(b))

        return await self._guard(request, "author", work)

    async def batch_files(self, request: Request) -> Response:
        async def work() -> Response:
            store_id, batch_id = request.path_params["vector_store_id"], request.path_params["batch_id"]
            files = await run_in_threadpool(self.core.list_files, store_id, batch_id)
            return await run_in_threadpool(page, request, self._status_filter(request, files), vs_file_json,
                                           lambda cursor: self.core.file_place(store_id, cursor, batch_id))

        return await self._guard(request, "query", work)

    # -- search ------------------------------------------------------------------------------------------------
    async def search(self, request: Request) -> Response:
        store_id = request.path_params["vector_store_id"]

        async def work() -> Response:
            body = await self._body(request, SEARCH_FIELDS)
            queries = queries_from(body.raw)
            body.boolean("rewrite_query")
            limit = body.integer("max_num_results", 10, 1, 50)
            where = filter_from(body.raw["filters"]) if body.present("filters") else None
            threshold = self._threshold(body.raw.get("ranking_options"))
            results, more = await run_query(
                lambda: self.core.search(store_id, queries, limit=limit, where=where, threshold=threshold))
            return JSONResponse({
                "object": "vector_store.search_results.page", "search_query": queries,
                "data": [{"file_id": r.file_id, "filename": r.filename, "score": r.score,
                          "attributes": r.attributes or {}, "content": [{"type": "text", "text": r.text}]}
                         for r in results],
                "has_more": more, "next_page": None})

        return await self._guard(request, "query", work)

    @staticmethod
    def _threshold(options: Any) -> float:
        if options is None:
            return 0.0
        if not isinstance(options, dict):
            raise _refuse("'ranking_options' must be an object.", "ranking_options")
        _only(options, {"ranker", "score_threshold"}, "ranking_options")
        if options.get("ranker") is not None and options["ranker"] not in RANKERS:
            raise _refuse(f"'ranking_options.ranker' must be one of {', '.join(RANKERS[:3])}.",
                          "ranking_options.ranker")
        value = options.get("score_threshold", 0.0)
        if value is None:
            return 0.0
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
            raise _refuse(f"'ranking_options.score_threshold' must be a number from 0 to 1; got {value!r}.",
                          "ranking_options.score_threshold")
        return float(value)
