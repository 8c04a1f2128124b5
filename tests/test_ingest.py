"""Document ingestion on the real QnA Maker sample files: parsing, chunking, FAQ extraction, errors."""

from __future__ import annotations

import io
import itertools
import time
import zipfile
from functools import cache
from pathlib import Path

import docx
import pytest
from pypdf import PdfWriter

from openqna.ingest import (
    MAX_OTHER_BYTES,
    Block,
    DocumentError,
    ParsedDocument,
    chunk_document,
    count_tokens,
    extract_qnas,
    link_prompts,
    parse_document,
)
from openqna.records import InvalidArgument

FORMATS = Path(__file__).resolve().parents[2] / "shared" / "data" / "qna-sample-docs" / "data-source-formats"
GUIDE = "product-manual.pdf"
SAMPLES = sorted(p.name for p in FORMATS.iterdir() if p.suffix in (".pdf", ".docx"))
# Files whose headings nothing in the PDF distinguishes from body text: a TeX paper sets
# "I. INTRODUCTION" in body-size small caps; a blog printed from a browser draws its bold
# headings with the same font object, size and weight as the text.
HEADINGLESS = {"sample-unstructured-paper.pdf", "Introducing-surface-laptop-4-and-new-access.pdf"}


@cache
def parsed(name: str) -> ParsedDocument:
    return parse_document(name, (FORMATS / name).read_bytes())


@cache
def chunks(name: str, max_tokens: int = 256, overlap_tokens: int = 32):
    return chunk_document(parsed(name), max_tokens=max_tokens, overlap_tokens=overlap_tokens)


def words(text: str) -> int:
    """A tokenizer-free counter, so overlap arithmetic in tests is exact."""
    return len(text.split())


# --- parsing the sample files ---------------------------------------------------------------


@pytest.mark.parametrize("name", SAMPLES)
def test_every_sample_pdf_and_docx_parses_to_real_text(name):
    document = parsed(name)
    assert document.source == name
    assert len(document.blocks) >= 30
    assert len(document.text) >= 5_000
    assert sum(len(b.text.split()) for b in document.blocks if b.kind == "paragraph") >= 500
    if name.endswith(".pdf"):
        assert all(b.page is not None and b.page >= 1 for b in document.blocks)
    else:
        assert all(b.page is None for b in document.blocks)


def test_sample_set_covers_both_formats():
    assert {Path(n).suffix for n in SAMPLES} == {".pdf", ".docx"}
    assert GUIDE in SAMPLES and "multi-turn.docx" in SAMPLES


def test_guide_structure_title_headings_tables_and_no_page_furniture():
    document = parsed(GUIDE)
    assert document.title == "Surface Pro 4 User Guide"
    headings = {b.text: b for b in document.blocks if b.kind == "heading"}
    assert headings["The basics"].level < headings["Power and charging"].level
    assert headings["Power and charging"].page == 11
    assert headings["Charge your Surface Pro 4"].page == 10
    # Running header/footer ("Surface Pro 4", "© 2016 Microsoft Page 6") and TOC leaders are gone.
    assert not any("Page 6" in b.text or "....." in b.text for b in document.blocks)
    assert sum(b.text == "Surface Pro 4" for b in document.blocks) == 0
    # The ruled "Meet Surface Pro 4" feature table comes out as a Markdown table, in place.
    table = next(b for b in document.blocks if b.kind == "table")
    assert table.page == 7
    assert "| Power button | Press the power button" in table.text
    steps = [b.text for b in document.blocks if b.kind == "list_item" and b.page == 10]
    assert steps[:3] == [
        "1. Connect the two parts of the power cord.",
        "2. Connect the power cord securely to the charging port.",
        "3. Plug the power supply into an electrical outlet.",
    ]


def test_docx_headings_from_styles_and_from_looks():
    styled = parsed("Multiturn-ContosoBenefits.docx")
    levels = {b.text: b.level for b in styled.blocks if b.kind == "heading"}
    assert levels["Specific Benefit Plan Details"] == 2
    assert levels["Health"] == 3 and levels["Medical"] == 4 and levels["Medical Plan Overview"] == 5
    # Nested hyperlinks keep their text ("Open your [benefits website].") and their target.
    assert any(b.text == "1. Open your [benefits website](http://www.microsoft.com)." for b in styled.blocks)
    # multi-turn.docx has no heading styles: 16 pt bold topics over 14 pt sub-topics over 10 pt text.
    visual = parsed("multi-turn.docx")
    levels = {b.text: b.level for b in visual.blocks if b.kind == "heading"}
    assert levels["Set up your Surface Pro 4"] == 1
    assert levels["Charge your Surface Pro 4"] == 2


# --- chunking ------------------------------------------------------------------------------


def test_guide_has_a_charging_chunk_with_the_time_and_page():
    found = [c for c in chunks(GUIDE) if "two to four hours to charge" in c.text]
    assert len(found) == 1
    chunk = found[0]
    assert chunk.heading_path == ["The basics", "Power and charging"]
    assert chunk.text.startswith("Power and charging\n\n")
    assert (chunk.page_start, chunk.page_end) == (11, 11)
    assert chunk.source == GUIDE


@pytest.mark.parametrize("name", SAMPLES)
def test_chunks_fit_the_window_and_follow_sections(name):
    made = chunks(name)
    assert [c.ordinal for c in made] == list(range(len(made)))
    assert all(count_tokens(c.text) <= 256 for c in made)
    if name not in HEADINGLESS:
        assert sum(bool(c.heading_path) for c in made) >= 0.8 * len(made)
    for c in made:
        if c.heading_path:
            assert c.text.startswith(c.heading_path[-1][:40])


def test_big_lines_with_text_between_them_are_headings_not_a_title():
    """A one-page guide of three 18 pt headings over 11 pt text: its headings were read as the title ("Charging the
    battery Cleaning the screen Warranty") and its sections as one headingless passage.  A title's lines follow one
    another; lines of the largest size with text between them are headings."""
    from openqna.ingest.pdf import _Line, _title_lines

    def line(text: str, size: float, top: float) -> _Line:
        return _Line(page=1, text=text, size=size, top=top, bottom=top + size)

    guide = [line("Charging the battery", 18, 50), line("It takes two to four hours to charge it fully.", 11, 80),
             line("Cleaning the screen", 18, 120), line("Wipe the screen with a soft dry cloth.", 11, 150),
             line("Warranty", 18, 190), line("The warranty lasts two years from the date of purchase.", 11, 220)]
    assert _title_lines(guide) == []
    titled = [line("Surface Pro 4", 24, 40), line("User Guide", 24, 70), *guide]
    assert [t.text for t in _title_lines(titled)] == ["Surface Pro 4", "User Guide"]


def test_small_windows_still_fit_and_lose_no_words():
    made = chunks(GUIDE, max_tokens=64, overlap_tokens=8)
    assert all(count_tokens(c.text) <= 64 for c in made)
    everything = " ".join(c.text for c in made)
    for block in parsed(GUIDE).blocks:
        if block.kind == "paragraph":
            assert block.text.split()[-1] in everything


def test_long_section_overlaps_by_whole_sentences():
    sentences = [f"Sentence number {i} says something useful." for i in range(40)]
    document = ParsedDocument("long.txt", None, [Block("heading", "Long topic", 1), Block("paragraph", " ".join(sentences))])
    made = chunk_document(document, max_tokens=40, overlap_tokens=12, count_tokens=words)
    assert len(made) > 3
    for previous, current in itertools.pairwise(made):
        assert words(current.text) <= 40
        body_before = previous.text.removeprefix("Long topic\n\n")
        body_now = current.text.removeprefix("Long topic\n\n")
        shared = next(k for k in range(len(body_now), 0, -1) if body_before.endswith(body_now[:k]))
        overlap = body_now[:shared]
        assert overlap.endswith(".") and 0 < words(overlap) <= 12
    assert " ".join(sentences).endswith(made[-1].text.split("\n\n")[-1])


def test_no_overlap_when_asked_and_word_overlap_for_long_sentences():
    sentence = " ".join(f"w{i}" for i in range(100))  # one sentence longer than a chunk
    document = ParsedDocument("run.txt", None, [Block("paragraph", sentence)])
    plain = chunk_document(document, max_tokens=30, overlap_tokens=0, count_tokens=words)
    assert " ".join(c.text for c in plain) == sentence
    overlapped = chunk_document(document, max_tokens=30, overlap_tokens=5, count_tokens=words)
    assert overlapped[1].text.split()[:5] == overlapped[0].text.split()[-5:]


@pytest.mark.parametrize("overlap", [0, 12])
def test_chinese_text_is_chunked_at_its_full_stops_without_a_space_put_in(overlap):
    """A Chinese paragraph has no space: it is cut at "。" (and a sentence too long alone, by characters), and every
    chunk is text of the paragraph as written (a space went in at each cut: "…下一年度使用 ，第6条…")."""
    clauses = "，".join(f"第{i}条规定员工每年享有十五天带薪年假并且可以结转到下一年度使用" for i in range(60))
    sentences = "".join(f"第{i}章说明了「年假」的申请方式。" for i in range(30))
    for text in (clauses, sentences, sentences + " " + clauses):
        made = chunk_document(ParsedDocument("zh.txt", None, [Block("paragraph", text)]), max_tokens=64,
                              overlap_tokens=overlap)
        assert len(made) > 3
        assert all(c.text in text for c in made), [c.text for c in made if c.text not in text][:1]
        if overlap == 0:
            assert "".join(c.text for c in made).replace(" ", "") == text.replace(" ", "")  # nothing lost or twice
    cut = chunk_document(ParsedDocument("zh.txt", None, [Block("paragraph", sentences)]), max_tokens=64,
                         overlap_tokens=0)
    assert all(c.text.endswith("。") for c in cut[:-1])  # at a full stop, not inside a sentence


@pytest.mark.parametrize(("make", "counter"), [
    (lambda n: " ".join(f"w{i}" for i in range(n // 10)), words),  # one sentence of many words
    (lambda n: "x" * n, lambda t: len(t) // 4 + 1),  # one word, four characters to a token
])
def test_a_long_sentence_is_split_with_linear_work(make, counter):
    """Each window is sought in what one window can hold, not in all the text left: that made splitting
    quadratic (a 1 MB paragraph attached to a vector store took minutes, 10 MB would take hours)."""
    def work(text: str) -> int:
        counted = []

        def counting(t: str) -> int:
            counted.append(len(t))
            return counter(t)

        made = chunk_document(ParsedDocument("long.txt", None, [Block("paragraph", text)]), max_tokens=100,
                              overlap_tokens=50, count_tokens=counting)
        assert all(counter(c.text) <= 100 for c in made)
        return sum(counted)

    text = make(100_000)
    plain = chunk_document(ParsedDocument("long.txt", None, [Block("paragraph", text)]), max_tokens=100,
                           overlap_tokens=0, count_tokens=counter)
    assert "".join(c.text for c in plain).replace(" ", "") == text.replace(" ", "")  # no character lost
    assert work(make(200_000)) < 2.5 * work(text)  # twice the text, about twice the counting (it was four times)


def test_real_tokenizer_overlap_on_a_long_manual_section():
    section = ["The basics", "Power and charging"]
    made = [c for c in chunks(GUIDE, max_tokens=64, overlap_tokens=16) if c.heading_path == section]
    assert len(made) >= 2
    for previous, current in itertools.pairwise(made):
        before = previous.text.removeprefix("Power and charging\n\n")
        now = current.text.removeprefix("Power and charging\n\n")
        shared = max(k for k in range(len(now) + 1) if before.endswith(now[:k]))
        assert shared >= 20 and count_tokens(now[:shared]) - count_tokens("") <= 16


def test_chunking_settings_are_checked():
    with pytest.raises(InvalidArgument):
        chunk_document(parsed(GUIDE), max_tokens=100, overlap_tokens=60)


def test_refreshed_docx_changes_only_the_edited_sections_hashes(tmp_path):
    source = FORMATS / "multi-turn.docx"
    edited = docx.Document(str(source))
    paragraph = next(p for p in edited.paragraphs if p.text.startswith("It takes two to four hours"))
    paragraph.runs[0].text = "It takes three to five hours to charge the battery."
    for run in paragraph.runs[1:]:
        run.text = ""
    edited.save(tmp_path / "multi-turn.docx")

    before = chunk_document(parse_document("multi-turn.docx", source.read_bytes()))
    after = chunk_document(parse_document("multi-turn.docx", (tmp_path / "multi-turn.docx").read_bytes()))
    changed = ["The basics", "Power and charging"]
    assert len(before) == len(after)
    for old, new in zip(before, after):
        assert old.heading_path == new.heading_path
        assert (old.content_hash != new.content_hash) == (old.heading_path == changed)
    assert any(c.heading_path == changed for c in after)


# --- FAQ extraction ----------------------------------------------------------------------


def test_guide_topics_become_qnas_with_page_and_section():
    extracted = extract_qnas(parsed(GUIDE))
    assert len(extracted) >= 60
    qnas = {e.qna.questions[0]: e.qna for e in extracted}
    charging = qnas["Power and charging"]
    assert charging.answer.startswith("**Power and charging**\n\nIt takes two to four hours to charge")
    assert charging.metadata == {"page": "11", "section": "The basics"}
    assert charging.source == GUIDE
    assert "1. Connect the two parts of the power cord." in qnas["Charge your Surface Pro 4"].answer
    assert "Contents" not in qnas  # a heading with no text of its own


def test_question_headings_keep_the_answer_plain():
    extracted = extract_qnas(parsed("structured.docx"))
    qna = next(e.qna for e in extracted if e.qna.questions[0] == "Can I host my bot on my own servers?")
    assert qna.answer.startswith("Yes. Your bot can be hosted anywhere")


def test_docx_heading_hierarchy_becomes_follow_up_prompts():
    extracted = extract_qnas(parsed("multi-turn.docx"))
    ids = [1000 + i for i in range(len(extracted))]
    linked = {q.questions[0]: q for q in link_prompts(extracted, ids)}
    by_id = {q.id: q for q in linked.values()}
    setup = linked["Set up your Surface Pro 4"]
    assert [p.display_text for p in setup.dialog.prompts] == [
        "Charge your Surface Pro 4",
        "Connect the Cover",
        "Setting up the Surface Pro 4",
    ]
    assert [p.display_order for p in setup.dialog.prompts] == [0, 1, 2]
    assert by_id[setup.dialog.prompts[0].qna_id].answer.startswith("**Charge your Surface Pro 4**")
    assert linked["Charge your Surface Pro 4"].dialog.prompts == []
    assert extracted[0].qna.dialog.prompts == []  # linking copies; extraction results stay untouched


def test_deep_docx_hierarchy_links_every_level():
    extracted = extract_qnas(parsed("Multiturn-ContosoBenefits.docx"))
    linked = {q.questions[0]: q for q in link_prompts(extracted, list(range(1, len(extracted) + 1)))}

    def labels(question: str) -> list[str]:
        return [p.display_text for p in linked[question].dialog.prompts]

    assert labels("Specific Benefit Plan Details")[:2] == ["Health", "Financial Well-Being"]
    assert labels("Health")[:2] == ["Medical", "Dental Coverage"]
    assert "Medical Plan Overview" in labels("Medical")



def prompt_menus(name: str) -> dict[str, list[str]]:
    extracted = extract_qnas(parsed(name))
    linked = link_prompts(extracted, list(range(1, len(extracted) + 1)))
    return {q.questions[0]: [p.display_text for p in q.dialog.prompts] for q in linked if q.dialog.prompts}


def test_word_heading_styles_in_a_pdf_give_the_docx_prompt_tree():
    """The PDF of QnA Maker's multi-turn sample sets Heading 4 and 5 at body size (11 pt blue Calibri Light, one
    italic) and Heading 2 and 3 one point apart (13 pt blue, 12 pt dark blue): each is a level of its own."""
    pdf, word = prompt_menus("Multiturn-ContosoBenefits.pdf"), prompt_menus("Multiturn-ContosoBenefits.docx")
    # The .docx sets "Complete Enrollment" and "Additional Programs (Life Assistance)" as body text; the PDF
    # shows them as the headings they look like.
    assert pdf.pop("Complete Enrollment") == word.pop("Learn What’s New for 2020")
    assert pdf.pop("Additional Programs (Life Assistance)") == ["Time Off", "Commuter Benefits Program",
                                                              "Additional Benefits"]
    assert pdf.pop("Specific Benefit Plan Details") == ["Health", "Financial Well-Being",
                                                        "Additional Programs (Life Assistance)", "Tools and Resources"]
    assert word.pop("Specific Benefit Plan Details") == ["Health", "Financial Well-Being", "Tools and Resources"]
    assert pdf == word
    qnas = {e.qna.questions[0]: e.qna for e in extract_qnas(parsed("Multiturn-ContosoBenefits.pdf"))}
    assert "$1,000 per person" in qnas["Dental Coverage"].answer
    assert qnas["Health"].answer == "**Health**\n\nWhat Health options are you looking for?"
    assert "Website: https://www.contoso.com\n" in qnas["Contoso Health"].answer  # a blue link is no heading

# --- HTML, Markdown, text -----------------------------------------------------------------

PAGE = b"""<!doctype html>
<html><head><title>Contoso Help - Charging</title>
<style>.banner { color: red }</style><script>trackVisitor("secret-script");</script></head>
<body>
<header class="site-header"><a href="/">Contoso</a><nav><a href="/shop">Shop all products</a></nav></header>
<div id="cookie-consent">We use cookies to improve your experience. <button>Accept all</button></div>
<div class="layout has-sidebar">
  <aside><h3>Related articles</h3><ul><li>Warranty terms</li></ul></aside>
  <main>
    <article>
      <header><h1>Charging your Surface</h1></header>
      <p>It takes <b>two to four hours</b> to charge
         the battery fully.</p>
      <h2>How do I check the battery level?</h2>
      <p>Select the battery icon in the taskbar.</p>
      <ol><li>Open <a href="/settings">Settings</a></li><li>Select Battery<ul><li>Battery saver</li></ul></li></ol>
      <table><thead><tr><th>Model</th><th>Charge time</th></tr></thead>
        <tr><td>Pro 4</td><td>2-4 h</td></tr></table>
      <footer>Was this page helpful? Yes No</footer>
    </article>
  </main>
</div>
<footer><p>Privacy and cookies | Terms of use | (c) Contoso</p></footer>
</body></html>"""


def test_html_keeps_main_content_and_drops_boilerplate():
    document = parse_document("charging.html", PAGE)
    assert document.title == "Contoso Help - Charging"
    assert [(b.kind, b.text) for b in document.blocks] == [
        ("heading", "Charging your Surface"),
        ("paragraph", "It takes **two to four hours** to charge the battery fully."),
        ("heading", "How do I check the battery level?"),
        ("paragraph", "Select the battery icon in the taskbar."),
        ("list_item", "1. Open Settings"),
        ("list_item", "2. Select Battery"),
        ("list_item", "  - Battery saver"),
        ("table", "| Model | Charge time |\n| --- | --- |\n| Pro 4 | 2-4 h |"),
    ]
    assert [b.level for b in document.blocks if b.kind == "heading"] == [1, 2]


def test_html_without_main_drops_site_chrome_from_body():
    page = b"""<html><body><header><h1>Contoso</h1></header><nav>Home | Shop</nav>
    <div class="cookie-notice">Cookies!</div><h1>Returns</h1><p>Return within 30 days.</p>
    <div class="sidebar"><p>Ads</p></div><footer>Imprint</footer></body></html>"""
    document = parse_document("returns.htm", page)
    assert [b.text for b in document.blocks] == ["Returns", "Return within 30 days."]
    qnas = extract_qnas(document)
    assert qnas[0].qna.answer == "**Returns**\n\nReturn within 30 days."


def test_html_keeps_text_that_no_block_element_ends():
    """Text straight in <body> (old-style pages, or text served as HTML) and text after the last block element."""
    page = b"<html><body>Our shop opens at nine.<br>Closed on Sundays.</body></html>"
    assert [b.text for b in parse_document("hours.html", page).blocks] == ["Our shop opens at nine.\nClosed on Sundays."]
    page = b"<html><body><h1>Returns</h1><p>Within 30 days.</p>Bring the receipt.</body></html>"
    assert [b.text for b in parse_document("returns.html", page).blocks] == ["Returns", "Within 30 days.",
                                                                              "Bring the receipt."]


def test_html_honours_declared_charset():
    page = "<html><head><meta charset='windows-1252'></head><body><p>Café crème</p></body></html>"
    assert parse_document("legacy.html", page.encode("cp1252")).blocks[0].text == "Café crème"


@pytest.mark.parametrize(("declared", "codec", "text"), [
    ("Shift_JIS", "cp932", "①電源を切る～②待つ"),  # Windows' Shift_JIS, as every browser reads it
    ("gb2312", "gb18030", "镕基"),  # GBK's characters outside GB2312
    ("iso-8859-1", "cp1252", "It’s “good”: €5"),  # curly quotes and € in 0x80-0x9F
    ("utf-16", "utf-8", "Café"),  # a declaration read as ASCII cannot be UTF-16
])
def test_html_declared_charsets_are_read_as_browsers_read_them(declared, codec, text):
    page = f"<html><head><meta http-equiv='Content-Type' content='text/html; charset={declared}'></head>" \
           f"<body><p>{text}</p></body></html>"
    assert parse_document("legacy.html", page.encode(codec)).blocks[0].text == text


def test_xhtml_encoding_comes_from_its_xml_declaration():
    page = "<?xml version='1.0' encoding='Shift_JIS'?><html><body><h1>充電</h1><p>2時間です。</p></body></html>"
    assert parse_document("faq.xhtml", page.encode("cp932")).text == "充電\n\n2時間です。"


def test_markdown_blocks_and_front_matter_title():
    text = b"""---
title: Returns FAQ
---
# Returns

Our policy is *generous*.

## Can I return opened items?

Yes, within **30 days**:

- keep the receipt
- use the original box
  1. sealed

| Item | Days |
|------|------|
| Laptop | 30 |
"""
    document = parse_document("faq.md", text)
    assert document.title == "Returns FAQ"
    assert [(b.kind, b.level, b.text) for b in document.blocks] == [
        ("heading", 1, "Returns"),
        ("paragraph", 0, "Our policy is *generous*."),
        ("heading", 2, "Can I return opened items?"),
        ("paragraph", 0, "Yes, within **30 days**:"),
        ("list_item", 0, "- keep the receipt"),
        ("list_item", 0, "- use the original box"),
        ("list_item", 0, "  1. sealed"),
        ("table", 0, "| Item | Days |\n| --- | --- |\n| Laptop | 30 |"),
    ]
    qna = extract_qnas(document)[1].qna
    assert qna.answer.startswith("Yes, within **30 days**:\n\n- keep the receipt\n- use the original box")


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "utf-16", "utf-32"])
def test_plain_text_paragraphs_and_unicode_encodings(encoding):
    text = "Wi-Fi setup\nsecond line\n\n\nCafé opening hours: 9–17"
    document = parse_document("notes.txt", text.encode(encoding))
    assert [b.text for b in document.blocks] == ["Wi-Fi setup\nsecond line", "Café opening hours: 9–17"]
    assert document.title is None


# --- errors --------------------------------------------------------------------------------


def test_password_protected_pdf_is_refused(tmp_path):
    writer = PdfWriter(clone_from=FORMATS / "white-paper.pdf")
    writer.encrypt(user_password="secret", owner_password="owner", algorithm="AES-256")
    writer.write(tmp_path / "locked.pdf")
    with pytest.raises(DocumentError, match=r"^locked\.pdf: is encrypted with a password"):
        parse_document("locked.pdf", (tmp_path / "locked.pdf").read_bytes())


def test_pdf_with_only_an_owner_password_still_parses(tmp_path):
    writer = PdfWriter(clone_from=FORMATS / "white-paper.pdf")
    writer.encrypt(user_password="", owner_password="owner", algorithm="AES-256")
    writer.write(tmp_path / "restricted.pdf")
    document = parse_document("restricted.pdf", (tmp_path / "restricted.pdf").read_bytes())
    assert len(document.text) > 5_000


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("broken.pdf", b"%PDF-1.7\n" + bytes(range(256)) * 8, "is not a valid PDF or is damaged"),
        ("renamed.pdf", b"just some text", "is not a PDF"),
        ("broken.docx", b"PK\x03\x04" + b"\x00" * 200, "is not a valid Word document"),
        ("locked.docx", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 200, "password-protected or in the legacy .doc"),
        ("latin1.txt", "Café".encode("latin-1"), "is not valid UTF-8 text (byte 0xe9 at line 1, column 4)"),
        ("binary.md", b"\x00\x01\x02binary", "looks like a binary file"),
        ("empty.txt", b"\n  \n", "contains no text"),
        ("slides.pptx", b"PK\x03\x04", "PowerPoint files are not supported"),
    ],
)
def test_bad_files_raise_document_error_naming_the_file(name, data, message):
    with pytest.raises(DocumentError) as caught:
        parse_document(name, data)
    assert str(caught.value).startswith(f"{name}: ")
    assert message in str(caught.value)
    assert isinstance(caught.value, InvalidArgument) and caught.value.file == name


def test_a_page_nested_thousands_deep_is_read():
    """Past about 500 levels the element walk, which recursed, failed with RecursionError."""
    page = "<html><body>" + "<div>" * 3_000 + "<h1>Returns</h1><p>Within 30 days.</p>" + "</div>" * 3_000 + "</body></html>"
    assert [b.text for b in parse_document("deep.html", page.encode()).blocks] == ["Returns", "Within 30 days."]


def test_a_page_nested_absurdly_deep_is_refused_at_once():
    """Building the tree costs the square of its depth: 50,000 nested elements took seconds, 200,000 minutes."""
    page = "<html><body>" + "<div><span>" * 25_000 + "text" + "</span></div>" * 25_000 + "</body></html>"
    started = time.perf_counter()
    with pytest.raises(DocumentError, match=r"^deep\.html: nests its HTML elements more than 5,000 deep"):
        parse_document("deep.html", page.encode())
    assert time.perf_counter() - started < 0.5


@pytest.mark.parametrize(("inside", "message"), [
    ("xl/workbook.xml", "is an Excel workbook, not a Word document: name it .xlsx to import its QnAs"),
    ("ppt/presentation.xml", "is a PowerPoint file, not a Word document: save it as PDF"),
    ("notes.txt", "is a ZIP archive without word/document.xml, not a Word document (damaged or renamed?)"),
])
def test_a_zip_named_docx_that_is_no_word_file_says_what_it_is(inside, message):
    """It failed deep in python-docx: "could not be read as a Word document (KeyError: "There is no item named
    '[Content_Types].xml' in the archive")"."""
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr(inside, "<x/>")
    with pytest.raises(DocumentError) as caught:
        parse_document("faq.docx", archive.getvalue())
    assert str(caught.value).startswith(f"faq.docx: {message}")
    assert caught.value.unsupported == (inside != "notes.txt")  # a workbook is not a broken Word file


def test_library_failures_are_wrapped():
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("word/document.xml", "<not-word/>")
    with pytest.raises(DocumentError, match=r"^fake\.docx: could not be read as a Word document"):
        parse_document("fake.docx", archive.getvalue())


def test_size_limits():
    data = (FORMATS / GUIDE).read_bytes()
    with pytest.raises(DocumentError, match=r"the limit for a PDF is 1,000,000 bytes"):
        parse_document(GUIDE, data, max_bytes=1_000_000)
    too_big = b"a" * (MAX_OTHER_BYTES + 1)
    with pytest.raises(DocumentError, match=r"^big\.txt: is 10,485,761 bytes; the limit for a text file is 10,485,760"):
        parse_document("big.txt", too_big)
    assert parse_document(GUIDE, data).title  # 1.2 MB is far below the 25 MB PDF default
