"""Test-set files: the questions a knowledge base should answer, and what each should get (``kb/test_sets.py``).

A TSV, CSV or XLSX table whose header names its columns, in any order and any case:

* ``question`` (required): the question as a user would ask it;
* ``expected_qna_id``: the id of the QnA that should answer it; empty, ``0`` or ``none`` for "no answer" (an
  off-topic question that should get the default answer);
* ``expected_answer``: instead of the id, the answer text the QnA should have (matched when a set is run, see
  ``kb/test_sets.py``); empty for "no answer";
* ``metadata`` (optional): ``key:value|key:value``, applied as a metadata filter when the question is asked, as
  QnA Maker's batch testing did.

A row gives an id or an answer text, not both.  Errors name the line (the sheet row for a workbook; the header is 1)
and the 1-based column (and its letter in a workbook); a file with any error is refused whole.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Sequence
from typing import Any

from openqna.formats import limits, qna_table
from openqna.formats.qna_table import CellError
from openqna.records import FormatError, InvalidArgument

MAX_QUESTIONS = 2_000  # a set's questions: a run asks each synchronously
COLUMNS = ("question", "expected_qna_id", "expected_answer", "metadata")
FORMATS = ("tsv", "csv", "xlsx")
NO_ANSWER = ("", "0", "none")

Fail = Callable[[str, int, "int | None"], FormatError]


def format_of(name: str, given: str | None = None) -> str:
    """The format named by ``given`` (tsv, csv or xlsx), else by ``name``'s extension (.tsv or .txt, .csv, .xlsx)."""
    if given:
        fmt = given.strip().lower()
        if fmt not in FORMATS:
            raise FormatError(f"unknown test-set format {given!r}: use tsv, csv or xlsx", file=name)
        return fmt
    ext = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    if ext in ("tsv", "txt"):
        return "tsv"
    if ext in ("csv", "xlsx"):
        return ext
    raise FormatError("cannot tell the test-set format from the file name: name it .tsv, .csv or .xlsx "
                      "(or give the format)", file=name)


def read_test_set(data: bytes, name: str = "upload.tsv", fmt: str | None = None) -> list[dict[str, Any]]:
    """The items of a test-set file: dicts of ``question``, ``expected_qna_id`` (int or None), ``expected_answer``
    (str or None) and ``metadata`` (dict); neither expected value means "no answer"."""
    fmt = format_of(name, fmt)
    if fmt == "xlsx":
        return _read_xlsx(data, name)

    def fail(message: str, line: int, column: int | None) -> FormatError:
        return FormatError(message, file=name, line=line, column=None if column is None else column + 1)

    text = qna_table.decode_text(data, name)
    rows: list[tuple[int, list[str]]] = []
    if fmt == "tsv":
        for number, line in enumerate(text.split("\n"), start=1):
            line = line.removesuffix("\r")
            if line.strip("\t "):
                rows.append((number, line.split("\t")))
    else:
        # strict, as an import's CSV: an unterminated quote was read as one question holding the rest of the file
        # (and no expected answer); the separator as an import's too (a semicolon in decimal-comma locales)
        first = next((line for line in io.StringIO(text) if line.strip(" ,;\t\r\n")), "")
        separator = next((sep for sep in (",", ";") if "question" in (_header_name(c) for c in
                          next(csv.reader([first], delimiter=sep), []))), ",")
        reader = csv.reader(io.StringIO(text, newline=""), delimiter=separator, strict=True)
        try:
            for cells in reader:
                if any(c.strip() for c in cells):
                    rows.append((reader.line_num, cells))
        except csv.Error as err:
            raise fail(f"not readable as CSV ({err})", reader.line_num, None) from None
    return _items(rows, fail)


def _read_xlsx(data: bytes, name: str) -> list[dict[str, Any]]:
    from openqna.formats import xlsx

    xlsx.zip_limits.check(data, lambda message: FormatError(message, file=name), max_unpacked=xlsx.MAX_UNPACKED_BYTES,
                          max_tags=xlsx.MAX_XML_TAGS, unreadable="not a readable .xlsx workbook (its ZIP container is "
                          "damaged)")
    try:
        workbook = xlsx.openpyxl.load_workbook(io.BytesIO(data))
    except Exception as err:  # openpyxl raises zip, XML and key errors alike for a broken file
        raise FormatError(f"not a readable .xlsx workbook ({type(err).__name__}: {err})", file=name) from None
    sheet = next((s for s in workbook.worksheets
                  if "question" in (_header_name(c) for c in xlsx._first_row(s))), workbook.worksheets[0])
    if sheet.max_row * sheet.max_column > xlsx.MAX_SHEET_CELLS:
        raise FormatError(f"sheet {sheet.title!r} is larger than {xlsx.MAX_SHEET_CELLS:,} cells", file=name)
    fail = xlsx._failer(name, sheet.title)
    return _items(xlsx._rows(sheet, fail), fail)


def _header_name(cell: str) -> str:
    return "_".join(cell.strip().lower().replace("-", " ").split())


def _items(rows: Sequence[tuple[int, list[str]]], fail: Fail) -> list[dict[str, Any]]:
    if not rows:
        raise fail("the file is empty: its first line must be a header naming the columns "
                   "question and expected_qna_id or expected_answer", 1, None)
    header_line, header = rows[0]
    columns: dict[str, int] = {}
    for i, title in enumerate(header):
        key = _header_name(title)
        if not key:
            continue
        if key not in COLUMNS:
            raise fail(f"unknown column {title.strip()!r}: the columns are {', '.join(COLUMNS)}", header_line, i)
        if key in columns:
            raise fail(f"column {key!r} appears twice", header_line, i)
        columns[key] = i
    if "question" not in columns:
        raise fail("the header has no 'question' column (the columns are question, expected_qna_id or "
                   "expected_answer, and optional metadata)", header_line, None)
    if "expected_qna_id" not in columns and "expected_answer" not in columns:
        raise fail("the header needs an 'expected_qna_id' or 'expected_answer' column", header_line, None)
    body = rows[1:]
    if len(body) > MAX_QUESTIONS:
        raise fail(f"the set has {len(body):,} questions; the limit is {MAX_QUESTIONS:,}: split it into smaller "
                   "sets", body[MAX_QUESTIONS][0], None)
    items = []
    for number, cells in body:
        width = len(header)
        extra = next((i for i in range(width, len(cells)) if cells[i].strip()), None)
        if extra is not None:
            raise fail(f"value outside the header's {width} columns", number, extra)

        def cell(key: str, cells: list[str] = cells) -> str:
            i = columns.get(key)
            return cells[i].strip() if i is not None and i < len(cells) else ""

        question = cell("question")
        if not question:
            raise fail("the question is empty", number, columns["question"])
        if problem := limits.question_problem(question):
            raise fail(f"question: {problem}", number, columns["question"])
        raw_id, answer = cell("expected_qna_id"), qna_table.unescape(cell("expected_answer"))
        qna_id = None
        if raw_id.lower() not in NO_ANSWER:
            qna_id = qna_table.as_int(raw_id)
            if qna_id is None or qna_id <= 0:
                raise fail(f"expected_qna_id {raw_id!r} is not a QnA id: give a positive whole number, or 0, none "
                           "or nothing for a question that should get no answer", number, columns["expected_qna_id"])
        if qna_id is not None and answer:
            raise fail("give expected_qna_id or expected_answer, not both", number, columns["expected_answer"])
        try:
            metadata = qna_table.parse_metadata(cell("metadata"))
        except CellError as err:
            raise fail(f"metadata: {str(err).removeprefix('Metadata: ')} (write key:value|key:value)", number,
                       columns["metadata"]) from None
        items.append({"question": question, "expected_qna_id": qna_id, "expected_answer": answer or None,
                      "metadata": metadata})
    if not items:
        raise fail("the set has no questions below its header", header_line, None)
    return items


MAX_SET_NAME = 100  # characters of a test set's name


def check_set_name(name: str) -> str:
    name = name.strip()
    if not name or len(name) > MAX_SET_NAME or any(c in name for c in "/\\?#") or not name.isprintable():
        raise InvalidArgument(f"A test set's name is 1 to {MAX_SET_NAME} printable characters without / \\ ? or #; "
                              f"{name!r} is not.", target="name")
    return name
