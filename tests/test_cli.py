"""The openqna command as a user runs it: real processes, real files, real model."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from conftest import CHITCHAT, REPO, ServeProcess, free_port, wait_for_job
from openqna.kb.catalog import Project

OPENQNA = str(Path(sys.executable).with_name("openqna"))


def run(*args: str, data: Path, check: bool = True, env: dict[str, str] | None = None,
        cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "OPENQNA_DATA": str(data), "HF_HUB_OFFLINE": "1", **(env or {})}
    proc = subprocess.run([OPENQNA, *args], capture_output=True, text=True, env=env, timeout=300, cwd=cwd)
    if check and proc.returncode != 0:
        raise AssertionError(f"openqna {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def test_a_file_imported_later_keeps_what_it_finds(tmp_path):
    """Every QnA Maker export numbers its QnAs from 1, so a FAQ file imported into a project that held a manual
    replaced the manual's records with its ids (9 QnAs and 5 passages lost, reported as "14 updated"); two QnA files
    in one import took each other's ids.  A file's ids are its own now: they move where they would take a record of
    another source or kind, its prompts follow, and importing it again changes nothing."""
    from collections import Counter

    from openqna.store.sqlite import SQLiteStore

    data, samples = tmp_path / "data", Path(__file__).parents[1] / "src" / "openqna" / "samples"
    run("import", "kb", str(samples / "product-guide.md"), data=data)
    faq = run("import", "kb", str(samples / "openqna-faq.tsv"), data=data)
    assert "14 added, 0 updated, 0 unchanged (23 QnAs, 9 passages)" in faq.stdout
    assert "0 added, 0 updated, 14 unchanged" in run("import", "kb", str(samples / "openqna-faq.tsv"), data=data).stdout
    assert "18 unchanged, 0 deleted" in run("import", "kb", str(samples / "product-guide.md"), data=data).stdout
    counts = Counter((q.source, q.kind) for q in SQLiteStore(data).list_qnas("kb"))
    assert counts == {("product-guide.md", "qna"): 9, ("product-guide.md", "passage"): 9, ("openqna-faq.tsv", "qna"): 14}

    first, second = tmp_path / "first.tsv", tmp_path / "second.tsv"  # two exports, both numbered from 1
    for path, (opening, follow) in ((first, ("hello", "more")), (second, ("bye", "again"))):
        path.write_text(f"Question\tAnswer\tPrompts\tQnaId\n{opening}\tit is {opening}\t"
                        f'[{{"DisplayOrder":0,"QnaId":2,"DisplayText":"{follow}"}}]\t1\n{follow}\tit is {follow}\t[]\t2\n')
    assert "4 added" in run("import", "two", str(first), str(second), data=data).stdout
    by_question = {q.questions[0]: q for q in SQLiteStore(data).list_qnas("two")}
    assert by_question["hello"].dialog.prompts[0].qna_id == by_question["more"].id == 2
    assert by_question["bye"].dialog.prompts[0].qna_id == by_question["again"].id not in (1, 2)
    assert "0 added, 0 updated, 4 unchanged" in run("import", "two", str(first), str(second), data=data).stdout


def test_import_ask_deploy_export(tmp_path):
    data = tmp_path / "data"
    first = run("import", "chitchat", str(CHITCHAT), data=data)
    assert "96 added, 0 updated, 0 unchanged (96 QnAs)" in first.stdout
    again = run("import", "chitchat", str(CHITCHAT), data=data)
    assert "0 added, 0 updated, 96 unchanged (96 QnAs)" in again.stdout

    answer = run("ask", "chitchat", "how old are you?", "--top", "2", "--filter", "Editorial=ChitChat", data=data)
    lines = [l for l in answer.stdout.splitlines() if l.startswith("[")]
    assert len(lines) == 2
    assert "Age doesn't really apply to me." in answer.stdout
    confidence = float(lines[0][1:7])
    assert 0.5 < confidence <= 1.0
    nothing = run("ask", "chitchat", "how old are you?", "--filter", "editorial=none", data=data)
    assert "(default answer) No good match found in KB." in nothing.stdout

    run("deploy", "chitchat", data=data)
    assert "deployments: production" in run("projects", data=data).stdout

    out = tmp_path / "export.tsv"
    run("export", "chitchat", str(out), "--deployment", "production", data=data)
    run("import", "copy", str(out), data=data)
    from openqna.store.sqlite import SQLiteStore

    store = SQLiteStore(data)
    original = {(tuple(q.questions), q.answer, q.source, tuple(q.metadata.items())) for q in store.list_qnas("chitchat")}
    copied = {(tuple(q.questions), q.answer, q.source, tuple(q.metadata.items())) for q in store.list_qnas("copy")}
    assert original == copied and len(copied) == 96


def test_import_a_spreadsheets_csv_and_ask_it(tmp_path):
    """A FAQ saved from a spreadsheet as CSV: quoted commas and line breaks arrive as written."""
    faq = tmp_path / "faq.csv"
    faq.write_bytes("\ufeffQuestion,Answer,Metadata\r\n"
                    '"How do I reset, or change, my password?","Open Settings, then:\r\n1. click Reset\r\n'
                    '2. confirm by e-mail",area:account\r\n'
                    '"I forgot my password","Open Settings, then:\r\n1. click Reset\r\n2. confirm by e-mail",'
                    'area:account\r\n'
                    'What does the plan cost?,"12,50 EUR a month",area:billing\r\n'.encode("utf-8"))
    assert "2 added, 0 updated, 0 unchanged (2 QnAs)" in run("import", "faq", str(faq), data=tmp_path).stdout
    answer = run("ask", "faq", "i forgot my password", "--top", "1", data=tmp_path).stdout
    assert "Open Settings, then:\n    1. click Reset\n    2. confirm by e-mail" in answer  # its lines, indented
    assert run("ask", "faq", "i forgot my password", "--top", "1", "--deployment", "Test", data=tmp_path).stdout \
        == answer  # the live state in any case, as the Azure API reads it ("not found" here)
    assert "12,50 EUR" in run("ask", "faq", "how much does the plan cost?", "--top", "1", data=tmp_path).stdout
    out = tmp_path / "review.csv"  # exported for review in the spreadsheet, and back
    assert "wrote 2 QnAs" in run("export", "faq", str(out), data=tmp_path).stdout
    assert "0 added, 0 updated, 2 unchanged" in run("import", "faq", str(out), data=tmp_path).stdout


def test_a_tsv_export_says_it_leaves_the_synonyms_out(tmp_path):
    """A TSV or CSV holds QnAs or synonyms, never both: the synonyms were left out of such an export in silence."""
    faq, synonyms = tmp_path / "faq.tsv", tmp_path / "synonyms.tsv"
    faq.write_text("Question\tAnswer\nhow do I reset my pc?\tRestart it.\n")
    synonyms.write_text('Synonyms\n"pc","computer"\n')
    run("import", "kb", str(faq), str(synonyms), data=tmp_path)
    for name in ("kb.tsv", "kb.csv"):
        out = run("export", "kb", str(tmp_path / name), data=tmp_path)
        assert f"1 synonym groups are not in a .{name[3:]} file" in out.stderr
    assert "synonym" not in run("export", "kb", str(tmp_path / "kb.json"), data=tmp_path).stderr


def test_malformed_file_names_line_and_column_and_imports_nothing(tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_text("Question\tAnswer\tSource\tMetadata\nhi\thello\tEditorial\tcategory:greeting\n"
                   "bye\tsee you\tEditorial\tnot-a-pair\n", encoding="utf-8")
    proc = run("import", "kb", str(bad), data=tmp_path / "data", check=False)
    assert proc.returncode == 2
    assert "line 3" in proc.stderr and "column 4" in proc.stderr
    assert not (tmp_path / "data").exists()


def test_ask_rejects_bad_input(tmp_path):
    run("import", "chitchat", str(CHITCHAT), data=tmp_path)
    proc = run("ask", "chitchat", "hi", "--filter", "novalue", data=tmp_path, check=False)
    assert proc.returncode == 2 and "KEY=VALUE" in proc.stderr
    proc = run("ask", "missing", "hi", data=tmp_path, check=False)
    assert proc.returncode == 2 and "not found" in proc.stderr
    proc = run("ask", "chitchat", "x" * 1001, data=tmp_path, check=False)
    assert proc.returncode == 2 and "limit is 1000" in proc.stderr
    proc = run("ask", "chitchat", "  ", data=tmp_path, check=False)
    assert proc.returncode == 2 and "the question is empty" in proc.stderr and "[" not in proc.stdout


def test_export_names_its_format_and_counts_by_kind(tmp_path):
    guide = tmp_path / "guide.md"
    guide.write_text(GUIDE, encoding="utf-8")
    data = tmp_path / "data"
    imported = run("import", "manuals", str(guide), data=data).stdout
    qnas, passages = re.search(r"(\d+) QnAs and (\d+) passages", imported).groups()
    refused = run("export", "manuals", str(tmp_path / "out.pdf"), data=data, check=False)
    assert refused.returncode == 2 and ".tsv, .csv, .xlsx or .json" in refused.stderr
    assert not (tmp_path / "out.pdf").exists()
    wrote = run("export", "manuals", str(tmp_path / "out.tsv"), data=data).stdout
    assert wrote.startswith(f"wrote {qnas} QnAs and {passages} passages of manuals (test) to ")
    nowhere = run("export", "manuals", str(tmp_path / "no" / "such" / "out.tsv"), data=data, check=False)
    assert nowhere.returncode == 2 and "Traceback" not in nowhere.stderr, nowhere.stderr
    assert nowhere.stderr.startswith("error: cannot write ") and "out.tsv" in nowhere.stderr


def test_creating_a_table_under_a_taken_name_is_one_clear_error(tmp_path):
    data = tmp_path / "data"
    run("import", "faq", str(CHITCHAT), data=data)
    for name in ("faq", "FAQ"):
        taken = run("table", "create", name, "--column", "id:String", "--text", "id", data=data, check=False)
        assert taken.returncode == 2 and "Traceback" not in taken.stderr, taken.stderr
        assert "already" in taken.stderr and "faq" in taken.stderr
    assert "96 QnAs" in run("projects", data=data).stdout


def test_keys_are_printed_once_and_stored_hashed(tmp_path):
    created = run("keys", "create", "--name", "bot", "--role", "query", data=tmp_path)
    secret = created.stdout.strip()
    assert secret.startswith("oq_") and len(secret.splitlines()) == 1
    listed = run("keys", "list", data=tmp_path).stdout
    assert "query" in listed and "bot" in listed and secret not in listed
    assert secret.encode() not in (tmp_path / "openqna.sqlite3").read_bytes()
    # the first key closes the server to callers without one, and a query key cannot make more: both said
    assert "first key" in created.stderr and "--role admin" in created.stderr
    assert "first key" not in run("keys", "create", "--name", "ops", data=tmp_path).stderr


def test_serve_refuses_public_bind_without_keys(tmp_path):
    proc = run("serve", "--host", "0.0.0.0", "--port", str(free_port()), data=tmp_path, check=False)
    assert proc.returncode == 2 and "without API keys" in proc.stderr


def test_a_server_on_a_network_address_stays_closed_when_its_last_key_is_revoked(tmp_path):
    """It refused to start without keys, but once serving, revoking its last key let everyone on the network in,
    writes included (a made-up key, or none, created a project): it now refuses every caller until a key exists."""
    data = tmp_path / "data"
    secret = run("keys", "create", "--role", "author", data=data).stdout.strip()
    key_id = run("keys", "list", data=data).stdout.split("\t")[0]
    with ServeProcess(data, tmp_path / "serve.log", args=("--host", "0.0.0.0", "--no-sample")) as serve:
        def create(key: str | None) -> int:
            headers = {"Ocp-Apim-Subscription-Key": key} if key else {}
            return httpx.patch(f"{serve.url}/language/authoring/query-knowledgebases/projects/pwned",
                               params={"api-version": "2023-04-01"}, json={"language": "en"}, headers=headers,
                               timeout=30).status_code

        assert create(None) == 401 and create("oq_made_up") == 401
        run("keys", "revoke", key_id, data=data)
        assert create(None) == 401 and create("oq_made_up") == 401 and create(secret) == 401
        again = run("keys", "create", "--role", "author", data=data).stdout.strip()
        assert create(again) == 201
        serve.stop(signal.SIGINT)


def test_serve_loads_the_sample_and_answers(tmp_path):
    with ServeProcess(None, tmp_path / "serve.log", env={"OPENQNA_DATA": str(tmp_path / "data")}) as serve:
        r = httpx.post(f"{serve.url}/language/:query-knowledgebases",
                       params={"projectName": "openqna-faq", "deploymentName": "production", "api-version": "2023-04-01"},
                       json={"question": "how do I import a tsv file?", "top": 1}, timeout=30)
        assert r.status_code == 200
        assert r.json()["answers"][0]["id"] == 3
        assert r.json()["answers"][0]["dialog"]["prompts"][0]["qnaId"] == 4
        serve.stop(signal.SIGINT)


def test_suggestions_and_key_revocation(tmp_path):
    run("import", "chitchat", str(CHITCHAT), data=tmp_path)
    from openqna.store.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path)
    qid = next(q.id for q in store.list_qnas("chitchat") if q.answer == "Age doesn't really apply to me.")
    store.add_feedback("chitchat", [(qid, "how many birthdays have you had", "u1")] * 3)
    listed = run("suggestions", "chitchat", data=tmp_path).stdout
    assert listed.splitlines()[0] == "QnA\tcount\tuser question"
    assert f"#{qid}\t3\thow many birthdays have you had" in listed
    run("suggestions", "chitchat", "--accept", str(qid), "how many birthdays have you had", data=tmp_path)
    assert run("suggestions", "chitchat", data=tmp_path).stdout.startswith("chitchat has no suggestions")
    assert "how many birthdays have you had" in store.get_qnas("chitchat", [qid])[qid].questions
    answer = run("ask", "chitchat", "how many birthdays have you had", "--top", "1", data=tmp_path).stdout
    assert answer.startswith("[1.0000]")

    run("keys", "create", data=tmp_path)
    key_id = run("keys", "list", data=tmp_path).stdout.split("\t")[0]
    revoked = run("keys", "revoke", key_id, data=tmp_path)
    assert f"revoked key {key_id}" in revoked.stdout and "that was the last key" in revoked.stderr
    assert run("keys", "list", data=tmp_path).stdout == ""
    assert run("keys", "revoke", key_id, data=tmp_path, check=False).returncode == 2


def test_serve_runs_blas_on_the_request_thread():
    """`openqna serve` limits numpy's BLAS to one thread (its pool serialises concurrent requests)."""
    code = ("import numpy, threadpoolctl\n"
            "from openqna.cli.main import one_blas_thread\n"
            "before = [p['num_threads'] for p in threadpoolctl.threadpool_info() if p['user_api'] == 'blas']\n"
            "one_blas_thread()\n"
            "after = [p['num_threads'] for p in threadpoolctl.threadpool_info() if p['user_api'] == 'blas']\n"
            "print(before, after)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "OPENBLAS_NUM_THREADS": "2"}).stdout.split()
    assert out == ["[2]", "[1]"]


def test_serve_refuses_a_bad_exact_search_max(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENQNA_EXACT_SEARCH_MAX", "lots")
    proc = run("serve", "--port", "1", data=tmp_path / "data", check=False)
    assert proc.returncode == 2 and "OPENQNA_EXACT_SEARCH_MAX must be a whole number" in proc.stderr


def test_serve_refuses_a_bad_pg_vector_search(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENQNA_PG_VECTOR_SEARCH", "hnsw")
    proc = run("serve", "--port", "1", data=tmp_path / "data", check=False)
    assert proc.returncode == 2 and "OPENQNA_PG_VECTOR_SEARCH must be `memory` or `pgvector`" in proc.stderr


def test_serve_refuses_a_bad_query_threads(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENQNA_QUERY_THREADS", "0")
    proc = run("serve", "--port", "1", data=tmp_path / "data", check=False)
    assert proc.returncode == 2 and "OPENQNA_QUERY_THREADS must be `auto` or a whole number" in proc.stderr


@pytest.mark.parametrize("name, value, says", [
    ("OPENQNA_EMBED_BATCH", "0", "a whole number of questions (1 or more)"),
    ("OPENQNA_EMBED_BATCH_WAIT_MS", "-2", "a number of milliseconds from 0 to 1000"),
    ("OPENQNA_SLOW_REQUESTS_PER_ADDRESS", "-1", "a whole number of requests (0 or more)"),
    ("OPENQNA_NEAR_TOPIC", "2", "a share from 0 to 1, such as 0.1 (empty: off)"),
    ("OPENQNA_SECRET_KEY", "my-password", "a Fernet key, 32 bytes in URL-safe base64"),
    ("OPENQNA_TRAINED_MAX_MB", "0", "a whole number of MB (1 or more)"),  # was a 500 on every question
])
def test_serve_refuses_a_bad_setting(tmp_path, monkeypatch, name, value, says):
    monkeypatch.setenv(name, value)
    proc = run("serve", "--port", "1", data=tmp_path / "data", check=False)
    assert proc.returncode == 2 and f"{name} must be {says}" in proc.stderr and "Traceback" not in proc.stderr
    assert (value in proc.stderr) is not name.endswith("_KEY")  # a secret is never printed back (to the logs)


@pytest.mark.parametrize("name, value", [("OPENQNA_NEAR_TOPIC", "2"), ("OPENQNA_EXACT_SEARCH_MAX", "lots")])
def test_a_bad_setting_read_per_question_is_one_error_line(tmp_path, monkeypatch, name, value):
    """Settings read when used (on every question) ended `openqna ask` in a traceback."""
    run("import", "demo", str(REPO / "src" / "openqna" / "samples" / "openqna-faq.tsv"), data=tmp_path)
    monkeypatch.setenv(name, value)
    proc = run("ask", "demo", "how do I start the server?", data=tmp_path, check=False)
    assert proc.returncode == 2 and proc.stderr.startswith(f"error: {name} must be ") and "Traceback" not in proc.stderr


def test_unknown_embedder_is_a_clear_error(tmp_path):
    env = {**os.environ, "OPENQNA_DATA": str(tmp_path), "HF_HUB_OFFLINE": "1", "OPENQNA_EMBEDDER": "minilm-xl"}
    proc = subprocess.run([OPENQNA, "ask", "sample", "hello"], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "unknown embedder 'minilm-xl'" in proc.stderr and "'mpnet'" in proc.stderr


def test_a_project_embedded_by_one_model_is_refused_by_the_other(tmp_path):
    run("import", "chitchat", str(CHITCHAT), data=tmp_path)
    env = {**os.environ, "OPENQNA_DATA": str(tmp_path), "HF_HUB_OFFLINE": "1", "OPENQNA_EMBEDDER": "mpnet"}
    proc = subprocess.run([OPENQNA, "ask", "chitchat", "hello"], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "openqna reembed chitchat" in proc.stderr


@pytest.mark.parametrize("args", [("projects",), ("ask", "kb", "hi"), ("export", "kb", "out.tsv"), ("sources", "kb"),
                                  ("suggestions", "kb"), ("keys", "list"), ("deploy", "kb"), ("keys", "revoke", "k")])
def test_a_read_only_command_without_a_store_says_where_it_looked(tmp_path, args):
    data = tmp_path / "elsewhere"
    proc = run(*args, data=data, check=False)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.splitlines() == [f"error: no openqna store in {data} (looked for {data / 'openqna.sqlite3'}); "
                                        "pass --data or set OPENQNA_DATA to the folder that has one"]
    assert not data.exists()


def test_a_command_that_creates_a_store_says_where(tmp_path):
    data = tmp_path / "new"
    first = run("keys", "create", data=data)
    assert f"created a new openqna store at {data / 'openqna.sqlite3'}" in first.stderr
    assert "created a new openqna store" not in run("keys", "create", data=data).stderr


GUIDE = ("# Charging\n\nCharge the battery for eight hours before you first use the scooter; later charges take "
         "two hours.\n\n# Cleaning\n\nWipe the deck with a damp cloth and never hose the motor down.\n")


def test_listings_tell_qnas_from_passages_and_projects_from_files(tmp_path):
    guide = tmp_path / "guide.md"
    guide.write_text(GUIDE, encoding="utf-8")
    data = tmp_path / "data"
    imported = run("import", "manuals", str(guide), data=data).stdout
    qnas, passages = (int(n) for n in re.search(r"(\d+) QnAs and (\d+) passages", imported).groups())
    assert qnas and passages
    from openqna.store.sqlite import SQLiteStore

    store = SQLiteStore(data)
    store.create_project(Project("file-abc"))
    project = store.get_project("file-abc")
    project.settings["openai_file"] = "file-abc"
    store.update_project(project)
    listed = run("projects", data=data).stdout.splitlines()
    assert f"manuals\tproject\t{qnas} QnAs, {passages} passages\tdeployments: none" in listed
    assert "file-abc\tOpenAI file\t0 QnAs, 0 passages\tdeployments: none" in listed

    sources = run("sources", "manuals", data=data).stdout.splitlines()
    assert sources[0] == "source\tkind\tQnAs\tpassages\tlast updated\trefresh\tlast check\tlast change\toutcome"
    assert sources[1].startswith("guide.md\t") and not any(line.endswith("-") for line in sources)
    assert re.search(r"\t20\d\d-\d\d-\d\dT[\d:]+Z$", sources[1]), "an imported file's last update is its import's"

    question = "how long do I charge it the first time?"
    assert "(passage)" not in run("ask", "manuals", question, "--top", "5", data=data).stdout
    assert "(passage)" in run("ask", "manuals", question, "--top", "5", "--unstructured", data=data).stdout

    none = run("suggestions", "manuals", data=data)
    assert none.stdout.startswith("manuals has no suggestions")


def test_calibrate_documents_its_minimum_and_resets_without_a_file(tmp_path):
    from openqna.kb.calibrate import MIN_QUESTIONS

    helped = run("calibrate", "--help", data=tmp_path).stdout
    assert f"at least {MIN_QUESTIONS} questions" in " ".join(helped.split())
    docs = (Path(__file__).parents[1] / "docs" / "confidence.md").read_text(encoding="utf-8")
    assert f"at least {MIN_QUESTIONS} questions" in " ".join(docs.split())
    run("import", "chitchat", str(CHITCHAT), data=tmp_path)
    assert "calibration reset to the shipped one" in run("calibrate", "chitchat", "--reset", data=tmp_path).stdout
    missing = run("calibrate", "chitchat", data=tmp_path, check=False)
    assert missing.returncode == 2 and "--reset" in missing.stderr


def test_calibrate_on_a_file_that_is_not_utf8_is_one_clear_error(tmp_path):
    run("import", "chitchat", str(CHITCHAT), data=tmp_path)
    latin1 = tmp_path / "questions.tsv"
    latin1.write_bytes("quel âge as-tu ?\t1\n".encode("latin-1"))
    proc = run("calibrate", "chitchat", str(latin1), data=tmp_path, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("error: questions.tsv: not UTF-8 text"), proc.stderr


def test_an_unreachable_postgresql_store_is_one_clear_error(tmp_path):
    """OPENQNA_STORE or migrate's --to naming a PostgreSQL server that does not answer: one line, no traceback."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    url = f"postgresql://reader:s3cret@127.0.0.1:{port}/kb"
    for args, env in ((("projects",), {"OPENQNA_STORE": url}),
                      (("migrate", "--from", str(tmp_path / "d"), "--to", url), {})):
        if args[0] == "migrate":
            run("import", "chitchat", str(CHITCHAT), data=tmp_path / "d")
        proc = run(*args, data=tmp_path / "d", env=env, check=False)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert proc.stderr.startswith("error: cannot connect to the PostgreSQL store") and "s3cret" not in proc.stderr


def test_a_store_url_of_another_scheme_is_refused_not_made_a_folder(tmp_path):
    """OPENQNA_STORE (or migrate's --from/--to) with a URL that is not PostgreSQL's made an empty SQLite store in a
    folder named after it ('postgresq:/user:pw@db:5432/prod'); now one line names the accepted forms, and a plain
    directory still works."""
    data = tmp_path / "data"
    run("import", "chitchat", str(CHITCHAT), data=data, cwd=tmp_path)
    for args, env in ((("projects",), {"OPENQNA_STORE": "postgresq://user:s3cret@db:5432/prod"}),
                      (("serve", "--port", str(free_port())), {"OPENQNA_STORE": "mysql://x"}),
                      (("backup", str(tmp_path / "b")), {"OPENQNA_STORE": "mysql://x"}),
                      (("migrate", "--from", str(data), "--to", "postgresq://user:s3cret@db/prod"), {}),
                      (("migrate", "--from", "mysql://x", "--to", str(tmp_path / "to")), {})):
        proc = run(*args, data=data, env=env, check=False, cwd=tmp_path)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr and "s3cret" not in proc.stderr, proc.stderr
        [line] = proc.stderr.splitlines()
        assert "must be a postgresql:// (or postgres://) URL or a data directory, not a " in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]
    elsewhere = run("projects", data=tmp_path / "unused", env={"OPENQNA_STORE": str(data)}, cwd=tmp_path)
    assert elsewhere.stdout.startswith("chitchat\t")


def test_a_directory_in_openqna_store_is_the_store_for_every_command(tmp_path):
    """With OPENQNA_STORE naming a directory, `backup` said "the store is PostgreSQL", and a reading command on a
    directory without a store made an empty one there in silence (any value counted as an existing store)."""
    data, unused = tmp_path / "data", tmp_path / "unused"
    empty = run("projects", data=unused, env={"OPENQNA_STORE": str(tmp_path / "typo")}, check=False)
    assert empty.returncode == 1 and f"no openqna store in {tmp_path / 'typo'}" in empty.stderr, empty.stderr
    assert not (tmp_path / "typo").exists()
    made = run("import", "chitchat", str(CHITCHAT), data=unused, env={"OPENQNA_STORE": str(data)})
    assert f"created a new openqna store at {data / 'openqna.sqlite3'}" in made.stderr
    copy = run("backup", str(tmp_path / "copy"), data=unused, env={"OPENQNA_STORE": str(data)})
    assert "Traceback" not in copy.stderr and (tmp_path / "copy" / "openqna.sqlite3").exists(), copy.stderr
    assert run("projects", data=tmp_path / "copy").stdout.startswith("chitchat\t")
    assert not unused.exists() or not (unused / "openqna.sqlite3").exists()


def test_migrate_from_a_folder_without_a_store_creates_nothing(tmp_path):
    proc = run("migrate", "--from", str(tmp_path / "typo"), "--to", str(tmp_path / "to"), data=tmp_path, check=False)
    assert proc.returncode == 1 and "no openqna store in" in proc.stderr, proc.stderr
    assert "pass --from the folder that has one" in proc.stderr and "--data" not in proc.stderr, proc.stderr
    assert not (tmp_path / "typo").exists() and not (tmp_path / "to").exists()


def test_migrate_refuses_a_target_project_of_the_same_name_made_elsewhere(tmp_path):
    """A project of the same name that the target got on its own (not from this source) is named and left alone; a
    rerun into a target the source was migrated to says everything is there."""
    run("import", "chitchat", str(CHITCHAT), data=tmp_path / "a")
    run("import", "chitchat", str(CHITCHAT), data=tmp_path / "b")  # the same content, made at another time
    proc = run("migrate", "--from", str(tmp_path / "a"), "--to", str(tmp_path / "b"), data=tmp_path, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("error: The target store already has project chitchat (its settings, records of test "
                                 "differ)")
    assert "nothing was copied" in proc.stderr
    run("migrate", "--from", str(tmp_path / "a"), "--to", str(tmp_path / "c"), data=tmp_path)
    again = run("migrate", "--from", str(tmp_path / "a"), "--to", str(tmp_path / "c"), data=tmp_path)
    assert "everything was already in the target (1 projects, 0 files, 0 keys); nothing was changed" in again.stdout


def test_every_group_command_has_a_description(tmp_path):
    for group, commands in (("keys", ("create", "list", "revoke")), ("table", ("create", "load"))):
        listed = run(group, "--help", data=tmp_path).stdout
        for command in commands:
            line = next(l for l in listed.splitlines() if l.strip().startswith(command + " "))
            assert len(line.split()) > 2, line


def test_data_help_shows_the_effective_default(tmp_path):
    helped = "".join(run("projects", "--help", data=tmp_path / "mine").stdout.split())  # help wraps anywhere
    assert f"default:{tmp_path / 'mine'}" in helped and "OPENQNA_DATAwhenset" in helped


def test_an_unsupported_file_lists_every_accepted_type(tmp_path):
    table = tmp_path / "faq.ods"
    table.write_text("question,answer\nhi,hello\n", encoding="utf-8")
    proc = run("import", "kb", str(table), data=tmp_path / "data", check=False)
    assert proc.returncode == 2
    for suffix in (".tsv", ".csv", ".xlsx", ".json", ".zip", ".pdf", ".docx", ".html", ".md"):
        assert suffix in proc.stderr
    assert len(proc.stderr.splitlines()) == 1


def test_a_synonyms_file_reports_the_groups_stored(tmp_path):
    synonyms = tmp_path / "synonyms.tsv"
    synonyms.write_text('Synonyms\n"tsv","tab separated"\n"kb","knowledge base"\n', encoding="utf-8")
    out = run("import", "kb", str(synonyms), data=tmp_path / "data").stdout
    assert "(0 QnAs, 2 synonym groups)" in out


def test_one_file_import_leaves_no_parsing_bar(tmp_path):
    guide = tmp_path / "guide.md"
    guide.write_text(GUIDE, encoding="utf-8")
    assert "parsing" not in run("import", "manuals", str(guide), data=tmp_path / "data").stderr


def test_table_load_lists_every_bad_json_row(tmp_path):
    data = tmp_path / "data"
    run("table", "create", "papers", "--column", "title:String", "--column", "year:Int64", "--text", "title",
        data=data)
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"title": "a", "year": 2020}\n{"title": \n[1, 2]\n{"title": "b", "year": 2021}\nnope\n',
                    encoding="utf-8")
    proc = run("table", "load", "papers", str(rows), data=data, check=False)
    assert proc.returncode == 2
    assert "3 bad row(s)" in proc.stderr
    assert "row 2: not valid JSON" in proc.stderr and "row 3: expected a JSON object" in proc.stderr
    assert "row 5: not valid JSON" in proc.stderr


@pytest.mark.parametrize(("name", "content", "says"), [
    ("rows.jsonl", b'{"title": "caf\xe9", "year": 2020}\n', "not UTF-8"),
    ("rows.csv", b"title,year\ncaf\xe9,2020\n", "not UTF-8"),
    ("rows.csv", b'title,year\n"open,2020\n' + b"x" * 140_000, "not readable as CSV by line 3"),
    ("rows.parquet", b"PAR1 not really PAR1", "not a readable Parquet file"),
    ("rows.parquet", b"", "not a readable Parquet file"),
])
def test_table_load_of_an_unreadable_file_is_one_clear_error(tmp_path, name, content, says):
    data = tmp_path / "data"
    run("table", "create", "papers", "--column", "title:String", "--column", "year:Int64", "--text", "title",
        data=data)
    (tmp_path / name).write_bytes(content)
    proc = run("table", "load", "papers", str(tmp_path / name), data=data, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith(f"error: {name}: {says}"), proc.stderr


def test_table_load_says_which_rows_it_replaces_and_source_keeps_files_apart(tmp_path):
    """A load replaces the rows its source holds (a corrected file loaded again replaces its rows), and the source was
    always the file's name: 2024-02/products.jsonl deleted the rows of 2024-01/products.jsonl, reported only as
    "2 stale rows deleted", and nothing said a load replaces.  --source NAME says what a load replaces, the output
    names the rows it replaced, and names differing in case are one source, as the store matches rows to records
    (compared exactly, PRODUCTS.jsonl took over the products.jsonl rows it repeated and left the others)."""
    from openqna.store.sqlite import SQLiteStore

    data = tmp_path / "data"
    run("table", "create", "shop", "--column", "id:Int64", "--column", "name:String", "--text", "name", data=data)
    jan, feb = tmp_path / "2024-01" / "products.jsonl", tmp_path / "2024-02" / "products.jsonl"
    for path, rows in ((jan, [(1, "Blue shirt"), (3, "Red shirt")]), (feb, [(9, "Green hat")])):
        path.parent.mkdir()
        path.write_text("".join(json.dumps({"id": i, "name": n}) + "\n" for i, n in rows), encoding="utf-8")

    def sources() -> list[tuple[str, str]]:
        return sorted((q.fields["name"], q.source) for q in SQLiteStore(data).list_qnas("shop"))

    out = run("table", "load", "shop", str(jan), "--source", "2024-01", data=data).stdout
    assert out.startswith("shop: 2 rows from products.jsonl as source 2024-01 ("), out
    out = run("table", "load", "shop", str(feb), "--source", "2024-02", data=data).stdout
    assert "replaced" not in out and "0 stale rows deleted" in out, out
    assert sources() == [("Blue shirt", "2024-01"), ("Green hat", "2024-02"), ("Red shirt", "2024-01")]
    jan.write_text('{"id": 1, "name": "Blue shirt"}\n', encoding="utf-8")  # corrected: Red shirt is gone
    out = run("table", "load", "shop", str(jan), "--source", "2024-01", data=data).stdout
    assert "1 stale rows deleted)\nreplaced the 2 rows loaded earlier as source 2024-01\n" in out, out
    assert sources() == [("Blue shirt", "2024-01"), ("Green hat", "2024-02")]

    out = run("table", "load", "shop", str(feb), data=data).stdout  # no --source: the file's name
    assert out.startswith("shop: 1 rows from products.jsonl (") and "replaced" not in out, out
    (tmp_path / "PRODUCTS.jsonl").write_text('{"id": 9, "name": "Green hat"}\n{"id": 4, "name": "Cap"}\n',
                                             encoding="utf-8")
    out = run("table", "load", "shop", str(tmp_path / "PRODUCTS.jsonl"), data=data).stdout
    assert "replaced the 1 rows loaded earlier from a file named products.jsonl\n" in out, out
    assert sources() == [("Blue shirt", "2024-01"), ("Cap", "PRODUCTS.jsonl"), ("Green hat", "2024-02"),
                         ("Green hat", "PRODUCTS.jsonl")]
    out = run("table", "load", "shop", str(jan), data=data).stdout
    assert ("2 stale rows deleted)\nreplaced the 2 rows loaded earlier from a file named PRODUCTS.jsonl (if they "
            "came from another file of that name, give each file its own --source NAME to keep both)") in out, out
    assert sources() == [("Blue shirt", "2024-01"), ("Blue shirt", "products.jsonl"), ("Green hat", "2024-02")]
    helped = " ".join(run("table", "load", "--help", data=data).stdout.split())
    assert "replaces the rows loaded earlier under its --source" in helped, helped
    empty = run("table", "load", "shop", str(jan), "--source", " ", data=data, check=False)
    assert empty.returncode == 2 and "--source" in empty.stderr, empty.stderr


def test_table_load_refuses_csv_cells_the_header_does_not_name(tmp_path):
    """An unquoted comma split 'hello, world' into two cells and the reader dropped the second: the load succeeded
    with s = 'hello'.  A repeated header column kept only its last value.  Such a row is a bad row now (its line
    and how to fix it are listed, nothing is loaded), and such a header is one error."""
    from openqna.store.sqlite import SQLiteStore

    data = tmp_path / "data"
    run("table", "create", "notes", "--column", "id:Int64", "--column", "s:String", "--text", "s", data=data)
    rows = tmp_path / "rows.csv"
    rows.write_text('id,s\n1,"quoted, kept"\n2,hello, world\n', encoding="utf-8")
    proc = run("table", "load", "notes", str(rows), data=data, check=False)
    assert proc.returncode == 2, proc.stdout
    assert "rows.csv: 1 bad row(s), nothing was loaded: row 2: 3 cells but the header names 2 columns (line 3)" \
        in proc.stderr and "quote a cell that holds a comma" in proc.stderr, proc.stderr
    rows.write_text("id,s,id\n1,hello,2\n", encoding="utf-8")
    proc = run("table", "load", "notes", str(rows), data=data, check=False)
    assert proc.returncode == 2 and proc.stderr.startswith("error: rows.csv: the header names column 'id' twice"), \
        proc.stderr
    assert SQLiteStore(data).list_qnas("notes") == []
    rows.write_text('id,s\n1,"quoted, kept"\n\n2,plain\n', encoding="utf-8")
    assert "2 rows from rows.csv" in run("table", "load", "notes", str(rows), data=data).stdout
    assert {q.fields["id"]: q.fields["s"] for q in SQLiteStore(data).list_qnas("notes")} == {1: "quoted, kept",
                                                                                              2: "plain"}

def test_serve_on_a_busy_port_says_so_before_starting(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = run("serve", "--port", str(port), data=tmp_path / "data", check=False)
    assert proc.returncode != 0
    assert proc.stderr.splitlines() == [f"error: port {port} on 127.0.0.1 is already in use; stop what is using it "
                                        "or choose another with --port"]
    assert not (tmp_path / "data").exists()


def test_the_access_log_redacts_export_signatures(tmp_path):
    """An export's resultUrl carries its signature in the query string: the access log must not show it."""
    log = tmp_path / "serve.log"
    with ServeProcess(None, log, env={"OPENQNA_DATA": str(tmp_path / "data"), "OPENQNA_SAMPLE": "0"}) as serve:
        path = "/language/authoring/query-knowledgebases/projects/kb/export/jobs/j1/result"
        r = httpx.get(serve.url + path, params={"api-version": "2023-04-01", "sig": "s3cr3tsignature", "x": "1"})
        assert r.status_code in (403, 404)
        serve.stop(signal.SIGINT)
    logged = log.read_text()
    assert "s3cr3tsignature" not in logged
    assert f"{path}?api-version=2023-04-01&sig=REDACTED&x=1" in logged


def test_deployments_are_versions_that_roll_back(tmp_path):
    import json

    data = tmp_path / "data"
    faq = tmp_path / "faq.tsv"
    faq.write_text("QnaId\tQuestion\tAnswer\n1\tWhen are you open?\tFrom 9 to 5.\n2\tDo you ship abroad?\tTo the EU only.\n")
    run("import", "shop", str(faq), data=data)
    assert "deployed shop to production" in run("deploy", "shop", data=data).stdout
    faq.write_text("QnaId\tQuestion\tAnswer\n1\tWhen are you open?\tFrom 8 to 6.\n2\tDo you ship abroad?\tTo the EU only.\n"
                   "3\tCan I pay by card?\tYes.\n")
    run("import", "shop", str(faq), data=data)
    assert run("deploy", "shop", data=data).stdout.strip().endswith("version 2")

    listed = json.loads(run("deployments", "shop", "--json", data=data).stdout)
    assert [(v["deployment"], v["version"], v["qnas"], v["passages"], v["current"]) for v in listed] == [
        ("production", 1, 2, 0, False), ("production", 2, 3, 0, True)]
    assert {"deployed_at", "hash", "deployed_by"} <= set(listed[0]) and listed[0]["hash"] != listed[1]["hash"]
    assert listed[0]["deployed_by"].startswith("cli ")

    changes = json.loads(run("diff", "shop", "v1", "production", "--json", data=data).stdout)
    assert [q["question"] for q in changes["qnas"]["added"]] == ["Can I pay by card?"]
    [changed] = changes["qnas"]["changed"]
    assert changed["changes"] == {"answer": {"old": "From 9 to 5.", "new": "From 8 to 6."}}
    text = run("diff", "shop", "v1", data=data).stdout
    assert "QnAs: 1 added, 1 changed, 0 deleted" in text and 'answer: "From 9 to 5." -> "From 8 to 6."' in text

    assert "rolled shop to production" in run("deploy", "shop", "production", "--version", "1", data=data).stdout
    answer = run("ask", "shop", "When are you open?", "--deployment", "production", data=data).stdout
    assert "From 9 to 5." in answer
    assert "From 8 to 6." in run("ask", "shop", "When are you open?", data=data).stdout  # test is untouched
    table = run("deployments", "shop", data=data).stdout.splitlines()
    assert table[-1].startswith("* production\tv1") and len(table) == 3

    for version, says in (("9", "never deployed"), ("latest", "version number")):
        bad = run("deploy", "shop", "production", "--version", version, data=data, check=False)
        assert bad.returncode != 0 and says in bad.stderr


def test_deploy_refuses_the_names_the_api_refuses(tmp_path):
    """A deployment the HTTP surfaces cannot route to is refused with the API's rule, not made and then unreachable."""
    data = tmp_path / "data"
    faq = tmp_path / "faq.tsv"
    faq.write_text("Question\tAnswer\nWhen are you open?\tFrom 9 to 5.\n")
    run("import", "shop", str(faq), data=data)
    for name, says in (("", "must be 1-100 ASCII letters"), ("   ", "must be 1-100 ASCII letters"),
                       ("a/b", "must be 1-100 ASCII letters"), ("a" * 500, "must be 1-100 ASCII letters"),
                       ("Test", "'test' always answers the live state")):
        bad = run("deploy", "shop", name, data=data, check=False)
        assert bad.returncode == 2 and says in bad.stderr and "Traceback" not in bad.stderr, (name, bad.stderr)
    assert "deployed shop to prod_1-eu" in run("deploy", "shop", "prod_1-eu", data=data).stdout
    assert "deployments: prod_1-eu" in run("projects", data=data).stdout


def test_duplicates_merge_and_move_question(tmp_path):
    data = tmp_path / "data"
    faq = tmp_path / "faq.tsv"
    faq.write_text("Question\tAnswer\tSource\tMetadata\n"
                   "What are your opening hours?\tWe are open 9 to 5.\tfaq.tsv\t\n"
                   "What are your opening hours?\tWe are open 8 to 8 every day.\tfaq2.tsv\t\n"
                   "Do you ship abroad?\tWe ship to the European Union.\tfaq.tsv\t\n"
                   "Can I pay by credit card?\tWe ship to the European Union.\tfaq.tsv\t\n"
                   "Which payment methods do you accept?\tWe accept Visa, Mastercard and PayPal.\tfaq.tsv\t\n")
    imported = run("import", "shop", str(faq), data=data)
    assert "shop: 1 conflict: run `openqna duplicates shop`" in imported.stdout
    found = json.loads(run("duplicates", "shop", "--json", data=data).stdout)
    conflict = next(f for f in found if f["kind"] == "conflict")
    assert conflict["score"] == 1.0 and len(conflict["qna_ids"]) == 2
    text = run("duplicates", "shop", data=data).stdout
    assert "1 conflicts" in text and f"openqna merge shop {conflict['qna_ids'][0]} {conflict['qna_ids'][1]}" in text
    keep, drop = conflict["qna_ids"]
    assert "merged" in run("merge", "shop", str(keep), str(drop), data=data).stdout
    assert not [f for f in json.loads(run("duplicates", "shop", "--json", data=data).stdout) if f["kind"] == "conflict"]
    bad = run("merge", "shop", str(keep), "999", data=data, check=False)
    assert bad.returncode == 2 and "no QnA with id 999" in bad.stderr
    exported = json.loads(run("duplicates", "shop", "--json", data=data).stdout)
    assert isinstance(exported, list)
    from openqna.kb.catalog import Catalog, open_data

    qnas = {q.questions[0]: q.id for q in Catalog(open_data(str(data))).records("shop")}
    moved = run("move-question", "shop", "Can I pay by credit card?", str(qnas["Do you ship abroad?"]),
                str(qnas["Which payment methods do you accept?"]), data=data)
    assert "moved 'Can I pay by credit card?'" in moved.stdout


def test_backup_while_serving_then_serve_the_copy(tmp_path):
    """`openqna backup` copies the store while a server writes to it; the copy answers as the original did, holds
    the secret key, and is never overwritten; a PostgreSQL store is pointed at its own tools."""
    data, copy = tmp_path / "data", tmp_path / "backup"
    run("import", "chitchat", str(CHITCHAT), data=data)
    (data / "secret.key").write_bytes(b"a-fernet-key-the-connected-tables-use=====")
    env = {"OPENQNA_DATA": str(data), "OPENQNA_SAMPLE": "0"}
    with ServeProcess(None, tmp_path / "serve.log", env=env) as serve:
        url = f"{serve.url}/language/authoring/query-knowledgebases/projects/chitchat/qnas?api-version=2023-04-01"
        writes = [httpx.patch(url, json=[{"op": "add", "value": {"questions": [f"q{i}?"], "answer": f"a{i}"}}])
                  for i in range(3)]  # jobs the server is running while the backup reads
        made = run("backup", str(copy), data=data)
        assert all(w.status_code == 202 for w in writes)
    assert re.search(r"backed up 1 project \(9[6-9] QnAs and passages\) and 0 keys with secret.key to ", made.stdout)
    assert (copy / "secret.key").read_bytes() == (data / "secret.key").read_bytes()
    assert (copy / "secret.key").stat().st_mode & 0o777 == 0o600
    assert not list(copy.glob("*.partial"))
    asked = run("ask", "chitchat", "how old are you?", "--top", "1", data=copy)
    assert "Age doesn't really apply to me." in asked.stdout
    again = run("backup", str(copy), data=data, check=False)
    assert again.returncode == 2 and "never overwrites" in again.stderr
    nothing = run("backup", str(tmp_path / "b2"), data=tmp_path / "none", check=False)
    assert nothing.returncode == 1 and "no openqna store" in nothing.stderr
    remote = run("backup", str(tmp_path / "b3"), data=data, check=False,
                 env={"OPENQNA_STORE": "postgresql://nobody@127.0.0.1:1/none"})
    assert remote.returncode == 2 and "pg_dump" in remote.stderr and not (tmp_path / "b3").exists()
    assert "`openqna migrate --from URL --to FOLDER`" in remote.stderr


@pytest.mark.parametrize("leave", [0, 300_000])  # no room at all; room for part of the copy
def test_backup_onto_a_full_disk_is_one_line_and_leaves_nothing(tmp_path, tiny_disk, leave):
    """A backup onto a full disk was a traceback (sqlite3.OperationalError) and left openqna.sqlite3.partial and its
    journal behind."""
    data, dest = tmp_path / "data", tiny_disk.path / "backup"
    run("import", "chitchat", str(CHITCHAT), data=data)
    (data / "secret.key").write_bytes(b"a-fernet-key-the-connected-tables-use=====")
    dest.mkdir()
    tiny_disk.fill(leave)
    proc = run("backup", str(dest), data=data, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("error: ") and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "disk is full" in proc.stderr and str(dest) in proc.stderr, proc.stderr
    assert list(dest.iterdir()) == []
    tiny_disk.free()
    assert "backed up 1 project" in run("backup", str(dest), data=data).stdout


def test_a_store_on_a_read_only_mount_is_read_and_refuses_writes_in_one_line(tmp_path, tiny_disk):
    """Opening a store wrote to it (BEGIN IMMEDIATE and INSERT OR IGNORE INTO meta), so `projects`, `serve` and
    `migrate --from` on a read-only mount crashed with "attempt to write a readonly database" (or, with no -shm
    beside it, "unable to open database file")."""
    data = tiny_disk.path / "data"
    run("import", "chitchat", str(CHITCHAT), data=data)
    tiny_disk.read_only()
    assert run("projects", data=data).stdout.startswith("chitchat\tproject\t")
    copied = run("migrate", "--from", str(data), "--to", str(tmp_path / "copy"), data=tmp_path)
    assert copied.stdout.startswith("1 projects, "), copied.stdout
    assert run("projects", data=tmp_path / "copy").stdout.startswith("chitchat\tproject\t")
    table = tmp_path / "more.tsv"
    table.write_text("Question\tAnswer\tSource\tMetadata\nwhat is new?\tnothing\tmore\t\n", encoding="utf-8")
    refused = run("import", "chitchat", str(table), data=data, check=False)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    assert f"\nerror: the store in {data} is read-only here" in refused.stderr, refused.stderr
    with ServeProcess(data, tmp_path / "serve.log", env={"OPENQNA_SAMPLE": "0"}) as serve:
        asked = httpx.post(f"{serve.url}/language/:query-knowledgebases", json={"question": "how old are you?"},
                           params={"api-version": "2023-04-01", "projectName": "chitchat", "deploymentName": "test"})
        assert asked.status_code == 200 and "Age doesn't really apply to me." in asked.text, asked.text
        made = httpx.patch(f"{serve.url}/language/authoring/query-knowledgebases/projects/other",
                           params={"api-version": "2023-04-01"}, json={"language": "en"})
        assert made.status_code == 503 and "is read-only here" in made.json()["error"]["message"], made.text
    assert "Traceback" not in (tmp_path / "serve.log").read_text()


def test_migrate_carries_the_key_of_connected_tables_passwords(tmp_path):
    """`openqna migrate --to FOLDER` left secret.key behind: a server of the copy made a new key in silence and answered
    the connected tables 503 (their passwords cannot be decrypted).  It is copied to a folder that has none; a
    folder with another key is warned about."""
    from openqna.kb.catalog import open_data
    from openqna.kb.connected_search import SECRET, ConnectedTable, decrypted, encrypted

    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    run("import", "chitchat", str(CHITCHAT), data=a)
    source = open_data(str(a))
    project = source.get_project("chitchat")
    project.settings[SECRET] = encrypted(source, "the-database-password")  # as `openqna table connect` keeps it
    source.update_project(project)
    copied = run("migrate", "--from", str(a), "--to", str(b), data=tmp_path)
    assert f"copied {a / 'secret.key'} to {b / 'secret.key'}" in copied.stderr, copied.stderr
    assert (b / "secret.key").read_bytes() == (a / "secret.key").read_bytes()
    assert (b / "secret.key").stat().st_mode & 0o777 == 0o600
    target = open_data(str(b))
    info = ConnectedTable("clickhouse", "http://db", "t", "vector", 384, "cosine", "local", [])
    assert decrypted(target, "chitchat", info, target.get_project("chitchat").settings[SECRET]) == \
        "the-database-password"
    c.mkdir()
    (c / "secret.key").write_bytes(b"another key")
    warned = run("migrate", "--from", str(a), "--to", str(c), data=tmp_path)
    assert f"warning: {c / 'secret.key'} is another key than {a / 'secret.key'}" in warned.stderr, warned.stderr
    assert (c / "secret.key").read_bytes() == b"another key"
    again = run("migrate", "--from", str(a), "--to", str(b), data=tmp_path)
    assert "secret.key" not in again.stderr, again.stderr


def test_restore_replaces_the_store_a_killed_server_left_with_its_wal(tmp_path):
    """Restoring by copying openqna.sqlite3 back (what the docs said) after a server was killed left its -wal and -shm
    beside the copy, and SQLite applied them to it: the "restored" store held the writes made after the backup.
    `openqna restore` refuses while the server runs and replaces the file with its WAL once it is gone."""
    data, copy = tmp_path / "data", tmp_path / "backup"
    run("import", "chitchat", str(CHITCHAT), data=data)
    (data / "secret.key").write_bytes(b"the key the backup was taken with")
    run("backup", str(copy), data=data)
    (data / "secret.key").write_bytes(b"a later key")
    backed_up = run("projects", data=copy).stdout
    env = {"OPENQNA_DATA": str(data), "OPENQNA_SAMPLE": "0"}
    serve = ServeProcess(None, tmp_path / "serve.log", env=env)
    try:
        url = f"{serve.url}/language/authoring/query-knowledgebases/projects/chitchat/qnas?api-version=2023-04-01"
        for i in range(3):
            added = httpx.patch(url, json=[{"op": "add", "value": {"questions": [f"q{i}?"], "answer": f"a{i}"}}])
            assert wait_for_job(added.headers["operation-location"])["status"] == "succeeded"
        busy = run("restore", str(copy), data=data, check=False)
        assert busy.returncode == 2 and "is open in another process" in busy.stderr, busy.stderr
        assert "nothing was changed" in busy.stderr and not list(data.glob("*.partial*"))
    finally:
        serve.stop(signal.SIGKILL)
    assert (data / "openqna.sqlite3-wal").stat().st_size > 0  # what a killed server leaves
    by_hand = tmp_path / "by-hand"  # the old way, on a copy of the folder
    shutil.copytree(data, by_hand)
    shutil.copyfile(copy / "openqna.sqlite3", by_hand / "openqna.sqlite3")
    stale = run("projects", data=by_hand, check=False)
    assert stale.returncode != 0 or stale.stdout != backed_up, "the stale WAL no longer shows: test it another way"
    restored = run("restore", str(copy), data=data)
    assert restored.stdout.startswith("restored 1 project (96 QnAs and passages) and 0 keys with secret.key to "), \
        restored.stdout
    assert run("projects", data=data).stdout == backed_up
    assert (data / "secret.key").read_bytes() == b"the key the backup was taken with"
    assert not (data / "openqna.sqlite3-wal").exists() and not list(data.glob("*.partial*"))
    with sqlite3.connect(data / "openqna.sqlite3") as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_import_refuses_prompts_to_missing_qnas_and_writes_nothing(tmp_path):
    """``openqna import`` stored follow-up prompts to QnAs that did not exist, which PATCH .../qnas refuses."""
    dangling = tmp_path / "dang.json"
    dangling.write_text(json.dumps({"Assets": {"Qnas": [{"Id": 1, "Answer": "a1", "Questions": ["reset device"],
        "Dialog": {"Prompts": [{"DisplayOrder": 0, "QnaId": 77, "DisplayText": "go deeper"}]}}]}}), encoding="utf-8")
    proc = run("import", "dang", str(dangling), data=tmp_path, check=False)
    assert proc.returncode == 2 and "QnA 'reset device' (id 1)" in proc.stderr and "[77]" in proc.stderr, proc.stderr
    assert "dang" not in run("projects", data=tmp_path).stdout
    target = tmp_path / "deeper.json"
    target.write_text(json.dumps([{"Id": 77, "Answer": "Deeper.", "Questions": ["go deeper"]}]), encoding="utf-8")
    run("import", "dang", str(target), data=tmp_path)
    assert "1 added" in run("import", "dang", str(dangling), data=tmp_path).stdout  # an import adds to what is stored


def test_migrate_keeps_the_numbers_of_versions_past_those_kept(tmp_path, monkeypatch):
    """Versions whose content was dropped (OPENQNA_VERSIONS_KEPT) came across as nothing, so the kept ones were
    numbered on from 1 and `deploy --version 3` in the copy rolled back to another state than in the original; a
    rerun of the migration then refused the project as different."""
    monkeypatch.setenv("OPENQNA_VERSIONS_KEPT", "2")
    for n in range(1, 5):  # version n holds facts 1 to n
        table = tmp_path / f"faq{n}.tsv"
        table.write_text(f"Question\tAnswer\tSource\tMetadata\nwhat is fact {n}?\tfact number {n}\tfaq{n}\t\n",
                         encoding="utf-8")
        run("import", "kb", str(table), data=tmp_path / "a")
        run("deploy", "kb", "production", data=tmp_path / "a")
    before = run("deployments", "kb", data=tmp_path / "a").stdout
    assert [line.split("\t")[1] for line in before.splitlines()[-4:]] == ["v1", "v2", "v3", "v4"], before
    run("migrate", "--from", str(tmp_path / "a"), "--to", str(tmp_path / "b"), data=tmp_path)
    assert run("deployments", "kb", data=tmp_path / "b").stdout == before
    for store in ("a", "b"):
        run("deploy", "kb", "production", "--version", "3", data=tmp_path / store)
        out = tmp_path / f"production-{store}.tsv"
        run("export", "kb", str(out), "--deployment", "production", data=tmp_path / store)
        facts = sorted(line.split("\t")[1] for line in out.read_text(encoding="utf-8").splitlines()[1:])
        assert facts == ["fact number 1", "fact number 2", "fact number 3"], (store, facts)
    run("migrate", "--from", str(tmp_path / "a"), "--to", str(tmp_path / "c"), data=tmp_path)
    again = run("migrate", "--from", str(tmp_path / "a"), "--to", str(tmp_path / "c"), data=tmp_path)
    assert "nothing was changed" in again.stdout, again.stdout


def test_diff_names_a_changed_model_and_synonyms(tmp_path):
    """A deploy that changes only the trained model or the synonyms changes answers, and `openqna diff` said "0 added,
    0 changed, 0 deleted" between two versions of which one had a model."""
    import json

    from openqna.store.sqlite import SQLiteStore

    data = tmp_path / "data"
    faq = tmp_path / "faq.tsv"
    faq.write_text("QnaId\tQuestion\tAnswer\n1\tWhen are you open?\tFrom 9 to 5.\n")
    run("import", "shop", str(faq), data=data)
    run("deploy", "shop", data=data)
    store = SQLiteStore(data)
    store.set_trained("shop", b"a model", {"kept": True})
    store.set_synonyms("shop", [["open", "opening hours"]])
    trained = store.get_trained("shop")
    store.close()
    changes = json.loads(run("diff", "shop", "v1", "--json", data=data).stdout)
    assert changes["qnas"] == {"added": [], "changed": [], "deleted": []}
    assert changes["synonyms"] == {"added": [["open", "opening hours"]], "removed": []}
    assert changes["model"] == {"changed": True, "old": None,
                                "new": {"hash": trained.hash[:12], "trainedDateTime": trained.created}}
    text = run("diff", "shop", "v1", data=data).stdout
    assert "synonyms: 1 groups added, 0 removed\n  + open, opening hours" in text
    assert f"trained model: changed, none -> {trained.hash[:12]}" in text
    run("deploy", "shop", data=data)
    same = json.loads(run("diff", "shop", "v2", "production", "--json", data=data).stdout)
    assert same["model"]["changed"] is False and same["synonyms"] == {"added": [], "removed": []}
