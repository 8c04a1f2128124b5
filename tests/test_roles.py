"""Every route of every surface, called with each kind of key, against the table of docs/security.md (issue 24).

The routes are the ones ``server.create_app`` registers, enumerated at run time; a route or method the
route × key table under "Keys and roles" in ``docs/security.md`` does not list fails
``test_every_route_is_in_the_roles_table``.  Each call names real things (the project ``kb``, a deployed
``production``, finished jobs of every kind, an uploaded file, a vector store and a batch), so what
decides the answer is the key:

* ``ok``: the key was accepted (the answer is whatever the route answers: 200, 202, 204, or a 400
  for the placeholder body; never 401, 403 or 404);
* ``401``: no key, or a key that is not valid;
* ``403``: the key's role is too low;
* ``404``: the key is scoped to other projects, and the route answers as if ``kb`` did not exist.

MCP answers over JSON-RPC: a tool call the key may not make is a tool error, counted as ``404``.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest
from starlette.routing import Route
from starlette.testclient import TestClient

from conftest import wait_for_job
from openqna.auth.keys import create_key
from openqna.kb.service import Service
from openqna.models.embedder import HashEmbedder
from openqna.server import create_app
from openqna.store.base import Source, TestRun, TestSet
from openqna.store.sqlite import SQLiteStore

SECURITY = Path(__file__).resolve().parents[1] / "docs" / "security.md"
KINDS = ("no key", "query", "author", "admin", "other project")
AZ = "/language/authoring/query-knowledgebases/projects"
V = {"api-version": "2023-04-01"}
MCP_HEADERS = {"accept": "application/json, text/event-stream"}


def roles_table() -> dict[tuple[str, str], dict[str, str]]:
    """(route, method) → {key kind: outcome}, from the table under "## Keys and roles" in docs/security.md."""
    text = SECURITY.read_text(encoding="utf-8")
    section = text.split("\n## Keys and roles", 1)[1].split("\n## ", 1)[0]
    rows: dict[tuple[str, str], dict[str, str]] = {}
    header: list[str] | None = None
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else None
        if not cells:
            header = None  # a table ends at its first line that is not a row
            continue
        if header is None:
            header = cells
            continue
        if set(cells[0]) <= {"-", ":"} or header[0] != "route":
            continue  # the separator, or another table (the roles)
        assert header[2:] == list(KINDS), f"the table's columns must be route, method, {', '.join(KINDS)}"
        route = cells[0].strip("`")
        for method in cells[1].split(","):
            key = (route, method.strip())
            assert key not in rows, f"{key} is in the roles table twice"
            rows[key] = dict(zip(KINDS, cells[2:], strict=True))
    return rows


def row_for(table: dict[tuple[str, str], dict[str, str]], method: str, path: str) -> dict[str, str] | None:
    """The table row of a route: its exact path, a row written ``…/rest`` that every prefix shares, or a row
    written ``/prefix/*`` that covers every file under it (the console's)."""
    if (path, method) in table:
        return table[(path, method)]
    files = [row for (route, m), row in table.items() if m == method and route.endswith("/*")
             and path.startswith(route[:-1])]
    if files:
        return files[0]
    shared = [row for (route, m), row in table.items()
              if m == method and route.startswith("…") and path.endswith(route[1:])]
    assert len(shared) <= 1, f"{method} {path} matches more than one '…' row"
    return shared[0] if shared else None


def app_routes(client: TestClient) -> list[tuple[str, str]]:
    out = []
    for route in client.app.routes:
        assert isinstance(route, Route)
        out += [(m, route.path) for m in sorted((route.methods or {"POST"}) - {"HEAD"})]
    return out


def finish(client: TestClient, response, headers: dict[str, str]) -> str:
    assert response.status_code == 202, response.text
    location = response.headers["operation-location"]
    return wait_for_job(lambda: client.get(location, headers=headers).json(), states=("succeeded", "failed"),
                        seconds=30, every=0.02)["jobId"]


class World:
    """A server holding one of everything, the keys of every kind, and the ids the paths need."""

    def __init__(self, client: TestClient, service: Service):
        self.client, self.service = client, service
        store = service.store
        self.secrets: dict[str, str | None] = {"no key": None}
        for kind, role, projects in (("admin", "admin", None), ("query", "query", None), ("author", "author", None),
                                     ("other project", "admin", ["other"])):
            self.secrets[kind] = create_key(store, name=kind, role=role, projects=projects)[1]
        h = self.headers("admin")
        assert client.patch(f"{AZ}/kb", params=V, json={"language": "en"}, headers=h).status_code == 201
        assets = {"assets": {"qnas": [{"id": 1, "answer": "Ten days.", "questions": ["How long is shipping?"]}]}}
        self.jobs = {
            "import": finish(client, client.post(f"{AZ}/kb/:import", params=V, json=assets, headers=h), h),
            "deployments": finish(client, client.put(f"{AZ}/kb/deployments/production", params=V, headers=h), h),
            "export": finish(client, client.post(f"{AZ}/kb/:export", params=V, headers=h), h),
            "qnas": finish(client, client.patch(f"{AZ}/kb/qnas", params=V, headers=h, json=[
                {"op": "add", "value": {"answer": "Yes.", "questions": ["Do you ship abroad?"]}}]), h),
            "sources": finish(client, client.patch(f"{AZ}/kb/sources", params=V, headers=h, json=[
                {"op": "delete", "value": {"source": "nothing"}}]), h),
        }
        client.patch(f"{AZ}/gone", params=V, json={}, headers=h)
        self.jobs["deletion-jobs"] = finish(client, client.delete(f"{AZ}/gone", params=V, headers=h), h)
        self.file_id = self.upload("answers")
        self.store_file_id = self.upload("assistants")
        self.store_id = self.new_store(self.store_file_id)
        batch = client.post(f"/v1/vector_stores/{self.store_id}/file_batches", headers=h,
                            json={"file_ids": [self.upload("assistants")]}).json()
        self.batch_id = batch["id"]
        self.victims = 0
        store.put_test_set("kb", TestSet("smoke", [{"question": "How long is shipping?", "expected_qna_id": 1,
                                                   "expected_answer": None, "metadata": {}}]))
        store.add_test_run("kb", TestRun(0, "smoke", "test", "2026-01-01T00:00:00Z", 0.5, {"questions": 1}, []))
        # a URL source the fetcher refuses at once (loopback): a refresh of it is recorded as failed, with no wait
        store.put_source("kb", Source("http://127.0.0.1:9/faq.md", "faq", "http://127.0.0.1:9/faq.md"))

    def headers(self, kind: str) -> dict[str, str]:
        secret = self.secrets[kind]
        return {"api-key": secret} if secret else {}

    def upload(self, purpose: str) -> str:
        text = b'{"text": "Shipping takes ten days."}\n'
        response = self.client.post("/v1/files", data={"purpose": purpose}, files={"file": ("a.jsonl", text)},
                                    headers=self.headers("admin"))
        assert response.status_code == 200, response.text
        return response.json()["id"]

    def new_store(self, file_id: str | None = None) -> str:
        response = self.client.post("/v1/vector_stores", headers=self.headers("admin"),
                                    json={"name": "docs", "file_ids": [file_id or self.upload("assistants")]})
        assert response.status_code == 200, response.text
        return response.json()["id"]

    def path(self, method: str, route: str) -> str:
        """The route with real names in it; a DELETE gets a victim of its own, so every key finds one."""
        values = {"project": "kb", "deployment": "production", "kbId": "kb", "action": "generateAnswer", "kb": "kb",
                  "file_id": self.file_id, "engine": "ada", "vector_store_id": self.store_id,
                  "batch_id": self.batch_id}
        if route.startswith("/v1/vector_stores/{vector_store_id}/files/"):
            values["file_id"] = self.store_file_id
        values["engine:path"] = self.service.embedder.name  # an embeddings engine is the server's model
        if method == "DELETE":
            if route.endswith("/projects/{project}"):
                self.victims += 1
                values["project"] = f"victim{self.victims}"
                self.service.create_project(values["project"])
            elif route == "/v1/vector_stores/{vector_store_id}":
                values["vector_store_id"] = self.new_store()
            elif route == "/v1/files/{file_id}":
                values["file_id"] = self.upload("answers")
            elif route.endswith("/test-sets/{name}"):
                self.victims += 1
                values["name"] = f"victim{self.victims}"
                self.service.store.put_test_set("kb", TestSet(values["name"], []))
            else:  # a vector store's file
                values["file_id"] = self.upload("assistants")
                attached = self.client.post(f"/v1/vector_stores/{self.store_id}/files", headers=self.headers("admin"),
                                            json={"file_id": values["file_id"]})
                assert attached.status_code == 200, attached.text
        values.setdefault("name", "smoke")
        values["source:path"] = "faq"
        values["runId"] = "1"
        if route == "/openqna/keys/{keyId}":
            values["keyId"] = create_key(self.service.store, name="victim", role="query")[0].id
        if route == "/openqna/jobs/{jobId}":
            values["jobId"] = self.jobs["import"]
        elif "{jobId}" in route:
            kind = route.split("/{jobId}")[0].split("/")[-1]
            values["jobId"] = self.jobs[kind if kind == "deletion-jobs" else route.split("/{project}/")[1].split("/")[0]]
        return re.sub(r"\{([^}]+)\}", lambda m: values[m.group(1)], route)

    def body(self, method: str, route: str) -> Any:
        if route == "/mcp":
            return {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": "search", "arguments": {"kb": "kb", "subject": "shipping"}}}
        if route in ("/language/:query-knowledgebases", "/openqna/projects/{project}/:inspect"):
            return {"question": "How long is shipping?"}
        if route == "/language/:query-text":
            return {"question": "How long?", "records": [{"id": "1", "text": "Shipping takes ten days."}]}
        if route.endswith("/{action}"):
            return {"question": "How long is shipping?"}
        if route in ("/v1/answers",):
            return {"file": self.file_id, "question": "How long?", "examples_context": "x", "examples": [["a", "b"]],
                    "model": "ada"}
        if route.endswith("/search") and route.startswith("/v1/"):
            return {"file": self.file_id, "query": "shipping"} if "vector_stores" not in route else \
                {"query": "shipping"}
        if route.endswith("/feedback"):
            return {"records": [{"userId": "u", "userQuestion": "shipping time?", "qnaId": 1}]}
        if method in ("POST", "PUT", "PATCH"):
            return {}
        return None

    def outcome(self, method: str, route: str, kind: str) -> str:
        params = dict(V)
        if route.startswith("/language/:"):
            params.update(projectName="kb", deploymentName="production")
        if route.startswith("/get_related_") or route.endswith("/search") and route.startswith("/tools/"):
            params["subject"] = "shipping"
        headers = self.headers(kind)
        if route == "/mcp":
            headers = {**headers, **MCP_HEADERS}
        path = self.path(method, route.replace("{kb}", "kb") if route == "/get_related_{kb}" else route)
        body = self.body(method, route)
        if route == "/v1/files" and method == "POST":
            response = self.client.post(path, data={"purpose": "answers"}, headers=headers,
                                        files={"file": ("b.jsonl", b'{"text": "x"}\n')})
        else:
            response = self.client.request(method, path, params=params, headers=headers, json=body)
        assert response.status_code < 500, f"{method} {path} with {kind}: {response.status_code} {response.text[:300]}"
        if response.status_code in (401, 403, 404):
            return str(response.status_code)
        if route == "/mcp" and response.json().get("result", {}).get("isError"):
            return "404"
        return "ok"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    service = Service(SQLiteStore(tmp_path_factory.mktemp("roles")), HashEmbedder())
    with TestClient(create_app(service), raise_server_exceptions=False) as client:
        yield World(client, service)


def test_every_route_is_in_the_roles_table(world):
    table = roles_table()
    missing = [f"| `{p}` | {m} |" for m, p in app_routes(world.client) if row_for(table, m, p) is None]
    assert not missing, "routes missing from the roles table of docs/security.md:\n" + "\n".join(missing)


def test_every_route_answers_each_key_as_the_docs_say(world, caplog):
    table = roles_table()
    wrong = []
    with caplog.at_level(logging.DEBUG):
        for method, route in app_routes(world.client):
            expected = row_for(table, method, route)
            assert expected is not None
            for kind in KINDS:
                got = world.outcome(method, route, kind)
                if got != expected[kind]:
                    wrong.append(f"{method} {route} with {kind}: {got}, docs/security.md says {expected[kind]}")
    assert not wrong, "\n".join(wrong)
    # and no key reached a log line on the way (docs/security.md, "What is logged")
    logged = caplog.text + "".join(str(r.args) for r in caplog.records)
    assert not [kind for kind, secret in world.secrets.items() if secret and secret in logged]


def test_a_missing_key_is_never_told_what_exists(world):
    """A missing key is 401 everywhere (but /healthz): a 404 would tell a stranger what exists."""
    table = roles_table()
    leaks = [f"{m} {p}" for (p, m), row in table.items() if row["no key"] not in ("401", "ok")]
    assert not leaks, leaks
