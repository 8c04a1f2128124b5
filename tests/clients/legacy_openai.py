"""Runs in its own venv (.venv-legacy) with openai==0.25.0, the last release with Answer/Search:
the retired endpoints as code written in 2021 calls them.  Prints one JSON object of observations.

Usage: python legacy_openai.py BASE_URL KEY JSONL_PATH
"""

import json
import sys

import openai

url, key, path = sys.argv[1:4]
openai.api_base = url + "/v1"
openai.api_key = key
seen = {}

f = openai.File.create(file=open(path, "rb"), purpose="answers", user_provided_filename="puppy.jsonl")
seen["file"] = [f["object"], f["purpose"], f["filename"]]
seen["listed"] = [x["id"] for x in openai.File.list()["data"]] == [f["id"]]
answer = openai.Answer.create(
    search_model="ada", model="curie", question="which puppy is happy?", file=f["id"],
    examples_context="In 2017, U.S. life expectancy was 78.6 years.",
    examples=[["What is human life expectancy in the United States?", "78 years."]],
    max_rerank=10, max_tokens=5, stop=["\n", "<|endoftext|>"], return_metadata=True)
seen["answer"] = [answer["object"], answer["answers"], answer["selected_documents"][-1]["text"],
                  answer["selected_documents"][-1].get("metadata"), answer["file"]]
docs = openai.Answer.create(
    search_model="ada", model="curie", question="which puppy is happy?",
    documents=["Puppy A is happy.", "Puppy B is sad."],
    examples_context="In 2017, U.S. life expectancy was 78.6 years.",
    examples=[["What is human life expectancy in the United States?", "78 years."]], max_tokens=5,
    stop=["\n", "<|endoftext|>"])
seen["documents_mode"] = [docs["answers"], [d["document"] for d in docs["selected_documents"]]]
search = openai.Search.create(model="ada", documents=["White House", "hospital", "school"], query="the president")
engine = openai.Engine("davinci").search(documents=["White House", "hospital", "school"], query="the president")
seen["search"] = [[d["document"] for d in search["data"]], max(search["data"], key=lambda d: d["score"])["document"],
                  [d["score"] for d in engine["data"]] == [d["score"] for d in search["data"]]]
# each document scored on its own: "White House" scores the same whatever else is sent, an empty document 0
alone = [openai.Search.create(model="ada", documents=documents, query="the president")["data"][0]["score"]
         for documents in (["White House"], ["White House", "The president lives in the White House", "Oval office"])]
seen["alone"] = alone + [search["data"][0]["score"],
                         openai.Search.create(model="ada", documents=[""], query="x")["data"][0]["score"]]
try:
    openai.Answer.create(model="curie", question="q", examples=[["a", "b"]], examples_context="")
    seen["error"] = None
except openai.error.InvalidRequestError as exc:
    seen["error"] = [exc.http_status, str(exc)]
# a file for search, with the search engine 0.x sends for that purpose (ignored: the server's embedder indexes it)
searchable = openai.File.create(file=open(path, "rb"), purpose="search", model="ada")
found = openai.Engine("ada").search(file=searchable["id"], query="a happy puppy", max_rerank=5, return_metadata=True)
seen["search_file"] = [searchable["purpose"], [[d["text"], d.get("metadata")] for d in found["data"]]]
embedded = openai.Embedding.create(engine="local", input=["Puppy A is happy."])
seen["engine_embedding"] = [embedded["object"], len(embedded["data"][0]["embedding"])]
seen["deleted"] = openai.File.delete(f["id"])["deleted"]
print(json.dumps(seen))
