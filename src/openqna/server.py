"""The HTTP server: one Starlette app that mounts every surface."""

from __future__ import annotations

import contextlib
import logging
import logging.handlers
import re
from queue import SimpleQueue
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from openqna import __version__
from openqna.api import links
from openqna.api.azure.authoring_api import AzureAuthoring
from openqna.api.azure.runtime import AzureRuntime
from openqna.api.console import console_routes
from openqna.api.credentials import ChecksOffLoop
from openqna.api.deadlines import DeadlineProtocol
from openqna.api.errors import azure_error, qnamaker_code, qnamaker_error
from openqna.api.native import NativeRoutes
from openqna.api.openai.answers_api import OpenAIRoutes, openai_error
from openqna.api.openai.embeddings_api import EmbeddingRoutes
from openqna.api.openai.vector_stores_api import VectorStoreRoutes
from openqna.api.qnamaker import QnAMakerRuntime, is_qnamaker_path
from openqna.api.rate_limits import RateLimits
from openqna.api.tools.get_related import STATUS_CODES, Tools, tools_error
from openqna.api.tools.mcp import mcp_app
from openqna.auth.bearer import TokenValidator
from openqna.auth.keys import Authorizer
from openqna.kb.answers_search import get_completer
from openqna.kb.authoring import BULK_KINDS, Authoring
from openqna.kb.embeddings import Embeddings
from openqna.kb.jobs import JobRunner
from openqna.kb.query_log import QueryLog
from openqna.kb.refresh import Refresher, RefreshScheduler
from openqna.kb.service import Service
from openqna.kb.train_job import Trainer
from openqna.kinds.vector_stores import JOB_KIND as VECTOR_STORE_FILES
from openqna.kinds.vector_stores import VectorStores
from openqna.models.embedder import spec_of
from openqna.records import OpenQnAError, StoreUnavailable

log = logging.getLogger("openqna")


class RedactSignatures(logging.Filter):
    """uvicorn's access log shows each request's path with its query string; an export's ``resultUrl``
    carries its signature there (``sig=``), which would let whoever reads the log download the export until
    its job expires.  The signature is logged as ``sig=REDACTED``."""

    SIG = re.compile(r"(?<=[?&]sig=)[^&\s]+")

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str) and "sig=" in args[2]:
            record.args = (*args[:2], self.SIG.sub("REDACTED", args[2]), *args[3:])
        return True


class QueueOnly(logging.handlers.QueueHandler):
    """Puts the record on the queue as it is: the listener's handlers format it (a traceback too) on their thread.

    The standard ``QueueHandler.prepare`` formats the message and the traceback in the caller's thread, which for a
    server's error log is the event loop: about 0.6 s per traceback seen here, the whole server stalled meanwhile.
    """

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        return record


def uvicorn_options() -> dict[str, Any]:
    """What every uvicorn serving this app is given: the proxies whose forwarded headers are believed
    (``links.uvicorn_options``) and the connection protocol with read deadlines (``deadlines.DeadlineProtocol``)."""
    return {**links.uvicorn_options(), "http": DeadlineProtocol}


LOGGERS = ("", "uvicorn", "uvicorn.error", "uvicorn.access", "openqna")


class LevelPrefix(logging.Formatter):
    """``WARNING:  name: message``, the level padded as uvicorn pads its own lines."""

    def format(self, record: logging.LogRecord) -> str:
        record.levelprefix = f"{record.levelname}:".ljust(9)
        return super().format(record)


def plain_logging() -> None:
    """A record a line on stderr, as uvicorn writes its own (``WARNING:  openqna.kb.jobs: ...``): openqna's from INFO
    up, other libraries' from WARNING.  Call it before ``create_app``: the MCP SDK configures logging when its server
    is made, unless the root logger has a handler, with a Rich handler that wraps every line at 80 columns when
    stderr is not a terminal (a server's log file) and writes each MCP request at INFO."""
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(LevelPrefix("%(levelprefix)s %(name)s: %(message)s"))
        root.addHandler(handler)
        root.setLevel(logging.WARNING)
    logging.getLogger("openqna").setLevel(logging.INFO)


def log_off_loop(names: tuple[str, ...] = LOGGERS) -> list[logging.handlers.QueueListener]:
    """Move the handlers of the server's loggers (as uvicorn configured them) behind queues, each drained by a
    thread of its own, so that nothing is formatted or written on the event loop; returns the started listeners
    (``stop`` them to flush at exit)."""
    listeners = []
    for name in names:
        logger = logging.getLogger(name)
        handlers = [h for h in logger.handlers if not isinstance(h, logging.handlers.QueueHandler)]
        if not handlers:
            continue
        queue: SimpleQueue[logging.LogRecord] = SimpleQueue()
        for handler in handlers:
            logger.removeHandler(handler)
        logger.addHandler(QueueOnly(queue))
        listener = logging.handlers.QueueListener(queue, *handlers, respect_handler_level=True)
        listener.start()
        listeners.append(listener)
    return listeners


def create_app(service: Service, *, closed: bool = False) -> Starlette:
    """The app over ``service``; callers sign in with its keys or with tokens of ``OPENQNA_TOKEN_ISSUERS``.

    ``closed`` (a server on a network address): never open to callers without a key, even with none left in the
    store (``Authorizer``).  A bad issuer setting raises ``IssuerConfigError`` here, before anything listens.
    """
    authorizer = Authorizer(service.store, TokenValidator.from_settings(), closed=closed)
    query_log = QueryLog(service.store)
    azure = AzureRuntime(service, authorizer, query_log)
    qnamaker = QnAMakerRuntime(service, authorizer, query_log)
    refresher = Refresher(service)
    # a train (a minute of CPU), a vector store's files (a 20,000-chunk file embeds for minutes) and the jobs that
    # embed a whole file or source each run on a worker of their own: edits and deploys queued behind any of them
    # waited as long (a one-QnA edit 154 s behind another project's 1,200-QnA import); the bulk jobs keep each
    # project's order with the edits and deploys (``kb.jobs``)
    jobs = JobRunner(service.store, {**Authoring(service).handlers(), "refresh": refresher.handle,
                                     "train": Trainer(service).handle},
                     lanes=(frozenset({"train"}), frozenset({VECTOR_STORE_FILES})), in_order=(BULK_KINDS,))
    refreshes = RefreshScheduler(refresher, jobs)  # one per process: URL sources due to refresh become jobs
    jobs.recover()  # fail the jobs of workers that died; queued ones wait for the worker started below
    authoring = AzureAuthoring(service, authorizer, jobs)
    tools = Tools(service, authorizer)
    stores_core = VectorStores(service, jobs)
    openai = OpenAIRoutes(service, authorizer, get_completer(service.embedder.embed),
                          on_file_deleted=stores_core.detach_everywhere)
    vector_stores = VectorStoreRoutes(stores_core, authorizer)
    embeddings = EmbeddingRoutes(Embeddings(service.embedder), authorizer)
    mcp = mcp_app(service, authorizer)
    native = NativeRoutes(service, authorizer, jobs, query_log)

    async def health(_: Request) -> Response:  # and which model this server embeds with (OPENQNA_EMBEDDER)
        return JSONResponse({"status": "ok", "version": __version__, "embedder": service.embedder.name,
                             "model": spec_of(service.embedder)})

    async def ready(_: Request) -> Response:
        """Readiness, for a load balancer: 200 while the store answers a read, else 503 with why (``/healthz`` says
        only that the process is up, which it stays while a PostgreSQL store is gone)."""
        try:
            await anyio.to_thread.run_sync(service.store.has_keys)
        except Exception as exc:  # StoreUnavailable says why; anything else is the store failing too
            reason = exc.message if isinstance(exc, OpenQnAError) else f"the store did not answer ({type(exc).__name__})"
            return JSONResponse({"status": "unavailable", "reason": reason}, status_code=503,
                                headers={"Retry-After": "1"})
        return JSONResponse({"status": "ready", "version": __version__})

    async def not_found(request: Request, exc: HTTPException) -> Response:
        if request.url.path.startswith("/v1/"):  # the OpenAI surface answers in its own dialect
            return openai_error(exc.status_code, f"Invalid URL ({request.method} {request.url.path})")
        if is_qnamaker_path(request.url.path):  # QnA Maker bots log this envelope's message
            code = "NotFound" if exc.status_code == 404 else "BadArgument"
            return qnamaker_error(exc.status_code, code, f"No route for {request.method} {request.url.path}; the "
                                  "runtime serves POST .../knowledgebases/{kbId}/generateAnswer and .../train.")
        if request.url.path.startswith(("/tools/", "/get_related_")):  # the tools' snake_case codes, not Azure's
            return error(request.url.path, exc.status_code, "", f"No route for {request.method} {request.url.path}; "
                         "the tools are GET /get_related_{kb}, /tools/{kb}/search and /tools/openapi.json.")
        if exc.status_code == 405:
            return azure_error(405, "InvalidRequest", f"{request.method} is not allowed on {request.url.path}.")
        return azure_error(exc.status_code, "NotFound", f"No route for {request.method} {request.url.path}.")

    async def disconnected(request: Request, exc: ClientDisconnect) -> Response:
        """A client that hangs up before its body has arrived is no server error: one line at debug level (a
        traceback per disconnect, written on the event loop, once let 20 such clients stall the server for 12 s)."""
        log.debug("client left before its body arrived: %s %s", request.method, request.url.path)
        return Response(status_code=400)

    def error(path: str, status: int, code: str, message: str) -> Response:
        """An error in the dialect of the surface that serves ``path``: the clients read their own envelope whatever
        the status."""
        if path.startswith("/v1/"):
            return openai_error(status, message, kind="server_error" if status >= 500 else "invalid_request_error")
        if path.startswith(("/tools/", "/get_related_")):
            return tools_error(status, STATUS_CODES.get(status, "invalid_request"), message)
        if path == "/mcp":
            return JSONResponse({"jsonrpc": "2.0", "id": None, "error": {"code": -32603, "message": message}},
                                status_code=status)
        if is_qnamaker_path(path):  # QnA Maker's codes: a bot's log shows them
            return qnamaker_error(status, qnamaker_code(status), message)
        return azure_error(status, code, message)

    def refused(path: str, exc: OpenQnAError) -> Response:
        """An ``OpenQnAError`` no route caught (the store lost while a key was checked: ``StoreUnavailable``) is no
        crash: its own status and message, one line in the log and no traceback; none for the store being
        unreachable, which the store logs once when it is lost and once when it is back (a line per request flooded
        the log: 300 lines for 200 requests)."""
        if not isinstance(exc, StoreUnavailable):
            log.warning("%s: %s", path, exc.message)
        return error(path, exc.status, exc.code, exc.message)

    async def crashed(request: Request, exc: Exception) -> Response:
        """A 500 in the caller's dialect too."""
        if isinstance(exc, OpenQnAError):
            return refused(request.url.path, exc)
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return error(request.url.path, 500, "InternalServerError", "The server failed to handle the request; see its log.")

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette):
        jobs.start()  # every process claims queued jobs, whichever process accepted them
        refreshes.start()
        async with mcp.lifespan():  # the MCP session manager must run while requests arrive
            yield
        refreshes.shutdown()
        jobs.shutdown()

    routes = [Route("/healthz", health), Route("/readyz", ready), *azure.routes(), *qnamaker.routes(), *authoring.routes(), *tools.routes(),
              *openai.routes(), *vector_stores.routes(), *embeddings.routes(), *mcp.routes(), *native.routes(),
              *console_routes()]
    app = Starlette(routes=routes,
                    exception_handlers={HTTPException: not_found, ClientDisconnect: disconnected, Exception: crashed},
                    middleware=[*links.host_middleware(), Middleware(links.RedirectsToBaseUrl), Middleware(RateLimits),
                                Middleware(ChecksOffLoop, authorizer=authorizer, refused=refused)],
                    lifespan=lifespan)
    app.state.jobs = jobs
    app.state.refreshes = refreshes
    return app
