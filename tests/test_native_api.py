"""openqna's own routes (``api/native.py``) and the QnA edit precondition, over a real server with the real model.

These are the calls the web console makes beyond Azure's API; an API user gets them too.
"""

from __future__ import annotations

import csv
import io

import httpx
import pytest

from conftest import LiveServer, wait_for_job
from openqna.auth.keys import create_key

AUTHORING = "/language/authoring/query-knowledgebases/projects"
VERSION = {"api-version": "2023-04-01"}
TSV = ("Question\tAnswer\tSource\tMetadata\n"
       "How do I reset my password?\tUse the Forgot password link on the sign-in page.\tfaq.tsv\ttopic:account\n"
       "What are your opening hours?\tWe are open 9 to 5, Monday to Friday.\tfaq.tsv\ttopic:store\n"
       "Do you ship abroad?\tWe ship to every country in the European Union.\tfaq.tsv\ttopic:shipping\n")


def wait(location: str, key: str) -> dict:
    return wait_for_job(location, headers={"api-key": key}, states=("succeeded", "failed"))


@pytest.fixture
def secured(service):
    _, admin = create_key(service.store, name="admin", role="admin")
    with LiveServer(service) as server:
        yield server, admin


def upload(server: LiveServer, key: str, project: str, name: str, data: bytes) -> dict:
    r = httpx.post(f"{server.url}/openqna/projects/{project}/files", params={"name": name}, content=data,
                   headers={"api-key": key}, timeout=30)
    assert r.status_code == 202, r.text
    return wait(r.headers["Operation-Location"], key)


def test_whoami_answers_before_a_key_and_names_the_grants(service, secured):
    server, admin = secured
    nobody = httpx.get(f"{server.url}/openqna/whoami").json()
    assert nobody == {"open": False, "signedIn": False, "reason": "no API key or bearer token was sent", "grants": []}
    key, scoped = create_key(service.store, name="bot", role="query", projects=["faq"])
    me = httpx.get(f"{server.url}/openqna/whoami", headers={"api-key": scoped}).json()
    assert me == {"open": False, "signedIn": True, "name": "bot", "keyId": key.id,
                  "grants": [{"role": "query", "projects": ["faq"]}]}
    assert httpx.get(f"{server.url}/openqna/whoami", headers={"api-key": "oq_wrong"}).json()["reason"] == \
        "the API key is not valid"


def test_an_open_server_signs_everyone_in_as_admin(live):
    assert httpx.get(f"{live.url}/openqna/whoami").json()["grants"] == [{"role": "admin", "projects": None}]


def test_keys_are_created_once_listed_and_revoked_by_an_admin_only(service, secured):
    server, admin = secured
    made = httpx.post(f"{server.url}/openqna/keys", json={"name": "writer", "role": "author", "projects": ["faq"]},
                      headers={"api-key": admin})
    assert made.status_code == 201
    key = made.json()
    assert key["secret"].startswith("oq_") and key["projects"] == ["faq"]
    listed = httpx.get(f"{server.url}/openqna/keys", headers={"api-key": admin}).json()["value"]
    assert {k["name"] for k in listed} == {"admin", "writer"} and all("secret" not in k for k in listed)
    refused = httpx.get(f"{server.url}/openqna/keys", headers={"api-key": key["secret"]})
    assert refused.status_code == 403 and "'admin'" in refused.json()["error"]["message"]
    bad = httpx.post(f"{server.url}/openqna/keys", json={"role": "owner"}, headers={"api-key": admin})
    assert bad.status_code == 400 and bad.json()["error"]["target"] == "role"
    assert httpx.delete(f"{server.url}/openqna/keys/{key['id']}", headers={"api-key": admin}).status_code == 204
    assert httpx.get(f"{server.url}/openqna/whoami", headers={"api-key": key["secret"]}).json()["signedIn"] is False
    assert httpx.delete(f"{server.url}/openqna/keys/{key['id']}", headers={"api-key": admin}).status_code == 404


def test_an_uploaded_file_is_imported_as_a_job_and_listed_with_counts(secured):
    server, admin = secured
    job = upload(server, admin, "faq", "faq.tsv", TSV.encode())
    assert job["status"] == "succeeded" and job["kind"] == "upload"
    listed = httpx.get(f"{server.url}/openqna/projects", headers={"api-key": admin}).json()["value"]
    assert [(p["projectName"], p["qnas"], p["passages"], p["deployments"]) for p in listed] == [("faq", 3, 0, [])]
    # which model embedded it, and which this server runs (a user who chose OPENQNA_EMBEDDER could not tell)
    health = httpx.get(f"{server.url}/healthz").json()
    assert listed[0]["embedder"] == health["embedder"] == server.service.embedder.name
    assert health["model"] == "local" and health["status"] == "ok"
    doc = "# Returns\n\nYou can return any item within 30 days of delivery for a full refund.\n".encode()
    assert upload(server, admin, "faq", "returns.md", doc)["status"] == "succeeded"
    passages = httpx.get(f"{server.url}/openqna/projects/faq/passages", headers={"api-key": admin}).json()["value"]
    assert passages and all(p["source"] == "returns.md" for p in passages)
    sheet = b'Question,Answer\r\n"Returns, refunds?","Within 30 days, in full."\r\n'  # a spreadsheet's CSV
    assert upload(server, admin, "faq", "more.csv", sheet)["status"] == "succeeded"
    qnas = httpx.get(f"{server.url}/language/authoring/query-knowledgebases/projects/faq/qnas",
                     params={"api-version": "2021-10-01"}, headers={"api-key": admin}).json()["value"]
    assert {"Returns, refunds?": "Within 30 days, in full."}.items() <= {
        q["questions"][0]: q["answer"] for q in qnas}.items()
    assert job["result"] == {"added": 3, "updated": 0, "unchanged": 0}  # what it did, as the console reports it
    # a synonyms file adds no record: its result says which groups it stored (the console said "no new QnAs")
    groups = b'Synonyms\n"sign in","log in"\n"refund","money back"\n'
    assert upload(server, admin, "faq", "synonyms.tsv", groups)["result"] == {
        "added": 0, "updated": 0, "unchanged": 0, "synonymGroupsAdded": 2, "synonymGroups": 2}
    again = b'Synonyms\n"sign in","log in"\n"opening hours","hours"\n'
    assert upload(server, admin, "faq", "synonyms.tsv", again)["result"] == {
        "added": 0, "updated": 0, "unchanged": 0, "synonymGroupsAdded": 1, "synonymGroups": 3}
    broken = upload(server, admin, "faq", "broken.tsv", b"Question\tAnswer\nonly a question\n")
    assert broken["status"] == "failed" and broken["errors"][0]["code"] == "InvalidArgument"
    r = httpx.post(f"{server.url}/openqna/projects/faq/files", params={"name": "notes.exe"}, content=b"x",
                   headers={"api-key": admin})
    assert r.status_code == 400 and r.json()["error"]["target"] == "name"


def test_the_diff_shows_what_deploying_would_change(secured):
    server, admin = secured
    upload(server, admin, "faq", "faq.tsv", TSV.encode())
    diff_url = f"{server.url}/openqna/projects/faq/deployments/production/diff"
    first = httpx.get(diff_url, headers={"api-key": admin}).json()
    assert len(first["added"]) == 3 and first["changed"] == first["deleted"] == []
    r = httpx.put(f"{server.url}{AUTHORING}/faq/deployments/production", params=VERSION, headers={"api-key": admin})
    assert wait(r.headers["Operation-Location"], admin)["status"] == "succeeded"
    assert httpx.get(diff_url, headers={"api-key": admin}).json() == {
        "deploymentName": "production", "added": [], "changed": [], "deleted": []}
    qnas = httpx.get(f"{server.url}{AUTHORING}/faq/qnas", params=VERSION, headers={"api-key": admin}).json()["value"]
    hours = next(q for q in qnas if q["questions"][0] == "What are your opening hours?")
    ship = next(q for q in qnas if q["questions"][0] == "Do you ship abroad?")
    ops = [{"op": "replace", "value": {**hours, "answer": "We are open 8 to 6."}}, {"op": "delete", "value": {"id": ship["id"]}},
           {"op": "add", "value": {"questions": ["Can I pay by card?"], "answer": "Yes, every major card."}}]
    r = httpx.patch(f"{server.url}{AUTHORING}/faq/qnas", params=VERSION, json=ops, headers={"api-key": admin})
    assert wait(r.headers["Operation-Location"], admin)["status"] == "succeeded"
    diff = httpx.get(diff_url, headers={"api-key": admin}).json()
    assert [x["question"] for x in diff["added"]] == ["Can I pay by card?"]
    assert [x["id"] for x in diff["changed"]] == [hours["id"]]
    assert [x["id"] for x in diff["deleted"]] == [ship["id"]]
    assert httpx.get(f"{server.url}/openqna/projects/faq/deployments/test/diff", headers={"api-key": admin}).status_code == 400


def test_every_deploy_is_a_version_compared_and_rolled_back(service, secured):
    server, admin = secured
    headers = {"api-key": admin}
    upload(server, admin, "faq", "faq.tsv", TSV.encode())
    upload(server, admin, "faq", "returns.md", b"# Returns\n\nYou can return any item within 30 days of delivery.\n")
    deploy_url = f"{server.url}{AUTHORING}/faq/deployments/production"
    assert wait(httpx.put(deploy_url, params=VERSION, headers=headers).headers["Operation-Location"],
                admin)["status"] == "succeeded"
    qnas = httpx.get(f"{server.url}{AUTHORING}/faq/qnas", params=VERSION, headers=headers).json()["value"]
    hours = next(q for q in qnas if q["questions"][0] == "What are your opening hours?")
    ops = [{"op": "replace", "value": {**hours, "answer": "We are open 8 to 6.", "metadata": {"topic": "hours"}}}]
    r = httpx.patch(f"{server.url}{AUTHORING}/faq/qnas", params=VERSION, json=ops, headers=headers)
    assert wait(r.headers["Operation-Location"], admin)["status"] == "succeeded"
    assert wait(httpx.put(deploy_url, params=VERSION, headers=headers).headers["Operation-Location"],
                admin)["status"] == "succeeded"

    versions = httpx.get(f"{server.url}/openqna/projects/faq/versions", headers=headers).json()["value"]
    assert [(v["deploymentName"], v["version"], v["qnas"], v["current"]) for v in versions] == [
        ("production", 1, 4, False), ("production", 2, 4, True)]
    assert versions[0]["passages"] > 0 and versions[0]["deployedBy"] == f"key admin ({service.store.list_keys()[0].id})"

    compare = httpx.get(f"{server.url}/openqna/projects/faq/compare", params={"old": "v1", "new": "production"},
                        headers=headers).json()
    assert compare["passages"] == {"added": [], "changed": [], "deleted": []}
    [changed] = compare["qnas"]["changed"]
    assert changed["id"] == hours["id"] and set(changed["changes"]) == {"answer", "metadata"}
    assert changed["changes"]["answer"] == {"old": "We are open 9 to 5, Monday to Friday.", "new": "We are open 8 to 6."}

    back = httpx.post(f"{server.url}/openqna/projects/faq/deployments/production/:rollback", params={"version": "v1"},
                      headers=headers)
    assert back.status_code == 200 and back.json()["version"] == 1
    query = httpx.post(f"{server.url}/language/:query-knowledgebases",
                       params={**VERSION, "projectName": "faq", "deploymentName": "production"},
                       json={"question": "What are your opening hours?", "top": 1}, headers=headers).json()
    assert query["answers"][0]["answer"] == "We are open 9 to 5, Monday to Friday."
    after = httpx.get(f"{server.url}/openqna/projects/faq/versions", headers=headers).json()["value"]
    assert [(v["version"], v["current"]) for v in after] == [(1, False), (2, False), (1, True)]

    for params, status, target in (({}, 400, "version"), ({"version": "latest"}, 400, "version"),
                                   ({"version": "7"}, 404, None)):
        r = httpx.post(f"{server.url}/openqna/projects/faq/deployments/production/:rollback", params=params,
                       headers=headers)
        assert r.status_code == status and r.json()["error"]["message"]
        if target:
            assert r.json()["error"]["target"] == target
    missing = httpx.post(f"{server.url}/openqna/projects/faq/deployments/staging/:rollback", params={"version": "1"},
                         headers=headers)
    assert missing.status_code == 404 and "was not found" in missing.json()["error"]["message"]
    _, reader = create_key(service.store, name="reader", role="query", projects=["faq"])
    assert httpx.get(f"{server.url}/openqna/projects/faq/versions", headers={"api-key": reader}).status_code == 403
    no_old = httpx.get(f"{server.url}/openqna/projects/faq/compare", headers=headers)
    assert no_old.status_code == 400 and no_old.json()["error"]["target"] == "old"


def test_an_edit_from_a_stale_copy_is_reported_not_applied(secured):
    server, admin = secured
    upload(server, admin, "faq", "faq.tsv", TSV.encode())
    qnas = httpx.get(f"{server.url}{AUTHORING}/faq/qnas", params=VERSION, headers={"api-key": admin}).json()["value"]
    hours = next(q for q in qnas if q["questions"][0] == "What are your opening hours?")
    stale = {**hours, "answer": "Closed on Sundays.", "ifLastUpdated": "2000-01-01T00:00:00Z"}
    r = httpx.patch(f"{server.url}{AUTHORING}/faq/qnas", params=VERSION, json=[{"op": "replace", "value": stale}],
                    headers={"api-key": admin})
    job = wait(r.headers["Operation-Location"], admin)
    assert job["status"] == "failed" and job["errors"][0]["code"] == "Conflict"
    assert "was changed elsewhere" in job["errors"][0]["message"]
    fresh = {**hours, "answer": "Closed on Sundays.", "ifLastUpdated": hours["lastUpdatedDateTime"]}
    r = httpx.patch(f"{server.url}{AUTHORING}/faq/qnas", params=VERSION, json=[{"op": "replace", "value": fresh}],
                    headers={"api-key": admin})
    assert wait(r.headers["Operation-Location"], admin)["status"] == "succeeded"
    after = httpx.get(f"{server.url}{AUTHORING}/faq/qnas", params=VERSION, headers={"api-key": admin}).json()["value"]
    assert next(q for q in after if q["id"] == hours["id"])["answer"] == "Closed on Sundays."
    # a delete from a stale copy too: deleting what someone changed since it was read would lose their change
    edited = next(q for q in after if q["id"] == hours["id"])
    for since, status in (("2000-01-01T00:00:00Z", "failed"), (edited["lastUpdatedDateTime"], "succeeded")):
        r = httpx.patch(f"{server.url}{AUTHORING}/faq/qnas", params=VERSION, headers={"api-key": admin},
                        json=[{"op": "delete", "value": {"id": hours["id"], "ifLastUpdated": since}}])
        job = wait(r.headers["Operation-Location"], admin)
        assert job["status"] == status and (status == "succeeded" or job["errors"][0]["code"] == "Conflict"), job
        left = httpx.get(f"{server.url}{AUTHORING}/faq/qnas", params=VERSION, headers={"api-key": admin}).json()
        assert (hours["id"] in {q["id"] for q in left["value"]}) == (status == "failed")
    # an add has no earlier version: a precondition on it is refused at once, not left to fail the job
    r = httpx.patch(f"{server.url}{AUTHORING}/faq/qnas", params=VERSION, headers={"api-key": admin},
                    json=[{"op": "add", "value": {"questions": ["New?"], "answer": "Yes.",
                                                  "ifLastUpdated": hours["lastUpdatedDateTime"]}}])
    assert r.status_code == 400 and r.json()["error"]["target"] == "[0].value.ifLastUpdated"
    assert "is for 'replace'" in r.json()["error"]["message"]


def test_inspect_shows_what_a_confidence_is_made_of_and_why_the_default_answer_was_given(service, secured):
    server, admin = secured
    upload(server, admin, "faq", "faq.tsv", TSV.encode())
    _, reader = create_key(service.store, name="reader", role="query", projects=["faq"])
    url = f"{server.url}/openqna/projects/faq/:inspect"
    body = {"question": "how can I reset my password", "top": 2, "confidenceScoreThreshold": 0.3}
    out = httpx.post(url, json=body, headers={"api-key": reader}).json()
    assert out["defaultAnswerUsed"] is False and out["answers"][0]["questions"] == ["How do I reset my password?"]
    parts = out["candidates"][0]["parts"]
    assert {"qsim", "asim", "qcov", "bm25", "kb_adaptation", "context", "logit", "exact_match"} <= set(parts)
    # the same confidence the runtime gives
    runtime = httpx.post(f"{server.url}/language/:query-knowledgebases", json=body, headers={"api-key": reader},
                         params={**VERSION, "projectName": "faq", "deploymentName": "test"}).json()
    assert runtime["answers"][0]["confidenceScore"] == out["candidates"][0]["confidenceScore"]
    assert out["readAs"] is None  # read as asked
    typed = httpx.post(url, json={**body, "question": "how can I reset my pasword"}, headers={"api-key": reader})
    assert typed.json()["readAs"] == "how can I reset my password"  # what the ranker read: the typo corrected
    # a paraphrase on a three-QnA FAQ page may be answered at 0.99 or more, never at 1.0 (an exact match's)
    strict = httpx.post(url, json={**body, "confidenceScoreThreshold": 1.0}, headers={"api-key": reader}).json()
    assert strict["defaultAnswerUsed"] is True and "below the threshold 1.00" in strict["defaultAnswerReason"]
    assert strict["answers"][0]["id"] == -1 and strict["candidates"][0]["belowThreshold"] is True
    assert httpx.post(url, json={"top": 1}, headers={"api-key": reader}).json()["error"]["target"] == "question"
    # which of a QnA's questions the meaning matched (the console named its first question, whichever matched)
    assert out["candidates"][0]["matchedQuestion"] == "How do I reset my password?"
    assert "qsim_question" not in parts  # a position, not a part of the confidence
    added = httpx.patch(f"{server.url}{AUTHORING}/faq/qnas", params=VERSION, headers={"api-key": admin}, json=[
        {"op": "add", "value": {"questions": ["Which payment methods do you accept?", "Can I pay with PayPal?",
                                              "Do you take credit cards?"], "answer": "Cards and PayPal."}}])
    wait(added.headers["Operation-Location"], admin)
    for asked, matched in (("can I use paypal to pay", "Can I pay with PayPal?"),
                           ("do you accept visa credit cards", "Do you take credit cards?")):
        best = httpx.post(url, json={**body, "question": asked}, headers={"api-key": reader}).json()["candidates"][0]
        assert best["answer"] == "Cards and PayPal." and best["matchedQuestion"] == matched, (asked, best)


def test_the_query_log_is_opt_in_hashes_users_and_reports_what_to_improve(service, secured, monkeypatch):
    from openqna.store import LoggedQuery

    server, admin = secured
    upload(server, admin, "faq", "faq.tsv", TSV.encode())
    r = httpx.put(f"{server.url}{AUTHORING}/faq/deployments/production", params=VERSION, headers={"api-key": admin})
    wait(r.headers["Operation-Location"], admin)
    ask_url = f"{server.url}/language/:query-knowledgebases"

    def ask(question: str, user: str, deployment: str = "production") -> dict:
        return httpx.post(ask_url, params={**VERSION, "projectName": "faq", "deploymentName": deployment},
                          json={"question": question, "userId": user, "confidenceScoreThreshold": 0.5},
                          headers={"api-key": admin}).json()["answers"][0]

    ask("do you sell pizza", "alice")  # before the project opts in: not logged
    settings_url = f"{server.url}/openqna/projects/faq/analytics/settings"
    assert httpx.get(settings_url, headers={"api-key": admin}).json() == {"enabled": False, "retentionDays": 30}
    bad = httpx.put(settings_url, json={"enabled": True, "retentionDays": 400}, headers={"api-key": admin})
    assert bad.status_code == 400 and bad.json()["error"]["target"] == "retentionDays"
    on = httpx.put(settings_url, json={"enabled": True, "retentionDays": 7}, headers={"api-key": admin})
    assert on.json() == {"enabled": True, "retentionDays": 7}
    for user in ("alice", "bob", "bob"):
        assert ask("Do you sell pizza?", user)["id"] == -1
    hours = ask("when are you open during the week", "carol")
    assert hours["id"] != -1
    ask("do you sell pizza", "dave", deployment="test")  # authors trying the live state: not logged
    gen = httpx.post(f"{server.url}/qnamaker/knowledgebases/faq/generateAnswer", headers={"api-key": admin},
                     json={"question": "can I get a refund on pizza", "userId": "erin", "scoreThreshold": 50})
    assert gen.status_code == 200
    report = httpx.get(f"{server.url}/openqna/projects/faq/analytics", params={"days": 7, "lowConfidence": 1.0},
                       headers={"api-key": admin}).json()
    assert report["total"] == 5 and report["users"] == 4
    assert report["unanswered"][0] == {"question": "Do you sell pizza?", "count": 3,
                                       "lastAsked": report["unanswered"][0]["lastAsked"]}
    assert report["mostAsked"][0]["count"] == 3 and report["mostAsked"][0]["qnaId"] == -1
    assert any(x["qnaId"] == hours["id"] for x in report["lowConfidenceAnswers"])  # a paraphrase: under 1.0
    assert len(report["daily"]) == 7 and report["daily"][-1]["total"] == 5
    stored = service.store.list_queries("faq", "2000-01-01T00:00:00Z")
    assert not {"alice", "bob", "carol", "erin"} & {q.user_hash for q in stored}
    # the log itself, for review: JSON, and CSV as a spreadsheet opens it, a typed formula kept as text
    ask("=HYPERLINK(\"http://evil.example\",\"refund\")", "mallory")
    queries_url = f"{server.url}/openqna/projects/faq/analytics/queries"
    log = httpx.get(queries_url, params={"days": 7}, headers={"api-key": admin}).json()
    assert log["total"] == 6 and not log["truncated"]
    assert [q["question"] for q in log["value"]][:3] == ["Do you sell pizza?"] * 3
    assert {q["deployment"] for q in log["value"]} == {"production"}
    assert log["value"][3]["qnaId"] == hours["id"] and log["value"][3]["confidence"] == round(hours["confidenceScore"], 4)
    assert {q["user"] for q in log["value"]} == {q.user_hash for q in stored} | {log["value"][-1]["user"]}
    got = httpx.get(queries_url, params={"days": 7, "format": "csv"}, headers={"api-key": admin})
    assert got.headers["content-type"] == "text/csv; charset=utf-8" and got.content.startswith(b"\xef\xbb\xbf")
    assert got.headers["content-disposition"].startswith('attachment; filename="faq-queries-')
    rows = list(csv.DictReader(io.StringIO(got.content.decode("utf-8-sig"))))
    assert [r["question"] for r in rows] == [q["question"] for q in log["value"][:-1]] + [
        "'=HYPERLINK(\"http://evil.example\",\"refund\")"]
    assert rows[3]["qnaId"] == str(hours["id"]) and float(rows[3]["confidence"]) == round(hours["confidenceScore"], 4)
    monkeypatch.setattr("openqna.kb.query_log.MAX_DOWNLOAD_ROWS", 4)  # more than a download holds: the newest
    cut = httpx.get(queries_url, params={"days": 7, "format": "csv"}, headers={"api-key": admin})
    assert cut.headers["x-total-count"] == "6" and cut.headers["x-truncated"] == "true"
    assert list(csv.DictReader(io.StringIO(cut.content.decode("utf-8-sig")))) == rows[2:]
    monkeypatch.undo()
    for params, target in (({"format": "xml"}, "format"), ({"days": 400}, "days")):
        bad = httpx.get(queries_url, params=params, headers={"api-key": admin})
        assert bad.status_code == 400 and bad.json()["error"]["target"] == target
    assert httpx.get(f"{server.url}/openqna/projects/nope/analytics/queries",
                     headers={"api-key": admin}).status_code == 404
    # the log's opt-in check reads no project of its own: the question's read serves both
    reads: list[str] = []
    read = service.store.get_project
    monkeypatch.setattr(service.store, "get_project", lambda name: reads.append(name) or read(name))
    ask("are you open on sundays", "frank")
    monkeypatch.undo()
    assert reads == ["faq"] and len(service.store.list_queries("faq", "2000-01-01T00:00:00Z")) == 7
    # retention: older queries go when the setting is applied, and turning the log off forgets it all
    service.store.log_queries("faq", [LoggedQuery("2020-01-01T00:00:00Z", "production", "old", "", -1, 0.0)])
    httpx.put(settings_url, json={"enabled": True, "retentionDays": 1}, headers={"api-key": admin})
    assert "old" not in {q.question for q in service.store.list_queries("faq", "2000-01-01T00:00:00Z")}
    httpx.put(settings_url, json={"enabled": False}, headers={"api-key": admin})
    assert service.store.list_queries("faq", "2000-01-01T00:00:00Z") == []
    bad_days = httpx.get(f"{server.url}/openqna/projects/faq/analytics", params={"days": 0}, headers={"api-key": admin})
    assert bad_days.status_code == 400 and bad_days.json()["error"]["target"] == "days"


def test_calibration_on_an_uploaded_development_file(secured):
    """The curve `openqna calibrate` fits, over HTTP: before and after, saved only when asked, and reset."""
    server, admin = secured
    upload(server, admin, "faq", "faq.tsv", TSV.encode())
    qnas = httpx.get(f"{server.url}{AUTHORING}/faq/qnas", params=VERSION, headers={"api-key": admin}).json()["value"]
    ids = {q["questions"][0]: q["id"] for q in qnas}
    dev = [("I forgot my password", ids["How do I reset my password?"]),
           ("how to change my password", ids["How do I reset my password?"]),
           ("when do you open", ids["What are your opening hours?"]),
           ("are you open on saturday", ids["What are your opening hours?"]),
           ("do you deliver to france", ids["Do you ship abroad?"]),
           ("international shipping", ids["Do you ship abroad?"]),
           ("what is the capital of peru", "none"), ("tell me a joke", "none"), ("how tall is everest", "none"),
           ("who won the world cup", "none"), ("my password does not work", ids["How do I reset my password?"]),
           ("best pizza in town", "none")]
    body = "question\tqnaId\n" + "".join(f"{q}\t{a}\n" for q, a in dev)
    url = f"{server.url}/openqna/projects/faq/calibration"
    out = httpx.post(url, content=body.encode(), headers={"api-key": admin}, timeout=60).json()
    assert (out["questions"], out["inScope"], out["offTopic"], out["saved"]) == (12, 7, 5, False)
    assert [p["threshold"] for p in out["fitted"]["curve"]][:3] == [0.0, 0.05, 0.1]
    assert out["before"]["curve"][0]["rejected"] == 0.0 and out["before"]["curve"][-1]["rejected"] == 1.0
    project = httpx.get(f"{server.url}{AUTHORING}/faq", params=VERSION, headers={"api-key": admin})
    assert project.status_code == 200
    saved = httpx.post(url, params={"save": "true"}, content=body.encode(), headers={"api-key": admin}, timeout=60)
    assert saved.json()["saved"] is True
    again = httpx.post(url, content=body.encode(), headers={"api-key": admin}, timeout=60).json()
    assert again["before"]["scale"] == saved.json()["fitted"]["scale"]  # the fit is what queries now read
    assert httpx.delete(url, headers={"api-key": admin}).status_code == 204
    reset = httpx.post(url, content=body.encode(), headers={"api-key": admin}, timeout=60).json()
    assert reset["before"]["scale"] == out["before"]["scale"]
    bad = httpx.post(url, content=b"question\tqnaId\nwhat\tsoon\n", headers={"api-key": admin})
    assert bad.status_code == 400 and "neither a QnA id nor 'none'" in bad.json()["error"]["message"]
    few = httpx.post(url, content=b"what\tnone\n", headers={"api-key": admin})
    assert few.status_code == 400 and "too few" in few.json()["error"]["message"]


def test_a_suggestion_is_rejected_and_no_longer_listed(secured):
    server, admin = secured
    upload(server, admin, "faq", "faq.tsv", TSV.encode())
    qnas = httpx.get(f"{server.url}{AUTHORING}/faq/qnas", params=VERSION, headers={"api-key": admin}).json()["value"]
    qid = next(q["id"] for q in qnas if q["questions"][0] == "Do you ship abroad?")
    r = httpx.post(f"{server.url}{AUTHORING}/faq/feedback", params=VERSION, headers={"api-key": admin}, json={
        "records": [{"userId": "u", "userQuestion": "ship to norway?", "qnaId": qid},
                    {"userId": "v", "userQuestion": "is delivery free", "qnaId": qid}]})
    assert r.status_code == 204

    def suggested() -> list[str]:
        listed = httpx.get(f"{server.url}{AUTHORING}/faq/qnas", params=VERSION, headers={"api-key": admin}).json()
        q = next(x for x in listed["value"] if x["id"] == qid)
        return sorted(s["question"] for c in q["activeLearningSuggestions"] for s in c["suggestedQuestions"])

    assert suggested() == ["is delivery free", "ship to norway?"]
    url = f"{server.url}/openqna/projects/faq/suggestions/:reject"
    assert httpx.post(url, json={"qnaId": qid, "question": "is delivery free"}, headers={"api-key": admin}).status_code == 204
    assert suggested() == ["ship to norway?"]
    again = httpx.post(url, json={"qnaId": qid, "question": "is delivery free"}, headers={"api-key": admin})
    assert again.status_code == 404
    assert httpx.post(url, json={"qnaId": qid}, headers={"api-key": admin}).status_code == 400
