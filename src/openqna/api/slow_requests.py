"""A cap on the slow requests of one client address (issue 40).

The read deadlines (``api.deadlines``) bound how long one connection may take to send its request, not how many
connections one client holds meanwhile: a slowloris opens as many as it likes, each a socket and a file descriptor
for up to a deadline, and opens the next one as each is closed.  A request is *slow* once it has been arriving for
``SLOW_AFTER`` seconds (from its connection, or its first byte on a kept-alive connection, to the last byte of its
body); a client on a working network sends a question's request in milliseconds, so a burst of quick clients from
one address is never counted.  One address may have ``OPENQNA_SLOW_REQUESTS_PER_ADDRESS`` slow requests at once:
a request that grows slow beyond that, and every new connection from the address while it is at the cap, is
answered 503 with ``Retry-After`` and closed.  Refusing the new connections, rather than shedding old slow ones to
make room, is what bounds the sockets: a slowloris that reopens each socket at once would otherwise hold as many as
before, each for its first ``SLOW_AFTER`` seconds.  The price is that other clients at that address are refused
while it is at the cap; clients at other addresses are not.

One address may be many clients: behind a NAT, or a reverse proxy.  Connections from ``OPENQNA_TRUSTED_PROXIES`` are
not counted (``links.is_trusted_proxy``): their clients' slow requests are the proxy's to bound (nginx buffers a
request before passing it on, and has its own timeouts and ``limit_conn``); a cap of 0 turns the cap off.
"""

from __future__ import annotations

from weakref import WeakKeyDictionary

SLOW_AFTER = 1.0
RETRY_AFTER = 10  # seconds: by then each slow request that holds the cap has arrived or met its header deadline
# A refused connection's bytes are read and dropped for up to this long before it closes: closing a socket with
# unread bytes resets it, and the client would see the reset instead of the 503.
LINGER = 1.0

_REFUSAL = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
            b"retry-after: %d\r\nconnection: close\r\ncontent-length: %d\r\n\r\n%s")
_MESSAGE = b"Too many slow requests from this address; try again later."
REFUSAL = _REFUSAL % (RETRY_AFTER, len(_MESSAGE), _MESSAGE)


class SlowRequests:
    """How many slow requests each client address has now."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}

    def full(self, address: str, cap: int) -> bool:
        return self._counts.get(address, 0) >= cap

    def add(self, address: str) -> None:
        self._counts[address] = self._counts.get(address, 0) + 1

    def remove(self, address: str) -> None:
        """One of ``address``'s slow requests has arrived, or its connection is gone."""
        left = self._counts[address] - 1
        if left:
            self._counts[address] = left
        else:
            del self._counts[address]


_LEDGERS: WeakKeyDictionary[object, SlowRequests] = WeakKeyDictionary()


def ledger(server_state: object) -> SlowRequests:
    """The slow requests of one uvicorn server (keyed by its ``ServerState``, which every connection of that server
    shares), so that two servers in one process, as in the tests, count apart."""
    found = _LEDGERS.get(server_state)
    if found is None:
        found = _LEDGERS[server_state] = SlowRequests()
    return found
