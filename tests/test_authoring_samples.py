"""Authoring as the official Azure SDK 1.1.0 samples drive it (sample_*_project*.py, sample_update_knowledge_sources),
with only the endpoint and key changed: each test pins a gap those calls found."""

from __future__ import annotations

import asyncio
import io
import time
import zipfile

import httpx
import pytest
from azure.ai.language.questionanswering import QuestionAnsweringClient
from azure.ai.language.questionanswering.authoring import AuthoringClient
from azure.ai.language.questionanswering.authoring.aio import (
    AuthoringClient as AsyncAuthoringClient,
)
from azure.core.credentials import AzureKeyCredential
from azure.core.exceptions import HttpResponseError
from azure.core.rest import HttpRequest

from openqna.auth.keys import create_key
from openqna.formats import read_file

P = "/language/authoring/query-knowledgebases/projects"
FAQ = [
    {"op": "add", "value": {"id": 1, "questions": ["How long does charging take?"],
                            "answer": "Two to four hours.", "source": "editorial", "metadata": {"topic": "power"}}},
    {"op": "add", "value": {"id": 2, "questions": ["How do I reset my password?"],
                            "answer": "Choose Reset password in account settings.", "source": "editorial"}},
]


@pytest.fixture
def admin(live):
    return create_key(live.service.store, name="admin", role="admin")[1]


@pytest.fixture
def authoring(live, admin):
    client = AuthoringClient(live.url, AzureKeyCredential(admin))
    client.create_project("faq", {"description": "sample", "language": "en", "multilingualResource": True,
                                  "settings": {"defaultAnswer": "no answer"}})
    client.begin_update_qnas("faq", FAQ).result()
    return client


def by_id(client, project="faq") -> dict[int, dict]:
    return {q["id"]: q for q in client.list_qnas(project)}


def test_a_prompt_may_carry_a_new_qna_inline(live, authoring, admin):
    """QnaPrompt holds a qnaId or a whole qna record: one update call adds a QnA and its follow-up."""
    authoring.begin_update_qnas("faq", [{"op": "add", "value": {
        "questions": ["Which charger should I use?"], "answer": "The one in the box.",
        "dialog": {"isContextOnly": False, "prompts": [{"displayOrder": 1, "displayText": "Fast charging", "qna": {
            "questions": ["Fast charging"], "answer": "The 65 W charger charges fast.",
            "dialog": {"isContextOnly": True, "prompts": []}}}]}}}]).result()
    qnas = by_id(authoring)
    parent = next(q for q in qnas.values() if q["answer"] == "The one in the box.")
    [prompt] = parent["dialog"]["prompts"]
    child = qnas[prompt["qnaId"]]
    assert child["answer"] == "The 65 W charger charges fast." and child["dialog"]["isContextOnly"] is True
    assert prompt["displayText"] == "Fast charging" and len(qnas) == 4
    qa = QuestionAnsweringClient(live.url, AzureKeyCredential(admin))
    from azure.ai.language.questionanswering.models import KnowledgeBaseAnswerContext

    answer = qa.get_answers(question="Fast charging", project_name="faq", deployment_name="test",
                            answer_context=KnowledgeBaseAnswerContext(previous_qna_id=parent["id"])).answers[0]
    assert answer.qna_id == child["id"]


def test_qnas_added_with_and_without_ids_in_one_change_are_all_kept(live, authoring, admin):
    """A QnA added without an id before QnAs whose ids are the project's next free ones: it gets an id above them
    (it was given the next free id, then overwritten by the QnA named so, and the job still succeeded); an inline
    follow-up of a QnA named by id gets an id no QnA of the change names (the job failed: "QnA 3 is also added by
    [0]")."""
    authoring.begin_update_qnas("faq", [
        {"op": "add", "value": {"questions": ["Is there a warranty?"], "answer": "One year."}},
        {"op": "add", "value": {"id": 3, "questions": ["Where is my order?"], "answer": "Track it in your account."}},
        {"op": "add", "value": {"id": 4, "questions": ["Can I pay later?"], "answer": "Yes, in three parts.",
                                "dialog": {"isContextOnly": False, "prompts": [{
                                    "displayOrder": 0, "displayText": "Fees?",
                                    "qna": {"questions": ["Are there fees?"], "answer": "No fees."}}]}}},
        {"op": "add", "value": {"id": 5, "questions": ["Do you ship abroad?"], "answer": "To the EU only."}},
    ]).result()
    qnas = by_id(authoring)
    answers = sorted(q["answer"] for q in qnas.values())
    assert answers == sorted(["Two to four hours.", "Choose Reset password in account settings.", "One year.",
                              "Track it in your account.", "Yes, in three parts.", "No fees.", "To the EU only."])
    assert qnas[3]["answer"] == "Track it in your account." and qnas[5]["answer"] == "To the EU only."
    [prompt] = qnas[4]["dialog"]["prompts"]
    assert qnas[prompt["qnaId"]]["answer"] == "No fees." and prompt["qnaId"] not in (1, 2, 3, 4, 5)


def test_inline_prompt_errors_name_the_field(live, authoring, admin):
    r = httpx.patch(f"{live.url}{P}/faq/qnas", params={"api-version": "2023-04-01"},
                    headers={"Ocp-Apim-Subscription-Key": admin}, timeout=30,
                    json=[{"op": "add", "value": {"questions": ["q"], "answer": "a", "dialog": {"prompts": [
                        {"displayText": "next", "qna": {"questions": ["next"]}}]}}}])
    assert r.status_code == 400 and "Answer" in r.json()["error"]["message"]


def async_client(live, key) -> AsyncAuthoringClient:
    """The async client; aiohttp (its default transport) is not in the test venv, so requests carries it."""
    from azure.core.pipeline.transport import AsyncioRequestsTransport

    return AsyncAuthoringClient(live.url, AzureKeyCredential(key), transport=AsyncioRequestsTransport())


def export_file(client: AsyncAuthoringClient, fmt: str, asset_kind: str = "qnas") -> bytes:
    """The async export sample's steps: begin_export, then GET resultUrl through the client's own pipeline."""

    async def run() -> bytes:
        async with client:
            result = await (await client.begin_export(project_name="faq", file_format=fmt,
                                                      asset_kind=asset_kind)).result()
            response = await client.send_request(HttpRequest("GET", result["resultUrl"]), stream=True)
            return await response.read()

    return asyncio.run(run())


@pytest.mark.parametrize("fmt", ["tsv", "excel"])
def test_tsv_and_excel_exports_are_zip_archives(live, authoring, admin, fmt, tmp_path):
    authoring.update_synonyms("faq", {"value": [{"alterations": ["charging", "recharging"]}]})
    data = export_file(async_client(live, admin), fmt)
    archive = zipfile.ZipFile(io.BytesIO(data))
    archive.extractall(tmp_path / "ExportedProject")
    assert archive.namelist() == (["QnAs.tsv", "Synonyms.tsv"] if fmt == "tsv" else ["KnowledgeBaseReplica.xlsx"])
    content = read_file("export.zip", data)
    assert {q.answer for q in content.qnas} == {q["answer"] for q in authoring.list_qnas("faq")}
    assert content.synonyms == [["charging", "recharging"]]
    synonyms = read_file("synonyms.zip", export_file(async_client(live, admin), fmt,
                                                     "synonyms"))
    assert synonyms.qnas == [] and synonyms.synonyms == [["charging", "recharging"]]


@pytest.mark.parametrize("fmt", ["json", "tsv", "excel"])
def test_an_export_result_url_imports_back_on_a_server_with_keys(live, authoring, fmt):
    """begin_import_assets(fileUri=resultUrl): the server fetches its own signed, expiring URL without a key."""
    url = authoring.begin_export("faq", file_format=fmt).result()["resultUrl"]
    assert httpx.get(url, timeout=30).status_code == 200  # the signature is the credential
    assert httpx.get(url.replace("sig=", "sig=x"), timeout=30).status_code == 401
    assert httpx.get(url.split("&sig=")[0], timeout=30).status_code == 401
    authoring.begin_import_assets("copy", {"fileUri": url}, file_format=fmt).result()
    copied = by_id(authoring, "copy")
    assert {(q["id"], q["answer"]) for q in copied.values()} == {(q["id"], q["answer"]) for q in by_id(authoring).values()}


def test_an_expired_export_url_is_refused(live, authoring):
    url = authoring.begin_export("faq", file_format="json").result()["resultUrl"]
    job = live.service.store.get_job(url.split("/export/jobs/")[1].split("/")[0])
    job.expires = "2000-01-01T00:00:00Z"
    live.service.store.put_job(job)
    assert httpx.get(url, timeout=30).status_code == 401


def test_unstructured_sources_become_passages(live, authoring, files):
    (files.root / "guide.md").write_text(
        "# Widget guide\n\n## First use\n\nCharge the widget for two hours before you use it the first time.\n\n"
        "## Cleaning\n\nWipe it with a dry cloth; never use water.\n", encoding="utf-8")
    for structure, project in (("unstructured", "faq"), ("semistructured", "semi")):
        if project == "semi":
            authoring.create_project("semi", {"language": "en"})
        authoring.begin_update_sources(project, [{"op": "add", "value": {
            "displayName": "guide", "source": f"{files.url}/guide.md", "sourceUri": f"{files.url}/guide.md",
            "sourceKind": "url", "contentStructureKind": structure, "refresh": False}}]).result()
    kinds = {q.kind for q in live.service.store.list_qnas("faq") if q.source.endswith("guide.md")}
    assert kinds == {"passage"}
    assert "qna" in {q.kind for q in live.service.store.list_qnas("semi")}
    [source] = [s for s in authoring.list_sources("faq") if s["source"].endswith("guide.md")]
    assert source["contentStructureKind"] == "unstructured"


def test_a_replicas_unstructured_document_is_listed_as_unstructured(live, authoring, files):
    """A KB replica's UnstructuredContent/ documents become passages only; the source list says so, as it does for a
    source added with contentStructureKind "unstructured" (it said "semistructured")."""
    import shutil

    from conftest import SAMPLE_DOCS

    shutil.copy(SAMPLE_DOCS / "knowledge-bases" / "SampleV2KBReplica.zip", files.root)
    authoring.begin_import_assets("faq", {"fileUri": f"{files.url}/SampleV2KBReplica.zip"}, file_format="tsv").result()
    kinds = {s["source"]: s.get("contentStructureKind") for s in authoring.list_sources("faq")}
    assert kinds["botframework-blog.pdf"] == "unstructured"  # absent: semi-structured, the spec's default
    assert {k for s, k in kinds.items() if s != "botframework-blog.pdf"} == {None}


def test_sources_differing_only_in_case_are_listed_once(live, authoring):
    """sourceFilter and a source's delete take "Editorial" and "editorial" for one source: so does the list."""
    authoring.begin_update_qnas("faq", [{"op": "add", "value": {
        "questions": ["Is there a warranty?"], "answer": "One year.", "source": "Editorial"}}]).result()
    names = [s["source"] for s in authoring.list_sources("faq")]
    assert [n.lower() for n in names] == ["editorial"]


def test_replace_without_questions_keeps_them(authoring):
    """The REST spec makes QnaRecord.questions optional with minLength 1: absent or null cannot mean "none"."""
    authoring.begin_update_qnas("faq", [
        {"op": "replace", "value": {"id": 1, "answer": "Two to four hours with the box charger.", "questions": None}},
        {"op": "replace", "value": {"id": 2, "answer": "Use Reset password.", "source": "editorial"}},
    ]).result()
    qnas = by_id(authoring)
    assert qnas[1]["questions"] == ["How long does charging take?"]
    assert qnas[1]["answer"] == "Two to four hours with the box charger."
    assert qnas[2]["questions"] == ["How do I reset my password?"]


def test_deletes_and_synonym_updates_move_last_modified(authoring):
    """FAQ Plus republishes when lastModifiedDateTime is later than lastDeployedDateTime."""
    authoring.begin_deploy_project("faq", "production").result()

    def stale() -> bool:
        p = authoring.get_project_details("faq")
        return p["lastModifiedDateTime"] > p["lastDeployedDateTime"]

    assert not stale()
    time.sleep(1.1)  # the timestamps have whole seconds
    authoring.begin_update_qnas("faq", [{"op": "delete", "value": {"id": 2}}]).result()
    assert stale()
    authoring.begin_deploy_project("faq", "production").result()
    assert not stale()
    time.sleep(1.1)
    authoring.update_synonyms("faq", {"value": [{"alterations": ["charging", "recharging"]}]})
    assert stale()


def test_links_use_the_public_url(live, authoring, admin, monkeypatch):
    monkeypatch.setenv("OPENQNA_PUBLIC_URL", "https://qna.example.com/")
    headers = {"Ocp-Apim-Subscription-Key": admin}
    r = httpx.post(f"{live.url}{P}/faq/:export", params={"api-version": "2023-04-01", "format": "json"},
                   headers=headers, timeout=30)
    location = r.headers["Operation-Location"]
    assert location.startswith(f"https://qna.example.com{P}/faq/export/jobs/")
    status = httpx.get(location.replace("https://qna.example.com", live.url), headers=headers, timeout=30).json()
    for _ in range(100):
        if status["status"] == "succeeded":
            break
        time.sleep(0.1)
        status = httpx.get(location.replace("https://qna.example.com", live.url), headers=headers, timeout=30).json()
    assert status["resultUrl"].startswith(f"https://qna.example.com{P}/faq/export/jobs/")
    page = httpx.get(f"{live.url}{P}/faq/qnas", params={"api-version": "2023-04-01", "maxpagesize": 1},
                     headers=headers, timeout=30).json()
    assert page["nextLink"].startswith(f"https://qna.example.com{P}/faq/qnas?")


def test_feedback_suggestions_survive_a_read_modify_write_once(live, authoring, admin):
    authoring.add_feedback("faq", {"records": [{"userId": "u1", "userQuestion": "battery full how soon", "qnaId": 1},
                                               {"userId": "u2", "userQuestion": "battery full how soon", "qnaId": 1}]})
    listed = by_id(authoring)[1]
    assert len(listed["activeLearningSuggestions"]) == 1
    edited = {k: v for k, v in listed.items() if k != "lastUpdatedDateTime"}
    edited["answer"] = "Two to four hours; fast charging takes one."
    authoring.begin_update_qnas("faq", [{"op": "replace", "value": edited}]).result()
    [suggestion] = by_id(authoring)[1]["activeLearningSuggestions"]
    assert suggestion["clusterHead"] == "battery full how soon"
    assert suggestion["suggestedQuestions"] == [{"question": "battery full how soon", "userSuggestedCount": 2,
                                                 "autoSuggestedCount": 0}]


def test_the_json_export_sample_imports_its_own_export(live, authoring, admin):
    """sample_export_import_project: GET resultUrl with the client, send the JSON back as the import options."""
    authoring.update_synonyms("faq", {"value": [{"alterations": ["charging", "recharging"]}]})
    url = authoring.begin_export(project_name="faq", file_format="json").result()["resultUrl"]
    exported = authoring.send_request(HttpRequest("GET", url)).json()
    authoring.begin_delete_project("faq").result()
    authoring.begin_import_assets(project_name="faq", options=exported).result()
    [project] = [p for p in authoring.list_projects() if p["projectName"] == "faq"]
    assert project["language"] == "en" and project["description"] == "sample"
    assert {q["answer"] for q in authoring.list_qnas("faq")} == {f["value"]["answer"] for f in FAQ}
    assert [s["alterations"] for s in authoring.list_synonyms("faq")] == [["charging", "recharging"]]


def test_an_export_url_behind_a_proxy_imports_without_fetching(live, authoring, admin, monkeypatch):
    """The server reads its own signed export from the job: a public URL it cannot reach from inside still imports."""
    headers = {"Ocp-Apim-Subscription-Key": admin}
    monkeypatch.setenv("OPENQNA_PUBLIC_URL", "https://qna.example.invalid")
    r = httpx.post(f"{live.url}{P}/faq/:export", params={"api-version": "2023-04-01", "format": "tsv"},
                   headers=headers, timeout=30)
    monkeypatch.delenv("OPENQNA_PUBLIC_URL")  # the SDK below polls this server directly
    status = r.headers["Operation-Location"].replace("https://qna.example.invalid", live.url)
    for _ in range(100):
        job = httpx.get(status, headers=headers, timeout=30).json()
        if job["status"] == "succeeded":
            break
        time.sleep(0.1)
    url = job["resultUrl"]
    assert url.startswith("https://qna.example.invalid/")
    authoring.begin_import_assets("copy", {"fileUri": url}, file_format="tsv").result()
    assert {q["answer"] for q in authoring.list_qnas("copy")} == {f["value"]["answer"] for f in FAQ}
    forged = url.replace("sig=", "sig=forged")
    with pytest.raises(HttpResponseError, match="qna.example.invalid"):
        authoring.begin_import_assets("forged", {"fileUri": forged}, file_format="tsv").result()
