"""Numbers in query strings and headers, read as ASCII only.

``str.isdigit`` and ``int`` accept every Unicode digit (``"٣"`` is 3, and ``"²"`` passes ``isdigit``
but makes ``int`` raise), so a wire value is matched against ASCII digits before it is converted.
"""

from __future__ import annotations

import re

COUNT = re.compile(r"[0-9]{1,18}")
INTEGER = re.compile(r"[+-]?[0-9]{1,18}")


def count(text: str | None) -> int | None:
    """``text`` as a non-negative integer when it is 1-18 ASCII digits, else None."""
    return int(text) if text is not None and COUNT.fullmatch(text) else None


def integer(text: str) -> int | None:
    """``text`` (surrounding spaces allowed) as a signed integer when it is ASCII digits, else None."""
    stripped = text.strip()
    return int(stripped) if INTEGER.fullmatch(stripped) else None
