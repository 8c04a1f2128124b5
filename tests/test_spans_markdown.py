"""Answer spans of answers written in markdown (the bundled sample KB): no span crosses or cuts a code span."""

from __future__ import annotations

from importlib import resources

import pytest

from openqna.answers.short_span import short_span
from openqna.answers.span import sentence_spans
from openqna.formats import read_file
from openqna.kb.asking import AskRequest, SpanRequest

DELIMITERS = "`*"


@pytest.fixture
def sample(service):
    with resources.as_file(resources.files("openqna") / "samples" / "openqna-faq.tsv") as path:
        service.import_content("openqna-faq", read_file(path))
    return service


def span_of(service, question: str):
    answers = service.ask("openqna-faq", "test", AskRequest(question=question, top=1, span=SpanRequest()))
    return answers[0].span


def balanced(text: str) -> bool:
    return all(text.count(c) % 2 == 0 for c in DELIMITERS)


def test_a_sentence_keeps_the_backtick_it_closes():
    text = "The `test` deployment answers now. `openqna deploy PROJECT production` copies that state."
    sentences = [text[s:e] for s, e in sentence_spans(text)]
    assert sentences == ["The `test` deployment answers now.", "`openqna deploy PROJECT production` copies that state."]
    heading = "**Power and charging**\n\nIt takes two hours."
    assert [heading[s:e] for s, e in sentence_spans(heading)] == ["Power and charging", "It takes two hours."]


def test_a_code_span_is_a_candidate_of_its_own():
    sentence = "To import data, run `openqna load FILE` in a terminal."
    s, e = short_span("What do I run to import data?", sentence, 0, len(sentence))
    assert sentence[s:e] == "`openqna load FILE`"  # it was "openqna load FILE` in a terminal"


@pytest.mark.parametrize("question", [
    "which port does openqna listen on", "what port does the server use?",
    "What is the difference between test and production?", "what command deploys a project",
    "How do I import my QnA Maker knowledge base?", "which document formats can I import?",
])
def test_sample_kb_spans_carry_no_unbalanced_markdown(sample, question):
    span = span_of(sample, question)
    assert span is not None and balanced(span.text), span.text


def test_every_sample_question_has_a_balanced_span(sample):
    questions = [q for qna in sample.records("openqna-faq") for q in qna.questions]
    assert len(questions) > 20
    unbalanced = [(q, s.text) for q in questions if (s := span_of(sample, q)) is not None and not balanced(s.text)]
    assert unbalanced == []


@pytest.mark.parametrize("question, heading, sentence", [
    ("how many hours does the battery last?", "Battery life",
     "The battery lasts up to 40 hours at the lowest brightness."),
    ("what is the warmest colour temperature?", "Colour temperature",
     "The lamp goes from warm white (2700 K) to daylight (6500 K)."),
    ("what charger wattage do I need?", "Charging", "Use a USB-C charger of at least 10 W."),
])
def test_a_section_s_heading_is_no_span(service, question, heading, sentence):
    """A document's section QnA opens its answer with its heading in bold, which restates the question better than
    any sentence answers it: the span came back "Battery life".  A heading line is no candidate unless it is all the
    answer says."""
    from openqna.records import QnA

    service.create_project("guide")
    service.upsert("guide", [QnA([heading], f"**{heading}**\n\n{sentence} Keep it away from water."),
                             QnA(["Bold only"], "**Yes, it is.**")])
    answers = service.ask("guide", "test", AskRequest(question=question, top=1, span=SpanRequest()))
    assert answers[0].span is not None and answers[0].span.text in sentence and heading not in answers[0].span.text, \
        answers[0].span
    only = service.ask("guide", "test", AskRequest(question="bold only", top=1, span=SpanRequest()))
    assert only[0].span is not None and only[0].span.text == "Yes, it is."
