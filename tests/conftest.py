"""Shared fixtures: the real embedding model (loaded once), real stores, a real HTTP server."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
CHITCHAT = SHARED_DATA / "ms-qna-chitchat" / "qna_chitchat_the_professional.tsv"
SAMPLE_DOCS = SHARED_DATA / "qna-sample-docs"


@pytest.fixture(scope="session")
def embedder():
    from openqna.models.embedder import get_embedder

    return get_embedder("local")


@pytest.fixture
def service(tmp_path, embedder):
    from openqna.kb.service import Service
    from openqna.store.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "data")
    yield Service(store, embedder)
    store.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, proc, log: Path | None = None, seconds: float = 180) -> None:
    """Wait until a started ``openqna serve`` answers /healthz; fail with its log if it exits or never does."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        said = log.read_text()[-3000:] if log is not None and log.exists() else ""
        assert proc.poll() is None, f"openqna serve exited with {proc.returncode}:\n{said}"
        assert time.monotonic() < deadline, f"openqna serve did not answer /healthz in {seconds:.0f} s:\n{said}"
        time.sleep(0.2)


class LiveServer:
    """The real app under uvicorn on a loopback port, in a background thread.

    ``tls`` (a certificate and its key, PEM files) serves https, for clients such as azure-core that
    send bearer tokens only over TLS.
    """

    def __init__(self, service, tls: tuple[Path, Path] | None = None):
        import uvicorn

        from openqna.server import create_app

        self.service = service
        self.port = free_port()
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self.app = create_app(service)
        certfile, keyfile = (str(tls[0]), str(tls[1])) if tls else (None, None)
        config = uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="warning",
                                ssl_certfile=certfile, ssl_keyfile=keyfile)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> "LiveServer":
        self.thread.start()
        deadline = time.time() + 20
        while not self.server.started:
            if time.time() > deadline:
                raise RuntimeError("server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture
def live(service):
    with LiveServer(service) as server:
        yield server


class FileServer:
    """Serves a directory over loopback HTTP (URL sources and fileUri imports)."""

    def __init__(self, directory: Path):
        import functools
        from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

        class Quiet(SimpleHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(directory)))
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> "FileServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()


@pytest.fixture
def files(tmp_path, monkeypatch):
    """A loopback file server that URL sources may fetch from (the operator's allow-list names it)."""
    monkeypatch.setenv("OPENQNA_FETCH_ALLOW", "127.0.0.1/32")
    root = tmp_path / "www"
    root.mkdir()
    with FileServer(root) as server:
        server.root = root
        yield server
