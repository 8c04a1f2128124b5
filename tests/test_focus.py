"""A long message's question (``ranking.focus``): asked alone beside the whole message, on a real FAQ page."""

from __future__ import annotations

import random

import pytest

from conftest import SHARED_DATA
from openqna.evaluation import datasets
from openqna.evaluation.long_questions import long_message
from openqna.kb.service import AskRequest
from openqna.ranking import focus
from openqna.records import QnA


def test_the_asking_sentences_of_a_long_message(monkeypatch):
    message = ("Hello doctor. I am 45 years old and I live with my parents. Should my parents wear masks at home? "
               "Thanks in advance.")
    assert focus.pieces(message) == ["Should my parents wear masks at home?"]
    # a question word first also asks; a sentence of one content word is too vague to be asked alone
    assert focus.pieces("Hi. My son is coughing since Monday. is this covid or a cold. What is it?") == \
        ["is this covid or a cold."]
    assert focus.pieces("How long does the battery take to charge when the tablet is switched on?") == []  # one sentence
    assert focus.pieces("Hi! How do I charge it?") == []  # short: one question
    assert focus.pieces("Hello there. I want to know about the opening hours of the office. Thank you very much.") == []
    monkeypatch.setenv("OPENQNA_QUESTION_FOCUS", "0")
    assert focus.pieces(message) == []


def test_the_asking_sentences_of_a_long_chinese_or_japanese_message():
    """A greeting, a detail that tells and a closing stay out; a question, a request, a wish or a Japanese noun phrase
    that names what is wanted is asked; a CJK character counts as two thirds of a word."""
    assert focus.pieces("こんにちは。先月この市に引っ越してきた者です。粗大ごみの出し方を教えてください。よろしくお願いします。") == \
        ["粗大ごみの出し方を教えてください。"]
    assert focus.pieces("お世話になっております。平日は仕事で忙しいです。水道を使い始める手続き。ご回答お待ちしております。") == \
        ["水道を使い始める手続き。"]
    assert focus.pieces("はじめまして。市のホームページを見てもよく分かりませんでした。飼い犬の登録をしたい。") == ["飼い犬の登録をしたい。"]
    assert focus.pieces("你好。我上个月刚搬到这里。请问怎么办理居住证？谢谢。") == ["请问怎么办理居住证？"]
    assert focus.pieces("你好。我上个月刚搬到这里。我在市中心工作。谢谢。") == []  # nothing asked
    assert focus.pieces("안녕하세요. 지난달에 이사 왔습니다. 주민등록등본은 어디서 발급받을 수 있나요. 감사합니다.") == \
        ["주민등록등본은 어디서 발급받을 수 있나요."]
    # chat strings its clauses with commas and asks last: the last clause is asked alone too
    assert focus.pieces("客服你好，我上周在你们官网买了这款耳机，但是收到以后发现不太适合我，还没拆封，请问可以退货吗？") == \
        ["请问可以退货吗？"]
    assert focus.pieces("引っ越してきたのですが、転入の手続きはどこですればいいですか") == ["転入の手続きはどこですればいいですか"]
    assert focus.pieces("你好，我最近在考虑买一台新的笔记本电脑，预算大概五千块，还在比较不同的型号。") == []  # nothing asked
    assert focus.pieces("Hello, I bought the headphones last week, they do not fit me, can I return them?") == []
    assert focus.pieces("家族は四人です。住民票は？") == []  # short: one question
    assert focus.message_words("家族は四人です。住民票はどこでもらえますか。") == pytest.approx(20 / 1.5)
    assert focus.message_words("Surface Pro 4の充電時間は") == pytest.approx(3 + 6 / 1.5)


@pytest.mark.parametrize("question", ["新型冠状病毒肺炎潜伏期多久", "肺炎患者饮食要注意什么？", "東京タワーの高さは何メートルですか",
                                      "水道を使い始める手続き"])
def test_make_evals_chinese_and_japanese_messages_ask_only_their_question(question):
    """``long_questions.long_message`` in Chinese and Japanese: whatever greeting, detail and closing it draws, the
    focus asks the question alone (none of the hand-written sentences around it asks), once the message is long."""
    asked = question if question.endswith("？") else question + "？"
    for seed in range(40):
        message = long_message(question, random.Random(seed))
        assert asked in message and " " not in message
        if focus.message_words(message) >= focus.MIN_WORDS:
            assert focus.pieces(message) == [asked], message


@pytest.fixture(scope="module")
def faq_page(tmp_path_factory, embedder):
    """deepset's COVID-QA FAQ bank (210 health agencies' entries, one question each) and its paraphrases."""
    from openqna.kb.service import Service
    from openqna.store.sqlite import SQLiteStore

    data = datasets.covid_qsim_deepset(SHARED_DATA)
    service = Service(SQLiteStore(tmp_path_factory.mktemp("faq")), embedder)
    service.create_project("covid")
    service.upsert("covid", [QnA([question], answer) for _, question, answer in data.entries])
    # as a message writes them: a paraphrase without punctuation ("How to deal with the wastewater of COVID 19
    # patients=") gets a question mark, as ``long_message`` gives it
    queries = [text if text.rstrip()[-1:] in ".?!" else text.rstrip() + "?" for text, _, _ in data.queries]
    return service, random.Random(5).sample(queries, 40)


def test_a_long_message_gets_what_its_question_gets(faq_page, monkeypatch):
    """Wrapped in a greeting, a detail and a closing, a question whose message sinks below ``SURE`` keeps (at least)
    the confidence it gets as written; without the focus the same messages sink (eval/report.md, "Long messages")."""
    service, queries = faq_page
    rng = random.Random(11)

    def top(question: str) -> tuple[int, float]:
        answer = service.ask("covid", "test", AskRequest(question=question, top=1))[0]
        return answer.qna.id, answer.confidence

    sure_written = sure_off = sure_on = 0
    for query in queries:
        message = long_message(query, rng)
        written = top(query)
        monkeypatch.setenv("OPENQNA_QUESTION_FOCUS", "0")
        off = top(message)
        monkeypatch.setenv("OPENQNA_QUESTION_FOCUS", "1")
        on = top(message)
        # as sure as the question alone, or (when the whole message is answered as it is) sure enough
        assert on[1] >= min(written[1], focus.SURE) - 1e-3, (message, written, on)
        if off[1] < focus.SURE:  # the sentence was asked alone: its answer is there
            assert on[1] >= written[1] - 1e-3, (message, written, on)
        sure_written += written[1] >= 0.5
        sure_off += off[1] >= 0.5
        sure_on += on[1] >= 0.5
    assert sure_on >= sure_written > sure_off


def test_a_long_off_topic_message_is_not_answered(faq_page):
    service, _ = faq_page
    rng = random.Random(3)
    for question in ("How do I reset my card's PIN?", "What time does the train to Paris leave?",
                     "Can you recommend a good pizza place nearby?", "Why is my laptop so slow?"):
        message = long_message(question, rng)
        assert focus.pieces(message), message
        answer = service.ask("covid", "test", AskRequest(question=message, top=1))[0]
        assert answer.confidence < 0.5, (message, answer.confidence)
