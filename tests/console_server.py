"""What the console's edge-case tests (``test_console_fixes.py``, ``test_console_review.py``) share: a served project
and the helpers that drive it over HTTP.  A test module imports the ``server`` fixture (module-scoped: one
`openqna serve` per module) with ``from console_server import server``, as it imports ``browser`` from
``test_console``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import httpx
import pytest

from conftest import REPO, ServeProcess, wait_for_job

AZURE = "/language/authoring/query-knowledgebases/projects"
V = {"api-version": "2023-04-01"}
SMALL = ("Question\tAnswer\tSource\tMetadata\n"
         "How do I reset my password?\tOpen Settings, then Reset password.\tEditorial\t\n"
         "What are your opening hours?\tWe are open from 9 to 5 on weekdays.\tEditorial\t\n"
         "Where is your office?\tOur office is at 1 Main Street.\tEditorial\t\n")


def serve(tmp_path_factory, name: str, env: dict[str, str]) -> ServeProcess:
    """`openqna serve` in a process of its own, its log under a temporary folder named after ``name``."""
    log = tmp_path_factory.mktemp(f"{name}-log") / "serve.log"
    return ServeProcess(None, log, env=env, cwd=REPO, seconds=120)


@pytest.fixture(scope="module")
def server(request, tmp_path_factory):
    """`openqna serve` with one admin key and a small project `kb1` (plus the sample `openqna-faq`): the URL and
    the key's secret."""
    name = request.module.__name__.removeprefix("test_console_")
    env = {**os.environ, "OPENQNA_DATA": str(tmp_path_factory.mktemp(name)), "HF_HUB_OFFLINE": "1"}
    made = subprocess.run([sys.executable, "-m", "openqna.cli.main", "keys", "create", "--name", "owner", "--role",
                           "admin"], env=env, cwd=REPO, capture_output=True, text=True, timeout=120, check=True)
    secret = next(w for w in made.stdout.split() if w.startswith("oq_"))
    with serve(tmp_path_factory, name, env) as served:
        imported = httpx.post(f"{served.url}/openqna/projects/kb1/files", params={"name": "kb1.tsv"},
                              content=SMALL.encode(), headers={"api-key": secret}, timeout=30)
        assert imported.status_code == 202, imported.text
        job(imported.headers["Operation-Location"], secret)
        yield served.url, secret
        served.stop(signal.SIGINT)


def job(location: str, secret: str) -> dict:
    """Wait for the job at ``location`` to finish; it must succeed."""
    done = wait_for_job(location, headers={"api-key": secret}, states=("succeeded", "failed"), seconds=120)
    assert done["status"] == "succeeded", done
    return done


def azure(url: str, secret: str, method: str, path: str, **kwargs) -> httpx.Response:
    """A call to Azure's authoring API at ``path`` (under the projects), with the key."""
    return httpx.request(method, f"{url}{AZURE}{path}", params=V, headers={"api-key": secret}, timeout=30, **kwargs)
