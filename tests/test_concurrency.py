"""Query work runs on a pool of OPENQNA_QUERY_THREADS threads, apart from other blocking work."""

import asyncio
import threading
import time

from starlette.concurrency import run_in_threadpool

from openqna.api.concurrency import STORE_THREADS, run_query, run_store


class Overlap:
    """Calls through ``run`` take 50 ms each; ``peak`` is how many ever ran at once."""

    def __init__(self):
        self.lock, self.running, self.peak = threading.Lock(), 0, 0

    def run(self, result):
        with self.lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
        time.sleep(0.05)
        with self.lock:
            self.running -= 1
        return result


def test_query_pool_caps_concurrent_questions(monkeypatch):
    monkeypatch.setenv("OPENQNA_QUERY_THREADS", "2")
    overlap = Overlap()

    async def main():
        return await asyncio.gather(*(run_query(overlap.run, i * i) for i in range(8)))

    assert asyncio.run(main()) == [i * i for i in range(8)]
    assert overlap.peak == 2


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


def test_writes_stuck_on_the_store_hold_only_the_store_pool():
    """Authoring handlers' store work waiting for a lock (SQLite's writer lock held by an import, say) holds at most
    the store pool's threads: as many stuck writes as anyio's whole default pool (40) leave queries, uploads and
    key checks free to run, and run themselves once the lock goes."""
    release = threading.Event()
    stuck = Overlap()

    def write(i):
        release.wait(10)
        return stuck.run(i)

    async def main():
        writes = [asyncio.ensure_future(run_store(write, i)) for i in range(40)]
        await asyncio.sleep(0.1)  # the store pool's threads now wait on the "lock"
        query = await asyncio.wait_for(run_query(lambda: "answer"), 5)
        other = await asyncio.wait_for(run_in_threadpool(lambda: "upload done"), 5)
        release.set()
        return query, other, await asyncio.gather(*writes)

    assert asyncio.run(main()) == ("answer", "upload done", list(range(40)))
    assert stuck.peak == STORE_THREADS


def test_query_threads_default_to_eight_per_core(monkeypatch):
    import os

    from openqna import settings

    monkeypatch.delenv("OPENQNA_QUERY_THREADS", raising=False)
    assert settings.query_threads() == 8 * os.cpu_count()
    monkeypatch.setenv("OPENQNA_QUERY_THREADS", "3")
    assert settings.query_threads() == 3


def test_mcp_tool_questions_run_on_the_query_pool(monkeypatch):
    """The MCP search and ask tools take a query thread, as the HTTP questions do (1 thread: one at a time)."""
    from types import SimpleNamespace

    from openqna.api.tools.mcp_tools import KnowledgeBaseTools
    from openqna.kb.service import Answer

    monkeypatch.setenv("OPENQNA_QUERY_THREADS", "1")
    overlap = Overlap()
    service = SimpleNamespace(search=lambda *a, **k: overlap.run([]),
                              ask=lambda *a, **k: overlap.run([Answer(None, 0.0, default_text="none")]))
    tools = KnowledgeBaseTools(service, None, "production")
    ctx = SimpleNamespace(headers={})

    async def main():
        return await asyncio.gather(*[tools.search(ctx, "kb", f"q{i}") for i in range(3)],
                                    *[tools.ask(ctx, "kb", f"q{i}") for i in range(3)])

    results = asyncio.run(main())
    assert len(results) == 6 and not any(r.is_error for r in results)
    assert overlap.peak == 1
