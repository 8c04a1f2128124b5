"""QnA files as comma-separated values: what a spreadsheet or a help desk's FAQ export saves.

The columns are QnA Maker's (``qna_table``: ``Question, Answer`` and optionally ``Source, Metadata,
SuggestedQuestions, IsContextOnly, Prompts, QnaId``, in any case and order), one row per question, grouped into
QnAs as a TSV's rows are; a lone ``Synonyms`` header makes a synonyms file, a group per row (its cells, or one
cell's comma-separated words).

Decisions:

* Quoting is RFC 4180's (Python's ``csv``): a quoted cell holds commas, quotes (doubled) and real newlines, so,
  unlike in a TSV or a workbook, ``\\n`` in a cell stays a backslash and an ``n`` (``C:\\new``).
* A line break in a cell reads as a newline whether the file has it as LF or CRLF (editors and version control
  convert line endings), so a carriage return before a newline is the one thing of a text that a CSV export
  loses.
* The separator is read off the header: a comma, or the semicolon that Excel writes where the comma is the
  decimal mark, or a tab; the one whose split gives a ``Question``/``Answer`` (or ``Synonyms``) header.
* Rows are held to the header's width as a workbook's are (``xlsx.fit_width``): empty cells at the end of a row may be
  missing or extra (spreadsheets save both), a value right of the last column is an error.
* A text cell that starts like a formula (``=``, ``+``, ``-``, ``@``, a tab or a carriage return) is written with a
  leading apostrophe, as OWASP recommends against "CSV injection": the export is for review in a spreadsheet, which
  would run ``=SUM(A1:A3)`` (or worse, ``=HYPERLINK(...)``) instead of showing it.  Reading takes exactly that
  apostrophe off again, and only before those characters, so ``'hello`` stays as it is; a text that already starts
  with apostrophes before such a character (``'=x``) gets one more, so that every text comes back as it was.
  QnA Maker's TSV is written as it is (its format, byte for byte); a workbook's cells are text, never formulas.
* Text is UTF-8 (a BOM is fine) or UTF-16 with a BOM (``qna_table.decode_text``); anything else is refused with
  the line and column of the first byte that is not UTF-8, rather than guessed at.

Errors name the 1-based line a row starts on (header = 1) and the column.  ``write_csv`` writes what ``read_csv``
reads back (the command line's ``openqna export kb.csv``; Azure's export has no CSV).
"""

from __future__ import annotations

import csv
import io

from openqna.formats import limits, qna_table
from openqna.formats.qna_table import CellError
from openqna.formats.xlsx import fit_width
from openqna.records import FormatError, KnowledgeBaseContent

SEPARATORS = (",", ";", "\t")
# What a spreadsheet reads as the start of a formula (OWASP, "CSV Injection")
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")

Row = tuple[int, list[str]]


def read_csv(data: bytes | str, name: str = "upload.csv") -> KnowledgeBaseContent:
    text = qna_table.decode_text(data, name) if isinstance(data, bytes) else data.removeprefix("\ufeff")

    def fail(message: str, line: int, column: int | None) -> FormatError:
        return FormatError(message, file=name, line=line, column=None if column is None else column + 1)

    rows = _rows(text, _separator(text), fail)
    if not rows:
        raise fail("the file is empty; expected a header row naming the columns (Question, Answer, ...)", 1, None)
    (header_line, header), body = rows[0], rows[1:]
    if qna_table.header_kind(header) == "synonyms":
        return KnowledgeBaseContent(synonyms=[_synonyms(line, cells, fail) for line, cells in body])
    return KnowledgeBaseContent(qnas=qna_table.read_table(header, fit_width(body, len(header), fail), fail,
                                                          header_line=header_line, text=read_cell))


def _formula_like(text: str) -> bool:
    """Whether ``text`` starts like a formula once the apostrophes it starts with (if any) are taken off."""
    return text.lstrip("'")[:1] in FORMULA_STARTS


def inert_cell(text: str) -> str:
    """``text`` as a CSV cell that a spreadsheet shows and never runs: with a leading apostrophe when it starts like a
    formula (after any apostrophes of its own, so that ``read_cell`` gives every text back as it was)."""
    return "'" + text if _formula_like(text) else text


def read_cell(cell: str) -> str:
    """A text cell as ``inert_cell`` wrote it, back: the one apostrophe it added taken off, and a line break read as
    a newline whether the file has it as LF or CRLF."""
    if cell.startswith("'") and _formula_like(cell):
        cell = cell[1:]
    return cell.replace("\r\n", "\n")


def _separator(text: str) -> str:
    """The separator whose split of the first non-blank line names a QnA or synonyms header (else a comma)."""
    first = next((line for line in io.StringIO(text) if line.strip(" ,;\t\r\n")), "")  # read no further
    for separator in SEPARATORS:
        try:
            header = next(csv.reader([first], delimiter=separator), [])
        except csv.Error:
            continue
        if qna_table.header_kind(header) is not None:
            return separator
    return ","


def _rows(text: str, separator: str, fail: qna_table.Fail) -> list[Row]:
    """The non-blank records, each with the line it starts on and its cells without the empty ones at its end."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=separator, strict=True)
    rows: list[Row] = []
    start = 1
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as err:
            raise fail(f"not readable as CSV: {err}", start, None) from None
        while cells and not cells[-1].strip():
            cells.pop()
        if cells:
            rows.append((start, cells))
        start = reader.line_num + 1
    return rows


def _synonyms(line: int, cells: list[str], fail: qna_table.Fail) -> list[str]:
    cells = [read_cell(cell) for cell in cells]
    try:
        if len(cells) == 1:  # "sdk, software development kit" in one cell
            return qna_table.parse_synonym_row(cells[0])
        words = [cell.strip() for cell in cells]
        if problem := limits.synonym_group_problem(words):
            raise CellError(qna_table.SYNONYMS_COLUMN, problem)
        return words
    except CellError as err:
        raise fail(str(err), line, 0) from None


def write_csv(content: KnowledgeBaseContent, synonyms: bool = False) -> str:
    """The QnAs (or, with ``synonyms``, the synonym groups) as a CSV with QnA Maker's columns, as Excel writes one."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    if synonyms:
        writer.writerows([[qna_table.SYNONYMS_COLUMN], *([inert_cell(w) for w in group] for group in content.synonyms)])
    else:
        writer.writerows([qna_table.header(content), *qna_table.table_rows(content, cell=inert_cell)])
    return out.getvalue()
