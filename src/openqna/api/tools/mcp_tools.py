"""The knowledge bases as MCP tools: list_knowledge_bases, search and ask (DESIGN: "the same tools over MCP").

Transport-free: ``build_server`` returns an MCPServer (official ``mcp`` SDK 2.x) whose tools turn
arguments into ``Service`` calls and results into small JSON models; ``api/tools/mcp.py`` puts it on stdio
or streamable HTTP. Every error a caller can cause comes back as a tool result with ``isError`` and a
message an LLM can correct itself from (a refused ``where`` names the problem and the allowed syntax),
never as a crash or a protocol error.

Keys and tokens: on HTTP the tools read the caller's key or token from the request headers (``api/tools/mcp.py``
has already refused requests without a valid one); a caller scoped to other knowledge bases neither lists nor
reaches this one — it is reported as unknown, exactly like a name that does not exist. On stdio there
are no headers and no authorizer: the process belongs to whoever could open the data directory.
"""

# No ``from __future__ import annotations``: the SDK reads the tools' Annotated[...] hints at runtime.

import json
from typing import Annotated, Any

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

from openqna import __version__, settings
from openqna.api.concurrency import run_query
from openqna.api.credentials import secret_from_headers
from openqna.api.tools.get_related import DOCUMENTS_CHARS, fitted, hit_json, longest_value, utf16_length
from openqna.auth.keys import Authorizer, Caller, allows
from openqna.filters.evaluate import allowed_syntax
from openqna.formats.limits import LIMITS
from openqna.kb.catalog import LIVE
from openqna.kb.service import AskRequest, Hit, Service
from openqna.records import NotFound, OpenQnAError, ProjectNotFound, blank

MAX_LIMIT = settings.tools_max_limit()  # the HTTP tools' limit too
TEXT_CHARS = 4000  # one hit's text; keeps a 50-hit result well inside what LLM clients accept
ASK_THRESHOLD = 0.5  # calibrated confidence: 0.5 separates on-topic answers from off-topic ones on every KB

INSTRUCTIONS = (
    "Knowledge bases of curated answers, documents and typed tables. Call list_knowledge_bases first: it "
    "names each knowledge base and the columns (with types) a `where` filter may use. Then call search to "
    "retrieve records (optionally filtered), or ask for the best answers to a question with a calibrated "
    "confidence. Cite the returned source when you use a record."
)

# The filter language without its first clause ("columns ...;"): columns differ per knowledge base
# and list_knowledge_bases gives them; a refused filter repeats the whole syntax for its knowledge base.
_OPERATORS = allowed_syntax({}).partition("; ")[2]
WHERE_HELP = (
    "Optional filter, a ClickHouse-style SQL boolean expression over the knowledge base's columns "
    "(list_knowledge_bases gives their names and types). Examples: \"category = 'billing'\", "
    "\"price < 20 AND has(tags, 'new')\", \"updated >= now() - INTERVAL 30 DAY\"; a column named like a keyword "
    "(select, and, null) is written in backticks: \"`select` = 'x'\". Allowed: "
    f"{_OPERATORS}. Omit it to search everything."
)

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                            open_world_hint=False)

KbName = Annotated[str, Field(description="Name of a knowledge base, as list_knowledge_bases gives it.")]
Subject = Annotated[str, Field(max_length=LIMITS.question_chars,
                               description="What to look for, in natural language (a question, topic or keywords).")]
Where = Annotated[str | None, Field(max_length=2000, description=WHERE_HELP)]
Limit = Annotated[int, Field(ge=1, le=MAX_LIMIT, strict=True, description=f"How many records to return, 1 to {MAX_LIMIT}.")]
DeploymentName = Annotated[str | None, Field(min_length=1, max_length=100, description=(
    "Which deployment of a project to search, such as 'production'; omit it for the state this server's tools "
    "serve (normally the live, edited state 'test')."))]
Question = Annotated[str, Field(min_length=1, max_length=LIMITS.question_chars,
                                description="The user's question, in natural language.")]
Top = Annotated[int, Field(ge=1, le=LIMITS.top, strict=True,  # as search's limit: "2" or true is refused, not read
                              description=f"How many answers at most, 1 to {LIMITS.top}.")]
Threshold = Annotated[float, Field(ge=0.0, le=1.0, strict=True, description=(  # "0.5" or true refused, as top
    "Minimum confidence (0 to 1) of an answer; below it the knowledge base's default answer is returned. "
    f"{ASK_THRESHOLD} rejects off-topic questions."))]


# ------------------------------------------------------------------------------------------- results
class ColumnInfo(BaseModel):
    name: str
    type: str = Field(description="String, Int64, Float64, Bool, DateTime or Array(String)")


class KnowledgeBase(BaseModel):
    name: str
    description: str
    kind: str = Field(description='"project": QnA pairs and document passages, metadata as String columns; '
                                  '"table": rows with a typed schema')
    count: int = Field(description="number of records")
    columns: list[ColumnInfo] = Field(description="what a `where` filter may name")


class KnowledgeBaseList(BaseModel):
    knowledge_bases: list[KnowledgeBase]


class SearchHit(BaseModel):
    id: int | None = Field(description="the record's id; null for a row of a connected table without an integer "
                                       "id column")
    score: float = Field(description="relevance, 0 to 1")
    kind: str = Field(description='record kind, e.g. "qna" (question-answer pair) or "passage" (document chunk)')
    title: str | None = Field(description="the record's (first) question or title")
    text: str = Field(description=f"the answer or passage text (cut at {TEXT_CHARS} characters)")
    source: str
    fields: dict[str, Any] = Field(description="typed column values (tables; DateTime as ISO 8601)")
    metadata: dict[str, str] = Field(description="metadata key/value pairs (lower-cased)")


class SearchResult(BaseModel):
    kb: str
    num_retrieved: int = Field(description=f"the hits returned: kept under {DOCUMENTS_CHARS} characters of JSON, "
                                           "long values are cut to one length and, past that, the last hits left out")
    hits: list[SearchHit]


class AskAnswer(BaseModel):
    id: int | None = Field(description="record id; null for the default answer")
    confidence: float = Field(description="calibrated, 0 to 1")
    is_default_answer: bool = Field(description="true: no record matched, this is the knowledge base's "
                                                "fallback text, not an answer to the question")
    question: str | None = Field(description="the matched record's question or title")
    answer: str
    source: str | None
    metadata: dict[str, str]


class AskResult(BaseModel):
    project: str
    matched: bool = Field(description="false when no answer reached the threshold")
    note: str | None
    answers: list[AskAnswer]


# --------------------------------------------------------------------------------------------- tools
def _clip(text: str) -> str:
    return _clip_to(text, TEXT_CHARS)


def _clip_to(text: str, most: int) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


def _result(model: BaseModel) -> CallToolResult:
    """Structured content plus the same JSON, compact, for clients that only pass text to the model."""
    return CallToolResult(content=[TextContent(type="text", text=model.model_dump_json())],
                          structured_content=model.model_dump(mode="json"))


def _unknown(kb: str) -> ToolError:
    return ToolError(f"Unknown knowledge base '{kb}'; call list_knowledge_bases for the ones you can use.")


def _hit(hit: Hit, most: int | None) -> SearchHit:
    """One hit: its text cut at ``TEXT_CHARS``, and every string value (columns' and metadata's too) at ``most``
    (None: as it is), as ``/tools/{kb}/search`` cuts them."""
    values = hit_json(hit, most)
    return SearchHit(**{**values, "text": _clip(values["text"])})


def search_result(kb: str, hits: list[Hit]) -> SearchResult:
    """``search``'s result kept to ``/tools/{kb}/search``'s budget (``DOCUMENTS_CHARS``, its JSON as the text content
    writes it), the same way: past it, every string value is clipped to the longest length that fits, and hits that
    still do not fit are left out from the last.  Twenty rows of a 9,000-character column were ~360,000 characters of
    text, and as much again in the structured content."""
    def render(n: int, most: int | None) -> SearchResult:
        return SearchResult(kb=kb, num_retrieved=n, hits=[_hit(h, most) for h in hits[:n]])

    return fitted(render, lambda result: utf16_length(result.model_dump_json()), len(hits), longest_value(hits),
                  DOCUMENTS_CHARS)[0]


class KnowledgeBaseTools:
    """The three tools over one Service; ``authorizer`` None means a trusted local caller (stdio)."""

    def __init__(self, service: Service, authorizer: Authorizer | None, deployment: str):
        self.service = service
        self.authorizer = authorizer
        self.deployment = deployment

    def caller(self, ctx: Context) -> Caller | None:
        if self.authorizer is None:
            return None
        caller, denied = self.authorizer.check(secret_from_headers(ctx.headers or {}))
        if denied:  # the HTTP guard refuses these first; kept so the tools never trust a mount
            raise ToolError(f"A valid API key or bearer token is required (Authorization: Bearer <key> or "
                            f"api-key: <key>): {denied.reason}.")
        return caller

    def reachable(self, ctx: Context, kb: str) -> None:
        if not allows(self.caller(ctx), role="query", project=kb):
            raise _unknown(kb)

    async def reach(self, ctx: Context, kb: str) -> None:
        """``reachable`` from an async tool: on a thread when the check may wait (a remote store's key lookup, a
        token's JWKS fetch), so that it never stalls the event loop (``Authorizer.may_block``)."""
        if self.authorizer is not None and self.authorizer.may_block(secret_from_headers(ctx.headers or {})):
            await anyio.to_thread.run_sync(self.reachable, ctx, kb)
        else:
            self.reachable(ctx, kb)

    def call(self, kb: str, fn, *args, **kwargs):
        """Run a Service call, turning the errors a caller can cause into tool errors."""
        try:
            return fn(*args, **kwargs)
        except ProjectNotFound:
            raise _unknown(kb) from None
        except OpenQnAError as exc:
            # the filter's messages name get_related's parameter, where_str; this tool's is ``where``
            raise ToolError(exc.message.replace("where_str", "where") if exc.target == "where_str"
                            else exc.message) from None

    def list_knowledge_bases(self, ctx: Context) -> Annotated[CallToolResult, KnowledgeBaseList]:
        infos = self.service.knowledge_bases(self.caller(ctx))
        return _result(KnowledgeBaseList(knowledge_bases=[
            KnowledgeBase(name=i.name, description=i.description, kind=i.kind, count=i.count,
                          columns=[ColumnInfo(name=c.name, type=c.type) for c in i.columns])
            for i in infos
        ]))

    # search and ask run on the query pool, as the HTTP surfaces' questions do (api/concurrency.py)
    async def search(self, ctx: Context, kb: KbName, subject: Subject, where: Where = None,
                     limit: Limit = 4, deployment: DeploymentName = None) -> Annotated[CallToolResult, SearchResult]:
        await self.reach(ctx, kb)
        return _result(await run_query(self._search, kb, subject, where, limit, deployment or self.deployment))

    async def ask(self, ctx: Context, project: KbName, question: Question, top: Top = 3,
                  threshold: Threshold = ASK_THRESHOLD,
                  deployment: DeploymentName = None) -> Annotated[CallToolResult, AskResult]:
        await self.reach(ctx, project)
        if blank(question):  # as every HTTP surface and search refuse one; it got the default answer
            raise ToolError("'question' is blank (it holds only spaces or invisible characters); ask a question.")
        req = AskRequest(question=question, top=top, threshold=threshold, include_unstructured=True)
        answers = await run_query(self.call, project, self._ask, project, deployment or self.deployment, req)
        out = []
        for a in answers:
            if a.qna is None:
                out.append(AskAnswer(id=None, confidence=a.confidence, is_default_answer=True, question=None,
                                     answer=a.default_text, source=None, metadata={}))
            else:
                q = a.qna
                out.append(AskAnswer(id=q.id, confidence=a.confidence, is_default_answer=False,
                                     question=q.questions[0] if q.questions else None, answer=_clip(q.answer),
                                     source=q.source, metadata=q.metadata))
        matched = not any(a.is_default_answer for a in out)
        note = None if matched else (
            f"No good match: no answer reached confidence {threshold}. The answer given is the knowledge base's "
            "default answer, not information about the question; try search, or rephrase.")
        return _result(AskResult(project=project, matched=matched, note=note, answers=out))

    def _search(self, kb: str, subject: str, where: str | None, limit: int, deployment: str) -> SearchResult:
        hits = self.call(kb, self.service.search, kb, subject, where=where, limit=limit, deployment=deployment)
        return search_result(kb, hits)  # on the query pool too: fitting a long result renders it a few times

    def _ask(self, project: str, deployment: str, req: AskRequest) -> list:
        """``Service.ask``, a deployment the project lacks named with the ones it has (as search and Azure do)."""
        try:
            return self.service.ask(project, deployment, req)
        except NotFound as exc:
            if isinstance(exc, ProjectNotFound):
                raise
            raise self.service.deployment_not_found(project, deployment) from None


# Another surface's name for an argument, taken as this one's: get_related's where_str is search's where.
ALIASES = {"search": {"where_str": "where"}}


class ToolServer(MCPServer):
    """An MCPServer whose tools refuse arguments they do not take and explain refused values in plain words.

    The SDK drops an unknown argument without a word, so a filter sent under another name (``where_str``, as
    the HTTP tools call it, or ``filter``) searched everything; and it answers a value its schema refuses with
    pydantic's own dump (error URLs and all).  Here an alias is renamed (``ALIASES``), any other unknown
    argument is a tool error that lists the tool's arguments, and a refused value names its argument and what
    the schema expects.
    """

    _schemas: dict[str, dict[str, Any]] | None = None

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context | None = None
                        ) -> CallToolResult | InputRequiredResult:
        schema = (await self._input_schemas()).get(name)
        if schema is None:  # the SDK says the tool is unknown
            return await super().call_tool(name, arguments, context)
        arguments = _renamed(name, arguments)
        taken = schema.get("properties", {})
        unknown = [k for k in arguments if k not in taken]
        if unknown:
            raise ToolError(f"Unknown argument(s) {', '.join(repr(k[:40]) for k in unknown[:5])} for {name}; it "
                            f"takes {', '.join(taken)}.")
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if not isinstance(exc.__cause__, ValidationError):
                raise
            raise ToolError(refused_arguments(name, exc.__cause__, taken)) from None

    async def _input_schemas(self) -> dict[str, dict[str, Any]]:
        if self._schemas is None:
            self._schemas = {t.name: t.input_schema for t in await self.list_tools()}
        return self._schemas


def _renamed(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """``arguments`` with another surface's names for them renamed; both names with different values is refused."""
    out = dict(arguments)
    for alias, name in ALIASES.get(tool, {}).items():
        if alias not in out:
            continue
        value = out.pop(alias)
        if name in out and out[name] != value:
            raise ToolError(f"Both '{name}' and '{alias}' are given, with different values; give one ('{name}').")
        out[name] = value
    return out


def refused_arguments(tool: str, error: ValidationError, properties: dict[str, Any]) -> str:
    """What was wrong with a call's arguments, one clause per argument, each with what its schema expects."""
    clauses = []
    for problem in error.errors(include_url=False):
        name = ".".join(str(part) for part in problem["loc"]) or "arguments"
        expected = properties.get(str(problem["loc"][0]) if problem["loc"] else "", {}).get("description", "")
        if problem["type"] == "missing":
            clause = f"'{name}' is required"
        else:
            given = problem.get("input")
            shown = json.dumps(given, ensure_ascii=False, default=str) if given is not None else "null"
            clause = f"'{name}' was refused: {problem['msg']} (got {shown[:60]})"
        clauses.append(clause + (f"; expected: {_clip_to(expected, 300)}" if expected else ""))
    return f"Invalid arguments for {tool}: " + " ".join(c.rstrip(".") + "." for c in clauses)


def build_server(service: Service, *, authorizer: Authorizer | None = None, deployment: str = LIVE) -> MCPServer:
    """An MCPServer with the three read-only tools; ``deployment`` is the one they query."""
    tools = KnowledgeBaseTools(service, authorizer, deployment)
    server = ToolServer("openqna", title="openqna knowledge bases", version=__version__, instructions=INSTRUCTIONS,
                       log_level="WARNING")
    server.add_tool(
        tools.list_knowledge_bases, name="list_knowledge_bases", title="List knowledge bases", annotations=READ_ONLY,
        description=(
            "List the knowledge bases you can search: name, description, kind, number of records and the typed "
            "columns a `where` filter of search may use. Call this first."),
    )
    server.add_tool(
        tools.search, name="search", title="Search a knowledge base", annotations=READ_ONLY,
        description=(
            "Hybrid (semantic + keyword) search over every record of one knowledge base: QnA pairs, document "
            "passages and table rows, best first, each with a relevance score, title, text, source and its typed "
            "fields and metadata. Narrow it with `where`, a ClickHouse-style filter over the knowledge base's "
            "columns; a refused filter returns an error that names the problem and the allowed syntax."),
    )
    server.add_tool(
        tools.ask, name="ask", title="Ask a knowledge base", annotations=READ_ONLY,
        description=(
            "Answer a question from one knowledge base (the answers a support bot gives): the best matching "
            "answers with a calibrated confidence in 0..1. When nothing reaches the threshold the result has "
            "matched=false and one answer with is_default_answer=true: the knowledge base's fallback text "
            "(such as 'No good match found in KB.'), which says nothing about the question."),
    )
    return server
