"""URL sources that refresh (kb/refresh.py): the scheduler's tick on a clock, 304s, failures, the CLI and HTTP."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from urllib.parse import quote

import httpx
import pytest

from openqna.kb.authoring import Authoring, SourceOp
from openqna.kb.refresh import Refresher, RefreshScheduler, format_every, parse_every
from openqna.records import InvalidArgument, NotFound
from openqna.store import Source
from test_cli import run

GUIDE = """# Widget guide

## Charging

Charge the widget for two hours before first use. The light turns green when it is full.

## Cleaning

Wipe the widget with a dry cloth. Never put it in water.

## Warranty

The widget has a two-year warranty from the date of purchase.
"""
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)


def answers(service, deployment: str = "test") -> str:
    return "\n".join(q.answer for q in service.records("docs", deployment))


@pytest.fixture
def guide(service, files):
    """Project ``docs`` with the URL source ``guide.md`` (served by ``files``), deployed to production."""
    (files.root / "guide.md").write_text(GUIDE, encoding="utf-8")
    url = f"{files.url}/guide.md"
    service.create_project("docs")
    Authoring(service).update_sources("docs", [SourceOp("add", Source(url, "Guide", url, "url"))])
    service.deploy("docs", "production")
    return url


def test_intervals():
    assert [parse_every(x) for x in ("10m", "1h", "6H", "1d", "7d", "2w", "0", "none", "off")] == [
        600, 3600, 21600, 86400, 604800, 1209600, 0, 0, 0]
    assert [format_every(s) for s in (600, 3600, 86400, 604800, 5400, 0)] == ["10m", "1h", "1d", "1w", "90m", "off"]
    for bad in ("5m", "1x", "6 hours", "", "-1h", "400d"):
        with pytest.raises(InvalidArgument, match="30m, 6h, 1d or 7d"):
            parse_every(bad)


def test_the_scheduler_refreshes_a_changed_source_into_the_live_state_only(service, files, guide):
    refresher = Refresher(service)
    scheduler = RefreshScheduler(refresher, poll_seconds=1)
    state = refresher.set_every("docs", "Guide", "1h", now=T0)
    assert (state.every, state.next_due) == (3600, "2026-03-01T13:00:00Z")
    assert scheduler.tick(T0 + timedelta(minutes=59)) == []  # not due yet

    first = scheduler.tick(T0 + timedelta(hours=1))  # no validators yet: fetched, same bytes as imported
    assert [(d["source"], d["outcome"]) for d in first] == [(guide, {"status": "unchanged", "notModified": False})]
    stored = service.store.list_source_refreshes("docs")[guide]
    assert stored.etag.startswith('"') and stored.last_modified and stored.next_due == "2026-03-01T14:00:00Z"
    assert stored.checked == "2026-03-01T13:00:00Z" and stored.changed == ""

    second = scheduler.tick(T0 + timedelta(hours=2))  # the server answers 304 to If-None-Match
    assert second[0]["outcome"] == {"status": "unchanged", "notModified": True}

    charging = [q.id for q in service.records("docs") if "two hours" in q.answer]
    (files.root / "guide.md").write_text(GUIDE.replace("two hours", "three hours"), encoding="utf-8")
    third = scheduler.tick(T0 + timedelta(hours=3))[0]["outcome"]
    # the Charging QnA is updated in place; its passage (keyed by its text) is replaced; the rest is untouched
    assert third["status"] == "updated" and (third["added"], third["updated"], third["deleted"]) == (1, 1, 1)
    assert sorted(third["updatedIds"] + third["deletedIds"]) == sorted(charging)
    assert third["qnas"] == {"added": 0, "updated": 1, "deleted": 0}
    assert third["passages"] == {"added": 1, "updated": 0, "deleted": 1}
    # each changed record is named by its heading, the deleted passage as it was
    assert set(third["titles"]) == {str(i) for i in third["addedIds"] + third["updatedIds"] + third["deletedIds"]}
    assert set(third["titles"].values()) == {"Charging"}
    assert "three hours" in answers(service) and "two hours" not in answers(service)
    assert "two hours" in answers(service, "production")  # nothing reaches a deployment before a deploy
    stored = service.store.list_source_refreshes("docs")[guide]
    assert stored.changed == "2026-03-01T15:00:00Z" and stored.outcome == third
    service.deploy("docs", "production")
    assert "three hours" in answers(service, "production")

    (files.root / "guide.md").write_text(GUIDE.replace("## Warranty", "## Guarantee")
                                         + "\n## Storage\n\nKeep the widget in a dry place.\n", encoding="utf-8")
    fourth = scheduler.tick(T0 + timedelta(hours=4))[0]["outcome"]
    assert fourth["added"] >= 1 and fourth["deleted"] >= 1 and "dry place" in answers(service)
    assert "Warranty" in {fourth["titles"][str(i)] for i in fourth["deletedIds"]}
    assert {"Guarantee", "Storage"} <= {fourth["titles"][str(i)] for i in fourth["addedIds"]}


def test_a_failing_source_is_recorded_and_retried_at_the_next_interval(service, files, guide):
    refresher = Refresher(service)
    scheduler = RefreshScheduler(refresher, poll_seconds=1)
    refresher.set_every("docs", guide, "30m", now=T0)
    before = answers(service)
    (files.root / "guide.md").unlink()
    failed = scheduler.tick(T0 + timedelta(minutes=30))[0]["outcome"]
    assert failed["status"] == "failed" and "HTTP 404" in failed["error"]
    stored = service.store.list_source_refreshes("docs")[guide]
    assert stored.next_due == "2026-03-01T13:00:00Z" and stored.changed == ""
    assert answers(service) == before  # a failure changes nothing
    assert scheduler.tick(T0 + timedelta(minutes=45)) == []  # backs off to the next interval
    (files.root / "guide.md").write_text(GUIDE.replace("dry cloth", "soft cloth"), encoding="utf-8")
    assert scheduler.tick(T0 + timedelta(minutes=60))[0]["outcome"]["status"] == "updated"
    refresher.set_every("docs", guide, "none", now=T0)
    assert service.store.list_source_refreshes("docs")[guide].next_due == ""
    assert scheduler.tick(T0 + timedelta(days=30)) == []


def test_two_schedulers_on_one_store_run_a_due_check_once(service, files, guide, tmp_path):
    from openqna.kb.service import Service
    from openqna.store.sqlite import SQLiteStore

    refresher = Refresher(service)
    refresher.set_every("docs", guide, "1h", now=T0)
    other_store = SQLiteStore(tmp_path / "data")
    try:
        other = RefreshScheduler(Refresher(Service(other_store, service.embedder)), poll_seconds=1)
        due = T0 + timedelta(hours=1)
        assert len(other.tick(due)) == 1
        assert RefreshScheduler(refresher, poll_seconds=1).tick(due) == []
    finally:
        other_store.close()


def test_refresh_runs_as_a_job_through_the_server(service, files, guide, live):
    scheduler = live.app.state.refreshes
    Refresher(service).set_every("docs", guide, "1h", now=T0)
    (files.root / "guide.md").write_text(GUIDE.replace("two hours", "four hours"), encoding="utf-8")
    submitted = scheduler.tick(T0 + timedelta(hours=1))
    assert [d["source"] for d in submitted] == [guide] and "job" in submitted[0]
    live.app.state.jobs.wait()
    assert service.store.list_source_refreshes("docs")[guide].outcome["status"] == "updated"
    assert "four hours" in answers(service) and "two hours" in answers(service, "production")


def test_a_new_url_forgets_the_old_validators(service, files, guide):
    refresher = Refresher(service)
    refresher.refresh("docs", guide)
    assert service.store.list_source_refreshes("docs")[guide].etag
    (files.root / "other.md").write_text(GUIDE, encoding="utf-8")
    Authoring(service).update_sources("docs", [SourceOp("replace", Source(guide, "Guide", f"{files.url}/other.md"))])
    stored = service.store.list_source_refreshes("docs")[guide]
    assert (stored.etag, stored.last_modified) == ("", "")


def test_unknown_and_non_url_sources(service, guide):
    refresher = Refresher(service)
    with pytest.raises(NotFound, match="no URL source 'nope'"):
        refresher.set_every("docs", "nope", "1h")
    service.store.put_source("docs", Source("notes.tsv", "notes.tsv", "", "file"))
    with pytest.raises(InvalidArgument, match="not a URL source"):
        refresher.refresh("docs", "notes.tsv")


def test_the_http_routes(service, files, guide, live):
    base = f"{live.url}/openqna/projects/docs/sources"
    one = f"{base}/{quote(guide, safe='')}"
    listed = httpx.get(base).json()["value"]
    assert [(s["source"], s["displayName"], s["refresh"]) for s in listed] == [(guide, "Guide", None)]

    bad = httpx.put(f"{one}/refresh", json={"every": "5 minutes"})
    assert bad.status_code == 400 and "30m, 6h, 1d or 7d" in bad.json()["error"]["message"]
    assert httpx.put(f"{base}/nope/refresh", json={"every": "6h"}).status_code == 404
    put = httpx.put(f"{one}/refresh", json={"every": "6h"})
    assert put.status_code == 200 and put.json()["refresh"]["every"] == "6h"
    assert httpx.get(base).json()["value"][0]["refresh"]["everySeconds"] == 21600

    (files.root / "guide.md").write_text(GUIDE.replace("two hours", "five hours"), encoding="utf-8")
    now = httpx.post(f"{base}/Guide/:refresh", timeout=60)
    assert now.status_code == 200, now.text
    outcome = now.json()["refresh"]["outcome"]
    assert outcome["status"] == "updated" and outcome["updated"] == 1 and outcome["updatedIds"]
    again = httpx.post(f"{one}/:refresh", timeout=60).json()["refresh"]
    assert again["outcome"] == {"status": "unchanged", "notModified": True} and again["lastChangedDateTime"]
    assert "five hours" in answers(service) and "two hours" in answers(service, "production")


def test_the_cli(tmp_path, files, embedder):
    from openqna.kb.service import Service
    from openqna.store.sqlite import SQLiteStore

    data = tmp_path / "cli-data"
    (files.root / "guide.md").write_text(GUIDE, encoding="utf-8")
    url = f"{files.url}/guide.md"
    store = SQLiteStore(data)
    service = Service(store, embedder)
    service.create_project("docs")
    Authoring(service).update_sources("docs", [SourceOp("add", Source(url, "Guide", url))])
    store.close()

    bad = run("source-refresh", "docs", "Guide", "--every", "5m", data=data, check=False)
    assert bad.returncode == 2 and "at least 10m" in bad.stderr
    assert "every 6h" in run("source-refresh", "docs", "Guide", "--every", "6h", data=data).stdout
    listed = run("sources", "docs", data=data).stdout.splitlines()
    assert listed[0].endswith("\trefresh\tlast check\tlast change\toutcome")
    assert listed[1].startswith(url + "\turl\t") and "\t6h\tnever\tnever\tnever checked" in listed[1]

    (files.root / "guide.md").write_text(GUIDE.replace("two hours", "six hours"), encoding="utf-8")
    now = run("source-refresh", "docs", "Guide", "--now", data=data).stdout
    assert "updated: 1 added, 1 updated, 1 deleted (QnAs 0/1/0, passages 1/0/1 added/updated/deleted)" in now and "  ~ #" in now  # the QnA; its passage replaced
    as_json = json.loads(run("source-refresh", "docs", "Guide", "--now", "--json", data=data).stdout)
    assert as_json["outcome"] == {"status": "unchanged", "notModified": True} and as_json["every"] == "6h"
    alone = json.loads(run("source-refresh", "docs", "Guide", "--json", data=data).stdout)  # the state as it is
    assert alone == as_json
    assert "\tunchanged (304 Not Modified)" in run("sources", "docs", data=data).stdout
    (files.root / "guide.md").unlink()
    failed = run("source-refresh", "docs", "Guide", "--now", data=data, check=False)
    assert failed.returncode == 1 and "failed: Fetching" in failed.stdout and "HTTP 404" in failed.stdout
