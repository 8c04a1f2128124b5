"""FAQ pages written as documents: each question and its answer become one QnA, in English, Chinese and Japanese."""

from __future__ import annotations

import io

import docx
import pytest

from openqna.ingest import extract_qnas, parse_document
from openqna.kb.documents import ingest_document
from openqna.kb.service import AskRequest


def qnas(name: str, data: bytes) -> list[tuple[str, str]]:
    return [(e.qna.questions[0], e.qna.answer) for e in extract_qnas(parse_document(name, data))]


def test_cjk_question_headings_are_questions_and_lose_trailing_full_width_punctuation():
    page = """# 常见问题

## 如何给电池充电？

将电源线插入插座，充电需要两到四个小时。

## 保修期：

两年。

## 返品はできますか

30日以内なら返品できます。
"""
    assert qnas("faq.md", page.encode()) == [
        ("如何给电池充电？", "将电源线插入插座，充电需要两到四个小时。"),
        ("保修期", "**保修期**\n\n两年。"),
        ("返品はできますか", "30日以内なら返品できます。"),
    ]


SHIPPING = [("How long does shipping take?", "Three to five working days."),
            ("Do you ship abroad?", "Yes, to every EU country.\n\nExcept Malta.")]


@pytest.mark.parametrize(("name", "page"), [
    ("faq.md", "# Shipping FAQ\n\nQ: How long does shipping take?\nA: Three to five working days.\n\n"
               "Q: Do you ship abroad?\nA: Yes, to every EU country.\n\nExcept Malta.\n"),
    ("bold.md", "# Shipping FAQ\n\n**Q: How long does shipping take?**\n\n**A:** Three to five working days.\n\n"
                "**Question 2:** Do you ship abroad?\n\nAnswer: Yes, to every EU country.\n\nExcept Malta.\n"),
    ("faq.html", "<html><body><main><h1>Shipping FAQ</h1><p><b>Q:</b> How long does shipping take?<br>"
                 "<b>A:</b> Three to five working days.</p><p><strong>Q1. Do you ship abroad?</strong></p>"
                 "<p>A1. Yes, to every EU country.</p><p>Except Malta.</p></main></body></html>"),
    ("faq.txt", "Q: How long does shipping take? A: Three to five working days.\n\n"
                "Q - Do you ship abroad?\nA - Yes, to every EU country.\n\nExcept Malta.\n"),
])
def test_marked_question_and_answer_pairs_become_one_qna_each(name, page):
    assert qnas(name, page.encode()) == SHIPPING


def test_marked_pairs_in_a_word_file_sit_under_its_heading():
    document = docx.Document()
    document.add_heading("Shipping FAQ", 1)
    document.add_paragraph("Everything about sending your order.")
    for question, answer in SHIPPING:
        document.add_paragraph("Q: " + question)
        document.add_paragraph("A: " + answer.split("\n\n")[0])
    document.add_paragraph("Except Malta.")
    data = io.BytesIO()
    document.save(data)
    extracted = extract_qnas(parse_document("faq.docx", data.getvalue()))
    assert [(e.qna.questions[0], e.qna.answer) for e in extracted[1:]] == SHIPPING
    assert extracted[0].children == [1, 2] and extracted[1].qna.metadata == {"section": "Shipping FAQ"}


def test_chinese_and_japanese_marked_pairs():
    page = "# 常见问题\n\nQ：如何退货？\nA：三十天内可以退货。\n\n问：可以开发票吗？\n\n答：可以，在订单页面申请。\n\n" \
           "問：返品できますか？\n答：30日以内なら返品できます。\n"
    assert qnas("faq.md", page.encode()) == [("如何退货？", "三十天内可以退货。"), ("可以开发票吗？", "可以，在订单页面申请。"),
                                             ("返品できますか？", "30日以内なら返品できます。")]


def test_a_marked_heading_loses_its_markers():
    assert qnas("faq.md", b"## Q: Can I pay by card?\n\nA: Yes, every major card.\n") == \
        [("Can I pay by card?", "Yes, every major card.")]


def test_a_question_marker_without_an_answer_stays_prose():
    page = b"# Interview\n\nQ: the letter after P.\n\nIt is followed by R.\n"
    assert qnas("notes.md", page) == [("Interview", "**Interview**\n\nQ: the letter after P.\n\nIt is followed by R.")]


def test_an_imported_faq_page_answers_with_the_pair(service):
    page = SHIPPING_PAGE.encode()
    report = ingest_document(service, "shop", parse_document("shipping.html", page))
    assert (report.qnas, report.passages) == (3, 3)
    [top] = service.ask("shop", "test", AskRequest(question="how many days until my parcel arrives?", top=1))
    assert top.qna.questions == ["How long does shipping take?"] and top.qna.answer == "Three to five working days."


SHIPPING_PAGE = """<html><head><title>Shipping</title><script>track()</script></head><body>
<nav>Home | Shop</nav><main><h1>Shipping FAQ</h1>
<p>Q: How long does shipping take?</p><p>A: Three to five working days.</p>
<p>Q: Do you ship abroad?</p><p>A: Yes, to every EU country except Malta.</p>
<p>Q: Can I change my address after ordering?</p><p>A: Yes, until the parcel has left our warehouse.</p>
</main><footer>(c) Shop</footer></body></html>"""


@pytest.mark.parametrize("page", [
    "<h1>Shipping FAQ</h1><details><summary>How long does shipping take?</summary>Three to five working days."
    "</details><details open><summary><b>Do you ship abroad?</b></summary><p>Yes, to every EU country.</p>"
    "<p>Except Malta.</p></details>",
    "<h1>Shipping FAQ</h1><dl><dt>How long does shipping take?</dt><dd>Three to five working days.</dd>"
    "<dt>Do you ship abroad?</dt><dd>Yes, to every EU country.</dd><dd>Except Malta.</dd></dl>",
], ids=["details", "dl"])
def test_details_blocks_and_definition_lists_become_one_qna_each(page):
    html = f"<html><body><nav>Home</nav><main>{page}</main></body></html>"
    document = parse_document("faq.html", html.encode())
    assert [b.level for b in document.blocks if b.kind == "heading"] == [1, 2, 2]
    assert [(e.qna.questions[0], e.qna.answer) for e in extract_qnas(document)] == SHIPPING


def test_nested_details_nest_as_follow_up_prompts():
    page = b"<html><body><h2>Orders</h2><p>All about orders.</p><details><summary>Can I cancel?</summary>" \
           b"<p>Yes, within a day.</p><details><summary>How do I cancel?</summary><p>Open the order.</p></details>" \
           b"</details></body></html>"
    extracted = extract_qnas(parse_document("orders.html", page))
    assert [e.qna.questions[0] for e in extracted] == ["Orders", "Can I cancel?", "How do I cancel?"]
    assert [e.children for e in extracted] == [[1], [2], []]


def test_bold_questions_under_a_styled_word_heading_are_questions():
    """A Word FAQ whose title uses a heading style and whose questions are bold paragraphs: without heading
    styles the bold lines were already headings by their looks; with one, they were body text."""
    document = docx.Document()
    document.add_heading("Shipping FAQ", 1)
    document.add_paragraph("Everything about sending your order.")
    for question, answer in SHIPPING:
        document.add_paragraph().add_run(question).bold = True
        for paragraph in answer.split("\n\n"):
            document.add_paragraph(paragraph)
    document.add_paragraph().add_run("Not a question, only bold.").bold = True
    data = io.BytesIO()
    document.save(data)
    extracted = extract_qnas(parse_document("faq.docx", data.getvalue()))
    assert [(e.qna.questions[0], e.qna.answer) for e in extracted[1:]] == [
        SHIPPING[0], (SHIPPING[1][0], SHIPPING[1][1] + "\n\n**Not a question, only bold.**")]
    assert extracted[0].children == [1, 2]


@pytest.mark.parametrize(("name", "page"), [
    ("faq.md", "# Shipping FAQ\n\n**How long does shipping take?**\n\nThree to five working days.\n\n"
               "__Do you ship abroad?__\n\nYes, to every EU country.\n\nExcept Malta.\n\n**Note:** is this *bold*?\n"),
    ("faq.html", "<html><body><h1>Shipping FAQ</h1><p><strong>How long does shipping take?</strong></p>"
                 "<p>Three to five working days.</p><p> <b>Do you ship <i>abroad</i>?</b> </p>"
                 "<p>Yes, to every EU country.</p><p>Except Malta.</p><p><b>Note:</b> is this bold?</p></body></html>"),
])
def test_a_paragraph_that_is_one_bold_question_is_a_question(name, page):
    found = qnas(name, page.encode())
    note = "**Note:** is this *bold*?" if name.endswith(".md") else "**Note:** is this bold?"
    assert found == [SHIPPING[0], (SHIPPING[1][0], SHIPPING[1][1] + "\n\n" + note)]
