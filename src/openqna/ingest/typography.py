"""Headings from how text looks, for PDFs and for Word files written without heading styles.

Both formats tell us each line's (or paragraph's) font size and weight.  The body size
is the size most characters use; anything clearly larger is a heading, and so is a
short line set entirely in bold at body size.  Heading levels come from ranking the
heading sizes, largest first, with sizes within ``SIZE_TOLERANCE`` points treated as
one level (manuals set H1 at 26 and 27 pt on different pages).  Bold body-size
headings rank below every larger size.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

SIZE_TOLERANCE = 1.5
# Larger than the body by at least this many points to count as a heading.
MIN_HEADING_STEP = 1.0
MAX_HEADING_CHARS = 200
MAX_LEVEL = 6


def body_size(sizes_by_chars: Iterable[tuple[float, int]]) -> float:
    """The font size that carries the most characters: (size, character count) pairs."""
    counts: Counter[float] = Counter()
    for size, chars in sizes_by_chars:
        counts[round(size, 1)] += chars
    return counts.most_common(1)[0][0] if counts else 0.0


def looks_like_heading(text: str, size: float, bold: bool, body: float) -> bool:
    """Short, has letters, and is either larger than body text or bold at body size."""
    stripped = text.strip()
    if not stripped or len(stripped) > MAX_HEADING_CHARS or not any(c.isalpha() for c in stripped):
        return False
    if size >= body + MIN_HEADING_STEP:
        return True
    # A bold sentence ending in a full stop is emphasis ("Do not open the case."), not a title.
    return bold and size >= body - 0.5 and not stripped.endswith((".", ",", ";"))


class HeadingLevels:
    """Maps a heading's font size (and boldness) to a level 1..MAX_LEVEL for one document."""

    def __init__(self, heading_sizes: Iterable[float], body: float):
        self._tiers: list[float] = []  # the largest size of each tier, descending
        for size in sorted({round(s, 1) for s in heading_sizes if s >= body + MIN_HEADING_STEP}, reverse=True):
            if not self._tiers or self._tiers[-1] - size > SIZE_TOLERANCE:
                self._tiers.append(size)
        self._body = body

    def level(self, size: float) -> int:
        for i, top in enumerate(self._tiers):
            if size >= top - SIZE_TOLERANCE:
                return min(i + 1, MAX_LEVEL)
        return min(len(self._tiers) + 1, MAX_LEVEL)  # bold at body size
