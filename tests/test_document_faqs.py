"""FAQ pages written as documents: each question and its answer become one QnA, in English, Chinese and Japanese."""

from __future__ import annotations

from openqna.ingest import extract_qnas, parse_document


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
