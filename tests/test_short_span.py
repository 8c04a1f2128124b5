"""Short answers: the name, number, date or phrase inside the best sentence, with offsets into the answer."""

from __future__ import annotations

import pytest
from azure.ai.language.questionanswering import QuestionAnsweringClient
from azure.ai.language.questionanswering.models import ShortAnswerOptions
from azure.core.credentials import AzureKeyCredential

from openqna.answers.short_span import question_kind, short_span
from openqna.records import QnA

SENTENCES = [
    ("How long does it take to charge the battery?",
     "It takes two to four hours to charge the battery fully from an empty state.", "two to four hours"),
    ("When was the company founded?", "The company was founded in March 1998 by two students in Delft.", "March 1998"),
    ("Who founded the company?", "The company was founded in March 1998 by Ada Lovelace and Alan Turing.",
     "Ada Lovelace and Alan Turing"),
    ("How many employees does the company have?", "Today the company has 1,200 employees in four countries.",
     "1,200"),
    ("Where is the head office?", "The head office is in Rotterdam, next to the station.", "Rotterdam"),
    ("公司是哪一年成立的？", "该公司于1998年在代尔夫特成立。", "1998年"),
    ("谁创办了这家公司？", "这家公司由艾达·洛夫莱斯创办。", "艾达·洛夫莱斯"),
    ("谁赢得了比赛？", "最后，鹿特丹足球队赢得了比赛。", "鹿特丹足球队"),
    ("会社は何年に設立されましたか？", "この会社は1998年にデルフトで設立された。", "1998年"),
    ("本社はどこにありますか？", "本社はロッテルダムにある。", "ロッテルダム"),
    ("社員は何人いますか？", "現在、社員は1200人いる。", "1200人"),
    # a time of day whole (its "5時" and "15分" were two candidates, and "15分" was chosen)
    ("市役所は何時まで開いていますか", "市役所の開庁時間は平日の午後5時15分までです。", "午後5時15分"),
    ("商店几点关门？", "我们的商店每天晚上10点半关门。", "晚上10点半"),
    # a number the question names is not its answer ("3歳" was)
    ("児童手当は3歳未満だといくら", "3歳未満の児童は月額15,000円です。", "15,000円"),
    # a counter the question asks with (何冊, 何日間), and a price asked: the amount of money, not the "1" of "1通"
    ("図書館は何冊まで借りられる？", "本は1人10冊まで借りられます。", "10冊"),
    ("貸出期間は何日間ですか", "貸出期間は14日間です。", "14日間"),
    ("住民票の手数料はいくら？", "住民票の写しは1通300円です。", "300円"),
    # a verb's kanji stem is not cut from its kana ("1,500円で受" and "2週間借" were answers)
    ("予防接種の自己負担は", "予防接種の自己負担は1,500円で受けられます。", "1,500円"),
]


@pytest.mark.parametrize("question, sentence, expected", SENTENCES)
def test_short_span_inside_a_sentence(question, sentence, expected):
    text = "An earlier sentence. " + sentence + " A later one."
    start = text.index(sentence)
    s, e = short_span(question, text, start, start + len(sentence))
    assert text[s:e] == expected


@pytest.mark.parametrize("question, sentence", [
    ("How do I reset my password?", "Go to account settings and choose Reset password."),
    ("Why is my battery draining fast?", "Your battery drains faster when the screen brightness is high."),
    ("怎么重置密码？", "在账户设置中选择重置密码。"),
])
def test_how_to_and_why_questions_keep_the_sentence(question, sentence):
    assert short_span(question, sentence, 0, len(sentence)) == (0, len(sentence))


def test_nothing_shared_with_the_question_keeps_the_sentence():
    text = "Completely unrelated words here."
    assert short_span("How many moons has Jupiter?", text, 0, len(text)) == (0, len(text))


@pytest.mark.parametrize("question, kind", [
    ("When did it open?", "date"), ("How many people live there?", "number"), ("Who wrote it?", "name"),
    ("Where is it?", "name"), ("What is it made of?", None), ("什么时候开始？", "date"), ("有多少人？", "number"),
    ("いつ始まりましたか", "date"), ("誰が書いたか", "name"),
])
def test_question_kind(question, kind):
    assert question_kind(question) == kind


def test_azure_sdk_short_answers_point_into_the_answer(live):
    live.service.create_project("facts")
    live.service.upsert("facts", [
        QnA(["When was the company founded?"],
            "**About us**\n\nWe make widgets. The company was founded in March 1998 by two students in Delft."),
        QnA(["How long does charging take?"],
            "Plug the widget in. It takes two to four hours to charge the battery fully."),
    ])
    with QuestionAnsweringClient(live.url, AzureKeyCredential("open")) as client:
        kb = client.get_answers(question="In which year was the company founded?", project_name="facts",
                                deployment_name="test", top=1,
                                short_answer_options=ShortAnswerOptions(confidence_threshold=0.0, top=1))
        text = client.get_answers_from_text(
            question="How long does it take to charge?",
            text_documents=["Plug the widget in. It takes two to four hours to charge the battery fully."])
    answer = kb.answers[0]
    span = answer.short_answer
    assert span.text == "March 1998"
    assert answer.answer[span.offset:span.offset + span.length] == span.text
    assert 0.0 < span.confidence <= 1.0
    best = text.answers[0]
    assert best.short_answer.text == "two to four hours"
    assert best.answer[best.short_answer.offset:best.short_answer.offset + best.short_answer.length] == \
        "two to four hours"
