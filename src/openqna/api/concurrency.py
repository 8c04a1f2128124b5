"""Query work (embedding a question, ranking) runs on a small pool of threads of its own.

Starlette runs blocking work on anyio's default pool of 40 threads.  For CPU-bound query
work on a small machine that is the wrong size: 16 questions at once on 2 cores means 16
threads contending for the GIL and for onnxruntime, and each question waits for all of them.
Measured with ``bench/throughput.py`` (10k QnAs, Azure query at concurrency 16): 154
queries/s with the default pool, 181/s with 4 query threads, and p99 195 -> 112 ms.  Since
questions are embedded and scored in batches (``models/batching.py``) a query thread spends most
of its time waiting for a batch, not contending for the CPU, and more of them make larger batches:
the default is eight per core (server CPU per question at concurrency 16, batching on: 12.4 ms
with 4 threads, 10.9 with 8, 9.0 with 16).  With batches of at most ``OPENQNA_EMBED_BATCH`` (8) the sixteen
threads of two cores form two batches that take turns: one is embedded while the other's questions are
ranked, so neither core waits for the other (``bench/tail.py``).
Authoring handlers' store work has a pool of its own (``run_store``); other blocking work (uploads,
key checks on PostgreSQL) keeps the default pool, so a long upload never holds a query's place.
"""

from __future__ import annotations

import asyncio
import functools
import weakref
from typing import Any, Callable, TypeVar

import anyio
import anyio.to_thread

from openqna import settings

T = TypeVar("T")
# Each event loop's pools: "query" (OPENQNA_QUERY_THREADS threads) and "store", authoring handlers' store work
# (``api.azure.wire.handle_errors_off_loop``), whose writes waiting for a database lock then hold at most its threads,
# never the default pool's that key checks and uploads use.
_limiters: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, anyio.CapacityLimiter]]" = \
    weakref.WeakKeyDictionary()
STORE_THREADS = 8


def _limiter(pool: str) -> anyio.CapacityLimiter:
    pools = _limiters.setdefault(asyncio.get_running_loop(), {})
    if pool not in pools:
        pools[pool] = anyio.CapacityLimiter(settings.query_threads() if pool == "query" else STORE_THREADS)
    return pools[pool]


async def run_store(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run ``fn`` (an authoring handler's reads and writes of the store) on the store pool and wait for it."""
    return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs), limiter=_limiter("store"))


async def run_query(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run ``fn`` on the query pool (OPENQNA_QUERY_THREADS threads, eight per core by default) and wait for it."""
    return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs), limiter=_limiter("query"))
