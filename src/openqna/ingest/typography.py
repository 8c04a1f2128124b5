"""Headings from how text looks, for PDFs and for Word files written without heading styles.

Both formats tell us each line's (or paragraph's) font size and weight.  The body size
is the size most characters use; anything clearly larger is a heading, and so is a
short line set entirely in bold at body size, or in a heading style (a PDF's lines in
another font *and* another colour than the body: Word's Heading 4 and 5 are 11 pt like
its body text, in blue Calibri Light).  Heading levels come from ranking the heading
sizes, largest first, with sizes within ``SIZE_TOLERANCE`` points treated as one level
(manuals set H1 at 26 and 27 pt on different pages) unless the smaller one is a full
``MIN_HEADING_STEP`` smaller and in another colour (Word's Heading 2 and 3: 13 pt blue,
12 pt dark blue).  Body-size headings rank below every larger size, each heading style
a level of its own in the order the document first uses them (a sub-heading follows
its parent), bold ones as one style.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable
from dataclasses import dataclass

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


def looks_like_heading(text: str, size: float, bold: bool, body: float, *, styled: bool = False) -> bool:
    """Short, has letters, and is either larger than body text or bold (or ``styled``: in a heading style) at
    body size."""
    stripped = text.strip()
    if not stripped or len(stripped) > MAX_HEADING_CHARS or not any(c.isalpha() for c in stripped):
        return False
    if size >= body + MIN_HEADING_STEP:
        return True
    # A bold sentence ending in a full stop is emphasis ("Do not open the case."), not a title.
    return (bold or styled) and size >= body - 0.5 and not stripped.endswith((".", ",", ";"))


@dataclass(frozen=True)
class HeadingLook:
    """What ranks a heading: its size, its colour (None where unknown) and, at body size, its heading style
    (None for bold body text)."""

    size: float
    colour: int | None = None
    style: Hashable = None


class HeadingLevels:
    """Maps a heading's look to a level 1..MAX_LEVEL for one document, given every heading's look in
    document order."""

    def __init__(self, looks: Iterable[HeadingLook], body: float):
        looks = list(looks)
        self._tops: list[float] = []  # the largest size of each tier, descending
        self._tier_of: dict[tuple[float, int | None], int] = {}  # (size, colour) -> tier
        colours: list[set[int | None]] = []
        for size, colour in sorted({(round(k.size, 1), k.colour) for k in looks if k.size >= body + MIN_HEADING_STEP},
                                   key=lambda sc: -sc[0]):
            top = self._tops[-1] if self._tops else None
            if top is None or top - size > SIZE_TOLERANCE or (top - size >= MIN_HEADING_STEP
                                                               and colour not in colours[-1]):
                self._tops.append(size)
                colours.append(set())
            colours[-1].add(colour)
            self._tier_of[(size, colour)] = len(self._tops) - 1
        self._styles: dict[Hashable, int] = {}  # body-size heading styles below every tier, in the order of first use
        for k in looks:
            if k.size < body + MIN_HEADING_STEP and self._within(k) is None:
                self._styles.setdefault(k.style, len(self._styles))
        self._body = body

    def _within(self, look: HeadingLook) -> int | None:
        """The tier a bold heading a little smaller than its smallest size joins (bold 9.8 pt under 10 pt)."""
        if look.style is not None:
            return None
        return next((i for i, top in enumerate(self._tops) if look.size >= top - SIZE_TOLERANCE), None)

    def level(self, look: HeadingLook) -> int:
        tier = self._tier_of.get((round(look.size, 1), look.colour))
        if tier is None:
            tier = self._within(look)
        if tier is not None:
            return min(tier + 1, MAX_LEVEL)
        return min(len(self._tops) + 1 + self._styles.get(look.style, 0), MAX_LEVEL)
