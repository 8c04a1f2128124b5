"""Issue 24's findings, each sent exactly as it was found: names, wire contracts, input accepted silently.

Runs in-process (Starlette's TestClient, the hash embedder): what is checked is the wire, not ranking.
"""

from __future__ import annotations

import time

import pytest
from starlette.testclient import TestClient

from openqna.models.embedder import HashEmbedder
from openqna.server import create_app
from openqna.service import Service
from openqna.store.sqlite import SQLiteStore

A = "/language/authoring/query-knowledgebases/projects"
V = {"api-version": "2023-04-01"}


@pytest.fixture
def client(tmp_path):
    service = Service(SQLiteStore(tmp_path), HashEmbedder())
    with TestClient(create_app(service), raise_server_exceptions=False) as c:
        c.service = service  # type: ignore[attr-defined]
        yield c


def finish(client: TestClient, location: str) -> str:
    for _ in range(200):
        status = client.get(location).json()["status"]
        if status in ("succeeded", "failed"):
            return status
        time.sleep(0.05)
    raise AssertionError(f"{location} never finished")


def make_project(client: TestClient, name: str = "kb") -> None:
    assert client.patch(f"{A}/{name}", params=V, json={"language": "en"}).status_code == 201
    body = {"assets": {"qnas": [{"id": 1, "answer": "Ten days.", "questions": ["How long is shipping?"]}]}}
    response = client.post(f"{A}/{name}/:import", params=V, json=body)
    assert response.status_code == 202
    assert finish(client, response.headers["operation-location"]) == "succeeded"


# -- names ----------------------------------------------------------------------------------------
def test_a_deployment_name_outside_latin1_is_refused_and_nothing_is_deployed(client):
    make_project(client)
    response = client.put(f"{A}/kb/deployments/%E2%98%83snow", params=V)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["target"] == "deploymentName" and "ASCII letters, digits" in error["message"]
    assert client.get(f"{A}/kb/deployments", params=V).json()["value"] == []


def test_operation_location_is_percent_encoded_ascii(client):
    make_project(client)
    response = client.put(f"{A}/kb/deployments/prod_2", params=V)
    assert response.status_code == 202
    location = response.headers["operation-location"]
    assert location.isascii() and "/kb/deployments/prod_2/jobs/" in location
    assert finish(client, location) == "succeeded"


@pytest.mark.parametrize("name", ["nope-", "-nope", "a.b", "%E2%98%83", "x" * 101])
def test_import_into_a_name_patch_would_refuse_creates_nothing(client, name):
    body = {"assets": {"qnas": [{"id": 1, "answer": "a", "questions": ["q"]}]}}
    response = client.post(f"{A}/{name}/:import", params=V, json=body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["target"] == "projectName"
    assert client.patch(f"{A}/{name}", params=V, json={}).status_code == 400
    assert client.get(A, params=V).json()["value"] == []


def test_import_into_an_existing_project_keeps_working(client):
    make_project(client, "Kb_1")
    assert [p["projectName"] for p in client.get(A, params=V).json()["value"]] == ["Kb_1"]
