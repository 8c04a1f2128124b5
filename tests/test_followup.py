"""Multi-turn: a follow-up with ``context.previousUserQuery`` finds its answer, through the Azure SDK over HTTP.

The knowledge bases are the multi-turn samples QnA Maker ships: the Surface Pro 4 manual (headings
with follow-up prompts) as a PDF and as the multi-turn Excel file, and the Contoso benefits document.  Each conversation asks its first
question, then the follow-up with the first answer's id and question as context, as a bot does.
The Contoso conversations are the ones ``followup.PREVIOUS_WEIGHT`` was chosen on; the Surface
Pro 4 ones were not used to choose anything.
"""

from __future__ import annotations

import random
from types import SimpleNamespace

import httpx
import numpy as np
import pytest
from azure.ai.language.questionanswering import QuestionAnsweringClient
from azure.ai.language.questionanswering.models import KnowledgeBaseAnswerContext
from azure.core.credentials import AzureKeyCredential

from conftest import REPO, SAMPLE_DOCS, SHARED_DATA, LiveServer
from openqna.formats import read_file
from openqna.index.analyze import analyze
from openqna.ingest import parse_document
from openqna.kb.documents import ingest_document
from openqna.ranking import calibrations, ranker
from openqna.ranking.followup import refers_back
from openqna.records import QnA

DOCS = SAMPLE_DOCS / "data-source-formats"

# (first question, follow-up, the question of the QnA that answers the follow-up)
SURFACE = [
    ("how do I charge my Surface Pro 4?", "how long does that take?", "Power and charging"),
    ("How do I connect a second monitor?", "can I use a dock for that?", "Set up your workspace with Surface Dock"),
    ("How do I take care of the touchscreen?", "what about the power cord?", "Power cord care"),
    ("Which apps come with my Surface?", "what about music?", "Groove Music"),
    ("How do I sign in with Windows Hello?", "how do I sign out then?", "Sign out"),
    ("How do I pair the pen?", "what does its top button do?", "Try out features built in to the top button of the pen"),
    ("How do I check the battery level?", "how do I make it last longer?", "Make your battery last"),
    # self-contained second questions must not be pulled back to the first topic
    ("how do I charge my Surface Pro 4?", "how do I use Windows Hello to sign in?", "Use Windows Hello to sign in"),
    ("How do I pair the pen?", "how do I register my Surface?", "Register your Surface"),
]
# the same manual authored as a multi-turn Excel file (QnA Maker's Multiturn-Surface-Pro.xlsx)
SURFACE_XLSX = [
    ("how do I charge my Surface Pro 4?", "how long does that take?", "Power and charging"),
    ("How do I connect a second monitor?", "can I use a dock for that?", "Set up your workspace with Surface Dock"),
    ("How do I sign in with Windows Hello?", "how do I sign out then?", "Sign out"),
]
# a near miss (with the first ranker the previous answer, "…from the lock screen or the desktop",
# stayed first; now the sentence gain puts "Desktop taskbar" first): asserted in the top three
NEAR_MISSES = [("surface-xlsx", "How do I check the battery level?", "where does it show on the desktop?",
                "Desktop taskbar")]
CONTOSO = [
    ("What dental coverage does the company offer?", "how much does it pay per person?", "Dental Coverage"),
    ("Tell me about the tobacco-free incentive", "how much less do I pay?", "Tobacco-Free Incentive"),
    ("What is business travel accident coverage?", "how much does it pay?", "Business Travel Accident Coverage"),
    ("What is the Employee Assistance Program?", "how do I contact them?", "Employee Assistance"),
    ("What is the tobacco-free incentive?", "what vision coverage do I get?", "Vision Coverage"),
]


@pytest.fixture(scope="module")
def served(tmp_path_factory, embedder):
    from openqna.kb.service import Service
    from openqna.store.sqlite import SQLiteStore

    service = Service(SQLiteStore(tmp_path_factory.mktemp("multiturn")), embedder)
    for project, name in [("surface", "product-manual.pdf"), ("contoso", "Multiturn-ContosoBenefits.docx")]:
        ingest_document(service, project, parse_document(name, (DOCS / name).read_bytes()))
    service.import_content("surface-xlsx", read_file(DOCS / "Multiturn-Surface-Pro.xlsx"))
    with LiveServer(service) as live:
        yield live


def converse(live, project: str, first: str, follow_up: str, *, with_query: bool = True):
    with QuestionAnsweringClient(live.url, AzureKeyCredential("open")) as client:
        opening = client.get_answers(question=first, project_name=project, deployment_name="test", top=1)
        previous = opening.answers[0]
        context = KnowledgeBaseAnswerContext(previous_qna_id=previous.qna_id,
                                             previous_question=first if with_query else None)
        return previous, client.get_answers(question=follow_up, project_name=project, deployment_name="test",
                                            top=3, answer_context=context)


def test_surface_charging_follow_up_finds_the_charging_time(served):
    previous, result = converse(served, "surface", "how do I charge my Surface Pro 4?", "how long does that take?")
    assert previous.questions == ["Charge your Surface Pro 4"]
    top = result.answers[0]
    assert top.questions == ["Power and charging"] and "two to four hours" in top.answer
    assert top.confidence >= 0.25  # 0.30 here; the wrong answer this test once caught scored 0.12
    # without a context the follow-up means nothing; pasted together, the two are one question about charging, which
    # a section on charging answers (the time, now that a manual's sections are read through their text and a
    # message's sentences are asked alone: ``ranking.focus``)
    with QuestionAnsweringClient(served.url, AzureKeyCredential("open")) as client:
        alone = client.get_answers(question="how long does that take?", project_name="surface",
                                   deployment_name="test", top=3)
    assert alone.answers[0].questions != ["Power and charging"]
    _, pasted = converse(served, "surface", "how do I charge my Surface Pro 4?",
                         "how do I charge my Surface Pro 4? how long does that take?", with_query=False)
    assert pasted.answers[0].questions in (["Charge your Surface Pro 4"], ["Power and charging"])


@pytest.mark.parametrize("project, conversations", [("surface", SURFACE), ("surface-xlsx", SURFACE_XLSX),
                                                    ("contoso", CONTOSO)])
def test_follow_ups_of_the_multi_turn_samples(served, project, conversations):
    wrong = []
    for first, follow_up, expected in conversations:
        _, result = converse(served, project, first, follow_up)
        if result.answers[0].questions != [expected]:
            wrong.append((follow_up, result.answers[0].questions))
    assert not wrong


@pytest.mark.parametrize("first, follow_up", [
    *[(first, follow_up) for first, follow_up, _ in CONTOSO],
    ("How do I enroll in benefits?", "how do I add my baby?"), ("What is a health savings account?", "do I need a PIN?"),
    ("What is the 401k plan?", "who is eligible?"), ("What is disability coverage?", "how long does it last?"),
])
def test_passages_do_not_move_a_follow_up_s_qnas(served, first, follow_up):
    """With includeUnstructuredSources a QnA's confidence is what it is without passages in a conversation too: the
    previous turn was read into the five best candidates of QnAs and passages together, which a section's passages
    could fill ("how do I add my baby?" after enrolment: its QnA 0.306 without passages, 0.011 with them)."""
    from openqna.kb.service import AskRequest

    service = served.service
    previous = service.ask("contoso", "test", AskRequest(question=first, top=1))[0]
    assert previous.qna is not None

    def qnas(unstructured: bool) -> dict[int, float]:
        answers = service.ask("contoso", "test", AskRequest(
            question=follow_up, top=30, previous_qna_id=previous.qna.id, previous_user_query=first,
            include_unstructured=unstructured))
        return {a.qna.id: a.confidence for a in answers if a.qna is not None and a.qna.kind == "qna"}

    alone, beside = qnas(False), qnas(True)  # (a QnA whose section's passage ranks above it is left out beside)
    assert beside and beside == {i: c for i, c in alone.items() if i in beside}, (alone, beside)


@pytest.mark.parametrize("question", ["vision insurance", "does it cover contacts?", "what about drugs?",
                                      "parental leave", "dental"])
def test_a_section_answers_once_beside_its_passages(served, question):
    """A section is a QnA and passages under the same heading: with includeUnstructuredSources the two came back one
    after the other ("vision insurance": the Vision Coverage passage 0.813, then its QnA 0.768), pushing the second
    choice out.  The top three hold each section once, and three answers still."""
    from openqna.kb.service import AskRequest

    answers = served.service.ask("contoso", "test", AskRequest(question=question, top=3, include_unstructured=True))
    headings = [a.qna.questions[0] for a in answers]
    assert len(answers) == 3 and len(set(headings)) == 3, headings
    alone = served.service.ask("contoso", "test", AskRequest(question=question, top=3))
    assert len({a.qna.questions[0] for a in alone}) == 3


def test_a_follow_up_without_the_previous_question_reads_the_previous_qnas(served):
    """Bot Framework's QnAMakerDialog (C#) sends the previous QnA's id and no previousUserQuery: the QnA's own question
    stands for the previous turn.  Without it, 2 of these 8 follow-ups got a wrong answer first and 3 of the right ones
    stayed under 0.5 ("how much does it pay?" after business travel accident coverage: "401k" at 0.14)."""
    below = []
    for project, conversations in (("surface-xlsx", SURFACE_XLSX), ("contoso", CONTOSO)):
        for first, follow_up, expected in conversations:
            _, result = converse(served, project, first, follow_up, with_query=False)
            assert result.answers[0].questions == [expected], (follow_up, result.answers[0].questions)
            below += [follow_up] if result.answers[0].confidence < 0.5 else []
    assert not below


@pytest.mark.parametrize("project, first, follow_up, expected", NEAR_MISSES)
def test_near_misses_are_in_the_top_three(served, project, first, follow_up, expected):
    _, result = converse(served, project, first, follow_up)
    assert [expected] in [a.questions for a in result.answers[:3]]


def test_clicking_a_prompt_still_answers_it_exactly(served):
    with QuestionAnsweringClient(served.url, AzureKeyCredential("open")) as client:
        power = client.get_answers(question="Power and charging", project_name="surface", deployment_name="test")
        top = power.answers[0]
        prompt = next(p for p in top.dialog.prompts if p.display_text == "Make your battery last")
        followed = client.get_answers(
            question="Make your battery last", project_name="surface", deployment_name="test",
            answer_context=KnowledgeBaseAnswerContext(previous_qna_id=top.qna_id,
                                                      previous_question="Power and charging"))
    assert followed.answers[0].qna_id == prompt.qna_id and followed.answers[0].confidence == 1.0


@pytest.mark.parametrize("question, expected", [
    ("how long does that take?", True), ("what about music?", True), ("and the price?", True),
    ("它需要多长时间？", True), ("それはいくらですか", True),
    ("how do I use Windows Hello to sign in?", False), ("How do I register my Surface?", False),
])
def test_refers_back(question, expected):
    assert refers_back(question) is expected


def test_a_sentence_gains_what_one_more_question_would_gain(service):
    """``ranker.question_gain`` (the weight of a follow-up's answer sentence) equals the question part of the
    logit difference between the index as it is and the index where that sentence is one more question."""
    kb = [QnA(["How do I charge my Surface?", "Charging the Surface"], "Connect the power supply."),
          QnA(["Power and charging"], "A battery charges fully in two to four hours."),
          QnA(["Pair the pen"], "Hold the top button for seven seconds.")]
    sentence = "A battery charges fully in two to four hours."
    extra = [QnA(r.questions + [sentence], r.answer) for r in kb]
    for project, records in [("as-is", kb), ("one-more", extra)]:
        service.create_project(project)
        service.upsert(project, records)
    index, grown = service.indexes.get("as-is"), service.indexes.get("one-more")
    query = service.embedder.embed(["how long does charging take?"])[0]
    vector = service.embedder.embed([sentence])[0]
    terms = analyze("how long does charging take?")

    def question_logit(idx):
        f = ranker.features(idx, terms, query, np.ones(idx.n, bool), [])
        order = np.argsort(idx.ids[f.rows])  # records in id order: the same in both indexes
        zero = np.zeros(len(f.rows), np.float32)
        c = ranker.weights(index)  # a KB of three QnAs: the weights of FAQ pages (calibrations.SPARSE)
        assert c is calibrations.CALIBRATION.sparse
        return c.scale * c.logit(SimpleNamespace(qsim=f.qsim, qmean=f.qmean, qcent=f.qcent, qcov=zero, bm25=zero),
                                 question_only=True)[order]

    rows = np.argsort(index.ids)  # rows in id order
    gain = ranker.question_gain(index, query, rows, np.repeat(vector[None, :], len(rows), axis=0))
    expected = question_logit(grown) - question_logit(index)
    assert gain == pytest.approx(expected, abs=1e-3)
    assert (gain > 0).all()  # the sentence is closer to the query than any of their questions


# -- context adds evidence, never confidence from nothing (issue 38) ------------------------------------------------

SAMPLE_KB = REPO / "src" / "openqna" / "samples" / "openqna-faq.tsv"


@pytest.fixture(scope="module")
def sample_served(tmp_path_factory, embedder):
    from openqna.kb.service import Service
    from openqna.store.sqlite import SQLiteStore

    service = Service(SQLiteStore(tmp_path_factory.mktemp("sample-conversation")), embedder)
    service.import_content("sample", read_file(SAMPLE_KB))
    with LiveServer(service) as live:
        yield live


def off_topic_follow_ups() -> list[str]:
    """The sample KB's hand-written off-topic questions and 30 seeded assistant requests of hwu64 (none about a
    question-answering server), as users say them to a bot in the middle of a conversation."""
    from openqna.evaluation.document_regimes import QUESTIONS, read_questions

    written = [q.question for q in read_questions(QUESTIONS / "sample-kb.tsv") if q.answer is None]
    hwu = (SHARED_DATA / "hwu64" / "test" / "seq.in").read_text(encoding="utf-8").splitlines()
    return written + random.Random(38).sample(hwu, 30)


def test_off_topic_follow_ups_stay_below_the_threshold_on_both_surfaces(sample_served):
    """After "How do I start the server?" (QnA 2, with two prompts), an off-topic question got QnA 2 again at 0.92
    ("tell me a joke") through Azure's context and QnA Maker's alike; the question alone gets 0.07."""
    questions = ["tell me a joke", "what is the weather tomorrow?", *off_topic_follow_ups()]
    assert len(questions) >= 50
    azure, qnamaker = [], []
    with QuestionAnsweringClient(sample_served.url, AzureKeyCredential("open")) as client, \
            httpx.Client(base_url=sample_served.url) as http:
        for q in questions:
            result = client.get_answers(question=q, project_name="sample", deployment_name="test", top=1,
                                        answer_context=KnowledgeBaseAnswerContext(
                                            previous_qna_id=2, previous_question="How do I start the server?"))
            azure.append(result.answers[0].confidence)
            body = http.post("/qnamaker/knowledgebases/sample/generateAnswer",
                             json={"question": q, "top": 1, "isTest": True, "context": {
                                 "previousQnAId": 2, "previousUserQuery": "How do I start the server?"}}).json()
            assert "answers" in body, body
            qnamaker.append(body["answers"][0]["score"] / 100)
    answered = [q for q, c in zip(questions, azure) if c >= 0.5]
    assert len(answered) <= 0.05 * len(questions), answered
    assert max(azure[:2]) < 0.5
    assert qnamaker == pytest.approx(azure, abs=1e-4)  # the two surfaces read a context alike


def test_prompts_and_real_follow_ups_still_rise_with_the_context(sample_served):
    """Every prompt's display text, asked after its QnA, gets its target at or above 0.5; a follow-up that
    asks about the previous answer's text ("what port does it use?") still gains from the context."""
    content = read_file(SAMPLE_KB)
    with QuestionAnsweringClient(sample_served.url, AzureKeyCredential("open")) as client:
        pairs = [(parent, p) for parent in content.qnas for p in parent.dialog.prompts]
        assert len(pairs) >= 7
        for parent, p in pairs:
            result = client.get_answers(question=p.display_text, project_name="sample", deployment_name="test",
                                        top=1, answer_context=KnowledgeBaseAnswerContext(
                                            previous_qna_id=parent.id, previous_question=parent.questions[0]))
            assert result.answers[0].qna_id == p.qna_id and result.answers[0].confidence >= 0.5, p.display_text

        def ask(question: str, context: bool) -> float:
            found = client.get_answers(question=question, project_name="sample", deployment_name="test", top=1,
                                       answer_context=KnowledgeBaseAnswerContext(
                                           previous_qna_id=2, previous_question="How do I start the server?")
                                       if context else None).answers[0]
            assert found.qna_id == 2
            return found.confidence

        alone, followed = ask("what port does it use?", False), ask("what port does it use?", True)
    assert alone < 0.5 <= followed


def test_context_caps_records_without_evidence():
    from openqna.ranking.followup import capped, prompt_matches
    from openqna.ranking.ranker import Ranked

    alone = [Ranked(1, 0.30), Ranked(2, 0.20), Ranked(4, 0.10)]
    contextual = [Ranked(2, 0.90), Ranked(3, 0.80), Ranked(1, 0.25)]

    def pairs(ranked):
        return [(r.record_id, r.confidence) for r in ranked]

    # no evidence: every record as the question alone ranks it (3, outside a pool that is not full, at 0)
    assert pairs(capped(contextual, alone, set())) == [(1, 0.30), (2, 0.20), (4, 0.10), (3, 0.0)]
    # evidence keeps what the context gave, and never less than the question alone gave (1: 0.30, not 0.25)
    assert pairs(capped(contextual, alone, {1, 2, 3})) == [(2, 0.90), (3, 0.80), (1, 0.30), (4, 0.10)]
    # a full pool caps a record it does not hold at its lowest confidence
    assert dict(pairs(capped([Ranked(9, 0.7)], alone, set(), pool=3)))[9] == 0.10
    # two sections of one heading both match it word for word: the prompt's own target comes first
    tie = [Ranked(22, 1.0), Ranked(64, 1.0)]
    assert [r.record_id for r in capped(tie, tie, {22, 64}, prompted={64})] == [64, 22]
    assert prompt_matches("how do I secure the server?", {6: "How do I secure it?", 3: "How do I load my own FAQ?"}) == {6}
    assert prompt_matches("tell me a joke", {6: "How do I secure it?"}) == set()
