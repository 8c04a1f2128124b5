"""The MCP surface through the official ``mcp`` client: over stdio (a child process) and over streamable HTTP
(a real uvicorn server), the same scenario on both, then keys over HTTP."""

from __future__ import annotations

import contextlib
import json
import os
import sys

import anyio
import httpx
import httpx2  # the HTTP client the mcp SDK is built on
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from conftest import LiveServer
from openqna.auth.keys import create_key
from openqna.filters.nodes import Column
from openqna.kinds.tables import TableSchema, create_table, load_rows
from openqna.records import QnA

PRODUCTS = [
    {"name": "Trail tent", "description": "A two-person tent for camping and hiking trips.", "price": 149.0,
     "tags": ["outdoor", "camping"]},
    {"name": "Camping mug", "description": "An enamel mug for coffee at the campsite.", "price": 12.5,
     "tags": ["outdoor", "kitchen"]},
    {"name": "Desk lamp", "description": "An LED lamp for reading at your desk.", "price": 18.0, "tags": ["home"]},
]


@pytest.fixture
def kbs(service):
    """'faq' (QnAs with metadata), 'products' (a typed table) and 'hr' (for scoped keys)."""
    service.create_project("faq", description="Billing and account questions")
    service.upsert("faq", [
        QnA(["How can I pay my invoice?", "payment methods"],
            "Pay invoices by card or bank transfer on the Billing page.",
            source="billing.md", metadata={"category": "billing"}),
        QnA(["How do I reset my password?"], "Use the 'Forgot password' link on the sign-in page.",
            source="account.md", metadata={"category": "account"}),
        QnA(["How do I close my account?"], "Write to support; we close accounts within two days.",
            source="account.md", metadata={"category": "account"}),
    ])
    schema = TableSchema([Column("name", "String"), Column("description", "String"), Column("price", "Float64"),
                          Column("tags", "Array(String)")], text=["description"], title="name")
    create_table(service, "products", schema, description="Product catalogue")
    load_rows(service, "products", "products.jsonl", "\n".join(json.dumps(p) for p in PRODUCTS).encode())
    service.create_project("hr", description="Holidays and expenses")
    service.upsert("hr", [QnA(["How many days of holiday do I get?"], "Everyone gets 25 days of paid holiday.")])
    return service


# ------------------------------------------------------------------------------------------ scenario
def pick(d: dict, expected: dict) -> dict:
    """``d`` restricted to ``expected``'s keys, to compare with it."""
    return {k: d.get(k) for k in expected}


def tool_text(result) -> str:
    return " ".join(c.text for c in result.content if c.type == "text")


async def check_tools(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == {"list_knowledge_bases", "search", "ask"}
    for tool in tools.values():
        assert tool.annotations.read_only_hint is True and tool.annotations.destructive_hint is False
        assert len(tool.description) > 80 and tool.output_schema["type"] == "object"
    search = tools["search"].input_schema
    assert search["required"] == ["kb", "subject"]
    limit = {"minimum": 1, "maximum": 20, "default": 4}  # OPENQNA_TOOLS_MAX_LIMIT, as the HTTP tools
    assert pick(search["properties"]["limit"], limit) == limit
    where = search["properties"]["where"]["description"]
    assert "ClickHouse" in where and "hasAny(" in where and "INTERVAL" in where and "list_knowledge_bases" in where
    ask = tools["ask"].input_schema
    assert ask["required"] == ["project", "question"] and ask["properties"]["top"]["default"] == 3


async def check_listing(client: Client) -> None:
    result = await client.call_tool("list_knowledge_bases", {})
    assert not result.is_error
    kbs = {kb["name"]: kb for kb in result.structured_content["knowledge_bases"]}
    assert set(kbs) == {"faq", "products", "hr"}
    faq = {"description": "Billing and account questions", "kind": "project", "count": 3}
    assert pick(kbs["faq"], faq) == faq
    assert {"name": "category", "type": "String"} in kbs["faq"]["columns"]
    assert kbs["products"]["kind"] == "table" and kbs["products"]["count"] == 3
    typed = {"name": "String", "description": "String", "price": "Float64", "tags": "Array(String)"}
    assert pick({c["name"]: c["type"] for c in kbs["products"]["columns"]}, typed) == typed
    assert json.loads(tool_text(result)) == result.structured_content  # the same JSON for text-only clients


async def check_search(client: Client) -> None:
    result = await client.call_tool("search", {"kb": "faq", "subject": "which payment options do I have for a bill"})
    assert not result.is_error
    hits = result.structured_content["hits"]
    assert result.structured_content["num_retrieved"] == len(hits) == 3  # default limit 4, three records
    top = hits[0]
    expected = {"title": "How can I pay my invoice?", "source": "billing.md", "kind": "qna",
                "metadata": {"category": "billing"}}
    assert pick(top, expected) == expected
    assert top["text"].startswith("Pay invoices") and top["score"] > hits[1]["score"] and 0 <= top["score"] <= 1

    filtered = await client.call_tool("search", {"kb": "faq", "subject": "which payment options do I have",
                                                 "where": "category = 'account'", "limit": 1})
    assert [h["metadata"]["category"] for h in filtered.structured_content["hits"]] == ["account"]

    rows = await client.call_tool("search", {"kb": "products", "subject": "camping gear",
                                             "where": "price < 20 AND has(tags, 'outdoor')"})
    (mug,) = rows.structured_content["hits"]
    assert mug["title"] == "Camping mug"
    assert mug["fields"] == {"name": "Camping mug", "description": "An enamel mug for coffee at the campsite.",
                             "price": 12.5, "tags": ["outdoor", "kitchen"]}


async def check_errors(client: Client) -> None:
    refused = await client.call_tool("search", {"kb": "products", "subject": "tent", "where": "weight > 3"})
    assert refused.is_error and refused.structured_content is None
    assert "unknown column 'weight'" in tool_text(refused) and "price Float64" in tool_text(refused)
    assert "where refused" in tool_text(refused) and "where_str" not in tool_text(refused)  # its own name

    injected = await client.call_tool("search", {"kb": "faq", "subject": "x", "where": "1=1; DROP TABLE qnas"})
    assert injected.is_error and "refused" in tool_text(injected)

    too_many = await client.call_tool("search", {"kb": "faq", "subject": "invoice", "limit": 21})
    assert too_many.is_error and "limit" in tool_text(too_many) and "20" in tool_text(too_many)

    # get_related's name for the filter filters here too; a filter under a name search does not take is refused,
    # never dropped (the SDK ignored it, and every record came back)
    aliased = await client.call_tool("search", {"kb": "faq", "subject": "payment", "where_str": "category = 'account'"})
    assert not aliased.is_error, tool_text(aliased)
    assert [h["metadata"]["category"] for h in aliased.structured_content["hits"]] == ["account", "account"]
    both = await client.call_tool("search", {"kb": "faq", "subject": "x", "where": "category = 'account'",
                                             "where_str": "category = 'billing'"})
    assert both.is_error and "'where'" in tool_text(both) and "'where_str'" in tool_text(both)
    stray = await client.call_tool("search", {"kb": "faq", "subject": "x", "filter": "category = 'account'"})
    assert stray.is_error and "Unknown argument(s) 'filter'" in tool_text(stray) and "where" in tool_text(stray)
    wrong_kb = await client.call_tool("ask", {"kb": "faq", "question": "how do I pay?"})
    assert wrong_kb.is_error and "'kb'" in tool_text(wrong_kb) and "project" in tool_text(wrong_kb)
    # a value the schema refuses is named with what is expected, in words, not as pydantic's dump
    typed = await client.call_tool("search", {"kb": "faq", "subject": "invoice", "limit": "many"})
    assert typed.is_error and "'limit' was refused" in tool_text(typed) and "1 to 20" in tool_text(typed)
    for flag in (True, False, 2.5):  # a JSON true read as 1: refused, as false always was
        flagged = await client.call_tool("search", {"kb": "faq", "subject": "invoice", "limit": flag})
        assert flagged.is_error and "'limit' was refused" in tool_text(flagged), (flag, tool_text(flagged))
    for top in ("2", True):  # ask's top as search's limit: "2" was read as 2 there and refused here
        lax = await client.call_tool("ask", {"project": "faq", "question": "invoice?", "top": top})
        assert lax.is_error and "'top' was refused" in tool_text(lax), (top, tool_text(lax))
    for threshold in ("0.5", True):  # read as 0.5 and as 1.0: a value the schema refuses is a tool error
        lax = await client.call_tool("ask", {"project": "faq", "question": "invoice?", "threshold": threshold})
        assert lax.is_error and "'threshold' was refused" in tool_text(lax), (threshold, tool_text(lax))
    for question in ("   ", "\u200b\n"):  # as every HTTP surface and search refuse one; it got the default answer
        blank = await client.call_tool("ask", {"project": "faq", "question": question})
        assert blank.is_error and "'question' is blank" in tool_text(blank), (question, tool_text(blank))
    missing = await client.call_tool("search", {"kb": "faq"})
    assert missing.is_error and "'subject' is required" in tool_text(missing)
    for result in (typed, missing, too_many):
        assert "pydantic" not in tool_text(result) and "type=" not in tool_text(result), tool_text(result)

    unknown = await client.call_tool("search", {"kb": "nope", "subject": "invoice"})
    assert unknown.is_error and "Unknown knowledge base 'nope'" in tool_text(unknown)
    unknown = await client.call_tool("ask", {"project": "nope", "question": "invoice?"})
    assert unknown.is_error and "Unknown knowledge base 'nope'" in tool_text(unknown)


async def check_ask(client: Client) -> None:
    result = await client.call_tool("ask", {"project": "faq", "question": "how do I pay an invoice?"})
    assert not result.is_error
    out = result.structured_content
    assert out["matched"] is True and out["note"] is None
    best = out["answers"][0]
    expected = {"question": "How can I pay my invoice?", "is_default_answer": False, "source": "billing.md"}
    assert pick(best, expected) == expected
    assert best["confidence"] >= 0.5 and best["answer"].startswith("Pay invoices")

    whole = await client.call_tool("ask", {"project": "faq", "question": "how do I pay an invoice?", "threshold": 1})
    assert not whole.is_error and whole.structured_content["matched"] is False  # a JSON integer is a number
    result = await client.call_tool("ask", {"project": "faq", "question": "What is the capital of Peru?"})
    out = result.structured_content
    assert out["matched"] is False and "default answer" in out["note"]
    assert out["answers"] == [{"id": None, "confidence": 0.0, "is_default_answer": True, "question": None,
                               "answer": "No good match found in KB.", "source": None, "metadata": {}}]
    assert "No good match" in tool_text(result)
    # a table's rows answer search, not ask: it said "No good match" for the row that is the question word for word
    table = await client.call_tool("ask", {"project": "products", "question": "Trail tent"})
    assert table.is_error and "'products' is a table" in tool_text(table) and "search" in tool_text(table)


async def scenario(client: Client) -> None:
    for check in (check_tools, check_listing, check_search, check_errors, check_ask):
        await check(client)


# ------------------------------------------------------------------------------------------- stdio
def test_stdio(kbs, tmp_path):
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "openqna.api.tools.mcp", "--data", str(kbs.store.directory)],
                                   env=dict(os.environ), cwd=str(tmp_path))

    async def main(errlog):
        async with Client(stdio_client(params, errlog=errlog)) as client:
            assert client.server_info.name == "openqna"
            await scenario(client)

    with (tmp_path / "stderr.log").open("w+") as errlog:
        try:
            anyio.run(main, errlog)
        except BaseException:
            errlog.seek(0)
            print("server stderr:", errlog.read(), file=sys.stderr)
            raise


def test_stdio_refuses_a_folder_without_a_store(tmp_path):
    """``python -m openqna.api.tools.mcp --data TYPO`` says where it looked and exits 1, as ``openqna mcp`` does,
    instead of serving an empty store it made there."""
    import subprocess

    missing = tmp_path / "typo"
    env = {k: v for k, v in os.environ.items() if k != "OPENQNA_STORE"}
    done = subprocess.run([sys.executable, "-m", "openqna.api.tools.mcp", "--data", str(missing)], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and f"no openqna store in {missing}" in done.stderr
    assert not missing.exists()


# -------------------------------------------------------------------------------------------- HTTP
@pytest.fixture
def http(kbs):
    """The real app, as server.py builds it, with /mcp routed and its session manager in the lifespan."""
    with LiveServer(kbs) as served:
        yield served


@contextlib.asynccontextmanager
async def connect(http, headers: dict[str, str] | None = None, mode: str = "auto"):
    async with (httpx2.AsyncClient(headers=headers, timeout=60) as http_client,
                Client(streamable_http_client(http.url + "/mcp", http_client=http_client), mode=mode) as client):
        yield client


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # 2026 discovery, and the initialize handshake of older clients
def test_http(http, mode):
    async def main():
        async with connect(http, mode=mode) as client:
            assert client.server_info is None or client.server_info.name == "openqna"
            await scenario(client)

    anyio.run(main)


def test_http_refuses_requests_without_a_valid_key_once_keys_exist(http):
    create_key(http.service.store, name="bot", role="query")
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
    accept = {"Accept": "application/json, text/event-stream"}
    for headers, message in [({}, "An API key is required"), ({"Authorization": "Bearer oq_nope"}, "not valid"),
                             ({"api-key": "oq_nope"}, "not valid")]:
        response = httpx.post(http.url + "/mcp", json=initialize, headers=accept | headers, timeout=10)
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Bearer")
        body = response.json()
        assert body["jsonrpc"] == "2.0" and message in body["error"]["message"]
        assert body["id"] == 1  # the request's, as JSON-RPC asks of every answer whose request could be read
    assert httpx.get(http.url + "/mcp", headers=accept, timeout=10).status_code == 401

    async def main():
        async with connect(http, mode="legacy"):
            pass

    with pytest.raises(BaseExceptionGroup) as refused:  # the client's task groups wrap the handshake's error
        anyio.run(main)
    assert refused.group_contains(MCPError, match="An API key is required", depth=None)


def test_http_key_scoped_to_another_project_cannot_see_or_search_this_one(http):
    _, scoped = create_key(http.service.store, name="hr-bot", role="query", projects=["hr"])
    _, full = create_key(http.service.store, name="bot", role="query")

    async def main():
        async with connect(http, {"Authorization": f"Bearer {scoped}"}) as client:
            listed = await client.call_tool("list_knowledge_bases", {})
            assert [kb["name"] for kb in listed.structured_content["knowledge_bases"]] == ["hr"]
            for name, args in [("search", {"kb": "faq", "subject": "invoice"}),
                               ("ask", {"project": "faq", "question": "how do I pay an invoice?"})]:
                denied = await client.call_tool(name, args)
                assert denied.is_error and "Unknown knowledge base 'faq'" in tool_text(denied)
            own = await client.call_tool("search", {"kb": "hr", "subject": "vacation days"})
            assert own.structured_content["hits"][0]["text"].startswith("Everyone gets 25 days")
        async with connect(http, {"api-key": full}) as client:
            found = await client.call_tool("search", {"kb": "faq", "subject": "invoice", "limit": 1})
            assert found.structured_content["hits"][0]["source"] == "billing.md"

    anyio.run(main)


def test_http_search_and_ask_take_a_deployment(http):
    """``deployment`` picks the state the tools read, as Azure's deploymentName does; left out, the live state; a
    deployment the project lacks is a tool error that names it."""
    service = http.service
    service.deploy("hr", "production")
    service.upsert("hr", [QnA(["Can I work from home?"], "Yes, two days a week.")])

    async def main():
        async with connect(http) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            for name in ("search", "ask"):
                assert "deployment" in tools[name].input_schema["properties"]
                assert "deployment" not in tools[name].input_schema["required"]

            async def texts(**args) -> list[str]:
                result = await client.call_tool("search", {"kb": "hr", "subject": "working from home"} | args)
                assert not result.is_error, tool_text(result)
                return sorted(h["text"] for h in result.structured_content["hits"])

            assert await texts() == ["Everyone gets 25 days of paid holiday.", "Yes, two days a week."]
            assert await texts(deployment="production") == ["Everyone gets 25 days of paid holiday."]
            live = await client.call_tool("ask", {"project": "hr", "question": "Can I work from home?"})
            deployed = await client.call_tool("ask", {"project": "hr", "question": "Can I work from home?",
                                                      "deployment": "production"})
            assert live.structured_content["matched"] is True and deployed.structured_content["matched"] is False
            for name, args in [("search", {"kb": "hr", "subject": "home"}),
                               ("ask", {"project": "hr", "question": "Can I work from home?"})]:
                missing = await client.call_tool(name, args | {"deployment": "staging"})
                assert missing.is_error and "Deployment 'staging'" in tool_text(missing), tool_text(missing)
                assert "Its deployments are 'production'" in tool_text(missing), tool_text(missing)

    anyio.run(main)


def test_http_search_of_a_japanese_subject_in_an_english_kb_answers_hits(http):
    """The model cannot read the subject and no record holds its words: the tool still answers hits (each scored 0,
    the confidence they have), as the HTTP tools do; ``ask`` says nothing matched."""
    async def main():
        async with connect(http) as client:
            result = await client.call_tool("search", {"kb": "faq", "subject": "請求書の支払い方法は？"})
            assert not result.is_error, tool_text(result)
            hits = result.structured_content["hits"]
            assert result.structured_content["num_retrieved"] == len(hits) == 3
            assert {h["score"] for h in hits} == {0.0}
            asked = await client.call_tool("ask", {"project": "faq", "question": "請求書の支払い方法は？"})
            assert asked.structured_content["matched"] is False

    anyio.run(main)


def test_http_search_keeps_a_long_result_to_the_http_tools_budget(http):
    """QA: twenty rows of a 9,000-character column: MCP search answered ~360,000 characters of text, and as much
    again in the structured content, where /tools/{kb}/search keeps the same call under its 96,000."""
    schema = TableSchema([Column("name", "String"), Column("body", "String")], text=["name"], title="name")
    create_table(http.service, "manuals", schema)
    rows = [{"name": f"manual {i}", "body": f"section {i} " + "x" * 9000} for i in range(20)]
    load_rows(http.service, "manuals", "manuals.jsonl", "\n".join(json.dumps(r) for r in rows).encode())

    async def main():
        async with connect(http) as client:
            return await client.call_tool("search", {"kb": "manuals", "subject": "manual", "limit": 20})

    result = anyio.run(main)
    assert not result.is_error, tool_text(result)[:300]
    text = tool_text(result)
    assert len(text) <= 96_000 and json.loads(text) == result.structured_content
    hits = result.structured_content["hits"]
    assert result.structured_content["num_retrieved"] == len(hits) == 20
    assert all(h["fields"]["body"].endswith("…") and len(h["fields"]["body"]) > 4000 for h in hits)
    same = httpx.get(http.url + "/tools/manuals/search", params={"subject": "manual", "limit": 20}, timeout=60).json()
    assert [h["fields"]["name"] for h in hits] == [h["fields"]["name"] for h in same["hits"]]
    assert abs(len(hits[0]["fields"]["body"]) - len(same["hits"][0]["fields"]["body"])) < 100  # cut alike
