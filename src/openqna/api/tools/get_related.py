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
from typing import Any

from starlette.concurrency import run_in_threadpool
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
from openqna.kb.service import Hit, Service
from openqna.records import InvalidArgument, NotFound, OpenQnAError

# A connected table's engine failing (connected/engine.py), in this dialect's words.
ENGINE_CODES = {"EngineRejected": "engine_rejected", "EngineTimeout": "engine_timeout",
                "EngineUnavailable": "engine_unavailable"}


def tools_error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


def max_limit() -> int:
    return settings.tools_max_limit()


def hit_json(hit: Hit) -> dict:
    r = hit.record
    return {"id": r.id, "score": hit.score, "kind": r.kind, "title": r.questions[0] if r.questions else None,
            "text": r.answer, "source": r.source, "fields": r.fields, "metadata": r.metadata}


def documents(hits: list[Hit]) -> str:
    """The hits as the ``documents`` string: one compact JSON line each, the fields an LLM needs.

    An entry's own columns (or metadata) win over the derived title, text and source. The relevance takes
    ``score``, or ``_score`` in every line when any entry has a column or metadata key ``score``, so no
    value is hidden and one key means one thing throughout the answer.
    """
    relevance = "score"
    while any(relevance in (h.record.fields or h.record.metadata) for h in hits):
        relevance = "_" + relevance
    return "\n".join(_line(h, relevance) for h in hits)


def _line(hit: Hit, relevance: str) -> str:
    r = hit.record
    item: dict[str, Any] = {"title": r.questions[0] if r.questions else None, "text": r.answer, "source": r.source}
    item.update(r.fields or r.metadata)
    item[relevance] = hit.score
    return json.dumps(item, ensure_ascii=False, default=str)


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
        return await run_query(self.service.search, kb, subject, where=q.get("where_str"), limit=limit)

    async def get_related(self, request: Request) -> Response:
        kb = request.path_params["kb"]
        return await self._guarded(request, kb, lambda hits: {
            "documents": documents(hits), "num_retrieved": len(hits)})

    async def search(self, request: Request) -> Response:
        kb = request.path_params["kb"]
        return await self._guarded(request, kb, lambda hits: {
            "knowledge_base": kb, "num_retrieved": len(hits), "hits": [hit_json(h) for h in hits]})

    async def _guarded(self, request: Request, kb: str, shape) -> Response:
        try:
            return JSONResponse(shape(await self._hits(request, kb)))
        except _Refused as exc:
            return exc.response
        except NotFound:
            return tools_error(404, "not_found", f"There is no knowledge base '{kb}'.")
        except OpenQnAError as exc:
            code = "invalid_where" if exc.target == "where_str" else ENGINE_CODES.get(exc.code, "invalid_request")
            return tools_error(exc.status, code, exc.message)

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
            version = self._version(request)
        except _Refused as exc:
            return exc.response
        kbs = await run_in_threadpool(self.service.knowledge_bases, key)
        return JSONResponse(openapi_document(kbs, self._server(request), version))

    async def openapi_one(self, request: Request) -> Response:
        kb = request.path_params["kb"]
        try:
            key = self._key(request, kb)
            version = self._version(request)
        except _Refused as exc:
            return exc.response
        kbs = [k for k in await run_in_threadpool(self.service.knowledge_bases, key) if k.name.lower() == kb.lower()]
        if not kbs:
            return tools_error(404, "not_found", f"There is no knowledge base '{kb}'.")
        return JSONResponse(openapi_document(kbs, self._server(request), version))


class _Refused(Exception):
    def __init__(self, response: Response):
        self.response = response
