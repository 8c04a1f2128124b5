"""Word (.docx) files via python-docx: headings, numbered and bulleted lists, tables.

Headings come from the paragraph's outline level (what Word's navigation pane shows,
set by the built-in "Heading N" styles in every UI language).  Documents that use no
heading style at all, such as QnA Maker's multi-turn sample whose topics are just
larger blue text, get headings from font size and weight instead (``typography.py``).
In a document that does use heading styles, a short paragraph set all in bold that asks a
question ("How do I reset my password?") is still a heading, one level below the styled
heading it stands under: that is how FAQ documents under a styled title are written.

Paragraph text is read from the XML rather than ``Paragraph.text`` because python-docx
skips nested hyperlinks ("Open your [benefits website]." came out as "Open your .").  A paragraph's
blocks keep its hyperlinks (``w:hyperlink``, whose relationship names the target) and bold and italic
runs as Markdown; headings and table cells are plain text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from io import BytesIO
from itertools import groupby

import docx
from docx.document import Document
from docx.enum.style import WD_STYLE_TYPE
from docx.oxml.ns import qn
from docx.styles.style import BaseStyle
from docx.text.paragraph import Paragraph
from docx.text.run import Run
from lxml.etree import _Element

from openqna.ingest.markdown_tables import markdown_table
from openqna.ingest.parsed import Block, ParsedDocument
from openqna.ingest.typography import HeadingLevels, HeadingLook, body_size, looks_like_heading

_HEADING_STYLE = re.compile(r"heading\s*([1-9])$", re.IGNORECASE)
_MC_FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"
_ORDERED_FORMATS = {"decimal", "decimalZero", "lowerLetter", "upperLetter", "lowerRoman", "upperRoman"}
_QUESTION_MARKS = ("?", "？")
_WORD_DEFAULT_SIZE = 10.0  # points, when neither styles nor document defaults set one


@dataclass
class _Para:
    """What we need to know about one paragraph before deciding its block kind."""

    text: str
    markdown: str  # ``text`` with its links, bold and italics as Markdown, for paragraph and list-item blocks
    outline: int | None  # 0-based outline level from style or direct formatting
    is_title: bool
    numbering: tuple[str, int] | None  # (numId, level)
    runs: list[tuple[float, bool, int]]  # (size, bold, characters) per run with text

    @property
    def styled_heading(self) -> bool:
        return self.outline is not None and self.outline < 9  # level 9 is Word's "body text"

    @property
    def look(self) -> tuple[float, bool]:
        """(smallest run size, every run bold): a heading must look like one from end to end."""
        sizes = [size for size, _, _ in self.runs]
        return (min(sizes) if sizes else 0.0), bool(self.runs) and all(bold for _, bold, _ in self.runs)


def parse_docx(name: str, data: bytes) -> ParsedDocument:
    document = docx.Document(BytesIO(data))
    reader = _Reader(document)
    items = list(reader.body_items())
    title = (document.core_properties.title or "").strip() or None
    paras = [item for item in items if isinstance(item, _Para)]
    by_style = any(p.styled_heading for p in paras)
    body = body_size((size, chars) for p in paras for size, _, chars in p.runs) or _WORD_DEFAULT_SIZE
    visual = {  # ids of paragraphs that are headings by their looks alone
        id(p) for p in paras
        if not by_style and p.numbering is None and looks_like_heading(p.text, *p.look, body)
    }
    levels = HeadingLevels((HeadingLook(p.look[0]) for p in paras if id(p) in visual), body)
    questions = {  # ids of bold questions in a document with heading styles
        id(p) for p in paras
        if by_style and not p.styled_heading and p.numbering is None and p.look[1]
        and p.text.endswith(_QUESTION_MARKS) and looks_like_heading(p.text, *p.look, body)
    }
    level = 0  # the last styled heading's level
    numbers = _ListNumbers(reader)
    blocks: list[Block] = []
    for item in items:
        if isinstance(item, str):
            blocks.append(Block("table", item))
        elif item.is_title:
            title = title or item.text
        elif item.styled_heading:
            level = item.outline + 1
            blocks.append(Block("heading", " ".join(item.text.split()), level=level))
        elif id(item) in questions:
            blocks.append(Block("heading", " ".join(item.text.split()), level=level + 1))
        elif id(item) in visual:
            blocks.append(Block("heading", " ".join(item.text.split()), level=levels.level(HeadingLook(item.look[0]))))
        elif item.numbering is not None:
            num_id, level = item.numbering
            blocks.append(Block("list_item", "  " * level + numbers.marker(num_id, level) + " " + item.markdown))
        else:
            blocks.append(Block("paragraph", item.markdown))
    return ParsedDocument(source=name, title=title, blocks=blocks)


class _Reader:
    """Reads paragraphs and tables in body order, resolving style inheritance.

    Style chains are resolved through our own id -> style map: python-docx looks each
    style up by a linear scan, which made a 12-page file take half a second.
    """

    def __init__(self, document: Document):
        self.document = document
        self.styles = {style.style_id: style for style in document.styles}
        default = document.styles.default(WD_STYLE_TYPE.PARAGRAPH)
        self.default_style_id = default.style_id if default is not None else None
        sizes = document.styles.element.xpath("w:docDefaults/w:rPrDefault/w:rPr/w:sz/@w:val")
        self.default_size = int(sizes[0]) / 2 if sizes else _WORD_DEFAULT_SIZE
        self._chains: dict[str | None, list[BaseStyle]] = {}
        self._inherited: dict[tuple[str | None, str | None], tuple[float, bool | None]] = {}
        self._names: dict[str | None, str] = {}

    def body_items(self) -> Iterator[_Para | str]:
        """``_Para`` for each non-empty paragraph, Markdown text for each table."""
        yield from self._walk(self.document.element.body)

    def _walk(self, parent: _Element) -> Iterator[_Para | str]:
        for child in parent.iterchildren():
            if child.tag == _P:
                para = self._paragraph(child)
                if para is not None:
                    yield para
            elif child.tag == _TBL:
                rendered = markdown_table(_table_rows(child), header=self._has_header_row(child))
                if rendered:
                    yield rendered
            elif child.tag == _SDT:  # content controls: cover pages, boxes (TOCs are skipped below)
                content = child.find(qn("w:sdtContent"))
                if content is not None:
                    yield from self._walk(content)

    def _has_header_row(self, table: _Element) -> bool:
        """Whether the first row is a header, as a reader sees it: Word's "Repeat as header row", a table style
        that sets its first row apart (bold or shaded) with the table's "Header Row" option on, or a first row
        set in bold by hand above rows that are not."""
        rows = list(table.iterchildren(_TR))
        if not rows:
            return False
        if rows[0].find(f"{_TR_PR}/{qn('w:tblHeader')}") is not None:
            return True
        properties = table.find(qn("w:tblPr"))
        style_id = _val(properties, qn("w:tblStyle")) if properties is not None else None
        if style_id is not None and _first_row_look(properties):
            for style in self.chain(style_id):
                for special in style.element.iterchildren(qn("w:tblStylePr")):
                    if special.get(_TYPE) == "firstRow" and (special.find(f"{_RPR}/{_B}") is not None
                                                               or special.find(f"{qn('w:tcPr')}/{qn('w:shd')}") is not None):
                        return True
        return len(rows) > 1 and _all_bold(rows[0]) and not all(_all_bold(row) for row in rows[1:])

    def chain(self, style_id: str | None) -> list[BaseStyle]:
        """A style and the styles it is based on, nearest first (cycles cut)."""
        if style_id not in self._chains:
            chain: list[BaseStyle] = []
            style = self.styles.get(style_id)
            while style is not None and style not in chain and len(chain) < 20:
                chain.append(style)
                style = self.styles.get(style.element.basedOn_val)
            self._chains[style_id] = chain
        return self._chains[style_id]

    def _paragraph(self, element: _Element) -> _Para | None:
        text = _text(element).strip()
        if not text:  # first, and before any proxy is built: empty paragraphs are most of a padded file
            return None
        paragraph = Paragraph(element, self.document._body)
        styles = self.chain(paragraph._p.style or self.default_style_id)
        style_name = self.style_name(styles[0]) if styles else ""
        if style_name.lower().startswith("toc"):
            return None
        runs = []
        for r in _descendants(paragraph._p, _R):
            run_text = _text(r).strip()
            if run_text:
                run = Run(r, paragraph)
                size, bold = self._inherited_look(r.style, styles[0].style_id if styles else None)
                if run.font.size is not None:
                    size = run.font.size.pt
                if run.bold is not None:
                    bold = run.bold
                runs.append((size, bool(bold), len(run_text)))
        return _Para(
            text=text,
            markdown=self._markdown(element) or text,
            outline=_outline_level(paragraph, styles),
            is_title=style_name.lower() == "title",
            numbering=_numbering(paragraph, styles),
            runs=runs,
        )

    def _markdown(self, element: _Element) -> str:
        """The paragraph as Markdown: hyperlinks as ``[text](url)``, bold and italic runs as ``**``/``*``.

        Emphasis is what a run sets itself or through its character style, not its paragraph's style: a
        paragraph in a bold style is a heading or a caption, not emphasis within it.  Runs of one look are
        joined first (Word splits text into runs for spell checks and revisions), so "**a** **b**" is "**a b**".
        """
        pieces: list[tuple[str, bool, bool, str | None]] = []  # (text, bold, italic, link) per run
        self._runs(element, None, pieces)
        out: list[str] = []
        for link, linked in groupby(pieces, key=lambda piece: piece[3]):
            spans = [_emphasised(text, bold, italic) for (bold, italic), group in
                     groupby(_settle_spaces(list(linked)), key=lambda piece: piece[1:3])
                     for text in ["".join(piece[0] for piece in group)]]
            out.append(_wrapped("".join(spans), "[", f"]({link})") if link else "".join(spans))
        return "".join(out).strip()

    def _runs(self, element: _Element, link: str | None, pieces: list[tuple[str, bool, bool, str | None]]) -> None:
        for child in element.iterchildren():
            if child.tag == _R:
                text = _text(child)
                if text:
                    bold, italic = self._emphasis(child)
                    pieces.append((text, bold, italic, link))
            elif child.tag == _HYPERLINK:
                self._runs(child, link or self._link_target(child), pieces)
            elif child.tag != _MC_FALLBACK:
                self._runs(child, link, pieces)

    def _link_target(self, hyperlink: _Element) -> str | None:
        """Where a ``w:hyperlink`` points: its relationship's external target (a bookmark within the document,
        ``w:anchor``, means nothing outside it)."""
        rel = self.document.part.rels.get(hyperlink.get(_RELATIONSHIP_ID) or "")
        if rel is None or not rel.is_external:
            return None
        target = rel.target_ref.strip()
        if target.split(":", 1)[0].lower() not in _LINK_SCHEMES:
            return None
        return target.replace(" ", "%20").replace("(", "%28").replace(")", "%29")  # a link ends at " " or ")"

    def _emphasis(self, run: _Element) -> tuple[bool, bool]:
        """(bold, italic) a run sets itself, else through its character style."""
        properties = run.find(_RPR)
        looks = []
        for tag, attribute in ((_B, "bold"), (_I, "italic")):
            found = properties.find(tag) if properties is not None else None
            if found is not None:
                looks.append(found.get(_VAL) not in ("0", "false", "off"))
            else:
                chain = self.chain(run.style) if run.style else []
                looks.append(bool(next((getattr(s.font, attribute) for s in chain
                                        if getattr(s.font, attribute) is not None), False)))
        return looks[0], looks[1]

    def style_name(self, style: BaseStyle) -> str:
        """A style's UI name, read once per style (python-docx reads it from the XML on every call)."""
        if style.style_id not in self._names:
            self._names[style.style_id] = style.name or ""
        return self._names[style.style_id]

    def _inherited_look(self, run_style: str | None, paragraph_style: str | None) -> tuple[float, bool | None]:
        """(size, bold) a run gets from its character style, then its paragraph style, then the defaults."""
        key = (run_style, paragraph_style)
        if key not in self._inherited:
            chain = self.chain(run_style) + self.chain(paragraph_style)
            size = next((s.font.size.pt for s in chain if s.font.size is not None), self.default_size)
            bold = next((s.font.bold for s in chain if s.font.bold is not None), None)
            self._inherited[key] = (size, bold)
        return self._inherited[key]


def _outline_level(paragraph: Paragraph, styles: list[BaseStyle]) -> int | None:
    for element in (paragraph._p, *(s.element for s in styles)):
        value = _val(element, _PPR, _OUTLINE_LVL)
        if value is not None:
            return int(value)
    found = _HEADING_STYLE.match(styles[0].name or "") if styles else None
    return int(found.group(1)) - 1 if found else None


def _numbering(paragraph: Paragraph, styles: list[BaseStyle]) -> tuple[str, int] | None:
    """(numId, level) when the paragraph is a list item, directly or through its style."""
    for element in (paragraph._p, *(s.element for s in styles)):
        num_id = _val(element, _PPR, _NUM_PR, _NUM_ID)
        if num_id is not None:
            if num_id == "0":  # numId 0 explicitly switches numbering off
                return None
            level = _val(paragraph._p, _PPR, _NUM_PR, _ILVL) or _val(element, _PPR, _NUM_PR, _ILVL)
            return num_id, int(level) if level else 0
    return None


# "w:pPr/w:outlineLvl/@w:val" and its kin, read with lxml's find: xpath costs about 50 µs a call, four calls
# a paragraph, which was most of the time a Word file of many short paragraphs took
_PPR, _OUTLINE_LVL, _NUM_PR, _NUM_ID, _ILVL, _VAL = (qn(t) for t in ("w:pPr", "w:outlineLvl", "w:numPr", "w:numId",
                                                                     "w:ilvl", "w:val"))


def _val(element: _Element, *path: str) -> str | None:
    """The ``w:val`` of the first element at ``path`` under ``element``, or None."""
    for tag in path:
        found = element.find(tag)
        if found is None:
            return None
        element = found
    return element.get(_VAL)


class _ListNumbers:
    """Renders list markers: "1." style counters for numbered lists, "-" for bullets."""

    def __init__(self, reader: _Reader):
        try:
            self.numbering = reader.document.part.numbering_part.element
        except (KeyError, NotImplementedError):
            self.numbering = None
        self.counters: dict[tuple[str, int], int] = {}

    def marker(self, num_id: str, level: int) -> str:
        fmt, start = self._format(num_id, level)
        if fmt not in _ORDERED_FORMATS:
            return "-"
        for key in [k for k in self.counters if k[0] == num_id and k[1] > level]:
            del self.counters[key]  # a new item restarts the deeper levels under it
        number = self.counters.get((num_id, level), start - 1) + 1
        self.counters[(num_id, level)] = number
        return f"{number}."

    def _format(self, num_id: str, level: int) -> tuple[str, int]:
        if self.numbering is None:
            return "bullet", 1
        abstract = self.numbering.xpath(f'w:num[@w:numId="{num_id}"]/w:abstractNumId/@w:val')
        if not abstract:
            return "bullet", 1
        lvl = self.numbering.xpath(f'w:abstractNum[@w:abstractNumId="{abstract[0]}"]/w:lvl[@w:ilvl="{level}"]')
        if not lvl:
            return "bullet", 1
        fmt = lvl[0].find(qn("w:numFmt"))
        start = lvl[0].find(qn("w:start"))
        start_value = start.get(qn("w:val"), "1") if start is not None else "1"
        return (
            fmt.get(qn("w:val"), "bullet") if fmt is not None else "bullet",
            int(start_value) if start_value.isdigit() else 1,
        )


def _descendants(element: _Element, tag: str) -> Iterator[_Element]:
    """Elements named ``tag`` below ``element``, skipping the duplicate copies in mc:Fallback."""
    for child in element.iterchildren():
        if child.tag == _MC_FALLBACK:
            continue
        if child.tag == tag:
            yield child
        else:
            yield from _descendants(child, tag)


# the tags read once per element of the body, named once (``qn`` splits and joins a string on every call)
_P, _TBL, _SDT, _R, _T, _TAB, _NO_BREAK_HYPHEN = (qn(t) for t in ("w:p", "w:tbl", "w:sdt", "w:r", "w:t", "w:tab",
                                                                  "w:noBreakHyphen"))
_BREAKS = (qn("w:br"), qn("w:cr"))


def _text(element: _Element) -> str:
    parts: list[str] = []
    _collect_text(element, parts)
    return "".join(parts)


def _collect_text(element: _Element, parts: list[str]) -> None:
    for child in element.iterchildren():
        tag = child.tag
        if tag == _T:
            parts.append(child.text or "")
        elif tag == _TAB:
            parts.append("\t")
        elif tag in _BREAKS:
            parts.append("\n")
        elif tag == _NO_BREAK_HYPHEN:
            parts.append("-")
        elif tag != _MC_FALLBACK:
            _collect_text(child, parts)


_TR, _TR_PR, _RPR, _B, _I, _TYPE = qn("w:tr"), qn("w:trPr"), qn("w:rPr"), qn("w:b"), qn("w:i"), qn("w:type")
_HYPERLINK, _RELATIONSHIP_ID = qn("w:hyperlink"), qn("r:id")
_LINK_SCHEMES = frozenset({"http", "https", "mailto", "tel", "ftp"})


def _settle_spaces(pieces: list[tuple[str, bool, bool, str | None]]) -> list[tuple[str, bool, bool, str | None]]:
    """Blank runs take the look of the run before them: a space between two bold words does not end the bold."""
    settled = []
    for piece in pieces:
        if settled and not piece[0].strip():
            piece = (piece[0], settled[-1][1], settled[-1][2], piece[3])
        settled.append(piece)
    return settled


def _emphasised(text: str, bold: bool, italic: bool) -> str:
    marker = "*" * (2 * bold + italic)
    return _wrapped(text, marker, marker) if marker else text


def _wrapped(text: str, opening: str, closing: str) -> str:
    """``text`` between Markdown delimiters, its outer whitespace outside them (``** Save **`` is not bold);
    blank text stays as it is."""
    inner = text.strip()
    if not inner:
        return text
    return f"{text[: len(text) - len(text.lstrip())]}{opening}{inner}{closing}{text[len(text.rstrip()):]}"


def _first_row_look(properties: _Element) -> bool:
    """The table's "Header Row" option (``w:tblLook``: ``firstRow``, or bit 0x0020 of the older hex ``val``)."""
    look = properties.find(qn("w:tblLook"))
    if look is None:
        return True  # Word's default look includes the header row
    first = look.get(qn("w:firstRow"))
    if first is not None:
        return first in ("1", "true", "on")
    value = look.get(_VAL) or "0"
    return all(c in "0123456789abcdefABCDEF" for c in value) and bool(int(value, 16) & 0x0020)


def _all_bold(row: _Element) -> bool:
    """Every run with text in the row is bold by its own formatting."""
    runs = [r for r in row.iter(_R) if _text(r).strip()]
    for run in runs:
        bold = run.find(f"{_RPR}/{_B}")
        if bold is None or bold.get(_VAL) in ("0", "false", "off"):
            return False
    return bool(runs)


def _table_rows(table: _Element) -> list[list[str]]:
    rows = []
    for tr in table.iterchildren(qn("w:tr")):
        cells: list[str] = []
        for tc in tr.iterchildren(qn("w:tc")):
            cells.append(" ".join(_text(p).strip() for p in tc.iter(qn("w:p"))).strip())
            span = tc.find(f"{qn('w:tcPr')}/{qn('w:gridSpan')}")
            width = span.get(qn("w:val"), "1") if span is not None else "1"
            if width.isdigit():
                cells.extend([""] * (min(int(width), 50) - 1))
        rows.append(cells)
    return rows
