"""Decompression bombs inside the upload limits (issue 40): refused by what they unpack to, in bounded time and memory.

Each file is read in a process of its own, which prints its peak RSS and time (``pytest -s`` shows them): the bounds
of ``formats.zip_limits``, ``formats.xlsx`` and ``ingest.parse`` on this machine.  Before the limits, a 124 KB
workbook took 889 MB and 24.5 s, and a 62 KB Word file of empty paragraphs 877 MB.
"""

from __future__ import annotations

import io
import json
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import docx
import openpyxl
import pytest

from openqna.formats import limits
from openqna.ingest import parse

READ = """
import json, sys, time
from pathlib import Path
from openqna.formats import read_file
from openqna.ingest import parse_document
from openqna.records import OpenQnAError
path = Path(sys.argv[1])
started = time.perf_counter()
try:
    if path.suffix == ".docx":
        parse_document(path.name, path.read_bytes())
    else:
        read_file(path)
    outcome = "read"
except OpenQnAError as err:
    outcome = f"refused: {err}"
# VmHWM, not ru_maxrss: the latter keeps the high-water mark of the forked parent (a pytest worker holding models)
peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"outcome": outcome, "seconds": round(time.perf_counter() - started, 2), "peak_mb": round(peak / 1024)}))
"""


# what the reading process takes before it reads anything (openqna and its libraries imported): about 280 MB
BASELINE_MB = 300


def read_apart(path: Path) -> dict:
    """``path`` read as an upload is, in a process of its own: its outcome, time and peak RSS (printed)."""
    done = subprocess.run([sys.executable, "-c", READ, str(path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"{path.name}: {path.stat().st_size:,} bytes -> {result}")
    return result


def zipped(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return out.getvalue()


def workbook(rows: list[list[str]]) -> bytes:
    book = openpyxl.Workbook()
    for row in rows:
        book.active.append(row)
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def with_sheet(book: bytes, sheet_xml: bytes) -> bytes:
    """``book`` with its first sheet's XML replaced."""
    with zipfile.ZipFile(io.BytesIO(book)) as archive:
        members = {info.filename: archive.read(info) for info in archive.infolist()}
    members["xl/worksheets/sheet1.xml"] = sheet_xml
    return zipped(members)


SHEET = (b'<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="http://schemas.openxmlformats.org/'
         b'spreadsheetml/2006/main"><sheetData>%s</sheetData></worksheet>')


def test_a_sheet_spanning_a_million_rows_is_refused_at_once(tmp_path):
    """Two cells, A1 and XFD1048576: openpyxl would walk (and build) every cell between them."""
    cells = (b'<row r="1"><c r="A1" t="inlineStr"><is><t>Question</t></is></c></row>'
             b'<row r="1048576"><c r="XFD1048576" t="inlineStr"><is><t>x</t></is></c></row>')
    path = tmp_path / "span.xlsx"
    path.write_bytes(with_sheet(workbook([["Question", "Answer"]]), SHEET % cells))
    result = read_apart(path)
    assert "refused" in result["outcome"] and "1,048,576 rows" in result["outcome"], result
    assert result["peak_mb"] < BASELINE_MB + 200 and result["seconds"] < 30


def test_a_workbook_of_millions_of_cells_is_refused_by_its_elements(tmp_path):
    rows = b"<row>" + b"<c/>" * 8 + b"</row>"  # cells without references: openpyxl numbers them in turn
    rows *= 300_000
    path = tmp_path / "cells.xlsx"
    path.write_bytes(with_sheet(workbook([["Question", "Answer"]]), SHEET % rows))
    assert path.stat().st_size < limits.MAX_XLSX_FILE_BYTES  # inside the upload limit
    result = read_apart(path)
    assert "refused" in result["outcome"] and "XML elements" in result["outcome"], result
    assert result["peak_mb"] < BASELINE_MB + 200 and result["seconds"] < 30


def docx_with_paragraphs(count: int) -> bytes:
    """A real Word file (python-docx's own) with ``count`` empty paragraphs before its one line of text."""
    document = docx.Document()
    document.add_paragraph("How do I charge the battery? Plug it in for two hours.")
    out = io.BytesIO()
    document.save(out)
    with zipfile.ZipFile(io.BytesIO(out.getvalue())) as archive:
        members = {info.filename: archive.read(info) for info in archive.infolist()}
    members["word/document.xml"] = members["word/document.xml"].replace(b"<w:body>", b"<w:body>" + b"<w:p/>" * count, 1)
    return zipped(members)


def test_empty_paragraphs_are_refused_by_their_count(tmp_path):
    path = tmp_path / "paragraphs.docx"
    path.write_bytes(docx_with_paragraphs(8_000_000))  # 40 MB unpacked, about 60 KB uploaded
    result = read_apart(path)
    assert "refused" in result["outcome"] and "XML elements" in result["outcome"], result
    assert result["peak_mb"] < BASELINE_MB + 200 and result["seconds"] < 30


@pytest.mark.slow
def test_the_largest_word_file_accepted_costs_bounded_memory(tmp_path):
    """Just under the element limit, the file is read: what it costs is the bound the limit sets."""
    path = tmp_path / "largest.docx"
    path.write_bytes(docx_with_paragraphs(parse.MAX_XML_TAGS - 50_000))
    result = read_apart(path)
    assert result["outcome"] == "read", result
    assert result["peak_mb"] < BASELINE_MB + 300 and result["seconds"] < 90


def test_a_zip_whose_header_lies_is_a_format_error(tmp_path):
    """A member that unpacks to more than its header says fails its CRC: an error naming the file, not a crash."""
    data = bytearray(zipped({"QnAs.tsv": b"Question\tAnswer\n" + b"q\ta\n" * 200_000}))
    at = data.rfind(b"PK\x01\x02")  # the central directory entry: its uncompressed size is at offset 24
    data[at + 24:at + 28] = struct.pack("<I", 16)
    path = tmp_path / "replica.zip"
    path.write_bytes(bytes(data))
    result = read_apart(path)
    assert result["outcome"].startswith("refused") and "damaged" in result["outcome"], result


def test_a_bomb_inside_a_replica_is_refused(tmp_path):
    """QnA Maker's replica archive holding a workbook that spans a million rows: the inner workbook is checked too."""
    cells = b'<row r="1048576"><c r="XFD1048576" t="inlineStr"><is><t>x</t></is></c></row>'
    inner = with_sheet(workbook([["Question", "Answer"]]), SHEET % cells)
    path = tmp_path / "bomb-replica.zip"
    path.write_bytes(zipped({"KnowledgeBaseReplica.xlsx": inner}))
    result = read_apart(path)
    assert "refused" in result["outcome"] and "cells" in result["outcome"], result
