"""The ``Content-Disposition`` of a file the server hands out (an export, the query log as CSV).

A header is Latin-1: a name outside ASCII (a knowledge base made by ``openqna import`` may be called ``café``) is
sent as RFC 6266's ``filename*`` in UTF-8, beside an ASCII ``filename`` for clients that read only that one.
"""

from __future__ import annotations

import re
from urllib.parse import quote

__all__ = ["attachment"]


def attachment(filename: str) -> str:
    """``attachment`` with ``filename``, as every browser and ``curl -OJ`` save it."""
    plain = re.sub(r"[^A-Za-z0-9._-]+", "_", filename)
    if plain == filename:
        return f'attachment; filename="{filename}"'
    return f"attachment; filename=\"{plain}\"; filename*=UTF-8''{quote(filename, safe='')}"
