"""Nothing slow on the event loop (issue 40): a client that hangs up is no error, and logs are written elsewhere."""

from __future__ import annotations

import io
import logging
import select
import socket
import threading
import time

import httpx

from conftest import LiveServer
from openqna.api import slow_requests
from openqna.ranking import typos
from openqna.records import QnA
from openqna.server import log_off_loop


class Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_a_client_that_hangs_up_mid_body_is_no_error(service):
    """Half a body, then the socket closes: before, each was a 500 with two tracebacks written on the event loop
    (20 of them froze /healthz for 12 s); now one debug line, and the server answers at once."""
    service.create_project("kb")
    service.upsert("kb", [QnA(["How do I start the server?"], "Run make serve.")])
    service.deploy("kb", "production")
    capture = Capture()
    loggers = [logging.getLogger(name) for name in ("openqna", "uvicorn.error")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.addHandler(capture)
        logger.setLevel(logging.DEBUG)
    try:
        with LiveServer(service) as live:
            head = (f"POST /language/:query-knowledgebases?projectName=kb&deploymentName=production"
                    f"&api-version=2023-04-01 HTTP/1.1\r\nHost: 127.0.0.1:{live.port}\r\n"
                    "Ocp-Apim-Subscription-Key: k\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
            for _ in range(20):
                with socket.create_connection(("127.0.0.1", live.port), timeout=5) as sock:
                    sock.sendall(head.encode() + b'{"question": "how do')
            assert httpx.get(live.url + "/healthz", timeout=5).status_code == 200
            answered = httpx.post(live.url + "/language/:query-knowledgebases",
                                  params={"projectName": "kb", "deploymentName": "production",
                                          "api-version": "2023-04-01"},
                                  json={"question": "How do I start the server?"}, timeout=30)
            assert answered.status_code == 200
    finally:
        for logger, level in zip(loggers, levels):
            logger.removeHandler(capture)
            logger.setLevel(level)
    errors = [r for r in capture.records if r.levelno >= logging.WARNING]
    assert not errors, [r.getMessage() for r in errors]
    assert any("client left" in r.getMessage() for r in capture.records)


def test_tracebacks_are_formatted_off_the_logging_thread():
    """``log_off_loop`` leaves the caller only a queue put: the traceback is formatted on the listener's thread."""
    formatted_on: list[str] = []

    class Noting(logging.Formatter):
        def formatException(self, ei) -> str:  # noqa: N802 (logging's name)
            formatted_on.append(threading.current_thread().name)
            return super().formatException(ei)

    logger = logging.getLogger("openqna.test_event_loop")
    handler = logging.StreamHandler(io.StringIO())
    handler.setFormatter(Noting())
    logger.addHandler(handler)
    logger.propagate = False
    listeners = log_off_loop((logger.name,))
    try:
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            logger.exception("failed")
    finally:
        for listener in listeners:
            listener.stop()
        for h in list(logger.handlers):
            logger.removeHandler(h)
    assert formatted_on and threading.current_thread().name not in formatted_on
    assert "RuntimeError: boom" in handler.stream.getvalue()


def test_a_client_that_trickles_is_cut_off(service, monkeypatch):
    """Headers that never end, and a body that stops halfway, hold a connection only until their deadline
    (``api.deadlines``; 1 s here): the server closes the socket, and answers others meanwhile."""
    monkeypatch.setenv("OPENQNA_HEADER_TIMEOUT", "1")
    monkeypatch.setenv("OPENQNA_BODY_TIMEOUT", "1")
    with LiveServer(service) as live:
        silent = socket.create_connection(("127.0.0.1", live.port), timeout=10)  # connects, says nothing
        headers = socket.create_connection(("127.0.0.1", live.port), timeout=10)
        headers.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # no blank line: the headers never end
        body = socket.create_connection(("127.0.0.1", live.port), timeout=10)
        body.sendall(b"POST /language/:query-text?api-version=2023-04-01 HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 500\r\n\r\n{\"question\":")
        assert httpx.get(live.url + "/healthz", timeout=5).status_code == 200
        for sock in (silent, headers, body):
            started = time.monotonic()
            received = b""
            while chunk := sock.recv(4096):  # until the server closes the connection
                received += chunk
            assert time.monotonic() - started < 5
            assert b" 200 " not in received
            sock.close()


def test_one_address_holds_only_so_many_slow_requests(service, monkeypatch):
    """An address may have ``OPENQNA_SLOW_REQUESTS_PER_ADDRESS`` (3 here) slow requests at once
    (``api.slow_requests``): the requests that grow slow beyond that, and its new connections while it is at the cap,
    are answered 503 with ``Retry-After`` and closed; another address is answered as usual, and so is a trusted
    proxy.  Without the cap all eight trickling sockets would be held until their header deadline (10 s)."""
    monkeypatch.setenv("OPENQNA_SLOW_REQUESTS_PER_ADDRESS", "3")

    def refused(sock: socket.socket) -> bool:
        received = b""
        while chunk := sock.recv(4096):  # the answer, then the server closes the connection
            received += chunk
        return received.startswith(b"HTTP/1.1 503 ") and b"\r\nretry-after: 10\r\n" in received.lower()

    with LiveServer(service) as live:
        socks = []
        for _ in range(8):  # headers that never end
            socks.append(socket.create_connection(("127.0.0.1", live.port), timeout=10))
            socks[-1].sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        time.sleep(slow_requests.SLOW_AFTER + 0.5)
        readable, _, _ = select.select(socks, [], [], 0.5)
        assert len(readable) == 5 and all(refused(sock) for sock in readable)  # three held, five refused
        assert select.select([s for s in socks if s not in readable], [], [], 0.5)[0] == []
        with socket.create_connection(("127.0.0.1", live.port), timeout=10) as sock:
            assert refused(sock)  # the address is at its cap: a new connection is refused at once
        with httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2")) as elsewhere:
            assert elsewhere.get(live.url + "/healthz", timeout=5).status_code == 200
        monkeypatch.setenv("OPENQNA_TRUSTED_PROXIES", "127.0.0.1")
        assert httpx.get(live.url + "/healthz", timeout=5).status_code == 200
        for sock in socks:
            sock.close()


def test_the_typo_dictionary_is_read_before_the_first_question(service):
    """``Service.warm`` (``openqna serve``, before it listens) reads the typo dictionary: its tokenizer holds the
    interpreter lock while it loads, and the threads of a first burst of 100 questions each loading it at once kept
    the event loop from answering /healthz for 0.7-1.9 s."""
    typos.dictionary.cache_clear()
    service.warm()
    assert typos.dictionary.cache_info().currsize == 1
