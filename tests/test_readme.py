"""The README's examples work as written, and its settings table is the settings table."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from conftest import REPO
from openqna.service import AskRequest

README = (REPO / "README.md").read_text(encoding="utf-8")
OPENQNA = str(Path(sys.executable).with_name("openqna"))


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def test_settings_table_matches_the_code():
    from openqna.settings import SETTINGS

    for s in SETTINGS:
        assert f"| `{s.env}` | `{s.default}` | {s.help} |" in README


def test_cli_examples_run(tmp_path):
    (tmp_path / "src").symlink_to(REPO / "src")
    (tmp_path / "product-guide.md").write_text(
        "# Widget\n\n## First use\n\nCharge it for two hours before you use it the first time.\n", encoding="utf-8")
    env = {**os.environ, "OPENQNA_DATA": str(tmp_path / "data"), "HF_HUB_OFFLINE": "1"}
    commands = [line.split("  #")[0].strip() for block in blocks("sh") for line in block.splitlines()]
    commands = [c for c in commands if c.startswith("openqna ")]
    assert len(commands) >= 8
    outputs = {}
    for command in commands:
        if "KEY_ID" in command:  # the README's placeholder for the id `keys list` printed
            command = command.replace("KEY_ID", outputs["openqna keys list"].split("\t")[0])
        proc = subprocess.run([OPENQNA, *shlex.split(command)[1:]], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, f"{command}\n{proc.stdout}\n{proc.stderr}"
        outputs[command] = proc.stdout
    assert "demo: 12 added, 0 updated, 0 unchanged (12 QnAs)" in README
    assert "demo: 12 added, 0 updated, 0 unchanged (12 QnAs)" in outputs["openqna import demo src/openqna/samples/openqna-faq.tsv"]
    assert "Excel" in outputs['openqna ask demo "can I load an excel file?"']
    assert (tmp_path / "demo.xlsx").exists()
    assert "two hours" in outputs['openqna ask manuals "how long should I charge it first?"']
    assert "product-guide.md\tfile\t1 QnAs\t1 passages" in outputs["openqna sources manuals"]


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


def test_curl_example_runs(service):
    from conftest import LiveServer
    from openqna.formats import read_file

    service.import_content("openqna-faq", read_file(REPO / "src" / "openqna" / "samples" / "openqna-faq.tsv"))
    service.deploy("openqna-faq", "production")
    curl = next(b for b in blocks("sh") if b.startswith("curl"))
    with LiveServer(service) as live:
        proc = subprocess.run(["bash", "-c", curl.replace("http://127.0.0.1:8000", live.url)],
                              capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and '"answers"' in proc.stdout and '"id":3' in proc.stdout.replace(" ", "")
