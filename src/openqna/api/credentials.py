"""Reading an API key or bearer token out of a request: every surface accepts its own header (DESIGN decision 9).

Whether the secret is a key or a token, and what its caller may do, is core's business
(``openqna.auth.keys``, ``openqna.auth.bearer``); this module only knows headers, and where a check that may wait
on the network runs (``ChecksOffLoop``).
"""

from __future__ import annotations

from collections.abc import Callable

import anyio.to_thread
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from openqna.auth.keys import Authorizer, Checked
from openqna.records import OpenQnAError


def secret_from_headers(headers) -> str | None:
    """The key or token from any header a supported client sends.

    QnA Maker clients prefix the key with ``EndpointKey `` in ``Authorization`` and, in
    botbuilder-python, in ``Ocp-Apim-Subscription-Key`` too: the prefix is dropped wherever it is, and a key sent
    alone in ``Authorization`` is read as one (docs/surfaces.md says both are accepted).
    ``Authorization: EndpointKey`` wins over the other headers: QnA Maker's runtime read only it, and its legacy
    SDK (azure-cognitiveservices-knowledge-qnamaker) sends the resource's subscription key, another key, beside it.
    """
    auth = headers.get("authorization", "")
    if auth.lower().startswith("endpointkey ") and auth[len("endpointkey "):].strip():
        return auth[len("endpointkey "):].strip()
    for name in ("ocp-apim-subscription-key", "api-key"):
        value = headers.get(name)
        if value and value.strip():
            return _without_scheme(value.strip(), ("endpointkey ",))
    auth = headers.get("authorization", "")
    for scheme in ("bearer ", "endpointkey "):
        if auth.lower().startswith(scheme):
            return auth[len(scheme):].strip()
    if auth.strip() and " " not in auth.strip():  # the key alone, without a scheme (QnA Maker took it so too)
        return auth.strip()
    return None


def _without_scheme(value: str, schemes: tuple[str, ...]) -> str:
    for scheme in schemes:
        if value.lower().startswith(scheme):
            return value[len(scheme):].strip()
    return value


UNCHECKED = frozenset({"/healthz", "/readyz"})  # paths no surface checks a credential on
# paths whose surface answers a check that could not be made itself: MCP's answer carries the request's id, which
# only the surface reads (from the body)
OWN_REFUSALS = frozenset({"/mcp"})


class ChecksOffLoop:
    """ASGI middleware: a credential check that may wait on the network runs on a thread, before routing.

    A bearer token may need its issuer's keys (JWKS, after OpenID discovery) fetched, which takes up
    to the validator's timeout; run on the event loop, that fetch would stall every other request of
    the process.  So such a check (``Authorizer.may_block``) runs here on a worker thread, and its answer
    is what the surface's own ``check`` of the same secret returns (``Authorizer.checked``).  So does a key's
    check in a remote store (PostgreSQL), where a lock or the network can hold the read up; in a local store
    it is one indexed read and stays where the surface makes it.
    """

    def __init__(self, app: ASGIApp, authorizer: Authorizer, refused: Callable[[str, OpenQnAError], Response]):
        """``refused(path, error)``: the answer, in the dialect of ``path``, to a check that could not be made (the
        store unreachable: ``StoreUnavailable``, a 503), since this runs outside every surface's own handling."""
        self.app = app
        self.authorizer = authorizer
        self.refused = refused

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            secret = secret_from_headers(Headers(scope=scope))
            if scope["path"] not in UNCHECKED and self.authorizer.may_block(secret):
                answer: Checked | OpenQnAError
                try:
                    answer = await anyio.to_thread.run_sync(self.authorizer.check, secret)
                except OpenQnAError as exc:
                    if scope["path"] not in OWN_REFUSALS:
                        await self.refused(scope["path"], exc)(scope, receive, send)
                        return
                    answer = exc  # raised by the surface's own check of the secret
                with self.authorizer.checked(secret, answer):
                    await self.app(scope, receive, send)
                return
        await self.app(scope, receive, send)
