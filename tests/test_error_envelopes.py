"""Every route answers a bad request with a 4xx in its own surface's error envelope (DESIGN decision 10).

The routes are the ones ``server.create_app`` registers, enumerated at run time, so a new route is
walked without anyone adding it here; a new *surface* fails ``test_every_route_has_a_dialect`` until
its envelope is named in ``DIALECTS``.  Each route gets, where it applies: no key on a secured server,
unknown names in its path (project, knowledge base, file, job, ...), and a body that is not JSON.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from starlette.routing import Route
from starlette.testclient import TestClient

from openqna.api.console import CONSOLE_DIR
from openqna.auth.keys import create_key
from openqna.kb.service import Service
from openqna.models.embedder import HashEmbedder
from openqna.server import create_app
from openqna.store.sqlite import SQLiteStore

# /healthz and /readyz answer load balancers without a key, /openqna/whoami tells a page whether it needs one, and
# the console's files (/ and /console/...) are public; none takes input that can be wrong.
UNSECURED = {"/healthz", "/readyz", "/openqna/whoami", "/", *(f"/console/{p.name}" for p in CONSOLE_DIR.iterdir())}
BODY_METHODS = {"POST", "PUT", "PATCH"}
# Azure authoring creates a project that a PATCH or an import names: an unknown name is no error there.
CREATES = {("PATCH", "/projects/{project}"), ("POST", "/projects/{project}/:import"),
           ("POST", "/projects/{project}/files")}


def azure(body: Any) -> bool:
    """Azure: {"error": {"code", "message", ...}}."""
    error = body.get("error") if isinstance(body, dict) else None
    return isinstance(error, dict) and isinstance(error.get("code"), str) and isinstance(error.get("message"), str)


def openai(body: Any) -> bool:
    """OpenAI: {"error": {"message", "type", "param", "code"}}."""
    error = body.get("error") if isinstance(body, dict) else None
    return isinstance(error, dict) and isinstance(error.get("message"), str) and isinstance(error.get("type"), str) \
        and {"param", "code"} <= set(error)


def tools(body: Any) -> bool:
    """The tool endpoints: {"error": {"code", "message"}}, which GPT Actions show to the model."""
    error = body.get("error") if isinstance(body, dict) else None
    return isinstance(error, dict) and isinstance(error.get("code"), str) and isinstance(error.get("message"), str)


def mcp(body: Any) -> bool:
    """MCP: a JSON-RPC 2.0 error object."""
    error = body.get("error") if isinstance(body, dict) else None
    return isinstance(body, dict) and body.get("jsonrpc") == "2.0" and isinstance(error, dict) \
        and isinstance(error.get("code"), int) and isinstance(error.get("message"), str)


def qnamaker(body: Any) -> bool:
    """QnA Maker's runtime: {"error": {"code", "message"}} with its own codes (BadArgument, KbNotFound, ...)."""
    error = body.get("error") if isinstance(body, dict) else None
    return isinstance(error, dict) and error.get("code") in QNAMAKER_CODES and isinstance(error.get("message"), str)


QNAMAKER_CODES = {"BadArgument", "Unauthorized", "Forbidden", "KbNotFound", "NotFound", "QuotaExceeded", "ServiceError",
                  "QnaRuntimeError"}

# path prefix → the envelope that surface answers in
DIALECTS: dict[str, Callable[[Any], bool]] = {
    "/language/": azure,
    "/qnamaker/": qnamaker,
    "/knowledgebases/": qnamaker,
    "/v1/": openai,
    "/tools/": tools,
    "/get_related_": tools,
    "/mcp": mcp,
    "/openqna/": azure,  # openqna's own routes (api/native.py), beside the Azure routes the console also calls
}


def dialect(path: str) -> Callable[[Any], bool] | None:
    return next((check for prefix, check in DIALECTS.items() if path.startswith(prefix)), None)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    store = SQLiteStore(tmp_path_factory.mktemp("envelopes"))
    _, secret = create_key(store, name="envelopes", role="admin")
    app = create_app(Service(store, HashEmbedder()))
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client, secret


def routes(client: TestClient) -> list[tuple[str, str]]:
    """(method, path) of every route the app registers (HEAD is GET's shadow)."""
    out = []
    for route in client.app.routes:
        assert isinstance(route, Route), f"{route!r}: walk its sub-routes here"
        methods = sorted((route.methods or {"POST"}) - {"HEAD"})  # an ASGI endpoint (MCP) takes POSTs
        out += [(m, route.path) for m in methods]
    return out


# A name nothing has, and one no PATCH may create (a project name must end with a letter or digit).
UNKNOWN = "nope-"


def fill(path: str) -> str:
    """The path with every parameter set to ``UNKNOWN`` (a knowledge base ``get_related_{kb}`` too).

    QnA Maker's ``{action}`` is a verb, matched in any case, not a name: it gets a real one.
    """
    return re.sub(r"\{[^}]+\}", UNKNOWN, path.replace("{action}", "generateAnswer"))


QUERY = {"api-version": "2023-04-01", "projectName": UNKNOWN, "deploymentName": "production"}


def send(client: TestClient, method: str, path: str, *, secret: str | None, body: bytes | None = None):
    headers = {"api-key": secret} if secret else {}
    if path == "/mcp":
        headers["accept"] = "application/json, text/event-stream"
    if body is not None:
        headers["content-type"] = "application/json"
    return client.request(method, fill(path), params=QUERY, headers=headers, content=body)


def check(response, path: str) -> None:
    where = f"{response.request.method} {response.request.url.path}"
    assert 400 <= response.status_code < 500, f"{where}: {response.status_code} {response.text[:300]}"
    envelope = dialect(path)
    assert envelope is not None
    assert envelope(response.json()), f"{where}: not {envelope.__name__}'s envelope: {response.text[:300]}"


def test_every_route_has_a_dialect(server):
    client, _ = server
    walked = routes(client)
    assert len(walked) > 50
    missing = [f"{m} {p}" for m, p in walked if p not in UNSECURED and dialect(p) is None]
    assert not missing, "routes of a surface without an error envelope here:\n" + "\n".join(missing)


def test_a_request_without_a_key_is_refused_in_the_surface_dialect(server):
    client, _ = server
    for method, path in routes(client):
        if path in UNSECURED:
            assert send(client, method, path, secret=None).status_code == 200
            continue
        response = send(client, method, path, secret=None, body=b"{}" if method in BODY_METHODS else None)
        assert response.status_code == 401, f"{method} {path}: {response.status_code} {response.text[:300]}"
        check(response, path)


def test_unknown_names_in_the_path_are_refused_in_the_surface_dialect(server):
    client, secret = server
    walked = [(m, p) for m, p in routes(client)
              if "{" in p and not any(m == method and p.endswith(end) for method, end in CREATES)]
    assert walked
    for method, path in walked:
        check(send(client, method, path, secret=secret, body=b"{}" if method in BODY_METHODS else None), path)


def test_a_body_that_is_not_json_is_refused_in_the_surface_dialect(server):
    client, secret = server
    walked = [(m, p) for m, p in routes(client) if m in BODY_METHODS and p not in UNSECURED]
    assert walked
    for method, path in walked:
        check(send(client, method, path, secret=secret, body=b"{not json"), path)


@pytest.mark.parametrize(("path", "envelope"), [("/v1/files", openai), ("/tools/openapi.json", tools),
                                                ("/language/authoring/query-knowledgebases/projects", azure)])
def test_an_unexpected_error_answers_500_in_the_surface_dialect(tmp_path, monkeypatch, path, envelope):
    """A bug is still answered in the caller's own envelope (make fuzz checked a 500 on /v1/ against OpenAI's
    error schema and found Azure's)."""
    service = Service(SQLiteStore(tmp_path), HashEmbedder())

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(service, "projects", broken)
    monkeypatch.setattr(service, "knowledge_bases", broken)
    monkeypatch.setattr("openqna.kinds.openai_files.list_files", broken)
    with TestClient(create_app(service), raise_server_exceptions=False) as client:
        response = client.get(path, params={"api-version": "2023-04-01", "subject": "x"})
    assert response.status_code == 500, response.text
    assert envelope(response.json()), response.text
