"""The Azure runtime over real HTTP: the official SDK 1.1.0 unchanged, and raw requests for the wire details."""

from __future__ import annotations

import httpx
import pytest
from azure.ai.language.questionanswering import QuestionAnsweringClient
from azure.ai.language.questionanswering.models import (
    KnowledgeBaseAnswerContext,
    MetadataFilter,
    QueryFilters,
    ShortAnswerOptions,
    TextDocument,
)
from azure.core.credentials import AzureKeyCredential
from azure.core.exceptions import ClientAuthenticationError, HttpResponseError, ResourceNotFoundError

from conftest import SAMPLE_DOCS
from openqna.auth.keys import create_key
from openqna.ingest import parse_document
from openqna.kb.documents import ingest_document
from openqna.records import InvalidArgument
from test_service import surface_kb

QKB = "/language/:query-knowledgebases"


@pytest.fixture
def server(live):
    live.service.import_content("surface", surface_kb())
    live.service.deploy("surface", "production")
    return live


@pytest.fixture
def secured(server):
    _, secret = create_key(server.service.store, name="tests", role="query")
    return server, secret


def client(server, key="any-key-on-an-open-server"):
    return QuestionAnsweringClient(server.url, AzureKeyCredential(key))


def post(server, path, body, *, key=None, params=None, **kw):
    headers = {"Ocp-Apim-Subscription-Key": key} if key else {}
    params = {"api-version": "2023-04-01", **(params or {})}
    return httpx.post(server.url + path, params=params, json=body, headers=headers, timeout=30, **kw)


def test_sdk_get_answers_with_every_option(secured):
    server, secret = secured
    with client(server, secret) as c:
        result = c.get_answers(
            question="how long does charging the battery take?", project_name="surface", deployment_name="production",
            top=2, user_id="sd53lsY=", confidence_threshold=0.2, ranker_kind="Default",
            filters=QueryFilters(metadata_filter=MetadataFilter(metadata=[("Category", "POWER")],
                                                                logical_operation="AND"),
                                 source_filter=["manual.pdf"], logical_operation="AND"),
            short_answer_options=ShortAnswerOptions(confidence_threshold=0.0, top=1),
            include_unstructured_sources=True,
        )
    top = result.answers[0]
    assert top.qna_id == 1 and top.source == "manual.pdf"
    assert top.metadata == {"category": "power", "product": "surface"}
    assert [(p.display_order, p.qna_id, p.display_text) for p in top.dialog.prompts] == \
        [(0, 3, "Fast charging"), (1, 4, "Battery care")]
    assert top.dialog.is_context_only is False
    assert top.short_answer is not None and "two to four hours" in top.short_answer.text
    assert 0.2 <= top.confidence <= 1



def test_sdk_azure_sample_request_on_the_product_manual(live):
    """Azure's documented sample request on the Surface Pro 4 manual, imported as ``openqna import`` does (issue 22)."""
    manual = SAMPLE_DOCS / "data-source-formats" / "product-manual.pdf"
    ingest_document(live.service, "manual", parse_document(manual.name, manual.read_bytes()))
    with client(live) as c:
        result = c.get_answers(
            question="how long it takes to charge surface?", project_name="manual", deployment_name="test", top=3,
            confidence_threshold=0.2, include_unstructured_sources=True,
            short_answer_options=ShortAnswerOptions(confidence_threshold=0.2, top=1))
    top = result.answers[0]
    # the section or its passage, whichever comes first: both are read through the text that answers
    assert top.answer.lstrip("*").startswith("Power and charging") and top.confidence >= 0.5
    assert top.short_answer is not None and top.short_answer.text == "two to four hours"

def test_sdk_follow_up_and_qna_id(server):
    with client(server) as c:
        follow = c.get_answers(question="Battery care", project_name="surface", deployment_name="test",
                               answer_context=KnowledgeBaseAnswerContext(previous_qna_id=1,
                                                                          previous_question="charging"))
        by_id = c.get_answers(qna_id=3, project_name="surface", deployment_name="test")
    assert follow.answers[0].qna_id == 4 and follow.answers[0].dialog.is_context_only
    assert by_id.answers[0].qna_id == 3 and by_id.answers[0].confidence == 1.0


def test_sdk_test_deployment_in_any_case(server):
    """"Test" was a deployment that does not exist (404), while a PUT of it is refused as the live state."""
    with client(server) as c:
        assert c.get_answers(qna_id=3, project_name="surface", deployment_name="Test").answers[0].qna_id == 3


def test_sdk_threshold_equal_to_an_answers_confidence_keeps_it(server):
    """Confidences are answered to 4 decimals, but the threshold was compared unrounded: an answer shown at 0.9023
    was dropped by confidence_threshold=0.9023 whenever it was ranked at 0.90226."""
    with client(server) as c:
        ask = dict(question="how long does charging the battery take?", project_name="surface",
                   deployment_name="production", top=3)
        shown = c.get_answers(**ask).answers
        for a in shown:
            kept = c.get_answers(**ask, confidence_threshold=a.confidence).answers
            assert a.qna_id in [k.qna_id for k in kept], (a.confidence, [(k.qna_id, k.confidence) for k in kept])
            assert all(k.confidence >= a.confidence for k in kept)


def test_sdk_default_answer(server):
    with client(server) as c:
        result = c.get_answers(question="what is the capital of peru", project_name="surface",
                               deployment_name="production", confidence_threshold=0.5)
    assert len(result.answers) == 1
    a = result.answers[0]
    assert (a.qna_id, a.confidence, a.answer, a.questions) == (-1, 0.0, "No good match found in KB.", [])


def test_sdk_get_answers_from_text(server):
    with client(server) as c:
        result = c.get_answers_from_text(
            question="How long does it take to charge?",
            text_documents=["Power and charging. It takes two to four hours to charge the battery.",
                            "You can use the USB port to connect a mouse."],
            language="en",
        )
        objects = c.get_answers_from_text(
            question="Which port connects a mouse?",
            text_documents=[TextDocument(id="power", text="It takes two to four hours to charge the battery."),
                            TextDocument(id="usb", text="You can use the USB port to connect a mouse.")],
        )
    assert objects.answers[0].id == "usb"
    assert result.answers[0].id == "0"
    assert "two to four hours" in result.answers[0].answer
    assert result.answers[0].short_answer is not None


def test_sdk_errors(secured):
    server, secret = secured
    with client(server, "wrong-key") as c:
        with pytest.raises(ClientAuthenticationError) as err:
            c.get_answers(question="hi", project_name="surface", deployment_name="production")
    assert err.value.error.code == "401"
    with client(server, secret) as c:
        with pytest.raises(ResourceNotFoundError) as err:
            c.get_answers(question="hi", project_name="missing", deployment_name="production")
        assert err.value.error.code == "ProjectNotFound"
        with pytest.raises(HttpResponseError) as err:
            c.get_answers(question="hi", project_name="surface", deployment_name="production", top=500)
        assert err.value.status_code == 400 and err.value.error.code == "InvalidArgument"
        assert "top" in err.value.error.message


def test_missing_key_is_401(secured):
    server, _ = secured
    r = post(server, QKB, {"question": "hi"}, params={"projectName": "surface", "deploymentName": "test"})
    assert r.status_code == 401 and r.json()["error"]["code"] == "401"
    assert "missing subscription key" in r.json()["error"]["message"]


def test_query_key_cannot_reach_other_projects(server):
    _, secret = create_key(server.service.store, role="query", projects=["other"])
    r = post(server, QKB, {"question": "hi"}, key=secret, params={"projectName": "surface", "deploymentName": "test"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "ProjectNotFound"


# botbuilder-dotnet's LanguageServiceUtils (CustomQuestionAnswering, QnAMakerDialog, Composer bots), byte for byte:
# "qnaId": 0 and a context with previousQnAId 0 mean "no id" and "no context", PascalCase filters, an empty SourceFilter.
CSHARP_BODY = (
    '{"question":"%s","top":3,'
    '"filters":{"MetadataFilter":{"Metadata":[%s],"LogicalOperation":"AND"},"SourceFilter":[],"LogicalOperation":null},'
    '"confidenceScoreThreshold":0.3,"context":%s,"qnaId":0,"rankerType":"Default",'
    '"answerSpanRequest":{"enable":true},"includeUnstructuredSources":true,"userId":"user-1"}'
)


@pytest.mark.parametrize("context", ['null', '{"previousQnAId":0,"previousUserQuery":""}'])
def test_csharp_bot_framework_body_is_answered(secured, context):
    server, secret = secured
    headers = {"Authorization": f"EndpointKey {secret}", "Ocp-Apim-Subscription-Key": secret,
               "Content-Type": "application/json"}
    params = {"projectName": "surface", "deploymentName": "production", "api-version": "2021-10-01"}
    cases = [("How long does it take to charge the battery?", "", 1),
             ("I forgot my password", "", 5),
             ("how do I plug in a second monitor", '{"Key":"category","Value":"display"}', 2)]
    for question, metadata, expected in cases:
        body = CSHARP_BODY % (question, metadata, context)
        r = httpx.post(server.url + QKB, params=params, content=body.encode(), headers=headers, timeout=30)
        assert r.status_code == 200, r.text
        top = r.json()["answers"][0]
        assert top["id"] == expected and top["confidenceScore"] >= 0.3, (question, top)


def test_csharp_follow_up_turn_and_python_prefixed_key(secured):
    server, secret = secured
    params = {"projectName": "surface", "deploymentName": "production", "api-version": "2021-10-01"}
    body = {"question": "Battery care", "top": 3, "qnaId": 4, "rankerType": "Default",
            "context": {"previousQnAId": 1, "previousUserQuery": ""}}
    # botbuilder-python sends the prefix in Ocp-Apim-Subscription-Key too
    r = httpx.post(server.url + QKB, params=params, json=body, timeout=30,
                   headers={"Ocp-Apim-Subscription-Key": f"EndpointKey {secret}"})
    assert r.status_code == 200, r.text
    assert r.json()["answers"][0]["id"] == 4
    r = httpx.post(server.url + QKB, params=params, json={**body, "qnaId": "", "rankerType": "AutoSuggestQuestion"},
                   timeout=30, headers={"Ocp-Apim-Subscription-Key": f"EndpointKey {secret}x"})
    assert r.status_code == 401


def test_wire_is_lenient_on_input_and_exact_on_output(server):
    body = {"Question": "How do I reset my password?", "TOP": "1", "confidenceScoreThreshold": "0.5",
            "filters": {"metadataFilter": {"metadata": [{"Key": "Category", "Value": "ACCOUNT"}]}},
            "queryPreferences": {"scorer": "Classic"}}
    r = post(server, QKB, body, params={"projectName": "SURFACE", "deploymentName": "test"})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/json")
    [answer] = r.json()["answers"]
    assert set(answer) == {"questions", "answer", "confidenceScore", "id", "source", "metadata", "dialog"}
    assert answer["id"] == 5 and answer["confidenceScore"] == 1.0
    assert answer["dialog"] == {"isContextOnly": False, "prompts": []}


def test_default_answer_exact_shape(server):
    r = post(server, QKB, {"question": "zzzz qqqq", "confidenceScoreThreshold": 0.99},
             params={"projectName": "surface", "deploymentName": "test"})
    assert r.json() == {"answers": [{"questions": [], "answer": "No good match found in KB.",
                                     "confidenceScore": 0.0, "id": -1, "metadata": {}}]}


@pytest.mark.parametrize("body,target", [
    ({}, "question"),
    ({"question": "x" * 1001}, "question"),
    ({"question": "hi", "top": 0}, "top"),
    ({"question": "hi", "top": "many"}, "top"),
    ({"question": "hi", "confidenceScoreThreshold": 1.5}, "confidenceScoreThreshold"),
    ({"question": "hi", "rankerType": "Fancy"}, "rankerType"),
    ({"question": "hi", "context": {"previousQnaId": "first"}}, "context.previousQnaId"),
    ({"question": "hi", "qnaId": 9223372036854775808}, "qnaId"),
    ({"question": "hi", "filters": {"metadataFilter": {"metadata": [{"key": "a"}]}}}, "filters.metadataFilter.metadata[0]"),
    ({"question": "hi", "filters": {"metadataFilter": {"metadata": [], "logicalOperation": "XOR"}}},
     "filters.metadataFilter.logicalOperation"),
    ({"question": "hi", "filters": {"sourceFilter": "manual.pdf"}}, "filters.sourceFilter"),
    ({"question": "hi", "answerSpanRequest": {"enable": True, "topAnswersWithSpan": 11}},
     "answerSpanRequest.topAnswersWithSpan"),
])
def test_bad_requests_name_the_field(server, body, target):
    r = post(server, QKB, body, params={"projectName": "surface", "deploymentName": "test"})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["code"] == "InvalidArgument" and error["target"] == target
    assert r.headers["x-ms-error-code"] == "InvalidArgument"


def test_a_bound_on_one_side_is_named_alone(server):
    """A number bounded on one side used to be refused as "between None and 2147483647"."""
    r = post(server, QKB, {"qnaId": 2**40}, params={"projectName": "surface", "deploymentName": "test"})
    assert r.json()["error"]["message"] == "'qnaId' must be at most 2147483647; got 1099511627776."
    r = httpx.get(server.url + "/language/authoring/query-knowledgebases/projects",
                  params={"api-version": "2023-04-01", "top": "-1"}, timeout=30)
    assert r.status_code == 400 and r.json()["error"]["message"] == "'top' must be at least 0; got -1."


def test_malformed_json_and_missing_parameters(server):
    r = httpx.post(server.url + QKB, params={"projectName": "surface", "deploymentName": "test",
                                              "api-version": "2021-10-01"}, content=b"{not json", timeout=10)
    assert r.status_code == 400 and "not valid JSON" in r.json()["error"]["message"]
    r = post(server, QKB, {"question": "hi"}, params={"projectName": "surface"})
    assert r.status_code == 400 and r.json()["error"]["target"] == "deploymentName"
    r = httpx.post(server.url + QKB, params={"projectName": "surface", "deploymentName": "test"},
                   json={"question": "hi"}, timeout=10)
    assert r.status_code == 400 and r.json()["error"]["target"] == "api-version"
    r = post(server, QKB, {"question": "hi"}, params={"projectName": "surface", "deploymentName": "staging"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "NotFound"


@pytest.mark.parametrize("content,words", [
    (b"[" * 10_000 + b"]" * 10_000, "nested more than 64 levels"),
    (b'{"question": "' + b"[" * 500 + b'"}', None),  # brackets inside a string are text
    (b'{"question": "reset \\ud800 password"}', "'question' holds a lone UTF-16 surrogate"),
    (b'{"question": "reset \xed\xa0\x80 password"}', "'question' holds a lone UTF-16 surrogate"),  # raw bytes
    (b'{"question": "\xed\x95\x9c\xea\xb5\xad\xec\x96\xb4 battery"}', None),  # Hangul starts with ED too
    (b'{"question": "\xff\xfe"}', "not UTF-8"),
])
def test_bodies_that_used_to_raise(server, content, words):
    r = httpx.post(server.url + QKB, params={"projectName": "surface", "deploymentName": "test",
                                              "api-version": "2023-04-01"}, content=content, timeout=30)
    if words is None:
        assert r.status_code == 200, r.text
    else:
        assert r.status_code == 400 and r.json()["error"]["code"] == "InvalidArgument", r.text
        assert words in r.json()["error"]["message"]
    emoji = httpx.post(server.url + QKB, params={"projectName": "surface", "deploymentName": "test",
                                                  "api-version": "2023-04-01"},
                       content=b'{"question": "charging \\ud83d\\ude00 time"}', timeout=30)
    assert emoji.status_code == 200  # a surrogate pair is one character


def test_body_size_is_capped(server):
    r = post(server, QKB, {"question": "hi", "pad": "x" * (5 * 1024 * 1024)},
             params={"projectName": "surface", "deploymentName": "test"})
    assert r.status_code == 413 and "larger than" in r.json()["error"]["message"]


@pytest.mark.parametrize("body,target", [
    ({"records": [{"id": "1", "text": "t"}]}, "question"),
    ({"question": "q"}, "records"),
    ({"question": "q", "records": [{"id": str(i), "text": "t"} for i in range(6)]}, "records"),
    ({"question": "q", "records": [{"id": "1", "text": "t" * 5121}]}, "records[0].text"),
    ({"question": "q", "records": [{"id": "1", "text": "t"}, {"id": "i" * 1001, "text": "t"}]}, "records[1].id"),
    ({"question": "q", "records": [{"id": "1"}]}, "records[0]"),
    ({"question": "q", "records": [{"id": "1", "text": "a"}], "stringIndexType": "Bytes"}, "stringIndexType"),
    ({"question": "q", "records": [{"id": "1", "text": "a"}], "language": "xx zz"}, "language"),
])
def test_query_text_limits(server, body, target):
    r = post(server, "/language/:query-text", body)
    assert r.status_code == 400 and r.json()["error"]["target"] == target


def test_query_text_refuses_a_record_id_longer_than_its_limit(server):
    """Issue 40: an id had no limit, and each answer echoes its record's id: up to three copies of a 4 MiB id."""
    ok = {"question": "how long is the warranty", "records": [{"id": "i" * 1000, "text": "It lasts two years."}]}
    assert post(server, "/language/:query-text", ok).json()["answers"][0]["id"] == "i" * 1000
    r = post(server, "/language/:query-text", {**ok, "records": [{"id": "i" * 1001, "text": "It lasts two years."}]})
    message = "'records[0].id' is 1001 characters long; the limit is 1000."
    assert r.status_code == 400 and r.json() == {"error": {
        "code": "InvalidArgument", "message": message, "target": "records[0].id",
        "innererror": {"code": "InvalidParameterValue", "message": message}}}


def test_query_text_utf16_offsets(server):
    text = "😀 emoji first. The warranty lasts two years from purchase."
    r = post(server, "/language/:query-text", {"question": "how long is the warranty", "stringIndexType": "Utf16CodeUnit",
                                                "records": [{"id": "a", "text": text}]})
    best = r.json()["answers"][0]
    assert "two years" in best["answer"]
    units = text.encode("utf-16-le")
    assert units[2 * best["offset"] : 2 * (best["offset"] + best["length"])].decode("utf-16-le") == best["answer"]


def test_query_text_offsets_count_text_elements_by_default(server):
    """Without stringIndexType (TextElements_v8, the REST default), an offset counts grapheme clusters: the skin-toned
    thumb (two code points), the flag (two) and the e with a combining accent (two) are one element each."""
    text = "👍🏽 🇯🇵 cafe\u0301 first. The warranty lasts two years from purchase."
    question = {"question": "how long is the warranty", "records": [{"id": "a", "text": text}]}
    by_kind = {}
    for kind in (None, "TextElements_v8", "UnicodeCodePoint"):
        body = question if kind is None else {**question, "stringIndexType": kind}
        by_kind[kind] = post(server, "/language/:query-text", body).json()["answers"][0]
    points, elements = by_kind["UnicodeCodePoint"], by_kind[None]
    span = points["answerSpan"]
    assert span["text"] == "two years" and points["answer"][span["offset"]:][: span["length"]] == "two years"
    assert elements == by_kind["TextElements_v8"]
    assert elements["answerSpan"]["offset"] == span["offset"] - 3 and elements["answerSpan"]["length"] == 9
    assert elements["length"] == points["length"] - 3 and elements["offset"] == points["offset"] == 0


def test_unknown_route_is_an_azure_404(server):
    r = httpx.get(server.url + "/language/nothing-here", timeout=10)
    assert r.status_code == 404 and r.json()["error"]["code"] == "NotFound"


@pytest.mark.parametrize("version", ["2021-10-01", "2023-04-01", "2025-05-15-preview", "2023-04-15-PREVIEW",
                                     "2021-11-01-preview", "2024-11-15-preview"])  # of the form: previews the list lacks
def test_the_api_versions_of_the_specs_are_answered(server, version):
    r = post(server, QKB, {"question": "battery"}, params={"projectName": "surface", "deploymentName": "test",
                                                            "api-version": version})
    assert r.status_code == 200, r.text


def test_an_api_version_the_service_never_had_is_refused_with_the_supported_ones(server):
    """Any api-version used to be answered as if it were 2023-04-01, so a typo went unnoticed until the
    version really mattered; it is refused now as the Azure REST API guidelines say (400, the versions listed)."""
    with QuestionAnsweringClient(server.url, AzureKeyCredential("k"), api_version="2024-13-01") as c:
        with pytest.raises(HttpResponseError) as caught:
            c.get_answers(question="battery", project_name="surface", deployment_name="production")
    error = caught.value.error
    assert caught.value.status_code == 400 and error.code == "UnsupportedApiVersionValue"
    assert "'2024-13-01'" in error.message and "2021-10-01, 2023-04-01" in error.message
    authoring = "/language/authoring/query-knowledgebases/projects"
    for wrong in ("banana", "2019-01-01", "2021-10-01-beta", "3021-01-01"):  # before QnA, not Azure's form, a typo
        r = httpx.get(server.url + authoring, params={"api-version": wrong}, timeout=30)
        assert r.status_code == 400 and r.json()["error"]["target"] == "api-version", wrong
    r = httpx.get(server.url + authoring + "/surface/qnas/jobs/no-such-job", params={"api-version": "banana"},
                  timeout=30)  # a poll may leave api-version out, but not send a wrong one
    assert r.status_code == 400 and r.json()["error"]["code"] == "UnsupportedApiVersionValue"
    r = httpx.post(server.url + QKB, params={"projectName": "surface", "deploymentName": "test"},
                   json={"question": "hi"}, timeout=10)
    assert r.status_code == 400 and r.json()["error"]["code"] == "MissingApiVersionParameter"
    assert httpx.get(server.url + authoring + "/surface/qnas/jobs/no-such-job", timeout=30).status_code == 404


def test_a_deployment_name_in_the_wrong_case_is_a_404_that_names_the_deployments(server):
    """Deployment names are case-sensitive ('test' aside): 'Production' was a bare "not found" that left the
    caller to guess why the project's production deployment did not answer."""
    with client(server) as c:
        with pytest.raises(ResourceNotFoundError) as caught:
            c.get_answers(question="battery", project_name="surface", deployment_name="Production")
    message = caught.value.error.message
    assert "case-sensitive: did you mean 'production'?" in message
    assert "Its deployments are 'production', and 'test' (the live state)." in message
    r = httpx.get(server.url + "/language/authoring/query-knowledgebases/projects/surface/deployments/Production",
                  params={"api-version": "2023-04-01"}, timeout=30)
    assert r.status_code == 404 and r.json()["error"]["message"] == message
    server.service.import_content("drafts", surface_kb())
    r = post(server, QKB, {"question": "battery"}, params={"projectName": "drafts", "deploymentName": "production"})
    assert r.status_code == 404 and "no deployments yet: deploy it, or ask 'test'" in r.json()["error"]["message"]
    r = post(server, QKB, {"question": "battery"}, params={"projectName": "surface", "deploymentName": "TEST"})
    assert r.status_code == 200 and r.json()["answers"][0]["id"] == 1  # the live state, in any case


def test_getting_the_test_deployment_says_it_is_the_live_state(server):
    """GET .../deployments/test said "Deployment 'test' ... was not found. Its deployments are 'production', and
    'test' (the live state).": not found, and listed as there, in one breath."""
    for name in ("test", "Test"):
        r = httpx.get(server.url + f"/language/authoring/query-knowledgebases/projects/surface/deployments/{name}",
                      params={"api-version": "2023-04-01"}, timeout=30)
        assert r.status_code == 404, r.text
        message = r.json()["error"]["message"]
        assert message == (f"'{name}' is the live state of project 'surface', not a deployment: no deploy records it, "
                           "so it has no deployment date. Read its QnAs and synonyms with GET .../qnas and "
                           ".../synonyms, or ask it as deployment 'test'; its deployments are 'production'.")


def test_a_deploy_to_a_name_that_differs_only_in_case_is_refused(server):
    """A deploy to 'Production' made a second deployment beside 'production', which the bots kept asking."""
    from azure.ai.language.questionanswering.authoring import AuthoringClient

    with AuthoringClient(server.url, AzureKeyCredential("k")) as authoring:
        with pytest.raises(HttpResponseError) as caught:
            authoring.begin_deploy_project("surface", "Production").result()
        assert caught.value.status_code == 400
        assert "has a deployment 'production'; deployment names are case-sensitive" in caught.value.message
        assert [d["deploymentName"] for d in authoring.list_deployments("surface")] == ["production"]
        authoring.begin_deploy_project("surface", "production").result()  # the name itself deploys as before
    with pytest.raises(InvalidArgument):  # the CLI's and the console's deploys go through the same call
        server.service.deploy("surface", "PRODUCTION")


def test_a_blank_default_answer_is_the_default_one(server):
    """A default answer of spaces was kept and answered, so a bot sent an empty message; an empty one was not."""
    authoring = "/language/authoring/query-knowledgebases/projects/surface"
    r = httpx.patch(server.url + authoring, params={"api-version": "2023-04-01"},
                    json={"settings": {"defaultAnswer": " \n "}}, timeout=30)
    assert r.status_code == 200 and r.json()["settings"]["defaultAnswer"] == "No good match found in KB."
    body = {"question": "zzzz qqqq", "confidenceScoreThreshold": 0.99}
    r = post(server, QKB, body, params={"projectName": "surface", "deploymentName": "test"})
    assert r.json()["answers"] == [{"questions": [], "answer": "No good match found in KB.", "confidenceScore": 0.0,
                                    "id": -1, "metadata": {}}]
    r = httpx.post(server.url + "/qnamaker/knowledgebases/surface/generateAnswer",
                   json={"question": "zzzz qqqq", "scoreThreshold": 99, "isTest": True}, timeout=30)
    assert r.json()["answers"][0]["answer"] == "No good match found in KB."


@pytest.mark.parametrize("path, body, target", [
    ("/surface", {"language": " "}, "language"),
    ("/newproject", {"language": ""}, "language"),
    ("/newproject", {"language": "klingon!!"}, "language"),
    ("/surface", {"language": "en_US x"}, "language"),
    ("/surface/:import", {"metadata": {"language": ""}, "assets": {"qnas": []}}, "metadata.language"),
])
def test_a_blank_language_is_refused(server, path, body, target):
    """A blank language was stored on an update (the project then had none) and taken as 'en' on a create; one
    that is no language code ('klingon!!') was stored as it came."""
    authoring = "/language/authoring/query-knowledgebases/projects"
    method = "POST" if path.endswith(":import") else "PATCH"
    r = httpx.request(method, server.url + authoring + path, params={"api-version": "2023-04-01"}, json=body,
                      timeout=30)
    assert r.status_code == 400 and r.json()["error"]["target"] == target, r.text
    assert "must be a language code such as 'en'" in r.json()["error"]["message"]
    assert httpx.get(server.url + authoring + "/surface", params={"api-version": "2023-04-01"},
                     timeout=30).json()["language"] == "en"


def test_a_number_too_long_to_read_is_called_out_of_range_not_a_non_integer(server):
    """A numeric string past 18 digits was refused as "'skip' must be an integer.", which it is."""
    r = httpx.get(server.url + "/language/authoring/query-knowledgebases/projects/surface/qnas",
                  params={"api-version": "2023-04-01", "skip": "1" + "0" * 30}, timeout=30)
    assert r.status_code == 400
    assert r.json()["error"]["message"] == "'skip' must be an integer of at most 18 digits; got one of 31 digits."
    r = post(server, QKB, {"question": "battery", "top": "9" * 40}, params={"projectName": "surface",
                                                                          "deploymentName": "test"})
    assert r.json()["error"]["message"] == "'top' must be between 1 and 50; got one of 40 digits."
    r = post(server, QKB, {"question": "battery", "top": "ten"}, params={"projectName": "surface",
                                                                       "deploymentName": "test"})
    assert r.json()["error"]["message"] == "'top' must be an integer."


@pytest.mark.parametrize("question", ["   ", "\u200b\u200b", "\ufeff", "\u200f\x01\x02", "\u00a0\n\t"])
def test_a_question_of_nothing_visible_is_refused_as_blank(server, question):
    """Zero-width spaces, a byte order mark or control characters were answered as a question (the first QnA at
    0.04); spaces were refused, but as if no question had been sent."""
    params = {"projectName": "surface", "deploymentName": "production"}
    r = post(server, QKB, {"question": question}, params=params)
    assert r.status_code == 400 and r.json()["error"]["target"] == "question", r.text
    assert "'question' is blank" in r.json()["error"]["message"]
    assert post(server, QKB, {"question": question, "qnaId": 1}, params=params).status_code == 200
    r = post(server, QKB, {}, params=params)
    assert r.status_code == 400 and "Either 'question' or 'qnaId' must be given" in r.json()["error"]["message"]


@pytest.mark.parametrize("op", ["replace", "delete"])
def test_an_if_last_updated_that_is_no_time_is_refused(server, op):
    """'garbage' was taken, and the job then failed as a Conflict ("changed elsewhere") that nothing had caused."""
    r = httpx.patch(server.url + "/language/authoring/query-knowledgebases/projects/surface/qnas",
                    params={"api-version": "2023-04-01"}, timeout=30,
                    json=[{"op": op, "value": {"id": 1, "answer": "a", "questions": ["q"], "ifLastUpdated": "garbage"}}])
    assert r.status_code == 400 and r.json()["error"]["target"] == "[0].value.ifLastUpdated", r.text
    assert "lastUpdatedDateTime the QnA was read with" in r.json()["error"]["message"]
