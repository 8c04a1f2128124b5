"""``POST /v1/embeddings`` over real HTTP with the modern ``openai`` client (and openai 0.25's, in its own venv).

The vectors must be the server's embedder's, the ones openqna compares with a connected table's column
(``table connect --embedder local``), whichever encoding the client asks for; refusals come back as the
client's own exception types with a message that says what to send instead.
"""

from __future__ import annotations

import asyncio
import json
import subprocess

import httpx
import numpy as np
import openai
import pytest

from conftest import REPO, LiveServer
from openqna.auth.keys import create_key
from openqna.formats.limits import LIMITS
from openqna.kb.service import Service
from openqna.models import gpt2
from openqna.models.embedder import HashEmbedder
from openqna.server import create_app
from openqna.store.sqlite import SQLiteStore

TEXTS = [f"How long does shipping to region {n} take?" for n in range(37)] + [
    "Returns are accepted within 30 days of purchase with the receipt.", "电池充满需要多久？"]


@pytest.fixture(scope="module")
def server(tmp_path_factory, embedder):
    store = SQLiteStore(tmp_path_factory.mktemp("embeddings"))
    with LiveServer(Service(store, embedder)) as served:
        yield served
    store.close()


def client(url: str, key: str = "anything") -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0)


def cosines(got: list[list[float]], want: np.ndarray) -> np.ndarray:
    vectors = np.asarray(got, dtype=np.float32)
    assert vectors.shape == want.shape
    return np.sum(vectors * want, axis=1) / np.linalg.norm(vectors, axis=1)


@pytest.mark.parametrize("encoding", ["float", "base64"])
def test_vectors_are_the_servers_own_in_order(server, embedder, encoding):
    """Float and base64 (which the client asks for by default and decodes) give openqna's own vectors, each at its
    index, across several of the request's chunks of 16; usage counts the texts' GPT-2 tokens."""
    kwargs = {"encoding_format": "float"} if encoding == "float" else {}
    result = client(server.url).embeddings.create(model="local", input=TEXTS, **kwargs)
    assert result.object == "list" and result.model == embedder.name == "minilm-l6-v2/onnx-fp32"
    assert [d.index for d in result.data] == list(range(len(TEXTS))) and {d.object for d in result.data} == {"embedding"}
    assert cosines([d.embedding for d in result.data], embedder.embed(TEXTS)).min() >= 0.9999
    tokens = sum(len(gpt2.encode(t)) for t in TEXTS)
    assert result.usage.prompt_tokens == result.usage.total_tokens == tokens


def test_a_single_string_is_the_vector_openqna_asks_with(server, embedder):
    """A question's vector here is the one openqna's search embeds it as (one text: the query cache's path)."""
    question = "can I send it back?"
    one = client(server.url).embeddings.create(model="local", input=question, encoding_format="float")
    assert len(one.data) == 1 and cosines([one.data[0].embedding], embedder.embed([question]))[0] >= 0.9999


def test_raw_base64_is_little_endian_float32(server, embedder):
    import base64

    import httpx

    r = httpx.post(server.url + "/v1/embeddings", timeout=60,
                   json={"model": "all-MiniLM-L6-v2", "input": ["hello"], "encoding_format": "base64"})
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    vector = np.frombuffer(base64.b64decode(r.json()["data"][0]["embedding"]), dtype="<f4")
    assert vector.shape == (embedder.dim,) and float(vector @ embedder.embed(["hello"])[0]) >= 0.9999


@pytest.mark.parametrize("model", ["minilm-l6-v2/onnx-fp32", "local", "LOCAL", "all-MiniLM-L6-v2",
                                   "sentence-transformers/all-MiniLM-L6-v2"])
def test_every_name_of_the_model_is_accepted(server, model):
    result = client(server.url).embeddings.create(model=model, input="hi", dimensions=384, user="u-1")
    assert result.model == "minilm-l6-v2/onnx-fp32" and len(result.data[0].embedding) == 384


@pytest.mark.parametrize(("kwargs", "error", "param", "words"), [
    ({"model": "text-embedding-3-small", "input": "hi"}, openai.NotFoundError, "model",
     "named any of 'minilm-l6-v2/onnx-fp32', 'local', 'all-MiniLM-L6-v2'"),
    ({"model": "local", "input": "hi", "dimensions": 256}, openai.BadRequestError, "dimensions", "'dimensions' must be 384"),
    ({"model": "local", "input": [15496, 995]}, openai.BadRequestError, "input", "send the text itself"),
    ({"model": "local", "input": [[15496, 995], [5303]]}, openai.BadRequestError, "input", "send the text itself"),
    ({"model": "local", "input": ""}, openai.BadRequestError, "input", "'input' is an empty string"),
    ({"model": "local", "input": ["a", ""]}, openai.BadRequestError, "input", "'input[1]' is an empty string"),
    ({"model": "local", "input": []}, openai.BadRequestError, "input", "'input' is an empty array"),
    ({"model": "local", "input": ["a"] * (LIMITS.embedding_inputs + 1)}, openai.BadRequestError, "input",
     "'input' holds 2,049 texts; the limit is 2,048"),
    ({"model": "local", "input": ["a", "b" * (LIMITS.embedding_input_chars + 1)]}, openai.BadRequestError, "input",
     "'input[1]' is 32,769 characters long; the limit is 32,768"),
    ({"model": "local", "input": "hi", "encoding_format": "int8"}, openai.BadRequestError, "encoding_format",
     "'encoding_format' must be 'float' or 'base64'"),
    ({"model": "local", "input": "hi", "extra_body": {"truncate": True}}, openai.BadRequestError, "truncate",
     "Unrecognized request argument supplied: truncate"),
])
def test_refusals_are_the_clients_exceptions_with_the_reason(server, kwargs, error, param, words):
    with pytest.raises(error) as refused:
        client(server.url).embeddings.create(**kwargs)
    assert words in refused.value.message
    assert refused.value.body["type"] == "invalid_request_error"  # the client hands over the envelope's "error"
    assert refused.value.body["param"] == param


def test_an_engines_path_names_the_model(server, embedder):
    """openai 0.x's Embedding.create(engine=...) posts to /v1/engines/{engine}/embeddings with no model: it was a
    404 for a route; the engine is the model, and a body naming another one is told to send one of them."""
    url = f"{server.url}/v1/engines/local/embeddings"
    got = httpx.post(url, json={"input": ["hi"]}).json()
    assert cosines([got["data"][0]["embedding"]], embedder.embed(["hi"])).min() >= 0.9999
    assert httpx.post(f"{server.url}/v1/engines/ada/embeddings", json={"input": "hi"}).status_code == 404
    spaced = httpx.post(f"{server.url}/v1/engines/{embedder.name}/embeddings", json={"input": "hi"})  # with its slash
    assert spaced.status_code == 200 and spaced.json()["model"] == embedder.name
    clash = httpx.post(url, json={"input": "hi", "model": "all-MiniLM-L6-v2"})
    assert clash.status_code == 400 and "send one of them" in clash.json()["error"]["message"]


def test_keys_apply_and_any_valid_key_may_embed(live):
    """A secured server refuses a missing or wrong key (401, OpenAI's envelope); a query key limited to a project
    embeds all the same, since the answer reads no knowledge base."""
    _, scoped = create_key(live.service.store, role="query", projects=["hr"])
    with pytest.raises(openai.AuthenticationError) as refused:
        client(live.url, "not-a-key").embeddings.create(model="local", input="hi")
    assert "Incorrect API key" in refused.value.message
    assert len(client(live.url, scoped).embeddings.create(model="local", input="hi").data) == 1


def test_a_request_stops_embedding_when_its_client_has_gone(tmp_path):
    """Between chunks of 16 the route asks whether its client is still there: a client gone after the first chunk
    costs one chunk, not 64 texts."""
    runs = []

    class Counting(HashEmbedder):
        def embed(self, texts):
            runs.append(len(texts))
            return super().embed(texts)

    store = SQLiteStore(tmp_path / "data")
    app = create_app(Service(store, Counting()))
    body = json.dumps({"model": "hash-trigram/64", "input": [f"text {n}" for n in range(64)]}).encode()
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive():
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message):
        pass

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": "/v1/embeddings", "raw_path": b"/v1/embeddings", "query_string": b"", "root_path": "",
             "headers": [(b"content-type", b"application/json"), (b"host", b"127.0.0.1")],
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}
    asyncio.run(app(scope, receive, send))
    store.close()
    assert runs == [16]


@pytest.mark.clients
def test_legacy_openai_client(server, embedder):
    """openai 0.25.0's Embedding.create: base64 by default (decoded by the client), float when asked, errors as
    InvalidRequestError."""
    python = REPO / ".venv-legacy" / "bin" / "python"
    assert python.exists(), "run `make test` (it creates .venv-legacy with openai==0.25.0)"
    code = """
import json, sys
import openai
openai.api_base, openai.api_key = sys.argv[1] + "/v1", "k"
texts = ["How long does shipping take?", "Returns are accepted within 30 days."]
default = openai.Embedding.create(model="local", input=texts)
floats = openai.Embedding.create(model="all-MiniLM-L6-v2", input=texts, encoding_format="float")
try:
    openai.Embedding.create(model="ada", input="hi")
    error = None
except openai.error.InvalidRequestError as exc:
    error = [exc.http_status, str(exc)]
print(json.dumps({"default": [d["embedding"] for d in default["data"]], "float": [d["embedding"] for d in floats["data"]],
                  "usage": default["usage"]["total_tokens"], "model": default["model"], "error": error}))
"""
    proc = subprocess.run([str(python), "-c", code, server.url], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    want = embedder.embed(["How long does shipping take?", "Returns are accepted within 30 days."])
    assert cosines(seen["default"], want).min() >= 0.9999 and cosines(seen["float"], want).min() >= 0.9999
    assert seen["model"] == "minilm-l6-v2/onnx-fp32" and seen["usage"] > 0
    assert seen["error"][0] == 404 and "'local'" in seen["error"][1]
