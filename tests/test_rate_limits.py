"""OPENQNA_RATE_LIMIT: a token bucket per caller, and each surface's 429 as its own client reads it.

The buckets are unit-tested on a clock of their own; the server is the real app under uvicorn, asked through raw
HTTP for each surface's envelope and through the Azure SDK and the ``openai`` client, whose retry policies read
``Retry-After`` and make a throttled caller slower, not failed.
"""

from __future__ import annotations

import time

import httpx
import openai
import pytest
from azure.ai.language.questionanswering import QuestionAnsweringClient
from azure.core.credentials import AzureKeyCredential

from conftest import LiveServer
from openqna.api.rate_limits import Buckets, RateLimits, counted
from openqna.auth.keys import create_key
from test_service import surface_kb

QUERY = "/language/:query-knowledgebases"
PARAMS = {"projectName": "surface", "deploymentName": "test", "api-version": "2021-10-01"}


def test_a_bucket_holds_a_burst_and_refills_at_the_rate() -> None:
    now = [0.0]
    buckets = Buckets(rate=2.0, burst=3.0, clock=lambda: now[0], most=2)
    assert [buckets.take("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert buckets.take("a") == pytest.approx(0.5)  # refused: a token in half a second, none spent
    now[0] = 0.25
    assert buckets.take("a") == pytest.approx(0.25)
    now[0] = 0.5
    assert buckets.take("a") == 0.0 and buckets.take("a") == pytest.approx(0.5)
    assert buckets.take("b") == 0.0  # a bucket per caller
    now[0] = 100.0  # a long pause fills the bucket, never past the burst
    assert [buckets.take("a") for _ in range(4)][3] == pytest.approx(0.5)
    buckets.take("b")
    buckets.take("c")  # a third caller: the one seen longest ago ("a") is forgotten, and starts full again
    assert [buckets.take("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    for rate, burst in ((0.5, 0.5), (0.2, 0.0)):  # a burst under one token (given, or twice a slow rate) holds one
        assert RateLimits(lambda *_: None, rate=rate, burst=burst).buckets.take("a") == 0.0  # type: ignore[union-attr]
    assert RateLimits(lambda *_: None, rate=0.0).buckets is None  # 0: no limit
    assert not counted("/healthz") and not counted("/readyz") and not counted("/") and not counted("/console/app.js")
    assert counted(QUERY) and counted("/v1/embeddings") and counted("/openqna/projects")


@pytest.fixture
def limited(service, monkeypatch):
    monkeypatch.setenv("OPENQNA_RATE_LIMIT", "2")
    monkeypatch.setenv("OPENQNA_RATE_BURST", "2")
    service.import_content("surface", surface_kb())
    with LiveServer(service) as server:
        yield server


def exhaust(send) -> httpx.Response:
    """Requests until one is refused (the burst is 2: the third)."""
    answers = [send() for _ in range(3)]
    assert [a.status_code for a in answers[:2]] != [429, 429], answers
    assert answers[2].status_code == 429, answers[2].text
    assert answers[2].headers["Retry-After"] in ("1", "2")
    return answers[2]


def test_each_surface_refuses_in_its_own_dialect(limited):
    url, store = limited.url, limited.service.store
    keys = [create_key(store, name=f"k{i}", role="admin")[1] for i in range(7)]
    ask = {"question": "how do I charge it?"}

    azure = exhaust(lambda: httpx.post(url + QUERY, params=PARAMS, json=ask, headers={"api-key": keys[0]}))
    assert azure.json()["error"]["code"] == "TooManyRequests" and azure.headers["x-ms-error-code"] == "TooManyRequests"
    assert "OPENQNA_RATE_LIMIT" in azure.json()["error"]["message"]
    # another key has a bucket of its own; /healthz is never counted
    assert httpx.post(url + QUERY, params=PARAMS, json=ask, headers={"api-key": keys[1]}).status_code == 200
    assert {httpx.get(url + "/healthz").status_code for _ in range(6)} == {200}
    assert [httpx.get(url + "/readyz").json()["status"] for _ in range(6)] == ["ready"] * 6  # the store answers

    v1 = exhaust(lambda: httpx.post(url + "/v1/embeddings", json={"input": "hi", "model": "m"},
                                    headers={"Authorization": f"Bearer {keys[2]}"}))
    assert v1.json()["error"]["code"] == "rate_limit_exceeded" and v1.json()["error"]["type"] == "requests"
    assert 0 < int(v1.headers["retry-after-ms"]) <= 1000
    tools = exhaust(lambda: httpx.get(url + "/get_related_surface", params={"subject": "charging"},
                                      headers={"api-key": keys[3]}))
    assert tools.json()["error"]["code"] == "rate_limited"
    qnamaker = exhaust(lambda: httpx.post(url + "/qnamaker/knowledgebases/surface/generateAnswer", json=ask,
                                          headers={"Authorization": f"EndpointKey {keys[4]}"}))
    assert qnamaker.json()["error"]["code"] == "QuotaExceeded"  # QnA Maker's ErrorCodeType has no TooManyRequests
    mcp = exhaust(lambda: httpx.post(url + "/mcp", headers={"api-key": keys[5], "Accept": "application/json, text/event-stream"},
                                     json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
    assert mcp.json()["error"]["code"] == -32000 and mcp.json()["jsonrpc"] == "2.0"
    # without a key a caller is its address: refused as unknown twice, then throttled
    anonymous = exhaust(lambda: httpx.post(url + QUERY, params=PARAMS, json=ask))
    assert anonymous.json()["error"]["code"] == "TooManyRequests"


def test_a_different_wrong_key_each_time_is_throttled_by_its_address(service, monkeypatch):
    """Each distinct secret had a bucket of its own, so a flood rotating wrong keys was never throttled (25 401s at a
    limit of 5 a second).  A request with a key also takes from its address's bucket, ten times a caller's: at one
    request in 100 s, bursts of 1, the address holds 10, refilled far slower than any request takes."""
    monkeypatch.setenv("OPENQNA_RATE_LIMIT", "0.01")
    monkeypatch.setenv("OPENQNA_RATE_BURST", "1")
    create_key(service.store, name="real", role="admin")  # keys exist: a wrong one is refused
    with LiveServer(service) as server:
        answers = [httpx.post(server.url + QUERY, params=PARAMS, json={"question": "hi"},
                              headers={"api-key": f"oq_wrong{i}"}).status_code for i in range(12)]
    assert answers[:10] == [401] * 10 and answers[10:] == [429, 429], answers


def test_the_azure_sdk_and_the_openai_client_wait_and_retry(limited):
    key = create_key(limited.service.store, name="bot", role="admin")[1]
    client = QuestionAnsweringClient(limited.url, AzureKeyCredential(key))
    started = time.monotonic()
    for _ in range(5):  # 2 at once, then one every half second: the SDK sleeps on Retry-After and asks again
        answers = client.get_answers(question="how do I charge it?", project_name="surface", deployment_name="test")
        assert answers.answers and answers.answers[0].answer
    assert time.monotonic() - started >= 1.0  # three requests had to wait for their token

    other = create_key(limited.service.store, name="agent", role="admin")[1]
    retrying = openai.OpenAI(base_url=limited.url + "/v1", api_key=other, max_retries=5)
    for _ in range(4):
        assert len(retrying.embeddings.create(input="charging", model="all-MiniLM-L6-v2").data[0].embedding)
    eager = openai.OpenAI(base_url=limited.url + "/v1", api_key=other, max_retries=0)
    with pytest.raises(openai.RateLimitError) as refused:
        for _ in range(3):
            eager.embeddings.create(input="charging", model="all-MiniLM-L6-v2")
    assert "OPENQNA_RATE_LIMIT" in str(refused.value)
