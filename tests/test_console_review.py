"""The console's defects found by a QA review of its pages, each driven in Chromium as `test_console.py` does: a Save
refused as a conflict, a test run's questions whose expected QnA the state lacks, Markdown links and images, a
one-word synonym group, a synonyms file's import, export file names, and Inspect's "Why".

One server with an admin key and a small project `kb1`.
"""

from __future__ import annotations

from playwright.sync_api import expect

from console_server import azure, job, server  # noqa: F401  (server is a fixture)
from test_console import Console, browser, wait_status  # noqa: F401  (browser is a fixture)


def qna_id(url: str, secret: str, project: str, question: str) -> int:
    return next(q["id"] for q in azure(url, secret, "GET", f"/{project}/qnas").json()["value"]
                if question in q["questions"])


def test_a_save_refused_as_a_conflict_reads_the_qna_again(server, browser):  # noqa: F811
    """Two tabs edit the same QnA; A saves, then B's Save is refused as a conflict. B is shown the QnA as A left it,
    with B's unsaved edit beside it, and B's next edit saves (before, the list kept the old version: reopening it
    showed B the old answer, and every later Save failed with the same conflict until the page was reloaded)."""
    url, secret = server
    office = qna_id(url, secret, "kb1", "Where is your office?")
    a, b = Console(browser, url), Console(browser, url)
    pages = []
    for tab in (a, b):
        page = tab.sign_in(secret)
        page.goto(f"{url}/#/p/kb1/edit")
        page.get_by_role("button", name="Where is your office?").click()
        expect(page.get_by_role("heading", name=f"QnA {office}")).to_be_visible()
        pages.append(page)
    page_a, page_b = pages
    page_a.wait_for_timeout(1100)  # lastUpdatedDateTime counts whole seconds
    page_a.get_by_label("Answer (Markdown)").fill("We moved to 2 Side Street.")
    page_a.locator("form.card").get_by_role("button", name="Save").click()
    wait_status(page_a, f"QnA {office} saved.", timeout=30_000)

    page_b.get_by_label("Answer (Markdown)").fill("Our office is at 1 Main Street, second floor.")
    page_b.locator("form.card").get_by_role("button", name="Save").click()
    wait_status(page_b, "was changed elsewhere", timeout=30_000)
    expect(page_b.locator("#status")).to_contain_text(f"Read again: QnA {office} is shown below as it is now")
    expect(page_b.get_by_label("Answer (Markdown)")).to_have_value("We moved to 2 Side Street.")
    expect(page_b.locator(".unsaved pre").nth(1)).to_have_text("Our office is at 1 Main Street, second floor.")
    assert all("409" in e for e in b.errors)  # the refused save
    b.errors.clear()

    b.refuse = 0  # reopened from the list (any "Discard?" accepted): the QnA as it is now
    page_b.get_by_role("button", name="Where is your office?").click()
    expect(page_b.get_by_label("Answer (Markdown)")).to_have_value("We moved to 2 Side Street.")
    page_b.wait_for_timeout(1100)
    page_b.get_by_label("Answer (Markdown)").fill("We moved to 2 Side Street, second floor.")
    page_b.locator("form.card").get_by_role("button", name="Save").click()
    wait_status(page_b, f"QnA {office} saved.", timeout=30_000)
    now = {q["id"]: q for q in azure(url, secret, "GET", "/kb1/qnas").json()["value"]}
    assert now[office]["answer"] == "We moved to 2 Side Street, second floor."
    a.done()
    b.done()


def test_a_runs_questions_whose_qna_is_missing_are_counted_and_marked(server, browser, tmp_path):  # noqa: F811
    """A test set that expects QnA 9999 (which kb1 lacks) and an answer no QnA gives: the run card shows how many
    such questions there are and marks their rows (before, they read as ordinary misses)."""
    url, secret = server
    hours = qna_id(url, secret, "kb1", "What are your opening hours?")
    checks = tmp_path / "lacking.csv"
    checks.write_text("question,expected_qna_id,expected_answer\n"
                      f"when are you open,{hours},\n"
                      "how do I cancel my order,9999,\n"
                      "do you deliver on sundays,,We deliver every day of the week.\n", encoding="utf-8")
    tab = Console(browser, url)
    page = tab.sign_in(secret)
    page.goto(f"{url}/#/p/kb1/tests")
    upload = page.get_by_role("form", name="Upload a test set")
    upload.get_by_label("Set name").fill("lacking")
    upload.get_by_label("Test-set file").set_input_files(str(checks))
    upload.get_by_role("button", name="Upload").click()
    wait_status(page, "Uploaded test set lacking: 3 questions.")
    page.get_by_role("form", name="Run a test set").get_by_role("button", name="Run").click()
    wait_status(page, "Ran lacking against test: 3 questions")
    card = page.get_by_role("region", name="Run result")
    expect(card).to_contain_text("Expected QnA not in this state2")
    expect(card).to_contain_text("2 questions expect a QnA this state does not hold")
    expect(card.get_by_role("row", name="how do I cancel my order")).to_contain_text("QnA 9999 is not in this state")
    expect(card.get_by_role("row", name="do you deliver on sundays")).to_contain_text(
        "No QnA in this state gives the answer “We deliver every day of the week.”")
    expect(card.get_by_role("row", name="when are you open")).to_have_count(0)  # answered right
    page.get_by_role("region", name="Run history").get_by_role("button", name="Show run").first.click()
    expect(card.get_by_role("row", name="how do I cancel my order")).to_contain_text("QnA 9999 is not in this state")
    tab.done()


PIXEL = ("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVO"
         "RK5CYII=")


def test_markdown_links_with_parentheses_and_images(server, browser):  # noqa: F811
    """The answer preview (the test chat renders the same way): a link whose address holds parentheses is one link,
    an inline image is an <img> with its alt text, an image elsewhere is a link to it (the page's policy loads no
    image from other hosts), and javascript: stays text (before: the link ended at the first ")" and an image
    showed as "!" and a link)."""
    url, secret = server
    tab = Console(browser, url)
    page = tab.sign_in(secret)
    page.goto(f"{url}/#/p/kb1/edit")
    page.get_by_role("button", name="Where is your office?").click()
    page.get_by_label("Answer (Markdown)").fill(
        "See [Bats](https://en.wikipedia.org/wiki/Bat_(animal)) (the animal).\n\n"
        f"![Our logo]({PIXEL}) and ![Map of the office](https://example.com/map_(1).png)\n\n"
        "![x](javascript:window.__xss=1) [y](javascript:window.__xss=2)")
    preview = page.get_by_label("Answer preview")
    bats = preview.get_by_role("link", name="Bats")
    expect(bats).to_have_attribute("href", "https://en.wikipedia.org/wiki/Bat_(animal)")
    expect(preview.locator("p").first).to_have_text("See Bats (the animal).")
    logo = preview.get_by_role("img", name="Our logo")
    expect(logo).to_have_attribute("src", PIXEL)
    assert logo.evaluate("img => img.complete && img.naturalWidth") == 1  # loaded: the policy allows data: images
    expect(preview.get_by_role("link", name="Image: Map of the office")).to_have_attribute(
        "href", "https://example.com/map_(1).png")
    expect(preview.locator("p").nth(2)).to_have_text("![x](javascript:window.__xss=1) [y](javascript:window.__xss=2)")
    expect(preview.locator("img")).to_have_count(1)
    assert page.evaluate("window.__xss") is None
    tab.done()


def test_a_one_word_synonym_line_is_refused_by_name(server, browser):  # noqa: F811
    """Improve → Synonyms with a line of one word: refused, naming the line, and nothing is saved (before, the line
    was dropped and the page said "Synonyms saved.")."""
    url, secret = server
    tab = Console(browser, url)
    page = tab.sign_in(secret)
    page.goto(f"{url}/#/p/kb1/improve")
    card = page.locator("form.card").filter(has=page.get_by_role("heading", name="Synonyms"))
    groups = card.get_by_label("Groups (one per line, words separated by commas)")
    groups.fill("sign in, log in\n\nlonely\n")
    card.get_by_role("button", name="Save synonyms").click()
    wait_status(page, "Line 3: a synonym group needs two words or more: 'lonely'.", timeout=10_000)
    expect(page.locator("#status.error")).to_be_visible()
    assert azure(url, secret, "GET", "/kb1/synonyms").json()["value"] == []
    groups.fill("sign in, log in\n\nlonely, alone\n")
    card.get_by_role("button", name="Save synonyms").click()
    wait_status(page, "Synonyms saved.", timeout=10_000)
    assert [g["alterations"] for g in azure(url, secret, "GET", "/kb1/synonyms").json()["value"]] == [
        ["sign in", "log in"], ["lonely", "alone"]]
    azure(url, secret, "PUT", "/kb1/synonyms", json={"value": []})
    tab.done()


def test_importing_a_synonyms_file_reports_the_groups_stored(server, browser, tmp_path):  # noqa: F811
    """A QnA Maker synonyms TSV imported from the Projects page: the result names the synonym groups it stored (before:
    "no new QnAs or passages", as if the file had done nothing)."""
    url, secret = server
    synonyms = tmp_path / "Synonyms.tsv"
    synonyms.write_text('Synonyms\n"sign in","log in"\n"refund","money back"\n', encoding="utf-8")
    tab = Console(browser, url)
    page = tab.sign_in(secret)
    form = page.get_by_role("form", name="Import")
    form.get_by_label("Project").fill("kb1")
    form.get_by_label("File").set_input_files(str(synonyms))
    form.get_by_role("button", name="Import").click()
    wait_status(page, "Imported Synonyms.tsv into kb1.", timeout=60_000)
    expect(page.locator(".import-result")).to_have_text(
        "Imported Synonyms.tsv into kb1: +2 synonym groups. The project now has 3 QnAs, 0 passages and 2 synonym "
        "groups; deploy to answer with them in production.")
    azure(url, secret, "PUT", "/kb1/synonyms", json={"value": []})
    tab.done()


def test_exports_download_under_the_projects_name_and_format(server, browser):  # noqa: F811
    """Export on the Projects page names each file after the project and the format (before, every export of every
    project downloaded as KnowledgeBase.json or KnowledgeBase.zip)."""
    url, secret = server
    tab = Console(browser, url)
    page = tab.sign_in(secret)
    for project in ("kb1", "openqna-faq"):
        row = page.get_by_role("row", name=project)
        for fmt, name in (("json", f"{project}.json"), ("tsv", f"{project}-tsv.zip"),
                          ("excel", f"{project}-excel.zip")):
            row.get_by_label(f"Export format for {project}").select_option(fmt)
            with page.expect_download() as download:
                row.get_by_role("button", name=f"Export {project}").click()
            assert download.value.suggested_filename == name
    tab.done()


def test_inspect_names_the_question_that_matched(server, browser):  # noqa: F811
    """Inspect's "Why" names the question of a QnA that the meaning matched, not its first one (before: "matched the
    closest of its 3 questions, such as 'Which payment methods do you accept?'" for a question about PayPal)."""
    url, secret = server
    added = azure(url, secret, "PATCH", "/kb1/qnas", json=[{"op": "add", "value": {
        "questions": ["Which payment methods do you accept?", "Can I pay with PayPal?", "Do you take credit cards?"],
        "answer": "Cards and PayPal."}}])
    job(added.headers["Operation-Location"], secret)
    tab = Console(browser, url)
    page = tab.sign_in(secret)
    page.goto(f"{url}/#/p/kb1/chat")
    page.get_by_role("textbox", name="Question").fill("can I use paypal to pay")
    page.get_by_role("button", name="Ask", exact=True).click()
    expect(page.locator(".chat .bot")).to_contain_text("Cards and PayPal.")
    page.locator(".chat .bot").get_by_role("button", name="Inspect").click()
    why = page.get_by_role("region", name="Inspect").locator(".why").first
    expect(why).to_contain_text("Matched “Can I pay with PayPal?”, the closest in meaning of its 3 questions (0.")
    expect(why).not_to_contain_text("such as")
    tab.done()
