"""The console's edge cases, each found by an exploratory pass and driven here in Chromium as `test_console.py` does:
the first key made on a server without keys, a slow page drawn over a newer one, a project name taken twice, a URL
source on an existing project, a stale delete, Back with unsaved changes, errors that outlive the next success, a
missing project, a key for another project, pages at phone width, and a long import's progress.

Two servers: one with no keys (the first key is made in the console), and one with an admin key for the rest.
"""

from __future__ import annotations

import os
import re
import signal

import httpx
import pytest
from playwright.sync_api import expect

from console_server import azure, job, serve, server  # noqa: F401  (server is a fixture)
from test_console import Console, browser, wait_status  # noqa: F401  (browser is a fixture)


@pytest.fixture(scope="module")
def open_server(tmp_path_factory):
    """`openqna serve` on loopback with no keys yet: it answers anyone, as admin."""
    env = {**os.environ, "OPENQNA_DATA": str(tmp_path_factory.mktemp("open")), "HF_HUB_OFFLINE": "1"}
    with serve(tmp_path_factory, "open", env) as served:
        yield served.url
        served.stop(signal.SIGINT)


def test_the_first_key_made_in_the_console_is_shown_and_signs_the_tab_in(open_server, browser):  # noqa: F811
    """On a server with no keys, the first key makes every request need one: its secret is shown anyway, and the
    tab carries on signed in with it (before, the key list's refetch got 401 and the secret was lost)."""
    tab = Console(browser, open_server)
    page = tab.page
    page.goto(open_server + "/#/keys")
    expect(page.locator(".who")).to_contain_text("Open server")
    expect(page.get_by_role("heading", name="API keys")).to_be_visible()
    page.get_by_label("Name").fill("owner")
    page.get_by_label("Role").select_option("admin")
    page.get_by_role("button", name="Create key").click()
    card = page.locator(".secret", has=page.get_by_role("heading", name="Key owner created"))
    secret = card.locator("code.key").inner_text(timeout=30_000).strip()
    assert secret.startswith("oq_")
    assert httpx.get(f"{open_server}/openqna/keys").status_code == 401  # the server requires keys now
    assert httpx.get(f"{open_server}/openqna/keys", headers={"api-key": secret}).status_code == 200
    expect(page.locator(".who")).to_contain_text("Signed in: owner")
    expect(page.get_by_role("row", name="owner")).to_be_visible()  # the list, read with the new key
    page.reload()  # the key stays in the tab
    expect(page.get_by_role("heading", name="API keys")).to_be_visible()
    # revoking the key the tab is signed in with says so first, then signs the tab out (it stayed "Signed in" and
    # showed Azure's raw 401 message); this one was the last key, so this loopback server is open again
    asked = []
    page.once("dialog", lambda d: (asked.append(d.message), d.accept()))
    page.get_by_role("button", name="Revoke key owner").click()
    expect(page.locator(".who")).to_contain_text("Open server")
    assert "the key this tab is signed in with" in asked[0]
    expect(page.locator("#status")).to_contain_text("the key this tab was signed in with")
    tab.done()


SLOW_QNAS = """(() => {  // the QnAs page's read takes 1.5 s, as on a project of thousands of QnAs
  const fetch = window.fetch;
  window.fetch = (url, init) => String(url).includes("/qnas?")
    ? new Promise((resolve) => setTimeout(resolve, 1500)).then(() => fetch(url, init)) : fetch(url, init);
})()"""


def test_a_slow_page_is_not_drawn_over_a_newer_one(server, browser):  # noqa: F811
    """QnAs clicked, then Test 150 ms later while the QnAs still load: the Test page stays (before, the QnAs
    editor was drawn over it when its read ended, under the URL #/p/kb1/chat)."""
    url, secret = server
    tab = Console(browser, url)
    page = tab.sign_in(secret)
    page.goto(f"{url}/#/p/kb1/chat")
    expect(page.get_by_role("heading", name="kb1: test")).to_be_visible()
    page.evaluate(SLOW_QNAS)
    tabs = page.locator("nav.tabs")
    tabs.get_by_role("link", name="QnAs").click()
    page.wait_for_timeout(150)
    tabs.get_by_role("link", name="Test", exact=True).click()
    expect(page.get_by_role("heading", name="kb1: test")).to_be_visible()
    page.wait_for_timeout(2500)  # the QnAs' read has ended
    assert page.url.endswith("#/p/kb1/chat")
    expect(page.locator("main h1")).to_have_text("kb1: test")
    expect(page.get_by_role("button", name="New QnA")).to_have_count(0)
    tabs.get_by_role("link", name="QnAs").click()  # and a QnAs page still draws when it is the newest
    expect(page.get_by_role("heading", name="kb1: QnAs")).to_be_visible()
    tab.done()


def test_create_project_refuses_a_name_in_use(server, browser):  # noqa: F811
    """"Create project" with the name of an existing one (in another case) is refused and changes nothing (before,
    its create-or-update PATCH gave kb1 the language and default answer typed for the new project)."""
    url, secret = server
    before = azure(url, secret, "GET", "/kb1").json()
    tab = Console(browser, url)
    page = tab.sign_in(secret)
    page.get_by_label("Name", exact=True).fill("KB1")
    page.get_by_label("Language").fill("de")
    page.get_by_label("Default answer").fill("Keine Antwort")
    page.get_by_role("button", name="Create project").click()
    wait_status(page, "A project named kb1 already exists")
    assert page.url.endswith("/") or page.url.endswith("#/projects")
    after = azure(url, secret, "GET", "/kb1").json()
    assert after["language"] == before["language"] and after["settings"] == before["settings"]
    assert after["lastModifiedDateTime"] == before["lastModifiedDateTime"]
    tab.done()


def test_a_url_source_leaves_the_projects_language_alone(server, browser):  # noqa: F811
    """Adding a URL source to an existing project (here one that cannot be fetched) keeps its language (before, the
    console PATCHed it to "en" first, whatever happened next)."""
    url, secret = server
    assert azure(url, secret, "PATCH", "/kb1", json={"language": "de"}).status_code in (200, 201)
    tab = Console(browser, url)
    page = tab.sign_in(secret)
    page.goto(f"{url}/#/p/kb1/edit")
    adder = page.get_by_role("form", name="Add a source")
    adder.get_by_label("or URL source").fill("http://127.0.0.1:9/faq.html")
    adder.get_by_role("button", name="Add source").click()
    expect(page.locator(".progress")).to_contain_text("failed", timeout=60_000)
    assert azure(url, secret, "GET", "/kb1").json()["language"] == "de"
    assert azure(url, secret, "PATCH", "/kb1", json={"language": "en"}).status_code in (200, 201)
    assert all("400" in e for e in tab.errors)  # the refused source: a loopback address is not fetched
    tab.errors.clear()
    # imported as a new project's source, refused: no empty project is left behind (one was)
    page.goto(f"{url}/#/projects")
    form = page.get_by_role("form", name="Import")
    form.get_by_label("Project").fill("urlkb")
    form.get_by_label("or URL source").fill("http://127.0.0.1:9/faq.html")
    form.get_by_role("button", name="Import").click()
    expect(page.locator(".progress")).to_contain_text("failed", timeout=60_000)
    for _ in range(50):
        if azure(url, secret, "GET", "/urlkb").status_code == 404:
            break
        page.wait_for_timeout(200)
    assert azure(url, secret, "GET", "/urlkb").status_code == 404
    tab.errors.clear()
    tab.done()


def test_deleting_a_qna_changed_elsewhere_is_refused(server, browser):  # noqa: F811
    """The editor's Delete sends the QnA as it was read: an edit saved elsewhere meanwhile is reported, not deleted
    (before, it sent no ifLastUpdated and the edit was lost). Its confirmation names the QnAs whose follow-up
    prompts lead to it."""
    url, secret = server
    qnas = {q["questions"][0]: q for q in azure(url, secret, "GET", "/kb1/qnas").json()["value"]}
    office, hours = qnas["Where is your office?"], qnas["What are your opening hours?"]
    prompt = {"displayOrder": 0, "qnaId": office["id"], "displayText": "Where is it?"}
    done = azure(url, secret, "PATCH", "/kb1/qnas", json=[{"op": "replace", "value": {
        **hours, "dialog": {"isContextOnly": False, "prompts": [prompt]}}}])
    job(done.headers["Operation-Location"], secret)
    tab = Console(browser, url)
    asked: list[str] = []
    tab.page.on("dialog", lambda d: asked.append(d.message))
    page = tab.sign_in(secret)
    page.goto(f"{url}/#/p/kb1/edit")
    page.get_by_role("button", name="Where is your office?").click()
    expect(page.get_by_role("heading", name=f"QnA {office['id']}")).to_be_visible()
    page.wait_for_timeout(1100)  # lastUpdatedDateTime counts whole seconds
    elsewhere = azure(url, secret, "PATCH", "/kb1/qnas", json=[{"op": "replace", "value": {
        **office, "answer": "We moved to 2 Side Street."}}])
    job(elsewhere.headers["Operation-Location"], secret)
    page.locator("form.card").get_by_role("button", name="Delete").click()
    wait_status(page, "changed", timeout=30_000)
    assert asked[0] == (f"Delete QnA {office['id']}? The follow-up prompts of QnA {hours['id']} lead to it and are "
                        "removed with it. Deploy to publish the change.")
    now = {q["id"]: q for q in azure(url, secret, "GET", "/kb1/qnas").json()["value"]}
    assert now[office["id"]]["answer"] == "We moved to 2 Side Street."
    expect(page.get_by_label("Answer (Markdown)")).to_have_value("We moved to 2 Side Street.")  # read again
    page.locator("form.card").get_by_role("button", name="Delete").click()  # now it is the QnA as it is
    wait_status(page, f"QnA {office['id']} deleted.", timeout=30_000)
    now = {q["id"]: q for q in azure(url, secret, "GET", "/kb1/qnas").json()["value"]}
    assert office["id"] not in now and now[hours["id"]]["dialog"]["prompts"] == []
    tab.done()


def test_back_cancelled_by_the_unsaved_changes_guard_keeps_the_history(server, browser):  # noqa: F811
    """Back with an unsaved edit, cancelled, stays on the edit; Back again (confirmed) goes to the page before it, and
    Forward returns (before, the cancel overwrote the previous entry and the second Back skipped the Test page)."""
    url, secret = server
    tab = Console(browser, url)
    page = tab.sign_in(secret)
    page.goto(f"{url}/#/p/kb1/chat")
    expect(page.get_by_role("heading", name="kb1: test")).to_be_visible()
    page.locator("nav.tabs").get_by_role("link", name="QnAs").click()
    expect(page.get_by_role("heading", name="kb1: QnAs")).to_be_visible()
    page.get_by_role("button", name="How do I reset my password?").click()
    page.get_by_label("Answer (Markdown)").fill("UNSAVED EDIT")
    tab.refuse = 1
    page.go_back()
    page.wait_for_timeout(500)
    expect(page).to_have_url(re.compile(r"#/p/kb1/edit$"))
    expect(page.get_by_label("Answer (Markdown)")).to_have_value("UNSAVED EDIT")
    assert tab.refuse == 0  # it was asked
    page.go_back()  # leave without saving, this time
    expect(page).to_have_url(re.compile(r"#/p/kb1/chat$"))
    expect(page.get_by_role("heading", name="kb1: test")).to_be_visible()
    page.go_forward()
    expect(page).to_have_url(re.compile(r"#/p/kb1/edit$"))
    expect(page.get_by_role("heading", name="kb1: QnAs")).to_be_visible()
    page.go_back()
    expect(page).to_have_url(re.compile(r"#/p/kb1/chat$"))
    tab.done()


def test_show_changes_checks_the_deployment_name(server, browser):  # noqa: F811
    """Deploy → "Show changes" with no name or a bad one says so in the status line (before, an empty name asked
    /deployments//diff, got 404 and threw an uncaught error, showing nothing)."""
    url, secret = server
    tab = Console(browser, url)
    page = tab.sign_in(secret)
    page.goto(f"{url}/#/p/kb1/deploy")
    form = page.locator("form.card").filter(has_text="Deploy to a new name")
    form.get_by_label("Deployment name").fill("")
    form.get_by_role("button", name="Show changes").click()
    wait_status(page, "Write a deployment name first", timeout=10_000)
    form.get_by_label("Deployment name").fill("bad name!")
    form.get_by_role("button", name="Show changes").click()
    wait_status(page, '"bad name!" is not a deployment name', timeout=10_000)
    form.get_by_label("Deployment name").fill("staging")
    form.get_by_role("button", name="Show changes").click()
    expect(form).to_contain_text(re.compile(r"QnAs: \d+ added"))  # kb1 was never deployed
    expect(page.locator("#status")).to_be_empty()
    tab.done()  # no uncaught error, no 404


def test_an_old_error_goes_when_the_next_action_succeeds(server, browser, tmp_path):  # noqa: F811
    """A refused question, then one answered; Measure without a file, then with one: the error line goes (before,
    it stayed on screen under the answer and under the plot)."""
    url, secret = server
    tab = Console(browser, url)
    page = tab.sign_in(secret)
    page.goto(f"{url}/#/p/kb1/chat")
    page.get_by_role("textbox", name="Question").fill("x" * 2000)
    page.get_by_role("button", name="Ask", exact=True).click()
    expect(page.locator("#status.error")).not_to_be_empty()
    page.get_by_role("textbox", name="Question").fill("what are your opening hours")
    page.get_by_role("button", name="Ask", exact=True).click()
    expect(page.locator(".chat .bot")).to_contain_text("9 to 5")
    expect(page.locator("#status")).to_be_empty()
    assert all("400" in e for e in tab.errors)  # the refused question
    tab.errors.clear()

    ids = {question: q["id"] for q in azure(url, secret, "GET", "/openqna-faq/qnas").json()["value"]
           for question in q["questions"]}
    dev = tmp_path / "dev.tsv"
    dev.write_text("question\tqnaId\n" + "".join(f"{q}\t{a}\n" for q, a in [
        ("how do I launch the server", ids["How do I start the server?"]),
        ("can I bring my QnA Maker export", ids["How do I import my QnA Maker knowledge base?"]),
        ("does it work without internet", ids["Does it need an internet connection?"]),
        ("how do I make a key", ids["How do I create an API key?"]),
        ("can I store it in postgres", ids["Does it work with PostgreSQL?"]),
        ("what is the weather in Lima", "none"), ("recommend a good novel", "none"),
        ("how tall is Everest", "none"), ("who painted the Mona Lisa", "none"), ("order a pizza", "none")]),
        encoding="utf-8")
    page.goto(f"{url}/#/p/openqna-faq/improve")
    card = page.get_by_role("region", name="Calibration")
    card.get_by_role("button", name="Measure").click()
    wait_status(page, "Choose a development file first.", timeout=10_000)
    card.get_by_label("Development file").set_input_files(str(dev))
    card.get_by_role("button", name="Measure").click()
    expect(card).to_contain_text("10 questions (5 in scope, 5 off-topic)", timeout=60_000)
    expect(page.locator("#status")).to_be_empty()
    tab.done()


def test_a_missing_project_shows_an_error_page(server, browser):  # noqa: F811
    """#/p/nosuch/... shows that there is no such project on every tab, not the page before under the new URL (before,
    the Test tab drew a normal chat and the others left the previous page on screen)."""
    url, secret = server
    tab = Console(browser, url)
    page = tab.sign_in(secret)
    for name in ("edit", "chat", "deploy", "improve", "analytics", "tests", "duplicates"):
        page.goto(f"{url}/#/p/kb1/chat")
        expect(page.get_by_role("heading", name="kb1: test")).to_be_visible()
        page.goto(f"{url}/#/p/nosuch/{name}")
        expect(page.get_by_role("heading", name="Not found")).to_be_visible()
        expect(page.locator("main")).to_contain_text("nosuch")
        expect(page.locator("#status")).to_contain_text("Not found")
        expect(page.get_by_role("textbox", name="Question")).to_have_count(0)
    assert all("404" in e for e in tab.errors)  # the authoring API's answers for the missing project
    tab.errors.clear()
    tab.done()


def test_a_key_for_another_project_is_told_it_has_no_access(server, browser):  # noqa: F811
    """A key limited to kb1 opening openqna-faq is told it has no access to that project (before: "This key has the
    query role on openqna-faq", which it does not)."""
    url, secret = server
    made = httpx.post(f"{url}/openqna/keys", headers={"api-key": secret}, timeout=30,
                      json={"name": "kb1-author", "role": "author", "projects": ["kb1"]})
    assert made.status_code == 201
    tab = Console(browser, url)
    page = tab.sign_in(made.json()["secret"])
    page.goto(f"{url}/#/p/openqna-faq/edit")
    refused = page.locator("p.refused")
    expect(refused).to_have_text("This key has no access to project openqna-faq: it is limited to kb1. Sign in with a "
                                 "key for openqna-faq to open it.")
    page.goto(f"{url}/#/p/openqna-faq/chat")
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()
    page.goto(f"{url}/#/p/kb1/edit")  # its own project opens as before
    expect(page.get_by_role("heading", name="kb1: QnAs")).to_be_visible()
    tab.done()


def test_pages_do_not_scroll_sideways_on_a_phone(server, browser):  # noqa: F811
    """At 375 px wide the Projects, Deploy, Test sets and Keys pages fit the window: a wide table scrolls inside its own
    box (before, the page scrolled sideways and the table's buttons were off screen).  So does a QnA open in the
    editor whose answer holds a long URL (the page was 1,881 px wide; at 1,280 px, 2,435)."""
    url, secret = server
    deployed = azure(url, secret, "PUT", "/kb1/deployments/production")  # the Deploy page gets its Versions table
    job(deployed.headers["Operation-Location"], secret)
    link = "https://example.com/" + "a" * 180
    added = azure(url, secret, "PATCH", "/kb1/qnas", json=[{"op": "add", "value": {
        "questions": ["Where is the very long link?"], "answer": f"Read {link} first."}}])
    job(added.headers["Operation-Location"], secret)
    tab = Console(browser, url, width=375, height=800)
    page = tab.sign_in(secret)
    for where, heading in (("#/projects", "Projects"), ("#/p/kb1/deploy", "kb1: deployments"),
                           ("#/p/kb1/tests", "kb1: test sets"), ("#/keys", "API keys"), ("#/p/kb1/edit", "kb1: QnAs"),
                           ("#/p/kb1/edit", "QnA")):
        page.goto(f"{url}/{where}")
        if heading == "QnA":
            page.get_by_role("button", name="Where is the very long link?").click()
        expect(page.get_by_role("heading", name=re.compile(r"^QnA \d+$") if heading == "QnA" else heading)
               ).to_be_visible()
        page.wait_for_load_state("networkidle")
        wide = page.evaluate("document.documentElement.scrollWidth")
        assert wide <= 375, f"{where} ({heading}) is {wide} px wide"
    tab.done()


def test_an_import_shows_how_far_it_has_got_and_holds_up_no_other_projects_edit(server, browser, tmp_path):  # noqa: F811
    """A 1,200-QnA import said only "running" for its 15 minutes, and a one-QnA edit of another project waited
    behind it.  The status line now says how far embedding has got, and the other project's edit is saved while the
    import runs."""
    url, secret = server
    big = tmp_path / "big.tsv"
    big.write_text("Question\tAnswer\tSource\tMetadata\n" + "".join(
        f"How do I configure widget number {n}?\tOpen the panel of widget {n} and set its level to {n * 7 % 97}.\t"
        f"big.tsv\t\n" for n in range(800)), encoding="utf-8")
    tab = Console(browser, url)
    page = tab.sign_in(secret)
    form = page.get_by_role("form", name="Import")
    form.get_by_label("Project", exact=True).fill("big")
    form.get_by_label("File").set_input_files(str(big))
    form.get_by_role("button", name="Import").click()
    expect(page.locator(".progress")).to_have_text(re.compile(r"Importing big\.tsv: embedding 800 QnAs: \d+%"),
                                                   timeout=60_000)
    edit = azure(url, secret, "PATCH", "/kb1/qnas", json=[{"op": "add", "value": {
        "questions": ["Do you sell gift cards?"], "answer": "Yes, at every till."}}])
    assert edit.status_code == 202, edit.text
    assert job(edit.headers["Operation-Location"], secret)["status"] == "succeeded"
    shown = page.locator(".progress").inner_text()
    assert re.fullmatch(r"Importing big\.tsv: embedding 800 QnAs: \d+%", shown), shown  # still importing
    wait_status(page, "Imported big.tsv into big.", timeout=300_000)
    tab.done()
