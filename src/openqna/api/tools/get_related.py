"""Knowledge bases as LLM tools: MyScale's ``/get_related_{kb}`` and a structured search.

``GET /get_related_{kb}?subject=&where_str=&limit=`` answers ``{"documents": str,
"num_retrieved": n}`` as MyScale's GPT backend does (one JSON line per hit), and
``GET /tools/{kb}/search`` the same hits as JSON with scores.  ``where_str`` is parsed
against the knowledge base's columns with an allow-list (never spliced into SQL); a
refusal is a 400 that says what was refused and what is allowed.  Errors use this
surface's own envelope: ``{"error": {"code", "message"}}``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from openqna import settings
from openqna.api import links, numbers
from openqna.api.concurrency import run_query
from openqna.api.credentials import secret_from_headers
from openqna.api.tools.openapi import openapi_document
from openqna.auth.keys import Authorizer, allows, lacks_role
from openqna.formats.limits import LIMITS
from openqna.kb.catalog import LIVE
from openqna.kb.service import Hit, KnowledgeBaseInfo, Service
from openqna.records import InvalidArgument, NotFound, OpenQnAError, ProjectNotFound

# A connected table's engine failing (connected/engine.py), in this dialect's words.
ENGINE_CODES = {"EngineRejected": "engine_rejected", "EngineTimeout": "engine_timeout",
                "EngineUnavailable": "engine_unavailable", "TableChanged": "table_changed"}


# the tools' own codes, by status, for an error that has none of them (the store unreachable: 503; its disk full: 507)
STATUS_CODES = {401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed", 409: "conflict",
                413: "too_large", 429: "rate_limited", 500: "internal_error", 503: "unavailable", 504: "timeout",
                507: "insufficient_storage"}


def tools_error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


def tools_code(exc: OpenQnAError) -> str:
    """The tools' snake_case code of ``exc``: a refused where_str's, an engine's, else its status's."""
    if exc.target == "where_str":
        return "invalid_where"
    return ENGINE_CODES.get(exc.code) or STATUS_CODES.get(exc.status, "invalid_request")

T = TypeVar("T")


def max_limit() -> int:
    return settings.tools_max_limit()


def hit_json(hit: Hit, most: int | None = None) -> dict:
    """One hit of ``/tools/{kb}/search``, every string value (its columns' and metadata's too) clipped to ``most``
    characters (None: as it is), its end marked with "…"."""
    r = hit.record
    return {"id": r.id, "score": hit.score, "kind": r.kind, "title": _clip(r.questions[0] if r.questions else None, most),
            "text": _clip(r.answer, most), "source": _clip(r.source, most),
            "fields": {k: _clip(v, most) for k, v in r.fields.items()},
            "metadata": {k: _clip(v, most) for k, v in r.metadata.items()}}


def search_answer(kb: str, hits: list[Hit], budget: int | None = None) -> dict[str, Any]:
    """``/tools/{kb}/search``'s answer, kept to ``budget`` characters as written, as ``documents`` is: past it, every
    string value is clipped to the longest length that fits, and hits that still do not fit are left out from the
    last (``num_retrieved`` counts the hits returned)."""
    def body(items: list[Hit], most: int | None) -> dict[str, Any]:
        return {"knowledge_base": kb, "num_retrieved": len(items), "hits": [hit_json(h, most) for h in items]}

    def size(answer: dict[str, Any]) -> int:
        return utf16_length(json.dumps(answer, ensure_ascii=False, default=str))

    return fitted(lambda n, most: body(hits[:n], most), size, len(hits), longest_value(hits),
                  DOCUMENTS_CHARS if budget is None else budget)[0]


def longest_value(hits: list[Hit]) -> int:
    """The length of the longest string value of ``hits`` as ``hit_json`` gives them (title, text, source, columns,
    metadata): where ``fitted`` starts looking for the length to clip them to."""
    return max((len(v) for h in hits for v in _strings(hit_json(h))), default=0)


def fitted(render: Callable[[int, int | None], T], size: Callable[[T], int], count: int, longest: int,
           budget: int) -> tuple[T, int]:
    """``render(n, most)`` (the first ``n`` of ``count`` hits, every string value clipped to ``most`` characters, None:
    whole) kept to ``budget`` by ``size``: whole when it fits; else clipped to the longest length up to ``longest``
    that fits them all, and hits left out from the last while that still does not fit.  With how many it holds."""
    whole = render(count, None)
    if size(whole) <= budget:
        return whole, count
    lo, hi = 0, longest
    while lo < hi:  # the longest value length that fits
        mid = (lo + hi + 1) // 2
        if size(render(count, mid)) <= budget:
            lo = mid
        else:
            hi = mid - 1
    n = count
    while n and size(render(n, lo)) > budget:
        n -= 1
    return render(n, lo), n


def _strings(hit: dict) -> list[str]:
    values = [hit["title"], hit["text"], hit["source"], *hit["fields"].values(), *hit["metadata"].values()]
    return [v for v in values if isinstance(v, str)]


def _clip(value: Any, most: int | None) -> Any:
    if most is None or not isinstance(value, str) or len(value) <= most:
        return value
    return value[: most - 1] + "…" if most else ""


# GPT Actions refuse a response of 100,000 characters or more (``ResponseTooLargeError``; the payload limit of
# ../shared/reference/myscale-sql.md).  The ``documents`` string, as the response writes it (its quotes escaped), is
# kept to this many: long values are clipped to one length for every hit, as long as the budget allows.  Counted as
# JavaScript counts a string's length (UTF-16 code units: an emoji is two), as a client may: counted in code points,
# a page of CJK text and emoji measured 96,031 and 101,711 units.
DOCUMENTS_CHARS = 96_000


def utf16_length(text: str) -> int:
    """``text``'s length in UTF-16 code units (JavaScript's ``length``)."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def documents(hits: list[Hit], budget: int = DOCUMENTS_CHARS) -> tuple[str, int]:
    """The hits as the ``documents`` string, one compact JSON line each with the fields an LLM needs, and how many
    hits it holds.

    An entry's own columns (or metadata) win over the derived title, text and source. The relevance takes
    ``score``, or ``_score`` in every line when any entry has a column or metadata key ``score``, so no
    value is hidden and one key means one thing throughout the answer.  Past ``budget`` characters (escaped, as the
    response holds the string), every string value is clipped to the longest length that fits, its end marked
    with "…"; hits that still do not fit (hundreds of columns) are left out from the last.
    """
    relevance = "score"
    while any(relevance in (h.record.fields or h.record.metadata) for h in hits):
        relevance = "_" + relevance
    items = [_item(h, relevance) for h in hits]
    longest = max((len(v) for item in items for v in item.values() if isinstance(v, str)), default=0)
    return fitted(lambda n, most: _joined(items[:n], most), _written, len(items), longest, budget)


def _item(hit: Hit, relevance: str) -> dict[str, Any]:
    r = hit.record
    item: dict[str, Any] = {"title": r.questions[0] if r.questions else None, "text": r.answer, "source": r.source}
    item.update(r.fields or r.metadata)
    item[relevance] = hit.score
    return item


def _joined(items: list[dict[str, Any]], most: int | None) -> str:
    """The items as JSON lines, every string value clipped to ``most`` characters (None: as they are)."""
    return "\n".join(json.dumps({k: _clip(v, most) for k, v in item.items()}, ensure_ascii=False, default=str)
                     for item in items)


def _written(text: str) -> int:
    """The characters ``text`` takes in the response's JSON (its quotes and control characters escaped)."""
    return utf16_length(json.dumps(text, ensure_ascii=False))


def deployment_of(raw: str | None) -> str:
    """The ``deployment`` parameter: which state of a project the tools search, the live one (``test``) unless
    named, as Azure's ``deploymentName`` says which one ``:query-knowledgebases`` answers from."""
    if raw is None:
        return LIVE
    if not raw.strip() or len(raw) > 100:
        raise InvalidArgument(f"'deployment' must name a deployment of the knowledge base (such as 'production'), or "
                              f"be left out to search its live state ('{LIVE}'); got '{raw[:100]}'.")
    return LIVE if raw.lower() == LIVE else raw  # "Test" too, as Azure's runtime reads it


# The query parameters of /get_related_{kb} and /tools/{kb}/search.  Any other is refused: a filter sent under a
# name the tools do not read (``filter``, MCP's ``where``) would otherwise be dropped and the answer come back
# unfiltered, which the caller cannot tell from a filter that matched everything.
SEARCH_PARAMS = ("subject", "where_str", "limit", "deployment")
WHERE_ALIAS = "where"  # MCP's name for where_str, taken here too so one call works on both surfaces


def where_param(params: QueryParams) -> str | None:
    """The filter of a tool call: ``where_str`` (MyScale's name), or ``where`` (MCP's); an unknown parameter, a
    repeated one or both names with different filters is an ``InvalidArgument`` that names what to send."""
    names = [name for name, _ in params.multi_items()]
    unknown = [n for n in dict.fromkeys(names) if n not in SEARCH_PARAMS and n != WHERE_ALIAS]
    if unknown:
        raise InvalidArgument(f"Unknown query parameter(s) {', '.join(repr(n[:40]) for n in unknown[:5])}; this "
                              f"tool takes {', '.join(SEARCH_PARAMS)}. Filter with where_str.")
    repeated = [n for n in dict.fromkeys(names) if names.count(n) > 1]
    if repeated:
        raise InvalidArgument(f"Query parameter {repeated[0]!r} is given more than once; give it once.")
    where, alias = params.get("where_str"), params.get(WHERE_ALIAS)
    if alias is not None and where is not None and alias != where:
        raise InvalidArgument("Both 'where_str' and 'where' are given, with different filters; give one "
                              "('where_str').", target="where_str")
    return where if where is not None else alias


class Tools:
    def __init__(self, service: Service, authorizer: Authorizer):
        self.service = service
        self.authorizer = authorizer

    def routes(self) -> list[Route]:
        return [
            Route("/get_related_{kb}", self.get_related, methods=["GET"]),
            Route("/tools/openapi.json", self.openapi_all, methods=["GET"]),
            Route("/tools/{kb}/openapi.json", self.openapi_one, methods=["GET"]),
            Route("/tools/{kb}/search", self.search, methods=["GET"]),
        ]

    def _key(self, request: Request, kb: str | None = None):
        key, denied = self.authorizer.check(secret_from_headers(request.headers))
        if denied and denied.token:
            raise _Refused(tools_error(401, "unauthorized", f"The bearer token was refused: {denied.reason}."))
        if denied:
            raise _Refused(tools_error(401, "unauthorized", "A valid API key is required in the 'api-key' header "
                                                            "or as 'Authorization: Bearer <key>'."))
        if kb is not None and not allows(key, role="query", project=kb):
            raise _Refused(tools_error(404, "not_found", f"There is no knowledge base '{kb}'."))
        if not allows(key, role="query"):
            assert key is not None  # an open server (no caller) allows every role
            raise _Refused(tools_error(403, "forbidden", lacks_role(key, "query")))
        return key

    async def _hits(self, request: Request, kb: str) -> list[Hit]:
        self._key(request, kb)
        q = request.query_params
        where = where_param(q)
        subject = q.get("subject")
        if subject is None or not subject.strip():
            raise InvalidArgument("'subject' is required: a sentence or phrase describing what to find.")
        if len(subject) > LIMITS.question_chars:
            raise InvalidArgument(f"'subject' is {len(subject)} characters long; the limit is "
                                  f"{LIMITS.question_chars}.")
        raw_limit = q.get("limit") or "4"
        limit = numbers.count(raw_limit.strip())
        if limit is None or not 1 <= limit <= max_limit():
            raise InvalidArgument(f"'limit' must be an integer (ASCII digits) from 1 to {max_limit()}; "
                                  f"got '{raw_limit}'.")
        return await run_query(self.service.search, kb, subject, where=where, limit=limit,
                               deployment=deployment_of(q.get("deployment")))

    async def get_related(self, request: Request) -> Response:
        kb = request.path_params["kb"]
        return await self._guarded(request, kb, _documents_answer)

    async def search(self, request: Request) -> Response:
        kb = request.path_params["kb"]
        return await self._guarded(request, kb, lambda hits: search_answer(kb, hits))

    async def _guarded(self, request: Request, kb: str, shape) -> Response:
        try:
            return JSONResponse(shape(await self._hits(request, kb)))
        except _Refused as exc:
            return exc.response
        except ProjectNotFound:
            return tools_error(404, "not_found", f"There is no knowledge base '{kb}'.")
        except NotFound as exc:  # a deployment the knowledge base does not have
            return tools_error(404, "not_found", exc.message)
        except OpenQnAError as exc:
            return tools_error(exc.status, tools_code(exc), exc.message)

    def _server(self, request: Request) -> str:
        return links.base_url(request)

    def _version(self, request: Request) -> str:
        version = request.query_params.get("version", "3.1")
        if version not in ("3.0", "3.1"):
            raise _Refused(tools_error(400, "invalid_request", "'version' must be 3.0 or 3.1."))
        return version

    async def openapi_all(self, request: Request) -> Response:
        try:
            key = self._key(request)
            version, deployment = self._version(request), self._deployment(request)
        except _Refused as exc:
            return exc.response
        kbs = await run_in_threadpool(self.service.knowledge_bases, key)
        return await self._document(request, kbs, version, deployment)

    async def openapi_one(self, request: Request) -> Response:
        kb = request.path_params["kb"]
        try:
            key = self._key(request, kb)
            version, deployment = self._version(request), self._deployment(request)
        except _Refused as exc:
            return exc.response
        kbs = [k for k in await run_in_threadpool(self.service.knowledge_bases, key) if k.name.lower() == kb.lower()]
        if not kbs:
            return tools_error(404, "not_found", f"There is no knowledge base '{kb}'.")
        return await self._document(request, kbs, version, deployment)

    async def _document(self, request: Request, kbs: list[KnowledgeBaseInfo], version: str,
                        deployment: str | None) -> Response:
        """The document of ``kbs``; pinned to ``deployment``, only those that have it (each operation then sends it)
        and those searched live whatever is pinned (``live_only``, without the parameter): an operation that could
        only answer 404 is left out, and a deployment no knowledge base has is a 404."""
        if deployment is None:
            return JSONResponse(openapi_document(kbs, self._server(request), version))
        having = await run_in_threadpool(lambda: {k.name for k in kbs if self.service.has_deployment(k.name, deployment)})
        pinned = [k for k in kbs if k.name in having]
        if not pinned:
            names = f"'{kbs[0].name}'" if len(kbs) == 1 else "any knowledge base you can search"
            return tools_error(404, "not_found", f"Deployment '{deployment}' was not found in {names}; leave "
                                                 f"'deployment' out for the live state ('{LIVE}').")
        live = [k for k in kbs if k.live_only and k.name not in having]
        return JSONResponse(openapi_document(pinned + live, self._server(request), version, deployment,
                                             live={k.name for k in live}))

    @staticmethod
    def _deployment(request: Request) -> str | None:
        """``?deployment=`` of an OpenAPI document: the deployment its operations search (None: the live state)."""
        raw = request.query_params.get("deployment")
        try:
            return None if raw is None else deployment_of(raw)
        except InvalidArgument as exc:
            raise _Refused(tools_error(400, "invalid_request", exc.message)) from None


def _documents_answer(hits: list[Hit]) -> dict[str, Any]:
    text, count = documents(hits)
    return {"documents": text, "num_retrieved": count}


class _Refused(Exception):
    def __init__(self, response: Response):
        self.response = response
