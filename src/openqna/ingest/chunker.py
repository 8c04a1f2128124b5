"""Structure-aware chunking: passages that follow sections and fit the embedder's window.

Rules, in order of importance:

1. A chunk never spans two sections, and every chunk of a section starts with the
   section's heading line, so a passage says what it is about even when retrieved alone.
2. A section that fits in ``max_tokens`` is one chunk.  A longer one is packed greedily
   from whole blocks; a block that is itself too long is split at sentence boundaries,
   and a sentence that is still too long at word boundaries; a table is split between
   rows with its header row repeated, and a row that cannot fit under its header becomes
   text of "name: value" cells, each piece led by the row's first cell.  Consecutive chunks of one section share up to
   ``overlap_tokens`` tokens: the last sentences (or words) of the previous chunk.
3. Small sibling sections are not merged.  Merging would make a chunk's heading path a
   guess (two headings, one path) and, worse, would make one section's edit change its
   neighbours' chunks.  Without it a chunk depends only on its own section's heading
   path, text and the chunking settings, so ``content_hash`` changes exactly for the
   sections that changed and a refreshed document re-embeds only those.
4. Heading-only sections (a chapter title directly followed by its first sub-heading)
   make no chunk; their title lives on in the children's ``heading_path``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass

from openqna.ingest.parsed import Block, ParsedDocument
from openqna.ingest.sections import Section, separator, split_sections
from openqna.ingest.token_count import TokenCounter
from openqna.ingest.token_count import count_tokens as minilm_tokens
from openqna.records import InvalidArgument

# a sentence ends at a full stop, "!" or "?" and whitespace before a capital; in Chinese and Japanese at "。", "！" or
# "？" whatever follows but a closing quote or bracket (no space between sentences there, so none is put back)
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'“‘(\[])|(?<=[。！？])\s*(?=[^\s」』）)】\]\"”’])")
_CELL_BREAK = re.compile(r"(?<!\\)\|")
_LIST_MARKER = re.compile(r"^(\d{1,2}[.)]|[-*])$")
# Characters one token spans at most: GPT-2's longest token is 66; a WordPiece token ([UNK] aside) at most 100.
_TOKEN_CHARS = 128


@dataclass(frozen=True)
class Chunk:
    text: str
    heading_path: list[str]
    page_start: int | None
    page_end: int | None
    source: str
    ordinal: int  # position in the document's chunk list, from 0

    @property
    def content_hash(self) -> str:
        """Identifies the content to embed: heading path and text, not position or pages.

        Pages and ordinals shift when an earlier section grows; the vector does not.
        """
        payload = json.dumps([self.heading_path, self.text], ensure_ascii=False)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def chunk_document(
    document: ParsedDocument,
    *,
    max_tokens: int = 256,
    overlap_tokens: int = 32,
    count_tokens: TokenCounter | None = None,
) -> list[Chunk]:
    """Chunks of at most ``max_tokens`` (as counted by ``count_tokens``, default MiniLM's tokenizer)."""
    if max_tokens < 16:
        raise InvalidArgument(f"max_tokens is {max_tokens}; it must be at least 16")
    if not 0 <= overlap_tokens <= max_tokens // 2:
        raise InvalidArgument(f"overlap_tokens is {overlap_tokens}; it must be between 0 and half of max_tokens")
    count = count_tokens or minilm_tokens
    chunks: list[Chunk] = []
    for section in split_sections(document):
        if not section.blocks:
            continue
        packer = _Packer(section, max_tokens, overlap_tokens, count)
        for number, piece in enumerate(packer.pieces()):
            pages = [unit.page for unit in piece if unit.page is not None]
            if number == 0 and section.heading is not None and section.heading.page is not None:
                pages.append(section.heading.page)
            chunks.append(
                Chunk(
                    text=packer.text(piece),
                    heading_path=list(section.path),
                    page_start=min(pages) if pages else None,
                    page_end=max(pages) if pages else None,
                    source=document.source,
                    ordinal=len(chunks),
                )
            )
    return chunks


@dataclass(frozen=True)
class _Unit:
    """An indivisible run of text: a block, or a sentence, word window or row group of one."""

    text: str
    page: int | None
    sep: str  # what joins it to the unit before it in the same chunk
    table: bool = False


class _Packer:
    def __init__(self, section: Section, max_tokens: int, overlap_tokens: int, count: TokenCounter):
        self.section = section
        self.max_tokens = max_tokens
        self.overlap_tokens = overlap_tokens
        self.count = count
        self.baseline = count("")  # what the counter adds to any text, e.g. [CLS] and [SEP]
        self.title = ""
        if section.heading is not None:
            # A runaway heading may take at most half the window, or nothing else would fit.
            self.title = _first_words(section.heading.text, lambda t: count(t) <= max_tokens // 2)

    def text(self, units: list[_Unit]) -> str:
        body = "".join((unit.sep if i else "") + unit.text for i, unit in enumerate(units))
        return f"{self.title}\n\n{body}" if self.title else body

    def fits(self, units: list[_Unit]) -> bool:
        return self.count(self.text(units)) <= self.max_tokens

    def pieces(self) -> list[list[_Unit]]:
        pieces: list[list[_Unit]] = []
        current: list[_Unit] = []
        for unit in self._units(self.section.blocks):
            if current and not self.fits(current + [unit]):
                pieces.append(current)
                current = self._overlap(current)
                while current and not self.fits(current + [unit]):
                    current = current[1:]
            current.append(unit)
        if current:
            pieces.append(current)
        return pieces

    # -- splitting blocks into units that fit ---------------------------------------------

    def _units(self, blocks: list[Block]) -> list[_Unit]:
        units: list[_Unit] = []
        previous = None
        for block in blocks:
            sep = separator(previous, block.kind)
            whole = _Unit(block.text, block.page, sep, block.kind == "table")
            if self.fits([whole]):
                units.append(whole)
            elif block.kind == "table":
                units.extend(_Unit(part, block.page, sep, True) for part in self._table_parts(block.text))
            else:
                parts = self._text_parts(block.text)
                units.extend(_Unit(part, block.page, sep if i == 0 else joint) for i, (part, joint) in enumerate(parts))
            previous = block.kind
        return units

    def _fits_text(self, text: str) -> bool:
        return self.fits([_Unit(text, None, "")])

    def _fits_after_overlap(self, text: str) -> bool:
        """Pieces of a split block leave room for the overlap that will precede them."""
        return self.count(self.text([_Unit(text, None, "")])) <= self.max_tokens - self.overlap_tokens

    def _text_parts(self, text: str) -> list[tuple[str, str]]:
        """Sentences that fit, and word windows of those that do not, each with what joins it to the part before
        it: a space where the text had whitespace, nothing where it had none (Chinese and Japanese sentences, a
        word cut into characters)."""
        parts: list[tuple[str, str]] = []
        for sentence, joint in _sentences(text):
            if self._fits_after_overlap(sentence):
                parts.append((sentence, joint))
            else:
                windows = self._word_windows(sentence, self._fits_after_overlap)
                parts.extend((window, joint if i == 0 else between) for i, (window, between) in enumerate(windows))
        return parts

    def _word_windows(self, text: str, fits: Callable[[str], bool]) -> list[tuple[str, str]]:
        """Windows of ``text``'s words that fit, each with what joins it to the window before it: a space, or nothing
        where a word too long for one window was cut (a Chinese sentence has no space to cut at)."""
        windows: list[tuple[str, str]] = []
        text = " ".join(text.split())  # so each window is an exact prefix of what is left
        start, joint = 0, ""
        while start < len(text):
            window = _first_words(self._reach(text, start), fits)
            windows.append((window, joint))
            start += len(window)
            joint = ""
            if text.startswith(" ", start):
                start += 1
                joint = " "
        return windows

    def _reach(self, text: str, start: int) -> str:
        """The most of ``text`` from ``start`` that one window can hold, to search for the window in.

        Every word costs a token at least, and no token spans over ``_TOKEN_CHARS`` characters, so a window
        holds at most ``max_tokens`` words of that many characters each.  Searching all the text that is left
        instead made splitting a long sentence quadratic: a 1 MB paragraph took minutes, 10 MB hours.
        """
        end = start
        for _ in range(self.max_tokens):
            end = text.find(" ", end + 1)
            if end < 0:
                end = len(text)
                break
        return text[start : min(end, start + self.max_tokens * _TOKEN_CHARS)]

    def _table_parts(self, table: str) -> list[str]:
        """Row groups that fit, each under the table's header.  A row that cannot fit under the header, and
        every row when the header alone is too wide, is split as text of its own (``_row_parts``), each value
        after its column's name ("Plan: Pro; Price: 12 EUR"), so no piece loses what its values are."""
        lines = table.split("\n")
        head = "\n".join(lines[:2])  # the header row and the |---| line
        names = _cells(lines[0])
        if not self._fits_text(head):
            return [part for row in lines[2:] for part in self._row_parts(names, row)]
        parts: list[str] = []
        group: list[str] = []
        for row in lines[2:]:
            if self._fits_text("\n".join([head, *group, row])):
                group.append(row)
                continue
            if group:
                parts.append("\n".join([head, *group]))
            group = [row] if self._fits_text(f"{head}\n{row}") else []
            if not group:
                parts.extend(self._row_parts(names, row))
        if group:
            parts.append("\n".join([head, *group]))
        return parts

    def _row_parts(self, names: list[str], row: str) -> list[str]:
        """A row as "name: value" cells joined by "; ", in pieces of whole cells that fit; every piece after the
        first starts with the row's first cell, its key ("Model: X-200; Notes: ...").  A cell too long alone is
        split at sentences (words when one is too long), each of its pieces after the key and its column's name,
        so a piece read alone still says which row and which column it continues."""
        cells = [(f"{name}: " if name else "", value) for name, value in zip(names, _cells(row)) if value]
        if not cells:
            return []
        key = self._lead("".join(cells[0]))
        parts: list[str] = []
        group: list[str] = []
        for number, (label, value) in enumerate(cells):
            cell = label + value
            if self._fits_after_overlap("; ".join([*group, cell])):
                group.append(cell)
                continue
            lead = [key] if number else []
            if self._fits_after_overlap("; ".join([*lead, cell])):
                if group:
                    parts.append("; ".join(group))
                group = [*lead, cell]
                continue
            pieces = self._cell_pieces(group or lead, lead, self._lead(label.rstrip()) + " " if label else "", value)
            parts.extend(pieces[:-1])
            group = [pieces[-1]]
        parts.append("; ".join(group))
        return parts

    def _cell_pieces(self, first: list[str], then: list[str], label: str, value: str) -> list[str]:
        """``value`` in pieces that fit, the first after the cells ``first`` and ``label``, the others after
        ``then`` and ``label``; packed from sentences, and from word windows of a sentence too long alone.
        When ``first`` leaves no room for any of it, ``first`` is a piece of its own."""
        def prefix(cells: list[str]) -> str:
            return "; ".join([*cells, ""]) + label

        lead = prefix(first)
        pieces: list[str] = []
        current = ""
        for sentence, joint in _sentences(value):
            windows = [(sentence, joint)] if self._fits_after_overlap(prefix(then) + sentence) else \
                self._word_windows(sentence, lambda t: self._fits_after_overlap(prefix(then) + t))
            for i, (window, between) in enumerate(windows):
                joined = f"{current}{joint if i == 0 else between}{window}" if current else window
                if self._fits_after_overlap(lead + joined):
                    current = joined
                    continue
                if current:
                    pieces.append(lead + current)
                elif first:  # nothing of the cell fits after the cells before it: they go alone
                    pieces.append("; ".join(first))
                lead, current = prefix(then), window
        pieces.append(lead + current)
        return pieces

    def _lead(self, text: str) -> str:
        """``text``, or its first words, within a quarter of the window: what leads every piece of a long row."""
        return _first_words(text, lambda t: self.count(t) - self.baseline <= self.max_tokens // 4) if text else text

    # -- overlap ------------------------------------------------------------------------

    def _overlap(self, piece: list[_Unit]) -> list[_Unit]:
        """The end of ``piece`` to repeat at the start of the next chunk: whole sentences
        while they fit in ``overlap_tokens``, else the last words of the last sentence.
        Tables are not repeated: a row group is only readable with its header."""
        if self.overlap_tokens == 0:
            return []
        tail: list[_Unit] = []
        for unit in reversed(piece):
            if unit.table:
                break
            sentences = _sentences(unit.text)
            for i in range(len(sentences) - 1, -1, -1):
                sentence, joint = sentences[i]
                candidate = [_Unit(sentence, unit.page, unit.sep if i == 0 else joint)] + tail
                if self._overlap_size(candidate) > self.overlap_tokens:
                    if tail:
                        return tail
                    words = _last_words(sentence, lambda t: self._overlap_size([_Unit(t, None, "")]) <= self.overlap_tokens)
                    return [_Unit(words, unit.page, " ")] if words else []
                tail = candidate
        return tail

    def _overlap_size(self, units: list[_Unit]) -> int:
        body = "".join((unit.sep if i else "") + unit.text for i, unit in enumerate(units))
        return self.count(body) - self.baseline


def _cells(row: str) -> list[str]:
    """The cells of a Markdown table row as ``markdown_tables`` writes it, unescaped."""
    return [cell.strip().replace("\\|", "|") for cell in _CELL_BREAK.split(row)[1:-1]]


def _sentences(text: str) -> list[tuple[str, str]]:
    """Sentences of ``text``, each with what joins it to the one before it (a space where whitespace was between
    them, nothing after a Chinese or Japanese full stop that had none); a list marker split off by the full stop
    ("1.") rejoins its sentence."""
    sentences: list[tuple[str, str]] = []
    start, joint = 0, ""
    for end, gap in [(m.start(), m.group()) for m in _SENTENCE_BREAK.finditer(text)] + [(len(text), "")]:
        part = text[start:end]
        if sentences and _LIST_MARKER.match(sentences[-1][0]):
            sentences[-1] = (sentences[-1][0] + joint + part, sentences[-1][1])
        elif part:
            sentences.append((part, joint))
        start, joint = end + len(gap), " " if gap else ""
    return sentences


def _first_words(text: str, fits: Callable[[str], bool]) -> str:
    """The longest whitespace-bounded prefix of ``text`` that ``fits``; characters if one word is too long."""
    words = text.split()
    low, high = 1, len(words)
    while low < high:  # binary search: counting is the cost here
        middle = (low + high + 1) // 2
        if fits(" ".join(words[:middle])):
            low = middle
        else:
            high = middle - 1
    prefix = " ".join(words[:low])
    if fits(prefix):
        return prefix
    low, high = 1, len(words[0])
    while low < high:
        middle = (low + high + 1) // 2
        if fits(words[0][:middle]):
            low = middle
        else:
            high = middle - 1
    return words[0][:low]


def _last_words(text: str, fits: Callable[[str], bool]) -> str:
    """The longest whitespace-bounded suffix of ``text`` that ``fits`` (may be empty)."""
    words = text.split()
    low, high = 0, len(words)  # the answer is the smallest start index whose suffix fits
    while low < high:
        middle = (low + high) // 2
        if fits(" ".join(words[middle:])):
            high = middle
        else:
            low = middle + 1
    return " ".join(words[low:])
