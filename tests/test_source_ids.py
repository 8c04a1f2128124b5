"""A QnA file added as a source keeps its hands off the project's other records: QnA Maker and Azure exports number
their QnAs from 1, so a file's ids collide with editorial QnAs and other sources' records.  Driven through the Azure
SDK's ``begin_update_sources``, as a bot team migrating from QnA Maker does."""

from __future__ import annotations

import shutil

import pytest
from azure.ai.language.questionanswering.authoring import AuthoringClient
from azure.core.credentials import AzureKeyCredential

from conftest import SAMPLE_DOCS
from openqna.auth.keys import create_key
from openqna.kb.refresh import Refresher

HEADER = "Question\tAnswer\tSource\tMetadata\tSuggestedQuestions\tIsContextOnly\tPrompts\tQnaId\n"


@pytest.fixture
def client(live):
    client = AuthoringClient(live.url, AzureKeyCredential(create_key(live.service.store, name="a", role="admin")[1]))
    client.create_project("kb", {"language": "en"})
    return client


def add_source(client, files, name: str, op: str = "add", refresh: bool = False) -> None:
    client.begin_update_sources("kb", [{"op": op, "value": {
        "displayName": name, "source": name, "sourceUri": f"{files.url}/{name}", "sourceKind": "url",
        "refresh": refresh}}]).result()


def by_answer(client) -> dict[str, dict]:
    return {q["answer"]: q for q in client.list_qnas("kb")}


def tsv(rows: list[tuple[str, str, str, int]]) -> str:
    """A QnA Maker TSV of (question, answer, prompts JSON, id) rows."""
    return HEADER + "".join(f"{q}\t{a}\teditorial\t\t[]\tFalse\t{p}\t{i}\n" for q, a, p, i in rows)


def test_a_qna_file_source_does_not_overwrite_an_editorial_qna(live, client, files):
    client.begin_update_qnas("kb", [{"op": "add", "value": {
        "questions": ["Where is the office?"], "answer": "In Leeds.", "source": "editorial"}}]).result()
    [editorial] = client.list_qnas("kb")
    shutil.copy(SAMPLE_DOCS / "knowledge-bases" / "SampleV2QnAs.tsv", files.root)
    add_source(client, files, "SampleV2QnAs.tsv")
    qnas = by_answer(client)
    assert qnas["In Leeds."]["id"] == editorial["id"] and qnas["In Leeds."]["questions"] == ["Where is the office?"]
    assert sum(q["source"] == "SampleV2QnAs.tsv" for q in qnas.values()) == 11 and len(qnas) == 12


def test_a_qna_file_source_does_not_overwrite_a_documents_qnas(live, client, files):
    for name in ("data-source-formats/multi-turn.docx", "knowledge-bases/SampleV2QnAs.tsv"):
        shutil.copy(SAMPLE_DOCS / name, files.root)
    add_source(client, files, "multi-turn.docx")
    docx = {q["id"]: q for q in client.list_qnas("kb") if q["source"] == "multi-turn.docx"}
    add_source(client, files, "SampleV2QnAs.tsv")
    after = {q["id"]: q for q in client.list_qnas("kb")}
    assert {i: after.get(i) for i in docx} == docx
    assert sum(q["source"] == "SampleV2QnAs.tsv" for q in after.values()) == 11


def test_a_moved_files_prompts_follow_and_its_ids_stay_across_refreshes(live, client, files):
    """The file's ids 1 and 2 are taken by editorial QnAs: its QnAs get others, its prompt follows its QnA 2, and a
    refresh of a changed file updates those same records (a changed answer, a changed question) rather than adding
    new ones and deleting the old."""
    client.begin_update_qnas("kb", [{"op": "add", "value": {"questions": [q], "answer": a, "source": "editorial"}}
                                    for q, a in (("Office?", "In Leeds."), ("Hours?", "Nine to five."))]).result()
    prompt = '[{"DisplayOrder":0,"QnaId":2,"DisplayText":"Fees"}]'
    (files.root / "pay.tsv").write_text(tsv([("Can I pay later?", "Yes, in three parts.", prompt, 1),
                                             ("Are there fees?", "No fees.", "[]", 2),
                                             ("Do you ship abroad?", "To the EU only.", "[]", 3)]), encoding="utf-8")
    add_source(client, files, "pay.tsv")
    qnas = by_answer(client)
    assert qnas["In Leeds."]["id"] == 1 and qnas["Nine to five."]["id"] == 2 and len(qnas) == 5
    parent, child, ship = qnas["Yes, in three parts."], qnas["No fees."], qnas["To the EU only."]
    assert {parent["id"], child["id"]}.isdisjoint({1, 2}) and ship["id"] == 3
    assert [p["qnaId"] for p in parent["dialog"]["prompts"]] == [child["id"]]

    (files.root / "pay.tsv").write_text(tsv([("Can I pay later?", "Yes, in four parts.", prompt, 1),
                                             ("Any fees at all?", "No fees.", "[]", 2),
                                             ("Do you ship abroad?", "To the EU and the UK.", "[]", 3)]),
                                        encoding="utf-8")
    add_source(client, files, "pay.tsv", op="replace", refresh=True)
    again = by_answer(client)
    assert again["Yes, in four parts."]["id"] == parent["id"] and again["No fees."]["id"] == child["id"]
    assert again["No fees."]["questions"] == ["Any fees at all?"] and again["To the EU and the UK."]["id"] == 3
    assert [p["qnaId"] for p in again["Yes, in four parts."]["dialog"]["prompts"]] == [child["id"]]
    assert again["In Leeds."]["id"] == 1 and again["Nine to five."]["id"] == 2 and len(again) == 5


def test_a_scheduled_refresh_keeps_other_sources_records(live, client, files):
    """The scheduled refresh (kb/refresh.py) reads the file again through the same path."""
    client.begin_update_qnas("kb", [{"op": "add", "value": {
        "questions": ["Office?"], "answer": "In Leeds.", "source": "editorial"}}]).result()
    (files.root / "pay.tsv").write_text(tsv([("Can I pay later?", "Yes.", "[]", 1)]), encoding="utf-8")
    add_source(client, files, "pay.tsv")
    moved = by_answer(client)["Yes."]["id"]
    (files.root / "pay.tsv").write_text(tsv([("Can I pay later?", "Yes, in parts.", "[]", 1)]), encoding="utf-8")
    state = Refresher(live.service).refresh("kb", "pay.tsv")
    assert state.outcome["status"] == "updated" and state.outcome["updatedIds"] == [moved]
    qnas = by_answer(client)
    assert qnas["In Leeds."]["id"] == 1 and qnas["Yes, in parts."]["id"] == moved and len(qnas) == 2
