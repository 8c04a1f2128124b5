"""QnA Maker runtime: ``generateAnswer`` and ``train`` (v4.0 and v5.0-preview), as Bot Framework bots call them.

QnA Maker was retired in March 2025; its bots (botbuilder-python, botbuilder-dotnet, botbuilder-js)
post to ``{host}/knowledgebases/{kbId}/generateAnswer``, where ``host`` usually ends in ``/qnamaker``.
This surface serves that path under every prefix those hosts use, matches the last segment
case-insensitively (C# calls ``generateanswer``) and translates the body to an ``AskRequest``:
scores are 0..100 on the wire, metadata a name/value array, strict filters (``source_name_metadata``
is C#'s spelling of a source filter) joined by AND or OR.  The wire contract, read from the clients'
source, is in ``reference/qnamaker-botframework.md``.  No ranking here: see ``kb/service.py``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from openqna.api import json_body
from openqna.api.azure.runtime import feedback_records, question_and_context
from openqna.api.azure.wire import Body
from openqna.api.credentials import secret_from_headers
from openqna.api.errors import qnamaker_code, qnamaker_error, unauthorized_message
from openqna.api.logged_ask import ask_and_log
from openqna.auth.keys import Authorizer, allows
from openqna.filters.nodes import And, Filter, MetaEq, Or, SourceIn
from openqna.formats.limits import LIMITS
from openqna.kb.authoring import Authoring
from openqna.kb.catalog import LIVE, Project
from openqna.kb.query_log import QueryLog
from openqna.kb.service import Answer, AskRequest, Service, SpanRequest
from openqna.records import InvalidArgument, NotFound, OpenQnAError

log = logging.getLogger("openqna")

# Where bots' hosts point: the QnA Maker App Service (…/qnamaker), the bare host, and the v5 previews.
PREFIXES = ("", "/qnamaker", "/qnamaker/v4.0", "/qnamaker/v5.0-preview.1", "/qnamaker/v5.0-preview.2")
PRODUCTION = "production"  # what QnA Maker calls the published index; isTest asks the live (test) one
SOURCE_FILTER_NAME = "source_name_metadata"  # botbuilder-dotnet's Constants.SourceFilterMetadataKey
RANKERS = ("Default", "QuestionOnly", "AutoSuggestQuestion")


def is_qnamaker_path(path: str) -> bool:
    """Whether an unmatched path belongs to this surface, so its 404 speaks QnA Maker's dialect."""
    return any(path.lower().startswith(f"{p}/knowledgebases/") for p in PREFIXES)


# -- request parsing ---------------------------------------------------------------------------
def scale(value: float | None) -> float:
    """A QnA Maker threshold on 0..100 as 0..1; a value ≤ 1 is already on 0..1 (botbuilder-python sends 0.3)."""
    if value is None:
        return 0.0
    return value if value <= 1.0 else value / 100.0


def parse_strict_filters(body: Body) -> Filter | None:
    """``strictFilters`` [{name, value}] joined by ``strictFiltersCompoundOperationType`` (AND/OR or 0/1)."""
    operation = compound_operation(body)
    pairs = body.array("strictFilters") or []
    if len(pairs) > LIMITS.filter_pairs:
        raise InvalidArgument(f"'strictFilters' has {len(pairs)} filters; the limit is {LIMITS.filter_pairs}.",
                              target="strictFilters")
    nodes: list[Filter] = []
    sources: list[str] = []
    for i, pair in enumerate(pairs):
        if not isinstance(pair, dict):
            raise InvalidArgument(f"'strictFilters[{i}]' must be an object with name and value.",
                                  target=f"strictFilters[{i}]")
        p = Body(pair, f"strictFilters[{i}]")
        raw_value = pair.get("value")
        if isinstance(raw_value, (int, float)) and not isinstance(raw_value, bool):  # .NET's binder made it text
            pair = {**pair, "value": str(raw_value)}
            p = Body(pair, f"strictFilters[{i}]")
        name, value = p.string("name", max_len=100), p.string("value", max_len=500)
        if not name or value is None:
            raise InvalidArgument(f"'strictFilters[{i}]' needs both 'name' and 'value'.", target=f"strictFilters[{i}]")
        if name.lower() == SOURCE_FILTER_NAME:
            sources.append(value)
        else:
            nodes.append(MetaEq(name, value))
    if sources:
        nodes.append(SourceIn(tuple(sources)))
    if not nodes:
        return None
    return nodes[0] if len(nodes) == 1 else (Or if operation == "OR" else And)(tuple(nodes))


def compound_operation(body: Body) -> str:
    """AND or OR: botbuilder-python sends the name, C# the enum's number (0 AND, 1 OR) under a PascalCase key."""
    value = body.get("strictFiltersCompoundOperationType")
    if value is None:
        return "AND"
    if isinstance(value, str) and value.strip().upper() in ("AND", "OR", "0", "1"):
        value = value.strip().upper()
        return "OR" if value in ("OR", "1") else "AND"
    if isinstance(value, int) and not isinstance(value, bool) and value in (0, 1):
        return "OR" if value == 1 else "AND"
    raise InvalidArgument(f"'strictFiltersCompoundOperationType' must be AND, OR, 0 or 1; got {value!r}.",
                          target="strictFiltersCompoundOperationType")


def flag(body: Body, key: str) -> bool | None:
    """A JSON boolean, or the text "true" or "false" in any case: QnA Maker's runtime bound its body with
    Newtonsoft.Json, which reads those as booleans, and bots written against it send them.  Azure's routes keep
    ``Body.boolean``, which refuses them."""
    value = body.get(key)
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return body.boolean(key)


def parse_generate_answer(raw: Any, *, preview: bool) -> tuple[AskRequest, str]:
    """A generateAnswer body as an ``AskRequest`` and the deployment it asks (``isTest``: test, else production)."""
    if not isinstance(raw, dict):
        raise InvalidArgument("The request body must be a JSON object such as {\"question\": \"...\", \"top\": 1}.")
    body = Body(raw)
    req = question_and_context(body)
    top = body.integer("top", lo=1, hi=LIMITS.top)
    req.top = 1 if top is None else top
    req.threshold = scale(body.number("scoreThreshold", hi=100.0))
    req.question_only = body.choice("rankerType", RANKERS) == "QuestionOnly"
    req.filter = parse_strict_filters(body)  # userId is ignored, as QnA Maker's runtime only logged it
    span = body.obj("answerSpanRequest")
    if span is not None and flag(span, "enable"):
        req.span = SpanRequest(scale(span.number("scoreThreshold", hi=100.0)),
                               span.integer("topAnswersWithSpan", lo=1, hi=LIMITS.span_top) or 1)
    # QnA Maker managed (v5) answered from unstructured documents too, unless told not to; v4 had none
    unstructured = flag(body, "includeUnstructuredSources")
    req.include_unstructured = preview if unstructured is None else unstructured
    deployment = LIVE if flag(body, "isTest") else PRODUCTION
    return req, deployment


def parse_feedback(raw: Any) -> list[tuple[int, str, str]]:
    """``{"feedbackRecords": [{"userId", "userQuestion", "qnaId"}]}`` as (qnaId, question, userId) triples."""
    return feedback_records(Body(raw if isinstance(raw, dict) else {}), "feedbackRecords")


# -- responses ------------------------------------------------------------------------------------
def answer_json(a: Answer) -> dict:
    """One answer as QnA Maker returns it: score on 0..100 (both clients divide it by 100), metadata as pairs."""
    if a.qna is None:
        return {"questions": [], "answer": a.default_text, "score": 0.0, "id": -1, "source": None, "metadata": []}
    q = a.qna
    out: dict = {
        "questions": q.questions,
        "answer": q.answer,
        "score": round(a.confidence * 100.0, 2),
        "id": q.id,
        "source": q.source,
        "metadata": [{"name": k, "value": v} for k, v in q.metadata.items()],
        "context": {"isContextOnly": q.dialog.is_context_only,
                    "prompts": [{"displayOrder": p.display_order, "qnaId": p.qna_id, "qna": None,
                                 "displayText": p.display_text} for p in q.dialog.prompts]},
    }
    if a.span is not None:  # v5.0-preview; endIndex is exclusive, as in the spec's example
        out["answerSpan"] = {"text": a.span.text, "score": round(a.span.confidence * 100.0, 2),
                             "startIndex": a.span.offset, "endIndex": a.span.offset + a.span.length}
    return out


class Refusal(Exception):
    """A caller error already in QnA Maker's envelope."""

    def __init__(self, status: int, code: str, message: str):
        self.response = qnamaker_error(status, code, message)


def answers_errors(endpoint: Callable[..., Awaitable[Response]]) -> Callable[..., Awaitable[Response]]:
    """Every refusal, caller error or failure of ``endpoint`` in QnA Maker's envelope (bots log its message)."""

    @functools.wraps(endpoint)
    async def wrapper(*args, **kwargs) -> Response:
        try:
            return await endpoint(*args, **kwargs)
        except Refusal as exc:
            return exc.response
        except OpenQnAError as exc:
            code = "KbNotFound" if exc.code == "ProjectNotFound" else qnamaker_code(exc.status)
            return qnamaker_error(exc.status, code, exc.message, target=exc.target)
        except Exception:
            log.exception("QnA Maker route failed")
            return qnamaker_error(500, "QnaRuntimeError", "The server failed to answer; see its log.")

    return wrapper


# -- routes ---------------------------------------------------------------------------------------
class QnAMakerRuntime:
    def __init__(self, service: Service, authorizer: Authorizer, query_log: QueryLog | None = None):
        self.service = service
        self.authoring = Authoring(service)
        self.authorizer = authorizer
        self.query_log = query_log or QueryLog(service.store)

    def routes(self) -> list[Route]:
        return [Route(f"{prefix}/knowledgebases/{{kbId}}/{{action}}", self.dispatch, methods=["POST"])
                for prefix in PREFIXES]

    @answers_errors
    async def dispatch(self, request: Request) -> Response:
        action = request.path_params["action"].lower()
        if action not in ("generateanswer", "train"):
            raise Refusal(404, "NotFound", f"No route for POST {request.url.path}; the QnA Maker runtime serves "
                                           ".../knowledgebases/{kbId}/generateAnswer and .../train.")
        project = await run_in_threadpool(self._project, request)  # store reads and writes never on the event loop
        raw = await self._read_json(request)
        if action == "train":
            await run_in_threadpool(self.authoring.add_feedback, project.name, parse_feedback(raw), "feedbackRecords")
            return Response(status_code=204)
        req, deployment = parse_generate_answer(raw, preview="/v5.0-preview" in request.url.path)
        try:
            user = Body(raw).get("userId") if isinstance(raw, dict) else None
            answers = await ask_and_log(self.service, self.query_log, project.name, deployment, req, user)
        except NotFound as exc:
            if deployment != PRODUCTION or "Deployment" not in exc.message:
                raise
            raise Refusal(404, "KbNotFound", f"Knowledge base '{project.name}' has not been published: deploy it to "
                                             "'production', or send \"isTest\": true to ask its test index.") from None
        # a score of 0.00 is no match on QnA Maker's scale: it answered with its default answer then, and a bot that
        # shows answers[0] or checks its id for -1 would show an unrelated answer "at 0"
        scored = [a for a in answers if a.qna is None or round(a.confidence * 100.0, 2) > 0.0]
        if not scored:
            default = next((a.default_text for a in answers if a.qna is None), None)
            if default is None:  # the deployment's own (production's is the one it was published with)
                default = await run_in_threadpool(self.service.default_answer, project, deployment)
            scored = [Answer(None, 0.0, default_text=default)]
        return JSONResponse({"answers": [answer_json(a) for a in scored], "debugInfo": None,
                             "activeLearningEnabled": True})

    def _project(self, request: Request) -> Project:
        """The kbId's project, if the key may query it (a key scoped elsewhere gets 404, so names do not leak)."""
        key, denied = self.authorizer.check(secret_from_headers(request.headers))
        if denied:
            raise Refusal(401, "Unauthorized", unauthorized_message(denied))
        kb_id = request.path_params["kbId"]
        try:
            project = self.authoring.project_for_kb(kb_id)
        except NotFound:
            project = None
        if project is None or not allows(key, role="query", project=project.name):
            raise Refusal(404, "KbNotFound", f"No knowledge base found for kbId '{kb_id}'. Use the project's name "
                                             "or the kbId it was imported with (openqna import --kb-id).")
        return project

    @staticmethod
    async def _read_json(request: Request) -> Any:
        raw = await request.body()
        if len(raw) > LIMITS.body_bytes:
            raise Refusal(413, "BadArgument", f"The request body is larger than {LIMITS.body_bytes} bytes.")
        try:
            return json_body.parse(raw or b"null")
        except json_body.BadBody as exc:
            raise InvalidArgument(f"The request body is not valid JSON: {exc}.") from None
