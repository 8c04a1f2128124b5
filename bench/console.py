"""The console's QnA editor at 100 and 10,003 QnAs, in Debian's chromium: does it stay fast?

The editor fetches every QnA through the authoring API (pages of 1,000) and searches, sorts and pages
them in the tab, drawing one page of 25.  Measured: opening the editor until its list is drawn, and one
search keystroke (filter and redraw) with the page's own clock.  Baseline in the same run: fetching the
same QnAs through the API with httpx, which the editor cannot beat; the figure to read is the ratio.
The QnAs are banking77's training utterances; vectors come from the hash embedder, since neither
figure depends on them.

Usage: python bench/console.py
"""

from __future__ import annotations

import csv
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import httpx  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

from conftest import SHARED_DATA, LiveServer  # noqa: E402
from openqna.kb.service import Service
from openqna.models.embedder import HashEmbedder  # noqa: E402
from openqna.records import QnA  # noqa: E402
from openqna.store.sqlite import SQLiteStore  # noqa: E402
from test_console import CHROMIUM, CHROMIUM_ARGS  # noqa: E402

AZ = "/language/authoring/query-knowledgebases/projects"
RUNS = 5


def fetch_all(url: str, project: str) -> int:
    n, link = 0, f"{url}{AZ}/{project}/qnas?api-version=2023-04-01&maxpagesize=1000"
    while link:
        page = httpx.get(link, timeout=60).json()
        n += len(page["value"])
        link = page.get("nextLink")
    return n


def main() -> None:
    with open(SHARED_DATA / "banking77" / "train.csv") as f:
        rows = list(csv.DictReader(f))
    qnas = [QnA([r["text"].strip()], f"See our help page on {r['category'].replace('_', ' ')}.", source="banking77")
            for r in rows]
    with tempfile.TemporaryDirectory() as tmp:
        service = Service(SQLiteStore(tmp), HashEmbedder())
        for name, items in (("small", qnas[:100]), ("big", qnas)):
            service.create_project(name)
            service.upsert(name, items)
        with LiveServer(service) as server, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            print("| QnAs | API fetch (baseline) | editor open | ratio | search keystroke |")
            print("|---|---|---|---|---|")
            for name in ("small", "big"):
                n = service.store.count_qnas(name)
                api, opened, keys = [], [], []
                for _ in range(RUNS):
                    t = time.perf_counter()
                    fetch_all(server.url, name)
                    api.append(time.perf_counter() - t)
                    page.goto(f"{server.url}/#/projects")
                    page.get_by_role("heading", name="Projects").wait_for()
                    t = time.perf_counter()
                    page.goto(f"{server.url}/#/p/{name}/edit")
                    page.get_by_text(f"{n} of {n} QnAs").wait_for()
                    opened.append(time.perf_counter() - t)
                    keys.append(page.evaluate("""() => {
                        const box = document.querySelector('input[type=search]');
                        const t = performance.now();
                        box.value = 'card';
                        box.dispatchEvent(new Event('input'));
                        return (performance.now() - t) / 1000; }"""))
                a, o, k = (statistics.median(x) * 1000 for x in (api, opened, keys))
                print(f"| {n:,} | {a:.0f} ms | {o:.0f} ms | {o / a:.2f} | {k:.1f} ms |")
            browser.close()


if __name__ == "__main__":
    main()
