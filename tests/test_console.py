"""The web console, driven in a real browser (Debian's chromium under Playwright) against a real `openqna serve`.

One journey, as a KB author makes it: sign in with a key; create a project; import the Surface Pro 4
manual; edit a QnA and give it a follow-up prompt; ask in the test chat and open Inspect; deploy after
seeing what changes; the official Azure SDK checks that production answers the edited text; then the
project opts in to the query log, and a question users asked production that got the default answer is
added to a QnA from Analytics.  Keys made in the console show that a query key cannot edit and
that a project-scoped key sees only its project.  A QnA whose answer holds ``<script>`` and an ``onerror``
image is rendered inert.  Any error in the browser's console fails the test.  The screenshots in the
README and docs/authoring.md are taken here, so they show the console as it is.
"""

from __future__ import annotations

import csv
import io
import os
import re
import signal
import subprocess
import sys

import httpx
import pytest
from azure.ai.language.questionanswering import QuestionAnsweringClient
from azure.core.credentials import AzureKeyCredential
from playwright.sync_api import Page, expect, sync_playwright

from conftest import REPO, SAMPLE_DOCS, FileServer, ServeProcess, wait_for_job

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
MANUAL = SAMPLE_DOCS / "data-source-formats" / "product-manual.pdf"
SHOTS = REPO / "docs"
EDITED = "Use the 36-watt charger that came in the box"
HOSTILE = ("Question\tAnswer\tSource\tMetadata\n"
           "is this safe\tHello <script>window.__xss = 1</script> and <img src=x onerror=\"window.__xss = 2\"> "
           "and [click](javascript:window.__xss=3)\tEditorial\t\n")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """`openqna serve` on a fresh SQLite store with one admin key (made by `openqna keys create`)."""
    data = tmp_path_factory.mktemp("console")
    # the owner's journey adds a URL source served on loopback: the operator's allow-list names it
    env = {**os.environ, "OPENQNA_DATA": str(data), "HF_HUB_OFFLINE": "1", "OPENQNA_FETCH_ALLOW": "127.0.0.1/32"}
    cli = [sys.executable, "-m", "openqna.cli.main"]
    made = subprocess.run([*cli, "keys", "create", "--name", "owner", "--role", "admin"], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=True)
    secret = next(w for w in made.stdout.split() if w.startswith("oq_"))
    log = tmp_path_factory.mktemp("console-log") / "serve.log"
    with ServeProcess(None, log, env=env, cwd=REPO, seconds=120) as serve:
        yield serve.url, secret
        serve.stop(signal.SIGINT)


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


class Console:
    """A browser tab on the console that records every console error and uncaught exception."""

    def __init__(self, browser, url: str, width: int = 1280, height: int = 800):
        self.context = browser.new_context(viewport={"width": width, "height": height})
        self.page: Page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.refuse = 0  # how many of the next dialogs to dismiss (Cancel) instead of accepting
        self.page.on("dialog", self._dialog)
        self.page.set_default_timeout(30_000)
        self.url = url

    def _dialog(self, dialog) -> None:
        if self.refuse:
            self.refuse -= 1
            dialog.dismiss()
        else:
            dialog.accept()

    def sign_in(self, secret: str) -> Page:
        page = self.page
        page.goto(self.url + "/")
        expect(page.get_by_role("heading", name="Sign in to openqna")).to_be_visible()
        page.get_by_label("API key").fill(secret)
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("heading", name="Projects")).to_be_visible()
        return page

    def done(self) -> None:
        self.context.close()
        assert not self.errors, "errors in the browser console:\n" + "\n".join(self.errors)


def wait_status(page: Page, text: str, timeout: int = 240_000) -> None:
    expect(page.locator("#status")).to_contain_text(text, timeout=timeout)


def new_key(page: Page, name: str, role: str, projects: str = "") -> str:
    page.get_by_role("link", name="Keys").click()
    expect(page.get_by_role("heading", name="API keys")).to_be_visible()
    page.get_by_label("Name").fill(name)
    page.get_by_label("Role").select_option(role)
    page.get_by_label("Projects (comma-separated)").fill(projects)
    page.get_by_role("button", name="Create key").click()
    card = page.locator(".secret", has=page.get_by_role("heading", name=f"Key {name} created"))
    return card.locator("code.key").inner_text(timeout=30_000).strip()


def test_the_console_journey(server, browser):
    url, secret = server
    SHOTS.mkdir(exist_ok=True)
    tab = Console(browser, url)
    page = tab.page
    # a wrong key first: refused, then the right one, and the refusal does not stay above the projects
    page.goto(url + "/")
    expect(page.locator(".signin .hint code")).to_have_text("openqna keys create")  # code, not `backticks`
    page.get_by_label("API key").fill("oq_not-a-key")
    page.get_by_role("button", name="Sign in").click()
    wait_status(page, "That key was refused by the server.")
    page.get_by_label("API key").fill(secret)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Projects")).to_be_visible()
    expect(page.locator(".who")).to_contain_text("admin")
    expect(page.locator("#status")).to_be_empty()

    # create a project; it opens on its empty QnAs page, where the Surface Pro 4 manual is added as a source
    page.get_by_label("Name").fill("surface")
    page.get_by_role("button", name="Create project").click()
    expect(page.get_by_role("heading", name="surface: QnAs")).to_be_visible()
    expect(page.locator("main")).to_contain_text("This project is empty")
    adder = page.get_by_role("form", name="Add a source")
    expect(adder.get_by_label("or URL source")).to_be_visible()
    adder.get_by_label("File").set_input_files(str(MANUAL))
    adder.get_by_role("button", name="Add source").click()
    expect(page.locator(".progress")).to_contain_text("Importing product-manual.pdf")
    wait_status(page, "Imported product-manual.pdf into surface.")
    result = page.locator(".import-result")  # where the user looks, with the counts
    expect(result).to_contain_text("Imported product-manual.pdf into surface: +81 QnAs and +92 passages.")
    expect(result).to_contain_text("now has 81 QnAs and 92 passages")
    expect(result).to_be_in_viewport()
    page.get_by_role("link", name="← Projects").click()
    expect(page.get_by_role("heading", name="Projects")).to_be_visible()
    row = page.get_by_role("row", name="surface")
    expect(row).to_contain_text("81")  # QnAs, passages counted apart
    expect(row).to_contain_text("92")
    expect(page.get_by_role("form", name="Import").get_by_label("Project", exact=True)).to_be_visible()
    # export from the Projects page: the file downloads at once, and Excel says it is a .zip
    expect(row.get_by_label("Export format for surface").locator("option")).to_contain_text(
        ["JSON", "TSV (.zip)", "Excel (.zip of .xlsx)"])
    with page.expect_download() as download:
        row.get_by_role("button", name="Export surface").click()
    assert download.value.suggested_filename == "surface.json"  # named after the project (was KnowledgeBase.json)
    expect(row.get_by_role("link", name="Download the JSON file again")).to_be_visible()
    page.screenshot(path=str(SHOTS / "console-projects.png"))

    # edit a QnA: an alternate question, a new answer, a follow-up prompt picked by its question
    page.get_by_role("link", name="surface", exact=True).click()
    page.get_by_label("Search").fill("charge your surface")
    page.get_by_role("button", name="Charge your Surface Pro 4").click()
    questions = page.get_by_label("Questions (one per line; the first is the primary one)")
    questions.fill("Charge your Surface Pro 4\nHow do I charge my Surface?")
    page.get_by_label("Answer (Markdown)").fill(f"**Charging**\n\n1. Connect the power cord.\n2. {EDITED}.")
    expect(page.locator(".preview strong")).to_have_text("Charging")
    page.get_by_role("button", name="Add follow-up prompt").click()
    page.get_by_label("Display text").fill("Battery life")
    seven = page.locator("#qna-targets option[value^='#7 ']").get_attribute("value")
    page.get_by_label("Leads to QnA").fill(seven.split(" ", 1)[1])  # QnA 7's question, as a user picks it
    expect(page.locator(".prompt")).to_contain_text("→ QnA 7:")
    expect(page.get_by_label("Order", exact=True)).to_have_value("0")
    page.screenshot(path=str(SHOTS / "console-editor.png"))
    page.get_by_role("button", name="Save").click()
    wait_status(page, "saved.")

    # the test chat: ask, follow the prompt, open Inspect
    page.get_by_role("link", name="Test", exact=True).click()
    expect(page.get_by_role("heading", name="surface: test")).to_be_visible()
    page.get_by_label("Question").fill("How do I charge my Surface?")
    page.get_by_role("button", name="Ask").click()
    answer = page.locator(".chat .bot").first
    expect(answer).to_contain_text(EDITED)
    expect(answer.locator("strong")).to_have_text("Charging")  # Markdown rendered
    answer.get_by_role("button", name="Battery life").click()
    expect(page.locator(".chat .bot").nth(1)).to_contain_text("two to four hours")
    answer.get_by_role("button", name="Inspect").click()
    inspect = page.get_by_role("region", name="Inspect")
    expect(inspect).to_contain_text("Answered by QnA 4")
    why = inspect.locator(".why").first  # the confidence in words first, the raw features behind a toggle
    expect(why).to_contain_text("Matched its question “How do I charge my Surface?” word for word")
    expect(why).to_contain_text("of yours")
    raw = inspect.locator("td details code").first
    expect(raw).to_be_hidden()
    inspect.locator("td details summary").first.click()
    expect(raw).to_contain_text("qsim=")
    expect(inspect).not_to_contain_text("**")  # the span is rendered Markdown
    page.screenshot(path=str(SHOTS / "console-test-chat.png"))

    # a question with no good answer: Inspect says why, and it becomes an alternate question of QnA 4
    page.get_by_role("button", name="New conversation").click()
    unanswered = "where can I plug the power thing in"
    page.get_by_label("Threshold").fill("0.95")
    page.get_by_label("Question").fill(unanswered)
    page.get_by_role("button", name="Ask").click()
    expect(page.locator(".chat .bot").first).to_contain_text("Default answer")
    page.locator(".chat .bot").first.get_by_role("button", name="Inspect").click()
    expect(inspect).to_contain_text("Default answer given")
    inspect.get_by_label("Add this question to QnA").fill("charge your surface pro 4")  # picked by its question
    expect(inspect).to_contain_text("→ QnA 4: Charge your Surface Pro 4")
    inspect.get_by_role("button", name="Add as alternate question").click()
    wait_status(page, "is now an alternate question of QnA 4")

    # deploy: the diff first, then production
    page.get_by_role("link", name="Deploy").click()
    expect(page.get_by_role("heading", name="surface: deployments")).to_be_visible()
    page.get_by_label("Deployment name").fill("production")
    page.get_by_role("button", name="Show changes").click()
    expect(page.locator(".diff")).to_contain_text("QnAs: 81 added, 0 changed, 0 deleted · Passages: 92 added")
    page.get_by_role("button", name="Deploy", exact=True).click()
    confirm = page.get_by_role("alertdialog", name="Confirm deploy")
    expect(confirm).to_contain_text("Deploy test to production? QnAs: 81 added")
    page.screenshot(path=str(SHOTS / "console-deploy.png"))
    confirm.get_by_role("button", name="Confirm deploy").click()
    wait_status(page, "Deployed surface to production.")
    expect(page.get_by_role("heading", name="production")).to_be_visible()
    expect(page.locator("main")).to_contain_text("Identical to test.")
    expect(page.get_by_role("region", name="Versions")).to_contain_text("v1")

    # the official Azure SDK: production answers the edited text
    client = QuestionAnsweringClient(url, AzureKeyCredential(secret))
    result = client.get_answers(question="How do I charge my Surface?", project_name="surface",
                                deployment_name="production")
    assert EDITED in result.answers[0].answer
    assert result.answers[0].dialog.prompts[0].qna_id == 7
    again = client.get_answers(question=unanswered, project_name="surface", deployment_name="production")
    assert again.answers[0].qna_id == 4 and again.answers[0].confidence == 1.0

    # analytics: the project opts in to the query log, a user asks production, and the question that got the
    # default answer is added to a QnA from there; the next deploy would change that QnA
    page.get_by_role("link", name="Analytics").click()
    expect(page.get_by_role("heading", name="surface: analytics")).to_be_visible()
    expect(page.locator("main")).to_contain_text("The query log is off")
    page.get_by_label("Log questions").check()
    page.get_by_role("button", name="Save", exact=True).click()
    wait_status(page, "The query log is on.")
    missing = "is there a student discount"
    for user in ("user-1", "user-2"):
        got = client.get_answers(question=missing, project_name="surface", deployment_name="production",
                                 user_id=user, confidence_threshold=0.9)
        assert got.answers[0].qna_id == -1
    client.get_answers(question="How do I charge my Surface?", project_name="surface", deployment_name="production",
                       user_id="user-3")
    page.get_by_label("Period").select_option("30")
    unanswered = page.get_by_role("region", name="Unanswered").get_by_role("row", name=missing)
    expect(unanswered).to_contain_text("2")
    expect(page.locator("main")).to_contain_text("3 questions from 3 users")
    page.screenshot(path=str(SHOTS / "console-analytics.png"), full_page=True)
    with page.expect_download() as downloaded:  # the period's log, for review in a spreadsheet
        page.get_by_role("button", name="Download the log (CSV)").click()
    assert re.fullmatch(r"surface-queries-\d{4}-\d\d-\d\d-\d{4}-\d\d-\d\d\.csv", downloaded.value.suggested_filename)
    with open(downloaded.value.path(), encoding="utf-8-sig", newline="") as f:
        logged = list(csv.DictReader(f))
    assert [r["question"] for r in logged] == [missing, missing, "How do I charge my Surface?"]
    assert [r["qnaId"] for r in logged][:2] == ["-1", "-1"] and {r["deployment"] for r in logged} == {"production"}
    wait_status(page, "3 questions.")
    qnas = httpx.get(f"{url}/language/authoring/query-knowledgebases/projects/surface/qnas",
                     params={"api-version": "2023-04-01"}, headers={"api-key": secret}).json()["value"]
    third = next(q["questions"][0] for q in qnas if q["id"] == 3)
    unanswered.get_by_label(f'QnA to add "{missing}" to').fill(third)  # picked by its question
    expect(unanswered).to_contain_text("→ QnA 3:")
    unanswered.get_by_role("button", name="Add to QnA").click()
    wait_status(page, f'"{missing}" is now an alternate question of QnA 3')
    page.get_by_role("link", name="Deploy").click()
    expect(page.locator(".diff")).to_contain_text("QnAs: 0 added, 1 changed, 0 deleted")
    expect(page.locator(".diff dl.changes")).to_contain_text(missing)  # the question added, old and new
    page.get_by_role("button", name="Deploy test to production").click()
    page.get_by_role("button", name="Cancel").click()  # nothing is deployed without the confirmation
    expect(page.locator(".diff")).to_contain_text("1 changed")
    page.get_by_role("button", name="Deploy test to production").click()
    page.get_by_role("alertdialog", name="Confirm deploy").get_by_role("button", name="Confirm deploy").click()
    wait_status(page, "Deployed surface to production.")
    assert client.get_answers(question=missing, project_name="surface", deployment_name="production").answers[0].qna_id == 3
    versions = page.get_by_role("region", name="Versions")
    versions.get_by_role("button", name="Roll production back to v1").click()
    page.get_by_role("alertdialog", name="Confirm rollback").get_by_role("button", name="Confirm rollback").click()
    wait_status(page, "Rolled production back to version 1.")
    assert client.get_answers(question=missing, project_name="surface", deployment_name="production",
                              confidence_threshold=0.9).answers[0].qna_id == -1  # production answers as in v1
    expect(page.get_by_role("region", name="Versions").get_by_role("row").nth(1)).to_contain_text("now deployed")

    # keys made in the console
    query_secret = new_key(page, "reader", "query")
    scoped_secret = new_key(page, "surface-author", "author", "surface")
    expect(page.get_by_role("row", name="reader")).to_contain_text("query")
    card = page.get_by_role("region", name="New key secret")  # on top of the page, with a Copy button
    assert card.bounding_box()["y"] < page.locator("table").bounding_box()["y"]
    card.get_by_role("button", name="Copy").click()
    expect(page.locator("#status")).to_contain_text(re.compile("Copied the secret|the secret is selected"))
    page.screenshot(path=str(SHOTS / "console-keys.png"))
    tab.done()

    # a query key reads but cannot edit: no Save button, and the API refuses it
    reader = Console(browser, url)
    page = reader.sign_in(query_secret)
    expect(page.locator(".who")).to_contain_text("query")
    page.get_by_role("link", name="surface").click()
    expect(page.locator(".refused")).to_contain_text("needs the author role")
    expect(page.get_by_role("button", name="Save")).to_have_count(0)
    page.get_by_role("link", name="Test", exact=True).click()  # but it may ask production
    expect(page.get_by_role("heading", name="surface: test")).to_be_visible()
    page.get_by_label("Ask", exact=True).select_option("production")
    page.get_by_label("Question").fill("How do I charge my Surface?")
    page.get_by_role("button", name="Ask").click()
    expect(page.locator(".chat .bot").first).to_contain_text(EDITED)
    refused = httpx.patch(f"{url}/language/authoring/query-knowledgebases/projects/surface/qnas",
                          params={"api-version": "2023-04-01"}, headers={"api-key": query_secret},
                          json=[{"op": "delete", "value": {"id": 4}}])
    assert refused.status_code == 403 and "'query'" in refused.json()["error"]["message"]
    reader.done()

    # a key scoped to one project sees only that project
    scoped = Console(browser, url)
    page = scoped.sign_in(scoped_secret)
    expect(page.get_by_role("link", name="surface")).to_be_visible()
    expect(page.get_by_role("link", name="openqna-faq")).to_have_count(0)
    expect(page.get_by_role("link", name="Keys")).to_have_count(0)
    scoped.done()


def poll_job(location: str, secret: str) -> dict:
    job = wait_for_job(location, headers={"api-key": secret}, states=("succeeded", "failed"), seconds=120)
    assert job["status"] == "succeeded", job
    return job


def import_tsv(url: str, secret: str, project: str, tsv: str) -> None:
    """``tsv`` uploaded into ``project`` (made if need be) through the native files route, its job waited for."""
    made = httpx.post(f"{url}/openqna/projects/{project}/files", params={"name": f"{project}.tsv"},
                      content=tsv.encode(), headers={"api-key": secret}, timeout=60)
    assert made.status_code == 202, made.text
    poll_job(made.headers["Operation-Location"], secret)


def test_hostile_answers_are_rendered_inert(server, browser):
    """An imported answer with <script>, an onerror image and a javascript: link runs nothing, in the chat
    and in the editor's preview (the journey imported it into the project `hostile`)."""
    url, secret = server
    hostile = httpx.post(f"{url}/openqna/projects/hostile/files", params={"name": "hostile.tsv"},
                         content=HOSTILE.encode(), headers={"api-key": secret}, timeout=30)
    assert hostile.status_code == 202
    poll_job(hostile.headers["Operation-Location"], secret)
    tab = Console(browser, url, width=390, height=800)  # a narrow window too
    page = tab.sign_in(secret)
    # by keyboard: a page puts focus on its heading, Tab reaches its controls with a visible focus ring,
    # and the skip link shows when focused
    skip = page.get_by_role("link", name="Skip to content")
    skip.focus()
    assert skip.bounding_box()["x"] >= 0
    page.get_by_role("heading", name="Projects").focus()
    for _ in range(12):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.textContent") == "hostile":
            break
    expect(page.get_by_role("link", name="hostile")).to_be_focused()
    assert page.evaluate("getComputedStyle(document.activeElement).outlineStyle") != "none"
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="hostile: QnAs")).to_be_visible()
    page.get_by_role("button", name="is this safe").click()
    preview = page.locator(".preview")
    expect(preview).to_contain_text("<script>window.__xss = 1</script>")
    page.goto(f"{url}/#/p/hostile/chat")
    expect(page.get_by_role("heading", name="hostile: test")).to_be_visible()
    page.get_by_label("Question").fill("is this safe")
    page.get_by_role("button", name="Ask").click()
    answer = page.locator(".chat .bot").first
    expect(answer).to_contain_text("onerror")
    assert answer.locator("script, img, a[href^='javascript']").count() == 0
    assert page.evaluate("window.__xss") is None
    page.screenshot(path=str(SHOTS / "console-narrow.png"))
    tab.done()


def test_the_page_is_served_with_a_strict_content_policy(server):
    url, _ = server
    page = httpx.get(url + "/")
    assert page.status_code == 200 and '<main id="main"' in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    script = httpx.get(url + "/console/app.js")
    assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
    assert httpx.get(url + "/console/nope.js").status_code == 404


def test_a_development_file_is_measured_and_plotted(server, browser, tmp_path):
    """Improve → Calibration on the sample project: the accuracy/rejection curves before and after the fit."""
    url, secret = server
    qnas = httpx.get(f"{url}/language/authoring/query-knowledgebases/projects/openqna-faq/qnas",
                     params={"api-version": "2023-04-01"}, headers={"api-key": secret}).json()["value"]
    ids = {question: q["id"] for q in qnas for question in q["questions"]}
    dev = [("how do I launch the server", ids["How do I start the server?"]),
           ("can I bring my QnA Maker export", ids["How do I import my QnA Maker knowledge base?"]),
           ("does it work without internet", ids["Does it need an internet connection?"]),
           ("how do I make a key", ids["How do I create an API key?"]),
           ("can I store it in postgres", ids["Does it work with PostgreSQL?"]),
           ("what does production mean", ids["What is the difference between test and production?"]),
           ("what is the weather in Lima", "none"), ("recommend a good novel", "none"),
           ("how tall is Everest", "none"), ("who painted the Mona Lisa", "none"), ("order a pizza", "none"),
           ("does it read Japanese", ids["Does it understand Chinese or Japanese?"])]
    file = tmp_path / "dev.tsv"
    file.write_text("question\tqnaId\n" + "".join(f"{q}\t{a}\n" for q, a in dev), encoding="utf-8")
    tab = Console(browser, url)
    page = tab.sign_in(secret)
    page.goto(f"{url}/#/p/openqna-faq/improve")
    card = page.get_by_role("region", name="Calibration")
    card.get_by_label("Development file").set_input_files(str(file))
    card.get_by_role("button", name="Measure").click()
    expect(card).to_contain_text("12 questions (7 in scope, 5 off-topic)", timeout=60_000)
    assert card.locator("svg.plot polyline").count() == 4
    card.screenshot(path=str(SHOTS / "console-calibration.png"))
    tab.done()


CONFLICTED = ("Question\tAnswer\tSource\tMetadata\n"
              "How do I reset my password?\tOpen Settings, then Account, then Reset password.\tEditorial\t\n"
              "How can I reset my password?\tCall the help desk and they reset it for you.\tEditorial\t\n"
              "What are your opening hours?\tWe are open from 9 to 5 on weekdays.\tEditorial\t\n"
              "Where is your office?\tOur office is at 1 Main Street, Springfield.\tEditorial\t\n")


def test_a_test_set_finds_a_conflict_that_a_merge_fixes(server, browser, tmp_path):
    """Test sets and Duplicates: a set with one question its conflicting twin wins is uploaded and run, the confusion
    list shows it, the conflict is merged in the Duplicates tab, and a rerun shows the question got better."""
    url, secret = server
    import_tsv(url, secret, "helpdesk", CONFLICTED)
    qnas = httpx.get(f"{url}/language/authoring/query-knowledgebases/projects/helpdesk/qnas",
                     params={"api-version": "2023-04-01"}, headers={"api-key": secret}).json()["value"]
    ids = {q["questions"][0]: q["id"] for q in qnas}
    reset, twin = ids["How do I reset my password?"], ids["How can I reset my password?"]
    checks = tmp_path / "checks.csv"
    checks.write_text("question,expected_qna_id\n"
                      f"How do I reset my password?,{reset}\n"
                      f"How can I reset my password?,{reset}\n"  # its twin answers it: wrong until merged
                      f"When are you open?,{ids['What are your opening hours?']}\n"
                      "Who won the 1966 world cup?,none\n", encoding="utf-8")
    tab = Console(browser, url)
    page = tab.sign_in(secret)
    page.get_by_role("link", name="helpdesk", exact=True).click()
    page.get_by_role("link", name="Test sets").click()
    expect(page.get_by_role("heading", name="helpdesk: test sets")).to_be_visible()
    upload = page.get_by_role("form", name="Upload a test set")
    upload.get_by_label("Set name").fill("checks")
    upload.get_by_label("Test-set file").set_input_files(str(checks))
    upload.get_by_role("button", name="Upload").click()
    wait_status(page, "Uploaded test set checks: 4 questions.")
    run = page.get_by_role("form", name="Run a test set")
    run.get_by_label("Against").select_option("test")
    run.get_by_role("button", name="Run").click()
    wait_status(page, "Ran checks against test: 4 questions")
    card = page.get_by_role("region", name="Run result")
    expect(card).to_contain_text("Questions4")
    confusion = card.get_by_role("row", name="How can I reset my password?")
    expect(confusion).to_contain_text(f"QnA {reset}: How do I reset my password?")
    expect(confusion).to_contain_text(f"QnA {twin}: How can I reset my password?")

    page.get_by_role("link", name="Duplicates").click()
    expect(page.get_by_role("heading", name="helpdesk: duplicates")).to_be_visible()
    finding = page.get_by_role("row").filter(has_text="Conflict")
    expect(finding).to_contain_text("How can I reset my password?")
    finding.get_by_role("button", name="Merge").click()
    confirm = page.get_by_role("alertdialog", name="Confirm merge")
    expect(confirm).to_contain_text(f"Merge QnA {twin}")
    page.screenshot(path=str(SHOTS / "console-duplicates.png"), full_page=True)
    confirm.get_by_role("button", name="Confirm merge").click()
    wait_status(page, f"Merged QnA {twin} into QnA {reset}: it now has 2 questions.")
    expect(page.get_by_role("row").filter(has_text="Conflict")).to_have_count(0)

    page.get_by_role("link", name="Test sets").click()
    page.get_by_role("form", name="Run a test set").get_by_role("button", name="Run").click()
    wait_status(page, "Ran checks against test: 4 questions")
    history = page.get_by_role("region", name="Run history")
    expect(history.get_by_role("row")).to_have_count(3)  # the header and two runs
    history.get_by_role("button", name="Compare").click()
    diff = page.get_by_role("region", name="Comparison")
    expect(diff).to_contain_text("Worse: none.")
    better = diff.get_by_role("table").filter(has_text="Better: 1").get_by_role("row", name="How can I reset my password?")
    expect(better).to_contain_text(f"QnA {twin}: How can I reset my password?")  # what it got before
    expect(better).to_contain_text(f"QnA {reset}: How do I reset my password?")  # and after the merge
    page.screenshot(path=str(SHOTS / "console-test-sets.png"), full_page=True)

    page.get_by_role("button", name="Delete checks").click()  # a set is deleted after a confirmation; runs stay
    confirm = page.get_by_role("alertdialog", name="Confirm delete")
    expect(confirm).to_contain_text("Delete test set checks (4 questions)?")
    confirm.get_by_role("button", name="Confirm delete").click()
    wait_status(page, "Deleted test set checks.")
    expect(page.get_by_text("No test sets yet: upload one above.")).to_be_visible()
    expect(page.get_by_role("region", name="Run history").get_by_role("row")).to_have_count(3)
    assert httpx.get(f"{url}/openqna/projects/helpdesk/test-sets/checks", headers={"api-key": secret}).status_code == 404
    tab.done()


BENEFITS = SAMPLE_DOCS / "data-source-formats" / "Multiturn-ContosoBenefits.pdf"
SHOP = """# Shop help

## How do I reset my password?

Open Settings, then Account, then Reset password.

## How can I reset my password?

Call the help desk and they reset it for you.

## What are your opening hours?

We are open from 9 to 5 on weekdays.

## Do you ship abroad?

We ship to every country in the European Union.
"""


def test_the_owners_loop(server, browser, tmp_path):
    """Issue 41's journey, as a knowledge-base owner makes it: create a project, add a PDF and a URL source inside
    it, see the URL source's refresh and what it changed, import a test set and run it against test and production,
    read the confusion list, fix a QnA, rerun and read the per-question diff, deploy after a confirmation, roll back
    to the previous version, merge a duplicate, and make a test set from an accepted suggestion.  No console error."""
    url, secret = server
    headers = {"api-key": secret}
    www = tmp_path / "www"
    www.mkdir()
    (www / "shop.md").write_text(SHOP, encoding="utf-8")
    with FileServer(www) as site:
        page_url = f"{site.url}/shop.md"
        tab = Console(browser, url)
        page = tab.sign_in(secret)

        # a new project, then a PDF and a URL source added inside it
        page.get_by_label("Name").fill("owners")
        page.get_by_role("button", name="Create project").click()
        expect(page.get_by_role("heading", name="owners: QnAs")).to_be_visible()
        page.get_by_role("form", name="Add a source").get_by_label("File").set_input_files(str(BENEFITS))
        page.get_by_role("form", name="Add a source").get_by_role("button", name="Add source").click()
        wait_status(page, "Imported Multiturn-ContosoBenefits.pdf into owners.")
        expect(page.locator(".import-result")).to_contain_text("+61 QnAs and +63 passages")
        adder = page.get_by_role("form", name="Add a source")
        adder.get_by_label("or URL source").fill(page_url)
        adder.get_by_role("button", name="Add source").click()
        wait_status(page, f"Added the source {page_url} to owners.")
        expect(page.locator(".import-result")).to_contain_text("+4 QnAs")

        # the Sources card: both sources; the URL one refreshes daily, changes, and a check shows what changed
        sources = page.get_by_role("region", name="Sources")
        expect(sources.get_by_role("row", name="Multiturn-ContosoBenefits.pdf")).to_contain_text("file")
        shop = sources.get_by_role("row").filter(has_text=page_url)
        expect(shop).to_contain_text("Not checked yet.")
        shop.get_by_label(f"Refresh {page_url}").select_option("1d")
        wait_status(page, "is checked every day")
        (www / "shop.md").write_text(SHOP.replace("European Union", "European Union and Norway")
                                     + "\n## Do you take cards?\n\nYes, we take all major cards.\n", encoding="utf-8")
        shop.get_by_role("button", name=f"Check {page_url} now").click()
        wait_status(page, "changed: ")
        shop = page.get_by_role("region", name="Sources").get_by_role("row").filter(has_text=page_url)
        expect(shop).to_contain_text("changed")
        expect(shop.locator(".refresh-diff")).to_contain_text("QnAs: 1 added, 1 changed, 0 removed")
        expect(shop.locator(".refresh-diff")).to_contain_text("Do you take cards?")
        expect(shop.locator(".refresh-diff")).to_contain_text("Do you ship abroad?")
        expect(shop.get_by_label(f"Refresh {page_url}")).to_have_value("1d")

        qnas = httpx.get(f"{url}/language/authoring/query-knowledgebases/projects/owners/qnas",
                         params={"api-version": "2023-04-01", "maxpagesize": 1000}, headers=headers).json()["value"]
        passages = {p["id"] for p in httpx.get(f"{url}/openqna/projects/owners/passages",
                                               headers=headers).json()["value"]}
        ids = {q["questions"][0]: q["id"] for q in qnas if q["id"] not in passages}  # a passage's title is a heading
        reset, twin, hours = (ids["How do I reset my password?"], ids["How can I reset my password?"],
                              ids["What are your opening hours?"])

        # production first, after the confirmation
        page.get_by_role("link", name="Deploy").click()
        page.get_by_label("Deployment name").fill("production")
        page.get_by_role("button", name="Deploy", exact=True).click()
        page.get_by_role("alertdialog", name="Confirm deploy").get_by_role("button", name="Confirm deploy").click()
        wait_status(page, "Deployed owners to production.")

        # a test set, run against test and against production: the confusion list
        checks = tmp_path / "checks.csv"
        checks.write_text("question,expected_qna_id\n"
                          f"What are your opening hours?,{hours}\n"
                          f"How can I reset my password?,{reset}\n"  # its twin answers it
                          f"When can I come to the shop?,{hours}\n"  # too unsure until the QnA is fixed
                          "Who won the 1966 world cup?,none\n", encoding="utf-8")
        page.get_by_role("link", name="Test sets").click()
        upload = page.get_by_role("form", name="Upload a test set")
        upload.get_by_label("Set name").fill("shop-checks")
        upload.get_by_label("Test-set file").set_input_files(str(checks))
        upload.get_by_role("button", name="Upload").click()
        wait_status(page, "Uploaded test set shop-checks: 4 questions.")
        for against in ("test", "production"):
            run = page.get_by_role("form", name="Run a test set")
            run.get_by_label("Against").select_option(against)
            run.get_by_role("button", name="Run").click()
            wait_status(page, f"Ran shop-checks against {against}: 4 questions")
            card = page.get_by_role("region", name="Run result")
            expect(card).to_contain_text("Confusion list: 2 not right")
            confused = card.get_by_role("row", name="How can I reset my password?")
            expect(confused).to_contain_text(f"QnA {reset}: How do I reset my password?")  # expected
            expect(confused).to_contain_text(f"QnA {twin}: How can I reset my password?")  # answered instead
            expect(card.get_by_role("row", name="When can I come to the shop?")).to_be_visible()

        # fix a QnA: the unsure question becomes an alternate question of the opening hours
        page.get_by_role("link", name="QnAs").click()
        page.get_by_label("Search").fill("opening hours")
        page.get_by_role("button", name="What are your opening hours?").click()
        page.get_by_label("Questions (one per line; the first is the primary one)").fill(
            "What are your opening hours?\nWhen can I come to the shop?")
        page.get_by_role("button", name="Save").click()
        wait_status(page, "saved.")

        # rerun against test and compare with the first run, question by question
        page.get_by_role("link", name="Test sets").click()
        run = page.get_by_role("form", name="Run a test set")
        run.get_by_label("Against").select_option("test")
        run.get_by_role("button", name="Run").click()
        wait_status(page, "Ran shop-checks against test: 4 questions")
        expect(page.get_by_role("region", name="Run result")).to_contain_text("Confusion list: 1 not right")
        history = page.get_by_role("region", name="Run history")
        history.get_by_label("Older run").select_option("1")
        history.get_by_label("Newer run").select_option("3")
        history.get_by_role("button", name="Compare").click()
        diff = page.get_by_role("region", name="Comparison")
        expect(diff).to_contain_text("Run 1 → run 3")
        expect(diff).to_contain_text("Worse: none.")
        better = diff.get_by_role("table").filter(has_text="Better: 1")
        expect(better.get_by_role("row", name="When can I come to the shop?")).to_contain_text(f"QnA {hours}")

        # deploy the fix after the confirmation, then roll production back to the version before it
        page.get_by_role("link", name="Deploy").click()
        expect(page.locator(".diff")).to_contain_text("QnAs: 0 added, 1 changed, 0 deleted")
        page.get_by_role("button", name="Deploy test to production").click()
        confirm = page.get_by_role("alertdialog", name="Confirm deploy")
        expect(confirm).to_contain_text("Deploy test to production? QnAs: 0 added, 1 changed")
        confirm.get_by_role("button", name="Confirm deploy").click()
        wait_status(page, "Deployed owners to production.")
        versions = page.get_by_role("region", name="Versions")
        expect(versions).to_contain_text("v2")
        versions.get_by_role("button", name="Roll production back to v1").click()
        page.get_by_role("alertdialog", name="Confirm rollback").get_by_role("button", name="Confirm rollback").click()
        wait_status(page, "Rolled production back to version 1.")
        expect(page.locator(".diff")).to_contain_text("1 changed")  # test holds the fix, production does not
        asked = httpx.post(f"{url}/language/:query-knowledgebases", headers=headers,
                           params={"api-version": "2021-10-01", "projectName": "owners", "deploymentName": "production"},
                           json={"question": "When can I come to the shop?"}).json()["answers"][0]
        assert asked["confidenceScore"] < 1.0  # production answers as version 1 did

        # merge the duplicate: the two password QnAs that answer differently
        page.get_by_role("link", name="Duplicates").click()
        finding = page.get_by_role("row").filter(has_text="Conflict").filter(has_text="How can I reset my password?")
        finding.get_by_role("button", name="Merge").click()
        page.get_by_role("alertdialog", name="Confirm merge").get_by_role("button", name="Confirm merge").click()
        wait_status(page, "Merged QnA")
        expect(page.get_by_role("row").filter(has_text="How can I reset my password?")).to_have_count(0)

        # a user's feedback is accepted as a suggestion, and a test set is made from it
        sent = httpx.post(f"{url}/language/authoring/query-knowledgebases/projects/owners/feedback",
                          params={"api-version": "2023-04-01"}, headers=headers,
                          json={"records": [{"userId": "u1", "userQuestion": "do you deliver to Oslo", "qnaId":
                                             ids["Do you ship abroad?"]}]})
        assert sent.status_code == 204
        page.get_by_role("link", name="Improve").click()
        suggestion = page.get_by_role("row", name="do you deliver to Oslo")
        suggestion.get_by_role("button", name="Accept").click()
        expect(page.get_by_role("row", name="do you deliver to Oslo")).to_have_count(0)
        page.get_by_role("link", name="Test sets").click()
        made = page.get_by_role("form", name="Make a test set from the log")
        expect(made.get_by_label("Set name")).to_have_value("from-log")
        made.get_by_role("button", name="Make from log").click()
        wait_status(page, "Made test set from-log: 1 question (1 accepted suggestion, 0 logged questions with feedback).")
        expect(page.get_by_role("form", name="Run a test set")).to_contain_text("from-log")
        tab.done()


def test_save_and_train_shows_what_the_job_measured(server, browser):
    """The Deploy tab's Save and train card: Train runs the job and shows its held-out figures and verdict (a KB of
    four QnAs has nothing to hold out, so nothing changes, and the card says why)."""
    url, secret = server
    import_tsv(url, secret, "trainee", CONFLICTED)
    tab = Console(browser, url)
    page = tab.sign_in(secret)
    page.get_by_role("link", name="trainee", exact=True).click()
    page.get_by_role("link", name="Deploy").click()
    card = page.get_by_role("region", name="Save and train")
    expect(card).to_contain_text("test: no trained model")
    card.get_by_role("button", name="Train").click()
    # no model was judged: the status says why (it said the model "did not answer the held-out questions better")
    wait_status(page, "Nothing was trained for trainee: too few QnAs to hold any out")
    result = page.locator(".train-result")
    expect(result).to_contain_text("Last training")
    expect(result).to_contain_text("too few QnAs to hold any out")
    status = httpx.get(f"{url}/openqna/projects/trainee/training", headers={"api-key": secret}).json()
    assert status["deployments"] == {"test": None}
    tab.done()


def banking_page(server, project: str, feedback: int):
    """An FAQ page of 30 banking questions (one banking77 utterance per intent, an answer written for it) imported
    over HTTP, and ``feedback`` more users' utterances per QnA sent as Azure feedback records; returns the data set
    and each intent's QnA id."""
    from openqna.evaluation import datasets

    url, secret = server
    headers = {"api-key": secret}
    data = datasets.banking77(REPO.parent / "shared" / "data")
    names = sorted(data.train)[:30]
    answers = {f"About {n.replace('_', ' ')}: see the help page of the app.": n for n in names}
    tsv = "Question\tAnswer\n" + "".join(f"{data.train[n][0]}\t{a}\n" for a, n in answers.items())
    import_tsv(url, secret, project, tsv)
    listed = httpx.get(f"{url}/language/authoring/query-knowledgebases/projects/{project}/qnas",
                       params={"api-version": "2021-10-01"}, headers=headers).json()["value"]
    ids = {answers[q["answer"]]: q["id"] for q in listed}
    records = [{"userId": "u", "userQuestion": u, "qnaId": ids[n]} for n in names for u in data.train[n][1:1 + feedback]]
    sent = httpx.post(f"{url}/language/query-knowledgebases/projects/{project}/feedback",
                      params={"api-version": "2021-10-01"}, json={"records": records}, headers=headers)
    assert sent.status_code == 204, sent.text
    return data, ids


def train_in_console(browser, server, project: str):
    """Sign in, press Train on ``project``'s Deploy tab, wait for a kept model; returns the tab, its page and the
    card's report."""
    url, secret = server
    tab = Console(browser, url)
    page = tab.sign_in(secret)
    page.get_by_role("link", name=project, exact=True).click()
    page.get_by_role("link", name="Deploy").click()
    page.get_by_role("region", name="Save and train").get_by_role("button", name="Train").click()
    wait_status(page, f"Trained {project}: the new model is in test; deploy to use it in production.")
    return tab, page, page.locator(".train-result")


def test_a_trained_model_reaches_production_and_the_azure_sdk(server, browser):
    """Save and train's journey: an FAQ page of 30 banking questions (one each) with users' feedback and a test set
    of users' questions; production answers untrained; Train in the console keeps a model that answers the test set
    better (before → after shown), the deploy says the model differs, and through the Azure SDK production then
    answers users' questions it never saw better than before."""
    url, secret = server
    headers = {"api-key": secret}
    data, ids = banking_page(server, "banking", feedback=5)
    authoring = f"{url}/language/authoring/query-knowledgebases/projects/banking"
    asked = [(u, n) for u, n in data.test if n in ids]
    sheet = io.StringIO()
    csv.writer(sheet).writerows([("question", "expected_qna_id"), *((u, ids[n]) for u, n in asked[::2])])
    checks = sheet.getvalue()
    put = httpx.put(f"{url}/openqna/projects/banking/test-sets/users", params={"format": "csv"},
                    content=checks.encode(), headers=headers)
    assert put.status_code == 200, put.text
    deployed = httpx.put(f"{authoring}/deployments/production", params={"api-version": "2021-10-01"}, headers=headers)
    poll_job(deployed.headers["Operation-Location"], secret)
    client = QuestionAnsweringClient(url, AzureKeyCredential(secret))
    unseen = asked[1::2][:150]  # users' questions in neither the feedback nor the test set

    def production() -> tuple[float, list[float]]:
        right, confidences = 0, []
        for question, n in unseen:
            top = client.get_answers(question=question, project_name="banking", deployment_name="production",
                                     top=1).answers[0]
            right += top.qna_id == ids[n]
            confidences.append(top.confidence)
        return right / len(unseen), confidences

    before, before_confidence = production()
    tab, page, result = train_in_console(browser, server, "banking")
    expect(result).to_contain_text(f"{len(asked[::2])} from the test sets")
    expect(result).to_contain_text("yes: it answers the test sets' questions better")
    report = httpx.get(f"{url}/openqna/projects/banking/training", headers=headers).json()["deployments"]
    sets = report["test"]["report"]["spaces"][0]["testSets"]
    assert sets["after"]["top1"] > sets["before"]["top1"]
    expect(result).to_contain_text(f"{100 * sets['before']['top1']:.1f}% → {100 * sets['after']['top1']:.1f}%")
    assert report["production"] is None
    production_card = page.locator("section.card").filter(has=page.get_by_role("heading", name="production"))
    expect(production_card).to_contain_text("The trained model differs.")
    production_card.get_by_role("button", name="Deploy test to production").click()
    confirm = page.get_by_role("alertdialog", name="Confirm deploy")
    expect(confirm).to_contain_text("The trained model differs.")
    confirm.get_by_role("button", name="Confirm deploy").click()
    wait_status(page, "Deployed banking to production.")
    expect(page.get_by_role("region", name="Save and train")).to_contain_text("production: the same model as test")
    after, after_confidence = production()
    assert after > before, (before, after)
    assert after_confidence != before_confidence
    tab.done()


BULK_FAQ = ("Question\tAnswer\tSource\tMetadata\n"
            "How do I pay my bill?\tBy card or transfer.\tEditorial\tarea:billing\n"
            "Where is my invoice?\tUnder Account, Invoices.\tEditorial\tarea:billing|team:old\n"
            "Can I get a refund on my bill?\tWithin 30 days.\tEditorial\t\n"
            "How do I reset my password?\tOpen Settings, then Reset.\tEditorial\tteam:old\n"
            "How do I delete my account?\tWrite to support.\tEditorial\t\n")


def qnas_of(url: str, secret: str, project: str) -> dict[str, dict]:
    r = httpx.get(f"{url}/language/authoring/query-knowledgebases/projects/{project}/qnas",
                  params={"api-version": "2023-04-01"}, headers={"api-key": secret}, timeout=30)
    return {q["questions"][0]: q for q in r.json()["value"]}


def test_bulk_metadata_and_delete_on_selected_qnas(server, browser):
    """The editor's bulk actions: select what a search finds, set a metadata pair on all of it, remove a key from
    two QnAs picked by hand, delete two; a QnA changed elsewhere since the page was read is reported, not
    overwritten, and nothing else in that call changes.  No console error."""
    url, secret = server
    import_tsv(url, secret, "bulk", BULK_FAQ)
    before = qnas_of(url, secret, "bulk")
    tab = Console(browser, url)
    page = tab.sign_in(secret)
    page.get_by_role("link", name="bulk", exact=True).click()
    expect(page.get_by_role("heading", name="bulk: QnAs")).to_be_visible()
    bar = page.get_by_role("group", name="Selected QnAs")
    expect(bar.get_by_role("button", name="Delete selected")).to_be_disabled()

    # typed full-width, as Japanese input methods type Latin (folded as NFKC folds it); "bill" alone also finds the
    # metadata area:billing
    page.get_by_label("Search").fill("ＢＩＬＬ？")
    bar.get_by_role("button", name="Select all found").click()
    expect(bar).to_contain_text("2 selected")  # "pay my bill", "refund on my bill"
    bar.get_by_label("Metadata to set (key:value)").fill("team:Billing Desk")
    bar.get_by_role("button", name="Set on selected").click()
    wait_status(page, "team:Billing Desk set on 2 QnAs.")
    after = qnas_of(url, secret, "bulk")
    assert after["How do I pay my bill?"]["metadata"] == {"area": "billing", "team": "billing desk"}
    assert after["Can I get a refund on my bill?"]["metadata"] == {"team": "billing desk"}
    unchanged = ("Where is my invoice?", "How do I reset my password?", "How do I delete my account?")
    assert all(after[q] == before[q] for q in unchanged)
    expect(bar).to_contain_text("0 selected")

    page.get_by_label("Search").fill("")
    for question in ("Where is my invoice?", "How do I reset my password?"):
        page.get_by_label(f"Select QnA {before[question]['id']}").check()
    bar.get_by_label("Metadata key to remove").fill("TEAM")
    bar.get_by_role("button", name="Remove from selected").click()
    wait_status(page, "TEAM removed from 2 QnAs.")
    after = qnas_of(url, secret, "bulk")
    assert after["Where is my invoice?"]["metadata"] == {"area": "billing"}
    assert after["How do I reset my password?"]["metadata"] == {}
    assert after["Where is my invoice?"]["answer"] == before["Where is my invoice?"]["answer"]

    # changed elsewhere after the page read it: the call that holds it is refused as a whole
    page.get_by_label(f"Select QnA {before['How do I delete my account?']['id']}").check()
    page.get_by_label(f"Select QnA {before['How do I pay my bill?']['id']}").check()
    elsewhere = dict(after["How do I delete my account?"], answer="Use Settings, then Close account.")
    r = httpx.patch(f"{url}/language/authoring/query-knowledgebases/projects/bulk/qnas",
                    params={"api-version": "2023-04-01"}, headers={"api-key": secret}, timeout=30,
                    json=[{"op": "replace", "value": elsewhere}])
    assert r.status_code == 202
    poll_job(r.headers["Operation-Location"], secret)
    bar.get_by_role("button", name="Delete selected").click()
    wait_status(page, "was changed elsewhere")
    after = qnas_of(url, secret, "bulk")
    assert len(after) == 5 and after["How do I delete my account?"]["answer"] == "Use Settings, then Close account."
    expect(bar).to_contain_text("2 selected")  # still selected, and read again: a second try deletes both
    bar.get_by_role("button", name="Delete selected").click()
    wait_status(page, "2 QnAs deleted.")
    assert set(qnas_of(url, secret, "bulk")) == {"Where is my invoice?", "How do I reset my password?",
                                                 "Can I get a refund on my bill?"}
    tab.done()


def test_save_and_train_learns_from_users_feedback_without_a_test_set(server, browser):
    """An FAQ page of 30 banking questions (one each) whose bot sent ten users' questions per QnA as Azure feedback
    records, and no test set: Train judges the model by those questions, cross-validated, keeps it, and says so."""
    url, secret = server
    headers = {"api-key": secret}
    banking_page(server, "fed", feedback=10)
    tab, _, result = train_in_console(browser, server, "fed")
    expect(result).to_contain_text("300 from users' feedback, cross-validated")
    expect(result).to_contain_text("yes: it answers the users' questions sent as feedback better")
    space = httpx.get(f"{url}/openqna/projects/fed/training", headers=headers).json()["deployments"]["test"][
        "report"]["spaces"][0]
    assert space["judgedBy"] == "feedback, cross-validated" and space["testSets"]["after"]["top1"] > \
        space["testSets"]["before"]["top1"]
    tab.done()


def test_a_double_click_a_long_chat_an_unsaved_setting_and_a_revoked_key(server, browser):
    """What exploratory QA found: a double click on "Add QnA" added the QnA twice; after a few exchanges the test
    chat's newest answer lay below its visible part; the Improve tab's settings were lost without a word when the
    tab was left; and a tab whose key was revoked showed "This page could not be loaded" with no way to sign in."""
    url, secret = server
    import_tsv(url, secret, "clicks", BULK_FAQ)
    tab = Console(browser, url)
    page = tab.sign_in(secret)
    page.goto(f"{url}/#/p/clicks/edit")
    page.get_by_role("button", name="New QnA").click()
    page.get_by_label("Questions (one per line; the first is the primary one)").fill("Do you ship abroad?")
    page.get_by_label("Answer (Markdown)").fill("To 40 countries.")
    page.get_by_role("button", name="Add QnA").dblclick()
    wait_status(page, "QnA added.")
    assert [q for q in qnas_of(url, secret, "clicks") if q == "Do you ship abroad?"] == ["Do you ship abroad?"]
    assert len(qnas_of(url, secret, "clicks")) == 6

    # the search reads metadata too; a selection the search hides is said to be there
    page.get_by_label("Search").fill("area:billing")
    expect(page.locator("caption")).to_contain_text("2 of 6 QnAs")
    bar = page.get_by_role("group", name="Selected QnAs")
    bar.get_by_role("button", name="Select all found").click()
    page.get_by_label("Search").fill("password")
    expect(bar).to_contain_text("2 selected (2 not shown by the search)")
    bar.get_by_role("button", name="Clear selection").click()

    page.get_by_role("link", name="Test", exact=True).click()
    chat = page.locator(".chat")
    for i in range(10):
        page.get_by_label("Question").fill(f"How do I pay my bill? ({i})")
        page.get_by_role("button", name="Ask").click()
        expect(page.locator(".chat .bot")).to_have_count(i + 1)
    assert chat.evaluate("c => c.scrollHeight > c.clientHeight")  # it scrolls, and shows its end
    assert chat.evaluate("c => c.scrollTop + c.clientHeight >= c.scrollHeight - 2")

    page.get_by_role("link", name="Improve", exact=True).click()
    page.get_by_label("Default answer").fill("Ask us at help@example.com")
    tab.refuse = 1  # "Leave without saving?" Cancel: the edit stays
    page.get_by_role("link", name="Deploy", exact=True).click()
    expect(page.get_by_label("Default answer")).to_have_value("Ask us at help@example.com")
    page.get_by_role("button", name="Save settings").click()
    wait_status(page, "Settings saved.")
    page.get_by_role("link", name="Deploy", exact=True).click()  # saved: no question asked
    expect(page.get_by_role("heading", name="clicks: deploy")).to_be_visible()

    other = new_key(page, "short-lived", "admin")
    second = Console(browser, url)
    theirs = second.sign_in(other)
    page.get_by_role("link", name="Keys").click()
    page.get_by_role("button", name="Revoke key short-lived").click()
    wait_status(page, "Revoked short-lived.")
    theirs.get_by_role("link", name="clicks", exact=True).click()
    expect(theirs.get_by_role("heading", name="Sign in to openqna")).to_be_visible()
    expect(theirs.locator(".signin")).to_contain_text("no longer works")
    second.errors = [e for e in second.errors if "401" not in e]  # the refused request itself
    second.done()
    tab.done()
