"""Imported HTML and Word answers keep their links, images and emphasis as Markdown; the index reads their words."""

from __future__ import annotations

import csv
import io
import json

import docx
from docx.opc.constants import RELATIONSHIP_TYPE
from docx.oxml import OxmlElement
from docx.oxml.ns import qn

from conftest import SAMPLE_DOCS
from openqna.index.analyze import analyze
from openqna.index.markdown_text import without_urls
from openqna.ingest import parse_document
from test_cli import run

PAGE = ('<html><body><h2>How do I change the default message?</h2><p>Open the <a href="https://portal.azure.com">'
        'Azure portal</a> and click <strong>Settings</strong>.</p><p><img src="https://example.com/settings.png" '
        'alt="settings screen"></p><p>Then press <em>Save</em> and <code>restart</code>.</p></body></html>')


def exported_answers(tmp_path, name: str, data: bytes) -> dict[str, str]:
    """``openqna import`` of one file, then ``openqna export``: the first question of each QnA -> its answer."""
    path = tmp_path / name
    path.write_bytes(data)
    run("import", "kb", str(path), data=tmp_path / "data")
    run("export", "kb", str(tmp_path / "kb.json"), data=tmp_path / "data")
    exported = json.loads((tmp_path / "kb.json").read_text())
    answers: dict[str, str] = {}
    for q in exported["Assets"]["Qnas"]:  # the QnA, then its section's passage under the same title
        answers.setdefault(q["Questions"][0], q["Answer"])
    return answers


def test_an_html_answer_keeps_its_link_image_bold_italic_and_code(tmp_path):
    """The answer was "Open the Azure portal and click Settings.\\n\\nThen press Save and restart.": the URL, the
    image and all emphasis were dropped, while the same page written as Markdown kept them."""
    answers = exported_answers(tmp_path, "links.html", PAGE.encode())
    assert answers["How do I change the default message?"] == (
        "Open the [Azure portal](https://portal.azure.com) and click **Settings**.\n\n"
        "![settings screen](https://example.com/settings.png)\n\n"
        "Then press *Save* and `restart`.")


def test_html_links_that_would_break_outside_the_page_keep_their_text_only():
    page = ('<html><head><base href="https://docs.example.com/guide/"></head><body><p>See <a href="setup.html">setup'
            '</a>, <a href="#top">the top</a>, <a href="javascript:void(0)">this</a>, <b> spaced </b>words, '
            '<a href="https://x.example/a b(1)"><img src="data:image/png;base64,AAAA" alt="logo"> home</a> and '
            '<code>run <b>it</b></code>.</p></body></html>')
    [block] = parse_document("p.html", page.encode()).blocks
    assert block.text == ("See [setup](https://docs.example.com/guide/setup.html), the top, this, **spaced** words, "
                          "[logo home](https://x.example/a%20b%281%29) and `run it`.")


def hyperlink(paragraph, text: str, url: str, *, bold: bool = False) -> None:
    """A ``w:hyperlink`` as Word writes it (python-docx has no API for one): a run inside, its target a relationship."""
    rel = paragraph.part.relate_to(url, RELATIONSHIP_TYPE.HYPERLINK, is_external=True)
    link = OxmlElement("w:hyperlink")
    link.set(qn("r:id"), rel)
    run = OxmlElement("w:r")
    if bold:
        properties = OxmlElement("w:rPr")
        properties.append(OxmlElement("w:b"))
        run.append(properties)
    t = OxmlElement("w:t")
    t.text = text
    run.append(t)
    link.append(run)
    paragraph._p.append(link)


def test_a_word_answer_keeps_its_hyperlinks_bold_and_italics(tmp_path):
    document = docx.Document()
    document.add_heading("How do I enroll?", level=2)
    paragraph = document.add_paragraph("Open your ")
    hyperlink(paragraph, "benefits website", "https://benefits.example.com/enroll")
    paragraph.add_run(" and choose ")
    paragraph.add_run("Enroll").bold = True
    paragraph.add_run(" ")  # Word splits runs anywhere: one bold phrase in three runs stays one
    paragraph.add_run("now").bold = True
    paragraph.add_run(" before ")
    paragraph.add_run("Friday").italic = True
    paragraph.add_run(".")
    item = document.add_paragraph("Questions? ", style="List Bullet")
    hyperlink(item, "Write to us", "mailto:hr@example.com", bold=True)
    out = io.BytesIO()
    document.save(out)
    answers = exported_answers(tmp_path, "enroll.docx", out.getvalue())
    assert answers["How do I enroll?"] == (
        "Open your [benefits website](https://benefits.example.com/enroll) and choose **Enroll now** before "
        "*Friday*.\n\n- Questions? [**Write to us**](mailto:hr@example.com)")


def test_structured_docx_answers_as_qna_maker_exported_it():
    """QnA Maker's own export of structured.docx (SampleQnAs.tsv) keeps the FAQ link; ours dropped it."""
    with open(SAMPLE_DOCS / "knowledge-bases" / "SampleQnAs.tsv", newline="", encoding="utf-8") as f:
        theirs = {row[0]: row[1] for row in csv.reader(f, delimiter="\t") if row and row[2].endswith("structured.docx")}
    path = SAMPLE_DOCS / "data-source-formats" / "structured.docx"
    blocks = parse_document(path.name, path.read_bytes()).blocks
    ours = blocks[[b.text for b in blocks].index("What is the v4 SDK?") + 1].text
    assert "[FAQ](https://github.com/Microsoft/botbuilder-dotnet/wiki/FAQ)" in ours
    assert ours == theirs["What is the v4 SDK?"]


def test_every_hyperlink_of_the_benefits_docx_survives():
    """Multiturn-ContosoBenefits.docx links "benefits website" (and phone numbers, web sites) over a hundred times;
    none of it survived.  Every paragraph with a hyperlink has it as a Markdown link now."""
    path = SAMPLE_DOCS / "data-source-formats" / "Multiturn-ContosoBenefits.docx"
    blocks = parse_document(path.name, path.read_bytes()).blocks
    linked = [b.text for b in blocks if "benefits website" in b.text and b.kind != "heading"]
    assert len(linked) >= 30
    assert all("[benefits website](http://www.microsoft.com)" in text for text in linked)


def test_the_index_reads_link_text_not_urls():
    answer = ("Open the [Azure portal](https://portal.azure.com/#home) and click **Settings**; see "
              "[![diagram](https://example.com/a_b.png) the diagram](https://example.com/x_(y)), `restart` and "
              "snake_case or 5 * 3.")
    assert without_urls(answer) == ("Open the Azure portal and click **Settings**; see diagram the diagram, "
                                    "`restart` and snake_case or 5 * 3.")
    assert not {"https", "com", "png"} & set(analyze(without_urls(answer)))
    assert without_urls("No markup here (really).") == "No markup here (really)."


def test_the_stored_answer_terms_come_from_the_without_urls(tmp_path):
    from openqna.kb.service import Service
    from openqna.models.embedder import HashEmbedder
    from openqna.records import QnA
    from openqna.store.sqlite import SQLiteStore

    service = Service(SQLiteStore(tmp_path), HashEmbedder())
    qna = QnA(["Where do I sign in?"], "Sign in on the [benefits website](http://www.microsoft.com).")
    [stored], _ = service.prepare([qna], ["h"])
    answer_terms = next(unit.terms for unit in stored.units if unit.field == "a")
    assert "microsoft" not in answer_terms and "benefit websit" in answer_terms
