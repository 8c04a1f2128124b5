"""The URL clients reach this server at, for the links it builds, and the proxy and host settings behind it.

``Operation-Location``, ``nextLink``, an export's signed ``resultUrl`` and the tools' OpenAPI ``servers`` are links a
client follows, so they must never come from what a client claims: with ``Host: evil.example`` a signed export link
pointed at ``http://evil.example/...&sig=...``.  A link is built from ``OPENQNA_PUBLIC_URL`` (behind a TLS proxy);
else, when ``OPENQNA_ALLOWED_HOSTS`` checks every request's ``Host`` (``TrustedHostMiddleware``), from the request;
else from the address the connection was accepted on (the server's own socket address, ``scope["server"]``).
``X-Forwarded-For`` and ``X-Forwarded-Proto`` are believed only from ``OPENQNA_TRUSTED_PROXIES`` (``uvicorn_options``);
``X-Forwarded-Host`` and ``X-Forwarded-Prefix`` from no one (DESIGN decision 9: links come from configuration), so
behind a proxy ``OPENQNA_PUBLIC_URL`` carries the host and the path prefix.
"""

from __future__ import annotations

import ipaddress
from typing import Any
from urllib.parse import urlsplit

from starlette.datastructures import MutableHeaders
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from openqna import settings


def _listed(raw: str) -> list[str]:
    return [part.strip() for part in raw.split(",") if part.strip()]


def base_url(request: Request) -> str:
    """Where links to this server point (no trailing slash); see the module docstring."""
    if public := settings.public_url():
        return public.rstrip("/")
    if _listed(settings.allowed_hosts()):
        return str(request.base_url).rstrip("/")
    scheme = request.scope.get("scheme", "http")
    server = request.scope.get("server")
    if not server:
        return f"{scheme}://localhost"
    host, port = server[0], server[1]
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    default = (scheme, port) in (("http", 80), ("https", 443)) or port is None
    return f"{scheme}://{host}" if default else f"{scheme}://{host}:{port}"


class RedirectsToBaseUrl:
    """ASGI middleware: a redirect's ``Location`` (Starlette's router adds or drops a path's trailing slash with a 307)
    points at ``base_url``, not at the scheme and host the request claimed (``Host: evil.example`` was sent back)."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_located(message: Message) -> None:
            if message["type"] == "http.response.start" and 300 <= message["status"] < 400:
                headers = MutableHeaders(scope=message)
                if location := headers.get("location"):
                    parts = urlsplit(location)
                    headers["location"] = base_url(Request(scope)) + parts.path + (f"?{parts.query}" if parts.query
                                                                                   else "")
            await send(message)

        await self.app(scope, receive, send_located)


def host_middleware() -> list[Middleware]:
    """Starlette's ``TrustedHostMiddleware`` over ``OPENQNA_ALLOWED_HOSTS`` (none when it is empty)."""
    hosts = _listed(settings.allowed_hosts())
    return [Middleware(TrustedHostMiddleware, allowed_hosts=hosts, www_redirect=False)] if hosts else []


def uvicorn_options() -> dict[str, Any]:
    """uvicorn's proxy settings: forwarded headers only from ``OPENQNA_TRUSTED_PROXIES`` (uvicorn's own default believes
    any process on the machine, 127.0.0.1)."""
    proxies = _listed(settings.trusted_proxies())
    return {"proxy_headers": bool(proxies), "forwarded_allow_ips": proxies or ["127.0.0.1"]}


def is_trusted_proxy(address: str) -> bool:
    """Whether a connection from ``address`` comes from one of ``OPENQNA_TRUSTED_PROXIES`` (addresses, CIDR ranges or
    ``*``, as uvicorn reads the list)."""
    for entry in _listed(settings.trusted_proxies()):
        if entry in ("*", address):
            return True
        try:
            if ipaddress.ip_address(address) in ipaddress.ip_network(entry, strict=False):
                return True
        except ValueError:  # a name that is not an address (a Unix socket), compared as it is above
            continue
    return False
