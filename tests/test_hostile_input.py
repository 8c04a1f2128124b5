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


# -- contracts against the vendors' specs -----------------------------------------------------------
def test_sources_carry_the_required_source_uri_and_only_the_spec_structure_kind(client):
    make_project(client)  # its QnAs came from an import: a source with no URL of its own
    [source] = client.get(f"{A}/kb/sources", params=V).json()["value"]
    assert source["source"] == "Editorial"
    assert "contentStructureKind" not in source  # semi-structured: the spec's enum has only 'unstructured'
    uri = source["sourceUri"]
    assert uri.startswith("http") and "/kb/qnas?" in uri
    assert [q["id"] for q in client.get(uri).json()["value"]] == [1]  # it lists the source's QnAs


def test_empty_202_and_204_responses_have_no_body(client):
    """The spec declares no schema for them, so no content and no Content-Type (RFC 9110 §8.3)."""
    make_project(client)
    put = client.put(f"{A}/kb/synonyms", params=V, json={"value": [{"alterations": ["ship", "send"]}]})
    deploy = client.put(f"{A}/kb/deployments/production", params=V)
    for response in (put, deploy):
        assert response.status_code in (202, 204) and response.content == b""
        assert "content-type" not in response.headers


def test_a_vector_store_without_expiry_omits_expires_after(client):
    created = client.post("/v1/vector_stores", json={"name": "docs"}).json()
    assert "expires_after" not in created and created["expires_at"] is None
    listed = client.get("/v1/vector_stores").json()["data"][0]
    assert "expires_after" not in listed
    expiring = client.post("/v1/vector_stores", json={"expires_after": {"anchor": "last_active_at", "days": 2}})
    assert expiring.json()["expires_after"] == {"anchor": "last_active_at", "days": 2}


def test_files_keep_the_real_apis_nulls(client):
    """The spec types status_details and first_id/last_id as strings; the real API sends null, the openai
    client types them Optional, and openai<1 code reads ``f.status_details`` as an attribute: kept."""
    empty = client.get("/v1/files").json()
    assert empty == {"object": "list", "data": [], "first_id": None, "last_id": None, "has_more": False}
    uploaded = client.post("/v1/files", data={"purpose": "answers"},
                           files={"file": ("a.jsonl", b'{"text": "Ten days."}\n', "application/jsonl")}).json()
    assert uploaded["status_details"] is None
    content = client.get(f"/v1/files/{uploaded['id']}/content")
    assert content.headers["content-type"] == "application/octet-stream"  # the client asks for application/binary
    assert content.content == b'{"text": "Ten days."}\n'
