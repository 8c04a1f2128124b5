"""Runs in the pre-release SDK's own venv (.venv-preview): begin_import_from_files and
begin_update_sources_from_files of azure-ai-language-questionanswering-authoring 1.0.0b1, with the
api-version it sends by default (2025-05-15-preview), which posts the files as multipart/form-data.
Prints one JSON object of observations for the test to check.

Usage: python preview_files.py BASE_URL KEY SAMPLE_DOCS_DIR
"""

import json
import sys
from pathlib import Path

from azure.ai.language.questionanswering.authoring import QuestionAnsweringAuthoringClient
from azure.core.credentials import AzureKeyCredential
from azure.core.exceptions import HttpResponseError

url, key, docs = sys.argv[1], sys.argv[2], Path(sys.argv[3])
authoring = QuestionAnsweringAuthoringClient(url, AzureKeyCredential(key), polling_interval=0.2)
seen: dict = {"api_version": authoring._config.api_version}


def data(path: str) -> bytes:
    return (docs / path).read_bytes()


def refused(call) -> dict:
    """What a call the server refuses raises: its status and Azure error, or that it was not refused."""
    try:
        call()
    except HttpResponseError as exc:
        error = exc.error
        return {"status": exc.status_code, "code": error.code if error else None,
                "message": error.message if error else str(exc), "target": error.target if error else None}
    return {"status": None}


def qna_sources(project: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for q in authoring.list_qnas(project):
        out[q["source"]] = out.get(q["source"], 0) + 1
    return out


imports = {"tsv": "knowledge-bases/SampleQnAs.tsv", "xlsx": "knowledge-bases/SampleV2QnAs.xlsx",
           "docx": "data-source-formats/structured.docx", "replica": "knowledge-bases/SampleKBReplica.zip"}
for label, path in imports.items():
    project = f"files-{label}"
    authoring.begin_import_from_files(project, {"files": [(Path(path).name, data(path))]}).result()
    seen[f"import_{label}"] = qna_sources(project)
# a second import replaces the first's QnAs, as :import does
authoring.begin_import_from_files("files-tsv", {"files": [("basic-kb.tsv", data("knowledge-bases/basic-kb.tsv"))]}
                                  ).result()
seen["reimport_tsv"] = qna_sources("files-tsv")
authoring.begin_import_from_files("files-tsv", {"files": [
    ("SampleSynonyms.tsv", data("knowledge-bases/SampleSynonyms.tsv"))]}, asset_kind="synonyms").result()
seen["synonyms"] = len(list(authoring.list_synonyms("files-tsv")))

authoring.create_project("files-src", {"language": "en"})
authoring.begin_update_sources_from_files("files-src", {
    "files": [("faq.tsv", data("knowledge-bases/SampleQnAs.tsv"), "text/tab-separated-values"),
              ("structured.docx", data("data-source-formats/structured.docx"))],
    "fileOperations": [{"operation": "add", "fileName": "faq.tsv", "fileDisplayName": "The FAQ"},
                       {"operation": "add", "fileName": "structured.docx", "refresh": True}]}).result()
seen["sources"] = sorted([s["source"], s["displayName"], s["sourceKind"], s["sourceUri"].split("?")[0]]
                         for s in authoring.list_sources("files-src"))
seen["source_qnas"] = qna_sources("files-src")
authoring.begin_update_sources_from_files("files-src", {
    "fileOperations": [{"operation": "delete", "fileName": "faq.tsv"}]}).result()
seen["after_delete"] = sorted(s["source"] for s in authoring.list_sources("files-src"))
seen["after_delete_qnas"] = qna_sources("files-src")

seen["bad_no_files"] = refused(lambda: authoring.begin_import_from_files("files-bad", {"files": []}))
seen["bad_type"] = refused(lambda: authoring.begin_import_from_files(
    "files-bad", {"files": [("notes.rtf", b"{\\rtf1 hello}")]}))
seen["bad_ops_json"] = refused(lambda: authoring.begin_update_sources_from_files(
    "files-src", {"files": [("faq.tsv", data("knowledge-bases/SampleQnAs.tsv"))], "fileOperations": "[{oops"}))
seen["bad_op_file"] = refused(lambda: authoring.begin_update_sources_from_files("files-src", {
    "files": [("faq.tsv", data("knowledge-bases/SampleQnAs.tsv"))],
    "fileOperations": [{"operation": "add", "fileName": "other.tsv"}]}))
print(json.dumps(seen))
