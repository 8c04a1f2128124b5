"""Documents as sources: every sample file ingests, answers cite their page, refresh re-embeds only changes."""

from __future__ import annotations

import httpx
import pytest
from azure.ai.language.questionanswering.authoring import AuthoringClient
from azure.core.credentials import AzureKeyCredential
from azure.core.exceptions import HttpResponseError

from conftest import SAMPLE_DOCS
from openqna.ingest import parse_document
from openqna.kb.documents import ingest_document
from openqna.kb.service import AskRequest
from test_cli import run

MANUAL = SAMPLE_DOCS / "data-source-formats" / "product-manual.pdf"
GUIDE = """# Widget guide

## Charging

Charge the widget for two hours before first use. The light turns green when it is full.

## Cleaning

Wipe the widget with a dry cloth. Never put it in water.

## Warranty

The widget has a two-year warranty from the date of purchase.
"""


@pytest.fixture(scope="module")
def surface(tmp_path_factory, embedder):
    from openqna.kb.service import Service
    from openqna.store.sqlite import SQLiteStore

    service = Service(SQLiteStore(tmp_path_factory.mktemp("surface")), embedder)
    report = ingest_document(service, "surface", parse_document(MANUAL.name, MANUAL.read_bytes()))
    assert report.pages == 33 and report.qnas > 50 and report.passages > 50
    return service


@pytest.mark.parametrize("include_passages", [False, True])
def test_charging_question_cites_the_manual_page(surface, include_passages):
    answers = surface.ask("surface", "test", AskRequest(question="How long does it take to charge the battery?",
                                                        top=3, include_unstructured=include_passages))
    top = answers[0].qna
    assert "two to four hours" in top.answer
    assert top.source == "product-manual.pdf" and top.metadata["page"] == "11"
    kinds = {a.qna.kind for a in answers}
    assert kinds == {"qna"} if not include_passages else "passage" in kinds


def test_manual_headings_become_multi_turn_prompts(surface):
    [power] = [q for q in surface.store.list_qnas("surface") if q.questions == ["Power and charging"]
               and q.kind == "qna"]
    prompts = {p.display_text: p.qna_id for p in power.dialog.prompts}
    assert "Make your battery last" in prompts
    target = surface.store.get_qnas("surface", [prompts["Make your battery last"]])[prompts["Make your battery last"]]
    assert target.questions == ["Make your battery last"]
    follow = surface.ask("surface", "test", AskRequest(question="Make your battery last", previous_qna_id=power.id))
    assert follow[0].qna.id == target.id and follow[0].confidence == 1.0


def test_reingesting_the_same_document_changes_nothing(surface):
    version = surface.store.version("surface")
    report = ingest_document(surface, "surface", parse_document(MANUAL.name, MANUAL.read_bytes()))
    assert (report.added, report.updated, report.deleted, report.embedded) == (0, 0, 0, 0)
    assert surface.store.version("surface") == version


def test_changed_section_re_embeds_only_that_section(service):
    first = ingest_document(service, "w", parse_document("guide.md", GUIDE.encode()))
    assert (first.qnas, first.passages, first.embedded) == (3, 3, 12)
    ids_before = {(q.kind, q.questions[0]): q.id for q in service.store.list_qnas("w")}
    changed = GUIDE.replace("Never put it in water.", "Never put it in water or the dishwasher.")
    report = ingest_document(service, "w", parse_document("guide.md", changed.encode()))
    # the Cleaning QnA's answer (1 text) and the Cleaning passage (title and text): nothing else
    assert report.embedded == 3 and report.unchanged == 4
    after = {(q.kind, q.questions[0]): q for q in service.store.list_qnas("w")}
    assert after[("qna", "Cleaning")].id == ids_before[("qna", "Cleaning")]
    assert "dishwasher" in after[("qna", "Cleaning")].answer and "dishwasher" in after[("passage", "Cleaning")].answer
    removed = changed.replace("## Warranty\n\nThe widget has a two-year warranty from the date of purchase.\n", "")
    report = ingest_document(service, "w", parse_document("guide.md", removed.encode()))
    assert report.deleted == 2 and report.embedded == 0
    assert {k for k in ((q.kind, q.questions[0]) for q in service.store.list_qnas("w"))} == \
        {("qna", "Charging"), ("qna", "Cleaning"), ("passage", "Charging"), ("passage", "Cleaning")}


@pytest.mark.slow
def test_every_sample_file_imports_through_the_cli(tmp_path):
    files = sorted(p for folder in ("data-source-formats", "knowledge-bases") for p in (SAMPLE_DOCS / folder).iterdir()
                   if p.suffix.lower() in (".pdf", ".docx", ".xlsx", ".tsv"))
    assert len(files) >= 20
    out = run("import", "samples", *map(str, files), data=tmp_path).stdout
    for f in files:
        if f.suffix in (".pdf", ".docx"):
            assert f"{f.name}: " in out
    listed = run("sources", "samples", data=tmp_path).stdout
    for f in files:
        if f.suffix in (".pdf", ".docx"):
            line = next(l for l in listed.splitlines() if l.startswith(f.name + "\t"))
            assert "passages" in line and "\t0 passages" not in line, line


def test_document_url_source_through_the_api(live, files):
    (files.root / "guide.md").write_text(GUIDE, encoding="utf-8")
    (files.root / "page").mkdir()
    (files.root / "page" / "index.html").write_text(
        "<html><body><nav>Home | Shop | Cart</nav><main><h1>Returns</h1><p>You can return any widget within 30 days"
        " for a full refund.</p></main><footer>Copyright Widget Co</footer></body></html>", encoding="utf-8")
    authoring = AuthoringClient(live.url, AzureKeyCredential("k"))
    assert _create(live)
    sources = list(authoring.begin_update_sources("docs", [
        {"op": "add", "value": {"displayName": "Guide", "sourceUri": f"{files.url}/guide.md", "sourceKind": "url"}},
        {"op": "add", "value": {"displayName": "Returns", "sourceUri": f"{files.url}/page/", "sourceKind": "url"}},
    ]).result())
    assert {s["displayName"] for s in sources} == {"Guide", "Returns"}
    qa = lambda question, passages: httpx.post(  # noqa: E731
        live.url + "/language/:query-knowledgebases",
        params={"projectName": "docs", "deploymentName": "test", "api-version": "2023-04-01"},
        json={"question": question, "top": 1, "includeUnstructuredSources": passages}).json()["answers"][0]
    returns = qa("how many days do I have to return a widget?", True)
    assert "30 days" in returns["answer"] and returns["source"] == f"{files.url}/page/"
    assert "Shop" not in returns["answer"] and "Copyright" not in returns["answer"]
    (files.root / "guide.md").write_text(GUIDE.replace("two hours", "three hours"), encoding="utf-8")
    authoring.begin_update_sources("docs", [{"op": "replace", "value": {
        "displayName": "Guide", "sourceUri": f"{files.url}/guide.md", "sourceKind": "url", "refresh": True}}]).result()
    assert "three hours" in qa("how long should I charge the widget first?", False)["answer"]


def test_document_url_without_a_suffix_is_read_by_its_content(live, files):
    """A download link (``/download/manual``) or a short link that redirects names no suffix: a PDF or a Word
    document behind it is read by what its bytes are, as a web page already was."""
    (files.root / "download").mkdir()
    (files.root / "download" / "paper").write_bytes((SAMPLE_DOCS / "data-source-formats" / "white-paper.pdf")
                                                    .read_bytes())
    (files.root / "download" / "word").write_bytes((SAMPLE_DOCS / "data-source-formats" / "structured.docx")
                                                   .read_bytes())
    authoring = AuthoringClient(live.url, AzureKeyCredential("k"))
    assert _create(live)
    authoring.begin_update_sources("docs", [
        {"op": "add", "value": {"displayName": name, "sourceUri": f"{files.url}/download/{name}", "sourceKind": "url"}}
        for name in ("paper", "word")]).result()
    sources = {q.source for q in live.service.store.list_qnas("docs")}
    assert sources == {f"{files.url}/download/paper", f"{files.url}/download/word"}
    (files.root / "download" / "logo").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    with pytest.raises(HttpResponseError) as failed:  # the job fails; its error lists documents too
        authoring.begin_update_sources("docs", [{"op": "add", "value": {
            "displayName": "logo", "sourceUri": f"{files.url}/download/logo", "sourceKind": "url"}}]).result()
    assert "unsupported file type '(none)'" in str(failed.value) and ".pdf" in str(failed.value)


def _create(live) -> bool:
    return httpx.patch(live.url + "/language/query-knowledgebases/projects/docs", params={"api-version": "2021-10-01"},
                       json={"language": "en"}).status_code == 201


CHARGING = ["how long it takes to charge surface?", "how long does it take to charge surface pro 4?",
            "how long does the battery take to charge?", "how long does charging take?"]


def test_passages_compete_for_rank_not_for_the_scale(surface, embedder):
    """The Surface manual alone, through the Azure SDK: with ``includeUnstructuredSources`` every QnA keeps the
    confidence it has without passages (they were rivals of the last step, which once took "how long does charging
    take?" from 0.66 to 0.29), and a passage joins the ranking by its confidence among the passages."""
    from azure.ai.language.questionanswering import QuestionAnsweringClient
    from azure.ai.language.questionanswering.models import AnswersOptions, ShortAnswerOptions

    from conftest import LiveServer

    with LiveServer(surface) as live, QuestionAnsweringClient(live.url, AzureKeyCredential("open")) as client:
        def ask(question: str, passages: bool):
            options = AnswersOptions(question=question, top=3, confidence_threshold=0.2,
                                     include_unstructured_sources=passages,
                                     short_answer_options=ShortAnswerOptions(enable=True))
            return client.get_answers(options, project_name="surface", deployment_name="test").answers

        for question in CHARGING:
            alone, mixed = ask(question, False), ask(question, True)
            qnas = {a.qna_id: a.confidence for a in alone}
            assert alone and all(a.source == "product-manual.pdf" for a in alone)
            for a in mixed:
                if a.qna_id in qnas:
                    assert a.confidence == qnas[a.qna_id], (question, a.questions)
            assert [a.confidence for a in mixed] == sorted((a.confidence for a in mixed), reverse=True)
        # the manual's sections are read through their text, as their passages are: the section that says how
        # long answers, not "Charge your Surface Pro 4" (plug-in steps), whose heading shares more of the words
        for question in CHARGING:
            for passages in (False, True):
                top = ask(question, passages)[0]
                assert top.questions == ["Power and charging"] and top.confidence >= 0.5, (question, passages, top)
                assert top.short_answer.text == "two to four hours", (question, passages)


def test_sections_past_azure_limits_are_named_and_lose_no_prompt(tmp_path):
    """A section longer than an answer may be was cut at 25,000 characters without a word, so only passages knew
    its end; a heading's 21st and later sub-headings lost their prompts.  Now the import names the section, what
    its QnA keeps and that the passages hold the rest, and the sub-headings past the 19th sit under "More"."""
    from openqna.formats.limits import MAX_ANSWER_CHARS, MAX_PROMPTS
    from openqna.kb.service import Service
    from openqna.store.sqlite import SQLiteStore

    terms = tmp_path / "terms.md"
    body = "The warranty covers the widget against faults in materials and workmanship. " * 430
    terms.write_text(f"# Terms\n\n## Warranty conditions\n\n{body}The secret code is ZEBRA-42.\n\n## Parts\n\n"
                     "The parts of the widget.\n\n"
                     + "".join(f"### Part {i}\n\nPart {i} is the {i}th piece.\n\n" for i in range(1, 26)),
                     encoding="utf-8")
    out = run("import", "long", str(terms), data=tmp_path).stdout
    assert ("long: note: terms.md: “Warranty conditions” has 32,708 characters, more than an answer's 25,000: its QnA "
            "keeps the first 24,927 characters, up to “…the widget against faults in materials and workmanship.”; its "
            "passages hold all of it") in out
    assert "“Parts” has 25 follow-ups, more than a QnA's 20 prompts: prompts 20 to 25 are under “More”" in out
    answer = run("ask", "long", "What is the secret code?", "--top", "1", "--unstructured", data=tmp_path).stdout
    assert "(passage) Warranty conditions" in answer.splitlines()[0] and "ZEBRA-42" in answer

    service = Service(SQLiteStore(tmp_path), None)  # type: ignore[arg-type]  # reads records only
    qnas = {q.questions[0]: q for q in service.store.list_qnas("long") if q.kind == "qna"}
    warranty = qnas["Warranty conditions"].answer
    assert len(warranty) <= MAX_ANSWER_CHARS and warranty.endswith("workmanship.")  # whole sentences
    parts = qnas["Parts"].dialog.prompts
    assert len(parts) == MAX_PROMPTS and [p.display_text for p in parts[:-1]] == [f"Part {i}" for i in range(1, 20)]
    more = service.store.get_qnas("long", [parts[-1].qna_id])[parts[-1].qna_id]
    assert parts[-1].display_text == "More" and more.dialog.is_context_only
    assert more.questions == ["Parts: more topics"]
    assert [p.display_text for p in more.dialog.prompts] == [f"Part {i}" for i in range(20, 26)]
    assert "- Part 25" in more.answer
