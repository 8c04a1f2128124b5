"""Issue 40: OpenAI files and vector stores keep the project scope of the key that made them.

Through the real HTTP app with real keys and the real ``openai`` client: a key limited to projects
reaches what keys sharing one of its projects made (and what its list names by id), unscoped keys
reach everything, and anything else answers 404 in OpenAI's envelope, exactly as if it did not exist
(``docs/security.md``, "OpenAI files and vector stores").
"""

from __future__ import annotations

import io

import httpx
import openai
import pytest

from conftest import LiveServer
from openqna.auth.bearer import Grant, Principal
from openqna.auth.keys import create_key

EXAMPLES = [["What is the capital of Oregon", "Salem"]]
LINES = b'{"text": "Puppy A is happy."}\n{"text": "Puppy B is sad."}\n'


@pytest.fixture
def live(service):
    with LiveServer(service) as server:
        yield server


@pytest.fixture
def keys(live):
    """Secrets by name: authors and readers of project alpha, an author of beta, unscoped keys of each role."""
    store = live.service.store
    made = {name: create_key(store, name=name, role=role, projects=projects)[1]
            for name, role, projects in (("admin", "admin", None), ("author", "author", None), ("query", "query", None),
                                         ("alpha author", "author", ["alpha"]), ("alpha reader", "query", ["alpha"]),
                                         ("beta author", "author", ["beta"]), ("both", "query", ["Alpha", "beta"]))}
    return made


def client(live, secret: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=live.url + "/v1", api_key=secret, max_retries=0)


def post(live, secret: str, path: str, body: dict) -> httpx.Response:
    return httpx.post(live.url + "/v1" + path, json=body, headers={"Authorization": f"Bearer {secret}"}, timeout=60)


def upload(c: openai.OpenAI, purpose: str = "answers") -> str:
    return c.files.create(file=("puppies.jsonl", io.BytesIO(LINES)), purpose=purpose).id


def listed(c: openai.OpenAI) -> set[str]:
    return {f.id for f in c.files.list()}


def answers(live, secret: str, file_id: str) -> httpx.Response:
    return post(live, secret, "/answers", {"model": "ada", "question": "which puppy is sad?", "examples": EXAMPLES,
                                           "examples_context": "x", "file": file_id})


def assert_not_found(response: httpx.Response, param: str) -> None:
    assert response.status_code == 404, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param, error


def test_a_scoped_author_reads_and_deletes_what_it_uploaded(live, keys):
    mine = client(live, keys["alpha author"])
    file_id = upload(mine)
    assert mine.files.retrieve(file_id).filename == "puppies.jsonl"
    assert mine.files.content(file_id).read() == LINES
    assert file_id in listed(mine)
    assert answers(live, keys["alpha author"], file_id).json()["answers"] == ["Puppy B is sad."]
    found = post(live, keys["alpha author"], "/search", {"query": "sad puppy", "file": file_id})
    assert found.status_code == 200 and len(found.json()["data"]) == 2
    assert mine.files.delete(file_id).deleted
    with pytest.raises(openai.NotFoundError):
        mine.files.retrieve(file_id)


def test_keys_of_other_projects_are_told_nothing_exists(live, keys):
    file_id = upload(client(live, keys["alpha author"]))
    theirs = client(live, keys["beta author"])
    assert file_id not in listed(theirs)
    for call in (theirs.files.retrieve, theirs.files.content, theirs.files.delete):
        with pytest.raises(openai.NotFoundError, match=f"No such File object: {file_id}"):
            call(file_id)
    assert_not_found(answers(live, keys["beta author"], file_id), "file")
    assert_not_found(post(live, keys["beta author"], "/search", {"query": "sad", "file": file_id}), "file")
    assert_not_found(post(live, keys["beta author"], "/engines/ada/search", {"query": "sad", "file": file_id}), "file")
    assert client(live, keys["alpha author"]).files.retrieve(file_id).id == file_id  # still there


def test_a_reader_of_the_project_reads_but_may_not_delete(live, keys):
    file_id = upload(client(live, keys["alpha author"]))
    reader = client(live, keys["alpha reader"])
    assert file_id in listed(reader) and reader.files.content(file_id).read() == LINES
    assert answers(live, keys["alpha reader"], file_id).status_code == 200
    with pytest.raises(openai.PermissionDeniedError):
        reader.files.delete(file_id)
    both = client(live, keys["both"])  # a key of several projects reaches the files of each (names ignore case)
    assert file_id in listed(both) and both.files.retrieve(file_id).id == file_id


def test_unscoped_keys_reach_every_file_and_scoped_keys_only_their_own(live, keys):
    alpha = upload(client(live, keys["alpha author"]))
    beta = upload(client(live, keys["beta author"]))
    shared = upload(client(live, keys["author"]))  # made by an unscoped key: filed under no project
    for name in ("query", "author", "admin"):
        assert {alpha, beta, shared} <= listed(client(live, keys[name]))
    assert client(live, keys["query"]).files.content(beta).read() == LINES
    with pytest.raises(openai.PermissionDeniedError):
        client(live, keys["query"]).files.delete(beta)
    assert listed(client(live, keys["alpha author"])) == {alpha}
    with pytest.raises(openai.NotFoundError):
        client(live, keys["alpha author"]).files.retrieve(shared)
    # a key whose list names the file's id reaches it, as before scopes were kept
    named = create_key(live.service.store, role="query", projects=[shared])[1]
    assert listed(client(live, named)) == {shared}
    assert client(live, keys["author"]).files.delete(beta).deleted


def test_vector_stores_keep_the_scope_too(live, keys):
    mine, theirs = client(live, keys["alpha author"]), client(live, keys["beta author"])
    own_file, their_file = upload(mine, "assistants"), upload(theirs, "assistants")
    vs = mine.vector_stores.create(name="alpha docs", file_ids=[own_file]).id
    assert mine.vector_stores.retrieve(vs).name == "alpha docs"
    assert [s.id for s in mine.vector_stores.list()] == [vs]
    assert {f.id for f in client(live, keys["alpha reader"]).vector_stores.files.list(vector_store_id=vs)} == {own_file}
    assert vs in {s.id for s in client(live, keys["query"]).vector_stores.list()}
    assert [s.id for s in theirs.vector_stores.list()] == []
    for call in (lambda: theirs.vector_stores.retrieve(vs), lambda: theirs.vector_stores.delete(vs),
                 lambda: theirs.vector_stores.search(vs, query="puppy"),
                 lambda: theirs.vector_stores.files.list(vector_store_id=vs)):
        with pytest.raises(openai.NotFoundError, match=f"No vector store found with id '{vs}'"):
            call()
    # a file id is reached as on /v1/files: another project's file cannot be attached, nor start a store
    for call in (lambda: mine.vector_stores.files.create(vector_store_id=vs, file_id=their_file),
                 lambda: mine.vector_stores.file_batches.create(vector_store_id=vs, file_ids=[their_file]),
                 lambda: mine.vector_stores.create(name="x", file_ids=[their_file])):
        with pytest.raises(openai.NotFoundError, match=f"No such File object: {their_file}"):
            call()
    assert [s.id for s in mine.vector_stores.list()] == [vs]  # the refused create made nothing
    with pytest.raises(openai.PermissionDeniedError):
        client(live, keys["alpha reader"]).vector_stores.delete(vs)
    assert mine.vector_stores.delete(vs).deleted


def test_the_scope_of_what_a_caller_makes():
    """What a key or token files its uploads under, and what that scope lets others reach."""
    from openqna.auth.keys import reaches, scope_of

    token = Principal("https://idp", "u", (Grant("author", ("alpha",)), Grant("query", None)))
    assert scope_of(token, "author") == ["alpha"] and scope_of(None, "author") is None
    assert reaches(token, "query", "file-1", ["beta"]) and not reaches(token, "author", "file-1", ["beta"])
    assert reaches(token, "author", "file-1", ["ALPHA"]) and reaches(None, "admin", "file-1", ["beta"])
