"""Azure AI Language question answering: the runtime routes.

Translates ``:query-knowledgebases`` and ``:query-text`` requests (property
names case-insensitive, numeric strings accepted, unknown fields ignored, as the
service does) into ``AskRequest``s and answers back in Azure's camelCase shape.
No ranking here: see ``kb/service.py``.
"""

from __future__ import annotations

from typing import Any

import regex
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from openqna.api.azure.wire import Body, authorize, handle_errors, read_json
from openqna.api.concurrency import run_query, run_store
from openqna.api.logged_ask import ask_and_log
from openqna.auth.keys import Authorizer
from openqna.filters.match import And, Filter, MetaEq, Or, SourceIn
from openqna.formats.limits import LIMITS
from openqna.kb.query_log import QueryLog
from openqna.kb.service import Answer, AskRequest, Service, SpanRequest
from openqna.records import MAX_QNA_ID, InvalidArgument, NotFound, ProjectNotFound, blank

STRING_INDEX_TYPES = ("TextElements_v8", "UnicodeCodePoint", "Utf16CodeUnit")


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


def optional_id(body: Body, key: str) -> int | None:
    """A QnA id where 0, a negative number, "" or null means none, as Bot Framework clients send it."""
    value = body.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    qna_id = body.integer(key, hi=MAX_QNA_ID)
    return qna_id if qna_id is not None and qna_id > 0 else None


def feedback_records(body: Body, key: str) -> list[tuple[int, str, str]]:
    """Active-learning feedback, ``{key: [{"userId", "userQuestion", "qnaId"}]}`` as Azure's ``:feedback`` (key
    ``records``) and QnA Maker's ``train`` (``feedbackRecords``) send it: (qnaId, question, userId) triples, within
    ``LIMITS`` (a caller could otherwise store any number of records of any size in one call)."""
    records = body.array(key)
    if not records:
        raise InvalidArgument(f"The body must be {{\"{key}\": [{{\"userId\", \"userQuestion\", \"qnaId\"}}]}} "
                              "with at least one record.", target=key)
    if len(records) > LIMITS.feedback_records:
        raise InvalidArgument(f"'{key}' has {len(records)} records; the limit is {LIMITS.feedback_records} a call: "
                              "send the rest in further calls.", target=key)
    parsed = []
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            raise InvalidArgument(f"'{key}[{i}]' must be an object with userQuestion and qnaId.", target=f"{key}[{i}]")
        r = Body(rec, f"{key}[{i}]")
        question, qna_id = r.string("userQuestion", max_len=LIMITS.question_chars), optional_id(r, "qnaId")
        if not question or not question.strip() or qna_id is None:
            raise InvalidArgument(f"'{key}[{i}]' needs 'userQuestion' and a positive 'qnaId'.", target=f"{key}[{i}]")
        parsed.append((qna_id, question, r.string("userId", max_len=LIMITS.user_id_chars) or ""))
    return parsed


def question_and_context(body: Body) -> AskRequest:
    """The question or QnA id, and the previous turn, as the language service and QnA Maker both send them."""
    question = body.string("question", max_len=LIMITS.question_chars)
    qna_id = optional_id(body, "qnaId")
    if qna_id is None and question is None:
        raise InvalidArgument("Either 'question' or 'qnaId' must be given.", target="question")
    if qna_id is None and question is not None and blank(question):
        raise InvalidArgument("'question' is blank (it holds only spaces or invisible characters); ask a question "
                              "or give 'qnaId'.", target="question")
    req = AskRequest(question=question, qna_id=qna_id)
    context = body.obj("context")
    if context is not None:
        # Bot Framework's C# LanguageServiceUtils sends {"previousQnAId": 0, "previousUserQuery": ""}
        # on a first turn: a context without a previous QnA is no context.
        req.previous_qna_id = optional_id(context, "previousQnaId")
        if req.previous_qna_id is not None:
            req.previous_user_query = context.string("previousUserQuery", max_len=LIMITS.question_chars)
    return req


def parse_ask(raw: Any) -> AskRequest:
    if not isinstance(raw, dict):
        raise InvalidArgument("The request body must be a JSON object.")
    body = Body(raw)
    req = question_and_context(body)
    top = body.integer("top", lo=1, hi=LIMITS.top)
    req.top = 3 if top is None else top
    req.threshold = body.number("confidenceScoreThreshold") or 0.0
    ranker = body.choice("rankerType", ("Default", "QuestionOnly", "AutoSuggestQuestion"))
    req.question_only = ranker == "QuestionOnly"
    req.filter = parse_filters(body.obj("filters"))
    span = body.obj("answerSpanRequest")
    if span is not None and span.boolean("enable"):
        req.span = SpanRequest(span.number("confidenceScoreThreshold") or 0.0,
                               span.integer("topAnswersWithSpan", lo=1, hi=LIMITS.span_top) or 1)
    req.include_unstructured = bool(body.boolean("includeUnstructuredSources"))
    body.string("userId", max_len=LIMITS.user_id_chars)  # only checked: answers do not depend on who asks
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
    """Offsets are code points internally; Utf16CodeUnit callers get UTF-16 units, and TextElements_v8 callers (the
    REST default; the Python SDK sends UnicodeCodePoint) text elements: .NET's, Unicode's extended grapheme clusters
    (UAX #29: "👍🏽" or "é" written as e and a combining accent is one)."""
    if kind == "Utf16CodeUnit":
        return lambda n: len(text[:n].encode("utf-16-le")) // 2
    if kind == "TextElements_v8":
        return lambda n: len(regex.findall(r"\X", text[:n]))
    return lambda n: n


# -- routes ----------------------------------------------------------------------------------
class AzureRuntime:
    def __init__(self, service: Service, authorizer: Authorizer, query_log: QueryLog | None = None):
        self.service = service
        self.authorizer = authorizer
        self.query_log = query_log or QueryLog(service.store)

    def routes(self) -> list[Route]:
        return [
            Route("/language/:query-knowledgebases", self.query_knowledgebases, methods=["POST"]),
            Route("/language/:query-text", self.query_text, methods=["POST"]),
        ]

    @handle_errors
    async def query_knowledgebases(self, request: Request) -> Response:
        project = request.query_params.get("projectName")
        deployment = request.query_params.get("deploymentName")
        authorize(self.authorizer, request, role="query", project=project)
        if not project:
            raise InvalidArgument("The 'projectName' query parameter is required.", target="projectName")
        if not deployment:
            raise InvalidArgument("The 'deploymentName' query parameter is required.", target="deploymentName")
        raw = await read_json(request)
        req = parse_ask(raw)
        try:
            answers = await ask_and_log(self.service, self.query_log, project, deployment, req,
                                        Body(raw).get("userId"))
        except NotFound as exc:
            if isinstance(exc, ProjectNotFound):
                raise
            raise await run_store(self.service.deployment_not_found, project, deployment) from None
        return JSONResponse({"answers": [answer_json(a) for a in answers]})

    @handle_errors
    async def query_text(self, request: Request) -> Response:
        authorize(self.authorizer, request, role="query")
        raw = await read_json(request)
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
            rid = r.string("id", max_len=LIMITS.text_record_id_chars)
            text = r.string("text", max_len=LIMITS.text_record_chars)
            if not rid or text is None:
                raise InvalidArgument(f"'records[{i}]' needs both 'id' and 'text'.", target=f"records[{i}]")
            parsed.append((rid, text))
        if len({rid for rid, _ in parsed}) != len(parsed):
            raise InvalidArgument("Record ids in 'records' must be unique.", target="records")
        body.language()
        index_type = body.choice("stringIndexType", STRING_INDEX_TYPES) or "TextElements_v8"
        answers = await run_query(self.service.answer_from_text, question, parsed)
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
