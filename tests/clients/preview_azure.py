"""Runs in the pre-release SDK's own venv (.venv-preview): the authoring lifecycle with
azure-ai-language-questionanswering-authoring 1.0.0b1 on the /authoring paths and the
2.0.0b1 runtime client.  Prints one JSON object of observations for the test to check.

Usage: python preview_azure.py BASE_URL KEY FILE_URL
"""

import json
import sys

from azure.ai.language.questionanswering import QuestionAnsweringClient
from azure.ai.language.questionanswering.authoring import QuestionAnsweringAuthoringClient
from azure.core.credentials import AzureKeyCredential
from azure.core.exceptions import ResourceNotFoundError

url, key, file_url = sys.argv[1:4]
cred = AzureKeyCredential(key)
authoring = QuestionAnsweringAuthoringClient(url, cred, api_version="2023-04-01", polling_interval=0.2)
runtime = QuestionAnsweringClient(url, cred, api_version="2023-04-01")
seen = {}

project = authoring.create_project("preview", {"description": "b1", "language": "en",
                                               "settings": {"defaultAnswer": "nothing"}})
seen["created"] = project["projectName"]
authoring.begin_import_assets("preview", {"fileUri": file_url}, file_format="tsv").result()
seen["imported"] = len(list(authoring.list_qnas("preview")))
authoring.begin_update_qnas("preview", [
    {"op": "add", "value": {"id": 0, "questions": ["Who wrote the preview test?"], "answer": "A robot.",
                            "source": "editorial"}}]).result()
seen["after_add"] = len(list(authoring.list_qnas("preview")))
authoring.update_synonyms("preview", {"value": [{"alterations": ["robot", "machine"]}]})
seen["synonyms"] = [s["alterations"] for s in authoring.list_synonyms("preview")]
authoring.add_feedback("preview", {"records": [{"userId": "u", "userQuestion": "who made this test", "qnaId": 1}]})
authoring.begin_deploy_project("preview", "production").result()
seen["deployments"] = [d["deploymentName"] for d in authoring.list_deployments("preview")]
answer = runtime.get_answers(question="Who wrote the preview test?", project_name="preview",
                             deployment_name="production").answers[0]
seen["answer"] = [answer.answer, answer.confidence]
authoring.begin_export("preview", file_format="excel", asset_kind="synonyms").result()
authoring.begin_delete_project("preview").result()
try:
    authoring.get_project_details("preview")
    seen["deleted"] = False
except ResourceNotFoundError:
    seen["deleted"] = True
print(json.dumps(seen))
