"""Read deadlines for HTTP connections: a client must send its headers, then its body, in bounded time (issue 40).

uvicorn closes an idle keep-alive connection, but a connection that has begun a request may take for ever: a
client that trickles its headers a byte at a time (slowloris), or sends half a body and stops, holds a socket and
a request task for as long as it likes, and a few hundred of them starve everyone else.  ``DeadlineProtocol`` is
uvicorn's own httptools protocol with two timers: from the connection's start (and each request's first byte) to
the end of its headers, ``OPENQNA_HEADER_TIMEOUT`` seconds; from the end of the headers to the end of the body,
``OPENQNA_BODY_TIMEOUT``.  A connection past either is closed; a request waiting for that body sees the client
leave (``ClientDisconnect``, one debug line).
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from openqna import settings


class DeadlineProtocol(HttpToolsProtocol):
    """``HttpToolsProtocol`` with a header deadline and a body deadline (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.header_seconds = settings.header_timeout()
        self.body_seconds = settings.body_timeout()
        self._deadline: asyncio.TimerHandle | None = None

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(self.header_seconds)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm(self.header_seconds)

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._arm(self.body_seconds)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._disarm()
