"""PDF: text with page numbers, headings from font size and weight, ruled tables as Markdown.

Text comes from PDFium (pypdfium2).  Measured on the 33-page Surface Pro 4 guide, reading
every character with its font size, weight and position takes about 11 ms a page here
(PDFium's plain text alone 1.7 ms), against 93 ms for pdfplumber, 53 ms for pdfminer.six
and 26 ms for pypdf (which gives no layout); PDFium also keeps the reading order of
two-column papers and the word spaces of TeX output, both of which pdfplumber's line
clustering loses.  PDFium cannot find tables, so only pages with ruling lines (2+
horizontal and 2+ vertical thin paths) also go through pdfplumber's table finder (about
190 ms for such a page), whose cells replace the text they cover.  pdfplumber depends
on pypdfium2 anyway, so this is one dependency.  All are MIT, Apache or BSD licensed,
unlike PyMuPDF (AGPL).

Lines become blocks by simple, explainable rules: running headers, footers and page
numbers (the same text in the page margins of many pages) and table-of-contents
leader lines are dropped; the largest heading size, when it appears only on page 1, is
the document title; a larger or all-bold short line is a heading (``typography.py``);
lines starting with a bullet or "1." are list items; a vertical gap, a font-size change,
a jump back up the page (next column) or a first-line indent starts a new paragraph.
"""

from __future__ import annotations

import ctypes
import itertools
import math
import re
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from io import BytesIO

import pdfplumber
import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from openqna.ingest.markdown_tables import markdown_table
from openqna.ingest.parsed import Block, DocumentError, ParsedDocument
from openqna.ingest.typography import HeadingLevels, HeadingLook, body_size, looks_like_heading

# PDFium keeps global state and is not thread-safe; the server may parse uploads in threads.
_PDFIUM_LOCK = threading.Lock()

_BULLET = re.compile(r"^(?:[\u2022\u25cf\u25aa\u25e6\u25a0\u25a1\u27a2\u2713\u00b7\uf0a7\uf0b7\uf0d8\uf0fc]\s*|[*\u2013-]\s+)")
_NUMBERED = re.compile(r"^\(?\d{1,2}[.)]\s")
_LINK = re.compile(r"https?://|www\.|@\w+\.", re.IGNORECASE)
_TOC_LEADER = re.compile(r"(\.\s?){4,}\s*[0-9ivxlcdm]+\s*$", re.IGNORECASE)
_PAGE_NUMBER = re.compile(r"^(page\s+)?[-\u2013 ]*([0-9]+|[ivxlcdm]+)[-\u2013 ]*$", re.IGNORECASE)
_NUMERALS = re.compile(r"\b([0-9]+|[ivxlcdm]+)\b", re.IGNORECASE)
_SOFT_HYPHENS = "\ufffe\u00ad\x02"
_PRIVATE_USE = re.compile("[\ue000-\uf8ff]")
_SUBSET_PREFIX = re.compile(r"^[A-Z]{6}\+")
_BOLD_NAME = re.compile(r"bold|black|heavy|semibold|demi", re.IGNORECASE)
_FILE_LIKE_TITLE = re.compile(r"\.(docx?|pdf|pptx?|rtf|txt)$|^microsoft (word|powerpoint) - ", re.IGNORECASE)
MARGIN = 0.1  # top and bottom fraction of a page where running headers and footers live


_Table = tuple[tuple[float, float, float, float], str]  # (x0, top, x1, bottom) from the page top, Markdown


@dataclass
class _Line:
    page: int
    text: str = ""
    size: float = 0.0
    bold: bool = False
    x0: float = 0.0
    top: float = 0.0  # from the top of the page, like reading
    bottom: float = 0.0
    hyphenated: bool = False  # ended with a soft hyphen: join the next line without a space
    table: str | None = None  # a Markdown table that stands in this position instead of text
    font: str = ""  # the font name most of its characters use, without a subset prefix ("ABCDEF+")
    colour: int = 0  # their fill colour as 0xRRGGBB


@dataclass
class _Page:
    number: int
    height: float
    lines: list[_Line] = field(default_factory=list)


# A PDF's pages and content streams decompress to far more than the file: a 1.9 MB page of 8 million text objects
# took PDFium 8 GB (kept by the process afterwards), and 2,000 small pages held every project's jobs for 6 minutes.
# A PDF is therefore read in a process of its own, under a memory cap and a time limit, and refused past them.
MAX_PAGES = 3_000
PARSE_MEMORY_BYTES = 3 * 1024**3
PARSE_SECONDS = 300


def parse_pdf(name: str, data: bytes) -> ParsedDocument:
    """``name``'s text as blocks (see the module docstring), read in a child process bounded by
    ``PARSE_MEMORY_BYTES`` and ``PARSE_SECONDS``; ``DocumentError`` past either, or past ``MAX_PAGES``."""
    with _PDFIUM_LOCK:
        pdf = _open(name, data)
        try:
            pages = len(pdf)
        finally:
            pdf.close()
    if pages > MAX_PAGES:
        raise DocumentError(name, f"has {pages:,} pages; the limit is {MAX_PAGES:,}: split it into smaller files")
    import multiprocessing

    context = multiprocessing.get_context("spawn")  # no fork of a server's threads and models
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_parse_in_child, args=(name, data, send, PARSE_MEMORY_BYTES), daemon=True)
    child.start()
    send.close()
    try:
        if not receive.poll(PARSE_SECONDS):
            raise DocumentError(name, f"took longer than {PARSE_SECONDS} s to read (its pages hold too much); "
                                      "split it, or export its text")
        try:
            kind, value = receive.recv()
        except EOFError:  # the child died: PDFium ran out of the memory it may use
            raise DocumentError(name, f"needs more than {PARSE_MEMORY_BYTES // 1024**2:,} MB of memory to read (its "
                                      "content decompresses to far more than the file); split it, or export its "
                                      "text") from None
    finally:
        receive.close()
        if child.is_alive():
            child.kill()
        child.join()
    if kind == "error":
        raise DocumentError(name, value)
    return value


def _parse_in_child(name: str, data: bytes, send, memory: int) -> None:  # type: ignore[no-untyped-def]
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    try:
        send.send(("ok", _parse_here(name, data)))
    except DocumentError as err:
        send.send(("error", str(err).split(": ", 1)[-1]))
    except MemoryError:
        pass  # the parent reads the closed pipe as "too much memory"
    except Exception as err:  # noqa: BLE001 - a damaged file PDFium or pdfplumber trips on: said, not "memory"
        send.send(("error", f"could not be read ({type(err).__name__}); it may be damaged"))
    finally:
        send.close()


def _parse_here(name: str, data: bytes) -> ParsedDocument:
    with _PDFIUM_LOCK:
        pdf = _open(name, data)
        try:
            title = (pdf.get_metadata_dict().get("Title") or "").strip()
            pages = _read_pages(pdf, data)
        finally:
            pdf.close()
    lines = _drop_furniture(pages)
    if not any(line.text or line.table for line in lines):
        raise DocumentError(name, "has no text layer (is it a scan?); OCR is not supported")
    title_lines = _title_lines(lines)
    if not title or _FILE_LIKE_TITLE.search(title):
        title = " ".join(line.text for line in title_lines)
    title_ids = {id(line) for line in title_lines}
    body = [line for line in lines if id(line) not in title_ids]
    return ParsedDocument(source=name, title=title or None, blocks=_blocks(body))


def _open(name: str, data: bytes) -> pdfium.PdfDocument:
    try:
        return pdfium.PdfDocument(data)
    except pdfium.PdfiumError as err:
        code = getattr(err, "err_code", None)
        if code == pdfium_c.FPDF_ERR_PASSWORD:
            raise DocumentError(name, "is encrypted with a password; remove the password and upload it again") from None
        if code == pdfium_c.FPDF_ERR_SECURITY:
            raise DocumentError(name, "uses an unsupported PDF security handler") from None
        raise DocumentError(name, "is not a valid PDF or is damaged") from None


# --- PDFium characters -> lines ----------------------------------------------------------


def _read_pages(pdf: pdfium.PdfDocument, data: bytes) -> list[_Page]:
    pages = []
    plumber: pdfplumber.PDF | None = None
    try:
        for index in range(len(pdf)):
            page = pdf[index]
            tables: list[_Table] = []
            if _has_ruling(page):
                plumber = plumber or pdfplumber.open(BytesIO(data))
                tables = _tables(plumber.pages[index])
            pages.append(_lines(page, index + 1, tables))
            page.close()
    finally:
        if plumber is not None:
            plumber.close()
    return pages


def _has_ruling(page: pdfium.PdfPage) -> bool:
    horizontal = vertical = 0
    for obj in page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_PATH]):
        left, bottom, right, top = obj.get_bounds()
        if top - bottom <= 2 and right - left > 5:
            horizontal += 1
        elif right - left <= 2 and top - bottom > 5:
            vertical += 1
    return horizontal >= 2 and vertical >= 2


def _tables(page: pdfplumber.page.Page) -> list[_Table]:
    """(bbox from the page top, Markdown) of each real table on a pdfplumber page.

    Layout boxes also look like tables to the finder; we keep grids with 2+ columns whose
    cells are mostly filled (a diagram's grid is mostly empty).
    """
    found = []
    for table in page.find_tables():
        rows = table.extract()
        cells = [cell for row in rows for cell in row]
        if max((len(row) for row in rows), default=0) < 2 or sum(1 for c in cells if c and c.strip()) * 2 < len(cells):
            continue
        rendered = markdown_table(rows, header=_bold_first_row(page, table))
        if rendered:
            found.append((table.bbox, rendered))
    page.close()  # drops the page's parsed objects; a long manual would otherwise keep them all
    return found


def _bold_first_row(page: pdfplumber.page.Page, table: pdfplumber.table.Table) -> bool:
    """PDFs do not say which row is a header; a first row set all in bold above rows that are not is one."""
    rows = table.rows
    if len(rows) < 2:
        return False

    def bold(row: pdfplumber.table.Row) -> bool:
        x0, top, x1, bottom = row.bbox
        chars = [c for c in page.chars if not c["text"].isspace()
                 and x0 <= (c["x0"] + c["x1"]) / 2 <= x1 and top <= (c["top"] + c["bottom"]) / 2 <= bottom]
        return bool(chars) and all(_BOLD_NAME.search(c["fontname"]) for c in chars)

    return bold(rows[0]) and not all(bold(row) for row in rows[1:])


def _lines(page: pdfium.PdfPage, number: int, tables: list[_Table]) -> _Page:
    """The page's text lines in PDFium's reading order, with a table standing where its text was.

    This loop is most of the parse time, so it makes raw PDFium calls and as few as it
    can: a character's box only for the first character of a line (or for all of them on
    a page with tables), its font name only when the font states no weight.
    """
    height = page.get_height()
    text_page = page.get_textpage()
    handle = text_page.raw
    out = _Page(number, height)
    rect = pdfium_c.FS_RECTF()
    matrix = pdfium_c.FS_MATRIX()
    font_name = ctypes.create_string_buffer(128)
    flags = ctypes.byref(ctypes.c_int())
    red, green, blue, alpha = (ctypes.c_uint() for _ in range(4))
    rgba = (ctypes.byref(red), ctypes.byref(green), ctypes.byref(blue), ctypes.byref(alpha))
    fonts: dict[bytes, tuple[str, bool]] = {}  # raw font name -> (name without subset prefix, says bold)
    line = _LineBuilder(number)
    placed: set[int] = set()

    for i in range(pdfium_c.FPDFText_CountChars(handle)):
        code = pdfium_c.FPDFText_GetUnicode(handle, i)
        if code in (10, 13):
            line.end(out.lines)
            continue
        if tables or line.box is None:
            pdfium_c.FPDFText_GetLooseCharBox(handle, i, rect)
            box = (rect.left, height - rect.top, rect.right, height - rect.bottom)
            table = _table_at(box, tables) if tables else None
            if table is not None:
                if table not in placed:  # the table takes the place of its first character
                    line.end(out.lines)
                    placed.add(table)
                    out.lines.append(_Line(number, top=box[1], bottom=box[3], table=tables[table][1]))
                continue
            if line.box is None and not chr(code).isspace() and chr(code) not in _SOFT_HYPHENS:
                line.box = box
        char = chr(code)
        if char.isspace() or char in _SOFT_HYPHENS:
            line.add(char, 0.0, False)
            continue
        pdfium_c.FPDFText_GetFontInfo(handle, i, font_name, len(font_name), flags)
        raw_name = font_name.value
        if raw_name not in fonts:
            decoded = _SUBSET_PREFIX.sub("", raw_name.decode("latin-1"))
            fonts[raw_name] = (decoded, bool(_BOLD_NAME.search(decoded)))
        font, named_bold = fonts[raw_name]
        weight = pdfium_c.FPDFText_GetFontWeight(handle, i)
        bold = weight >= 600 if weight > 0 else named_bold  # a font that states no weight may still be named "Bold"
        pdfium_c.FPDFText_GetFillColor(handle, i, *rgba)
        # The size in Tf times the text matrix's scale: InDesign sets "1 Tf" and scales by 12.
        pdfium_c.FPDFText_GetMatrix(handle, i, matrix)
        scale = math.sqrt(abs(matrix.a * matrix.d - matrix.b * matrix.c))
        line.add(char, pdfium_c.FPDFText_GetFontSize(handle, i) * scale, bold,
                 (font, red.value << 16 | green.value << 8 | blue.value))
    line.end(out.lines)
    text_page.close()
    return out


class _LineBuilder:
    """Collects one line's characters; ``end`` turns them into a ``_Line``."""

    def __init__(self, page: int):
        self.page = page
        self._reset()

    def _reset(self) -> None:
        self.chars: list[str] = []
        self.sizes: Counter[float] = Counter()
        self.looks: Counter[tuple[str, int]] = Counter()
        self.all_bold = True
        self.box: tuple[float, float, float, float] | None = None

    def add(self, char: str, size: float, bold: bool, look: tuple[str, int] = ("", 0)) -> None:
        self.chars.append(char)
        if not char.isspace() and char not in _SOFT_HYPHENS:
            self.sizes[round(size, 1)] += 1
            self.looks[look] += 1
            self.all_bold = self.all_bold and bold

    def end(self, lines: list[_Line]) -> None:
        text = "".join(self.chars)
        if self.sizes and self.box is not None:
            hyphenated = text.rstrip().endswith(tuple(_SOFT_HYPHENS))
            for soft in _SOFT_HYPHENS:
                text = text.replace(soft, "")
            text = text.lstrip()
            # Icon-font glyphs (private use area) mean nothing as text, except as a leading bullet.
            text = text[:1] + _PRIVATE_USE.sub("", text[1:])
            x0, top, _, bottom = self.box
            size = self.sizes.most_common(1)[0][0]
            font, colour = self.looks.most_common(1)[0][0]
            lines.append(_Line(self.page, " ".join(text.split()), size, self.all_bold, x0, top, bottom, hyphenated,
                               font=font, colour=colour))
        self._reset()


def _table_at(box: tuple[float, float, float, float], tables: list[_Table]) -> int | None:
    x = (box[0] + box[2]) / 2
    y = (box[1] + box[3]) / 2
    for index, ((x0, top, x1, bottom), _) in enumerate(tables):
        if x0 - 1 <= x <= x1 + 1 and top - 1 <= y <= bottom + 1:
            return index
    return None


# --- lines -> blocks -----------------------------------------------------------------------


def _drop_furniture(pages: list[_Page]) -> list[_Line]:
    """Every line but running headers/footers, page numbers, TOC leaders and empty lines."""

    def key(line: _Line, page: _Page) -> str | None:
        in_margin = line.top < page.height * MARGIN or line.bottom > page.height * (1 - MARGIN)
        return _NUMERALS.sub("#", line.text.lower()) if in_margin and line.text else None

    seen = Counter(k for page in pages for k in {key(line, page) for line in page.lines} if k)
    repeated = {k for k, n in seen.items() if n >= 3 and n >= len(pages) * 0.3}
    kept = []
    for page in pages:
        for line in page.lines:
            k = key(line, page)
            if line.table is None and (
                not any(c.isalnum() for c in line.text)
                or k in repeated
                or (k is not None and _PAGE_NUMBER.match(line.text))
                or _TOC_LEADER.search(line.text)
            ):
                continue
            kept.append(line)
    return kept


def _title_lines(lines: list[_Line]) -> list[_Line]:
    """The (at most three) lines set in the document's largest size, when that size is used only on page 1 and
    those lines follow one another: a one-page guide's three 18 pt headings, with text between them, are headings
    (they were read as its title, and their sections as one passage with no heading)."""
    texts = [line for line in lines if line.text and any(c.isalpha() for c in line.text)]
    if not texts:
        return []
    largest = max(line.size for line in texts)
    at = [i for i, line in enumerate(texts) if line.size >= largest - 0.5]
    body = body_size((line.size, len(line.text)) for line in texts)
    if largest < body + 2 or len(at) > 3 or any(texts[i].page != 1 for i in at) or at[-1] - at[0] != len(at) - 1:
        return []
    return [texts[i] for i in at]


def _blocks(lines: list[_Line]) -> list[Block]:
    body = body_size((line.size, len(line.text)) for line in lines if line.table is None)
    styles = _heading_styles(lines, body)

    def is_heading(line: _Line) -> bool:
        return line.table is None and looks_like_heading(line.text, line.size, line.bold, body,
                                                         styled=_style(line) in styles)

    def look(line: _Line) -> HeadingLook:
        return HeadingLook(line.size, line.colour, _style(line) if _style(line) in styles else None)

    levels = HeadingLevels((look(line) for line in lines if is_heading(line)), body)
    blocks: list[Block] = []
    current: list[_Line] = []

    def flush() -> None:
        if current:
            blocks.append(_block(current, levels.level(look(current[0])) if is_heading(current[0]) else 0))
            current.clear()

    for line in lines:
        if line.table is not None:
            flush()
            blocks.append(Block("table", line.table, page=line.page))
        elif current and _continues(current, line, is_heading):
            current.append(line)
        else:
            flush()
            current.append(line)
    flush()
    return blocks


def _style(line: _Line) -> tuple[str, int]:
    return line.font, line.colour


def _heading_styles(lines: list[_Line], body: float) -> set[tuple[str, int]]:
    """The (font, colour) pairs of headings set at body size, as Word sets its Heading 4 and 5.

    A style qualifies when it differs from the body text in font *and* colour (a link changes only the colour,
    italics only the font) and every body-size line set in it looks like a heading (short, not a sentence,
    not a list item): a coloured call-out box in another font fails on its first full stop.
    """
    at_body = [line for line in lines if line.table is None and abs(line.size - body) <= 0.5]
    counts: Counter[tuple[str, int]] = Counter()
    for line in at_body:
        counts[_style(line)] += len(line.text)
    if not counts:
        return set()
    body_font, body_colour = counts.most_common(1)[0][0]
    candidates = {style for style in counts if style[0] != body_font and style[1] != body_colour}
    for line in at_body:
        if _style(line) in candidates and (
            not looks_like_heading(line.text, line.size, False, body, styled=True)
            or _BULLET.match(line.text) or _NUMBERED.match(line.text) or _LINK.search(line.text)
        ):
            candidates.discard(_style(line))
    return candidates


def _continues(block: list[_Line], line: _Line, is_heading: Callable[[_Line], bool]) -> bool:
    """Whether ``line`` belongs to the block whose lines so far are ``block``."""
    last = block[-1]
    if line.page != last.page or is_heading(line) != is_heading(last) or abs(line.size - last.size) > 0.5:
        return False
    if line.top < last.top - 1 or line.top - last.bottom > 0.6 * last.size:
        return False  # the next column, or a paragraph gap
    if is_heading(line):
        return line.bold == last.bold and _style(line) == _style(last)  # a heading wrapped onto two lines
    if _BULLET.match(line.text) or _NUMBERED.match(line.text):
        return False
    if _BULLET.match(block[0].text) or _NUMBERED.match(block[0].text):
        return line.x0 > block[0].x0 + 2  # list text hangs right of the bullet
    return line.x0 <= last.x0 + last.size  # a first-line indent starts a new paragraph


def _block(lines: list[_Line], level: int) -> Block:
    """The block of ``lines``: a heading of ``level`` when that is not 0."""
    text = lines[0].text
    for previous, line in itertools.pairwise(lines):
        text += line.text if previous.hyphenated else " " + line.text
    page = lines[0].page
    if level:
        return Block("heading", text, level=level, page=page)
    bullet = _BULLET.match(text)
    if bullet and len(text) > bullet.end():
        return Block("list_item", "- " + text[bullet.end() :], page=page)
    if _NUMBERED.match(text):
        return Block("list_item", text, page=page)
    return Block("paragraph", text, page=page)
