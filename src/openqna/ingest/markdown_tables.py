"""Tables as Markdown text, the one rendering answers, chunks and the embedder all read.

Markdown demands a header row.  When the source marks one (HTML ``<th>``/``<thead>``,
Word's "repeat as header row", a Word table style that sets the first row apart, a
first row in bold in Word or a PDF, Markdown itself) the first row is the header;
otherwise (most PDF and Word tables) the header is left empty rather than promoting a
data row: manuals are full of key/value tables ("Power button | Press the power
button...") whose first row is data, and the chunker repeats the header in every piece
of a split table, where an empty one costs a few tokens and a promoted row costs a
sentence.
"""

from __future__ import annotations

import re

_SPACE = re.compile(r"\s+")


def _cell(text: str | None) -> str:
    # A Markdown cell is one line, and a bare "|" would end it early.
    return _SPACE.sub(" ", text or "").strip().replace("|", "\\|")


def markdown_table(rows: list[list[str | None]], *, header: bool) -> str:
    """A Markdown table of ``rows``: the header, the ``---`` separator, then the body rows.

    ``header`` says whether the first row is a header row.  Empty rows are dropped and
    short rows padded, so ragged HTML or Word tables stay rectangular.  Returns "" when
    nothing is left.
    """
    cleaned = [[_cell(c) for c in row] for row in rows]
    cleaned = [row for row in cleaned if any(row)]
    if not cleaned:
        return ""
    width = max(len(row) for row in cleaned)
    padded = [row + [""] * (width - len(row)) for row in cleaned]
    if not header:
        padded.insert(0, [""] * width)
    lines = ["| " + " | ".join(row) + " |" for row in padded]
    lines.insert(1, "|" + " --- |" * width)
    return "\n".join(lines)
