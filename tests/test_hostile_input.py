"""Issue 24's findings, each sent exactly as it was found: names, wire contracts, input accepted silently.

Runs in-process (Starlette's TestClient, the hash embedder): what is checked is the wire, not ranking.
"""

from __future__ import annotations

import time

import pytest
from starlette.testclient import TestClient

from openqna.kb.service import Service
from openqna.models.embedder import HashEmbedder
from openqna.server import create_app
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


# -- accepted silently before ---------------------------------------------------------------------
QUERY = "/language/:query-knowledgebases"


def ask(client: TestClient, **fields):
    return client.post(QUERY, params={**V, "projectName": "kb", "deploymentName": "test"},
                       json={"question": "How long is shipping?", **fields})


@pytest.mark.parametrize(("field", "value"), [("userId", [1]), ("userId", 7), ("includeUnstructuredSources", "true"),
                                              ("includeUnstructuredSources", 1)])
def test_query_fields_of_the_wrong_type_are_refused_by_name(client, field, value):
    make_project(client)
    response = ask(client, **{field: value})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["target"] == field and field in error["message"]


def test_query_fields_real_clients_send_are_accepted(client):
    """botbuilder-dotnet and the Azure SDK send userId as a string and booleans as JSON booleans."""
    make_project(client)
    response = ask(client, userId="29:1a2b-user", includeUnstructuredSources=True)
    assert response.status_code == 200 and response.json()["answers"][0]["id"] == 1


@pytest.mark.parametrize("limit", ["٣", "²", "3.0", "-1", "0"])
def test_tool_limits_take_ascii_digits_only(client, limit):
    make_project(client)
    response = client.get("/get_related_kb", params={"subject": "shipping", "limit": limit})
    assert response.status_code == 400, response.text
    assert "ASCII digits" in response.json()["error"]["message"]
    assert client.get("/get_related_kb", params={"subject": "shipping", "limit": "3"}).status_code == 200


@pytest.mark.parametrize("path", ["/v1/files", "/v1/vector_stores"])
def test_openai_list_limits_take_ascii_digits_only(client, path):
    response = client.get(path, params={"limit": "٣"})
    assert response.status_code == 400 and response.json()["error"]["param"] == "limit"


@pytest.mark.parametrize("purpose", ["fine-tune", "batch", "vision", "classifications"])
def test_files_of_a_purpose_openqna_does_not_serve_are_refused(client, purpose):
    garbage = bytes(range(256)) * 4
    response = client.post("/v1/files", data={"purpose": purpose}, files={"file": ("x.jsonl", garbage)})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "purpose" and "assistants" in error["message"]
    assert client.get("/v1/files").json()["data"] == []


def test_assistants_files_are_still_stored_for_vector_stores(client):
    response = client.post("/v1/files", data={"purpose": "assistants"}, files={"file": ("a.pdf", b"%PDF-1.4 ...")})
    assert response.status_code == 200 and response.json()["purpose"] == "assistants"


MCP_HEADERS = {"accept": "application/json, text/event-stream"}


@pytest.mark.parametrize("request_id", [{"a": 1}, [1], True, 1.5, None])
def test_an_mcp_request_whose_id_is_not_a_string_or_integer_is_an_invalid_request(client, request_id):
    message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/list", "params": {}}
    response = client.post("/mcp", json=message, headers=MCP_HEADERS)
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["error"]["code"] == -32600 and body["id"] is None and "'id'" in body["error"]["message"]


def test_mcp_requests_and_notifications_still_work(client):
    listed = client.post("/mcp", json={"jsonrpc": "2.0", "id": "a", "method": "tools/list", "params": {}},
                         headers=MCP_HEADERS)
    assert listed.status_code == 200 and listed.json()["id"] == "a" and listed.json()["result"]["tools"]
    note = client.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=MCP_HEADERS)
    assert note.status_code == 202


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_mcp_offers_no_stream_and_no_session(client, method):
    response = client.request(method, "/mcp", headers={"accept": "text/event-stream"})
    assert response.status_code == 405 and response.headers["allow"] == "POST"
    assert response.json()["error"]["code"] == -32600


# -- found by `make fuzz` (tests/test_fuzz.py) --------------------------------------------------------
def test_an_import_whose_metadata_has_the_wrong_types_is_refused_and_changes_nothing(client):
    """schemathesis sent this: the project's language became the text "[None, None]" and its default
    answer a JSON array, which GET then returned against the spec's string types."""
    make_project(client)
    body = {"metadata": {"language": [None, None], "settings": {"defaultAnswer": [None, None]}}}
    response = client.post(f"{A}/kb/:import", params=V, json=body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["target"] == "metadata.language"
    project = client.get(f"{A}/kb", params=V).json()
    assert project["language"] == "en" and project["settings"]["defaultAnswer"] == "No good match found in KB."
    wrong_answer = client.post(f"{A}/kb/:import", params=V, json={"Metadata": {"Settings": {"DefaultAnswer": 7}}})
    assert wrong_answer.status_code == 400
    assert wrong_answer.json()["error"]["target"] == "metadata.settings.defaultAnswer"


def test_an_import_with_good_metadata_still_sets_the_project(client):
    make_project(client)
    body = {"metadata": {"language": "de", "description": "Versand", "settings": {"defaultAnswer": "Keine Antwort."}},
            "assets": {"qnas": [{"id": 1, "answer": "Zehn Tage.", "questions": ["Wie lange dauert der Versand?"]}]}}
    response = client.post(f"{A}/kb/:import", params=V, json=body)
    assert finish(client, response.headers["operation-location"]) == "succeeded"
    project = client.get(f"{A}/kb", params=V).json()
    assert (project["language"], project["description"], project["settings"]["defaultAnswer"]) == \
        ("de", "Versand", "Keine Antwort.")


def test_a_vector_store_filter_whose_type_is_not_a_string_is_refused(client):
    """schemathesis sent this nested filter with "type": {}: a TypeError (unhashable dict) and a 500."""
    store = client.post("/v1/vector_stores", json={"name": "docs"}).json()["id"]
    body = {"filters": {"filters": [{"filters": [{"key": "k", "type": {}, "value": False}], "type": "or"}],
                        "type": "or"}, "max_num_results": 10, "query": "What is the return policy?",
            "ranking_options": {"ranker": "auto", "score_threshold": 0.1}, "rewrite_query": False}
    response = client.post(f"/v1/vector_stores/{store}/search", json=body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == "filters" and "'type' must be one of" in error["message"]
    for kind in ([], ["eq"], 1, None):
        body["filters"] = {"type": kind, "key": "k", "value": 1}
        assert client.post(f"/v1/vector_stores/{store}/search", json=body).status_code == 400


@pytest.mark.parametrize("uri", [[None], ["https://example.com/kb.tsv"], 7, {"url": "https://example.com"}, True])
def test_an_import_whose_file_uri_is_not_a_string_is_refused(client, uri):
    """schemathesis sent a list as fileUri: 202, then the job crashed in urlparse (AttributeError)."""
    make_project(client)
    response = client.post(f"{A}/kb/:import", params=V, json={"fileUri": uri})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["target"] == "fileUri"
    assert [q["id"] for q in client.get(f"{A}/kb/qnas", params=V).json()["value"]] == [1]  # nothing replaced
