"""A URL source refreshed keeps what its author edited ("smart URL refresh": Azure updates a source's QnAs "while
retaining any manual edits made previously").  Driven through the Azure SDK's authoring client, as an operations team
that edits a QnA of a published FAQ and refreshes the FAQ every six hours does."""

from __future__ import annotations

import pytest
from azure.ai.language.questionanswering.authoring import AuthoringClient
from azure.core.credentials import AzureKeyCredential

from openqna.auth.keys import create_key
from openqna.kb.refresh import Refresher

FAQ = "Question\tAnswer\nHow do I reset it?\tHold the button.\nWhat colour is it?\tBlue.\n"


@pytest.fixture
def client(live):
    client = AuthoringClient(live.url, AzureKeyCredential(create_key(live.service.store, name="a", role="admin")[1]))
    client.create_project("kb", {"language": "en"})
    return client


def source_op(files, name: str, op: str = "add", refresh: bool = False) -> dict:
    url = f"{files.url}/{name}"
    return {"op": op, "value": {"displayName": name, "source": url, "sourceUri": url, "sourceKind": "url",
                                "refresh": refresh}}


def refresh(client, files, name: str) -> None:
    client.begin_update_sources("kb", [source_op(files, name, "replace", refresh=True)]).result()


def by_first_question(client) -> dict[str, dict]:
    """The QnAs by first question; a document's QnA before its section's passage (its title is the same question)."""
    out: dict[str, dict] = {}
    for q in client.list_qnas("kb"):
        out.setdefault(q["questions"][0], q)
    return out


def edit_reset(client, files, qid: int) -> None:
    client.begin_update_qnas("kb", [{"op": "replace", "value": {
        "id": qid, "answer": "Hold the power button for 10 s.", "questions": ["How do I reset it?", "how to reboot"],
        "metadata": {"team": "ops"}, "source": f"{files.url}/faq.tsv"}}]).result()


@pytest.mark.parametrize("how", ["sources", "scheduled"])
def test_a_refresh_keeps_an_edited_qna_and_follows_the_file_elsewhere(live, client, files, how):
    (files.root / "faq.tsv").write_text(FAQ, encoding="utf-8")
    client.begin_update_sources("kb", [source_op(files, "faq.tsv")]).result()
    reset = by_first_question(client)["How do I reset it?"]
    edit_reset(client, files, reset["id"])
    (files.root / "faq.tsv").write_text(FAQ.replace("Blue.", "Dark blue."), encoding="utf-8")
    if how == "sources":
        refresh(client, files, "faq.tsv")
    else:
        state = Refresher(live.service).refresh("kb", f"{files.url}/faq.tsv")
        assert state.outcome["status"] == "updated" and state.outcome["updated"] == 1, state.outcome
    qnas = by_first_question(client)
    kept = qnas["How do I reset it?"]
    assert (kept["id"], kept["answer"], kept["questions"], kept["metadata"]) == (
        reset["id"], "Hold the power button for 10 s.", ["How do I reset it?", "how to reboot"], {"team": "ops"})
    assert qnas["What colour is it?"]["answer"] == "Dark blue." and len(qnas) == 2


def test_an_edited_qna_wins_over_its_changed_row_and_outlives_its_row(client, files):
    """The author's edit wins when the file's row changed too, and an edited QnA whose row left the file is kept (as
    Azure keeps it); an untouched QnA whose row left the file is deleted, and a new row is added."""
    (files.root / "faq.tsv").write_text(FAQ, encoding="utf-8")
    client.begin_update_sources("kb", [source_op(files, "faq.tsv")]).result()
    reset = by_first_question(client)["How do I reset it?"]
    edit_reset(client, files, reset["id"])
    (files.root / "faq.tsv").write_text(FAQ.replace("Hold the button.", "Press and hold."), encoding="utf-8")
    refresh(client, files, "faq.tsv")
    assert by_first_question(client)["How do I reset it?"]["answer"] == "Hold the power button for 10 s."
    (files.root / "faq.tsv").write_text("Question\tAnswer\nIs it waterproof?\tNo.\n", encoding="utf-8")
    refresh(client, files, "faq.tsv")
    qnas = by_first_question(client)
    assert sorted(qnas) == ["How do I reset it?", "Is it waterproof?"]
    assert qnas["How do I reset it?"]["answer"] == "Hold the power button for 10 s."


def test_a_markdown_source_keeps_an_edited_qna(live, client, files):
    page = "# Device FAQ\n\n## How do I reset it?\n\nHold the button.\n\n## What colour is it?\n\nBlue.\n"
    (files.root / "faq.md").write_text(page, encoding="utf-8")
    client.begin_update_sources("kb", [source_op(files, "faq.md")]).result()
    reset = by_first_question(client)["How do I reset it?"]
    [passage] = [q for q in live.service.store.list_qnas("kb") if q.kind == "passage" and "reset" in q.answer]
    client.begin_update_qnas("kb", [{"op": "replace", "value": {
        "id": reset["id"], "answer": "Hold the power button for 10 s.", "questions": ["How do I reset it?",
        "how to reboot"], "metadata": {"team": "ops"}, "source": f"{files.url}/faq.md"}}, {"op": "replace", "value": {
        "id": passage.id, "answer": "Hold the power button for ten seconds.", "questions": passage.questions,
        "metadata": passage.metadata, "source": passage.source}}]).result()
    (files.root / "faq.md").write_text(page.replace("Blue.", "Dark blue."), encoding="utf-8")
    refresh(client, files, "faq.md")
    qnas = by_first_question(client)
    kept = qnas["How do I reset it?"]
    assert (kept["answer"], kept["questions"], kept["metadata"]) == (
        "Hold the power button for 10 s.", ["How do I reset it?", "how to reboot"], {"team": "ops"})
    assert qnas["What colour is it?"]["answer"] == "Dark blue."
    # the edited passage stays, and its unchanged section is not added again beside it
    answers = sorted(q.answer for q in live.service.store.list_qnas("kb"))
    assert answers == ["Dark blue.", "Hold the power button for 10 s.", "Hold the power button for ten seconds.",
                       "What colour is it?\n\nDark blue."]


def test_a_qna_the_author_deleted_stays_deleted_while_its_row_is_unchanged(client, files):
    (files.root / "faq.tsv").write_text(FAQ, encoding="utf-8")
    client.begin_update_sources("kb", [source_op(files, "faq.tsv")]).result()
    client.begin_update_qnas("kb", [{"op": "delete", "value": {
        "id": by_first_question(client)["What colour is it?"]["id"]}}]).result()
    (files.root / "faq.tsv").write_text(FAQ.replace("Hold the button.", "Press and hold."), encoding="utf-8")
    refresh(client, files, "faq.tsv")
    assert {q: r["answer"] for q, r in by_first_question(client).items()} == {"How do I reset it?": "Press and hold."}
    (files.root / "faq.tsv").write_text(FAQ.replace("Blue.", "Dark blue."), encoding="utf-8")
    refresh(client, files, "faq.tsv")  # its row changed: new text in the file comes back
    assert {q: r["answer"] for q, r in by_first_question(client).items()} == {
        "How do I reset it?": "Hold the button.", "What colour is it?": "Dark blue."}


def test_an_edit_undone_follows_the_file_again(client, files):
    (files.root / "faq.tsv").write_text(FAQ, encoding="utf-8")
    client.begin_update_sources("kb", [source_op(files, "faq.tsv")]).result()
    reset = by_first_question(client)["How do I reset it?"]
    edit_reset(client, files, reset["id"])
    client.begin_update_qnas("kb", [{"op": "replace", "value": {
        "id": reset["id"], "answer": "Hold the button.", "questions": ["How do I reset it?"], "metadata": {},
        "source": f"{files.url}/faq.tsv"}}]).result()
    (files.root / "faq.tsv").write_text(FAQ.replace("Hold the button.", "Press and hold."), encoding="utf-8")
    refresh(client, files, "faq.tsv")
    assert by_first_question(client)["How do I reset it?"]["answer"] == "Press and hold."
