"""MCP transports for the knowledge-base tools (``mcp_tools``): stdio and streamable HTTP.

* ``run_stdio(service)`` serves one local client over stdin/stdout (``openqna mcp``, or
  ``python -m openqna.api.tools.mcp --data DIR``); the process can read the data directory, so it sees
  every knowledge base.
* ``mcp_app(service, authorizer)`` is an ASGI app for streamable HTTP that ``server.py`` routes at
  ``/mcp``. It runs *stateless* with JSON responses: every POST carries one JSON-RPC message and gets
  one JSON answer, no session lives between requests, so any replica can answer any request. Every
  request needs a valid key (``Authorization: Bearer <key>`` or ``api-key: <key>``) or bearer token
  once keys or token issuers exist, else it gets a 401 before the SDK sees it.

The SDK's session manager owns a task group that must be running while requests arrive: enter
``app.lifespan()`` in the enclosing Starlette app's lifespan (a mounted app's own lifespan never
runs). Wiring in ``server.py``::

    mcp = mcp_app(service, authorizer)
    routes = [..., *mcp.routes()]            # Route("/mcp", endpoint=mcp): every method

    @contextlib.asynccontextmanager
    async def lifespan(_):
        async with mcp.lifespan():
            yield
        ...
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager

from mcp.server.transport_security import TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from openqna.api import json_body
from openqna.api.credentials import secret_from_headers
from openqna.api.tools.mcp_tools import build_server
from openqna.auth.keys import Authorizer, Denied
from openqna.formats.limits import LIMITS
from openqna.kb.catalog import LIVE, embedded_dir, no_store_message, open_data, store_exists
from openqna.kb.service import Service
from openqna.records import OpenQnAError, StoreUnavailable

PATH = "/mcp"
log = logging.getLogger("openqna.api.tools.mcp")
MISSING = ("An API key is required: send 'Authorization: Bearer <key>' or 'api-key: <key>' (or a bearer token "
           "from a trusted identity provider).")


def run_stdio(service: Service, *, deployment: str = LIVE) -> None:
    """Serve the tools over stdin/stdout until the client closes stdin."""
    with contextlib.redirect_stdout(sys.stderr):  # stdout is the wire: nothing else may print there
        service.embedder.embed(["warm up"])
    build_server(service, deployment=deployment).run("stdio")


class McpHttp:
    """The streamable-HTTP endpoint as an ASGI app, behind the API-key check of the other surfaces."""

    def __init__(self, service: Service, authorizer: Authorizer, *, deployment: str = LIVE,
                 transport_security: TransportSecuritySettings | None = None):
        self.authorizer = authorizer
        server = build_server(service, authorizer=authorizer, deployment=deployment)
        # Builds the session manager; the Starlette app it returns is not used, the parent app routes here.
        # The SDK guards loopback hosts against DNS rebinding by default, which would refuse every request
        # that reaches the server under its real host name; API keys protect this endpoint instead.
        server.streamable_http_app(
            stateless_http=True, json_response=True,
            transport_security=transport_security or TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        self.session_manager = server.session_manager

    def lifespan(self) -> AbstractAsyncContextManager[None]:
        """Runs the SDK's task group; enter it once, in the enclosing app's lifespan."""
        return self.session_manager.run()

    def routes(self, path: str = PATH) -> list[Route]:
        return [Route(path, endpoint=self)]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            # the body first, so that every refusal below answers with the request's id, as JSON-RPC asks
            body = await _read_body(receive) if scope["method"] == "POST" else b""
            request_id = request_id_of(body)
            try:
                _, denied = self.authorizer.check(secret_from_headers(Headers(scope=scope)))
            except OpenQnAError as exc:  # the store is unreachable (StoreUnavailable): its status, MCP's envelope
                if not isinstance(exc, StoreUnavailable):  # which the store logs once, when it goes and comes back
                    log.warning("%s: %s", PATH, exc.message)
                await _error(exc.status, -32603, exc.message, request_id)(scope, receive, send)
                return
            if denied:
                await _unauthorized(denied, request_id)(scope, receive, send)
                return
            if scope["method"] in ("GET", "DELETE"):
                # Stateless JSON: no SSE stream to open and no session to end.  The streamable-HTTP spec
                # lets a server answer both with 405; the SDK would hold a GET open forever instead.
                await _no_stream()(scope, receive, send)
                return
            if scope["method"] == "POST":
                if len(body) > LIMITS.body_bytes:
                    await _invalid(413, f"The request body is larger than {LIMITS.body_bytes} bytes.")(
                        scope, receive, send)
                    return
                problem = bad_request_id(body)
                if problem:
                    await _invalid(400, problem)(scope, receive, send)
                    return
                receive = _replay(body)
        await self.session_manager.handle_request(scope, receive, send)


def mcp_app(service: Service, authorizer: Authorizer, *, deployment: str = LIVE,
            transport_security: TransportSecuritySettings | None = None) -> McpHttp:
    """The ASGI app for ``/mcp``; see the module docstring for mounting it and its lifespan."""
    return McpHttp(service, authorizer, deployment=deployment, transport_security=transport_security)


def bad_request_id(body: bytes) -> str | None:
    """Why a JSON-RPC message's ``id`` is invalid (an object, array, boolean or fraction), or None.

    JSON-RPC 2.0 allows a string, a number or null, and MCP forbids null; the SDK takes a message whose
    id it cannot read for a notification and answers 202, so the caller waits for a reply that never
    comes.  A body that is not JSON is left to the SDK, which answers -32700.
    """
    try:
        message = json_body.parse(body)
    except json_body.BadBody:
        return None
    if not isinstance(message, dict) or "id" not in message:
        return None
    request_id = message["id"]
    if isinstance(request_id, str) or (isinstance(request_id, int) and not isinstance(request_id, bool)):
        return None
    return (f"The request 'id' must be a string or an integer; got {json.dumps(request_id)[:100]}. "
            "Leave 'id' out to send a notification.")


def request_id_of(body: bytes) -> str | int | None:
    """The id of the JSON-RPC request in ``body``, when it has a valid one (None: a notification, not JSON, or an
    id ``bad_request_id`` refuses)."""
    try:
        message = json_body.parse(body)
    except json_body.BadBody:
        return None
    request_id = message.get("id") if isinstance(message, dict) else None
    if isinstance(request_id, str) or (isinstance(request_id, int) and not isinstance(request_id, bool)):
        return request_id
    return None


async def _read_body(receive: Receive) -> bytes:
    """The whole request body, or the first bytes past the limit (enough to refuse it)."""
    chunks, size = [], 0
    while True:
        message = await receive()
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if not message.get("more_body") or size > LIMITS.body_bytes:
            return b"".join(chunks)


def _replay(body: bytes) -> Receive:
    """A receive channel that hands the SDK the body already read, then waits for the disconnect."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return {"type": "http.disconnect"}

    return receive


def _invalid(status: int, message: str) -> JSONResponse:
    """JSON-RPC's Invalid Request (-32600); the id could not be read, so it is null."""
    return _error(status, -32600, message, None)


def _error(status: int, code: int, message: str, request_id: str | int | None) -> JSONResponse:
    return JSONResponse({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}},
                        status_code=status)


def _no_stream() -> JSONResponse:
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": (
        "This MCP server is stateless: it offers no event stream (GET) and no sessions to end (DELETE); "
        "POST each JSON-RPC message and read the JSON reply.")}}
    return JSONResponse(body, status_code=405, headers={"Allow": "POST"})


def _unauthorized(denied: Denied, request_id: str | int | None) -> JSONResponse:
    """401 with a JSON-RPC error body (MCP's own dialect) and the challenge RFC 9110 asks for."""
    message = MISSING if denied.missing else f"Access denied: {denied.reason}."
    challenge = 'Bearer realm="openqna", error="invalid_token"' if denied.token else 'Bearer realm="openqna"'
    response = _error(401, -32001, message, request_id)
    response.headers["WWW-Authenticate"] = challenge
    return response


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m openqna.api.tools.mcp --data DIR``: the stdio server without the CLI."""
    from openqna import settings
    from openqna.models.embedder import get_embedder

    parser = argparse.ArgumentParser(prog="python -m openqna.api.tools.mcp", description=main.__doc__)
    parser.add_argument("--data", default=settings.data(), help="directory of the embedded store")
    parser.add_argument("--deployment", default=LIVE, help="deployment the tools query (default: %(default)s)")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        if not store_exists(args.data):  # serving tools over a store made empty here would only ever say "none"
            parser.exit(1, f"error: {no_store_message(embedded_dir(args.data))}\n")
        store = open_data(args.data)
    except OpenQnAError as exc:  # an OPENQNA_STORE that names no store, a PostgreSQL store that cannot be reached
        parser.exit(2, f"error: {exc.message}\n")
    run_stdio(Service(store, get_embedder()), deployment=args.deployment)


if __name__ == "__main__":
    main()
