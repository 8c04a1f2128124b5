"""What a knowledge base moved with `openqna import`/`export` keeps besides its QnAs: the project's settings (an
Azure export's Metadata, a QnA Maker replica's Settings.tsv) and a replica's unstructured content, as Azure's
authoring import keeps them, and the active-learning suggestions an export carries, as the API and console list
them."""

from __future__ import annotations

import io
import json
import zipfile

import httpx
import pytest
from azure.ai.language.questionanswering.authoring import AuthoringClient
from azure.core.credentials import AzureKeyCredential

from conftest import SAMPLE_DOCS
from openqna.api.azure.authoring_api import qna_json
from openqna.auth.keys import create_key
from openqna.kb.authoring import Authoring
from openqna.kb.service import Service
from openqna.store.sqlite import SQLiteStore
from test_cli import run

KBS = SAMPLE_DOCS / "knowledge-bases"
EXPORT = {"Metadata": {"ProjectName": "jp", "Description": "日本のKB", "Language": "ja",
                       "MultilingualResource": False, "Settings": {"DefaultAnswer": "答えが見つかりません"}},
          "Assets": {"Qnas": [{"Id": 1, "Answer": "東京です", "Source": "editorial", "Questions": ["日本の首都は？"],
                               "Metadata": {}}], "Synonyms": []}}


def settings_of(data, project: str) -> tuple[str, str, str]:
    store = SQLiteStore(data)
    try:
        p = store.get_project(project)
        return p.description, p.language, p.default_answer
    finally:
        store.close()


@pytest.fixture
def sdk(live):
    _, secret = create_key(live.service.store, name="admin", role="admin")
    return AuthoringClient(live.url, AzureKeyCredential(secret))


def test_cli_import_applies_an_azure_exports_settings_as_the_sdk_import_does(tmp_path, sdk):
    """The CLI took the QnAs of an Azure export and left its Metadata: the project came out "en" with the stock
    default answer, where begin_import_assets of the same body set them.  Now both set them, on a new project and
    on one that exists, and the CLI says what it set."""
    data, export = tmp_path / "cli", tmp_path / "ja.json"
    export.write_text(json.dumps(EXPORT, ensure_ascii=False), "utf-8")
    created = run("import", "jp", str(export), data=data)
    assert "jp: settings from ja.json: description '日本のKB', language 'ja', default answer '答えが見つかりません'" \
        in created.stdout
    sdk.begin_import_assets("jp", EXPORT).result()
    azure = sdk.get_project_details("jp")
    assert settings_of(data, "jp") == (azure["description"], azure["language"], azure["settings"]["defaultAnswer"]) \
        == ("日本のKB", "ja", "答えが見つかりません")
    asked = run("ask", "jp", "what is the airspeed of a swallow", "--threshold", "0.99", data=data)
    assert "(default answer) 答えが見つかりません" in asked.stdout

    english = tmp_path / "en.tsv"  # a project that exists takes the file's settings too, as Azure's import does
    english.write_text("Question\tAnswer\nhi\thello\n", "utf-8")
    run("import", "old", str(english), data=data)
    sdk.create_project("old", {"language": "en", "description": "before"})
    moved = run("import", "old", str(export), data=data)
    assert "language 'ja' (was 'en')" in moved.stdout
    sdk.begin_import_assets("old", EXPORT).result()
    azure = sdk.get_project_details("old")
    assert settings_of(data, "old") == (azure["description"], azure["language"], azure["settings"]["defaultAnswer"])


def test_cli_json_export_writes_the_metadata_the_azure_export_writes(tmp_path, sdk):
    data, export, out = tmp_path / "cli", tmp_path / "ja.json", tmp_path / "out.json"
    export.write_text(json.dumps(EXPORT, ensure_ascii=False), "utf-8")
    run("import", "jp", str(export), data=data)
    run("export", "jp", str(out), data=data)
    written = json.loads(out.read_text("utf-8"))
    sdk.begin_import_assets("jp", EXPORT).result()
    result = sdk.begin_export("jp", file_format="json").result()
    azure = json.loads(httpx.get(result["resultUrl"]).content)
    assert written["Metadata"] == azure["Metadata"]
    assert written["Metadata"]["Settings"] == {"DefaultAnswer": "答えが見つかりません"}
    run("import", "copy", str(out), data=data)  # moved with the CLI alone, the KB keeps its settings
    assert settings_of(data, "copy") == ("日本のKB", "ja", "答えが見つかりません")
    assert "are not in a .tsv file" in run("export", "jp", str(tmp_path / "out.tsv"), data=data).stderr


def edited_replica(settings: str) -> bytes:
    """SampleV2KBReplicaWithTsvs.zip with its Settings.tsv replaced, re-zipped as an author would."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(KBS / "SampleV2KBReplicaWithTsvs.zip") as original, zipfile.ZipFile(buffer, "w") as out:
        for info in original.infolist():
            body = settings.encode() if info.filename == "Settings.tsv" else original.read(info)
            out.writestr(info.filename, body)
    return buffer.getvalue()


def test_a_replica_keeps_its_unstructured_content_and_settings(tmp_path):
    """The replica's UnstructuredContent/botframework-blog.pdf.txt was dropped unsaid and its Settings.tsv
    ignored; now the text is passages of source botframework-blog.pdf (read as the Markdown it is, so each has its
    section's title), the default answer and language (a QnA
    Maker language name, mapped to its code) are set, and what is not imported is named."""
    data, replica = tmp_path / "data", tmp_path / "replica.zip"
    replica.write_bytes(edited_replica("Key\tValue\nEnableActiveLearning\ttrue\nLanguage\tJapanese\n"
                                       "DefaultAnswerForKB\tSorry, I do not know that one.\n"))
    imported = run("import", "r", str(replica), data=data)
    assert "r: settings from replica.zip: language 'ja', default answer 'Sorry, I do not know that one.'" \
        in imported.stdout
    assert "r: botframework-blog.pdf (unstructured: passages only): 0 QnAs and " in imported.stdout
    assert "replica.zip/Settings.tsv: not imported: EnableActiveLearning" in imported.stderr
    assert settings_of(data, "r")[1:] == ("ja", "Sorry, I do not know that one.")
    listed = run("sources", "r", data=data).stdout
    passages = next(line for line in listed.splitlines() if line.startswith("botframework-blog.pdf\t"))
    assert "0 QnAs" in passages and "\t0 passages" not in passages
    asked = run("ask", "r", "is there a Go SDK for the Bot Framework?", "--unstructured", data=data).stdout
    assert "(passage) Go SDK for Bot Framework" in asked  # the text is Markdown: its passages have their sections' titles

    replica.write_bytes(edited_replica("Key\tValue\nLanguage\tKlingon\n"))
    unknown = run("import", "k", str(replica), data=data)
    assert "Language 'Klingon' is not one of QnA Maker's languages" in unknown.stderr
    assert settings_of(data, "k")[1] == "en"


def test_the_workbook_replica_keeps_its_unstructured_content_too(tmp_path):
    data = tmp_path / "data"
    imported = run("import", "w", str(KBS / "SampleV2KBReplica.zip"), data=data)
    assert "w: botframework-blog.pdf (unstructured: passages only): 0 QnAs and " in imported.stdout
    assert "(sheet 'Settings'): not imported: EnableActiveLearning" in imported.stderr


def test_the_azure_import_of_a_replica_url_keeps_the_same(tmp_path, sdk, files, live):
    (files.root / "replica.zip").write_bytes(edited_replica("Key\tValue\nLanguage\tJapanese\n"))
    sdk.begin_import_assets("r", {"fileUri": f"{files.url}/replica.zip"}, file_format="tsv").result()
    assert sdk.get_project_details("r")["language"] == "ja"
    kinds = {(q.source, q.kind) for q in live.service.store.list_qnas("r")}
    assert ("botframework-blog.pdf", "passage") in kinds and ("structured.docx", "qna") in kinds


def test_suggestions_lists_what_an_import_brought_as_the_api_does(tmp_path, embedder):
    """`openqna suggestions` read users' feedback alone, so a QnA Maker export's SuggestedQuestions (on QnAs 92,
    103 and 118), which GET .../qnas and the console's Improve tab show, were "no suggestions"."""
    data = tmp_path / "data"
    run("import", "al", str(KBS / "SampleActiveLearning.tsv"), data=data)
    listed = run("suggestions", "al", data=data).stdout.splitlines()[1:]
    cli = {(int(line.split("\t")[0][1:]), line.split("\t")[2]) for line in listed}
    store = SQLiteStore(data)
    try:
        service = Service(store, embedder)
        feedback = Authoring(service).suggestions("al")
        api = {(q.id, s["question"]) for q in store.list_qnas("al")
               for c in qna_json(q, feedback.get(q.id, []))["activeLearningSuggestions"] for s in c["suggestedQuestions"]}
    finally:
        store.close()
    assert cli == api and {qid for qid, _ in cli} == {92, 103, 118}
    assert "#92\t12\tcan i draw with surface pen" in listed

    run("suggestions", "al", "--accept", "92", "can i draw with surface pen", data=data)
    after = run("suggestions", "al", data=data).stdout
    assert "can i draw with surface pen" not in after  # accepted: no longer a suggestion
    assert "#92\t12\thow to write with surface pen" in after
