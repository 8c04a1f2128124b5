"""The README's examples work as written, and its settings table is the settings table."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from openqna.authoring import Authoring
from openqna.service import AskRequest

README = (REPO / "README.md").read_text(encoding="utf-8")
OPENQNA = str(Path(sys.executable).with_name("openqna"))
README_KB_ID = "5f0b1c2d-3e4f-4a5b-8c6d-7e8f90a1b2c3"  # the kbId the Bot Framework section keeps


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def test_settings_table_matches_the_code():
    from openqna.settings import SETTINGS

    for s in SETTINGS:
        assert f"| `{s.env}` | `{s.default}` | {s.help} |" in README


def run_block(block: str, cwd: Path, data: Path) -> str:
    """Run one sh block of the README as a user would paste it (the venv's bin on PATH)."""
    env = {**os.environ, "OPENQNA_DATA": str(data), "HF_HUB_OFFLINE": "1",
           "PATH": f"{Path(OPENQNA).parent}:{os.environ['PATH']}"}
    # the README's placeholder for the id `keys list` printed
    block = block.replace("KEY_ID", "$(openqna keys list | head -1 | cut -f1)")
    proc = subprocess.run(["bash", "-e", "-c", block], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{block}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_cli_examples_run(tmp_path):
    (tmp_path / "src").symlink_to(REPO / "src")
    (tmp_path / "product-guide.md").write_text(
        "# Widget\n\n## First use\n\nCharge it for two hours before you use it the first time.\n", encoding="utf-8")
    runnable = [b for b in blocks("sh") if "openqna " in b and not b.startswith(("make", ". .venv", "curl"))]
    assert len(runnable) >= 5
    out = "".join(run_block(b, tmp_path, tmp_path / "data") for b in runnable)
    assert "demo: 12 added, 0 updated, 0 unchanged (12 QnAs)" in README
    assert "demo: 12 added, 0 updated, 0 unchanged (12 QnAs)" in out
    assert "Excel" in out and (tmp_path / "demo.xlsx").exists()
    assert "two hours" in out and "product-guide.md\tfile\t1 QnAs\t1 passages" in out
    assert "papers: 2 rows from papers.jsonl" in out
    assert "revoked key" in out


def test_authoring_example_runs(service):
    from conftest import LiveServer

    example = next(b for b in blocks("python") if "AuthoringClient" in b)
    with LiveServer(service) as live:
        proc = subprocess.run([sys.executable, "-c", example.replace("http://127.0.0.1:8000", live.url)],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith(live.url) and "/export/jobs/" in proc.stdout
    [answer] = service.ask("faq", "production", AskRequest(question="when are you open?", top=1))
    assert answer.qna.answer == "9 to 5, Monday to Friday."


def test_python_example_runs(service):
    from conftest import LiveServer
    from openqna.formats import read_file

    service.import_content("openqna-faq", read_file(REPO / "src" / "openqna" / "samples" / "openqna-faq.tsv"))
    service.deploy("openqna-faq", "production")
    example = next(b for b in blocks("python") if "QuestionAnsweringClient" in b)
    with LiveServer(service) as live:
        code = example.replace("http://127.0.0.1:8000", live.url)
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "make serve" in proc.stdout and "two to four hours" in proc.stdout


def test_curl_examples_run(service, tmp_path):
    from conftest import LiveServer
    from openqna.formats import read_file

    service.import_content("openqna-faq", read_file(REPO / "src" / "openqna" / "samples" / "openqna-faq.tsv"))
    service.deploy("openqna-faq", "production")
    table = next(b for b in blocks("sh") if "openqna table create" in b)
    run_block(table, tmp_path, service.store.directory)
    Authoring(service).set_kb_id("openqna-faq", README_KB_ID)  # what the QnA Maker section's import keeps
    curls = [b for b in blocks("sh") if b.startswith("curl")]
    assert len(curls) == 3
    with LiveServer(service) as live:
        outputs = []
        for curl in curls:
            proc = subprocess.run(["bash", "-c", curl.replace("http://127.0.0.1:8000", live.url)],
                                  capture_output=True, text=True, timeout=60)
            assert proc.returncode == 0
            outputs.append(json.loads(proc.stdout))
    azure, qnamaker, tools = (next(o for c, o in zip(curls, outputs) if marker in c)
                              for marker in (":query-knowledgebases", "/generateAnswer", "get_related"))
    assert azure["answers"][0]["id"] == 3
    assert tools["num_retrieved"] == 1 and "Attention in translation" in tools["documents"]
    assert qnamaker["answers"][0]["id"] == 3 and qnamaker["answers"][0]["score"] > 30


def test_botbuilder_example_runs(service):
    """The Bot Framework example, run by botbuilder-ai 4.17 in its own venv as a bot would."""
    from conftest import LiveServer
    from openqna.formats import read_file

    python = REPO / ".venv-botbuilder" / "bin" / "python"
    assert python.exists(), "run `make test` (it creates .venv-botbuilder with botbuilder-ai 4.17)"
    service.import_content("openqna-faq", read_file(REPO / "src" / "openqna" / "samples" / "openqna-faq.tsv"))
    service.deploy("openqna-faq", "production")
    Authoring(service).set_kb_id("openqna-faq", README_KB_ID)
    example = next(b for b in blocks("python") if "QnAMakerEndpoint" in b)
    with LiveServer(service) as live:
        proc = subprocess.run([str(python), "-c", example.replace("http://127.0.0.1:8000", live.url)],
                              capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "make serve" in proc.stdout


@pytest.mark.parametrize("marker, printed", [
    ('"/answers"', "['Puppy A is happy.']"),
    ("vector_stores.search", "['returns.txt']"),
], ids=["answers", "vector-stores"])
def test_openai_examples_run(service, marker, printed):
    from conftest import LiveServer

    example = next(b for b in blocks("python") if "from openai import OpenAI" in b and marker in b)
    with LiveServer(service) as live:
        proc = subprocess.run([sys.executable, "-c", example.replace("http://127.0.0.1:8000", live.url)],
                              capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == printed
