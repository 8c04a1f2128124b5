"""JSON that holds only text: ``json.loads`` that refuses lone UTF-16 surrogates (issue 40).

JSON may spell a lone surrogate (``"\\ud800"``), and ``json.loads`` decodes bytes with
``surrogatepass``, so their raw three bytes (``ED A0 80``) pass too.  The result is a ``str`` that is not
text: it cannot be encoded as UTF-8, so storing it, hashing it or answering with it fails later, far
from the input, as a 500.  Every JSON that enters (request bodies, uploaded JSON and JSON Lines files,
JSON in a table's cells) is read through ``loads`` here and refused where it holds one, with the
position of the first, as any other JSON error is.  ``repaired`` replaces them with U+FFFD, for data
stored before this check (``store/sqlite_schema.py``'s migration 4).
"""

from __future__ import annotations

import json
import re
from typing import Any

REASON = "a lone UTF-16 surrogate (an escape such as \\ud800, or its bytes ED A0 80), which is not a character"
_CHAR = re.compile("[\ud800-\udfff]")
# a surrogate escape, or a surrogate's UTF-8-style bytes (ED A0..BF; ED 80..9F are Hangul and other characters)
_MAYBE_TEXT = re.compile(r"\\u[dD][89a-fA-F]|[\ud800-\udfff]")
_MAYBE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")
_PAIR = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}")
_LONE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}|[\ud800-\udfff]")


def loads(doc: str | bytes, *, unique_keys: bool = False) -> Any:
    """``json.loads(doc)``; a ``json.JSONDecodeError`` at the first lone surrogate, if the value holds one, for a
    value nested too deeply for the parser, and with
    ``unique_keys`` at an object that names a key twice (``json.loads`` keeps the last silently)."""
    try:
        value = json.loads(doc, object_pairs_hook=_unique if unique_keys else None)
    except RecursionError:  # '[' * 100000: a file's job failed with an internal error and a traceback in the log
        text = doc.decode("utf-8", "replace") if isinstance(doc, bytes) else doc
        raise json.JSONDecodeError("it is nested too deeply to read", text, 0) from None
    if suspect(doc) and lone_surrogate(value) is not None:
        text = doc.decode("utf-8", "surrogatepass") if isinstance(doc, bytes) else doc
        raise json.JSONDecodeError(f"the text holds {REASON}", text, _position(text))
    return value


def suspect(doc: str | bytes) -> bool:
    """Whether JSON text may hold a lone surrogate (a cheap scan; ``lone_surrogate`` on its value tells)."""
    return bool(_MAYBE_BYTES.search(doc) if isinstance(doc, bytes) else _MAYBE_TEXT.search(doc))


def lone_surrogate(value: Any, name: str = "the body") -> str | None:
    """Where the first string (a key or a value) that is not valid Unicode sits in ``value``, or None."""
    stack: list[tuple[str, Any]] = [(name, value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            if _CHAR.search(item):
                return path
        elif isinstance(item, dict):
            for key, child in item.items():
                if _CHAR.search(key):
                    return f"a property name in {path}"
                stack.append((f"'{key}'", child))
        elif isinstance(item, list):
            stack.extend((f"{path}[{i}]", child) for i, child in enumerate(item))
    return None


def repaired(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings (keys too) replaced by U+FFFD."""
    if isinstance(value, str):
        return _CHAR.sub("\ufffd", value)
    if isinstance(value, dict):
        return {repaired(k): repaired(v) for k, v in value.items()}
    if isinstance(value, list):
        return [repaired(v) for v in value]
    return value


def _position(text: str) -> int:
    """The offset of the first lone surrogate in JSON text (an escape not paired, or the character itself)."""
    paired = {m.start() for m in _PAIR.finditer(text)} | {m.start() + 6 for m in _PAIR.finditer(text)}
    return next((m.start() for m in _LONE.finditer(text) if m.start() not in paired), 0)


def dumps(value: Any) -> str:
    """JSON text for a store: UTF-8-encodable always, a lone surrogate (which every boundary refuses, so none
    should arrive) written as U+FFFD rather than failing the write or being kept to fail every later read."""
    text = json.dumps(value, ensure_ascii=False)
    return json.dumps(repaired(value), ensure_ascii=False) if _CHAR.search(text) else text


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) < len(pairs):
        twice = next(k for i, (k, _) in enumerate(pairs) if any(k == other for other, _ in pairs[:i]))
        raise json.JSONDecodeError(f"the key \"{twice}\" appears twice in one object", "", 0)
    return out
