"""Azure AI Language question answering: the runtime routes.

Translates ``:query-knowledgebases`` and ``:query-text`` requests (property
names case-insensitive, numeric strings accepted, unknown fields ignored, as the
service does) into ``AskRequest``s and answers back in Azure's camelCase shape.
No ranking here: see ``service.py``.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..records import InvalidArgument, OpenQnAError
from ..retrieval.filters import And, Filter, MetaEq, Or, SourceIn
from ..service import Answer, AskRequest, Service, SpanRequest
from ..settings import LIMITS
from .auth import Authorizer, allows
from .errors import MISSING_KEY_MESSAGE, UNAUTHORIZED_MESSAGE, azure_error

STRING_INDEX_TYPES = ("TextElements_v8", "UnicodeCodePoint", "Utf16CodeUnit")


class Body:
    """A JSON object read case-insensitively, with errors that name the field's path."""

    def __init__(self, raw: dict, path: str = ""):
        self.raw = {k.lower(): v for k, v in raw.items()} if isinstance(raw, dict) else {}
        self.path = path

    def _name(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def get(self, key: str) -> Any:
        return self.raw.get(key.lower())

    def string(self, key: str, *, max_len: int | None = None) -> str | None:
        value = self.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            raise InvalidArgument(f"'{self._name(key)}' must be a string.", target=self._name(key))
        if max_len is not None and len(value) > max_len:
            raise InvalidArgument(f"'{self._name(key)}' is {len(value)} characters long; the limit is {max_len}.",
                                  target=self._name(key))
        return value

    def integer(self, key: str, *, lo: int | None = None, hi: int | None = None) -> int | None:
        value = self.get(key)
        if value is None:
            return None
        if isinstance(value, str):
            try:
                value = int(value.strip())
            except ValueError:
                value = None
        if isinstance(value, bool) or not isinstance(value, int) and not (isinstance(value, float) and value.is_integer()):
            raise InvalidArgument(f"'{self._name(key)}' must be an integer.", target=self._name(key))
        value = int(value)
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise InvalidArgument(f"'{self._name(key)}' must be between {lo} and {hi}; got {value}.",
                                  target=self._name(key))
        return value

    def number(self, key: str, *, lo: float = 0.0, hi: float = 1.0) -> float | None:
        value = self.get(key)
        if value is None:
            return None
        if isinstance(value, str):
            try:
                value = float(value.strip())
            except ValueError:
                value = None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InvalidArgument(f"'{self._name(key)}' must be a number.", target=self._name(key))
        if not lo <= value <= hi:
            raise InvalidArgument(f"'{self._name(key)}' must be between {lo} and {hi}; got {value}.",
                                  target=self._name(key))
        return float(value)

    def boolean(self, key: str) -> bool | None:
        value = self.get(key)
        if value is None:
            return None
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        if not isinstance(value, bool):
            raise InvalidArgument(f"'{self._name(key)}' must be true or false.", target=self._name(key))
        return value

    def choice(self, key: str, options: tuple[str, ...]) -> str | None:
        value = self.string(key)
        if value is None:
            return None
        for option in options:
            if option.lower() == value.lower():
                return option
        raise InvalidArgument(f"'{self._name(key)}' must be one of {', '.join(options)}; got '{value}'.",
                              target=self._name(key))

    def obj(self, key: str) -> "Body | None":
        value = self.get(key)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise InvalidArgument(f"'{self._name(key)}' must be an object.", target=self._name(key))
        return Body(value, self._name(key))

    def array(self, key: str) -> list | None:
        value = self.get(key)
        if value is None:
            return None
        if not isinstance(value, list):
            raise InvalidArgument(f"'{self._name(key)}' must be an array.", target=self._name(key))
        return value


# -- request parsing ---------------------------------------------------------------------
def parse_filters(body: Body | None) -> Filter | None:
    """Azure filters: metadata pairs joined by AND/OR, any-of sources, joined by the outer operation."""
    if body is None:
        return None
    parts: list[Filter] = []
    meta = body.obj("metadataFilter")
    if meta is not None:
        pairs = meta.array("metadata") or []
        if len(pairs) > LIMITS.filter_pairs:
            raise InvalidArgument(f"'{meta.path}.metadata' has {len(pairs)} pairs; the limit is {LIMITS.filter_pairs}.",
                                  target=f"{meta.path}.metadata")
        nodes: list[Filter] = []
        for i, pair in enumerate(pairs):
            if not isinstance(pair, dict):
                raise InvalidArgument(f"'{meta.path}.metadata[{i}]' must be an object with key and value.",
                                      target=f"{meta.path}.metadata[{i}]")
            p = Body(pair, f"{meta.path}.metadata[{i}]")
            key, value = p.string("key", max_len=100), p.string("value", max_len=500)
            if not key or value is None:
                raise InvalidArgument(f"'{p.path}' needs both 'key' and 'value'.", target=p.path)
            nodes.append(MetaEq(key, value))
        op = meta.choice("logicalOperation", ("AND", "OR")) or "AND"
        if nodes:
            parts.append(nodes[0] if len(nodes) == 1 else (And if op == "AND" else Or)(tuple(nodes)))
    sources = body.array("sourceFilter")
    if sources:
        if not all(isinstance(s, str) for s in sources):
            raise InvalidArgument(f"'{body.path}.sourceFilter' must be an array of strings.",
                                  target=f"{body.path}.sourceFilter")
        parts.append(SourceIn(tuple(sources)))
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    op = body.choice("logicalOperation", ("AND", "OR")) or "AND"
    return (And if op == "AND" else Or)(tuple(parts))


def parse_ask(raw: Any) -> AskRequest:
    if not isinstance(raw, dict):
        raise InvalidArgument("The request body must be a JSON object.")
    body = Body(raw)
    question = body.string("question", max_len=LIMITS.question_chars)
    qna_id = body.integer("qnaId")
    if (question is None or not question.strip()) and qna_id is None:
        raise InvalidArgument("Either 'question' or 'qnaId' must be given.", target="question")
    req = AskRequest(question=question, qna_id=qna_id)
    top = body.integer("top", lo=1, hi=LIMITS.top)
    req.top = 3 if top is None else top
    req.threshold = body.number("confidenceScoreThreshold") or 0.0
    context = body.obj("context")
    if context is not None:
        req.previous_qna_id = context.integer("previousQnaId")
        if req.previous_qna_id is None:
            raise InvalidArgument("'context.previousQnaId' is required when 'context' is given.",
                                  target="context.previousQnaId")
        req.previous_user_query = context.string("previousUserQuery", max_len=LIMITS.question_chars)
    req.question_only = body.choice("rankerType", ("Default", "QuestionOnly")) == "QuestionOnly"
    req.filter = parse_filters(body.obj("filters"))
    span = body.obj("answerSpanRequest")
    if span is not None and span.boolean("enable"):
        req.span = SpanRequest(span.number("confidenceScoreThreshold") or 0.0,
                               span.integer("topAnswersWithSpan", lo=1, hi=LIMITS.span_top) or 1)
    req.include_unstructured = bool(body.boolean("includeUnstructuredSources"))
    return req


# -- responses -------------------------------------------------------------------------------
def answer_json(a: Answer) -> dict:
    if a.qna is None:
        return {"questions": [], "answer": a.default_text, "confidenceScore": 0.0, "id": -1, "metadata": {}}
    q = a.qna
    out = {
        "questions": q.questions,
        "answer": q.answer,
        "confidenceScore": a.confidence,
        "id": q.id,
        "source": q.source,
        "metadata": q.metadata,
        "dialog": {
            "isContextOnly": q.dialog.is_context_only,
            "prompts": [{"displayOrder": p.display_order, "qnaId": p.qna_id, "displayText": p.display_text}
                        for p in q.dialog.prompts],
        },
    }
    if a.span is not None:
        out["answerSpan"] = {"text": a.span.text, "confidenceScore": a.span.confidence,
                             "offset": a.span.offset, "length": a.span.length}
    return out


def _index_converter(kind: str, text: str):
    """Offsets are code points internally; Utf16CodeUnit callers get UTF-16 units."""
    if kind == "Utf16CodeUnit":
        return lambda n: len(text[:n].encode("utf-16-le")) // 2
    return lambda n: n


# -- routes ----------------------------------------------------------------------------------
class AzureRuntime:
    def __init__(self, service: Service, authorizer: Authorizer):
        self.service = service
        self.authorizer = authorizer

    def routes(self) -> list[Route]:
        return [
            Route("/language/:query-knowledgebases", self.query_knowledgebases, methods=["POST"]),
            Route("/language/:query-text", self.query_text, methods=["POST"]),
        ]

    async def _guard(self, request: Request, project: str | None = None) -> Response | None:
        key, refused = self.authorizer.check(request.headers)
        if refused:
            message = MISSING_KEY_MESSAGE if refused == "missing" else UNAUTHORIZED_MESSAGE
            return azure_error(401, "401", message, headers={"WWW-Authenticate": 'AzureApiManagementKey realm="openqna"'})
        if not allows(key, role="query", project=project):
            return azure_error(403, "Forbidden", f"This key may not query project '{project}'.")
        if not request.query_params.get("api-version"):
            return azure_error(400, "InvalidArgument", "The 'api-version' query parameter is required, e.g. "
                               "api-version=2023-04-01.", target="api-version")
        return None

    @staticmethod
    async def _json(request: Request) -> Any:
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > LIMITS.body_bytes:
            raise _TooLarge()
        raw = await request.body()
        if len(raw) > LIMITS.body_bytes:
            raise _TooLarge()
        try:
            return json.loads(raw or b"null")
        except (ValueError, UnicodeDecodeError) as exc:
            raise InvalidArgument(f"The request body is not valid JSON: {exc}.") from None

    async def query_knowledgebases(self, request: Request) -> Response:
        project = request.query_params.get("projectName")
        deployment = request.query_params.get("deploymentName")
        refused = await self._guard(request, project)
        if refused is not None:
            return refused
        try:
            if not project:
                raise InvalidArgument("The 'projectName' query parameter is required.", target="projectName")
            if not deployment:
                raise InvalidArgument("The 'deploymentName' query parameter is required.", target="deploymentName")
            req = parse_ask(await self._json(request))
            answers = await run_in_threadpool(self.service.ask, project, deployment, req)
        except _TooLarge:
            return _too_large()
        except OpenQnAError as exc:
            return _error(exc)
        return JSONResponse({"answers": [answer_json(a) for a in answers]})

    async def query_text(self, request: Request) -> Response:
        refused = await self._guard(request)
        if refused is not None:
            return refused
        try:
            raw = await self._json(request)
            if not isinstance(raw, dict):
                raise InvalidArgument("The request body must be a JSON object.")
            body = Body(raw)
            question = body.string("question", max_len=LIMITS.question_chars)
            if not question or not question.strip():
                raise InvalidArgument("'question' is required.", target="question")
            records = body.array("records")
            if not records:
                raise InvalidArgument("'records' must hold at least one {id, text} record.", target="records")
            if len(records) > LIMITS.text_records:
                raise InvalidArgument(f"'records' has {len(records)} records; the limit is {LIMITS.text_records}.",
                                      target="records")
            parsed: list[tuple[str, str]] = []
            for i, rec in enumerate(records):
                if not isinstance(rec, dict):
                    raise InvalidArgument(f"'records[{i}]' must be an object with id and text.", target=f"records[{i}]")
                r = Body(rec, f"records[{i}]")
                rid, text = r.string("id"), r.string("text", max_len=LIMITS.text_record_chars)
                if not rid or text is None:
                    raise InvalidArgument(f"'records[{i}]' needs both 'id' and 'text'.", target=f"records[{i}]")
                parsed.append((rid, text))
            if len({rid for rid, _ in parsed}) != len(parsed):
                raise InvalidArgument("Record ids in 'records' must be unique.", target="records")
            body.string("language", max_len=20)
            index_type = body.choice("stringIndexType", STRING_INDEX_TYPES) or "TextElements_v8"
            answers = await run_in_threadpool(self.service.answer_from_text, question, parsed)
        except _TooLarge:
            return _too_large()
        except OpenQnAError as exc:
            return _error(exc)
        texts = dict(parsed)
        out = []
        for a in answers:
            conv_record = _index_converter(index_type, texts[a.record_id])
            item = {"answer": a.text, "confidenceScore": a.confidence, "id": a.record_id,
                    "offset": conv_record(a.offset), "length": conv_record(a.offset + a.length) - conv_record(a.offset)}
            if a.span is not None:
                conv = _index_converter(index_type, a.text)
                item["answerSpan"] = {"text": a.span.text, "confidenceScore": a.span.confidence,
                                      "offset": conv(a.span.offset),
                                      "length": conv(a.span.offset + a.span.length) - conv(a.span.offset)}
            out.append(item)
        return JSONResponse({"answers": out})


class _TooLarge(Exception):
    pass


def _too_large() -> Response:
    return azure_error(413, "InvalidRequest", f"The request body is larger than {LIMITS.body_bytes} bytes.")


def _error(exc: OpenQnAError) -> Response:
    if not isinstance(exc, InvalidArgument):
        return azure_error(exc.status, exc.code, exc.message, target=exc.target)
    return azure_error(exc.status, exc.code, exc.message, target=exc.target,
                       inner="InvalidParameterValue" if exc.target else "InvalidRequestBodyFormat")
