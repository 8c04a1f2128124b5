"""ask() semantics with the real model and the real SQLite store."""

from __future__ import annotations

import pytest

from openqna.filters.nodes import And, MetaEq, Or, SourceIn
from openqna.kb.service import AskRequest, SpanRequest
from openqna.records import Conflict, Dialog, KnowledgeBaseContent, Prompt, QnA


def surface_kb() -> KnowledgeBaseContent:
    return KnowledgeBaseContent(qnas=[
        QnA(["How long does it take to charge the battery?", "charging time"],
            "It takes two to four hours to charge the battery fully. Use the power supply that came with your Surface.",
            id=1, source="manual.pdf", metadata={"Category": "Power", "product": "Surface"},
            dialog=Dialog(False, [Prompt(0, 3, "Fast charging"), Prompt(1, 4, "Battery care")])),
        QnA(["How do I connect a second monitor?"], "Use the Mini DisplayPort to connect an external display.",
            id=2, source="manual.pdf", metadata={"category": "display"}),
        QnA(["Fast charging"], "The 65 W charger supports fast charging.", id=3, source="manual.pdf",
            metadata={"category": "power"}, dialog=Dialog(True, [])),
        QnA(["Battery care"], "Keep the battery between 20 and 80 percent to extend its life.", id=4,
            source="manual.pdf", metadata={"category": "power"}, dialog=Dialog(True, [])),
        QnA(["How do I reset my password?", "I forgot my password"], "Go to account settings and choose Reset password.",
            id=5, source="faq.tsv", metadata={"category": "account"}),
        QnA(["退货政策是什么？"], "购买后三十天内可以无理由退货。", id=6, source="faq-zh.tsv", metadata={"lang": "zh"}),
        QnA(["配送にはどのくらい時間がかかりますか？"], "通常、注文から三営業日以内にお届けします。", id=7, source="faq-ja.tsv",
            metadata={"lang": "ja"}),
    ], synonyms=[["monitor", "display", "screen"]])


@pytest.fixture(params=["exhaustive", "candidates"])
def kb(request, service, monkeypatch):
    """Every test below runs twice: scoring every record, and scoring candidates (as large KBs do)."""
    if request.param == "candidates":
        monkeypatch.setenv("OPENQNA_EXACT_SEARCH_MAX", "0")
    service.import_content("surface", surface_kb())
    return service


def ask(service, question=None, deployment="test", **kw):
    return service.ask("surface", deployment, AskRequest(question=question, **kw))


def test_paraphrase_finds_the_right_qna(kb):
    answers = ask(kb, "how many hours until my battery is full?", top=3)
    assert answers[0].qna.id == 1
    assert answers[0].confidence > 2 * answers[1].confidence
    assert answers[0].confidence >= answers[1].confidence >= answers[2].confidence
    close = ask(kb, "how long does it take to charge my battery", top=1)[0]
    assert close.qna.id == 1 and close.confidence > 0.5
    off_topic = ask(kb, "what is the capital of peru", top=1)[0]
    assert off_topic.confidence < answers[0].confidence


def test_exact_question_scores_one(kb):
    answers = ask(kb, "  HOW do I reset my password ", top=1)
    assert (answers[0].qna.id, answers[0].confidence) == (5, 1.0)


def test_off_topic_question_gets_one_default_answer_at_threshold(kb):
    answers = ask(kb, "what is the capital of peru", threshold=0.5)
    assert len(answers) == 1
    assert answers[0].qna is None and answers[0].confidence == 0.0
    assert answers[0].default_text == "No good match found in KB."


def test_top_and_threshold(kb):
    assert len(ask(kb, "battery", top=2)) == 2
    strict = ask(kb, "how long to charge the battery", top=5, threshold=0.9)
    assert all(a.confidence >= 0.9 for a in strict if a.qna)


def test_metadata_filter_is_case_insensitive(kb):
    answers = ask(kb, "battery", top=5, filter=MetaEq("CATEGORY", "POWER"))
    assert {a.qna.id for a in answers} == {1}  # 3 and 4 are context-only
    answers = ask(kb, "password", top=5, filter=Or((MetaEq("category", "account"), MetaEq("category", "display"))))
    assert {a.qna.id for a in answers} <= {2, 5} and answers[0].qna.id == 5


def test_source_and_combined_filters(kb):
    answers = ask(kb, "how do I charge", top=10, filter=SourceIn(("FAQ.tsv",)))
    assert {a.qna.id for a in answers} == {5}
    both = And((SourceIn(("manual.pdf",)), MetaEq("category", "display")))
    assert {a.qna.id for a in ask(kb, "charge", top=10, filter=both)} == {2}


def test_context_only_needs_context(kb):
    plain = ask(kb, "Fast charging", top=10)
    assert 3 not in {a.qna.id for a in plain if a.qna}
    followed = ask(kb, "Fast charging", top=3, previous_qna_id=1)
    assert followed[0].qna.id == 3 and followed[0].confidence == 1.0
    care = ask(kb, "how should I look after the battery", top=3, previous_qna_id=1)
    assert care[0].qna.id == 4


def test_qna_id_lookup(kb):
    answers = ask(kb, qna_id=4)
    assert answers[0].qna.id == 4 and answers[0].confidence == 1.0
    assert ask(kb, qna_id=999)[0].qna is None


def test_question_only_ignores_answer_text(kb):
    # "DisplayPort" appears only in the answer of QnA 2.
    default = ask(kb, "DisplayPort", top=1)
    question_only = ask(kb, "DisplayPort", top=1, question_only=True)
    assert default[0].qna.id == 2
    assert question_only[0].qna is None or question_only[0].confidence < default[0].confidence


def test_synonyms_expand_the_query(kb):
    with_syn = ask(kb, "connect a second screen", top=1)[0]
    kb.store.set_synonyms("surface", [])
    without = ask(kb, "connect a second screen", top=1)[0]
    assert with_syn.qna.id == 2
    assert with_syn.confidence > without.confidence


def test_synonyms_are_read_once_per_change_of_the_knowledge_base(kb, monkeypatch):
    reads = []
    read = kb.store.get_synonyms
    monkeypatch.setattr(kb.store, "get_synonyms", lambda *a: reads.append(a) or read(*a))
    for question in ("connect a second screen", "charging time", "connect a second display"):
        ask(kb, question, top=1)
    assert len(reads) == 1  # kept with the index
    kb.store.set_synonyms("surface", [])  # a new version: read again (test_synonyms_expand_the_query: and used)
    ask(kb, "connect a second screen", top=1)
    assert len(reads) == 2


def test_an_edit_reads_its_project_twice(kb, monkeypatch):
    """A write read the project three times (to plan it, then to note its embedder, then its multilingual space): a
    vector store writes once per file, each read parsing the project's settings.  The two after the write are one."""
    reads = []
    read = kb.store.get_project
    monkeypatch.setattr(kb.store, "get_project", lambda name: reads.append(name) or read(name))
    kb.upsert("surface", [QnA(["Is there parking?"], "Behind the building.", source="editorial")], match_content=False)
    assert reads == ["surface", "surface"]
    assert kb.store.get_project("surface").embedder == kb.embedder.name


def test_a_question_reads_only_its_own_words_against_the_synonyms(kb, monkeypatch):
    """The groups' members are read for matching once per index version (``Synonyms``): among 1,000 groups, each
    question worked every member's key out again (about 30 ms a question, ten times the rest of ``ask``)."""
    from openqna.index import analyze

    kb.store.set_synonyms("surface", [["monitor", "display", "screen"]] +
                          [[f"word{i}", f"同义词{i}", f"phrase number {i}"] for i in range(1000)])
    ask(kb, "connect a second screen", top=1)  # reads the groups
    read: list[str] = []
    key = analyze.synonym_key
    monkeypatch.setattr(analyze, "synonym_key", lambda text: read.append(text) or key(text))
    assert ask(kb, "connect a second screen", top=1)[0].qna.id == 2
    assert ask(kb, "connect a second monitor", top=1)[0].qna.id == 2
    assert read == ["connect a second screen", "connect a second monitor"]


def test_synonyms_never_lower_an_exact_match(service):
    service.import_content("hours", KnowledgeBaseContent(qnas=[
        QnA(["What are your opening hours?"], "We are open 9 to 5, Monday to Friday.", id=1),
        QnA(["Where are you?"], "At 1 Main Street.", id=2)]))
    asked = AskRequest(question="What are your opening hours?", top=1)
    paraphrase = AskRequest(question="what are your business hours", top=1)
    assert service.ask("hours", "test", asked)[0].confidence == 1.0
    before = service.ask("hours", "test", paraphrase)[0]
    service.store.set_synonyms("hours", [["opening hours", "business hours"]])
    assert service.ask("hours", "test", asked)[0].confidence == 1.0
    after = service.ask("hours", "test", paraphrase)[0]
    assert after.qna.id == before.qna.id == 1 and after.confidence > before.confidence


def test_chinese_and_japanese_questions_without_spaces(kb):
    zh = ask(kb, "你们的退货政策", top=1)[0]
    ja = ask(kb, "配送の時間", top=1)[0]
    assert zh.qna.id == 6 and ja.qna.id == 7


def test_answer_span_is_the_short_answer_in_the_best_sentence(kb):
    answers = ask(kb, "how long does charging take", top=1, span=SpanRequest(0.0, 1))
    span = answers[0].span
    assert span is not None and span.text == "two to four hours"
    assert answers[0].qna.answer[span.offset : span.offset + span.length] == span.text


def test_production_is_a_copy(kb):
    kb.deploy("surface", "production")
    kb.upsert("surface", [QnA(["How do I reset my password?"], "Call support.", id=5, source="faq.tsv")])
    assert ask(kb, "How do I reset my password?", top=1)[0].qna.answer == "Call support."
    prod = ask(kb, "How do I reset my password?", deployment="production", top=1)[0]
    assert prod.qna.answer == "Go to account settings and choose Reset password."


def test_import_twice_changes_nothing(kb):
    version = kb.store.version("surface")
    report = kb.import_content("surface", surface_kb())
    assert (report.added, report.updated, report.unchanged) == (0, 0, 7)
    assert kb.store.version("surface") == version


def test_upsert_matches_by_source_and_answer(kb):
    report = kb.upsert("surface", [QnA(["forgot password?", "I forgot my password"],
                                       "Go to account settings and choose Reset password.", source="faq.tsv")])
    assert (report.added, report.updated) == (0, 1)
    assert kb.store.get_qnas("surface", [5])[5].questions == ["forgot password?", "I forgot my password"]


def test_mixing_embedders_is_refused_until_reembedded(kb):
    project = kb.store.get_project("surface")
    project.embedder = "openai:some-other-model"
    kb.store.update_project(project)
    with pytest.raises(Conflict, match="reembed"):
        kb.upsert("surface", [QnA(["x"], "y")])
    with pytest.raises(Conflict, match="reembed"):
        ask(kb, "how do I reset my password")
    assert ask(kb, qna_id=5)[0].qna.id == 5  # a lookup by id compares no vectors
    assert kb.reembed("surface") == 7
    assert kb.store.get_project("surface").embedder == kb.embedder.name
    assert ask(kb, "How do I reset my password?", top=1)[0].qna.id == 5


def test_a_server_of_another_model_says_how_to_serve_the_project_or_re_embed_it(kb, monkeypatch):
    """After `openqna reembed` with another model, a server still started with the old one was told to re-embed the
    project with the old model, which undoes the re-embed: it names the project's model to serve it with as well,
    as an OPENQNA_EMBEDDER value for a bundled one, whichever way the two differ."""
    from openqna.kb.service import Service
    from openqna.models.embedder import get_embedder

    monkeypatch.setenv("OPENQNA_MULTILINGUAL", "off")
    other = Service(kb.store, get_embedder("hash"))  # the same store, served with another bundled model
    with pytest.raises(Conflict) as refused:  # built with the default, asked of a server of the other
        other.ask("surface", "test", AskRequest(question="How do I reset my password?"))
    assert "(start the server with OPENQNA_EMBEDDER=local)" in str(refused.value)
    assert "(`OPENQNA_EMBEDDER=hash openqna reembed surface`" in str(refused.value)
    other.reembed("surface")  # moved to the other model: the default's server is now the old one
    with pytest.raises(Conflict) as refused:
        ask(kb, "How do I reset my password?")
    assert "(start the server with OPENQNA_EMBEDDER=hash)" in str(refused.value)
    assert "(`OPENQNA_EMBEDDER=local openqna reembed surface`" in str(refused.value)
    assert other.ask("surface", "test", AskRequest(question="How do I reset my password?", top=1))[0].qna.id == 5
    project = kb.store.get_project("surface")
    project.embedder = "openai:text-embedding-3-small"  # an endpoint's model is no OPENQNA_EMBEDDER value alone
    kb.store.update_project(project)
    with pytest.raises(Conflict, match="OPENQNA_EMBEDDER=openai and OPENQNA_EMBEDDINGS_MODEL=text-embedding-3-small"):
        ask(kb, "How do I reset my password?")


def test_each_bundled_model_is_named_by_its_openqna_embedder_value():
    from openqna.models.embedder import get_embedder, spec_named

    assert [spec_named(get_embedder(spec).name) for spec in ("local", "hash")] == ["local", "hash"]
    assert spec_named("openai:text-embedding-3-small") is None


def test_a_deployment_made_before_a_reembed_is_refused_until_deployed_again(kb):
    """`openqna reembed` re-embeds the live state alone: a deployment (and a kept version) made before it holds the
    old model's vectors, which were read against the new model's questions (a 500 when the widths differed, silently
    wrong confidences when not).  They are refused with what to do; a deploy makes the deployment servable again,
    and a rollback to a version from before is refused."""
    from openqna.kb.catalog import DEPLOYED_WITH

    kb.deploy("surface", "production")  # version 1
    project = kb.store.get_project("surface")
    project.embedder = "openai:some-other-model"  # as if built, and deployed, by another model
    kb.store.update_project(project)
    assert kb.reembed("surface") == 7
    assert ask(kb, "How do I reset my password?", top=1)[0].qna.id == 5  # test: re-embedded
    with pytest.raises(Conflict, match="deploy the project to 'production' again"):
        kb.ask("surface", "production", AskRequest(question="How do I reset my password?"))
    with pytest.raises(Conflict, match="from before the project was re-embedded") as refused:
        kb.deploy("surface", "staging", version=1)
    assert refused.value.target == "version" and not kb.has_deployment("surface", "staging")
    kb.deploy("surface", "production")
    assert DEPLOYED_WITH not in kb.store.get_project("surface").settings or \
        "production" not in kb.store.get_project("surface").settings[DEPLOYED_WITH]
    answers = kb.ask("surface", "production", AskRequest(question="How do I reset my password?", top=1))
    assert answers[0].qna.id == 5


def test_query_text_ranks_passages(service):
    records = [("doc1", "Power and charging. It takes two to four hours to charge the battery fully."),
               ("doc2", "You can use the USB port to connect accessories such as a mouse.")]
    answers = service.answer_from_text("How long does it take to charge?", records)
    assert answers[0].record_id == "doc1"
    assert "two to four hours" in answers[0].text
    text = dict(records)["doc1"]
    assert text[answers[0].offset : answers[0].offset + answers[0].length] == answers[0].text
    assert answers[0].span is not None and "hours" in answers[0].span.text
    assert answers == sorted(answers, key=lambda a: -a.confidence)


def test_query_text_confidence_is_calibrated(service):
    """calibrations.QUERY_TEXT (XQuAD dev): a passage that answers reads above 0.5, an off-topic question far below."""
    records = [("doc1", "Power and charging. It takes two to four hours to charge the battery fully."),
               ("doc2", "You can use the USB port to connect accessories such as a mouse.")]
    mouse = service.answer_from_text("how do I connect a mouse", records)
    assert mouse[0].record_id == "doc2" and mouse[0].confidence > 0.5 > mouse[1].confidence
    assert all(a.confidence < 0.05 for a in service.answer_from_text("what is the capital of peru", records))


def test_query_text_cuts_a_sentence_longer_than_a_passage(service):
    """A record without full stops was one passage, so the answer was the whole record (4,899 characters for a
    question about one clause of it); passages are at most 400 characters now, cut at a space."""
    from openqna.kb.service import passages_of

    rooms = ", ".join(f"room {i} on floor {i % 9} is open to guests from {i % 12 + 1} am" for i in range(40))
    text = f"{rooms}, and the kitchen closes at ten pm, {rooms}"
    assert all(e - s <= 400 and not text[s].isspace() and not text[e - 1].isspace() for s, e in passages_of(text))
    best = service.answer_from_text("when does the kitchen close?", [("hotel", text)])[0]
    assert "kitchen closes at ten pm" in best.text and best.length <= 400
    assert text[best.offset: best.offset + best.length] == best.text
    cjk = "电池需要两到四个小时才能充满电" * 40  # no space to cut at
    assert [e - s for s, e in passages_of(cjk)] == [400, 200]


def test_query_text_embeds_a_bounded_shortlist(service, monkeypatch):
    """Issue 40: records at Azure's limits hold ~85 passages, and embedding each cost ~3 s of CPU a request; only
    the LIMITS.text_passages that share the most words with the question are embedded now, and an answer at the end
    of the last record is still found."""
    from openqna.formats.limits import LIMITS

    filler = " ".join(f"Pump {i} in wing {i % 7} is serviced by crew {i % 5} every {i % 9 + 2} weeks."
                      for i in range(400))
    answer = "The battery takes two to four hours to charge fully."
    records = [(f"r{n}", filler[n * 900:][: LIMITS.text_record_chars]) for n in range(LIMITS.text_records)]
    records[-1] = ("r4", records[-1][1][: LIMITS.text_record_chars - len(answer) - 1] + " " + answer)
    assert all(len(text) <= LIMITS.text_record_chars for _, text in records)
    embedded: list[int] = []
    embed = service.embedder.embed
    monkeypatch.setattr(service.embedder, "embed", lambda texts: embedded.append(len(texts)) or embed(texts))
    best = service.answer_from_text("How long does it take to charge the battery?", records)[0]
    assert (best.record_id, answer in best.text) == ("r4", True)
    assert embedded[0] == 1 + LIMITS.text_passages  # the question and the shortlist, of 60 passages and more
    # a question the model reads none of is ranked by its words alone: nothing to embed
    embedded.clear()
    chinese = [("zh", "电池需要两到四个小时才能充满电。鼠标可以连接到USB端口。")]
    best = service.answer_from_text("电池充满电需要多长时间？", chinese, span=False)[0]
    assert "两到四个小时" in best.text and embedded == []


# -- import/export round trips through the store, on the real files -------------------------
from conftest import SAMPLE_DOCS, SHARED_DATA  # noqa: E402

ROUND_TRIP_FILES = sorted(
    [p for p in (SAMPLE_DOCS / "knowledge-bases").iterdir() if p.suffix in (".tsv", ".xlsx", ".zip")]
    + [p for p in (SAMPLE_DOCS / "data-source-formats").iterdir() if p.suffix == ".xlsx"]
    + list((SHARED_DATA / "ms-qna-chitchat").glob("qna_chitchat_*.tsv"))
    + list((SHARED_DATA / "ms-qna-chitchat" / "legacy-2018-05").glob("*.tsv"))
)


def _contents(service, project):
    return [(q.id, q.questions, q.answer, q.source, q.metadata, q.dialog, q.suggested_questions)
            for q in service.store.list_qnas(project)], service.store.get_synonyms(project)


@pytest.mark.parametrize("path", ROUND_TRIP_FILES, ids=lambda p: p.name)
@pytest.mark.parametrize("fmt", ["tsv", "excel", "json"])
def test_export_then_import_gives_back_the_same_kb(service, path, fmt):
    from openqna.formats import export_bytes, read_file

    service.import_content("original", read_file(path))
    content = KnowledgeBaseContent(service.store.list_qnas("original"), service.store.get_synonyms("original"))
    data, filename, _ = export_bytes(content, fmt)
    copy = read_file(filename, data)
    if fmt == "tsv" and content.synonyms:  # a TSV file holds QnAs or synonyms, never both
        copy.synonyms = read_file("synonyms.tsv", export_bytes(content, "tsv", "synonyms")[0]).synonyms
    service.import_content("copy", copy)
    assert _contents(service, "copy") == _contents(service, "original")
    version = service.store.version("original")
    again = service.import_content("original", read_file(path))
    assert again.added == again.updated == 0
    assert service.store.version("original") == version


def test_a_filter_that_leaves_one_record_does_not_make_it_sure(kb):
    """The confidence's last step reads how far a record stands above its best rival; a lone record left by
    a filter has none, which once read as the widest gap and put a wrong answer above Bot Framework's 0.3."""
    alone = ask(kb, "how long does it take to charge the battery?", top=1, filter=MetaEq("category", "account"))
    assert alone[0].qna.id == 5 and alone[0].confidence < 0.3
    unfiltered = ask(kb, "how long does it take to charge the battery?", top=1)
    assert unfiltered[0].qna.id == 1 and unfiltered[0].confidence >= 0.9


def test_a_filter_restricts_the_answers_not_the_scale(kb):
    """The records a filter leaves out still count as rivals (a little lower): a question the filter's records do
    not answer gets no sure answer from them (it got 0.86 when they were read as the whole KB), and a right answer
    the filter leaves alone is as sure as without the filter (it fell to 0.40, with no rival to stand clear of)."""
    question = "I forgot my password, how do I reset it?"
    unfiltered = ask(kb, question, top=1)[0]
    assert unfiltered.qna.id == 5 and unfiltered.confidence >= 0.9
    for flt in (MetaEq("category", "display"), MetaEq("category", "power"), SourceIn(("manual.pdf",))):
        wrong = ask(kb, question, top=1, filter=flt)
        assert wrong[0].qna is None or wrong[0].confidence < 0.3, (flt, wrong[0])
    kept = ask(kb, question, top=1, filter=SourceIn(("faq.tsv",)))[0]  # the right answer and the FAQ's others
    alone = ask(kb, question, top=1, filter=MetaEq("category", "account"))[0]
    assert kept.qna.id == alone.qna.id == 5
    assert min(kept.confidence, alone.confidence) >= unfiltered.confidence - 0.05


def test_the_same_question_kept_for_another_tenant_is_no_rival(service, monkeypatch):
    """Metadata tells apart the answers a question gets for different tenants (or products, or audiences): a copy a
    filter leaves out does not take the confidence of the one it keeps, which is what it is when nothing the filter
    leaves out is a rival."""
    from openqna.ranking import regime

    tenants = [QnA(q.questions, q.answer + suffix, metadata={**q.metadata, "tenant": tenant}, source=q.source)
               for tenant, suffix in (("a", ""), ("b", " (tenant b)")) for q in surface_kb().qnas]
    service.import_content("tenants", KnowledgeBaseContent(qnas=tenants))
    questions = ("how many hours until my battery is full?", "I forgot my password", "second screen")

    def kept() -> list[tuple[str, float]]:
        return [(a.qna.answer, a.confidence) for a in
                (service.ask("tenants", "test", AskRequest(question=q, top=1, filter=MetaEq("tenant", "a")))[0]
                 for q in questions)]

    got = kept()
    assert all(not answer.endswith("(tenant b)") for answer, _ in got)
    monkeypatch.setattr(regime, "FILTERED_OUT", float("inf"))  # nothing the filter leaves out is a rival
    assert got == kept()
    monkeypatch.setattr(regime, "FILTERED_OUT", 0.0)  # the copies are no rivals whatever the discount
    assert got == kept()


def test_faq_pages_get_their_own_weights_and_intent_sets_keep_the_shipped_ones(service, monkeypatch):
    """An FAQ page that cannot adapt (one question per QnA) is ranked by ``calibrations.SPARSE``; a KB of QnAs with
    many questions keeps the weights fitted there even when it cannot adapt (too large, or adaptation off), and so
    does a document KB."""
    from openqna.ranking import calibrations, ranker

    monkeypatch.setenv("OPENQNA_KB_ADAPT", "0")
    kbs = {"faq": [QnA([f"question {i}"], f"answer {i}") for i in range(6)],
           "intents": [QnA([f"question {i}", f"other {i}", f"third {i}"], f"answer {i}") for i in range(6)],
           "docs": [QnA([f"question {i}"], f"answer {i}") for i in range(3)] + [QnA([], "a passage", kind="passage")]}
    for name, records in kbs.items():
        service.create_project(name)
        service.upsert(name, records)
    assert ranker.weights(service.indexes.get("faq")) is calibrations.CALIBRATION.sparse
    assert ranker.weights(service.indexes.get("intents")) is calibrations.CALIBRATION
    assert ranker.weights(service.indexes.get("docs")) is calibrations.CALIBRATION


def test_faq_pages_read_their_gap_with_weights_of_their_own(service, monkeypatch):
    """The last step knows an FAQ page (ranked by ``calibrations.SPARSE``) from an intent set and a document KB, and
    the same logit and gap say more on it (a right answer stands clear of fewer rivals on an FAQ page)."""
    import numpy as np

    from openqna.ranking import calibrations, regime

    monkeypatch.setenv("OPENQNA_KB_ADAPT", "0")
    kbs = {"faq": [QnA([f"question {i}"], f"answer {i}") for i in range(6)],
           "intents": [QnA([f"question {i}", f"other {i}", f"third {i}"], f"answer {i}") for i in range(6)],
           "docs": [QnA([f"question {i}"], f"answer {i}") for i in range(3)] + [QnA([], "a passage", kind="passage")]}
    seen: dict[str, float] = {}
    last_step = regime.RegimeTerms.of
    for name, records in kbs.items():
        service.create_project(name)
        service.upsert(name, records)

        def spy(self, *args, name=name, **kw):
            seen[name] = float(kw["faq_page"])
            return last_step(self, *args, **kw)

        monkeypatch.setattr(regime.RegimeTerms, "of", spy)
        service.ask(name, "test", AskRequest(question="question 1", top=1))
    assert seen == {"faq": 1.0, "intents": 0.0, "docs": 0.0}
    terms = calibrations.REGIME
    x = regime.inputs(np.array([1.0, -1.0]), np.array([True, True]), np.zeros(2, bool), np.zeros(2, bool))
    page = dict(x, faq_page=np.ones(2))
    assert terms.logit(page)[0] > terms.logit(x)[0]


@pytest.mark.parametrize("adapted,faq_page", [(False, False), (True, False), (False, True)])
def test_a_records_confidence_never_falls_as_its_own_logit_rises(adapted, faq_page):
    """On every kind of KB the shipped last step is increasing in a record's own logit (through its logit, gap and
    share), so it never reorders the records it reads and a better match is never less confident."""
    import numpy as np

    from openqna.ranking import calibrations, regime

    rng = np.random.default_rng(3)
    for _ in range(200):
        logit = rng.normal(0, 3, 8)
        allowed = np.ones(8, bool)
        kinds = np.zeros(8, bool)

        def final(z: np.ndarray) -> float:
            return float(calibrations.REGIME.logit(regime.inputs(z, allowed, kinds, kinds, adapted=adapted,
                                                                 faq_page=faq_page, records=50, rival=-2.0))[0])

        higher = logit.copy()
        higher[0] += rng.uniform(0.01, 2.0)
        assert final(higher) >= final(logit) - 1e-9


def test_shares_count_none_of_these():
    import numpy as np

    from openqna.ranking import regime

    # a lone candidate holds all the mass without a rival, and only part of it beside "none of these"
    assert regime.shares(np.array([-2.0]), np.array([True])).tolist() == [0.0]
    assert regime.shares(np.array([-2.0]), np.array([True]), rival=-2.0)[0] == pytest.approx(np.log(0.5))
    both = regime.shares(np.array([1.0, 1.0, 9.0]), np.array([True, True, False]), rival=None)
    assert both[:2] == pytest.approx([np.log(0.5)] * 2)  # a candidate the filter left out is no rival


def test_lone_candidates_have_no_gap():
    import numpy as np

    from openqna.ranking import regime

    assert regime.gaps(np.array([2.0]), np.array([True])).tolist() == [0.0]
    assert regime.gaps(np.array([2.0, 5.0]), np.array([True, False])).tolist() == [0.0, 0.0]
    assert regime.gaps(np.array([2.0, 1.0, -9.0]), np.array([True, True, True])).tolist() == [1.0, -1.0, -4.0]


def test_gaps_match_the_full_sort_they_replaced():
    """The best and runner-up found without sorting give the gaps a stable sort gave, ties and filters included."""
    import numpy as np

    from openqna.ranking import regime

    def by_sorting(logit: np.ndarray, allowed: np.ndarray) -> np.ndarray:
        z = np.where(allowed, logit, -np.inf)
        if len(z) < 2 or allowed.sum() < 2:
            return np.zeros(len(z), np.float64)
        order = np.argsort(-z, kind="stable")
        other = np.where(np.arange(len(z)) == order[0], z[order[1]], z[order[0]])
        return np.clip(np.where(allowed, logit - other, -regime.GAP_CLIP), -regime.GAP_CLIP, regime.GAP_CLIP)

    rng = np.random.default_rng(7)
    for trial in range(500):
        n = int(rng.integers(1, 40))
        ties = trial % 2 == 0  # whole numbers: equal logits, the best shared by several candidates
        logit = (rng.integers(-3, 3, n) if ties else rng.standard_normal(n)).astype(np.float32)
        allowed = rng.random(n) < 0.7
        assert np.array_equal(regime.gaps(logit, allowed), by_sorting(logit, allowed))


def test_answer_informativeness_tells_chit_chat_from_paragraphs(service):
    """A KB's answers that say nothing of their questions ("Hi!") read near 0; paragraphs written about their
    question near 1 (``ranker.answer_informativeness``, which the FAQ-page weights read the answer in proportion to)."""
    from openqna.ranking import ranker

    chat = [QnA(["Good morning"], "Hi!"), QnA(["Are you a robot?"], "I'm here for you."),
            QnA(["Tell me a joke"], "Sorry, I don't know any."), QnA(["What's your name?"], "I don't have one."),
            QnA(["Do you love me?"], "That's sweet."), QnA(["Where do you live?"], "Here.")]
    facts = [QnA(["When was the Eiffel Tower built?"], "The Eiffel Tower was built from 1887 to 1889 in Paris."),
             QnA(["How tall is Mount Everest?"], "Mount Everest is 8,849 metres tall, the highest mountain."),
             QnA(["Who wrote Hamlet?"], "Hamlet is a tragedy written by William Shakespeare around 1600."),
             QnA(["What do bees make?"], "Bees make honey from the nectar of flowers and store it in combs."),
             QnA(["How many legs does a spider have?"], "A spider has eight legs and two body segments."),
             QnA(["What is the boiling point of water?"], "Water boils at 100 degrees Celsius at sea level.")]
    for name, records in (("chat", chat), ("facts", facts)):
        service.create_project(name)
        service.upsert(name, records)
    chatty, factual = (ranker.answer_informativeness(service.indexes.get(n)) for n in ("chat", "facts"))
    assert chatty <= 0.5 < factual == 1.0
    assert ranker.answer_informativeness(service.indexes.get("facts")) == factual  # once per index version


def test_faq_page_weights_read_both_cosines_and_the_answer_by_informativeness():
    """``Calibration.logit``'s FAQ-page terms, by hand: dense alone over both fields, and the answer features again
    times the KB's informativeness; a question-only logit reads only the question side."""
    from types import SimpleNamespace

    import numpy as np

    from openqna.ranking.calibrations import Calibration

    c = Calibration(w_qsim=1.0, w_asim=2.0, w_qcov=0.0, w_acov=3.0, w_qmean=0.0, w_qcent=0.0, w_bm25=0.5, w_dmax=4.0,
                    w_asim_informative=10.0, w_acov_informative=20.0, w_bm25_informative=30.0, typical=None, context_boost=1.0, scale=0.681, shift=5.037)
    f = SimpleNamespace(qsim=np.array([0.5, 0.2]), asim=np.array([0.1, 0.6]), qcov=np.zeros(2),
                        acov=np.array([0.0, 0.5]), bm25=np.array([0.0, 0.4]), qmean=np.zeros(2), qcent=np.zeros(2))
    plain = 1.0 * f.qsim + 2.0 * f.asim + 3.0 * f.acov + 0.5 * f.bm25 + 4.0 * np.maximum(f.qsim, f.asim)
    assert c.logit(f) == pytest.approx(plain)
    assert c.logit(f, informative=0.5) == pytest.approx(plain + 0.5 * (10.0 * f.asim + 20.0 * f.acov + 30.0 * f.bm25))
    assert c.logit(f, question_only=True, informative=0.5) == pytest.approx(1.0 * f.qsim + 0.5 * f.bm25 + 4.0 * f.qsim)


def test_a_misspelt_word_still_matches(service, monkeypatch):
    """"how do i strat the sever?" once ranked "create an API key" first (0.26): a word the KB does not hold is read
    as its word one edit away (``ranking.typos``); words the KB holds, short words and stop words are left alone,
    and with the setting off nothing is corrected."""
    from conftest import REPO
    from openqna.formats import read_file
    from openqna.ranking import typos

    service.import_content("sample", read_file(REPO / "src" / "openqna" / "samples" / "openqna-faq.tsv"))
    index = service.indexes.get("sample")
    assert typos.correct(index, "how do i strat the sever?") == "how do i start the sever?"  # "sever": "several"
    assert typos.correct(index, "does it need an internat connection") == "does it need an internet connection"
    assert typos.correct(index, "tell me a joke") == "tell me a joke"  # no KB word one edit away
    assert typos.correct(index, "play the server") == "play the server"
    top = service.ask("sample", "test", AskRequest(question="how do i strat the sever?", top=1))[0]
    assert top.qna.id == 2 and top.confidence >= 0.5
    monkeypatch.setenv("OPENQNA_TYPO_TOLERANCE", "0")
    assert typos.correct(index, "how do i strat the sever?") == "how do i strat the sever?"


def test_a_chinese_character_typed_as_a_homophone_still_matches(service, monkeypatch):
    """Chinese is typed through pinyin, so its typos are homophones: "咯学" for the KB's "咯血" (both "ka xue"), "能哺能"
    for "能不能".  Such a character is read as the KB's (``typos.correct_homophones``); a character that makes a word
    of the language as typed, one whose replacement would make no word of two characters or more ("哪些事" is not
    "哪些是" for the KB's "这些是"), and Japanese text are left as they are."""
    from openqna.ranking import typos

    service.create_project("zh")
    service.upsert("zh", [
        QnA(["咯血和呕血有什么区别？"], "咯血是呼吸道出血，呕血是消化道出血。"),
        QnA(["小孩吃了百令胶囊能不能打预防针？"], "可以，但最好间隔三天。"),
        QnA(["乙酰半胱氨酸颗粒有哪些副作用？"], "这些是常见的副作用：恶心和皮疹。"),
        QnA(["感冒要几天才能好？"], "一般一周左右。"),
        QnA(["肺炎会传染吗？"], "细菌性肺炎一般不传染。"),
        QnA(["孩子发烧怎么办？"], "多喝水，体温超过三十八度五时就医。")])
    index = service.indexes.get("zh")
    assert typos.correct(index, "咯学和呕血有什么区别") == "咯血和呕血有什么区别"
    assert typos.correct(index, "小孩吃了百令胶囊能哺能打预防针") == "小孩吃了百令胶囊能不能打预防针"
    assert typos.correct(index, "依酰半胱氨酸颗粒的副作用大吗") == "乙酰半胱氨酸颗粒的副作用大吗"
    assert typos.correct(index, "哮喘平时要注意哪些事") == "哮喘平时要注意哪些事"
    assert typos.correct(index, "咯学のことを教えて") == "咯学のことを教えて"
    typed = service.ask("zh", "test", AskRequest(question="咯学和呕血有什么区别？", top=1))[0]
    monkeypatch.setenv("OPENQNA_TYPO_TOLERANCE", "0")
    assert typos.correct(index, "咯学和呕血有什么区别") == "咯学和呕血有什么区别"
    as_typed = service.ask("zh", "test", AskRequest(question="咯学和呕血有什么区别？", top=1))[0]
    assert typed.qna.id == 1 and typed.confidence > as_typed.confidence  # the question it was meant to be


def test_a_japanese_word_in_the_other_kana_still_matches(service, monkeypatch):
    """Japanese writes a word in hiragana or katakana by habit ("ごみ" and "ゴミ"), and the analyzer's character bigrams
    read the two as different terms.  A kana word the KB does not hold is read as the KB writes it
    (``typos.correct_kana``), in both directions; grammar that spells a KB word ("どんな" and "ドン"), the KB's own
    words and its particles are left alone."""
    from openqna.store.base import LIVE

    service.create_project("ja")
    service.upsert("ja", [
        QnA(["粗大ゴミの出し方を教えてください"], "粗大ゴミは収集日の三日前までに電話で予約してください。"),
        QnA(["りんごの苗木はどこで買えますか"], "市役所の緑化センターで四月から販売します。"),
        QnA(["住民票の写しはどこで取れますか"], "市役所の窓口かコンビニエンスストアで取れます。"),
        QnA(["図書館の開館時間は何時からですか"], "午前九時から午後七時までです。ドン・キホーテの前です。"),
        QnA(["パスポートの申請に必要なものは何ですか"], "申請書と戸籍謄本と写真が必要です。")])

    def read(question: str) -> str:
        return service.read_as("ja", LIVE, question)

    assert read("粗大ごみの出し方") == "粗大ゴミの出し方"
    assert read("家庭のごみは何曜日") == "家庭のゴミは何曜日"
    assert read("ぱすぽーとの申請") == "パスポートの申請"
    assert read("リンゴの苗木を買いたい") == "りんごの苗木を買いたい"
    assert read("どんな書類が必要ですか") == "どんな書類が必要ですか"  # "どん" is no word here, though "ドン" is one
    assert read("そだいごみ") == "そだいごみ"  # "ごみ" inside a run of hiragana: not read as a word
    assert read("図書館は何時からですか") == "図書館は何時からですか"
    assert read("コンビニエンスストアで取れますか") == "コンビニエンスストアで取れますか"
    typed = service.ask("ja", "test", AskRequest(question="粗大ごみの出し方は？", top=1))[0]
    monkeypatch.setenv("OPENQNA_TYPO_TOLERANCE", "0")
    assert read("粗大ごみの出し方") == "粗大ごみの出し方"
    as_typed = service.ask("ja", "test", AskRequest(question="粗大ごみの出し方は？", top=1))[0]
    assert typed.qna.id == 1 and typed.confidence > as_typed.confidence
