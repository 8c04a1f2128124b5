"""Embedders: ONNX MiniLM parity with sentence-transformers, the OpenAI client, the test double."""

from __future__ import annotations

import json
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from openqna.models import embedder as embedder_module  # noqa: E402
from openqna.models.embedder import (  # noqa: E402
    Embedder,
    EmbeddingServiceError,
    HashEmbedder,
    LocalMiniLM,
    OpenAIEmbedder,
    QueryCache,
    get_embedder,
)
from openqna.models.onnx_export import (  # noqa: E402
    MINILM,
    bundled_model_dir,
    load_tokenizer,
)

LONG_PARAGRAPH = " ".join(
    f"Clause {i}: members may borrow up to {i + 3} books, renew them online twice, "
    f"and must return damaged items to the {['north', 'south', 'east'][i % 3]} desk."
    for i in range(20)
)

SENTENCES = [
    "How do I reset my password?",
    "I forgot my password, how can I change it?",
    "What are your opening hours on public holidays?",
    "The cat sat on the mat.",
    "Quantum entanglement links the states of two particles.",
    "Can I bring my dog into the store?",
    "Café, naïve, résumé, Æsir and straße: accents and ligatures.",
    "ALL CAPS QUESTION ABOUT REFUNDS!!!",
    "refund",
    "Order #12345 was shipped on 2024-03-07 to 221B Baker Street.",
    "emoji support 🚀🔥 in queries?",
    "https://example.com/help?topic=billing&lang=en",
    "营业时间是几点？",
    "我想退货，应该怎么办？",
    "東京の天気はどうですか？",
    "パスワードを忘れた場合はどうすればいいですか。",
    "¿Dónde está la estación de tren?",
    "Wie kann ich mein Abonnement kündigen?",
    "",
    LONG_PARAGRAPH,
]


@pytest.fixture(scope="module")
def local(tmp_path_factory) -> LocalMiniLM:
    """One model per test module, exported fresh into an empty folder (the auto-export path)."""
    model_dir = tmp_path_factory.mktemp("models")
    model = LocalMiniLM(model_dir=model_dir)
    assert sorted(p.name for p in model_dir.iterdir()) == [MINILM.onnx_filename]  # no temp left over
    yield model
    model.onnx_path.unlink()  # 90 MB; pytest keeps old tmp dirs around


@pytest.fixture(scope="module")
def reference() -> np.ndarray:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(bundled_model_dir()), device="cpu")
    return model.encode(SENTENCES, normalize_embeddings=True, convert_to_numpy=True)


# --- LocalMiniLM -------------------------------------------------------------


def test_long_paragraph_exceeds_max_tokens():
    assert len(load_tokenizer(max_tokens=512).encode(LONG_PARAGRAPH).ids) > 256


@pytest.mark.slow
def test_parity_with_sentence_transformers(local, reference):
    got = local.embed(SENTENCES)
    assert got.shape == (len(SENTENCES), 384) and got.dtype == np.float32
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    cosines = (got * reference).sum(axis=1)
    worst = int(np.argmin(cosines))
    assert cosines.min() >= 0.9999, f"{SENTENCES[worst][:40]!r}: cos {cosines[worst]}"


def test_batch_equals_one_by_one_in_order(local):
    batch = local.embed(SENTENCES)  # 20 texts: two length-sorted batches of 16 and 4
    alone = np.concatenate([local.embed([text]) for text in SENTENCES])
    np.testing.assert_allclose(batch, alone, atol=1e-5)


def test_empty_input(local):
    out = local.embed([])
    assert out.shape == (0, 384) and out.dtype == np.float32


def test_lone_surrogates_are_embedded_as_replacement_characters(local):
    """Undecodable command-line bytes arrive as lone surrogates; the tokenizer refuses them raw."""
    got = local.embed(["reset my password \ud800", "reset my password \udcff"])
    expected = local.embed(["reset my password \ufffd"])
    assert np.allclose(got, np.repeat(expected, 2, axis=0), atol=1e-6)


def test_query_cache_returns_independent_copies(local):
    first = local.embed(["cache me"])
    first[:] = 0.0
    second = local.embed(["cache me"])
    assert np.isclose(np.linalg.norm(second), 1.0)


def test_concurrent_calls_agree(local):
    expected = local.embed(SENTENCES[:6])
    jobs = [SENTENCES[:6]] * 4 + [[text] for text in SENTENCES[:6]]
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(local.embed, jobs))
    for result in results[:4]:
        np.testing.assert_allclose(result, expected, atol=1e-5)
    np.testing.assert_allclose(np.concatenate(results[4:]), expected, atol=1e-5)


def test_missing_torch_gives_actionable_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise ImportError
    with pytest.raises(RuntimeError, match=r"make model.*openqna\[export\]"):
        LocalMiniLM(model_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


# --- OpenAIEmbedder ----------------------------------------------------------


def _fake_vector(text: str) -> list[float]:
    """Deterministic, deliberately not unit-length, so normalisation is tested too."""
    return [len(text) + 1.0, float(sum(map(ord, text)) % 97), 2.0, 3.0, 5.0]


class _FakeEmbeddings(BaseHTTPRequestHandler):
    requests: list[dict] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        auth = self.headers.get("Authorization")
        self.requests.append({"path": self.path, "auth": auth, "body": body})
        if any("boom" in text for text in body["input"]):
            self._reply(500, {"error": {"message": "model exploded"}})
            return
        # Reversed, so the client has to sort by index.
        data = [
            {"object": "embedding", "index": i, "embedding": _fake_vector(text)}
            for i, text in enumerate(body["input"])
        ][::-1]
        self._reply(200, {"object": "list", "model": body["model"], "data": data})

    def _reply(self, status: int, payload: dict) -> None:
        raw = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def fake_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeEmbeddings)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


@pytest.fixture
def requests_seen(fake_server) -> list[dict]:
    _FakeEmbeddings.requests.clear()
    return _FakeEmbeddings.requests


def _expected(texts: list[str]) -> np.ndarray:
    vectors = np.array([_fake_vector(t) for t in texts], dtype=np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_openai_request_shape_order_and_batching(fake_server, requests_seen):
    texts = [f"question number {i}" for i in range(7)]
    client = OpenAIEmbedder(fake_server + "/", "emb-model", api_key="sk-test", batch_size=3)
    out = client.embed(texts)

    assert client.name == "openai:emb-model" and client.dim == 5
    np.testing.assert_allclose(out, _expected(texts), rtol=1e-6)
    assert [r["path"] for r in requests_seen] == ["/v1/embeddings"] * 3
    assert {r["auth"] for r in requests_seen} == {"Bearer sk-test"}
    assert [r["body"] for r in requests_seen] == [
        {"model": "emb-model", "input": texts[0:3]},
        {"model": "emb-model", "input": texts[3:6]},
        {"model": "emb-model", "input": texts[6:7]},
    ]


def test_openai_dim_probe_and_empty_input(fake_server, requests_seen):
    client = OpenAIEmbedder(fake_server, "m")
    assert client.embed([]).shape == (0, 5)  # learnt the dim with one probe request
    assert len(requests_seen) == 1 and requests_seen[0]["auth"] is None
    assert OpenAIEmbedder(fake_server, "m", dim=5).embed([]).shape == (0, 5)
    assert len(requests_seen) == 1


def test_openai_dim_mismatch_is_an_error(fake_server, requests_seen):
    with pytest.raises(EmbeddingServiceError, match="5-d embeddings, expected 384"):
        OpenAIEmbedder(fake_server, "m", dim=384).embed(["hello"])


def test_openai_http_error_is_clear(fake_server, requests_seen):
    with pytest.raises(EmbeddingServiceError, match="HTTP 500.*model exploded"):
        OpenAIEmbedder(fake_server, "m").embed(["fine", "boom"])


def test_openai_unreachable_is_clear():
    with ThreadingHTTPServer(("127.0.0.1", 0), _FakeEmbeddings) as closed:
        port = closed.server_address[1]  # bound then closed: nothing listens there
    with pytest.raises(EmbeddingServiceError, match="request to .* failed"):
        OpenAIEmbedder(f"http://127.0.0.1:{port}/v1", "m", timeout=2.0).embed(["hi"])


# --- HashEmbedder and the factory ----------------------------------------------


def test_hash_embedder_is_deterministic_and_normalised():
    texts = ["reset my password", "reset my password", "opening hours", ""]
    first, second = HashEmbedder().embed(texts), HashEmbedder().embed(texts)
    np.testing.assert_array_equal(first, second)
    assert first.shape == (4, 64) and first.dtype == np.float32
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0)
    assert first[0] @ first[1] == pytest.approx(1.0) and first[0] @ first[2] < 0.9
    assert HashEmbedder().embed([]).shape == (0, 64)


def test_get_embedder_specs_and_caching(fake_server, requests_seen, monkeypatch):
    monkeypatch.setattr(embedder_module, "_INSTANCES", {})
    monkeypatch.setenv("OPENQNA_EMBEDDER", "hash")
    hashed = get_embedder()
    assert isinstance(hashed, HashEmbedder) and isinstance(hashed, Embedder)
    assert get_embedder(" HASH ") is hashed

    monkeypatch.setenv("OPENQNA_EMBEDDINGS_BASE_URL", fake_server)
    monkeypatch.setenv("OPENQNA_EMBEDDINGS_API_KEY", "sk-env")
    monkeypatch.setenv("OPENQNA_EMBEDDINGS_MODEL", "env-model")
    remote = get_embedder("openai")
    assert remote.name == "openai:env-model" and remote.embed(["x"]).shape == (1, 5)
    assert requests_seen[0]["auth"] == "Bearer sk-env"

    with pytest.raises(ValueError, match="unknown embedder 'nope'"):
        get_embedder("nope")


def test_query_cache_embeds_a_repeated_question_once_and_evicts_the_oldest():
    calls = []

    def run(texts):
        calls.append(list(texts))
        return np.stack([np.full(3, float(len(t)), np.float32) for t in texts])

    cache = QueryCache(run, size=2)
    assert cache.embed(["a"])[0, 0] == 1.0 and cache.embed(["a"])[0, 0] == 1.0
    assert calls == [["a"]]
    cache.embed(["bb"])
    cache.embed(["a"])  # "a" is now the newest, "bb" the oldest
    cache.embed(["ccc"])  # evicts "bb"
    assert len(cache) == 2
    cache.embed(["bb"])
    assert calls == [["a"], ["bb"], ["ccc"], ["bb"]]
    cache.embed(["a", "a"])  # batches are never cached
    assert calls[-1] == ["a", "a"]
    uncached = QueryCache(run, size=0)
    uncached.embed(["a"]), uncached.embed(["a"])
    assert len(uncached) == 0 and calls[-2:] == [["a"], ["a"]]
