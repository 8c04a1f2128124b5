"""The environment a measurement runs in: a ranker setting changed for one block."""

import os
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def setting(env: str, value: str) -> Iterator[None]:
    """``env`` set to ``value`` for the block (as it was after it): a ranker setting read at query time."""
    before = os.environ.get(env)
    os.environ[env] = value
    try:
        yield
    finally:
        if before is None:
            del os.environ[env]
        else:
            os.environ[env] = before
