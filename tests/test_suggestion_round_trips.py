"""Active-learning suggestions are counted once, whether they came from users' feedback or from an imported file, and
a round trip changes nothing: an export imported again, or a QnA read and sent back unchanged (GET, then PATCH
replace with the same value).  Driven through the Azure SDK's authoring client."""

from __future__ import annotations

import pytest
from azure.ai.language.questionanswering.authoring import AuthoringClient
from azure.core.credentials import AzureKeyCredential

from openqna.auth.keys import create_key
from openqna.kb.authoring import Authoring


@pytest.fixture
def client(live):
    return AuthoringClient(live.url, AzureKeyCredential(create_key(live.service.store, name="a", role="admin")[1]))


def suggestions(client, project: str = "kb") -> list[tuple[str, list[tuple[str, int, int]]]]:
    [qna] = client.list_qnas(project)
    return [(c["clusterHead"], [(s["question"], s["userSuggestedCount"], s["autoSuggestedCount"])
                                for s in c["suggestedQuestions"]]) for c in qna["activeLearningSuggestions"]]


@pytest.mark.parametrize("fmt", ["json", "tsv"])
def test_an_export_imported_again_does_not_duplicate_feedback(live, client, fmt):
    client.begin_import_assets("kb", {"assets": {"qnas": [
        {"id": 1, "answer": "Zebras sleep standing", "questions": ["how do zebras sleep"]}]}}).result()
    client.add_feedback("kb", {"records": [{"userId": "u", "userQuestion": "zebra nap", "qnaId": 1}]})
    for _ in range(3):
        job = client.begin_export("kb", file_format=fmt).result()
        client.begin_import_assets("kb", {"fileUri": job["resultUrl"]}, file_format=fmt).result()
        assert suggestions(client) == [("zebra nap", [("zebra nap", 1, 0)])]
    assert Authoring(live.service).pending_suggestions("kb") == [(1, "zebra nap", 1)]


def test_an_imported_suggestion_and_the_same_feedback_are_one_cluster_that_a_read_modify_write_keeps(client):
    client.begin_import_assets("kb", {"assets": {"qnas": [
        {"id": 1, "answer": "Zebras sleep standing", "questions": ["how do zebras sleep"],
         "activeLearningSuggestions": [{"clusterHead": "zebra sleeping", "suggestedQuestions": [
             {"question": "zebra sleeping", "userSuggestedCount": 3, "autoSuggestedCount": 1}]}]}]}}).result()
    client.add_feedback("kb", {"records": [{"userId": "u", "userQuestion": "zebra sleeping", "qnaId": 1}]})
    merged = [("zebra sleeping", [("zebra sleeping", 4, 1)])]
    assert suggestions(client) == merged
    [qna] = client.list_qnas("kb")
    qna.pop("lastUpdatedDateTime")
    client.begin_update_qnas("kb", [{"op": "replace", "value": qna}]).result()
    assert suggestions(client) == merged
    client.add_feedback("kb", {"records": [{"userId": "u", "userQuestion": "zebra sleeping", "qnaId": 1}]})
    assert suggestions(client) == [("zebra sleeping", [("zebra sleeping", 5, 1)])]


def test_the_cli_export_imported_again_changes_nothing(tmp_path):
    """``openqna export`` then ``openqna import`` of the same project (the upload job merges the same way)."""
    from openqna.store.sqlite import SQLiteStore
    from test_cli import run

    faq = tmp_path / "faq.tsv"
    faq.write_text("Question\tAnswer\nhow do zebras sleep\tZebras sleep standing\n", encoding="utf-8")
    run("import", "kb", str(faq), data=tmp_path)
    store = SQLiteStore(tmp_path)
    [qna] = store.list_qnas("kb")
    store.add_feedback("kb", [(qna.id, "zebra nap", "u")])
    store.close()
    for name in ("kb.json", "kb.tsv"):
        run("export", "kb", str(tmp_path / name), data=tmp_path)
        assert "0 added, 0 updated, 1 unchanged" in run("import", "kb", str(tmp_path / name), data=tmp_path).stdout
    run("export", "kb", str(tmp_path / "again.json"), data=tmp_path)
    assert (tmp_path / "again.json").read_bytes() == (tmp_path / "kb.json").read_bytes()
