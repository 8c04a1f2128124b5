"""The multilingual space (issues 23 and 42): CJK questions ranked by multilingual-e5-small's vectors.

Real parts throughout: the bundled MiniLM and the real encoder, real SQLite and PostgreSQL stores, the
real HTTP server asked through Azure's own SDK.  What must hold: English is untouched (same ids and
confidences, nothing more stored), CJK knowledge bases get the space by default and answer paraphrases
confidently, a knowledge base stored without it still answers and gains it by the documented steps.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import numpy as np
import pytest
from azure.ai.language.questionanswering import QuestionAnsweringClient
from azure.ai.language.questionanswering.models import ShortAnswerOptions
from azure.core.credentials import AzureKeyCredential

from conftest import LiveServer
from openqna.evaluation import space_faq
from openqna.evaluation.document_regimes import read_questions
from openqna.formats import read_file
from openqna.index.analyze import analyze, exact_key
from openqna.index.index_cache import IndexCache
from openqna.index.saved_index import load, save
from openqna.kb import service_base
from openqna.kb.service import AskRequest, Service, SpanRequest
from openqna.ranking import calibrations, ranker, regime
from openqna.ranking.multilingual import FILLED, cjk_kb, crosses
from openqna.records import QnA
from openqna.store.sqlite import SQLiteStore
from pg import pg_dsn, pg_server  # noqa: F401  (fixtures)
from test_cjk import JA, JA_ASKED, ZH, ZH_ASKED

SAMPLE = Path(str(resources.files("openqna") / "samples" / "openqna-faq.tsv"))
QUESTIONS = Path(str(resources.files("openqna") / "evaluation" / "questions"))


@pytest.fixture(scope="session")
def encoder():
    from openqna.models.embedder import get_embedder

    return get_embedder("multilingual")


def _kb(service, project, qnas):
    service.create_project(project)
    service.upsert(project, [QnA(list(q), a) for q, a in qnas])
    ids = {q.answer: q.id for q in service.store.list_qnas(project)}
    return [ids[a] for _, a in qnas]


def _ask(service, project, question, deployment="test", **kw):
    return service.ask(project, deployment, AskRequest(question=question, top=3, **kw))


def _units(index) -> int:
    return index.multilingual_units()


def test_english_questions_get_the_same_ids_and_confidences_with_or_without_the_space(service, monkeypatch):
    """The sample KB and its 60 evaluation questions: English-only under ``auto`` holds nothing more, and the same
    KB given the space (``on``) ranks every English question exactly as it did."""
    english = [q.question for q in read_questions(QUESTIONS / "sample-kb.tsv")]
    service.import_content("auto", read_file(SAMPLE))
    assert service.indexes.get("auto").mq is None and not service.store.get_project("auto").settings.get(FILLED)
    monkeypatch.setenv("OPENQNA_MULTILINGUAL", "on")
    service.import_content("on", read_file(SAMPLE))
    assert _units(service.indexes.get("on")) > 0
    for question in english:
        before = [(a.qna.id, a.confidence) for a in _ask(service, "auto", question) if a.qna]
        after = [(a.qna.id, a.confidence) for a in _ask(service, "on", question) if a.qna]
        assert before == after, question


@pytest.mark.parametrize("qnas, asked", [(ZH, ZH_ASKED), (JA, JA_ASKED)], ids=["zh", "ja"])
def test_cjk_paraphrases_find_their_qna_in_the_space(service, qnas, asked):
    ids = _kb(service, "faq", qnas)
    index = service.indexes.get("faq")
    assert index.multilingual() is not None and service.store.get_project("faq").settings[FILLED]
    unsure = []
    for question, k in asked:
        answers = _ask(service, "faq", question)
        assert answers[0].qna.id == ids[k], (question, [a.qna.answer for a in answers])
        if answers[0].confidence < 0.5:
            unsure.append((question, answers[0].confidence))
    # E5 (issue 42) answers 15 of the 16 at 0.82-0.95; "充电要多久才能充满" gets 0.38 (the universal sentence
    # encoder: all 16 at 0.76-0.94); at most one in ten under 0.5
    assert len(unsure) <= len(asked) // 10, unsure


@pytest.mark.parametrize("qnas, off_topic", [
    (ZH, ["今天天气怎么样", "你喜欢吃什么水果", "北京有哪些好玩的地方", "怎么学习英语", "推荐一本好书"]),
    (JA, ["今日の天気はどうですか", "おすすめのレストランは", "東京の人口は"]),
], ids=["zh", "ja"])
def test_off_topic_cjk_questions_stay_below_the_threshold_in_the_space(service, qnas, off_topic):
    _kb(service, "faq", qnas)
    for question in off_topic:
        answers = _ask(service, "faq", question)
        assert not answers[0].qna or answers[0].confidence < 0.5, (question, answers[0].confidence)


def test_a_mixed_question_reads_both_its_latin_and_cjk_words(service):
    """"Surface Pro 4の充電時間は" on a Japanese manual: the product name (keywords) and the CJK words (vectors)."""
    ids = _kb(service, "manual", [
        (["Surface Pro 4 について"], "Surface Pro 4 は 12.3 インチのタッチスクリーンを備えたタブレットです。"),
        (["電源と充電"], "Surface Pro 4 のバッテリーは、付属の電源アダプターで約2時間でフル充電できます。"),
        (["Surface Book の充電"], "Surface Book は付属の電源で約3時間で充電できます。"),
        (["Wi-Fi に接続する"], "設定を開き、ネットワークを選んでから接続先を選択します。")])
    answers = _ask(service, "manual", "Surface Pro 4の充電時間は")
    assert answers[0].qna.id == ids[1], [a.qna.questions for a in answers]
    assert answers[0].confidence >= 0.5


def test_a_cjk_question_of_an_english_kb_gets_the_default_answer_without_the_space(service):
    """``auto`` on an English KB: no space, keyword ranking, and a question sharing no keyword gets no QnA (it
    used to get three arbitrary ones at 0.0845)."""
    service.import_content("sample", read_file(SAMPLE))
    for question in ("如何启动服务器？", "日本語は使えますか"):
        answers = _ask(service, "sample", question)
        assert len(answers) == 1 and answers[0].qna is None, [(a.qna.id, a.confidence) for a in answers if a.qna]


def test_cross_lingual_with_the_setting_on(service, monkeypatch):
    """``on``: the English sample KB gets the space, and a Chinese question finds the English QnA answering it, with
    a confidence read by the cross-lingual calibration (``multilingual.crosses``): above the threshold, where the
    monolingual one, which expects shared words, puts it below (0.0845 once, 0.48 with E5); an off-topic one stays
    below."""
    monkeypatch.setenv("OPENQNA_MULTILINGUAL", "on")
    service.import_content("sample", read_file(SAMPLE))
    index = service.indexes.get("sample", "test")
    assert crosses(index, "怎么启动服务器？") and not crosses(index, "How do I start the server?")
    assert service.query_space(index, "怎么启动服务器？", project="sample").calibration is calibrations.CROSSLINGUAL
    answers = _ask(service, "sample", "怎么启动服务器？")
    assert "make serve" in answers[0].qna.answer and answers[0].confidence >= 0.5
    monkeypatch.setattr(service_base, "crosses", lambda index, question: False)  # as a Chinese KB's question is
    monolingual = _ask(service, "sample", "怎么启动服务器？")
    assert monolingual[0].qna.id == answers[0].qna.id and monolingual[0].confidence < 0.5
    monkeypatch.setattr(service_base, "crosses", crosses)
    off = _ask(service, "sample", "明天天气怎么样？")
    assert off[0].qna is None or off[0].confidence < 0.5


def test_only_a_kb_of_mostly_other_languages_crosses(service):
    """A Chinese KB asked in Chinese is read with the monolingual calibration, with a few English records too; a KB
    of mostly English records crosses for a Chinese question, and a Chinese KB for an English one."""
    _kb(service, "zh", ZH + [(["How do I reset my password?"], "Use the reset link.")])
    zh = service.indexes.get("zh", "test")
    assert cjk_kb(zh) and not crosses(zh, ZH_ASKED[0][0]) and crosses(zh, "How long does charging take?")
    assert service.query_space(zh, ZH_ASKED[0][0], project="zh").calibration is calibrations.MULTILINGUAL
    _kb(service, "mixed", ZH[:2] + [([f"English question {i}?"], f"English answer {i}.") for i in range(3)])
    assert not cjk_kb(service.indexes.get("mixed", "test"))


ZH_ASKED_IN_ENGLISH = ["How long does it take to charge the device fully?", "How many hours does the battery last?",
                       "I forgot my password, how do I reset it?", "How do I connect to Wi-Fi?", "How long is the warranty?",
                       "How can I make the screen brighter?", "Can I return a product?", "When will my order ship?",
                       "How do I get an invoice?", "How do I delete my account?"]


def test_an_english_question_of_a_chinese_kb_is_ranked_in_the_space(service):
    """MiniLM cannot read the Chinese records; E5 reads both languages, and the universal sentence encoder beside it
    (``MemIndex.crossing``): English questions find the Chinese QnAs answering them, read with the cross-lingual
    calibration, a span read by E5; with the setting ``off`` they are ranked by MiniLM as before.  First and right
    at 0.5: 8 of these 10 (7 with E5's vectors alone; make eval's XQuAD across languages: 0.80-0.82 top-1 against
    0.72-0.76)."""
    ids = _kb(service, "zh", ZH)
    zh = service.indexes.get("zh", "test")
    space = service.query_space(zh, "How long does it take to charge the device fully?", project="zh")
    assert space.multilingual and space.calibration is calibrations.CROSSLINGUAL
    tops = [_ask(service, "zh", q)[0] for q in ZH_ASKED_IN_ENGLISH]
    right = [a.qna is not None and a.qna.id == ids[k] and a.confidence >= 0.5 for k, a in enumerate(tops)]
    assert sum(right) >= 8, [(q, a.confidence) for q, a, r in zip(ZH_ASKED_IN_ENGLISH, tops, right) if not r]
    answers = _ask(service, "zh", "How many hours does the battery last?", span=SpanRequest())
    assert answers[0].qna.id == ids[1] and answers[0].confidence >= 0.5
    assert answers[0].span is not None and answers[0].span.text in ZH[1][1]
    off = _ask(service, "zh", "What is the capital of Peru?")
    assert off[0].qna is None or off[0].confidence < 0.5


def _stores(request, tmp_path):
    if request.param == "sqlite":
        return SQLiteStore(tmp_path / "data")
    from openqna.store.postgres import PostgresStore

    return PostgresStore(request.getfixturevalue("pg_dsn"), pool_size=2)


@pytest.fixture(params=["sqlite", "postgresql"])
def any_service(request, tmp_path, embedder, encoder):
    store = _stores(request, tmp_path)
    yield Service(store, embedder, encoder)
    store.close()


def test_a_kb_stored_without_the_space_answers_lexically_and_gains_it_on_a_cjk_write(any_service, monkeypatch):
    """Old data (written before the space, or with ``off``): keyword ranking meanwhile; a write of CJK records (here
    one of eleven, past the 5%) fills every record, a deploy copies it, and ``openqna reembed`` does too."""
    service = any_service
    monkeypatch.setenv("OPENQNA_MULTILINGUAL", "off")
    ids = _kb(service, "faq", ZH)
    service.deploy("faq", "production")
    assert service.indexes.get("faq").multilingual() is None
    lexical = _ask(service, "faq", "密码忘了怎么重置")[0]
    assert lexical.qna.id == ids[2]  # the keyword path still answers

    monkeypatch.setenv("OPENQNA_MULTILINGUAL", "auto")
    assert service.indexes.get("faq").multilingual() is None  # nothing changes until a write
    service.upsert("faq", [QnA(["营业时间是几点？"], "每天上午九点到晚上六点。")])
    index = service.indexes.get("faq")
    assert index.multilingual() is not None and _units(index) == 2 * (len(ZH) + 1)
    assert service.store.get_project("faq").settings[FILLED]
    answered = _ask(service, "faq", "密码忘了怎么重置")[0]
    assert answered.qna.id == ids[2] and answered.confidence != lexical.confidence  # ranked in the space now
    # production is the old snapshot until the next deploy
    assert service.indexes.get("faq", "production").multilingual() is None
    service.deploy("faq", "production")
    assert service.indexes.get("faq", "production").multilingual() is not None

    monkeypatch.setenv("OPENQNA_MULTILINGUAL", "off")  # reembed drops it where the setting says so ...
    service.reembed("faq")
    assert service.indexes.get("faq").multilingual() is None
    monkeypatch.setenv("OPENQNA_MULTILINGUAL", "auto")  # ... and makes it where it says so
    service.reembed("faq")
    assert service.indexes.get("faq").multilingual() is not None
    assert _ask(service, "faq", "密码忘了怎么重置")[0].qna.id == ids[2]


def test_sqlite_stores_the_space_as_float16(service, encoder, tmp_path):
    """Half the bytes, cosines within 1e-3 of the float32 vectors."""
    _kb(service, "faq", ZH)
    store = service.store
    pid = store.current("faq")[0]
    sizes = dict(store._db.execute("SELECT field, max(length(vector)) FROM units WHERE project_id=? GROUP BY field",
                                   (pid,)).fetchall())
    assert sizes == {"q": 384 * 4, "a": 384 * 4, "mq": 384 * 2, "ma": 384 * 2, "uq": 512 * 2, "ua": 512 * 2}
    index = service.indexes.get("faq")
    stored = index.multilingual().q.matrix
    fresh = encoder.embed([q[0] for q, _ in ZH])
    assert np.abs((stored * fresh).sum(axis=1) - 1.0).max() < 1e-3


def test_the_space_survives_updates_and_a_saved_index(service, tmp_path):
    """An index caught up change by change holds the same multilingual vectors as one built afresh, and a saved
    index reads them back."""
    _kb(service, "faq", ZH[:6])
    service.indexes.get("faq")  # built now: what follows is caught up incrementally
    service.upsert("faq", [QnA(list(q), a) for q, a in ZH[6:]])
    first = service.store.list_qnas("faq")[0]
    service.store.delete_qnas("faq", [first.id])
    updated = service.indexes.get("faq")
    rebuilt = IndexCache(service.store).get("faq")
    for name in ("q", "a"):
        a, b = getattr(updated.multilingual(), name), getattr(rebuilt.multilingual(), name)
        order_a, order_b = np.argsort(updated.ids[a.rows], kind="stable"), np.argsort(rebuilt.ids[b.rows], kind="stable")
        assert np.allclose(a.matrix[order_a], b.matrix[order_b])
    save(rebuilt, tmp_path / "saved")
    loaded = load(tmp_path / "saved")
    assert np.array_equal(loaded.multilingual().a.matrix, rebuilt.multilingual().a.matrix)


def test_azure_sdk_on_a_chinese_kb_through_the_http_server(service):
    ids = _kb(service, "faq", ZH)
    service.deploy("faq", "production")
    with LiveServer(service) as server, QuestionAnsweringClient(server.url, AzureKeyCredential("k")) as client:
        # (not ZH_ASKED's first question, "充电要多久才能充满", which E5 answers right at 0.38: the paraphrase test)
        result = client.get_answers(question="电池能用几个小时", project_name="faq", deployment_name="production",
                                    top=1, short_answer_options=ShortAnswerOptions(confidence_threshold=0.0, top=1))
        top = result.answers[0]
        assert top.qna_id == ids[1] and top.confidence >= 0.5
        assert top.short_answer is not None and top.short_answer.text == "九个小时"  # 几个小时 asks a number
        off = client.get_answers(question="今天天气怎么样", project_name="faq", deployment_name="production",
                                 confidence_threshold=0.5)
        assert off.answers[0].qna_id == -1  # the default answer


def test_tool_search_ranks_cjk_subjects_in_the_space(service):
    """``Service.search`` (the tools, MCP and vector stores' path): English and CJK subjects in one call each; an
    English subject of this mostly Chinese KB finds both warranty QnAs first, each at 0.5 or more: the Chinese one
    read across languages, the English one as an English KB reads it (0.88 and 0.51)."""
    ids = _kb(service, "faq", ZH + [(["How long is the warranty?"], "One year from the date of purchase.")])
    assert "保修" in ZH[4][0][0]
    hits = service.search("faq", "密码忘了怎么重置", limit=2)
    assert hits[0].record.id == ids[2] and hits[0].score >= 0.5
    warranty = service.search("faq", "warranty period", limit=3)
    assert {h.record.id for h in warranty[:2]} == {ids[-1], ids[4]} and warranty[1].score >= 0.5, warranty


def test_auto_needs_a_share_of_cjk_records_before_embedding_a_whole_kb(service):
    """A Chinese QnA added to a large English KB does not make it embed every record again (its question is ranked
    by keywords); a write whose CJK records are 5% of the KB fills the space."""
    service.create_project("big")
    service.upsert("big", [QnA([f"How do I configure option number {i}?"], f"Set option {i} in the settings page.")
                           for i in range(40)])
    service.upsert("big", [QnA(["如何重置密码？"], "在设置页面点击“忘记密码”。")])
    assert service.indexes.get("big").mq is None
    answers = _ask(service, "big", "忘记密码怎么重置")
    assert answers[0].qna.answer.startswith("在设置页面")  # the keyword path
    service.reembed("big")  # decides on all 41 records: 1 is not 5%
    assert service.indexes.get("big").mq is None
    service.upsert("big", [QnA(["营业时间是几点？"], "每天九点到六点。"), QnA(["可以退货吗？"], "三十天内可以退货。"),
                           QnA(["保修期是多久？"], "一年有限保修。")])
    index = service.indexes.get("big")  # 3 CJK records written beside 41: 5% or more, the space for all 44
    assert index.multilingual() is not None and _units(index) == 2 * 44


# A municipal FAQ page in Japanese, one question per QnA as such pages are (written for this test, after
# localgovFAQ's kind of page): real answers that name other entries' topics (moving house names bulky waste and the
# certificate of residence), asked as residents ask.
MUNICIPAL = [
    ("住民票の写しはどこで取得できますか？", "市役所本庁舎1階の市民課窓口、各支所、またはマイナンバーカードをお持ちの方は"
     "コンビニエンスストアで取得できます。手数料は1通300円です。"),
    ("粗大ごみはどのように出せばよいですか？", "事前に粗大ごみ受付センターへ電話かインターネットで申し込み、処理券を購入して"
     "指定日に出してください。"),
    ("引っ越しのときに必要な手続きは何ですか？", "転出届を市民課に提出してください。引っ越しで出る粗大ごみや家電は、粗大ごみ"
     "受付センターへ申し込むか、販売店に引き取りを依頼してください。住民票の写しが必要な場合は転出前に取得してください。"),
    ("保育園の入園申し込みはいつまでですか？", "4月入園の一次申し込みは前年の11月末までです。途中入園は入園希望月の前月10日"
     "までに保育課へ申請してください。"),
    ("国民健康保険の保険料はどうやって納めますか？", "納付書による金融機関やコンビニでの支払い、または口座振替で納めることが"
     "できます。"),
    ("図書館の開館時間を教えてください。", "中央図書館は火曜日から金曜日が午前9時から午後8時まで、土日祝日は午後5時までです。"
     "月曜日は休館日です。"),
    ("犬の登録はどこでできますか？", "生後91日以上の犬は、保健所または動物病院で登録と狂犬病予防注射を受けてください。"),
    ("印鑑登録をしたいのですが、何が必要ですか？", "登録する印鑑と本人確認書類（運転免許証など）を持って、市民課窓口へ本人が"
     "お越しください。"),
    ("市役所の駐車場は無料ですか？", "市役所に用事のある方は2時間まで無料です。窓口で駐車券に認証を受けてください。"),
    ("子どもの医療費助成について知りたい", "中学校卒業までのお子さんの保険診療の自己負担分を助成します。受給者証を医療機関の"
     "窓口で提示してください。"),
    ("戸籍謄本を郵送で請求できますか？", "本籍地の市区町村へ、請求書、本人確認書類の写し、手数料分の定額小為替、返信用封筒を"
     "郵送してください。"),
    ("水道の使用を開始するにはどうすればいいですか？", "水道局お客さまセンターへ、使用開始日の3日前までに電話または"
     "インターネットで申し込んでください。"),
]
RESIDENTS_ASK = [("大きな家具を捨てるにはどうすればいい？", 1), ("粗大ごみの出し方を知りたい", 1),
                 ("住民票はどこでもらえますか", 0), ("引っ越しの手続きについて教えて", 2), ("保育園の申し込み期限はいつ？", 3),
                 ("国保の保険料の払い方", 4), ("図書館は何時まで開いていますか", 5), ("飼い犬の登録をしたい", 6),
                 ("印鑑登録に必要なもの", 7), ("市役所に車で行くと駐車料金はかかりますか", 8), ("子供の医療費は助成されますか", 9),
                 ("戸籍謄本を郵便で取り寄せたい", 10), ("水道を使い始める手続き", 11), ("コンビニで住民票を取れますか", 0)]


def test_a_japanese_faq_page_is_read_by_its_questions(service, monkeypatch):
    """The space's FAQ-page weights (``calibrations.MULTILINGUAL_SPARSE``): each resident's question finds the entry
    whose question it asks, confidently, though another entry's answer repeats its words.  MULTILINGUAL's weights
    alone, fitted where questions were written from the answer, put the moving-house entry first for two of them
    and a third entry for the insurance question."""
    ids = _kb(service, "city", [([q], a) for q, a in MUNICIPAL])
    assert service.indexes.get("city").multilingual() is not None
    unsure = []
    for question, k in RESIDENTS_ASK:
        first = _ask(service, "city", question)[0]
        assert first.qna.id == ids[k], (question, first.qna.questions, first.confidence)
        if first.confidence < 0.5:
            unsure.append((question, first.confidence))
    # E5 (issue 42): 13 of the 14 at 0.80-0.95, "大きな家具を捨てるにはどうすればいい？" (bulky waste in other words) at
    # 0.38; the universal sentence encoder: 13 at 0.65-0.95, that one at 0.47
    assert len(unsure) <= 1, unsure
    monkeypatch.setattr(calibrations, "MULTILINGUAL", space_faq.before())
    wrong = [q for q, k in RESIDENTS_ASK if _ask(service, "city", q)[0].qna.id != ids[k]]
    assert len(wrong) >= 3, wrong


def test_a_japanese_faq_page_finds_the_question_inside_a_long_message(service, monkeypatch):
    """Residents' questions written as messages to the city (a greeting, a detail, the question, a closing): the
    question focus (``ranking.focus``) asks the question alone, so the right entry keeps the confidence the question
    alone earns; without it the greetings and details drag several of them below 0.5."""
    ids = _kb(service, "city", [([q], a) for q, a in MUNICIPAL])
    greetings = ["こんにちは。", "お世話になっております。", "", "はじめまして。"]
    details = ["先月この市に引っ越してきた者です。", "平日は仕事で忙しいです。", "家族は四人です。",
               "市のホームページを見てもよく分かりませんでした。"]
    closings = ["よろしくお願いします。", "ご回答お待ちしております。", "", "ありがとうございます。"]
    messages = [(greetings[n % 4] + details[n % 4] + q + ("" if q.endswith("？") else "。") + closings[n % 4], k)
                for n, (q, k) in enumerate(RESIDENTS_ASK)]

    def right_at_half() -> int:
        return sum(a.qna.id == ids[k] and a.confidence >= 0.5
                   for a, k in ((_ask(service, "city", m)[0], k) for m, k in messages))

    focused = right_at_half()
    monkeypatch.setenv("OPENQNA_QUESTION_FOCUS", "0")
    unfocused = right_at_half()  # E5: 13 against 10; the universal sentence encoder: 12 against 9
    assert focused >= 12 and unfocused <= focused - 3, (focused, unfocused)


@pytest.mark.parametrize("informative, records, share", [
    (0.44, 245, 0.0), (0.6, 300, 0.0), (0.7, 300, 0.5), (0.8, 300, 1.0), (0.86, 335, 1.0), (0.9, 12, 0.0)])
def test_the_space_hands_an_faq_page_whose_answers_say_much_to_its_own_weights(informative, records, share):
    """None at informativeness 0.6 or less (the real FAQ pages: 0.14-0.48 in E5's space), all from 0.8 (JSQuAD's FAQ
    0.86, XQuAD-zh's 0.92, ranked as MULTILINGUAL was fitted to rank them), and never on a KB under 100 records."""
    sparse = calibrations.MULTILINGUAL.sparse
    assert sparse is not None
    assert ranker.handover_share(sparse, informative, records) == pytest.approx(share)
    assert ranker.handover_share(calibrations.SPARSE, 0.9, 1000) == 0.0  # the English FAQ-page weights hand nothing over


@pytest.mark.parametrize("question, asks", [
    ("How do I reset my password?", True), ("Power and charging", False), ("Good morning", False),
    ("住民票の写しはどこで取得できますか？", True), ("子どもの医療費助成について知りたい", True), ("電源と充電", False),
    ("Wi-Fi に接続する", False), ("新型冠状肺炎潜伏期多久", True), ("密码忘了怎么重置", True), ("保修期是一年吗", True),
    ("产品保修政策", False), ("비밀번호를 어떻게 재설정하나요?", True), ("배송은 언제 되나요", True),
    ("환불 정책 안내", False)])
def test_which_stored_questions_ask_in_four_languages(question, asks):
    """What ``ranker.heading_share`` counts as a question (``regime.key_asks`` on the stored question's key): a page
    whose questions nearly all name topics instead is read through its answers."""
    assert regime.key_asks(exact_key(question)) is asks


def test_e5_reads_answers_as_passages_and_questions_as_queries(encoder):
    """E5's two prefixes: the same text embedded as a question (``query: ``) and as an answer (``passage: ``) are
    different vectors, each unit length; a Chinese paraphrase is nearer its question than an unrelated one is."""
    text = "使用原装电源适配器，大约两个小时可以充满。"
    query, passage = encoder.embed([text])[0], encoder.embed_passages([text])[0]
    assert query.shape == passage.shape == (encoder.dim,)
    assert np.linalg.norm(query) == pytest.approx(1.0, abs=1e-4) == np.linalg.norm(passage)
    assert 0.6 < float(query @ passage) < 0.95
    q = encoder.embed(["充电要多久才能充满", "设备充满电需要多长时间？", "保修期是多久？"])
    assert q[0] @ q[1] > q[0] @ q[2] + 0.15


def test_e5_vectors_are_centred(encoder):
    """E5's raw vectors of any two questions lie at cosine 0.84-0.92; centred (``E5_MEANS`` taken off), unrelated
    questions are far apart, as the other models' are, and a paraphrase stays near."""
    from openqna.models.embedder import MultilingualE5

    raw = MultilingualE5(cache_size=0, centred=False)
    texts = ["保修期是多久？", "住民票の写しはどこで取得できますか？", "How do I reset my password?", "保修期有几年"]
    for vectors, low, high in ((raw.embed(texts), 0.75, 0.95), (encoder.embed(texts), -0.2, 0.45)):
        unrelated = [float(vectors[i] @ vectors[j]) for i, j in ((0, 1), (0, 2), (1, 2))]
        assert all(low < c < high for c in unrelated), unrelated
    assert float(encoder.embed(texts)[0] @ encoder.embed(texts)[3]) > 0.6


def test_e5_reads_half_width_katakana_as_full_width(encoder):
    """Half-width katakana (still written by many Japanese systems) was read at 0.93 of its full-width form, so
    "ﾏｲﾅﾝﾊﾞｰｶｰﾄﾞを作りたいです" got the lost-card QnA; it is folded as NFKC folds it, questions and passages alike."""
    half, full = "ﾏｲﾅﾝﾊﾞｰｶｰﾄﾞを作りたいです", "マイナンバーカードを作りたいです"
    for embed in (encoder.embed, encoder.embed_passages):
        a, b = embed([half, full])
        assert float(a @ b) == pytest.approx(1.0, abs=1e-5)


def test_e5_gives_the_same_vectors_from_many_threads(encoder):
    """The server embeds questions on several threads at once: the C engine must not share scratch space."""
    from concurrent.futures import ThreadPoolExecutor

    texts = [q for qs, _ in ZH + JA for q in qs] + [a for _, a in ZH + JA]
    alone = np.vstack([encoder.embed_passages([t]) for t in texts])
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda t: encoder.embed_passages([t])[0], texts * 3))
    assert np.allclose(np.vstack(together), np.vstack([alone] * 3), atol=1e-5)


def test_vectors_of_the_space_s_earlier_model_are_left_unread_then_embedded_again(tmp_path, monkeypatch, embedder,
                                                                                   encoder):
    """A store written when the space was the universal sentence encoder's (512 dimensions, FILLED True): its index
    loads, its CJK questions are ranked by their keywords meanwhile, and ``upgrade_multilingual`` (``openqna serve``
    runs it before serving) embeds the live records again in E5's space, a chunk at a time, so that an upgrade
    stopped halfway goes on from where it stopped; the deployment keeps its vectors, unread, until deployed again."""
    from openqna.kb import writing
    from openqna.kb.writing import content_hash
    from openqna.ranking.multilingual import SPACE, hashed_space
    from openqna.store import StoredQnA, Unit

    store = SQLiteStore(tmp_path / "old.db")
    service = Service(store, embedder, encoder)
    ids = _kb(service, "old", ZH)
    old = service.store.list_qnas("old")
    vectors = service.store.get_vectors("old", [q.id for q in old])
    rng = np.random.default_rng(0)

    def use(n: int) -> list:
        return [v / np.linalg.norm(v) for v in rng.normal(size=(n, 512)).astype(np.float32)]

    service.store.put_qnas("old", [StoredQnA(q, [
        *[Unit("q", n, [], vectors[q.id][("q", n)]) for n in range(len(q.questions))],
        Unit("a", 0, [], vectors[q.id][("a", 0)]),
        *[Unit("mq", n, [], v) for n, v in enumerate(use(len(q.questions)))], Unit("ma", 0, [], use(1)[0])],
        content_hash(q, hashed_space(embedder.name, False) + "+use-multilingual-v3/numpy")) for q in old])
    project = service.store.get_project("old")
    project.settings[FILLED] = True
    service.store.update_project(project)
    service.deploy("old", "production")
    store.close()

    service = Service(SQLiteStore(tmp_path / "old.db"), embedder, encoder)
    assert service.indexes.get("old").multilingual() is None  # the 512-dimension vectors are not read
    question, k = ZH_ASKED[0]
    assert _ask(service, "old", question)  # answered, by its keywords
    monkeypatch.setattr(writing, "FILL_CHUNK", 2)
    written, put_qnas = [], service.store.put_qnas

    def stopped(project, items):  # the server is stopped while it embeds the second chunk
        if written:
            raise KeyboardInterrupt
        written.append([item.qna.id for item in items])
        return put_qnas(project, items)

    monkeypatch.setattr(service.store, "put_qnas", stopped)
    with pytest.raises(KeyboardInterrupt):
        service.upgrade_multilingual()
    monkeypatch.setattr(service.store, "put_qnas", put_qnas)
    assert len(written[0]) == 2 and service.store.get_project("old").settings[FILLED] is True  # not done yet
    assert service.upgrade_multilingual() == {"old": (len(ZH) - 2, ["production"])}  # the rest, not all again
    assert service.store.get_project("old").settings[FILLED] == SPACE
    assert service.indexes.get("old").multilingual() is not None
    assert service.indexes.get("old", "production").multilingual() is None
    assert all(_ask(service, "old", q)[0].qna.id == ids[i] for q, i in ZH_ASKED)
    assert service.upgrade_multilingual() == {}  # done once
    service.deploy("old", "production")
    assert service.indexes.get("old", "production").multilingual() is not None


def test_a_question_of_emoji_alone_is_not_given_the_chinese_qna_of_an_english_kb(tmp_path, embedder, encoder):
    """MiniLM reads an emoji as its unknown token, as it reads much Chinese text: "🙂" came out at cosine 0.9 and more
    with the one Chinese QnA of a mostly English KB, and was given it at 0.974.  A question with no letter or digit is
    read by its words alone (``analyze.unread_share``): none, so no answer; words beside an emoji still answer."""
    service = Service(SQLiteStore(tmp_path / "s.db"), embedder, encoder)
    ids = _kb(service, "mixed", [(["What are your opening hours?", "When are you open?"],
                                  "We open 9 to 5, Monday to Friday."),
                                 (["如何退货？"], "退货需要在30天内完成，并附上收据。"),
                                 (["How long does shipping take?"], "Shipping takes 3 to 5 business days.")])
    for question in ("🙂", "👍", "😀😀", "❤️", "?!"):
        assert all(a.qna is None or a.confidence < 0.5 for a in _ask(service, "mixed", question)), question
    assert _ask(service, "mixed", "opening hours 🙂")[0].qna.id == ids[0]
    assert _ask(service, "mixed", "如何退货 🙂")[0].qna.id == ids[1]
    texts = [("1", "退货需要在30天内完成，并附上收据。"), ("2", "We open 9 to 5, Monday to Friday.")]
    assert all(a.confidence < 0.5 for a in service.answer_from_text("🙂", texts))
    # a mostly CJK KB ranks such a question in the space, whose model reads emoji: it gave "🙂" the hours at 0.76
    ids = _kb(service, "cjk", [(["营业时间是几点？"], "我们每天上午9点到晚上9点营业。"), (["如何退货？"], "30天内可以退货。"),
                               (["ゴミの出し方は？"], "燃えるゴミは月曜日と木曜日です。"), (["Do you ship abroad?"], "Only to the EU.")])
    for question in ("🙂", "👍", "?!"):
        assert all(a.qna is None or a.confidence < 0.5 for a in _ask(service, "cjk", question)), question
    assert _ask(service, "cjk", "营业时间")[0].qna.id == ids[0]


def test_a_question_crossing_languages_is_ranked_on_both_models_vectors(service, encoder):
    """A KB with the space holds the universal sentence encoder's vectors beside E5's ("uq", "ua"): a question that
    crosses languages is ranked on both, each weighing half (a dot product there is the mean of the two models'
    cosines), and read with CROSSLINGUAL; a question in the KB's own language is ranked on E5's alone as before."""
    ids = _kb(service, "zh", ZH)
    index = service.indexes.get("zh", "test")
    question = "How many hours does the battery last?"
    space = service.query_space(index, question, project="zh")
    assert space.index is index.crossing() and space.calibration is calibrations.CROSSLINGUAL
    own = service.query_space(index, ZH_ASKED[0][0], project="zh")
    assert own.index is index.multilingual() and own.calibration is calibrations.MULTILINGUAL
    use = service.multilingual.use
    answers = [a for _, a in ZH]
    e5_cos = encoder.embed_passages(answers) @ encoder.embed([question])[0]
    use_cos = use.embed(answers) @ use.embed([question])[0]
    crossing = index.crossing()
    order = np.argsort(index.ids[crossing.a.rows])  # the answers in id order, as ``ids`` (ZH's order)
    got = (crossing.a.matrix @ space.embedder.embed([question])[0])[order]
    assert np.allclose(got, (e5_cos + use_cos) / 2, atol=2e-3)  # float16 storage
    assert _ask(service, "zh", question)[0].qna.id == ids[1]


class Counting:
    """An encoder that counts the texts it embeds."""

    def __init__(self, inner):
        self.inner, self.name, self.dim, self.reads_cjk, self.texts = inner, inner.name, inner.dim, True, 0

    def embed(self, texts):
        self.texts += len(texts)
        return self.inner.embed(texts)

    def embed_passages(self, texts):
        self.texts += len(texts)
        return self.inner.embed_passages(texts)


def test_a_kb_with_e5_s_vectors_alone_keeps_them_and_gains_the_encoder_s(tmp_path, embedder, encoder, capsys):
    """A store written before the universal sentence encoder's vectors joined E5's: its crossing questions are ranked
    on E5's with CROSSLINGUAL_E5 meanwhile, and ``upgrade_multilingual`` adds the encoder's without embedding anything
    with E5 again (a big CJK KB would wait minutes on it before the server listens)."""
    from openqna.cli import main
    from openqna.kb.writing import content_hash
    from openqna.ranking.multilingual import E5_ONLY, SPACE, hashed_space
    from openqna.store import StoredQnA, Unit

    store = SQLiteStore(tmp_path / "old.db")
    service = Service(store, embedder, encoder)
    ids = _kb(service, "old", ZH)
    old = service.store.list_qnas("old")
    vectors = service.store.get_vectors("old", [q.id for q in old])
    service.store.put_qnas("old", [StoredQnA(q, [
        Unit(field, ord_, analyze(q.questions[ord_] if field == "q" else q.answer) if field in ("q", "a") else [], v)
        for (field, ord_), v in vectors[q.id].items() if field not in ("uq", "ua")],
        content_hash(q, hashed_space(embedder.name, False) + "+" + E5_ONLY)) for q in old])
    project = service.store.get_project("old")
    project.settings[FILLED] = E5_ONLY
    service.store.update_project(project)
    service.deploy("old", "production")
    store.close()

    e5 = Counting(encoder)
    service = Service(SQLiteStore(tmp_path / "old.db"), embedder, e5)
    index = service.indexes.get("old")
    question = "How many hours does the battery last?"
    assert index.multilingual() is not None and index.crossing() is None
    space = service.query_space(index, question, project="old")
    assert space.index is index.multilingual() and space.calibration is calibrations.CROSSLINGUAL_E5
    assert _ask(service, "old", question)[0].qna.id == ids[1]
    e5.texts = 0
    main.upgrade_multilingual(service)  # as `openqna serve` does before it serves
    assert capsys.readouterr().err == (
        f"old: gave {len(ZH)} records the universal sentence encoder's vectors beside E5's in the multilingual space; "
        "deploy 'production' again to give it the new vectors (until then its questions in another language than "
        "its records' are ranked by E5's vectors alone)\n")
    assert e5.texts == 0  # E5's vectors kept
    assert service.store.get_project("old").settings[FILLED] == SPACE
    after = service.store.get_vectors("old", ids)
    assert all(np.array_equal(after[i][("mq", 0)], vectors[i][("mq", 0)]) for i in ids)
    assert {f for i in ids for f, _ in after[i]} == {"q", "a", "mq", "ma", "uq", "ua"}
    index = service.indexes.get("old")
    assert service.query_space(index, question, project="old").index is index.crossing() is not None
    assert service.upgrade_multilingual() == {}


def test_a_mostly_chinese_kb_reads_its_english_qnas_as_english(service):
    """An English question of a mostly Chinese KB crosses languages, but its few English QnAs are in the question's
    own language: they are ranked apart, as one language, and the lists merged.  Read across languages with the
    rest, "hello" got the English support QnA at 0.70 (the cross-lingual calibration reads a same-language cosine as
    a near match)."""
    ids = _kb(service, "zh", ZH + [(["How do I contact support?"], "Email support@example.com or call 555-0100."),
                                   (["Do you ship abroad?"], "We ship to 40 countries; delivery takes 7-14 days.")])
    support, abroad = ids[-2:]
    for question in ("hello", "thanks!", "tell me a joke", "what is the weather tomorrow?"):
        top = _ask(service, "zh", question)[0]
        assert top.qna is None or top.confidence < 0.5, (question, top.qna.answer, top.confidence)
    for question, right in (("how can I reach your support team?", support), ("international shipping", abroad),
                            ("How many hours does the battery last?", ids[1]), ("How do I contact support?", support)):
        top = _ask(service, "zh", question)[0]
        assert top.qna is not None and top.qna.id == right and top.confidence >= 0.5, (question, top.confidence)
        hits = service.search("zh", question, limit=3)  # the tools' and vector stores' search reads them so too
        assert hits[0].record.id == right and hits[0].score >= 0.5, (question, hits[0].score)
    assert all(h.score < 0.5 for h in service.search("zh", "hello", limit=3))


def test_question_only_across_languages_has_a_fit_of_its_own(service):
    """``rankerType: QuestionOnly`` drops the answer's terms, and CROSSLINGUAL weighs the answer's cosine 37.2 to the
    question's 6.3: every English question of the Chinese KB came out below 0.5 (0 of 10).  Read with
    CROSSLINGUAL_QUESTIONS, fitted on the stored questions alone."""
    ids = _kb(service, "zh", ZH)
    tops = [_ask(service, "zh", q, question_only=True)[0] for q in ZH_ASKED_IN_ENGLISH]
    right = [a.qna is not None and a.qna.id == ids[k] and a.confidence >= 0.5 for k, a in enumerate(tops)]
    assert sum(right) >= 8, [(q, a.confidence) for q, a, r in zip(ZH_ASKED_IN_ENGLISH, tops, right) if not r]
    for question in ("tell me a joke", "what is the weather tomorrow?", "who won the world cup?"):
        top = _ask(service, "zh", question, question_only=True)[0]
        assert top.qna is None or top.confidence < 0.5, (question, top.confidence)


def test_a_chinese_kb_written_without_the_space_gains_it_on_its_next_write(service, monkeypatch):
    """Under ``auto`` the share of CJK records counts the records a KB holds, not only those written: a Chinese KB of
    30 QnAs written under ``off`` gained nothing from one edit (one record of 30, under 5%) and stayed keyword-ranked
    for good; a large English KB still does not embed everything for its first Chinese QnA."""
    monkeypatch.setenv("OPENQNA_MULTILINGUAL", "off")
    qnas = [(list(q), a) for q, a in ZH] + [([f"{q[0]}（第{i}版）"], f"{a}（第{i}版）") for i in (2, 3) for q, a in ZH]
    ids = _kb(service, "zh", qnas)
    assert service.indexes.get("zh").multilingual() is None
    monkeypatch.setenv("OPENQNA_MULTILINGUAL", "auto")
    service.upsert("zh", [QnA(["保修期是多久？"], "所有设备自购买之日起提供两年有限保修。", id=ids[4])])
    assert service.store.get_project("zh").settings.get(FILLED)
    index = service.indexes.get("zh")
    assert index.multilingual() is not None and index.multilingual_units() == sum(len(q) + 1 for q, _ in qnas)



def test_reembed_keeps_the_vectors_a_record_s_hash_says_are_today_s(tmp_path, embedder, encoder, monkeypatch):
    """A Chinese KB with the space, one QnA then edited under ``off`` (the project's note says it lacks the space):
    ``openqna reembed`` under ``auto`` embeds with E5 that one QnA's texts only, not all 30 again (each record's
    hash says which vectors it holds)."""
    qnas = [(list(q), a) for q, a in ZH] + [([f"{q[0]}（第{i}版）"], f"{a}（第{i}版）") for i in (2, 3) for q, a in ZH]
    service = Service(SQLiteStore(tmp_path / "s.db"), embedder, Counting(encoder))
    ids = _kb(service, "zh", qnas)
    monkeypatch.setenv("OPENQNA_MULTILINGUAL", "off")
    service.upsert("zh", [QnA(["保修期是多久？"], "所有设备自购买之日起提供两年有限保修。", id=ids[4])])
    assert not service.store.get_project("zh").settings.get(FILLED)
    monkeypatch.setenv("OPENQNA_MULTILINGUAL", "auto")
    e5 = service.multilingual.embedder
    e5.texts = 0
    service.reembed("zh")
    assert e5.texts == 2  # the edited QnA's question and answer
    assert service.indexes.get("zh").crossing() is not None


def test_an_english_write_does_not_read_the_records_held_for_the_space(service, monkeypatch):
    """Counting the CJK records a KB holds reads every record's words (each write makes a new index version): only a
    write with CJK text, that its own records do not qualify, pays for it."""
    from openqna.kb import writing

    _kb(service, "en", [([f"How do I configure option {i}?"], f"Set option {i} in settings.") for i in range(30)])
    counted = []
    monkeypatch.setattr(writing, "cjk_text_rows", lambda index: counted.append(index.n) or np.zeros(index.n, bool))
    service.upsert("en", [QnA(["How do I reset it?"], "Press the reset button.")])
    assert counted == [] and not service.store.get_project("en").settings.get(FILLED)
    service.upsert("en", [QnA(["怎么重置？"], "按重置按钮。")])  # 1 of 32: the held records are counted, none CJK
    assert counted == [31] and not service.store.get_project("en").settings.get(FILLED)
