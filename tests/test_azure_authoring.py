"""The Azure authoring API over real HTTP with the official SDK 1.1.0, plus the wire details."""

from __future__ import annotations

import json
import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from urllib.parse import parse_qs, urlparse

import httpx
import pytest
from azure.ai.language.questionanswering import QuestionAnsweringClient
from azure.ai.language.questionanswering.authoring import AuthoringClient
from azure.core.credentials import AzureKeyCredential
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError

from conftest import CHITCHAT, SAMPLE_DOCS, LiveServer, wait_for_job
from openqna.auth.keys import create_key
from openqna.formats import read_file
from openqna.kb.authoring import Authoring
from openqna.records import KnowledgeBaseContent, QnA
from openqna.store import Job

P1 = "/language/query-knowledgebases/projects"
P2 = "/language/authoring/query-knowledgebases/projects"


@pytest.fixture
def admin(live):
    _, secret = create_key(live.service.store, name="admin", role="admin")
    return secret


def clients(live, key):
    return AuthoringClient(live.url, AzureKeyCredential(key)), QuestionAnsweringClient(live.url, AzureKeyCredential(key))


def ask(qa, question, deployment="production", project="lifecycle"):
    return qa.get_answers(question=question, project_name=project, deployment_name=deployment, top=1).answers[0]


def test_sdk_lifecycle(live, admin, files, tmp_path):
    shutil.copy(SAMPLE_DOCS / "knowledge-bases" / "SampleV2QnAs.tsv", files.root / "kb.tsv")
    authoring, qa = clients(live, admin)
    created = authoring.create_project("lifecycle", {"description": "sdk test", "language": "en",
                                                     "multilingualResource": False,
                                                     "settings": {"defaultAnswer": "Sorry, no idea."}})
    assert created["projectName"] == "lifecycle" and "lastDeployedDateTime" not in created
    assert authoring.create_project("lifecycle", {"description": "v2", "language": "en"})["description"] == "v2"

    authoring.begin_import_assets("lifecycle", {"fileUri": f"{files.url}/kb.tsv"}, file_format="tsv").result()
    expected = read_file(SAMPLE_DOCS / "knowledge-bases" / "SampleV2QnAs.tsv")
    qnas = list(authoring.list_qnas("lifecycle"))
    assert len(qnas) == len(expected.qnas)
    assert {q["answer"] for q in qnas} == {q.answer for q in expected.qnas}

    updated = list(authoring.begin_update_qnas("lifecycle", [
        {"op": "add", "value": {"questions": ["What is the capital of France?"], "answer": "Paris",
                                "source": "editorial", "metadata": {"Topic": "Geo"},
                                "dialog": {"isContextOnly": False, "prompts": []}}},
        {"op": "replace", "value": {"id": 1, "questions": ["Why was the Bot Framework made?"],
                                    "answer": "To make building bots easier.", "source": "structured.docx"}},
        {"op": "delete", "value": {"id": 2}},
    ]).result())
    by_answer = {q["answer"]: q for q in updated}
    assert by_answer["Paris"]["id"] == max(q["id"] for q in qnas) + 1
    assert by_answer["Paris"]["metadata"] == {"topic": "geo"}
    assert 2 not in {q["id"] for q in updated}

    authoring.update_synonyms("lifecycle", {"value": [{"alterations": ["bot framework", "bf"]}]})
    assert [s["alterations"] for s in authoring.list_synonyms("lifecycle")] == [["bot framework", "bf"]]

    deployed = authoring.begin_deploy_project("lifecycle", "production").result()
    assert deployed["deploymentName"] == "production" and deployed["lastDeployedDateTime"]
    assert [d["deploymentName"] for d in authoring.list_deployments("lifecycle")] == ["production"]
    assert ask(qa, "What is the capital of France?").answer == "Paris"

    authoring.begin_update_qnas("lifecycle", [{"op": "replace", "value": {
        "id": by_answer["Paris"]["id"], "questions": ["What is the capital of France?"], "answer": "Paris, France",
        "source": "editorial"}}]).result()
    assert ask(qa, "What is the capital of France?", "test").answer == "Paris, France"
    assert ask(qa, "What is the capital of France?").answer == "Paris"  # production unchanged until redeploy
    authoring.begin_deploy_project("lifecycle", "production").result()
    assert ask(qa, "What is the capital of France?").answer == "Paris, France"

    # tsv and excel arrive as .zip archives of the knowledge-base replica, as Azure's do (see test_authoring_samples)
    for fmt, check in (("json", lambda b: b.lstrip().startswith(b"{")), ("tsv", lambda b: b"QnAs.tsv" in b),
                       ("excel", lambda b: b"KnowledgeBaseReplica.xlsx" in b)):
        job = authoring.begin_export("lifecycle", file_format=fmt).result()
        assert job["status"] == "succeeded"
        got = httpx.get(job["resultUrl"], headers={"Ocp-Apim-Subscription-Key": admin}, timeout=30)
        data = got.content
        assert check(data), fmt
        # named after the project and the format (every export downloaded as KnowledgeBase.json or .zip)
        name = {"json": "lifecycle.json", "tsv": "lifecycle-tsv.zip", "excel": "lifecycle-excel.zip"}[fmt]
        assert got.headers["Content-Disposition"] == f'attachment; filename="{name}"'
        assert {q.answer for q in read_file(name, data).qnas} == {q["answer"] for q in authoring.list_qnas("lifecycle")}
    synonyms = authoring.begin_export("lifecycle", file_format="tsv", asset_kind="synonyms").result()
    assert httpx.get(synonyms["resultUrl"], timeout=30).headers["Content-Disposition"] == \
        'attachment; filename="lifecycle-synonyms-tsv.zip"'

    authoring.begin_delete_project("lifecycle").result()
    with pytest.raises(ResourceNotFoundError):
        authoring.get_project_details("lifecycle")


def test_a_deployment_answers_with_the_default_answer_it_was_deployed_with(live, admin):
    """A default answer changed after a deploy reached production before any deploy (QnAs and synonyms were isolated,
    the default answer was read from the live project): production answers the one it was deployed with, 'test' the
    live one, a deploy takes the new one and a rollback restores the old."""
    authoring, qa = clients(live, admin)
    authoring.create_project("iso", {"language": "en", "settings": {"defaultAnswer": "Sorry, ask the help desk."}})
    authoring.begin_update_qnas("iso", [{"op": "add", "value": {
        "questions": ["How do I reset my password?"], "answer": "Use the portal.", "source": "editorial"}}]).result()
    authoring.begin_deploy_project("iso", "production").result()
    authoring.create_project("iso", {"settings": {"defaultAnswer": "DRAFT - do not ship"}})  # not deployed

    def fallback(deployment: str) -> str:
        [answer] = qa.get_answers(question="what is the meaning of life", project_name="iso",
                                  deployment_name=deployment, confidence_threshold=0.5).answers
        assert answer.qna_id == -1
        return answer.answer

    assert fallback("production") == "Sorry, ask the help desk."
    assert fallback("test") == "DRAFT - do not ship"
    r = httpx.post(f"{live.url}/openqna/projects/iso/:inspect", params={"deploymentName": "production"},
                   json={"question": "what is the meaning of life", "confidenceScoreThreshold": 0.5},
                   headers={"Ocp-Apim-Subscription-Key": admin}, timeout=30)
    assert r.status_code == 200 and r.json()["answers"][0]["answer"] == "Sorry, ask the help desk.", r.text
    authoring.begin_deploy_project("iso", "production").result()
    assert fallback("production") == "DRAFT - do not ship"
    r = httpx.post(f"{live.url}/openqna/projects/iso/deployments/production/:rollback", params={"version": 1},
                   headers={"Ocp-Apim-Subscription-Key": admin}, timeout=30)
    assert r.status_code == 200 and r.json()["version"] == 1, r.text
    assert fallback("production") == "Sorry, ask the help desk."
    assert fallback("test") == "DRAFT - do not ship"


def test_sdk_paging_sources_and_feedback(live, admin, files):
    authoring, _ = clients(live, admin)
    for i in range(3):
        authoring.create_project(f"p{i}", {"language": "en"})
    assert [p["projectName"] for p in authoring.list_projects(top=2, skip=1)] == ["p1", "p2"]
    r = httpx.get(live.url + P1, params={"api-version": "2021-10-01", "maxpagesize": 2},
                  headers={"Ocp-Apim-Subscription-Key": admin})
    assert len(r.json()["value"]) == 2 and "skip=2" in r.json()["nextLink"]
    assert r.json()["nextLink"].startswith(live.url)

    shutil.copy(CHITCHAT, files.root / "chitchat.tsv")
    sources = list(authoring.begin_update_sources("p0", [{"op": "add", "value": {
        "displayName": "chit-chat", "sourceUri": f"{files.url}/chitchat.tsv", "sourceKind": "url"}}]).result())
    assert [s["displayName"] for s in sources] == ["chit-chat"]
    assert len(list(authoring.list_qnas("p0", source=f"{files.url}/chitchat.tsv"))) == 96
    version = live.service.store.version("p0")
    authoring.begin_update_sources("p0", [{"op": "replace", "value": {
        "displayName": "chit-chat", "sourceUri": f"{files.url}/chitchat.tsv", "sourceKind": "url",
        "refresh": True}}]).result()
    assert live.service.store.version("p0") == version  # unchanged content: nothing re-ingested
    lines = (files.root / "chitchat.tsv").read_text(encoding="utf-8").splitlines(keepends=True)
    (files.root / "chitchat.tsv").write_text("".join(l for l in lines if "Age doesn't" not in l), encoding="utf-8")
    authoring.begin_update_sources("p0", [{"op": "replace", "value": {
        "displayName": "chit-chat", "sourceUri": f"{files.url}/chitchat.tsv", "sourceKind": "url",
        "refresh": True}}]).result()
    answers = {q["answer"] for q in authoring.list_qnas("p0")}
    assert len(answers) == 95 and "Age doesn't really apply to me." not in answers

    qid = next(q["id"] for q in authoring.list_qnas("p0") if "Hello" in q["answer"] or "Hi" in q["answer"])
    authoring.add_feedback("p0", {"records": [{"userId": "u1", "userQuestion": "yo there", "qnaId": qid},
                                              {"userId": "u2", "userQuestion": "yo there", "qnaId": qid}]})
    listed = next(q for q in authoring.list_qnas("p0") if q["id"] == qid)
    [suggestion] = listed["activeLearningSuggestions"]
    assert suggestion["clusterHead"] == "yo there"
    assert suggestion["suggestedQuestions"][0]["userSuggestedCount"] == 2
    accepted = dict(listed, questions=listed["questions"] + ["yo there"])
    accepted.pop("activeLearningSuggestions")
    authoring.begin_update_qnas("p0", [{"op": "replace", "value": accepted}]).result()
    listed = next(q for q in authoring.list_qnas("p0") if q["id"] == qid)
    assert listed["activeLearningSuggestions"] == [] and "yo there" in listed["questions"]

    authoring.begin_update_sources("p0", [{"op": "delete", "value": {
        "displayName": "chit-chat", "sourceUri": f"{files.url}/chitchat.tsv", "sourceKind": "url"}}]).result()
    assert list(authoring.list_qnas("p0")) == []


def test_a_source_whose_prompts_lead_nowhere_is_refused(live, admin, files):
    """A QnA file added as a URL source is checked as an imported one is: a prompt to a QnA that exists nowhere fails
    the job, naming the QnA and the ids, and writes nothing."""
    (files.root / "faq.json").write_text(json.dumps({"Assets": {"Qnas": [
        {"Id": 1, "Answer": "Hold the power button.", "Questions": ["How do I reset it?"],
         "Dialog": {"IsContextOnly": False, "Prompts": [{"DisplayOrder": 0, "QnaId": 77, "DisplayText": "More"}]}}]}}),
        encoding="utf-8")
    authoring, _ = clients(live, admin)
    _req(live, "PATCH", "/src", admin, json={"language": "en"})
    with pytest.raises(HttpResponseError) as caught:
        authoring.begin_update_sources("src", [{"op": "add", "value": {
            "displayName": "faq", "sourceUri": f"{files.url}/faq.json", "sourceKind": "url"}}]).result()
    assert "follow-up prompts to QnA ids that do not exist: [77]" in str(caught.value)
    assert list(authoring.list_qnas("src")) == []


def test_a_sources_update_that_fails_changes_nothing(live, admin, files):
    """[delete a source, add one whose URL answers 404]: the job failed, yet the first source and its QnAs were gone.
    Every URL is fetched and read before anything is written."""
    shutil.copy(CHITCHAT, files.root / "kept.tsv")
    authoring, _ = clients(live, admin)
    authoring.create_project("atomic", {"language": "en"})
    kept = {"displayName": "kept", "sourceUri": f"{files.url}/kept.tsv", "sourceKind": "url"}
    authoring.begin_update_sources("atomic", [{"op": "add", "value": kept}]).result()
    assert len(list(authoring.list_qnas("atomic"))) == 96
    with pytest.raises(HttpResponseError, match="404"):
        authoring.begin_update_sources("atomic", [
            {"op": "delete", "value": kept},
            {"op": "add", "value": {"displayName": "gone", "sourceUri": f"{files.url}/missing.tsv",
                                    "sourceKind": "url"}}]).result()
    assert [s["displayName"] for s in authoring.list_sources("atomic")] == ["kept"]
    assert len(list(authoring.list_qnas("atomic"))) == 96


def test_a_deleted_projects_export_is_gone_with_it(live, admin):
    """An export's resultUrl kept serving the project's content after the project was deleted (and once a project
    of that name was made again, with a key too), and could be imported elsewhere, until the job expired."""
    live.service.import_content("ghost", KnowledgeBaseContent([QnA(["secret?"], "The old content.")]))
    authoring, _ = clients(live, admin)
    job = authoring.begin_export("ghost", file_format="json").result()
    assert httpx.get(job["resultUrl"], timeout=30).status_code == 200  # signed: no key needed
    authoring.begin_delete_project("ghost").result()
    live.service.import_content("ghost", KnowledgeBaseContent([QnA(["new?"], "The new content.")]))
    for headers, status in (({}, 401), ({"Ocp-Apim-Subscription-Key": admin}, 404)):  # the signature opens nothing
        r = httpx.get(job["resultUrl"], headers=headers, timeout=30)
        assert r.status_code == status and "The old content" not in r.text, r.text
    with pytest.raises(HttpResponseError):
        authoring.begin_import_assets("elsewhere", {"fileUri": job["resultUrl"]}).result()


def _req(live, method, path, key=None, *, json=None, params=None, prefix=P2):
    headers = {"Ocp-Apim-Subscription-Key": key} if key else {}
    return httpx.request(method, live.url + prefix + path, params={"api-version": "2023-04-01", **(params or {})},
                         json=json, headers=headers, timeout=30)


def test_roles_and_scopes(live, admin):
    _req(live, "PATCH", "/mine", admin, json={"language": "en"})
    _req(live, "PATCH", "/theirs", admin, json={"language": "en"})
    _, query = create_key(live.service.store, role="query")
    key, scoped = create_key(live.service.store, role="author", projects=["mine"])
    assert _req(live, "GET", "/mine").status_code == 401
    r = _req(live, "PATCH", "/mine", query, json={"description": "x"})
    assert r.status_code == 403 and r.json()["error"]["code"] == "Forbidden"
    assert _req(live, "GET", "/mine", scoped).status_code == 200
    r = _req(live, "GET", "/theirs", scoped)
    assert r.status_code == 404 and r.json()["error"]["code"] == "ProjectNotFound"
    assert [p["projectName"] for p in _req(live, "GET", "", scoped).json()["value"]] == ["mine"]
    live.service.store.delete_key(key.id)  # revocation takes effect on the next request
    assert _req(live, "GET", "/mine", scoped).status_code == 401


@pytest.mark.parametrize("method,path,body,status,code", [
    ("GET", "/missing", None, 404, "ProjectNotFound"),
    ("GET", "/kb/deployments/staging", None, 404, "NotFound"),
    ("GET", "/kb/qnas/jobs/00000000-0000-0000-0000-000000000000", None, 404, "OperationNotFound"),
    ("PATCH", "/kb/qnas", {"op": "add"}, 400, "InvalidArgument"),
    ("PATCH", "/kb/qnas", [{"op": "upsert", "value": {}}], 400, "InvalidArgument"),
    ("PATCH", "/kb/qnas", [{"op": "add", "value": {"questions": ["q"]}}], 400, "InvalidArgument"),
    ("PATCH", "/kb/qnas", [{"op": "add", "value": {"questions": ["q"], "answer": "x" * 25001}}], 400,
     "InvalidArgument"),
    ("PATCH", "/kb/qnas", [{"op": "delete", "value": {}}], 400, "InvalidArgument"),
    # ids are int32: a larger one was stored (and could not be asked for by qnaId), one past 2**63 crashed the job
    ("PATCH", "/kb/qnas", [{"op": "add", "value": {"id": 2**31, "questions": ["q"], "answer": "a"}}], 400,
     "InvalidArgument"),
    ("PATCH", "/kb/qnas", [{"op": "add", "value": {"questions": ["q"], "answer": "a", "dialog": {"prompts": [
        {"displayOrder": 0, "qnaId": 2**31, "displayText": "more"}]}}}], 400, "InvalidArgument"),
    ("POST", "/kb/:import", {"assets": {"qnas": [{"id": 2**63, "questions": ["q"], "answer": "a"}]}}, 400,
     "InvalidArgument"),
    ("PUT", "/kb/synonyms", {"value": [{"alterations": "notalist"}]}, 400, "InvalidArgument"),
    ("PATCH", "/kb/sources", [{"op": "add", "value": {"sourceUri": "file:///etc/passwd"}}], 400, "InvalidArgument"),
    ("PATCH", "/kb/sources", [{"op": "add", "value": {"sourceUri": "https://example.com/faq", "sourceKind": "bogus"}}],
     400, "InvalidArgument"),
    ("POST", "/kb/feedback", {"records": [{"userQuestion": "q", "qnaId": 99}]}, 400, "InvalidArgument"),
    ("PUT", "/kb/deployments/test", None, 400, "InvalidArgument"),
    ("PATCH", "/bad name!", {"language": "en"}, 400, "InvalidArgument"),
    ("PATCH", "/" + "c" * 101, {"language": "en"}, 400, "InvalidArgument"),
    ("POST", "/missing/:export", None, 404, "ProjectNotFound"),
])
def test_error_paths(live, admin, method, path, body, status, code):
    _req(live, "PATCH", "/kb", admin, json={"language": "en"})
    r = _req(live, method, path, admin, json=body)
    assert r.status_code == status, r.text
    assert r.json()["error"]["code"] == code and r.json()["error"]["message"]


def test_a_project_name_of_100_characters_is_taken(live, admin):
    """2021-10-01 allows 100 characters (2023-04-01's pattern 99): the longer is taken, as the message says."""
    name = "c" * 100
    assert _req(live, "PATCH", f"/{name}", admin, json={"language": "en"}).status_code == 201
    assert _req(live, "GET", f"/{name}", admin).json()["projectName"] == name


def test_a_bad_id_names_its_operation(live, admin):
    """An add's id that is no integer was refused with target 'id', naming no operation of the list."""
    _req(live, "PATCH", "/kb", admin, json={"language": "en"})
    r = _req(live, "PATCH", "/kb/qnas", admin, json=[
        {"op": "add", "value": {"questions": ["q"], "answer": "a"}},
        {"op": "add", "value": {"id": "seven", "questions": ["q"], "answer": "a"}}])
    assert r.status_code == 400 and r.json()["error"]["target"] == "[1].value.id", r.text


def test_failed_job_reports_errors(live, admin):
    _req(live, "PATCH", "/kb", admin, json={"language": "en"})
    authoring, _ = clients(live, admin)
    with pytest.raises(HttpResponseError):
        authoring.begin_update_qnas("kb", [{"op": "replace", "value": {"id": 42, "questions": ["q"],
                                                                       "answer": "a"}}]).result()
    r = _req(live, "PATCH", "/kb/qnas", admin, json=[{"op": "delete", "value": {"id": 7}}])
    assert r.status_code == 202
    live.app.state.jobs.wait()
    job = httpx.get(r.headers["Operation-Location"], headers={"Ocp-Apim-Subscription-Key": admin}).json()
    assert job["status"] == "failed" and "no QnA with id 7" in job["errors"][0]["message"]


def test_two_adds_of_one_id_fail_the_update(live, admin):
    """The second add used to overwrite the first silently, as an add of a stored id is refused (and an import of
    two QnAs with one id)."""
    _req(live, "PATCH", "/kb", admin, json={"language": "en"})
    r = _req(live, "PATCH", "/kb/qnas", admin, json=[
        {"op": "add", "value": {"id": 5, "questions": ["What colour is it?"], "answer": "Blue."}},
        {"op": "add", "value": {"id": 5, "questions": ["How heavy is it?"], "answer": "Two kilos."}}])
    assert r.status_code == 202
    live.app.state.jobs.wait()
    job = httpx.get(r.headers["Operation-Location"], headers={"Ocp-Apim-Subscription-Key": admin}).json()
    assert job["status"] == "failed" and "QnA 5 is also added by [0]" in job["errors"][0]["message"]
    assert _req(live, "GET", "/kb/qnas", admin).json()["value"] == []


def test_an_add_past_the_largest_id_fails_the_update_and_names_the_way_out(live, admin):
    """After an add with id 2147483647 an add without id got 2147483648, which no later PATCH or import takes."""
    _req(live, "PATCH", "/kb", admin, json={"language": "en"})
    jobs = []
    for value in ({"id": 2**31 - 1, "questions": ["Highest?"], "answer": "Yes."},
                  {"questions": ["Next?"], "answer": "No."}, {"id": 7, "questions": ["Next?"], "answer": "No."}):
        r = _req(live, "PATCH", "/kb/qnas", admin, json=[{"op": "add", "value": value}])
        assert r.status_code == 202
        live.app.state.jobs.wait()
        jobs.append(httpx.get(r.headers["Operation-Location"], headers={"Ocp-Apim-Subscription-Key": admin}).json())
    assert [j["status"] for j in jobs] == ["succeeded", "failed", "succeeded"]
    assert "give each new QnA an unused id of its own" in jobs[1]["errors"][0]["message"]
    assert sorted(q["id"] for q in _req(live, "GET", "/kb/qnas", admin).json()["value"]) == [7, 2**31 - 1]


def test_a_failed_update_names_the_callers_operation(live, admin):
    """A follow-up written inline becomes an add of its own in the job: the error named [2] for the caller's [1]."""
    _req(live, "PATCH", "/kb", admin, json={"language": "en"})
    live.app.state.jobs.wait()
    _req(live, "PATCH", "/kb/qnas", admin, json=[{"op": "add", "value": {"id": 1, "questions": ["q"], "answer": "a"}}])
    live.app.state.jobs.wait()
    r = _req(live, "PATCH", "/kb/qnas", admin, json=[
        {"op": "add", "value": {"questions": ["Which colours?"], "answer": "Three.", "dialog": {"prompts": [
            {"displayOrder": 0, "displayText": "Blue", "qna": {"questions": ["Blue?"], "answer": "Yes."}}]}}},
        {"op": "add", "value": {"id": 1, "questions": ["How heavy is it?"], "answer": "Two kilos."}}])
    live.app.state.jobs.wait()
    job = httpx.get(r.headers["Operation-Location"], headers={"Ocp-Apim-Subscription-Key": admin}).json()
    assert job["status"] == "failed" and job["errors"][0]["message"].startswith("[1] add: QnA 1 already exists")


def test_job_protocol_details(live, admin):
    _req(live, "PATCH", "/kb", admin, json={"language": "en"})
    r = _req(live, "PUT", "/kb/deployments/production", admin, prefix=P1)
    assert r.status_code == 202 and r.content == b""
    location = r.headers["Operation-Location"]
    assert location.startswith(live.url + P1 + "/kb/deployments/production/jobs/") and "api-version=2023-04-01" in location
    live.app.state.jobs.wait()
    without_version = location.split("?")[0]
    job = httpx.get(without_version, headers={"Ocp-Apim-Subscription-Key": admin}).json()
    assert set(job) == {"createdDateTime", "expirationDateTime", "jobId", "lastUpdatedDateTime", "status"}
    assert job["status"] == "succeeded"
    r = _req(live, "GET", "/kb/deployments/production", admin)
    assert r.json()["deploymentName"] == "production"
    other = httpx.get(without_version.replace("/deployments/production/", "/deployments/other/"),
                      headers={"Ocp-Apim-Subscription-Key": admin})
    assert other.status_code == 404


def test_jobs_survive_a_restart_and_crashed_jobs_fail(service):
    _, key = create_key(service.store, role="admin")
    headers = {"Ocp-Apim-Subscription-Key": key}
    with LiveServer(service) as first:
        httpx.patch(first.url + P2 + "/kb", params={"api-version": "2023-04-01"}, json={"language": "en"},
                    headers=headers)
        r = httpx.post(first.url + P2 + "/kb/:export", params={"api-version": "2023-04-01", "format": "tsv"},
                       headers=headers)
        first.app.state.jobs.wait()
        export_path = r.headers["Operation-Location"].split(first.url, 1)[1]
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    service.store.put_job(Job("crashed-job", "deploy", "kb", "running", params={"deployment": "production"},
                              owner=f"{socket.gethostname()}:{dead.stdout.strip()}"))
    with LiveServer(service) as second:
        job = httpx.get(second.url + export_path, headers=headers).json()
        assert job["status"] == "succeeded"
        assert httpx.get(job["resultUrl"].replace(job["resultUrl"].split(P2)[0], second.url),
                         headers=headers).status_code == 200
        crashed = httpx.get(second.url + P2 + "/kb/deployments/production/jobs/crashed-job", headers=headers).json()
        assert crashed["status"] == "failed" and "before it finished" in crashed["errors"][0]["message"]


@pytest.mark.clients
def test_preview_sdk_lifecycle(live, admin, files):
    """The pre-release authoring package cannot share a venv with SDK 1.1.0, so it runs in .venv-preview."""
    from conftest import REPO

    python = REPO / ".venv-preview" / "bin" / "python"
    assert python.exists(), "run `make test` (it creates .venv-preview with the pre-release SDKs)"
    shutil.copy(SAMPLE_DOCS / "knowledge-bases" / "SampleQnAs.tsv", files.root / "kb.tsv")
    proc = subprocess.run([str(python), str(REPO / "tests" / "clients" / "preview_azure.py"), live.url, admin,
                           f"{files.url}/kb.tsv"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    import json

    seen = json.loads(proc.stdout)
    expected = len(read_file(SAMPLE_DOCS / "knowledge-bases" / "SampleQnAs.tsv").qnas)
    assert seen["created"] == "preview" and seen["imported"] == expected and seen["after_add"] == expected + 1
    assert seen["synonyms"] == [["robot", "machine"]] and seen["deployments"] == ["production"]
    assert seen["answer"] == ["A robot.", 1.0] and seen["deleted"] is True


def test_a_write_waiting_for_the_database_stalls_no_query(live, admin):
    """An `openqna import` in another process holds SQLite's writer lock: an authoring write waits for it on a
    worker thread, and a query sent meanwhile is answered at once (when authoring ran on the event loop, the query
    waited for the lock too); the write lands once the lock is released."""
    service = live.service
    service.create_project("faq")
    service.upsert("faq", [QnA(["When are you open?"], "9 to 5, Monday to Friday.")])
    service.store.deploy("faq", "production")
    query = {"projectName": "faq", "deploymentName": "production", "api-version": "2023-04-01"}
    headers = {"api-key": admin}
    locker = sqlite3.connect(service.store.path, isolation_level=None)
    try:
        locker.execute("BEGIN IMMEDIATE")
        writes: list[httpx.Response] = []
        writer = threading.Thread(target=lambda: writes.append(httpx.patch(
            f"{live.url}{P2}/faq", params={"api-version": "2023-04-01"}, headers=headers,
            json={"description": "written while locked"}, timeout=60)))
        writer.start()
        time.sleep(0.5)  # the write is waiting for the lock
        t = time.perf_counter()
        try:
            answered = httpx.post(f"{live.url}/language/:query-knowledgebases", params=query, headers=headers,
                                  json={"question": "when are you open?", "top": 1}, timeout=5)
        except httpx.ReadTimeout:
            answered = None
        meanwhile = time.perf_counter() - t
        assert not writes, "the write was answered while the database was locked"
    finally:
        if locker.in_transaction:
            locker.execute("ROLLBACK")
        locker.close()
    writer.join(60)
    assert answered is not None and meanwhile < 1.0, f"the query waited {meanwhile:.2f} s for a locked database"
    assert answered.json()["answers"][0]["answer"] == "9 to 5, Monday to Friday."
    assert writes and writes[0].status_code == 200 and writes[0].json()["description"] == "written while locked"


def test_feedback_is_bounded_as_documented(live, admin):
    """`:feedback` stored any number of records in one call (3,000 were a 204), and a qnaId past int32 reached the
    store; the records and their fields now have the limits of docs/settings.md, the same as QnA Maker's train."""
    live.service.import_content("kb", KnowledgeBaseContent([QnA(["How do I reset my password?"], "Use the link.")]))
    authoring, _ = clients(live, admin)
    record = {"userId": "u", "userQuestion": "forgot my password", "qnaId": 1}
    with pytest.raises(HttpResponseError) as caught:
        authoring.add_feedback("kb", {"records": [record] * (1000 + 1)})
    assert caught.value.status_code == 400 and caught.value.error.target == "records"
    assert f"has {1000 + 1} records; the limit is {1000}" in \
        caught.value.error.message
    for bad, target in (({**record, "qnaId": 2**40}, "records[0].qnaId"),
                        ({**record, "userId": "u" * (1000 + 1)}, "records[0].userId"),
                        ({**record, "userQuestion": "q" * (1000 + 1)}, "records[0].userQuestion"),
                        ({**record, "userQuestion": "   "}, "records[0]"), ("not a record", "records[0]")):
        r = _req(live, "POST", "/kb/feedback", admin, json={"records": [bad]})
        assert r.status_code == 400 and r.json()["error"]["target"] == target, r.text
    assert Authoring(live.service).suggestions("kb") == {}
    authoring.add_feedback("kb", {"records": [record] * 1000})
    assert Authoring(live.service).suggestions("kb") == {1: [("forgot my password", 1000)]}


@pytest.mark.parametrize("body", [b"", b"null", b"{}", b'{"Options": {}}'])
def test_an_import_of_nothing_is_refused_and_keeps_the_project(live, admin, body):
    """An empty :import body was a 202 and a job that "succeeded" by deleting every QnA of the project."""
    live.service.import_content("kb", KnowledgeBaseContent([QnA(["How do I reset my password?"], "Use the link.")]))
    r = httpx.post(f"{live.url}{P2}/kb/:import", params={"api-version": "2023-04-01"}, content=body,
                   headers={"Ocp-Apim-Subscription-Key": admin, "Content-Type": "application/json"}, timeout=30)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["innererror"]["code"] == "EmptyRequest" and '{"assets": {"qnas": []}}' in error["message"]
    authoring, _ = clients(live, admin)
    with pytest.raises(HttpResponseError) as caught:
        authoring.begin_import_assets("kb", {}).result()
    assert caught.value.status_code == 400
    assert [q["answer"] for q in authoring.list_qnas("kb")] == ["Use the link."]
    authoring.begin_import_assets("kb", {"assets": {"qnas": []}}).result()  # said outright, it empties the project
    assert list(authoring.list_qnas("kb")) == []


def test_no_answer_carries_a_prompt_to_a_deleted_qna(live, admin):
    """Deleting a QnA left the prompts that led to it: both runtimes answered a button whose qnaId answers
    nothing, and a prompt to a QnA that never existed was a 202 and a job that failed later."""
    from openqna.records import Dialog, Prompt

    parent = QnA(["How do I charge it?"], "Plug it in.", id=1,
                 dialog=Dialog(prompts=[Prompt(0, 2, "Fast charging"), Prompt(1, 3, "Battery care")]))
    live.service.import_content("kb", KnowledgeBaseContent([parent, QnA(["fast charging"], "Use 60 W.", id=2),
                                                            QnA(["battery care"], "Keep it cool.", id=3)]))
    live.service.deploy("kb", "production")
    authoring, qa = clients(live, admin)
    authoring.begin_update_qnas("kb", [{"op": "delete", "value": {"id": 2}}]).result()

    def prompts(deployment: str) -> list[int]:
        answer = qa.get_answers(qna_id=1, project_name="kb", deployment_name=deployment).answers[0]
        return [p.qna_id for p in answer.dialog.prompts]

    assert prompts("test") == [3] and prompts("production") == [2, 3]  # production still holds QnA 2
    r = httpx.post(f"{live.url}/qnamaker/knowledgebases/kb/generateAnswer", json={"qnaId": 1, "isTest": True},
                   headers={"Authorization": f"EndpointKey {admin}"}, timeout=30)
    assert [p["qnaId"] for p in r.json()["answers"][0]["context"]["prompts"]] == [3]

    for ops in ([{"op": "add", "value": {"questions": ["q"], "answer": "a", "dialog": {"prompts": [
                    {"displayOrder": 0, "qnaId": 999, "displayText": "nowhere"}]}}}],
                [{"op": "delete", "value": {"id": 3}}, {"op": "add", "value": {"questions": ["q"], "answer": "a",
                 "dialog": {"prompts": [{"displayOrder": 0, "qnaId": 3, "displayText": "care"}]}}}]):
        r = _req(live, "PATCH", "/kb/qnas", admin, json=ops)
        assert r.status_code == 400 and "prompts to QnA ids that do not exist: [" in r.json()["error"]["message"]
    assert sorted(q["id"] for q in authoring.list_qnas("kb")) == [1, 3]  # nothing of those was applied

    read = next(q for q in authoring.list_qnas("kb") if q["id"] == 1)  # an editor sends it back as it read it
    authoring.begin_update_qnas("kb", [{"op": "replace", "value": {**read, "answer": "Plug it in, then wait."}}]).result()
    stored = next(q for q in authoring.list_qnas("kb") if q["id"] == 1)
    assert stored["answer"] == "Plug it in, then wait." and [p["qnaId"] for p in stored["dialog"]["prompts"]] == [3]


def test_an_import_replaces_only_the_assets_it_holds(live, admin):
    """An import of synonyms alone (assetKind=qnas, the default) or of settings alone deleted every QnA of the
    project, and assetKind=synonyms with a body of QnAs deleted its synonyms."""
    live.service.import_content("kb", KnowledgeBaseContent([QnA(["How do I reset my password?"], "Use the link.")]))
    authoring, _ = clients(live, admin)
    authoring.update_synonyms("kb", {"value": [{"alterations": ["wifi", "wi-fi"]}]})
    authoring.begin_import_assets("kb", {"assets": {"synonyms": [{"alterations": ["tv", "television"]}]}}).result()
    assert [q["answer"] for q in authoring.list_qnas("kb")] == ["Use the link."]
    assert [s["alterations"] for s in authoring.list_synonyms("kb")] == [["tv", "television"]]
    authoring.begin_import_assets("kb", {"Metadata": {"Description": "Passwords"}}).result()
    assert [q["answer"] for q in authoring.list_qnas("kb")] == ["Use the link."]
    assert authoring.get_project_details("kb")["description"] == "Passwords"
    r = _req(live, "POST", "/kb/:import", admin, params={"assetKind": "synonyms"},
             json={"assets": {"qnas": [{"id": 1, "questions": ["q"], "answer": "a"}]}})
    assert r.status_code == 400 and r.json()["error"]["target"] == "assets.synonyms", r.text
    assert [s["alterations"] for s in authoring.list_synonyms("kb")] == [["tv", "television"]]
    authoring.begin_import_assets("kb", {"assets": {"qnas": [{"id": 1, "questions": ["q"], "answer": "a"}]}}).result()
    assert [q["answer"] for q in authoring.list_qnas("kb")] == ["a"]  # QnAs given: they replace the project's


@pytest.mark.parametrize("fmt", ["tsv", "json"])
def test_a_synonyms_export_imported_without_asset_kind_keeps_the_qnas(live, admin, fmt):
    """An export of the synonyms (a zip of Synonyms.tsv, or JSON with "Qnas": []) imported by its fileUri with the
    SDK's default assetKind deleted every QnA of the project it was imported into: a file without QnAs or documents
    replaces only what it holds."""
    live.service.import_content("src", KnowledgeBaseContent([QnA(["q"], "a")]))
    live.service.import_content("kb", KnowledgeBaseContent([QnA(["How do I reset my password?"], "Use the link.")]))
    authoring, _ = clients(live, admin)
    authoring.update_synonyms("src", {"value": [{"alterations": ["tv", "television"]}]})
    job = authoring.begin_export("src", file_format=fmt, asset_kind="synonyms").result()
    if fmt == "json":
        data = httpx.get(job["resultUrl"], headers={"Ocp-Apim-Subscription-Key": admin}, timeout=30).json()
        assert "Qnas" not in data["Assets"] and data["Assets"]["Synonyms"] == [{"Alterations": ["tv", "television"]}]
    authoring.begin_import_assets("kb", {"fileUri": job["resultUrl"]}, file_format=fmt).result()
    assert [q["answer"] for q in authoring.list_qnas("kb")] == ["Use the link."]
    assert [s["alterations"] for s in authoring.list_synonyms("kb")] == [["tv", "television"]]


@pytest.mark.parametrize("fmt", ["json", "tsv", "excel"])
def test_users_questions_sent_as_feedback_move_with_an_export(live, admin, fmt):
    """The suggestions of add_feedback were listed for their QnA but no export carried them: a KB moved through
    export and import lost them.  They are exported among the QnA's suggested questions and come back as such."""
    live.service.import_content("src", KnowledgeBaseContent([QnA(["capital of germany?"], "Berlin.", id=10)]))
    authoring, _ = clients(live, admin)
    authoring.add_feedback("src", {"records": [{"userId": "u", "userQuestion": "german capital city?", "qnaId": 10}]})
    _export_and_import(live, admin, "src", f"moved-{fmt}", fmt)
    [moved] = authoring.list_qnas(f"moved-{fmt}")
    assert [s["question"] for c in moved["activeLearningSuggestions"] for s in c["suggestedQuestions"]] == [
        "german capital city?"]


def test_feedback_for_a_qna_an_import_replaced_is_dropped(live, admin):
    """Feedback outlived an import that gave its QnA's id to another answer: the bread QnA was offered "german
    capital city?" as a suggestion.  Feedback stays with a QnA the import kept as it was."""
    authoring, _ = clients(live, admin)
    authoring.begin_import_assets("fb", {"assets": {"qnas": [
        {"id": 10, "answer": "Berlin.", "questions": ["capital of germany?"]},
        {"id": 11, "answer": "Paris.", "questions": ["capital of france?"]}]}}).result()
    authoring.add_feedback("fb", {"records": [{"userId": "u", "userQuestion": "german capital city?", "qnaId": 10},
                                              {"userId": "u", "userQuestion": "french capital city?", "qnaId": 11}]})
    authoring.begin_import_assets("fb", {"assets": {"qnas": [
        {"id": 10, "answer": "Knead the dough.", "questions": ["How do I bake bread?"]},
        {"id": 11, "answer": "Paris.", "questions": ["capital of france?"]}]}}).result()
    suggested = {q["id"]: [s["question"] for c in q["activeLearningSuggestions"] for s in c["suggestedQuestions"]]
                 for q in authoring.list_qnas("fb")}
    assert suggested == {10: [], 11: ["french capital city?"]}


def test_a_qna_with_no_question_is_refused(live, admin):
    """An add with questions [] or [""] was stored as a QnA no question reaches, and exported with an empty Question
    column; a replace that leaves questions out still keeps the stored ones."""
    live.service.import_content("kb", KnowledgeBaseContent([QnA(["How do I reset my password?"], "Use the link.")]))
    [qna_id] = [q.id for q in live.service.store.list_qnas("kb")]
    for op in ({"op": "add", "value": {"questions": [], "answer": "a"}},
               {"op": "add", "value": {"questions": ["", "  "], "answer": "a"}},
               {"op": "add", "value": {"answer": "a"}},
               {"op": "replace", "value": {"id": qna_id, "questions": [], "answer": "new"}}):
        r = _req(live, "PATCH", "/kb/qnas", admin, json=[op])
        assert r.status_code == 400, r.text
        error = r.json()["error"]
        assert error["target"] == "[0].value.questions" and "at least one question" in error["message"], r.text
    for qnas in ([{"id": 1, "answer": "x"}], [{"id": 2, "answer": "y", "questions": ["  "]}]):  # :import too
        r = _req(live, "POST", "/kb/:import", admin, json={"assets": {"qnas": qnas}})
        assert r.status_code == 400 and r.json()["error"]["target"] == "assets.qnas[0].questions", r.text
    authoring, _ = clients(live, admin)
    authoring.begin_update_qnas("kb", [{"op": "replace", "value": {"id": qna_id, "answer": "Use the new link."}}]
                                ).result()
    assert [(q["questions"], q["answer"]) for q in authoring.list_qnas("kb")] == [
        (["How do I reset my password?"], "Use the new link.")]


def test_a_replace_without_an_id_is_refused_at_once(live, admin):
    """A replace without an id was accepted (202) and its job failed with "there is no QnA with id None"; a
    delete without one was already refused up front."""
    live.service.import_content("kb", KnowledgeBaseContent([QnA(["How do I reset my password?"], "Use the link.")]))
    r = _req(live, "PATCH", "/kb/qnas", admin, json=[{"op": "replace", "value": {"questions": ["q"], "answer": "a"}}])
    assert r.status_code == 400 and r.json()["error"]["target"] == "[0].value.id", r.text
    assert "required to replace" in r.json()["error"]["message"] and "None" not in r.json()["error"]["message"]


def test_an_import_takes_prompts_that_hold_their_qna(live, admin):
    """The spec's QnaPrompt holds a qnaId or a whole qna record, and the SDK's docstring shows the record: an import
    refused it as unsupported (PATCH already took it).  The record becomes a QnA of its own, the prompt points at
    it; and a fileUri that is no URL is refused at once, not by a job that fails."""
    authoring, qa = clients(live, admin)
    authoring.begin_import_assets("inline", {"assets": {"qnas": [
        {"id": 4, "answer": "A two.", "questions": ["two?"], "dialog": {"prompts": [
            {"displayOrder": 0, "displayText": "child", "qna": {"answer": "Inline child.",
                                                                 "questions": ["inline child?"]}}]}}]}}).result()
    stored = {q["id"]: q for q in authoring.list_qnas("inline")}
    assert sorted(stored) == [4, 5] and stored[5]["answer"] == "Inline child."
    assert [(p["qnaId"], p["displayText"]) for p in stored[4]["dialog"]["prompts"]] == [(5, "child")]
    r = _req(live, "POST", "/inline/:import", admin, json={"fileUri": "not a url"})
    assert r.status_code == 400 and r.json()["error"]["target"] == "fileUri", r.text


@pytest.mark.parametrize("uri, rule", [("http://169.254.169.254/latest", "link-local"),
                                        ("http://127.0.0.1:9/kb.tsv", "loopback"), ("http://10.1.2.3/kb.tsv", "private")])
def test_an_import_from_an_address_the_fetcher_refuses_is_a_400(live, admin, uri, rule):
    """A fileUri on the cloud metadata address was accepted (202) and its job failed later, where PATCH .../sources
    refuses such a host at once with a 400 that names the rule, as the docs say of both."""
    r = _req(live, "POST", "/meta/:import", admin, params={"format": "tsv"}, json={"fileUri": uri})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["target"] == "fileUri" and f"a {rule} address" in error["message"], error
    assert _req(live, "GET", "/meta", admin).status_code == 404  # nothing was queued, the project not made


def test_an_import_in_another_format_than_asked_says_which_to_ask(live, admin, files):
    """format=excel on a .tsv failed "basic-kb.tsv.xlsx: not a readable .xlsx workbook (its ZIP container is
    damaged)", and format=tsv on a workbook "not valid UTF-8 ... save the file as UTF-8": neither named the format
    parameter, and the first a file name that does not exist."""
    for name in ("basic-kb.tsv", "SampleQnAs.xlsx"):
        shutil.copy(SAMPLE_DOCS / "knowledge-bases" / name, files.root / name)
    (files.root / "notes.txt").write_text("Just a sentence, no columns.\n")

    def failure(name: str, fmt: str) -> str:
        r = _req(live, "POST", "/fmt/:import", admin, params={"format": fmt}, json={"fileUri": f"{files.url}/{name}"})
        assert r.status_code == 202, r.text
        job = wait_for_job(r.headers["Operation-Location"], headers={"Ocp-Apim-Subscription-Key": admin})
        assert job["status"] == "failed", job
        return job["errors"][0]["message"]

    assert failure("basic-kb.tsv", "excel") == (
        "basic-kb.tsv: the file does not look like an Excel workbook (format=excel); it looks like a tab-separated "
        "(TSV) file: import it with format=tsv.")
    assert failure("SampleQnAs.xlsx", "tsv") == (
        "SampleQnAs.xlsx: the file does not look like a tab-separated (TSV) file (format=tsv); it looks like an "
        "Excel workbook: import it with format=excel.")
    assert "it looks like a tab-separated (TSV) file: import it with format=tsv" in failure("basic-kb.tsv", "json")
    assert "(format=excel reads the file as an Excel workbook: if it is another, import it with that format)" in \
        failure("notes.txt", "excel")
    authoring, _ = clients(live, admin)
    authoring.begin_import_assets("fmt", {"fileUri": f"{files.url}/SampleQnAs.xlsx"}, file_format="excel").result()
    assert len(list(authoring.list_qnas("fmt"))) == len(read_file(SAMPLE_DOCS / "knowledge-bases" /
                                                                  "SampleQnAs.xlsx").qnas)


def test_a_multipart_upload_is_refused_saying_what_to_send(live, admin):
    """Multipart/form-data uploads are read from 2025-05-15-preview on, the api-version whose SDK sends them; with an
    older one the 400 said "The request body is not valid JSON: Expecting value", or "not UTF-8" for a .docx: it
    names what to send instead."""
    data = (SAMPLE_DOCS / "knowledge-bases" / "SampleQnAs.tsv").read_bytes()
    headers = {"Ocp-Apim-Subscription-Key": admin}
    _req(live, "PATCH", "/mp1", admin, json={"language": "en"})
    for version in ("2023-04-01", "2023-11-15-preview"):
        for method, path, form in (
                ("POST", "/mp1/:import", {}),
                ("PATCH", "/mp1/sources", {"fileOperations": '[{"operation": "add", "fileName": "SampleQnAs.tsv"}]'})):
            r = httpx.request(method, live.url + P2 + path, params={"api-version": version}, headers=headers,
                              data=form, files={"files": ("SampleQnAs.tsv", data, "text/tab-separated-values")},
                              timeout=30)
            assert r.status_code == 400, r.text
            message = r.json()["error"]["message"]
            assert "multipart/form-data" in message and '{"fileUri": "https://..."}' in message, message
            assert "2025-05-15-preview or later" in message and "not valid JSON" not in message


def test_multipart_uploads_are_checked_as_json_bodies_are(live, admin):
    """What the preview SDK's file uploads may get wrong, each a 400 (or 413) in Azure's dialect naming it, before
    any job; the spec's own example (a fileOperations field per operation, naming the file 'fileSource') is read;
    and a source added from a file has no URL to refresh from."""
    tsv = (SAMPLE_DOCS / "knowledge-bases" / "SampleQnAs.tsv").read_bytes()
    headers = {"Ocp-Apim-Subscription-Key": admin}
    params = {"api-version": "2025-05-15-preview"}
    _req(live, "PATCH", "/mp2", admin, json={"language": "en"})

    def send(method: str, path: str, *, data=None, files=None, content=None, extra=None):
        return httpx.request(method, live.url + P2 + path, params=params, headers={**headers, **(extra or {})},
                             data=data, files=files, content=content, timeout=60)

    def refused(r, target: str | None, *words: str, status: int = 400) -> None:
        assert r.status_code == status, r.text
        error = r.json()["error"]
        assert error.get("target") == target and all(w in error["message"] for w in words), error

    refused(send("POST", "/mp2/:import", files={"file": ("faq.tsv", tsv)}), "file", "Unrecognized form part 'file'")
    refused(send("POST", "/mp2/:import", data={"files": "faq.tsv"}), "files", "sent with its filename")
    refused(send("POST", "/mp2/:import", files={"files": ("faq.tsv", b"")}), "files", "'faq.tsv' is empty")
    refused(send("PATCH", "/mp2/sources", data={"fileOperations": '[{"operation": "add", "fileName": "faq.tsv"}]'}),
            "fileOperations[0].fileName", "the request has no 'files' part")
    refused(send("PATCH", "/mp2/sources", files={"files": ("faq.tsv", tsv)}), "fileOperations", "needs 'fileOperations'")
    refused(send("PATCH", "/mp2/sources", data={"fileOperations": '[{"operation": "add"}]'},
                 files={"files": ("faq.tsv", tsv)}), "fileOperations[0]", "needs 'operation'")
    refused(send("PATCH", "/mp2/sources", data={"fileOperations": '[{"operation": "delete", "fileName": "x.tsv"}]'},
                 files={"files": ("faq.tsv", tsv)}), "files", "'faq.tsv' is named by no add or replace")
    # the body's limit, as for JSON: a 413 in Azure's dialect
    big = b"Question\tAnswer\n" + b"q\t" + b"a" * (4 * 1024 * 1024) + b"\n"
    refused(send("POST", "/mp2/:import", files={"files": ("big.tsv", big)}), None, "larger than", status=413)
    # a JSON-only route refuses a form body as it did, naming where one is read
    refused(send("PATCH", "/mp2/qnas", files={"files": ("faq.tsv", tsv)}), None, "on :import and PATCH .../sources")
    assert not live.service.store.list_qnas("mp2")  # nothing refused became a job

    # the spec's example: one fileOperations field per operation, the file named by fileSource
    r = send("PATCH", "/mp2/sources", data={"fileOperations": [
        '{"operation": "add", "fileDisplayName": "FAQ", "fileSource": "faq.tsv"}',
        '{"operation": "add", "fileSource": "basic.tsv"}']},
        files=[("files", ("faq.tsv", tsv)),
               ("files", ("basic.tsv", (SAMPLE_DOCS / "knowledge-bases" / "basic-kb.tsv").read_bytes()))])
    assert r.status_code == 202, r.text
    assert wait_for_job(r.headers["operation-location"], headers=headers)["status"] == "succeeded"
    listed = _req(live, "GET", "/mp2/sources", admin).json()["value"]
    assert {(s["source"], s["displayName"]) for s in listed} == {("faq.tsv", "FAQ"), ("basic.tsv", "basic.tsv")}
    refresh = httpx.post(f"{live.url}/openqna/projects/mp2/sources/faq.tsv/:refresh", headers=headers, timeout=30)
    assert refresh.status_code == 400 and "not a URL source" in refresh.json()["error"]["message"], refresh.text


def test_an_edit_that_sends_no_suggestions_keeps_them(live, admin):
    """The console's editor sends a replace without activeLearningSuggestions: saving a QnA (or accepting one of its
    suggestions) discarded every other suggestion pending on it.  A replace that sends none keeps the stored ones
    but those it made questions; one that sends a list (an empty one too) sets them."""
    authoring, _ = clients(live, admin)

    def cluster(question: str) -> dict:
        return {"clusterHead": question, "suggestedQuestions": [
            {"question": question, "userSuggestedCount": 2, "autoSuggestedCount": 0}]}

    authoring.begin_import_assets("al", {"assets": {"qnas": [
        {"id": 92, "answer": "Use the pen.", "questions": ["Write and draw"],
         "activeLearningSuggestions": [cluster("can i draw with surface pen"), cluster("how to write with the pen")]}
    ]}}).result()

    def pending() -> list[str]:
        [q] = authoring.list_qnas("al")
        return [s["question"] for c in q["activeLearningSuggestions"] for s in c["suggestedQuestions"]]

    assert pending() == ["can i draw with surface pen", "how to write with the pen"]
    authoring.begin_update_qnas("al", [{"op": "replace", "value": {
        "id": 92, "answer": "Use the pen (edited).", "questions": ["Write and draw"]}}]).result()
    assert pending() == ["can i draw with surface pen", "how to write with the pen"]
    authoring.begin_update_qnas("al", [{"op": "replace", "value": {  # the console's Accept
        "id": 92, "answer": "Use the pen (edited).", "questions": ["Write and draw", "Can I draw with Surface Pen"]}}
    ]).result()
    assert pending() == ["how to write with the pen"]
    authoring.begin_update_qnas("al", [{"op": "replace", "value": {
        "id": 92, "answer": "Use the pen.", "activeLearningSuggestions": []}}]).result()
    assert pending() == []


def test_a_qna_with_more_questions_than_azure_allows_is_refused(live, admin):
    """One QnA of thousands of one-word questions was accepted, each embedded by the job (3,000 took 11 s)."""
    live.service.import_content("kb", KnowledgeBaseContent([QnA(["How do I reset my password?"], "Use the link.")]))
    many = {"questions": [f"question {i}" for i in range(301)], "answer": "a"}
    r = _req(live, "PATCH", "/kb/qnas", admin, json=[{"op": "add", "value": many}])
    assert r.status_code == 400 and "has 301 questions; the limit is 300" in r.json()["error"]["message"], r.text
    r = _req(live, "POST", "/kb/:import", admin, json={"assets": {"qnas": [{"id": 1, **many}]}})
    assert r.status_code == 400 and "has 301 questions; the limit is 300" in r.json()["error"]["message"], r.text
    authoring, _ = clients(live, admin)
    assert [q["answer"] for q in authoring.list_qnas("kb")] == ["Use the link."]
    many["questions"].pop()
    authoring.begin_update_qnas("kb", [{"op": "add", "value": many}]).result()
    assert sorted(len(q["questions"]) for q in authoring.list_qnas("kb")) == [1, 300]


def test_deleting_a_qna_takes_the_prompts_to_it_out_of_the_other_qnas(live, admin):
    """The QnAs that led to a deleted QnA kept those prompts: GET .../qnas and the exports showed buttons to nothing,
    and the next save dropped them silently.  Now they go in the deleting change, and the QnAs that held them get a
    new lastUpdatedDateTime, so an editor saving the copy it read before is told of the change."""
    from openqna.clock import stamped
    from openqna.records import Dialog, Prompt

    with stamped("2026-01-02T03:04:05Z"):  # written earlier than the delete (the times are to the second)
        live.service.import_content("kb", KnowledgeBaseContent([
            QnA(["How do I charge it?"], "Plug it in.", id=1,
                dialog=Dialog(prompts=[Prompt(0, 2, "Fast charging"), Prompt(1, 3, "Battery care")])),
            QnA(["fast charging"], "Use 60 W.", id=2), QnA(["battery care"], "Keep it cool.", id=3),
            QnA(["Power menu"], "Pick one.", id=4, dialog=Dialog(prompts=[Prompt(0, 2, "Fast charging")]))]))
    live.service.deploy("kb", "production")
    authoring, qa = clients(live, admin)
    before = {q["id"]: q for q in authoring.list_qnas("kb")}
    authoring.begin_update_qnas("kb", [{"op": "delete", "value": {"id": 2}}]).result()

    after = {q["id"]: q for q in authoring.list_qnas("kb")}
    assert {i: [p["qnaId"] for p in q["dialog"]["prompts"]] for i, q in after.items()} == {1: [3], 3: [], 4: []}
    assert after[1]["lastUpdatedDateTime"] != before[1]["lastUpdatedDateTime"]
    assert after[4]["lastUpdatedDateTime"] != before[4]["lastUpdatedDateTime"]
    assert after[3]["lastUpdatedDateTime"] == before[3]["lastUpdatedDateTime"]
    for fmt, name in (("json", "x.json"), ("tsv", "x.zip")):
        job = authoring.begin_export("kb", file_format=fmt).result()
        data = httpx.get(job["resultUrl"], headers={"Ocp-Apim-Subscription-Key": admin}, timeout=30).content
        exported = {q.id: [p.qna_id for p in q.dialog.prompts] for q in read_file(name, data).qnas}
        assert exported == {1: [3], 3: [], 4: []}, fmt

    stale = {**before[1], "answer": "Plug it in, then wait.", "ifLastUpdated": before[1]["lastUpdatedDateTime"]}
    with pytest.raises(HttpResponseError, match="changed elsewhere"):
        authoring.begin_update_qnas("kb", [{"op": "replace", "value": stale}]).result()
    answer = qa.get_answers(qna_id=1, project_name="kb", deployment_name="production").answers[0]
    assert [p.qna_id for p in answer.dialog.prompts] == [2, 3]  # production keeps what it was deployed with


def _export_and_import(live, admin, source: str, target: str, fmt: str) -> None:
    """Export ``source`` through the export job and import the file into ``target`` through the import job, by the
    signed resultUrl as a client hands it on."""
    authoring, _ = clients(live, admin)
    job = authoring.begin_export(source, file_format=fmt).result()
    authoring.begin_import_assets(target, {"fileUri": job["resultUrl"]}, file_format=fmt).result()


@pytest.mark.parametrize("fmt", ["tsv", "excel", "json"])
def test_backslashes_survive_an_export_and_import(live, admin, fmt):
    """A TSV or Excel export brought ``C:\\new`` back as ``C:`` + newline + ``ew``, and CRLF as LF in Excel."""
    answers = [r"Path is C:\new\table\file.txt", r"Literal \n sequence", "Two lines\nand a CRLF\r\nend",
               "Ends with a backslash \\\nthen \\\\server\\share"]
    authoring, _ = clients(live, admin)
    authoring.create_project("paths", {"language": "en"})
    authoring.begin_update_qnas("paths", [{"op": "add", "value": {"questions": [f"{a} (q{i})"], "answer": a}}
                                          for i, a in enumerate(answers)]).result()
    _export_and_import(live, admin, "paths", "copy", fmt)
    original = {q["id"]: (q["answer"], q["questions"]) for q in authoring.list_qnas("paths")}
    copied = {q["id"]: (q["answer"], q["questions"]) for q in authoring.list_qnas("copy")}
    if fmt == "tsv":  # a TSV has no escape for a carriage return: CRLF comes back as a newline
        original = {i: (a.replace("\r\n", "\n"), [x.replace("\r\n", "\n") for x in q])
                    for i, (a, q) in original.items()}
    assert copied == original and len(copied) == len(answers)


def test_passages_stay_passages_through_a_json_export_and_import(live, admin):
    """A JSON export wrote passages as plain QnAs: imported again they answered without includeUnstructuredSources."""
    import json
    from pathlib import Path

    import openqna

    guide = Path(openqna.__file__).parent / "samples" / "product-guide.md"
    Authoring(live.service).import_file("p3", guide.name, guide.read_bytes())
    kinds = {q.id: q.kind for q in live.service.store.list_qnas("p3")}
    assert set(kinds.values()) == {"qna", "passage"}
    authoring, qa = clients(live, admin)
    job = authoring.begin_export("p3", file_format="json").result()
    data = httpx.get(job["resultUrl"], headers={"Ocp-Apim-Subscription-Key": admin}, timeout=30).content
    exported = json.loads(data)["Assets"]["Qnas"]
    assert {q["Id"]: q.get("Kind", "qna") for q in exported} == kinds
    assert all("Kind" not in q for q in exported if kinds[q["Id"]] == "qna")  # QnAs are written as Azure's are

    authoring.begin_import_assets("p3copy", json.loads(data)).result()  # the file as an import body
    assert {q.id: q.kind for q in live.service.store.list_qnas("p3copy")} == kinds
    _export_and_import(live, admin, "p3", "p3fromfile", "json")  # and as a fileUri
    assert {q.id: q.kind for q in live.service.store.list_qnas("p3fromfile")} == kinds
    passages = {i for i, kind in kinds.items() if kind == "passage"}
    for unstructured in (False, True):
        answers = qa.get_answers(question="How do I clean the lamp?", project_name="p3copy", deployment_name="test",
                                 top=10, include_unstructured_sources=unstructured).answers
        assert bool({a.qna_id for a in answers} & passages) == unstructured


@pytest.mark.parametrize("fmt", ["tsv", "excel"])
def test_passages_stay_passages_through_a_table_export_and_import(live, admin, fmt):
    """The QnA list leaves passages out; an export through the Azure API keeps them, as passages."""
    from pathlib import Path

    import openqna

    guide = Path(openqna.__file__).parent / "samples" / "product-guide.md"
    Authoring(live.service).import_file("p4", guide.name, guide.read_bytes())
    _export_and_import(live, admin, "p4", "p4copy", fmt)
    kinds = {q.id: q.kind for q in live.service.store.list_qnas("p4")}
    assert {q.id: q.kind for q in live.service.store.list_qnas("p4copy")} == kinds
    assert set(kinds.values()) == {"qna", "passage"}


def test_the_qna_list_holds_qnas_not_a_documents_passages(live, admin):
    """GET .../qnas listed a manual's passages as QnAs: the SDK showed the owner twice the QnAs they had, half of
    them never written by anyone.  Azure lists QnAs there; unstructured content is not a QnA."""
    from pathlib import Path

    import openqna

    guide = Path(openqna.__file__).parent / "samples" / "product-guide.md"
    Authoring(live.service).import_file("manual", guide.name, guide.read_bytes())
    kinds = {q.id: q.kind for q in live.service.store.list_qnas("manual")}
    qnas = sorted(i for i, kind in kinds.items() if kind == "qna")
    assert len(qnas) >= 5 and len(qnas) < len(kinds)
    authoring, _ = clients(live, admin)
    assert [q["id"] for q in authoring.list_qnas("manual")] == qnas
    assert [q["id"] for q in authoring.list_qnas("manual", source=guide.name)] == qnas
    assert [q["id"] for q in authoring.list_qnas("manual", top=3, skip=2)] == qnas[2:5]
    # paged: full pages of QnAs, and no nextLink to a page of passages after the last QnA
    pages, params = [], {"maxpagesize": "4"}
    while True:
        r = _req(live, "GET", "/manual/qnas", admin, params=params)
        assert r.status_code == 200, r.text
        pages.append([q["id"] for q in r.json()["value"]])
        if "nextLink" not in r.json():
            break
        params = {k: v[0] for k, v in parse_qs(urlparse(r.json()["nextLink"]).query).items()}
    assert pages == [qnas[i:i + 4] for i in range(0, len(qnas), 4)]
    # suggestions to accept are QnAs' too: `openqna suggestions` lists what the list and the console's Improve show
    passage = min(i for i, kind in kinds.items() if kind == "passage")
    Authoring(live.service).add_feedback("manual", [(passage, "is it bright", "u1"), (qnas[1], "first steps", "u1")])
    assert Authoring(live.service).pending_suggestions("manual") == [(qnas[1], "first steps", 1)]


def test_an_import_with_prompts_to_missing_qnas_is_refused_and_writes_nothing(live, admin, files):
    """An import stored follow-up prompts to QnAs that did not exist (never shown), which PATCH .../qnas refuses."""
    prompt = {"displayOrder": 0, "qnaId": 77, "displayText": "go deeper"}
    body = {"assets": {"qnas": [{"id": 1, "answer": "a1", "questions": ["reset device"],
                                 "dialog": {"prompts": [prompt]}}]}}
    r = _req(live, "POST", "/dang/:import", admin, params={"format": "json"}, json=body)
    assert r.status_code == 400, r.text
    message = r.json()["error"]["message"]
    assert "QnA 'reset device' (id 1)" in message and "do not exist: [77]" in message, message
    assert _req(live, "GET", "/dang", admin).status_code == 404  # the project was not created

    # a file (fetched by the job) fails its job the same way, having written nothing
    (files.root / "dang.tsv").write_text(
        "Question\tAnswer\tQnaId\tPrompts\nreset device\ta1\t1\t"
        '[{"DisplayOrder":0,"QnaId":77,"DisplayText":"go deeper"}]\n', encoding="utf-8")
    r = _req(live, "POST", "/dang/:import", admin, params={"format": "tsv"}, json={"fileUri": f"{files.url}/dang.tsv"})
    assert r.status_code == 202, r.text
    live.app.state.jobs.wait()
    job = httpx.get(r.headers["Operation-Location"], headers={"Ocp-Apim-Subscription-Key": admin}).json()
    assert job["status"] == "failed" and "QnA 'reset device' (id 1)" in job["errors"][0]["message"]
    assert "[77]" in job["errors"][0]["message"] and _req(live, "GET", "/dang", admin).status_code == 404

    # an import replaces the QnAs: a prompt may lead to one of its own, not to a stored one it deletes
    live.service.import_content("kb", KnowledgeBaseContent([QnA(["a1"], "a1", id=1), QnA(["deeper"], "d", id=77)]))
    r = _req(live, "POST", "/kb/:import", admin, json=body)
    assert r.status_code == 400 and "[77]" in r.json()["error"]["message"], r.text
    authoring, _ = clients(live, admin)
    body["assets"]["qnas"].append({"id": 77, "answer": "deeper still", "questions": ["deeper"]})
    authoring.begin_import_assets("kb", body).result()
    stored = {q["id"]: q for q in authoring.list_qnas("kb")}
    assert [p["qnaId"] for p in stored[1]["dialog"]["prompts"]] == [77] and stored[77]["answer"] == "deeper still"


def test_an_export_of_a_project_with_a_space_and_an_accent_has_a_fetchable_result_url(live, admin):
    """The resultUrl held the project's name raw ('with space é'), which urllib refuses, while the Operation-Location
    and nextLink were percent-encoded (the command line can create such a project: `openqna import "with space" f`)."""
    import urllib.request

    name = "with space é"
    Authoring(live.service).import_file(name, "faq.tsv", b"Question\tAnswer\nWhen are you open?\tFrom 9 to 5.\n")
    r = _req(live, "POST", f"/{name}/:export", admin, params={"format": "json"})
    assert r.status_code == 202
    live.app.state.jobs.wait()
    with urllib.request.urlopen(urllib.request.Request(
            r.headers["Operation-Location"], headers={"Ocp-Apim-Subscription-Key": admin}), timeout=30) as response:
        url = json.loads(response.read())["resultUrl"]
    assert url.isascii() and " " not in url and "/with%20space%20%C3%A9/export/jobs/" in url
    with urllib.request.urlopen(url, timeout=30) as response:  # signed: no key needed
        assert [q.answer for q in read_file("x.json", response.read()).qnas] == ["From 9 to 5."]
        # named after the project: in UTF-8 (RFC 6266), and in ASCII for clients that read only that
        assert response.headers["Content-Disposition"] == (
            "attachment; filename=\"with_space_.json\"; filename*=UTF-8''with%20space%20%C3%A9.json")


@pytest.mark.clients
def test_preview_sdk_sends_files(live, admin):
    """The preview SDK's begin_import_from_files and begin_update_sources_from_files (2025-05-15-preview, the
    api-version it sends by default) post multipart/form-data: they got a 400 saying what to send instead.  Now an
    import of a .tsv, an .xlsx, a .docx or a KB replica replaces the project's QnAs as a fileUri import does, the
    format told by the file's name and contents; sources are added and deleted from files; and what is wrong is a
    400 naming it."""
    from conftest import REPO

    python = REPO / ".venv-preview" / "bin" / "python"
    assert python.exists(), "run `make test` (it creates .venv-preview with the pre-release SDKs)"
    proc = subprocess.run([str(python), str(REPO / "tests" / "clients" / "preview_files.py"), live.url, admin,
                           str(SAMPLE_DOCS)], capture_output=True, text=True, timeout=500)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert seen["api_version"] == "2025-05-15-preview"
    kb = SAMPLE_DOCS / "knowledge-bases"
    assert sum(seen["import_tsv"].values()) == len(read_file(kb / "SampleQnAs.tsv").qnas)
    assert sum(seen["import_xlsx"].values()) == len(read_file(kb / "SampleV2QnAs.xlsx").qnas)
    assert seen["import_docx"] and set(seen["import_docx"]) == {"structured.docx"}, seen["import_docx"]
    assert sum(seen["import_replica"].values()) == len(read_file(kb / "SampleKBReplica.zip").qnas)
    assert sum(seen["reimport_tsv"].values()) == len(read_file(kb / "basic-kb.tsv").qnas)
    assert seen["synonyms"] == len(read_file(kb / "SampleSynonyms.tsv").synonyms)
    assert [s[:3] for s in seen["sources"]] == [["faq.tsv", "The FAQ", "file"],
                                               ["structured.docx", "structured.docx", "file"]], seen["sources"]
    assert all(s[3].endswith("/files-src/qnas") for s in seen["sources"])  # no URL: the source's QnAs here
    assert seen["source_qnas"]["faq.tsv"] == len(read_file(kb / "SampleQnAs.tsv").qnas)
    assert seen["source_qnas"]["structured.docx"] > 0
    assert seen["after_delete"] == ["structured.docx"] and set(seen["after_delete_qnas"]) == {"structured.docx"}
    assert seen["bad_no_files"]["status"] == 400 and "nothing to import" in seen["bad_no_files"]["message"]
    assert "multipart/form-data (begin_import_from_files)" in seen["bad_no_files"]["message"]
    for case, target, words in (("bad_type", "files", "notes.rtf"),
                                ("bad_ops_json", "fileOperations", "not valid JSON"),
                                ("bad_op_file", "fileOperations[0].fileName", "other.tsv")):
        bad = seen[case]
        assert bad["status"] == 400 and bad["target"] == target and words in bad["message"], (case, bad)
