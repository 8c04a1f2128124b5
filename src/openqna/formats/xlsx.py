"""QnA Maker XLSX workbooks: the QnA sheet, the synonyms sheet, or both (the KB replica).

The QnA sheet is the first sheet whose row 1 has Question and Answer headers (same columns
and rules as the TSV, see ``table``); the synonyms sheet is the first whose row 1 is a lone
``Synonyms`` header.  A sheet whose row 1 is ``Key``/``Value`` (the replica's ``Settings``) gives the
project's settings (``replica_settings``); other sheets are ignored.  Cells may be
text, numbers or booleans (Azure's structured multi-turn sample uses real ints and bools);
formula cells are rejected because their text is not what the author sees.  A cell's text is
read as QnA Maker wrote it (``qna_table``, "Newlines and backslashes"): ``\\n`` is a newline, and
real line breaks typed into a cell (Alt+Enter) are line breaks too.  Our workbooks write the real
line breaks (carriage returns too; wrapped, so Excel shows them), so a cell reads as it will be
answered, and double a run of backslashes before an ``n`` so that ``C:\\new`` comes back as it was.
Errors name the sheet row and column letter; ``FormatError.line`` is the row and ``.column`` the
1-based column number.
"""

from __future__ import annotations

from collections.abc import Sequence
from io import BytesIO
from typing import Any

import openpyxl
from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE
from openpyxl.styles import Alignment
from openpyxl.utils import get_column_letter
from openpyxl.worksheet.worksheet import Worksheet

from openqna.formats import qna_table, zip_limits
from openqna.formats.qna_table import CellError, Fail
from openqna.formats.replica_settings import read_settings
from openqna.records import FormatError, InvalidArgument, KnowledgeBaseContent, QnA

Row = tuple[int, list[str]]


# What a workbook may unpack to (``zip_limits``) and the cells a sheet may span (its last row times its last column,
# counted from the cells it holds): bounds on what openpyxl builds, whatever the upload's size says.
MAX_UNPACKED_BYTES = 100 * 1024 * 1024
MAX_XML_TAGS = 2_000_000
MAX_SHEET_CELLS = 2_000_000
OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # an encrypted workbook, or a legacy .xls
WRAPPED = Alignment(wrap_text=True)  # a cell that holds line breaks shows them


def read_xlsx(data: bytes, name: str = "upload.xlsx") -> KnowledgeBaseContent:
    if data.startswith(OLE_MAGIC):
        raise FormatError("is password-protected or in the legacy .xls format; save it as a .xlsx without a "
                          "password", file=name)
    zip_limits.check(data, lambda message: FormatError(message, file=name), max_unpacked=MAX_UNPACKED_BYTES,
                     max_tags=MAX_XML_TAGS, unreadable="not a readable .xlsx workbook (its ZIP container is damaged)")
    try:
        workbook = openpyxl.load_workbook(BytesIO(data))
    except Exception as err:  # openpyxl raises zip, XML and key errors alike for a broken file
        raise FormatError(f"not a readable .xlsx workbook ({type(err).__name__}: {err})", file=name) from None
    for sheet in workbook.worksheets:
        if sheet.max_row * sheet.max_column > MAX_SHEET_CELLS:
            raise FormatError(f"sheet {sheet.title!r} spans {sheet.max_row:,} rows and {sheet.max_column:,} columns "
                              f"({sheet.max_row * sheet.max_column:,} cells); the limit is {MAX_SHEET_CELLS:,} cells: "
                              "delete the cells far right of or below the QnAs", file=name)
    kinds = [(sheet, qna_table.header_kind(_first_row(sheet))) for sheet in workbook.worksheets]
    qna_sheet = next((sheet for sheet, kind in kinds if kind == "qnas"), None)
    synonym_sheet = next((sheet for sheet, kind in kinds if kind == "synonyms"), None)
    if qna_sheet is None and synonym_sheet is None:
        qna_sheet = workbook.worksheets[0]  # let the header check say what is wrong with it
    content = KnowledgeBaseContent()
    if qna_sheet is not None:
        fail = _failer(name, qna_sheet.title)
        content.qnas = _read_qnas(_rows(qna_sheet, fail), fail)
    if synonym_sheet is not None:
        fail = _failer(name, synonym_sheet.title)
        content.synonyms = _read_synonyms(_rows(synonym_sheet, fail), fail)
    settings_sheet = next((sheet for sheet in workbook.worksheets
                           if [c.strip().lower() for c in _first_row(sheet)][:2] == ["key", "value"]), None)
    if settings_sheet is not None:
        rows = _rows(settings_sheet, _failer(name, settings_sheet.title))
        pairs = ((number, values[0], values[1] if len(values) > 1 else "") for number, values in rows)
        content.settings, content.notes = read_settings(pairs, f"{name} (sheet {settings_sheet.title!r})")
    return content


def _first_row(sheet: Worksheet) -> list[str]:
    return [_cell_text(value) for row in sheet.iter_rows(max_row=1, values_only=True) for value in row]


def _failer(name: str, sheet: str) -> Fail:
    def fail(message: str, row: int, column: int | None) -> FormatError:
        where = f"sheet {sheet!r}, row {row}"
        if column is not None:
            where += f", column {get_column_letter(column + 1)}"
        return FormatError(f"{where}: {message}", file=name, line=row, column=None if column is None else column + 1)

    return fail


def _cell_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)  # str, int, and bool as "True"/"False", which is what the columns expect


def _rows(sheet: Worksheet, fail: Fail) -> list[Row]:
    """Non-blank rows as (row number, cell texts without trailing empty cells)."""
    rows = []
    for cells in sheet.iter_rows():
        values = []
        for cell in cells:
            if cell.data_type == "f":
                raise fail("formulas are not supported; paste the values instead", cell.row, cell.column - 1)
            values.append(_cell_text(cell.value))
        while values and not values[-1].strip():
            values.pop()
        if values:
            rows.append((cells[0].row, values))
    return rows


def fit_width(rows: Sequence[Row], width: int, fail: Fail) -> list[Row]:
    """Pad body rows to the header's width; a value right of the last header is an error."""
    fitted = []
    for number, values in rows:
        if len(values) > width:
            extra = next(i for i in range(width, len(values)) if values[i].strip())
            raise fail(f"value outside the header's {width} columns", number, extra)
        fitted.append((number, values + [""] * (width - len(values))))
    return fitted


def _read_qnas(rows: list[Row], fail: Fail) -> list[QnA]:
    header_line, header = rows[0] if rows else (1, [])
    return qna_table.read_table(header, fit_width(rows[1:], len(header), fail), fail, header_line=header_line)


def _read_synonyms(rows: list[Row], fail: Fail) -> list[list[str]]:
    (_, header), body = rows[0], rows[1:]
    column = len(header) - 1  # header_kind allowed only empty cells before the Synonyms header
    synonyms = []
    for number, values in fit_width(body, len(header), fail):
        if any(value.strip() for value in values[:column]):
            raise fail("value outside the Synonyms column", number, 0)
        try:
            synonyms.append(qna_table.parse_synonym_row(values[column]))
        except CellError as err:
            raise fail(str(err), number, column) from None
    return synonyms


def write_xlsx(content: KnowledgeBaseContent) -> bytes:
    """A workbook with a ``QnAs`` sheet (the TSV columns) and a ``Synonyms`` sheet.

    Control characters Excel cannot store are dropped; everything else round-trips.
    """
    workbook = openpyxl.Workbook()
    qnas = workbook.active
    qnas.title = "QnAs"
    rows = qna_table.table_rows(content, cell=lambda text: qna_table.escape(text, keep_line_breaks=True))
    _fill(qnas, [qna_table.header(content), *rows])
    synonyms = workbook.create_sheet("Synonyms")
    _fill(synonyms, [[qna_table.SYNONYMS_COLUMN], *([qna_table.format_synonym_row(g)] for g in content.synonyms)])
    out = BytesIO()
    workbook.save(out)
    return out.getvalue()


CELL_CHARS = 32_767  # the most an Excel cell holds; openpyxl cuts a longer text there without a word


def _fill(sheet: Worksheet, rows: Sequence[Sequence[str]]) -> None:
    for r, row in enumerate(rows, start=1):
        for c, value in enumerate(row, start=1):
            if value:
                value = ILLEGAL_CHARACTERS_RE.sub("", value)
                if len(value) > CELL_CHARS:  # refused, not cut: an import of the file would lose the rest
                    raise InvalidArgument(f"Cannot export as Excel: row {r} of the {sheet.title} sheet ({rows[0][c - 1]} column) would be "
                                      f"{len(value):,} characters long, and an Excel cell holds {CELL_CHARS:,}: "
                                      "export this project as JSON or TSV instead.")
                cell = sheet.cell(row=r, column=c, value=value)
                cell.data_type = "s"  # text starting with "=" must stay text, not become a formula
                if "\n" in value:
                    cell.alignment = WRAPPED
