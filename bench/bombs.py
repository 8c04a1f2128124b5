"""Decompression bombs inside the upload limits: what refusing each costs, against reading an ordinary file.

Each file is read as an upload is (``formats.read_file``, or ``ingest.parse_document`` for Word), in a
process of its own, which reports its outcome, its CPU time (the machines are shared: wall time is in
brackets) and its peak RSS (VmHWM).  The baselines, read
the same way in the same run: a process that only imports openqna, and an ordinary FAQ workbook and Word
file of about the same upload size.  Before the limits (issue 40), a 124 KB workbook took 889 MB and
24.5 s, a 612 KB one 4.18 GB and 146 s, and a 62 KB Word file of empty paragraphs 877 MB.

tests/test_bombs.py builds its files with the functions here and asserts the refusals and the bounds.

Usage: python bench/bombs.py
"""

from __future__ import annotations

import io
import json
import struct
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

READ = """
import json, sys, time
from pathlib import Path
from openqna.formats import read_file
from openqna.ingest import parse_document
from openqna.records import OpenQnAError
path = Path(sys.argv[1])
started, cpu = time.perf_counter(), time.process_time()
try:
    if not path.exists():
        outcome = "nothing read"
    elif path.suffix == ".docx":
        parse_document(path.name, path.read_bytes())
        outcome = "read"
    else:
        read_file(path)
        outcome = "read"
except OpenQnAError as err:
    outcome = f"refused: {err}"
# VmHWM, not ru_maxrss: the latter keeps the high-water mark of the forked parent (a pytest worker holding models)
peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"outcome": outcome, "seconds": round(time.perf_counter() - started, 2),
                  "cpu_seconds": round(time.process_time() - cpu, 2), "peak_mb": round(peak / 1024)}))
"""

SHEET = (b'<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="http://schemas.openxmlformats.org/'
         b'spreadsheetml/2006/main"><sheetData>%s</sheetData></worksheet>')


def read_apart(path: Path) -> dict:
    """``path`` read as an upload is, in a process of its own: its outcome, time and peak RSS (printed)."""
    done = subprocess.run([sys.executable, "-c", READ, str(path)], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"reading {path.name} failed:\n{done.stderr[-2000:]}")
    result: dict = json.loads(done.stdout.strip().splitlines()[-1])
    size = path.stat().st_size if path.exists() else 0
    print(f"{path.name}: {size:,} bytes -> {result}", file=sys.stderr)
    return result


def zipped(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return out.getvalue()


def workbook(rows: list[list[str]]) -> bytes:
    import openpyxl

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


def spanning_sheet() -> bytes:
    """Two cells, A1 and XFD1048576: openpyxl would walk (and build) every cell between them."""
    cells = (b'<row r="1"><c r="A1" t="inlineStr"><is><t>Question</t></is></c></row>'
             b'<row r="1048576"><c r="XFD1048576" t="inlineStr"><is><t>x</t></is></c></row>')
    return with_sheet(workbook([["Question", "Answer"]]), SHEET % cells)


def many_cells() -> bytes:
    """2.4 M cells without references (openpyxl numbers them in turn), about 100 KB uploaded."""
    rows = b"<row>" + b"<c/>" * 8 + b"</row>"
    return with_sheet(workbook([["Question", "Answer"]]), SHEET % (rows * 300_000))


def docx_with_paragraphs(count: int, paragraph: bytes = b"<w:p/>") -> bytes:
    """A real Word file (python-docx's own) with ``count`` paragraphs (empty ones unless told) before its one line
    of text."""
    import docx

    document = docx.Document()
    document.add_paragraph("How do I charge the battery? Plug it in for two hours.")
    out = io.BytesIO()
    document.save(out)
    with zipfile.ZipFile(io.BytesIO(out.getvalue())) as archive:
        members = {info.filename: archive.read(info) for info in archive.infolist()}
    members["word/document.xml"] = members["word/document.xml"].replace(b"<w:body>", b"<w:body>" + paragraph * count, 1)
    return zipped(members)


ONE_LETTER = b"<w:p><w:r><w:t>x</w:t></w:r></w:p>"  # seven tags (the limit counts tags), read in full


def lying_zip() -> bytes:
    """A replica whose central directory says its member unpacks to 16 bytes (it unpacks to 800 KB)."""
    data = bytearray(zipped({"QnAs.tsv": b"Question\tAnswer\n" + b"q\ta\n" * 200_000}))
    at = data.rfind(b"PK\x01\x02")  # the central directory entry: its uncompressed size is at offset 24
    data[at + 24:at + 28] = struct.pack("<I", 16)
    return bytes(data)


def replica_bomb() -> bytes:
    """QnA Maker's replica archive holding a workbook that spans a million rows."""
    cells = b'<row r="1048576"><c r="XFD1048576" t="inlineStr"><is><t>x</t></is></c></row>'
    return zipped({"KnowledgeBaseReplica.xlsx": with_sheet(workbook([["Question", "Answer"]]), SHEET % cells)})


def faq_workbook(rows: int) -> bytes:
    return workbook([["Question", "Answer"]] + [[f"How do I do thing {i}?", f"Open menu {i} and choose item {i % 7}."]
                                                 for i in range(rows)])


def faq_docx(paragraphs: int) -> bytes:
    import docx

    document = docx.Document()
    for i in range(paragraphs):
        document.add_heading(f"How do I do thing {i}?", level=2)
        document.add_paragraph(f"Open menu {i} and choose item {i % 7}; it takes about {i % 5 + 1} minutes.")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def main() -> None:
    from openqna.ingest import parse

    files = [
        ("nothing (imports only)", "none.xlsx", None),
        ("ordinary FAQ workbook, 3,000 rows", "faq.xlsx", lambda: faq_workbook(3000)),
        ("ordinary Word FAQ, 1,500 sections", "faq.docx", lambda: faq_docx(1500)),
        ("workbook spanning A1:XFD1048576", "span.xlsx", spanning_sheet),
        ("workbook of 2.4 M unreferenced cells", "cells.xlsx", many_cells),
        ("Word file of 8 M empty paragraphs", "paragraphs.docx", lambda: docx_with_paragraphs(8_000_000)),
        (f"Word file just under the limit ({parse.MAX_XML_TAGS - 50_000:,} empty paragraphs)", "largest.docx",
         lambda: docx_with_paragraphs(parse.MAX_XML_TAGS - 50_000)),
        (f"Word file just under the limit ({(parse.MAX_XML_TAGS - 50_000) // 7:,} one-letter paragraphs)",
         "letters.docx", lambda: docx_with_paragraphs((parse.MAX_XML_TAGS - 50_000) // 7, ONE_LETTER)),
        ("replica whose zip header lies", "lying.zip", lying_zip),
        ("replica holding a spanning workbook", "bomb-replica.zip", replica_bomb),
    ]
    with tempfile.TemporaryDirectory(prefix="openqna-bombs-") as tmp:
        results = []
        for label, name, build in files:
            path = Path(tmp) / name
            if build is not None:
                path.write_bytes(build())
            results.append((label, path.stat().st_size if path.exists() else 0, read_apart(path)))
    base = results[0][2]
    print(f"baseline, a process that imports openqna and reads nothing: peak RSS {base['peak_mb']} MB")
    for label, size, result in results[1:]:
        outcome = result["outcome"] if result["outcome"] == "read" else result["outcome"].split(":", 1)[0]
        print(f"{label}: {size / 1024:,.0f} KB uploaded; {outcome} in {result['cpu_seconds']:.2f} s of CPU "
              f"({result['seconds']:.2f} s); peak RSS {result['peak_mb']} MB, "
              f"{result['peak_mb'] - base['peak_mb']:+} MB over the baseline")


if __name__ == "__main__":
    main()
