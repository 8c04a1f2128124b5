"""Read deadlines for HTTP connections: a client must send its headers, then its body, in bounded time (issue 40).

uvicorn closes an idle keep-alive connection, but a connection that has begun a request may take for ever: a
client that trickles its headers a byte at a time (slowloris), or sends half a body and stops, holds a socket and
a request task for as long as it likes, and a few hundred of them starve everyone else.  ``DeadlineProtocol`` is
uvicorn's own httptools protocol with two timers: from the connection's start (and each request's first byte) to
the end of its headers, ``OPENQNA_HEADER_TIMEOUT`` seconds; from the end of the headers to the end of the body,
``OPENQNA_BODY_TIMEOUT``.  A connection past either is closed; a request waiting for that body sees the client
leave (``ClientDisconnect``, one debug line).  A third timer marks the request slow after ``SLOW_AFTER`` seconds,
and an address may have ``OPENQNA_SLOW_REQUESTS_PER_ADDRESS`` slow requests at once; beyond that, requests and new
connections from it are refused (``api.slow_requests``): the deadlines bound how long a connection lasts, the cap
how many one client holds.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from openqna import settings
from openqna.api import links, slow_requests

log = logging.getLogger("openqna")


class DeadlineProtocol(HttpToolsProtocol):
    """``HttpToolsProtocol`` with a header deadline, a body deadline and a cap on slow requests (see the module
    docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.header_seconds = settings.header_timeout()
        self.body_seconds = settings.body_timeout()
        self.slow_cap = settings.slow_requests_per_address()
        self._deadline: asyncio.TimerHandle | None = None
        self._slow_clock: asyncio.TimerHandle | None = None
        self._capped_address: str | None = None  # the client's address, when the cap applies to it
        self._counted = False  # whether this connection's request is counted as slow
        self._refused = False
        self._slow = slow_requests.ledger(self.server_state)

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

    def _watch(self) -> None:
        """Start the request's slow clock, unless it runs already (a connection's first request is timed from the
        connection) or the cap does not apply to this client."""
        if self._capped_address is not None and self._slow_clock is None and not self._counted:
            self._slow_clock = self.loop.call_later(slow_requests.SLOW_AFTER, self._became_slow)

    def _unwatch(self) -> None:
        if self._slow_clock is not None:
            self._slow_clock.cancel()
            self._slow_clock = None
        if self._counted and self._capped_address is not None:
            self._slow.remove(self._capped_address)
        self._counted = False

    def _became_slow(self) -> None:
        self._slow_clock = None
        if self._capped_address is None or self._refused or self.transport.is_closing():
            return
        if self._slow.full(self._capped_address, self.slow_cap):
            self._refuse()
        else:
            self._slow.add(self._capped_address)
            self._counted = True

    def _refuse(self) -> None:
        """Answer 503 with ``Retry-After`` (unless a response is under way), end the request as the client leaving,
        and close once the client has read the answer (``slow_requests.LINGER``): its address has too many slow
        requests."""
        self._refused = True
        cycle = self.cycle
        answering = cycle is not None and cycle.response_started and not cycle.response_complete
        if cycle is not None and not cycle.response_complete:  # what uvicorn does when a client leaves
            cycle.disconnected = True
            cycle.message_event.set()
        if not answering:
            self.transport.write(slow_requests.REFUSAL)
        self.flow.resume_reading()
        self._arm(slow_requests.LINGER)
        log.warning("refused a request from %s: it has %d slow requests (OPENQNA_SLOW_REQUESTS_PER_ADDRESS)",
                    self._capped_address, self.slow_cap)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(self.header_seconds)
        if self.slow_cap and self.client is not None and not links.is_trusted_proxy(self.client[0]):
            self._capped_address = self.client[0]
            if self._slow.full(self._capped_address, self.slow_cap):
                self._refuse()
                return
        self._watch()

    def data_received(self, data: bytes) -> None:
        if not self._refused:  # a refused connection's bytes are read and dropped until it closes
            super().data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._unwatch()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm(self.header_seconds)
        self._watch()

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._arm(self.body_seconds)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._disarm()
        self._unwatch()
