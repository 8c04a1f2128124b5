"""Links the server builds never come from what a client claims (``api.links``): not from ``Host``, and not from
``X-Forwarded-*`` unless the proxy is trusted."""

from __future__ import annotations

import httpx
import pytest

from conftest import LiveServer, wait_for_job
from openqna.api import links
from openqna.auth.keys import create_key
from openqna.records import QnA

P2 = "/language/authoring/query-knowledgebases/projects"
V = {"api-version": "2023-04-01"}


@pytest.fixture
def admin(service):
    service.create_project("kb")
    service.upsert("kb", [QnA(["How do I start the server?"], "Run make serve.")])
    return {"Ocp-Apim-Subscription-Key": create_key(service.store, role="admin")[1]}


def export(live: LiveServer, headers: dict[str, str]) -> tuple[httpx.Response, dict]:
    """An export job begun with ``headers``; its 202 and the finished job as polled at the server's own address."""
    r = httpx.post(live.url + P2 + "/kb/:export", params={**V, "format": "json"}, headers=headers)
    assert r.status_code == 202, r.text
    path = "/" + r.headers["Operation-Location"].split("/", 3)[3]
    job = wait_for_job(lambda: httpx.get(live.url + path, headers=admin_only(headers)).json())
    return r, job


def admin_only(headers: dict[str, str]) -> dict[str, str]:
    return {"Ocp-Apim-Subscription-Key": headers["Ocp-Apim-Subscription-Key"]}


def test_a_forged_host_never_reaches_a_link(service, admin):
    """With ``Host: evil.example`` and ``X-Forwarded-Proto: https`` from an untrusted client, the job's
    ``Operation-Location`` and the signed ``resultUrl`` still point at the address the server was reached on."""
    with LiveServer(service) as live:
        forged = {**admin, "Host": "evil.example", "X-Forwarded-Proto": "https"}
        r, job = export(live, forged)
        assert r.headers["Operation-Location"].startswith(live.url + P2 + "/kb/export/jobs/"), r.headers
        assert job["status"] == "succeeded" and job["resultUrl"].startswith(live.url + "/"), job
        assert "evil" not in job["resultUrl"]
        doc = httpx.get(live.url + "/tools/openapi.json", headers={**admin, "Host": "evil.example"})
        assert doc.status_code == 200, doc.text
        assert [s["url"] for s in doc.json()["servers"]] == [live.url]


def test_a_trailing_slash_redirect_keeps_to_the_server(service, admin):
    """The router's 307 for a path with a trailing slash sent ``Location: http://evil.example/...`` back."""
    with LiveServer(service) as live:
        r = httpx.post(live.url + "/language/:query-knowledgebases/", params={**V, "projectName": "kb"},
                       headers={**admin, "Host": "evil.example"}, json={"question": "start?"})
        assert r.status_code == 307, r.text
        assert r.headers["Location"] == live.url + "/language/:query-knowledgebases?api-version=2023-04-01&projectName=kb"


def test_a_trusted_proxy_and_allowed_hosts(service, admin, monkeypatch):
    """``OPENQNA_TRUSTED_PROXIES`` makes a proxy's ``X-Forwarded-Proto`` believed; ``OPENQNA_ALLOWED_HOSTS`` refuses
    other hosts with 400 and lets links use the checked ``Host``."""
    monkeypatch.setenv("OPENQNA_TRUSTED_PROXIES", "127.0.0.1")
    monkeypatch.setenv("OPENQNA_ALLOWED_HOSTS", "qna.example.com,127.0.0.1")
    with LiveServer(service) as live:
        refused = httpx.get(live.url + "/healthz", headers={"Host": "evil.example"})
        assert refused.status_code == 400
        assert httpx.get(live.url + "/healthz").status_code == 200
        r, _ = export(live, {**admin, "Host": "qna.example.com", "X-Forwarded-Proto": "https"})
        assert r.headers["Operation-Location"].startswith("https://qna.example.com" + P2), r.headers


@pytest.mark.parametrize("proxies, address, trusted", [
    ("", "127.0.0.1", False), ("127.0.0.1", "127.0.0.1", True), ("127.0.0.1", "127.0.0.2", False),
    ("10.0.0.0/8, 192.168.1.7", "10.20.30.40", True), ("10.0.0.0/8", "::1", False), ("::1", "::1", True),
    ("*", "203.0.113.9", True),
])
def test_trusted_proxies_are_matched_as_uvicorn_reads_them(monkeypatch, proxies, address, trusted):
    """The cap on slow requests leaves a trusted proxy's connections uncounted (``api.slow_requests``): the same
    addresses, ranges and ``*`` that uvicorn believes forwarded headers from."""
    monkeypatch.setenv("OPENQNA_TRUSTED_PROXIES", proxies)
    assert links.is_trusted_proxy(address) is trusted
