"""Azure question answering limits, kept in one place so import, the API and the store agree.

Numbers come from the Azure docs' "Limits" table and the 2023-04-01 authoring spec
(``QnaRecord``, ``QnaPrompt``, ``WordAlterations``); see azure-qa.md.  The checks return
a message (or None) instead of raising, so each caller can attach its own location:
a TSV line and column, a spreadsheet cell, or a JSON path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from openqna.records import QnA

MAX_QUESTION_CHARS = 1_000
# Alternate questions of one QnA, as Azure's limits page has them (its spec says 100); each one is embedded, so a
# request body of one-word questions could otherwise make one QnA cost minutes of a job's CPU (3,000 took 11 s).
MAX_QUESTIONS = 300
MAX_ANSWER_CHARS = 25_000
MAX_SOURCE_CHARS = 300
MAX_METADATA_KEY_CHARS = 100
MAX_METADATA_VALUE_CHARS = 500
# Azure: keys ^[a-zA-Z0-9_]+$, values ^[^:|]+$ (":" and "|" are the TSV separators).
METADATA_KEY_PATTERN = re.compile(r"[A-Za-z0-9_]+")
METADATA_VALUE_PATTERN = re.compile(r"[^:|]+")
MAX_PROMPTS = 20
MAX_PROMPT_TEXT_CHARS = 200
MAX_SYNONYM_GROUPS = 10_000
MAX_SYNONYM_WORDS = 20
# A project's settings (``PATCH .../projects/{p}``, an import's ``Metadata``): the authoring spec's lengths.
MAX_DESCRIPTION_CHARS = 1_000
MAX_DEFAULT_ANSWER_CHARS = 300
# BCP 47's shape: a language of 2-3 letters, then subtags of letters and digits (script, region, variant)
LANGUAGE_CODE = re.compile(r"[A-Za-z]{2,3}(?:-[A-Za-z0-9]{1,8})*")
# Upload sizes Azure accepts per file kind.
MAX_TEXT_FILE_BYTES = 10 * 1024 * 1024  # .tsv, .txt
MAX_XLSX_FILE_BYTES = 3 * 1024 * 1024


def _too_long(text: str, limit: int) -> str | None:
    if len(text) > limit:
        return f"is {len(text):,} characters long; the limit is {limit:,}"
    return None


def question_problem(question: str) -> str | None:
    return _too_long(question, MAX_QUESTION_CHARS)


def answer_problem(answer: str) -> str | None:
    if not answer.strip():
        return "is empty; every QnA needs an answer"
    return _too_long(answer, MAX_ANSWER_CHARS)


def source_problem(source: str) -> str | None:
    return _too_long(source, MAX_SOURCE_CHARS)


def metadata_problem(key: str, value: str) -> str | None:
    if not METADATA_KEY_PATTERN.fullmatch(key):
        return f"key {key!r} must be 1+ ASCII letters (a-z, A-Z), digits or '_'"
    if len(key) > MAX_METADATA_KEY_CHARS:
        return f"key {key[:20]!r}... is {len(key)} characters long; the limit is {MAX_METADATA_KEY_CHARS}"
    if not value:
        return f"key {key!r} has an empty value"
    if not METADATA_VALUE_PATTERN.fullmatch(value):
        return f"value {value!r} of key {key!r} must not contain ':' or '|'"
    if len(value) > MAX_METADATA_VALUE_CHARS:
        return f"value of key {key!r} is {len(value)} characters long; the limit is {MAX_METADATA_VALUE_CHARS}"
    return None


def prompt_text_problem(text: str) -> str | None:
    if not text.strip():
        return "is empty"
    return _too_long(text, MAX_PROMPT_TEXT_CHARS)


def prompt_count_problem(count: int) -> str | None:
    if count > MAX_PROMPTS:
        return f"has {count} prompts; the limit is {MAX_PROMPTS}"
    return None


def synonym_group_problem(words: list[str]) -> str | None:
    if any(not word.strip() for word in words):
        return "has an empty word"
    if len(words) > MAX_SYNONYM_WORDS:
        return f"has {len(words)} words; the limit is {MAX_SYNONYM_WORDS}"
    return None


def qna_problems(qna: QnA) -> list[tuple[str, str]]:
    """Every limit a QnA breaks, as (field path in the Azure export's PascalCase, message)."""
    problems: list[tuple[str, str]] = []

    def add(path: str, message: str | None) -> None:
        if message:
            problems.append((path, message))

    if len(qna.questions) > MAX_QUESTIONS:
        add("Questions", f"has {len(qna.questions):,} questions; the limit is {MAX_QUESTIONS}")
    for i, question in enumerate(qna.questions):
        add(f"Questions[{i}]", question_problem(question))
    add("Answer", answer_problem(qna.answer))
    add("Source", source_problem(qna.source))
    for key, value in qna.metadata.items():
        add(f"Metadata.{key}", metadata_problem(key, value))
    add("Dialog.Prompts", prompt_count_problem(len(qna.dialog.prompts)))
    for i, prompt in enumerate(qna.dialog.prompts):
        add(f"Dialog.Prompts[{i}].DisplayText", prompt_text_problem(prompt.display_text))
    return problems


@dataclass(frozen=True)
class Limits:
    """Request limits of the query APIs; each one answers a 400 that names it (docs/settings.md, Limits)."""

    question_chars: int = MAX_QUESTION_CHARS
    top: int = 50
    body_bytes: int = 4 * 1024 * 1024
    text_records: int = 5
    text_record_chars: int = 5120
    text_record_id_chars: int = 1000  # Azure documents none; each answer echoes its record's id
    text_answers_per_record: int = 3
    text_passages: int = 16  # passages of a :query-text request embedded and scored (``Asking.answer_from_text``)
    span_top: int = 10
    filter_pairs: int = 50
    # Active-learning feedback (Azure's ``:feedback`` records, QnA Maker's ``train`` feedbackRecords): Azure documents
    # no limit; 1,000 is its limit of QnAs per update call, and each record's userQuestion is a question (above).
    feedback_records: int = 1000
    user_id_chars: int = 1000  # a runtime's or a feedback record's userId; a Bot Framework channel's is far shorter
    embedding_inputs: int = 2048  # texts of one ``/v1/embeddings`` request, as at OpenAI
    # characters of each of them: about OpenAI's 8,192 tokens (the bundled models read the first 256 word pieces)
    embedding_input_chars: int = 32_768


LIMITS = Limits()
