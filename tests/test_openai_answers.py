"""OpenAI's Files, Answers and Search over real HTTP with the modern `openai` client (and raw requests)."""

from __future__ import annotations

import io
import json
import re
import time

import httpx
import openai
import pytest

from openqna.kb.answers_search import build_instruction, select_by_length
from openqna.models.gpt2 import count_tokens, encode

EXAMPLES = [["What is the capital of Washington", "Olympia"], ["What is the capital of Oregon", "Salem"]]


def client(live) -> openai.OpenAI:
    return openai.OpenAI(base_url=live.url + "/v1", api_key="anything", max_retries=0)


def post(live, path, body, key=None):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.post(live.url + "/v1" + path, json=body, headers=headers, timeout=60)


def test_gpt2_tokenizer_matches_known_ids():
    assert encode("Hello world") == [15496, 995]
    assert encode(" Puppy A is happy. ") == [20926, 88, 317, 318, 3772, 13, 220]
    assert encode("<|endoftext|>hi") == [50256, 5303]
    assert count_tokens("===\nContext: \n===\n") == 8


def test_prompt_is_byte_exact_with_the_cookbook(live):
    body = {"model": "curie", "question": "What is the capital of China?", "examples": EXAMPLES,
            "examples_context": "I am a bot that names country capitals", "return_prompt": True,
            "documents": ["Tokyo is the capital of Japan.", "Beijing is the capital of China."], "max_tokens": 16}
    r = post(live, "/answers", body).json()
    assert r["prompt"] == (
        "Please answer the question according to the above context.\n===\nContext: I am a bot that names country "
        "capitals\n===\nQ: What is the capital of Washington\nA: Olympia\n---\nQ: What is the capital of Oregon\n"
        "A: Salem\n\n===\nContext: Tokyo is the capital of Japan. Beijing is the capital of China.\n===\n"
        "Q: What is the capital of China?\nA:")
    assert r["object"] == "answer" and r["model"] == "openqna-extractive" and r["search_model"] == "ada"
    assert r["selected_documents"] == [{"document": 0, "text": "Tokyo is the capital of Japan. "},
                                       {"document": 1, "text": "Beijing is the capital of China. "}]
    assert r["answers"] == ["Beijing is the capital of China."]
    assert r["completion"].startswith("cmpl-")


@pytest.mark.parametrize("question, document", [
    ("What does the FAQ say about returns?", "Read the FAQ: returns are free within 30 days."),
    ("How much does plan A cost?", "Plan A: costs $5 a month."),
    ("What is the IPA?", "IPA: International Phonetic Alphabet, Q: the letter after P."),
])
def test_an_answer_read_word_for_word_keeps_its_colons(live, question, document):
    """The answer is the document's sentence as written: "A:" and "Q:" are the prompt's marks only where a completion
    begins with the one or a line of it with the other ("Read the FAQ: returns ..." came back "Read the FA")."""
    body = {"model": "curie", "question": question, "examples": EXAMPLES, "examples_context": "",
            "documents": [document, "Shipping takes 3 days."], "expand": ["completion"]}
    r = post(live, "/answers", body).json()
    assert r["answers"] == [document] and r["completion"]["choices"][0]["text"] == document, r


def test_budget_packs_best_documents_that_fit(live):
    long_doc = "Paris is lovely in spring. " * 60  # ~360 tokens
    docs = [long_doc, "Beijing is the capital of China.", long_doc.replace("Paris", "Rome")]
    body = {"model": "davinci", "question": "What is the capital of China?", "examples": EXAMPLES,
            "examples_context": "", "documents": docs, "max_tokens": 1700, "return_prompt": True}
    r = post(live, "/answers", body).json()
    assert [d["document"] for d in r["selected_documents"]] == [1]  # only the short one fits the 2049 budget
    assert count_tokens(r["prompt"]) + 1700 <= 2049


def test_a_file_whose_found_documents_are_all_too_long_is_told_so(live):
    """File mode packs the documents found that fit; when none does, the caller hears why (it got an empty answer and
    no selected document, where the same text inline is a 400), and a file with one that fits is answered from it."""
    c = client(live)
    long_line = "Paris is lovely in spring. " * 600  # ~3,600 tokens: more than the 2049 of curie's window
    f = c.files.create(file=("long.jsonl", io.BytesIO(json.dumps({"text": long_line}).encode())), purpose="answers")
    body = {"model": "curie", "question": "When is Paris lovely?", "examples": EXAMPLES, "examples_context": "",
            "file": f.id}
    r = post(live, "/answers", body)
    assert r.status_code == 400 and r.json()["error"]["param"] == "file", r.text
    assert "too long for the prompt" in r.json()["error"]["message"] and "document 0" in r.json()["error"]["message"]
    lines = [{"text": long_line}, {"text": "Paris is lovely in spring."}]
    g = c.files.create(file=("two.jsonl", io.BytesIO("\n".join(map(json.dumps, lines)).encode())), purpose="answers")
    r = post(live, "/answers", dict(body, file=g.id)).json()
    assert r["answers"] == ["Paris is lovely in spring."] and [d["document"] for d in r["selected_documents"]] == [1]


def test_select_by_length_keeps_scanning_after_a_miss():
    infos = [{"text": "a " * 50}, {"text": "b " * 200}, {"text": "c " * 10}]
    assert [i["text"][0] for i in select_by_length(infos, 80)] == ["a", "c"]
    assert build_instruction([("q", "a")], "").startswith("Please answer the question according to the above context."
                                                         "\nQ: q\nA: a")


def test_files_answers_and_search_in_file_mode(live):
    c = client(live)
    lines = [{"text": "Puppy A is happy.\nPuppy C is sleepy.", "metadata": "m1"},
             {"text": "Puppy B is sad.", "metadata": {"source": "kennel.pdf"}}]
    data = "\n".join(json.dumps(x) for x in lines).encode()
    f = c.files.create(file=("puppy.jsonl", io.BytesIO(data)), purpose="answers")
    assert f.id.startswith("file-") and f.purpose == "answers" and f.bytes == len(data) and f.filename == "puppy.jsonl"
    assert [x.id for x in c.files.list()] == [f.id]
    assert c.files.retrieve(f.id).filename == "puppy.jsonl"
    assert c.files.content(f.id).read() == data
    r = post(live, "/answers", {"model": "curie", "question": "which puppy is sad?", "examples": EXAMPLES,
                                "examples_context": "x", "file": f.id, "return_metadata": True,
                                "expand": ["file"]}).json()
    assert r["file"]["id"] == f.id
    assert r["selected_documents"][-1] == {"document": 2, "text": "Puppy B is sad. ", "metadata": {"source": "kennel.pdf"}}
    assert r["answers"] == ["Puppy B is sad."]
    s = post(live, "/engines/ada/search", {"query": "sleepy puppy", "file": f.id, "return_metadata": True}).json()
    assert [d["document"] for d in s["data"]] == [0, 1, 2]  # answers files are split on newlines
    best = max(s["data"], key=lambda d: d["score"])
    assert best["text"] == "Puppy C is sleepy." and best["metadata"] == "m1" and 0 < best["score"] <= 300
    deleted = c.files.delete(f.id)
    assert deleted.deleted and c.files.list().data == []


def test_search_with_documents_scores_on_openai_scale(live):
    r = post(live, "/search", {"model": "ada", "documents": ["White House", "hospital", "school"],
                               "query": "the president"}).json()
    assert r["object"] == "list" and [d["document"] for d in r["data"]] == [0, 1, 2]
    scores = [d["score"] for d in r["data"]]
    assert all(0 <= s <= 300 for s in scores) and scores[0] == max(scores)


def test_each_search_document_is_scored_on_its_own(live):
    """A document's score is its own (reference/openai-answers.md §2.3): the same whatever else the request holds,
    0 for an empty document (OpenAI's empty baseline), and ranked as openqna ranks: a paraphrase above a document
    that names the topic above an unrelated one."""
    def scores(documents: list[str], query: str = "the president") -> list[float]:
        r = post(live, "/search", {"model": "ada", "documents": documents, "query": query})
        assert r.status_code == 200, r.text
        return [d["score"] for d in r.json()["data"]]

    (alone,) = scores(["White House"])
    assert alone > 0
    for others in (["hospital"], ["hospital", "school"], ["The president lives in the White House", "Oval office"],
                   ["White House"] * 5, [""]):
        assert scores(["White House", *others])[0] == alone, others
    assert scores(["hospital", "White House"])[1] == alone
    closer, house, hospital = scores(["The president lives in the White House", "White House", "hospital"])
    assert closer > house > hospital >= 0
    assert scores(["the president"])[0] > 200  # the query word for word
    assert scores([""], "x") == scores(["   "], "x") == [0.0]
    assert scores(["", "a"], "x")[0] == 0.0 and scores(["", "a"], "x")[1] >= 0.0
    assert scores(["White House"], "如何启动服务器") == [0.0]  # a query the model cannot read: no evidence


@pytest.mark.parametrize("path,body,param", [
    ("/answers", {"question": "q", "examples": EXAMPLES, "examples_context": "", "documents": []}, "model"),
    ("/answers", {"model": "ada", "question": "q", "examples": [], "examples_context": "", "documents": []},
     "examples"),
    ("/answers", {"model": "ada", "question": "q", "examples": EXAMPLES, "examples_context": ""}, "documents"),
    ("/answers", {"model": "ada", "question": "q", "examples": EXAMPLES, "examples_context": "", "documents": [],
                  "file": "file-x"}, "documents"),
    ("/answers", {"model": "ada", "question": "q", "examples": EXAMPLES, "examples_context": "", "documents": [],
                  "n": 11}, "n"),
    ("/answers", {"model": "ada", "question": "q", "examples": EXAMPLES, "examples_context": "", "documents": [],
                  "stop": ["a", "b", "c", "d", "e"]}, "stop"),
    ("/answers", {"model": "ada", "question": "q", "examples": EXAMPLES, "examples_context": "", "documents": [],
                  "bogus": 1}, "bogus"),
    ("/answers", {"model": "ada", "question": "q", "examples": EXAMPLES, "examples_context": "",
                  "documents": ["d"] * 201}, "documents"),
    ("/search", {"documents": ["a"]}, "query"),
    ("/search", {"query": "q", "documents": []}, "documents"),
    ("/search", {"query": "q", "documents": ["a"], "return_metadata": "yes"}, "return_metadata"),  # was 200
    ("/search", {"query": "q" * 1_001, "documents": ["a"]}, "query"),  # 100,000 characters were scored
])
def test_bad_requests_in_openai_dialect(live, path, body, param):
    r = post(live, path, body)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param and error["message"]


@pytest.mark.parametrize("content,words", [
    (b'{"query": ' + b"[" * 5_000 + b"]" * 5_000 + b"}", "nested more than 64 levels"),
    (b'{"query": "\\udfff", "documents": ["a"]}', "'query' holds a lone UTF-16 surrogate"),
])
def test_bodies_that_used_to_raise(live, content, words):
    r = httpx.post(live.url + "/v1/search", content=content, headers={"Content-Type": "application/json"}, timeout=30)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["type"] == "invalid_request_error" and words in r.json()["error"]["message"]


def multipart(*parts: tuple[str, str | None, bytes]) -> tuple[bytes, dict[str, str]]:
    """A multipart/form-data body written by hand: (name, filename or None for a plain field, content) per part."""
    body = b""
    for name, filename, content in parts:
        disposition = f'form-data; name="{name}"' + ("" if filename is None else f'; filename="{filename}"')
        body += f"--XBOUNDARY\r\nContent-Disposition: {disposition}\r\n\r\n".encode() + content + b"\r\n"
    return body + b"--XBOUNDARY--\r\n", {"Content-Type": "multipart/form-data; boundary=XBOUNDARY"}


def test_an_upload_that_is_not_what_it_seems_is_refused_naming_why(live):
    """POST /v1/files reads a multipart form: a JSON body, a field it does not read (such as expires_after sent as one
    JSON field, which was stored as a file that never expires), a field sent twice (the last one won, silently) and a
    file part without a filename are 400s that say what to send, and store nothing."""
    url = live.url + "/v1/files"
    line = b'{"text": "Puppy A is happy."}'

    def refused(response: httpx.Response, param: str, words: str) -> None:
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["type"] == "invalid_request_error" and error["param"] == param, error
        assert words in error["message"], error

    refused(httpx.post(url, json={"purpose": "assistants", "file": "hello"}, timeout=30), "file",
            "multipart/form-data")
    files = {"file": ("p.jsonl", line)}
    refused(httpx.post(url, files=files, data={"purpose": "answers",
                                               "expires_after": '{"anchor":"created_at","seconds":4000}'}, timeout=30),
            "expires_after", "expires_after[anchor]=created_at and expires_after[seconds]=N")
    refused(httpx.post(url, files=files, data={"purpose": "answers", "purpse": "search"}, timeout=30), "purpse",
            "Unrecognized form field 'purpse'")
    refused(httpx.post(url, files=files, data={"purpose": ["user_data", "answers"]}, timeout=30), "purpose",
            "'purpose' was sent 2 times")
    body, headers = multipart(("purpose", None, b"answers"), ("file", "a.jsonl", line), ("file", "b.jsonl", line))
    refused(httpx.post(url, content=body, headers=headers, timeout=30), "file", "'file' was sent 2 times")
    for filename in (None, ""):
        body, headers = multipart(("purpose", None, b"answers"), ("file", filename, line))
        refused(httpx.post(url, content=body, headers=headers, timeout=30), "file", "The 'file' part needs a filename")
    refused(httpx.post(url, data={"purpose": "answers"}, files={}, timeout=30), "file", "multipart/form-data")
    body, headers = multipart(("purpose", None, b"answers"))
    refused(httpx.post(url, content=body, headers=headers, timeout=30), "file", "'file' is a required form part")
    assert client(live).files.list().data == []
    body, headers = multipart(("purpose", None, b"answers"), ("file", "p.jsonl", line))
    stored = httpx.post(url, content=body, headers=headers, timeout=30)
    assert stored.status_code == 200 and stored.json()["filename"] == "p.jsonl", stored.text
    assert "expires_at" not in stored.json()


def test_a_filename_is_the_users_though_the_client_escapes_quotes_and_line_breaks(live):
    """httpx (under the `openai` client) escapes '"' as %22 and line breaks as %0A and %0D in a multipart filename, as
    browsers do; the file was stored and listed as 'my %22notes%22.txt'.  A "%" is not escaped, so "%41" stays."""
    c = client(live)
    names = ['my "notes".txt', "two\nlines\r.txt", "100%41 sure.txt", "back\\slash.txt"]
    for name in names:
        f = c.files.create(file=(name, b"Returns are accepted within 30 days."), purpose="assistants")
        assert f.filename == name and c.files.retrieve(f.id).filename == name
    assert sorted(f.filename for f in c.files.list()) == sorted(names)


def test_a_filename_keeps_the_control_characters_the_client_escapes(live):
    """httpx escapes every character from 0x00 to 0x1F but ESC (0x1B) as %XX, and only %22, %0A and %0D were undone:
    "tab\tname.txt" came back as 'tab%09name.txt'.  Exactly httpx's escapes are undone (a "%1B" or a lower-case
    "%0a" it never writes stays as sent), and a NUL, which no store or file system keeps in a name, is a 400."""
    c = client(live)
    names = ["tab\tname.txt", "bell\x07.txt", "esc\x1b.txt", "unit\x1fsep.txt", "%1B %7F %0a %25.txt"]
    for name in names:
        f = c.files.create(file=(name, b"Returns are accepted within 30 days."), purpose="assistants")
        assert f.filename == name and c.files.retrieve(f.id).filename == name
    with pytest.raises(openai.BadRequestError) as refused:
        c.files.create(file=("nul\x00.txt", b"x"), purpose="assistants")
    assert refused.value.body["param"] == "file" and "NUL (U+0000)" in refused.value.body["message"], refused.value.body
    assert sorted(f.filename for f in c.files.list()) == sorted(names)


def test_bad_jsonl_line_is_named_and_nothing_is_stored(live):
    c = client(live)
    data = b'{"text": "fine"}\n{"text": ""}\n'
    with pytest.raises(openai.BadRequestError) as err:
        c.files.create(file=("bad.jsonl", io.BytesIO(data)), purpose="search")
    assert "line 2" in err.value.message
    assert c.files.list().data == []
    assert live.service.store.list_projects() == []
    # a key named twice: json.loads keeps the last without a word, so the file would hold text it was not meant to
    for twice in (b'{"text": "a", "text": "b"}', b'{"text": "a", "metadata": {"k": 1, "k": 2}}'):
        with pytest.raises(openai.BadRequestError) as err:
            c.files.create(file=("twice.jsonl", io.BytesIO(b'{"text": "fine"}\n' + twice)), purpose="search")
        assert "line 2" in err.value.message and 'appears twice' in err.value.message, err.value.message
    assert c.files.list().data == []
    with pytest.raises(openai.NotFoundError):
        c.files.retrieve("file-missing")


def test_jsonl_lines_end_at_newlines_only(live):
    """U+2028, U+2029 and U+0085 are legal raw inside a JSON string; they do not end a JSON Lines line."""
    c = client(live)
    texts = ["Puppy A is happy.\u2028It wags.", "Puppy B is sad.\u0085It naps.\u2029Zzz."]
    data = "\r\n".join(json.dumps({"text": t}, ensure_ascii=False) for t in texts).encode()
    f = c.files.create(file=("raw.jsonl", io.BytesIO(data)), purpose="search")
    s = post(live, "/engines/ada/search", {"query": "happy puppy", "file": f.id}).json()
    assert [(d["document"], d["text"]) for d in s["data"]] == list(enumerate(texts))


def test_files_list_pages_and_refuses_what_it_cannot_page(live):
    c = client(live)
    uploaded = [c.files.create(file=(f"{i}.jsonl", io.BytesIO(b'{"text": "x"}')), purpose="search").id
                for i in range(3)]
    newest_first = [f.id for f in c.files.list()]
    assert newest_first == uploaded[::-1]  # upload order within a second too (created_at is whole seconds)
    assert len(newest_first) == 3 and [f.id for f in c.files.list(limit=1)] == newest_first  # the SDK follows has_more
    assert [f.id for f in c.files.list(limit=2, order="asc")] == newest_first[::-1]
    # before pages backwards, as the vector-store lists do (it was ignored: the first page came back)
    back = httpx.get(live.url + "/v1/files", params={"before": newest_first[2], "limit": 1}, timeout=30).json()
    assert [f["id"] for f in back["data"]] == [newest_first[1]] and back["has_more"] is True
    for params in ({"order": "newest"}, {"after": "file-missing"}, {"before": "zzz"}):
        r = httpx.get(live.url + "/v1/files", params=params, timeout=30)
        assert r.status_code == 400 and r.json()["error"]["param"] == next(iter(params)), r.text
    # deleting while iterating removes the page's cursor: the id still says where the next page starts
    for _ in range(4):
        c.files.create(file=("more.jsonl", io.BytesIO(b'{"text": "x"}')), purpose="search")
    for f in c.files.list(limit=2):
        c.files.delete(f.id)
    assert c.files.list().data == []
    a, b, c_, d = (c.files.create(file=(f"{n}.jsonl", io.BytesIO(b'{"text": "x"}')), purpose="search").id
                   for n in "abcd")
    c.files.delete(b)  # a deleted file's id pages from its place, in either order and direction

    def page(**params):
        return [f["id"] for f in httpx.get(live.url + "/v1/files", params=params, timeout=30).json()["data"]]
    assert page(after=b) == [a] and page(after=b, order="asc") == [c_, d]
    assert page(before=b) == [d, c_] and page(before=b, order="asc") == [a]


def test_an_upload_the_client_retries_after_its_timeout_is_stored_once(live):
    """The openai client retries a request that timed out while the server still indexes the file: a large upload
    was stored (and indexed) three times.  Its retries get the first upload's file instead."""
    lines = "\n".join(json.dumps({"text": f"Ferry {i} leaves pier {i % 7} at {i % 24}:15 for island {i}."})
                      for i in range(800))
    impatient = openai.OpenAI(base_url=live.url + "/v1", api_key="anything", max_retries=2, timeout=0.3)
    try:
        impatient.files.create(file=("ferry.jsonl", io.BytesIO(lines.encode())), purpose="search")
    except openai.APITimeoutError:
        pass  # every attempt timed out: the server finishes the first alone
    seen, deadline = [], time.monotonic() + 120
    while time.monotonic() < deadline:  # until the uploads in hand have all ended
        seen.append(len([f for f in client(live).files.list() if f.filename == "ferry.jsonl"]))
        if len(seen) > 6 and seen[-1] and len(set(seen[-6:])) == 1:
            break
        time.sleep(0.5)
    assert seen[-1] == 1, seen
    # an upload of the same bytes that is not a retry is a file of its own, as OpenAI's
    again = client(live).files.create(file=("ferry.jsonl", io.BytesIO(lines.encode())), purpose="search")
    assert again.id not in {f.id for f in client(live).files.list() if f.id != again.id}
    assert len([f for f in client(live).files.list() if f.filename == "ferry.jsonl"]) == 2


def test_a_record_added_to_a_files_knowledge_base_elsewhere_is_not_a_document(live):
    """The Azure authoring API reaches a file's knowledge base as a project; what it adds has no document index."""
    from openqna.records import QnA

    c = client(live)
    f = c.files.create(file=("p.jsonl", io.BytesIO(b'{"text": "Puppy A is happy."}')), purpose="answers")
    live.service.upsert(f.id, [QnA(["happy puppy?"], "A happy puppy added through another API.")])
    s = post(live, "/engines/ada/search", {"query": "happy puppy", "file": f.id})
    assert s.status_code == 200 and [d["text"] for d in s.json()["data"]] == ["Puppy A is happy."], s.text
    a = post(live, "/answers", {"model": "curie", "question": "happy puppy?", "examples": EXAMPLES,
                                "examples_context": "", "file": f.id})
    assert a.status_code == 200 and a.json()["selected_documents"] == [{"document": 0, "text": "Puppy A is happy. "}]


def test_nan_metadata_is_refused_at_upload(live):
    """json.dumps writes NaN; stored, it made every return_metadata answer about the file a 500."""
    c = client(live)
    data = json.dumps({"text": "fine", "metadata": 1.5}) + "\n" + json.dumps({"text": "x", "metadata": {"n": float("nan")}})
    with pytest.raises(openai.BadRequestError) as err:
        c.files.create(file=("nan.jsonl", io.BytesIO(data.encode())), purpose="search")
    assert "line 2" in err.value.message and "NaN" in err.value.message
    assert c.files.list().data == []


def test_file_ids_have_openai_s_shape(live):
    """"file-" and 24 letters and digits, every time (a "-" or "_" of the random token was dropped, so about half the
    ids were shorter)."""
    c = client(live)
    ids = [c.files.create(file=(f"{i}.jsonl", io.BytesIO(b'{"text": "x"}')), purpose="search").id for i in range(12)]
    assert all(re.fullmatch(r"file-[A-Za-z0-9]{24}", i) for i in ids), ids
    for i in ids:
        c.files.delete(i)


def test_a_blank_query_in_file_mode_finds_no_document(live):
    """A blank query meets the spec's minLength 1: documents mode scores it; file mode's prefilter finds nothing."""
    c = client(live)
    f = c.files.create(file=("p.jsonl", io.BytesIO(b'{"text": "Puppy A is happy."}')), purpose="answers")
    s = post(live, "/engines/ada/search", {"query": " \n", "file": f.id})
    assert s.status_code == 200 and s.json()["data"] == [], s.text
    a = post(live, "/answers", {"model": "curie", "question": " ", "examples": EXAMPLES, "examples_context": "",
                                "file": f.id})
    assert a.status_code == 200 and a.json()["selected_documents"] == [], a.text


def test_keys_apply_to_openai_routes(live):
    from openqna.auth.keys import create_key

    _, secret = create_key(live.service.store, role="query")
    c = client(live)
    with pytest.raises(openai.AuthenticationError):
        c.files.list()
    authed = openai.OpenAI(base_url=live.url + "/v1", api_key=secret, max_retries=0)
    assert authed.files.list().data == []
    with pytest.raises(openai.PermissionDeniedError):
        authed.files.create(file=("a.jsonl", io.BytesIO(b'{"text": "x"}')), purpose="search")


@pytest.mark.clients
def test_legacy_openai_client(live, tmp_path):
    """openai 0.25.0's Answer, Search, Engine.search and File, unchanged but for api_base."""
    import subprocess

    from conftest import REPO

    python = REPO / ".venv-legacy" / "bin" / "python"
    assert python.exists(), "run `make test` (it creates .venv-legacy with openai==0.25.0)"
    jsonl = tmp_path / "puppy.jsonl"
    jsonl.write_text('{"text": "Puppy A is happy.", "metadata": "m1"}\n{"text": "Puppy B is sad.", "metadata": "m2"}\n')
    proc = subprocess.run([str(python), str(REPO / "tests" / "clients" / "legacy_openai.py"), live.url, "k", str(jsonl)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert seen["file"] == ["file", "answers", "puppy.jsonl"] and seen["listed"]
    kind, answers, best_text, best_metadata, file_id = seen["answer"]
    assert kind == "answer" and answers == ["Puppy A is happy."] and best_text == "Puppy A is happy. "
    assert best_metadata == "m1" and file_id.startswith("file-")
    assert seen["documents_mode"] == [["Puppy A is happy."], [0, 1]]
    assert seen["search"] == [[0, 1, 2], 0, True]
    white_house, beside_closer, beside_others, empty = seen["alone"]
    assert white_house == beside_closer == beside_others > 0 and empty == 0
    assert seen["error"][0] == 400 and "documents" in seen["error"][1]
    purpose, found = seen["search_file"]
    assert purpose == "search" and found[0] == ["Puppy A is happy.", "m1"], found
    assert seen["engine_embedding"] == ["list", 384]
    assert seen["deleted"] is True


class FakeLLM:
    """A fake OpenAI-compatible completion server (the LLM is the one thing we fake): records requests."""

    def __init__(self):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        seen = self.requests = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                seen.append((self.path, dict(self.headers), body))
                if "slowly" in json.dumps(body):
                    time.sleep(3)
                if "fail" in json.dumps(body):
                    self.send_response(500)
                    self.send_header("Content-Length", "24")
                    self.end_headers()
                    self.wfile.write(b"upstream internal detail")
                    return
                # "one choice": an endpoint that ignores n, as Ollama and llama.cpp do
                count = 1 if "one choice" in json.dumps(body) else body.get("n", 1)
                texts = [f" Beijing.\nQ: next question {i}" for i in range(count)]
                if self.path.endswith("/chat/completions"):
                    if "say nothing" in json.dumps(body):  # a refusal, or a reasoning model out of tokens
                        texts = [None] * len(texts)
                    choices = [{"index": i, "message": {"role": "assistant", "content": t}} for i, t in enumerate(texts)]
                    if body.get("logprobs"):
                        for c in choices:
                            c["logprobs"] = {"content": [{"token": " Beijing", "logprob": -0.25 * (c["index"] + 1),
                                                          "top_logprobs": [{"token": " Beijing", "logprob": -0.25},
                                                                           {"token": " Shanghai", "logprob": -2.0}]
                                                          [:body["top_logprobs"]]}]}
                else:
                    choices = [{"index": i, "text": t} for i, t in enumerate(texts)]
                    if body.get("logprobs") is not None:
                        for c in choices:
                            c["logprobs"] = {"tokens": [" Beijing"], "token_logprobs": [-0.25 * (c["index"] + 1)]}
                payload = json.dumps({"id": "cmpl-fake", "model": "fake-llm-7b", "choices": choices}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()



def test_a_logit_bias_no_model_reads_is_refused_and_one_that_asks_nothing_dropped(live):
    """Its keys are GPT-2 token ids; the extractive completer makes no tokens (and an endpoint's model has its own): a
    bias is honoured by none, so it is refused, as with an endpoint, but the reference's ban of <|endoftext|> and a
    bias of 0 ask nothing a model would do otherwise."""
    body = {"model": "curie", "question": "What is the capital of China?", "examples": EXAMPLES,
            "examples_context": "", "documents": ["Beijing is the capital of China."]}
    for bias in ({"50256": -100}, {"1234": 0, "50256": -1}, {}):
        r = post(live, "/answers", dict(body, logit_bias=bias))
        assert r.status_code == 200 and r.json()["answers"] == ["Beijing is the capital of China."], r.text
    for bias, token in (({"1234": -100}, "1234"), ({"50256": -100, "13": 2}, "13"), ({"50256": 100}, "50256")):
        r = post(live, "/answers", dict(body, logit_bias=bias))
        assert r.status_code == 400 and r.json()["error"]["param"] == "logit_bias", r.text
        assert f"token {token} would bias an unrelated token" in r.json()["error"]["message"], r.text

@pytest.mark.parametrize("api", ["chat", "completions"])
def test_answers_through_an_openai_compatible_llm(service, monkeypatch, api):
    from conftest import LiveServer

    llm = FakeLLM()
    monkeypatch.setenv("OPENQNA_LLM_BASE_URL", llm.url)
    monkeypatch.setenv("OPENQNA_LLM_API_KEY", "sk-llm")
    monkeypatch.setenv("OPENQNA_LLM_API", api)
    monkeypatch.setenv("OPENQNA_LLM_MODEL_MAP", json.dumps({"curie": "fake-llm-7b"}))
    monkeypatch.setenv("OPENQNA_LLM_TIMEOUT", "1.5")  # the fake takes 3 s to answer slowly
    with LiveServer(service) as live:
        body = {"model": "curie", "question": "What is the capital of China?", "examples": EXAMPLES,
                "examples_context": "", "documents": ["Beijing is the capital of China."], "n": 2,
                "max_tokens": 7, "temperature": 0.5, "stop": ["\n\n"], "logit_bias": {"50256": -100}}
        r = post(live, "/answers", body).json()
        failed = post(live, "/answers", dict(body, question="please fail"))
        silent = post(live, "/answers", dict(body, question="say nothing"))
        asked = len(llm.requests)
        ignored_n = post(live, "/answers", dict(body, question="one choice only, please")).json()
        asked = len(llm.requests) - asked
        with_logprobs = post(live, "/answers", dict(body, logprobs=1)).json()
        slow = post(live, "/answers", dict(body, question="answer slowly"))
        sent_before = len(llm.requests)
        biased = [post(live, "/answers", dict(body, logit_bias=bias)) for bias in ({"1234": -100}, {"50256": 5})]
        assert len(llm.requests) == sent_before  # refused before the endpoint is asked
    path, headers, sent = llm.requests[0]
    assert path == "/v1/" + ("chat/completions" if api == "chat" else "completions")
    assert headers["Authorization"] == "Bearer sk-llm" and sent["model"] == "fake-llm-7b"
    assert (sent["n"], sent["max_tokens"], sent["temperature"], sent["stop"]) == (2, 7, 0.5, ["\n\n"])
    # logit_bias holds GPT-2 token ids, which the endpoint's tokenizer reads as other tokens: passed on, 50256
    # (<|endoftext|>) banned an unrelated one.  Banning <|endoftext|> is dropped (the stop sequences end the answer);
    # any other bias is refused, saying why
    assert not any("logit_bias" in b for _, _, b in llm.requests)
    for refused, token in zip(biased, ("1234", "50256")):
        error = refused.json()["error"]
        assert refused.status_code == 400 and error["param"] == "logit_bias", refused.text
        assert f"token {token} would bias an unrelated token" in error["message"], error
    prompt = sent["messages"][0]["content"] if api == "chat" else sent["prompt"]
    assert prompt == ("Please answer the question according to the above context.\nQ: What is the capital of Washington"
                      "\nA: Olympia\n---\nQ: What is the capital of Oregon\nA: Salem\n\n===\nContext: Beijing is the "
                      "capital of China.\n===\nQ: What is the capital of China?\nA:")
    assert r["model"] == "fake-llm-7b" and r["completion"] == "cmpl-fake"
    assert r["answers"] == ["Beijing.", "Beijing."]  # post-processed like OpenAI: cut at the next "Q:"
    assert failed.status_code == 502 and failed.json()["error"]["type"] == "server_error"
    # the caller learns that the endpoint failed, not its address or what it said (the server's log has both)
    message = failed.json()["error"]["message"]
    assert "OPENQNA_LLM_BASE_URL" in message and llm.url not in message and "upstream" not in message, message
    assert ignored_n["answers"] == ["Beijing.", "Beijing."] and asked == 2  # asked again for the second
    assert silent.status_code == 200 and silent.json()["answers"] == (["", ""] if api == "chat" else ["Beijing."] * 2)
    # logprobs expand the completion (OpenAI: "completion will be automatically added into expand to get the
    # logprobs"); the endpoint's logprobs reach it (only /completions is asked for them)
    choices = with_logprobs["completion"]["choices"]
    # the completion as the endpoint wrote it, which its logprobs are of; the answers are read from it
    assert [c["text"] for c in choices] == [" Beijing.\nQ: next question 0", " Beijing.\nQ: next question 1"]
    assert with_logprobs["answers"] == ["Beijing.", "Beijing."] and with_logprobs["completion"]["id"] == "cmpl-fake"
    # the chat API is asked for them in its own words and its answer read back in the completions API's shape
    if api == "chat":
        asked = [b for p, _, b in llm.requests if b.get("logprobs")][-1]
        assert (asked["logprobs"], asked["top_logprobs"]) == (True, 1)
        assert [c["logprobs"] for c in choices] == [
            {"tokens": [" Beijing"], "token_logprobs": [-0.25 * k], "top_logprobs": [{" Beijing": -0.25}],
             "text_offset": [len(prompt)]} for k in (1, 2)]
    else:
        assert [c["logprobs"] for c in choices] == [
            {"tokens": [" Beijing"], "token_logprobs": [-0.25]}, {"tokens": [" Beijing"], "token_logprobs": [-0.5]}]
    # an endpoint slower than OPENQNA_LLM_TIMEOUT: a 502 that says it timed out, not that it could not be reached
    assert slow.status_code == 502 and "did not answer within 1.5 s (OPENQNA_LLM_TIMEOUT)" in slow.json()["error"][
        "message"], slow.text
