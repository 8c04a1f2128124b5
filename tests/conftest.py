"""Shared fixtures: the real embedding model (loaded once), real stores, a real HTTP server."""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
CHITCHAT = SHARED_DATA / "ms-qna-chitchat" / "qna_chitchat_the_professional.tsv"
SAMPLE_DOCS = SHARED_DATA / "qna-sample-docs"

# The tiers, by module (pyproject.toml describes each marker).  `make check` runs every test that
# carries none of them; a test in an unlisted module can carry its own mark (``@pytest.mark.slow``).
TIERS = {
    "test_console": "browser",
    "test_crash": "multiprocess",
    "test_fuzz": "multiprocess",
    "test_soak": "multiprocess",
    "test_cli": "multiprocess",  # every test runs `openqna` commands in processes of their own
    "test_accurate": "slow",
    "test_mpnet": "slow",
    "test_evaluation": "slow",
    "test_connected": "slow",
    "test_connected_processes": "multiprocess",  # `openqna table connect`, and another process holding chdb
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        tier = TIERS.get(item.module.__name__.rpartition(".")[2]) if item.module else None
        if tier:
            item.add_marker(getattr(pytest.mark, tier))


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


class ServeProcess:
    """``openqna serve`` in a process of its own (what ``make serve`` runs), its output in a log file.

    The subprocess mode of the one server the tests start; ``LiveServer`` below is the in-process mode,
    with the same ``url`` and the same use as a context manager.  ``data`` is the data directory
    (``--data``; None leaves it to ``env``'s ``OPENQNA_DATA``); ``args`` are more ``serve`` options.
    Jobs are polled every 0.1 s unless ``env`` says otherwise.  ``stop`` sends ``sig`` (SIGTERM) and
    kills the process if it has not exited in 30 s; ``proc`` is there for tests that kill it themselves.
    """

    def __init__(self, data: Path | None, log: Path, *, env: dict[str, str] | None = None,
                 args: tuple[str, ...] = (), cwd: Path | None = None, seconds: float = 180):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "OPENQNA_JOB_POLL_SECONDS": "0.1", **(env or {})}
        command = [sys.executable, "-m", "openqna.cli", "serve", "--port", str(self.port),
                   *(["--data", str(data)] if data is not None else []), *args]
        with open(log, "a") as out:  # a file, not a pipe nobody drains: a full pipe blocks the server
            self.proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd)
        try:
            wait_healthy(self.url, self.proc, log, seconds)
        except BaseException:
            self.stop()
            raise

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> "ServeProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


JOB_DONE = ("succeeded", "failed", "cancelled")


def wait_for_job(job: str | Callable[[], dict], *, headers: dict[str, str] | None = None,
                 states: tuple[str, ...] = JOB_DONE, seconds: float = 120, every: float = 0.1) -> dict:
    """Poll a job until its status is one of ``states``, and return it; fail with the job if it never is.

    ``job`` is the job's URL (an ``Operation-Location``, fetched with ``headers``) or a function that
    fetches it, for callers that reach the job another way.
    """
    def fetch() -> dict:
        if callable(job):
            return job()
        response = httpx.get(job, headers=headers, timeout=30)
        assert response.status_code == 200, response.text
        return response.json()

    deadline = time.monotonic() + seconds
    while (body := fetch())["status"] not in states:
        assert time.monotonic() < deadline, f"the job is still {body['status']} after {seconds:.0f} s: {body}"
        time.sleep(every)
    return body


class LiveServer:
    """The real app under uvicorn on a loopback port, in a background thread.

    ``tls`` (a certificate and its key, PEM files) serves https, for clients such as azure-core that
    send bearer tokens only over TLS.
    """

    def __init__(self, service, tls: tuple[Path, Path] | None = None):
        import uvicorn

        from openqna.server import create_app, uvicorn_options

        self.service = service
        self.port = free_port()
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self.app = create_app(service)
        certfile, keyfile = (str(tls[0]), str(tls[1])) if tls else (None, None)
        config = uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="warning",
                                ssl_certfile=certfile, ssl_keyfile=keyfile, timeout_graceful_shutdown=2,
                                **uvicorn_options())
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
            """Sends a file's ``ETag`` (its content's hash) and answers a matching ``If-None-Match`` with 304, as
            web servers do; ``Last-Modified``/``If-Modified-Since`` come from SimpleHTTPRequestHandler."""

            etag = ""

            def log_message(self, *args) -> None:
                pass

            def send_head(self):
                path = Path(self.translate_path(self.path))
                self.etag = f'"{hashlib.sha256(path.read_bytes()).hexdigest()[:16]}"' if path.is_file() else ""
                if self.etag and self.etag in self.headers.get("If-None-Match", ""):
                    self.send_response(304)
                    self.end_headers()
                    return None
                return super().send_head()

            def end_headers(self) -> None:
                if self.etag:
                    self.send_header("ETag", self.etag)
                super().end_headers()

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


class TinyDisk:
    """A tmpfs of a few MB: a disk that really fills (SQLite's SQLITE_FULL, ENOSPC for files), at ``path``."""

    def __init__(self, path: Path):
        self.path = path
        self.filler = path / "filler"

    def fill(self, leave: int = 0) -> None:
        """Take every free block but ``leave`` bytes (what is written after this needs a new block: checkpoint
        SQLite's WAL first)."""
        with open(self.filler, "ab", buffering=0) as out:
            try:
                while True:
                    out.write(b"\0" * 4096)
            except OSError:  # ENOSPC
                pass
            out.truncate(max(0, out.tell() - leave))

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)

    def read_only(self) -> None:
        """Mount it read-only (as a read-only bind mount or volume is): root too may not write it then."""
        subprocess.run(["mount", "-o", "remount,ro", str(self.path)], check=True)


@pytest.fixture
def tiny_disk(tmp_path):
    """A TinyDisk of 8 MB, mounted for the test (skipped where this user may not mount one: mount needs root)."""
    path = tmp_path / "tiny"
    path.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(path)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield TinyDisk(path)
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)
