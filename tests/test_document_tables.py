"""Tables in documents: a row stays readable with its column names in every passage, however the table is split."""

from __future__ import annotations

import io

import docx
import pytest

from openqna.ingest import chunk_document, count_tokens, parse_document

SPECS = ["Model", "Weight", "Battery life", "Screen", "Storage", "Memory", "Processor", "Camera", "Ports", "Colour",
         "Keyboard", "Pen support", "Warranty", "Price", "Release year", "Operating system", "Speakers", "Microphones",
         "Wireless", "Bluetooth", "Sensors", "Dimensions", "Charger", "Recycled content"]


def markdown(names: list[str], rows: list[list[str]]) -> bytes:
    lines = ["## Models", "", "| " + " | ".join(names) + " |", "|" + "---|" * len(names)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines).encode()


def test_a_table_too_wide_for_its_header_names_every_value_and_the_row_in_each_passage():
    """A spec sheet of 24 columns: the header row alone does not fit with a row under it, so rows become text.
    They were split by words, so a passage read "v1-24; ..." without saying which model or which column."""
    rows = [[f"Model {r}", *(f"{name.lower()} {r}" for name in SPECS[1:])] for r in "ABC"]
    chunks = chunk_document(parse_document("specs.md", markdown(SPECS, rows)), max_tokens=96, overlap_tokens=16)
    assert len(chunks) >= 6 and all(count_tokens(c.text) <= 96 for c in chunks)
    for chunk in chunks:
        for piece in chunk.text.removeprefix("Models\n\n").split("\n\n"):  # pieces of one row or of two
            cells = piece.split("; ")
            assert cells[0].startswith("Model: Model "), chunk.text
            row = cells[0].removeprefix("Model: Model ")
            assert all(any(c == f"{name}: {name.lower()} {row}" for name in SPECS[1:]) for c in cells[1:]), chunk.text
    for row in rows:  # every value is kept
        assert all(any(value in c.text for c in chunks) for value in row)


def test_a_row_too_long_for_its_header_keeps_its_column_names():
    long = " ".join(f"word{i}" for i in range(150))
    rows = [["Free", "0 EUR", "One user."], ["Pro", "12 EUR", long], ["Team", "30 EUR", "Ten users."]]
    chunks = chunk_document(parse_document("plans.md", markdown(["Plan", "Price", "Notes"], rows)), max_tokens=96,
                            overlap_tokens=16)
    texts = [c.text for c in chunks]
    assert any("Plan: Pro; Price: 12 EUR" in t for t in texts)
    assert any("Notes: word0 word1" in t for t in texts)
    assert all("| Plan | Price | Notes |" in t for t in texts if "| Free |" in t or "| Team |" in t)
    assert not any("| Pro | 12 EUR" in t for t in texts)


def word_table(style: str | None, bold_first_row: bool) -> bytes:
    document = docx.Document()
    document.add_heading("Plans", 1)
    table = document.add_table(rows=3, cols=2, style=style)
    for r, row in enumerate([("Plan", "Price"), ("Free", "0 EUR"), ("Pro", "12 EUR")]):
        for c, value in enumerate(row):
            table.cell(r, c).paragraphs[0].add_run(value).bold = bold_first_row and r == 0 or None
    data = io.BytesIO()
    document.save(data)
    return data.getvalue()


@pytest.mark.parametrize(("style", "bold", "header"), [
    ("Light Grid Accent 1", False, True),  # a table style that sets the first row apart, "Header Row" on
    (None, True, True),  # a first row set in bold by hand
    (None, False, False),  # nothing marks a header: the first row is data, as in key/value tables
])
def test_word_tables_whose_first_row_looks_like_a_header_have_one(style, bold, header):
    [table] = [b.text for b in parse_document("plans.docx", word_table(style, bold)).blocks if b.kind == "table"]
    if header:
        assert table == "| Plan | Price |\n| --- | --- |\n| Free | 0 EUR |\n| Pro | 12 EUR |"
    else:
        assert table.startswith("|  |  |\n| --- | --- |\n| Plan | Price |")


def ruled_pdf(rows: list[tuple[str, str]], bold_first_row: bool) -> bytes:
    """A one-page PDF, written by hand: a paragraph, then ``rows`` in a table ruled by lines."""
    def text(x: int, y: int, words: str, font: str = "F1") -> str:
        return f"BT /{font} 11 Tf {x} {y} Td ({words}) Tj ET\n"

    top = 660
    content = text(72, 700, "Choose the plan that fits your team.")
    for i, (left, right) in enumerate(rows):
        font = "F2" if bold_first_row and i == 0 else "F1"
        content += text(80, top - i * 20 - 14, left, font) + text(280, top - i * 20 - 14, right, font)
    content += "".join(f"72 {top - i * 20} m 472 {top - i * 20} l S\n" for i in range(len(rows) + 1))
    content += "".join(f"{x} {top} m {x} {top - 20 * len(rows)} l S\n" for x in (72, 272, 472))
    objects = ["<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 6 0 R "
               "/Resources << /Font << /F1 4 0 R /F2 5 0 R >> >> >>",
               "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
               "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold >>",
               f"<< /Length {len(content)} >>\nstream\n{content}\nendstream"]
    out = b"%PDF-1.4\n"
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    return out + f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()


PLANS = [("Plan", "Price"), ("Free", "0 EUR"), ("Pro", "12 EUR"), ("Team", "30 EUR")]


@pytest.mark.parametrize("bold", [True, False])
def test_a_pdf_table_whose_first_row_is_bold_has_it_as_its_header(bold):
    [table] = [b.text for b in parse_document("plans.pdf", ruled_pdf(PLANS, bold)).blocks if b.kind == "table"]
    body = "| Free | 0 EUR |\n| Pro | 12 EUR |\n| Team | 30 EUR |"
    if bold:
        assert table == "| Plan | Price |\n| --- | --- |\n" + body
    else:  # a manual's key/value table: its first row is data
        assert table == "|  |  |\n| --- | --- |\n| Plan | Price |\n" + body


def test_every_piece_of_a_long_row_starts_with_its_first_cell_and_column():
    """60 short rows and one whose Notes cell is ~2,500 characters: the first piece read "Model: Model-Long; Weight:
    999 g\\n\\nNotes: Very long ...", the next ones "Very long note sentence ..." without the model or the column, and the
    cell's sentences were broken into paragraphs."""
    note = " ".join(f"Very long note sentence number {i} about the device." for i in range(50))
    rows = [[f"Model-{i}", f"{i} g", "ok"] for i in range(60)] + [["Model-Long", "999 g", note]]
    chunks = chunk_document(parse_document("models.md", markdown(["Model", "Weight", "Notes"], rows)))
    pieces = [c.text.removeprefix("Models\n\n") for c in chunks if "Very long" in c.text]
    assert len(pieces) >= 2 and all(count_tokens(c.text) <= 256 for c in chunks)
    assert pieces[0].startswith("Model: Model-Long; Weight: 999 g; Notes: Very long note sentence number 0 ")
    assert all(piece.startswith("Model: Model-Long; Notes: Very long note sentence") for piece in pieces[1:])
    assert not any("\n" in piece for piece in pieces)  # one row, one paragraph
    said = " ".join(piece.split("Notes: ", 1)[1] for piece in pieces)
    assert said == note  # every sentence once, in order


def test_a_manual_table_row_too_long_to_fit_is_led_by_its_first_cell():
    """product-manual.pdf's "Ports and connectors" row (a table without a header) opened "| Ports and connectors |
    ...", went on in paragraphs, was never closed, and its next passage did not say which row it continued."""
    from conftest import SAMPLE_DOCS

    path = SAMPLE_DOCS / "data-source-formats" / "product-manual.pdf"
    chunks = chunk_document(parse_document(path.name, path.read_bytes()))
    pieces = [c.text for c in chunks if "Full-size USB 3.0 port" in c.text or "3.5 mm headset jack" in c.text]
    assert pieces
    for text in pieces:
        row = text.split("\n\n", 1)[1]
        assert row.startswith("Ports and connectors; ") and "\n" not in row and "|" not in row, text
