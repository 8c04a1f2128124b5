"""Requests per second per caller (``OPENQNA_RATE_LIMIT``): a token bucket each, answered 429 when empty.

Azure's service caps every resource's requests ("10 text records per second for both management APIs and
prediction APIs") and answers past it with 429 and ``Retry-After``; a server exposed to bots, GPT Actions and agents
needs the same guard, or one busy or buggy caller takes both cores from everyone else.  Off by default (0).

* **Who** is a caller: the credential it sends (an API key or a bearer token, told apart by a hash of it, never
  kept), else its address (behind ``OPENQNA_TRUSTED_PROXIES``, the forwarded one).  A request with a credential
  also takes a token from its address's bucket, which holds ``ADDRESS_SHARE`` times as many: a wrong key was a
  caller of its own, so a flood sending a different wrong key each time was never throttled (25 requests at a
  limit of 5 a second, 25 401s and no 429); a gateway sending many users' keys from one address still gets that
  many times one key's rate.
* **How much**: ``OPENQNA_RATE_LIMIT`` requests a second on average, with bursts of ``OPENQNA_RATE_BURST`` (0: twice
  the rate, at least 1): a bucket of that many tokens, refilled at the rate; a request takes one.
* **What is not counted**: ``/healthz``, ``/readyz`` and the console's own files; the console's API calls count as its key's.
* **The answer** is each surface's own 429 (``refusal``) with ``Retry-After`` in whole seconds (and OpenAI's
  ``retry-after-ms``): the Azure SDK's and the ``openai`` client's retry policies wait that long and try again, so
  their callers see a slower answer, not an error.  QnA Maker bots (botbuilder-python reads ``answers`` whatever
  the status) do not retry.
* **Where**: in each process, so N servers behind one address allow N times the rate; the buckets are held for the
  ``MAX_CALLERS`` callers seen last (an older one starts again with a full bucket).
"""

from __future__ import annotations

import collections
import hashlib
import math
import threading
import time
from collections.abc import Callable

from starlette.datastructures import Headers
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from openqna import settings
from openqna.api.credentials import secret_from_headers
from openqna.api.errors import azure_error, qnamaker_code, qnamaker_error
from openqna.api.qnamaker import is_qnamaker_path

MAX_CALLERS = 50_000
ADDRESS_SHARE = 10  # an address's bucket, for requests with a credential, is this many times a caller's


def counted(path: str) -> bool:
    """Whether a request to ``path`` takes a token: not ``/healthz``, ``/readyz`` nor the console's page and files."""
    return path not in ("/healthz", "/readyz", "/") and not path.startswith("/console/")


class Buckets:
    """One token bucket per caller: ``take`` spends a token, or says how long until one is there."""

    def __init__(self, rate: float, burst: float, clock: Callable[[], float] = time.monotonic,
                 most: int = MAX_CALLERS):
        self.rate, self.burst, self.clock, self.most = rate, burst, clock, most
        self._buckets: collections.OrderedDict[str, tuple[float, float]] = collections.OrderedDict()
        self._lock = threading.Lock()

    def take(self, caller: str) -> float:
        """0.0 when the request may go on (a token spent), else the seconds until the caller has a token."""
        now = self.clock()
        with self._lock:
            tokens, then = self._buckets.pop(caller, (self.burst, now))
            tokens = min(self.burst, tokens + (now - then) * self.rate)
            wait = 0.0 if tokens >= 1.0 else (1.0 - tokens) / self.rate
            self._buckets[caller] = (tokens - 1.0 if not wait else tokens, now)
            if len(self._buckets) > self.most:
                self._buckets.popitem(last=False)  # the caller seen longest ago
        return wait


def caller_of(scope: Scope) -> str:
    """The credential's hash, else the address."""
    secret = secret_from_headers(Headers(scope=scope))
    if secret:
        return "key:" + hashlib.sha256(secret.encode()).hexdigest()[:32]
    return address_of(scope)


def address_of(scope: Scope) -> str:
    client = scope.get("client")
    return "address:" + (client[0] if client else "")


def refusal(path: str, wait: float, rate: float) -> Response:
    """The caller's surface's own 429, with when to try again."""
    seconds = max(1, math.ceil(wait))
    message = (f"Rate limit is exceeded: this server allows {rate:g} requests a second per caller "
               f"(OPENQNA_RATE_LIMIT). Try again in {seconds} second{'s' if seconds > 1 else ''}.")
    headers = {"Retry-After": str(seconds)}
    response: Response
    if path.startswith("/v1/"):
        response = JSONResponse({"error": {"message": message, "type": "requests", "param": None,
                                           "code": "rate_limit_exceeded"}}, status_code=429)
        headers["retry-after-ms"] = str(max(1, math.ceil(wait * 1000)))
    elif path.startswith(("/tools/", "/get_related_")):
        response = JSONResponse({"error": {"code": "rate_limited", "message": message}}, status_code=429)
    elif path == "/mcp" or path.startswith("/mcp/"):
        response = JSONResponse({"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": message}},
                                status_code=429)
    elif is_qnamaker_path(path):
        response = qnamaker_error(429, qnamaker_code(429), message)
    else:
        response = azure_error(429, "TooManyRequests", message)
    response.headers.update(headers)
    return response


class RateLimits:
    """ASGI middleware: each caller's requests past its bucket are answered 429 before anything else is done."""

    def __init__(self, app: ASGIApp, rate: float | None = None, burst: float | None = None,
                 counted: Callable[[str], bool] = counted):
        self.app = app
        self.rate = settings.rate_limit() if rate is None else rate
        burst = settings.rate_burst() if burst is None else burst
        # a bucket holds at least one token: one smaller could never hold the token a request takes
        self.buckets = Buckets(self.rate, max(1.0, burst or 2 * self.rate)) if self.rate > 0 else None
        self.addresses = Buckets(ADDRESS_SHARE * self.rate, ADDRESS_SHARE * max(1.0, burst or 2 * self.rate)) \
            if self.rate > 0 else None
        self.counted = counted

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.buckets is not None and scope["type"] == "http" and self.counted(scope["path"]):
            caller = caller_of(scope)
            wait = self.buckets.take(caller)
            if not wait and self.addresses is not None and caller.startswith("key:"):
                wait = self.addresses.take(address_of(scope))
            if wait:
                await refusal(scope["path"], wait, self.rate)(scope, receive, send)
                return
        await self.app(scope, receive, send)
