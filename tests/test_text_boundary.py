"""One text boundary: no byte sequence a client sends is a 500, now or on any later read (issue 40).

Every route the app registers is walked with real names in its path (a deployed project, an uploaded
file, a vector store and its batch), so each request reaches the code that reads its input rather
than a 404.  Bodies carry the raw bytes of a lone UTF-16 surrogate (``ED A0 80``), its ``\\ud800``
escape, or nesting beyond the limit; files carry them inside the uploaded JSON, JSON Lines or table.
Each must be refused with a 4xx in the surface's envelope, or (for a route that never reads a body)
answered without keeping it; afterwards every GET route must still answer without a 5xx, which is
what failed before: a vector store named with the raw bytes was created, and listing it was a 500.
"""

from __future__ import annotations

import json
import re

import pytest
from starlette.testclient import TestClient

from conftest import wait_for_job
from openqna.auth.keys import create_key
from openqna.kb.service import Service
from openqna.models.embedder import HashEmbedder
from openqna.server import create_app
from openqna.store.sqlite import SQLiteStore
from test_error_envelopes import BODY_METHODS, UNSECURED, dialect, routes

AUTHORING = "/language/query-knowledgebases/projects"
API = {"api-version": "2021-10-01"}
RAW = b"\xed\xa0\x80"  # the UTF-8-style bytes of U+D800, which json.loads decodes (surrogatepass)
ESCAPE = b"\\ud800"
DEEP = b"[" * 200 + b"]" * 200

# Routes that take no body (the request names everything in its path): a body there is never read,
# so any is answered as the route answers without one.
IGNORES_BODY = {
    ("PUT", "/language/authoring/query-knowledgebases/projects/{project}/deployments/{deployment}"),
    ("PUT", "/language/query-knowledgebases/projects/{project}/deployments/{deployment}"),
    ("POST", "/language/authoring/query-knowledgebases/projects/{project}/:export"),
    ("POST", "/language/query-knowledgebases/projects/{project}/:export"),
    ("POST", "/v1/vector_stores/{vector_store_id}/file_batches/{batch_id}/cancel"),
    ("POST", "/openqna/projects/{project}/deployments/{deployment}/:rollback"),
    ("POST", "/openqna/projects/{project}/test-sets/{name}/:run"),
    ("POST", "/openqna/projects/{project}/test-sets/{name}/:from-log"),
    ("POST", "/openqna/projects/{project}/sources/{source:path}/:refresh"),
    ("POST", "/openqna/projects/{project}:train"),
}
# Routes whose body is not JSON: each gets the bad text inside the kind of body it takes (below).
NOT_JSON = {("POST", "/v1/files"), ("POST", "/openqna/projects/{project}/files"),
            ("POST", "/openqna/projects/{project}/calibration"), ("PUT", "/openqna/projects/{project}/test-sets/{name}")}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A server with one of everything a path can name, and an admin key."""
    store = SQLiteStore(tmp_path_factory.mktemp("boundary"))
    _, secret = create_key(store, name="boundary", role="admin")
    with TestClient(create_app(Service(store, HashEmbedder())), raise_server_exceptions=False) as client:
        client.headers["api-key"] = secret
        client.headers["authorization"] = f"Bearer {secret}"
        names = build(client)
        yield client, names


def job(client: TestClient, response) -> dict:
    assert response.status_code == 202, response.text
    return wait_for_job(lambda: client.get(response.headers["operation-location"]).json())


def build(client: TestClient) -> dict[str, str]:
    r = client.patch(f"{AUTHORING}/p", params=API, json={"language": "en", "description": "boundary"})
    assert r.status_code in (200, 201), r.text
    qnas = [{"op": "add", "value": {"id": 1, "answer": "Open Settings and choose Reset.",
                                   "questions": ["How do I reset my password?"],
                                   "dialog": {"prompts": [{"displayText": "More", "displayOrder": 0,
                                                           "qnaId": 1}]}}}]
    assert job(client, client.patch(f"{AUTHORING}/p/qnas", params=API, json=qnas))["status"] == "succeeded"
    assert job(client, client.put(f"{AUTHORING}/p/deployments/production", params=API))["status"] == "succeeded"
    answers = client.post("/v1/files", data={"purpose": "answers"},
                          files={"file": ("a.jsonl", b'{"text": "Reset it in Settings."}\n')})
    assert answers.status_code == 200, answers.text
    doc = client.post("/v1/files", data={"purpose": "assistants"}, files={"file": ("d.txt", b"Returns take 30 days.")})
    assert doc.status_code == 200, doc.text
    vs = client.post("/v1/vector_stores", json={"name": "vs", "file_ids": [doc.json()["id"]]}).json()
    batch = client.post(f"/v1/vector_stores/{vs['id']}/file_batches", json={"file_ids": [doc.json()["id"]]}).json()
    return {"project": "p", "kbId": "p", "deployment": "production", "engine": "ada", "action": "generateAnswer",
            "vector_store_id": vs["id"], "file_id": doc.json()["id"], "batch_id": batch["id"],
            "answers_file": answers.json()["id"]}


def fill(path: str, names: dict[str, str]) -> str:
    return re.sub(r"\{([^}]+)\}", lambda m: names.get(m.group(1), m.group(1)), path)


QUERY = {"api-version": "2023-04-01", "projectName": "p", "deploymentName": "production"}


def send(client: TestClient, method: str, path: str, names: dict[str, str], body: bytes | None = None, **kw):
    headers = {"content-type": "application/json"} if body is not None else {}
    if path == "/mcp":
        headers["accept"] = "application/json, text/event-stream"
    return client.request(method, fill(path, names), params=QUERY, headers=headers, content=body, **kw)


def refused(response, path: str, *, why: str | None = None) -> None:
    where = f"{response.request.method} {response.request.url.path}"
    assert 400 <= response.status_code < 500, f"{where}: {response.status_code} {response.text[:300]}"
    envelope = dialect(path)
    assert envelope is not None and envelope(response.json()), f"{where}: {response.text[:300]}"
    if why:
        assert why in response.text, f"{where}: {response.text[:300]}"


# Each bad body, and words its refusal must hold.  The text sits in a string of a body shaped as most
# routes expect ({"question": ...}), so a route that reads its body cannot take it for a missing field.
BAD_BODIES = [
    (b'{"question": "reset ' + RAW + b' password", "name": "n' + RAW + b'"}', "surrogate"),
    (b'{"question": "reset ' + ESCAPE + b' password", "name": "n' + ESCAPE + b'"}', "surrogate"),
    (b'{"question": "reset", "x": ' + DEEP + b"}", "nested"),
    (b'{"question": "reset", "n' + RAW + b'": 1}', "surrogate"),  # in a property name
]


def json_routes(client: TestClient) -> list[tuple[str, str]]:
    return [(m, p) for m, p in routes(client) if m in BODY_METHODS and p not in UNSECURED
            and (m, p) not in IGNORES_BODY and (m, p) not in NOT_JSON]


@pytest.mark.parametrize(("body", "why"), BAD_BODIES, ids=["raw-bytes", "escape", "deep", "property-name"])
def test_every_json_route_refuses_bad_text_in_its_dialect(world, body, why):
    client, names = world
    walked = json_routes(client)
    assert len(walked) > 30
    failures = []
    for method, path in walked:
        try:
            refused(send(client, method, path, names, body), path, why=why if path != "/mcp" else None)
        except AssertionError as exc:
            failures.append(str(exc).splitlines()[0])
    assert not failures, "\n".join(failures)


def test_routes_without_a_body_never_read_one(world):
    client, names = world
    for method, path in IGNORES_BODY:
        response = send(client, method, path, names, BAD_BODIES[0][0])
        assert response.status_code < 500, f"{method} {path}: {response.status_code} {response.text[:300]}"


BOUNDARY = "walkboundary"


def multipart(purpose: bytes, filename: bytes, data: bytes) -> bytes:
    """A multipart body built by hand, so that its names may hold bytes a client library would not send."""
    head = f"--{BOUNDARY}\r\n".encode()
    return (head + b'Content-Disposition: form-data; name="purpose"\r\n\r\n' + purpose + b"\r\n"
            + head + b'Content-Disposition: form-data; name="file"; filename="' + filename + b'"\r\n'
            + b"Content-Type: application/octet-stream\r\n\r\n" + data + f"\r\n--{BOUNDARY}--\r\n".encode())


def test_uploaded_files_with_bad_text_are_refused_or_fail_their_job_plainly(world):
    client, names = world
    # an OpenAI file: the raw bytes in the purpose and in the file's name (multipart parts that are not
    # UTF-8 are read as Latin-1, as Starlette reads them), then the bad text inside a JSON Lines document
    for purpose, filename in [(b"answers" + RAW, b"a.jsonl"), (b"answers", b"a" + RAW + b".jsonl")]:
        response = client.post("/v1/files", content=multipart(purpose, filename, b'{"text": "x"}\n'),
                               headers={"content-type": f"multipart/form-data; boundary={BOUNDARY}"})
        if response.status_code == 200:
            assert response.json()["filename"].encode("utf-8"), response.text
        else:
            refused(response, "/v1/files")
    for data, why in [(b'{"text": "x ' + ESCAPE + b'"}\n', "surrogate"), (b'{"text": "x ' + RAW + b'"}\n', "UTF-8"),
                      (b'{"text": "x", "metadata": {"k": "' + ESCAPE + b'"}}\n', "surrogate")]:
        response = client.post("/v1/files", data={"purpose": "answers"}, files={"file": ("a.jsonl", data)})
        refused(response, "/v1/files", why=why)
    # a project's file: an Azure export whose JSON holds the escape, and a table with the raw bytes
    exported = json.dumps({"Assets": {"Qnas": [{"Id": 1, "Answer": "a", "Questions": ["q"]}]}}).replace('"q"', '"q\\ud800"')
    for name, data in [("kb.json", exported.encode()), ("kb.tsv", b"Question\tAnswer\nq " + RAW + b"\ta\n")]:
        response = client.post("/openqna/projects/p/files", params={"name": name}, content=data)
        if response.status_code == 202:
            done = job(client, response)
            assert done["status"] == "failed", done
            assert all(e["code"] != "InternalServerError" for e in done["errors"]), done
        else:
            refused(response, "/openqna/projects/p/files")
    # a development file for calibration, and a test set
    response = client.post("/openqna/projects/p/calibration", content=b"q " + RAW + b"\t1\n")
    refused(response, "/openqna/projects/p/calibration")
    response = client.put("/openqna/projects/p/test-sets/checks", params={"format": "tsv"},
                          content=b"question\texpected_qna_id\nq " + RAW + b"\t1\n")
    refused(response, "/openqna/projects/p/test-sets/checks")


def test_after_the_walk_every_listing_still_answers(world):
    """Runs after the others in this module: what they sent must not have been kept in a form no read can serve."""
    client, names = world
    for method, path in routes(client):
        if method != "GET":
            continue
        response = send(client, method, path, names)
        assert response.status_code < 500, f"GET {path}: {response.status_code} {response.text[:300]}"


def test_a_database_written_before_the_boundary_is_repaired_on_open(tmp_path, caplog):
    """A vector store named with the raw bytes was kept as a "\\ud800" escape in its project's settings, and every
    listing that showed it was a 500; opening such a database repairs it (U+FFFD) and says where."""
    import sqlite3

    store = SQLiteStore(tmp_path)
    _, secret = create_key(store, name="old", role="admin")
    with TestClient(create_app(Service(store, HashEmbedder())), raise_server_exceptions=False) as client:
        client.headers["authorization"] = f"Bearer {secret}"
        made = client.post("/v1/vector_stores", json={"name": "support", "metadata": {"team": "a"}})
        assert made.status_code == 200, made.text
    store.close()
    db = sqlite3.connect(store.path)
    [(settings,)] = db.execute("SELECT settings FROM projects").fetchall()
    db.execute("UPDATE projects SET settings=?", (settings.replace('"support"', '"sup\\ud800port"'),))
    db.execute("UPDATE meta SET value='3' WHERE key='schema_version'")
    db.commit()
    db.close()

    with caplog.at_level("WARNING", logger="openqna.store"):
        store = SQLiteStore(tmp_path)
    assert "1 in projects.settings" in caplog.text
    with TestClient(create_app(Service(store, HashEmbedder())), raise_server_exceptions=False) as client:
        client.headers["authorization"] = f"Bearer {secret}"
        listed = client.get("/v1/vector_stores")
        assert listed.status_code == 200, listed.text
        assert [s["name"] for s in listed.json()["data"]] == ["sup\ufffdport"]
        assert client.get(f"/v1/vector_stores/{made.json()['id']}").status_code == 200


@pytest.mark.parametrize(("doc", "line", "column"), [
    ('{"a": "ok",\n "b": "x\\ud800"}', 2, 9),  # an escape, on the second line
    ('{"a": "\\ud83d\\ude00", "b": "\\uDC00"}', 1, 29),  # a pair is a character; the lone low one after it is not
    (b'{"a": "x\xed\xa0\x80"}', 1, 9),  # the raw bytes
])
def test_strict_json_points_at_the_first_lone_surrogate(doc, line, column):
    from openqna import strict_json

    with pytest.raises(json.JSONDecodeError) as error:
        strict_json.loads(doc)
    assert (error.value.lineno, error.value.colno) == (line, column)
    assert "surrogate" in error.value.msg


@pytest.mark.parametrize("doc", ['{"a": "\\ud83d\\ude00 \ud55c"}', '{"a": "\\\\ud800"}', b'{"a": "\xed\x95\x9c"}'])
def test_strict_json_takes_pairs_hangul_and_escaped_backslashes(doc):
    from openqna import strict_json

    assert strict_json.loads(doc) == json.loads(doc)
