"""Request bodies to Python values, with the refusals every JSON surface shares.

``json.loads`` alone lets two inputs through that fail later as 500s: a body nested so
deeply that parsing it overflows the stack (``RecursionError``), and lone UTF-16 surrogates,
which are not characters, cannot be encoded as UTF-8 (so they cannot be stored) and break the
tokenizer.  A surrogate arrives as a ``\\ud800``-style escape or as its raw three bytes
(``ED A0 80``: ``json.loads`` decodes bytes with ``surrogatepass``).  Both are refused here, as bad
JSON is, on every surface that reads JSON (Azure, QnA Maker, OpenAI, MCP).
"""

from __future__ import annotations

import json
from typing import Any

from openqna import strict_json

MAX_DEPTH = 64  # far beyond any wire contract served here; deeper bodies are refused before parsing


class BadBody(ValueError):
    """Why a body is not acceptable JSON; the message is for the caller."""


def parse(raw: bytes) -> Any:
    """The JSON value in ``raw``; ``BadBody`` when it is not JSON, is nested too deeply, or holds lone surrogates."""
    if _too_deep(raw):
        raise BadBody(f"it is nested more than {MAX_DEPTH} levels deep")
    try:
        value = json.loads(raw)
    except RecursionError:
        raise BadBody(f"it is nested more than {MAX_DEPTH} levels deep") from None
    except UnicodeDecodeError as exc:
        raise BadBody(f"it is not UTF-8 ({exc.reason} at byte {exc.start})") from None
    except ValueError as exc:
        raise BadBody(str(exc)) from None
    where = strict_json.lone_surrogate(value) if strict_json.suspect(raw) else None
    if where is not None:
        raise BadBody(f"{where} holds {strict_json.REASON}")
    return value


def _too_deep(raw: bytes) -> bool:
    """Bracket depth outside strings, counted without recursion."""
    if raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:
        return False
    depth, in_string, escaped = 0, False, False
    for byte in raw:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):
            depth += 1
            if depth > MAX_DEPTH:
                return True
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return False
