"""Query work runs on a pool of OPENQNA_QUERY_THREADS threads, apart from other blocking work."""

import asyncio
import threading
import time

from openqna.api.concurrency import run_query
from starlette.concurrency import run_in_threadpool


def test_query_pool_caps_concurrent_questions(monkeypatch):
    monkeypatch.setenv("OPENQNA_QUERY_THREADS", "2")
    lock, running, peak = threading.Lock(), [0], [0]

    def question(i: int) -> int:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.05)
        with lock:
            running[0] -= 1
        return i * i

    async def main():
        return await asyncio.gather(*(run_query(question, i) for i in range(8)))

    assert asyncio.run(main()) == [i * i for i in range(8)]
    assert peak[0] == 2


def test_other_blocking_work_does_not_wait_for_the_query_pool(monkeypatch):
    monkeypatch.setenv("OPENQNA_QUERY_THREADS", "1")
    release = threading.Event()

    async def main():
        slow = asyncio.ensure_future(run_query(release.wait, 10))
        await asyncio.sleep(0.05)  # the one query thread is now busy
        other = await asyncio.wait_for(run_in_threadpool(lambda: "upload done"), 5)
        release.set()
        return other, await slow

    assert asyncio.run(main()) == ("upload done", True)


def test_query_threads_default_to_twice_the_cores(monkeypatch):
    import os

    from openqna import settings

    monkeypatch.delenv("OPENQNA_QUERY_THREADS", raising=False)
    assert settings.query_threads() == 2 * os.cpu_count()
    monkeypatch.setenv("OPENQNA_QUERY_THREADS", "3")
    assert settings.query_threads() == 3


def test_mcp_tool_questions_run_on_the_query_pool(monkeypatch):
    """The MCP search and ask tools take a query thread, as the HTTP questions do (1 thread: one at a time)."""
    from types import SimpleNamespace

    from openqna.api.mcp_tools import KnowledgeBaseTools
    from openqna.service import Answer

    monkeypatch.setenv("OPENQNA_QUERY_THREADS", "1")
    lock, running, peak = threading.Lock(), [0], [0]

    def busy(result):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.05)
        with lock:
            running[0] -= 1
        return result

    service = SimpleNamespace(search=lambda *a, **k: busy([]),
                              ask=lambda *a, **k: busy([Answer(None, 0.0, default_text="none")]))
    tools = KnowledgeBaseTools(service, None, "production")
    ctx = SimpleNamespace(headers={})

    async def main():
        return await asyncio.gather(*[tools.search(ctx, "kb", f"q{i}") for i in range(3)],
                                    *[tools.ask(ctx, "kb", f"q{i}") for i in range(3)])

    results = asyncio.run(main())
    assert len(results) == 6 and not any(r.is_error for r in results)
    assert peak[0] == 1
