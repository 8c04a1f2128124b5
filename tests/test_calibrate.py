"""``openqna calibrate`` end to end: real model, real files, the fit read back by the HTTP server."""

from __future__ import annotations

import csv
import math
import re
from collections import defaultdict

import httpx

from conftest import SHARED_DATA, LiveServer
from openqna.kb import calibrate as cal
from openqna.records import QnA
from test_cli import run

INTENTS = 12


def banking_kb_and_dev_questions() -> tuple[list[QnA], list[tuple[str, str]]]:
    """12 banking77 intents (6 training utterances each as questions), 4 more utterances each to calibrate on."""
    by = defaultdict(list)
    with open(SHARED_DATA / "banking77" / "train.csv") as f:
        for row in csv.DictReader(f):
            by[row["category"]].append(row["text"])
    labels = sorted(by)[:INTENTS]
    kb = [QnA(by[label][:6], label.replace("_", " "), source="banking") for label in labels]
    dev = [(text, label.replace("_", " ")) for label in labels for text in by[label][6:10]]
    return kb, dev


def off_topic_questions(n: int) -> list[str]:
    return (SHARED_DATA / "hwu64" / "train" / "seq.in").read_text().splitlines()[:n]


def bank_project(tmp_path, embedder):
    """The 12-intent banking project in a store under ``tmp_path / "data"`` and its development file of 48 in-scope
    and 16 off-topic questions: (store, service, QnA id by answer, rows of (question, QnA id or None), file)."""
    from openqna.kb.service import Service
    from openqna.store.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "data")
    service = Service(store, embedder)
    kb, dev = banking_kb_and_dev_questions()
    service.create_project("bank")
    service.upsert("bank", kb)
    id_of = {q.answer: q.id for q in store.list_qnas("bank")}
    rows = [(q, id_of[label]) for q, label in dev] + [(q, None) for q in off_topic_questions(16)]
    devfile = tmp_path / "dev.tsv"
    devfile.write_text("question\tqnaId\n" + "".join(f"{q}\t{'none' if e is None else e}\n" for q, e in rows))
    return store, service, id_of, rows, devfile


def test_calibrate_fits_saves_and_the_server_uses_it(tmp_path, embedder):
    from openqna.kb.service import Service
    from openqna.store.sqlite import SQLiteStore

    data = tmp_path / "data"
    store, _, id_of, _, devfile = bank_project(tmp_path, embedder)
    _, dev = banking_kb_and_dev_questions()
    store.close()

    dry = run("calibrate", "bank", str(devfile), "--dry-run", data=data)
    assert "64 questions (48 in scope, 16 off-topic), threshold 0.5" in dry.stdout
    assert "not saved" in dry.stdout
    figures = re.findall(r"^  (before|after \(fitted[^)]*\))\s+scale\s+(\S+)\s+shift\s+(\S+)"
                         r"\s+in-scope answered right\s+(\S+)%\s+off-topic rejected\s+(\S+)%$", dry.stdout, re.M)
    assert [f[0] for f in figures] == ["before", "after (fitted on these questions)"]
    assert re.search(r"^  after \(5-fold cross-validated\)\s+\(a fit per fold\)\s+in-scope answered right\s+\S+%"
                     r"\s+off-topic rejected\s+\S+%$", dry.stdout, re.M)
    before, after = figures[0], figures[1]
    assert (float(before[1]), float(before[2])) == (cal.CALIBRATION.scale, cal.CALIBRATION.shift)
    assert (float(after[1]), float(after[2])) != (float(before[1]), float(before[2]))
    store = SQLiteStore(data)
    assert "calibration" not in store.get_project("bank").settings

    saved = run("calibrate", "bank", str(devfile), data=data)
    settings = store.get_project("bank").settings["calibration"]
    assert settings == {"scale": float(after[1]), "shift": float(after[2])}
    assert "saved in project 'bank'" in saved.stdout

    # the running server reads the fitted calibration: a question's confidence over HTTP is the
    # Platt rescaling of its logit with the fitted scale and shift
    question = dev[0][0]
    service = Service(store, embedder)
    [point] = cal.collect(service, "bank", [cal.Pair(question, id_of[dev[0][1]])])
    with LiveServer(service) as live:
        body = httpx.post(f"{live.url}/language/:query-knowledgebases",
                          params={"projectName": "bank", "deploymentName": "test", "api-version": "2023-04-01"},
                          json={"question": question, "top": 1}, timeout=30).json()
    expected = 1 / (1 + math.exp(-(settings["scale"] * point.logit + settings["shift"])))
    assert abs(body["answers"][0]["confidenceScore"] - expected) < 1e-3

    run("calibrate", "bank", str(devfile), "--reset", data=data)
    assert "calibration" not in store.get_project("bank").settings
    store.close()


def test_fit_moves_confidence_towards_observed_accuracy():
    # top answers that are right half the time at a logit where the shipped calibration says ~0.9
    points = [cal.Point(0.5, i % 2 == 0, i % 2 == 1 and i % 4 == 1) for i in range(200)]
    fitted = cal.fit(points)
    assert abs(cal.confidence(points[0], fitted) - 0.5) < 0.05
    assert cal.confidence(points[0], cal.CALIBRATION) > 0.85
    assert cal.confidence(cal.Point(math.inf, True, False), fitted) == 1.0


def test_bad_files_are_refused_with_the_line(tmp_path):
    data = tmp_path / "data"
    run("import", "chitchat", str(SHARED_DATA / "ms-qna-chitchat" / "qna_chitchat_the_professional.tsv"), data=data)
    bad = tmp_path / "bad.tsv"
    bad.write_text("how old are you?\t1\nwhat is the weather\tmaybe\n")
    proc = run("calibrate", "chitchat", str(bad), data=data, check=False)
    assert proc.returncode == 2 and "bad.tsv line 2: 'maybe' is neither a QnA id nor 'none'" in proc.stderr
    few = tmp_path / "few.tsv"
    few.write_text("how old are you?\t1\nwhat is the weather\tnone\n")
    proc = run("calibrate", "chitchat", str(few), data=data, check=False)
    assert proc.returncode == 2 and "2 questions are too few" in proc.stderr
    unknown = tmp_path / "unknown.tsv"
    unknown.write_text("how old are you?\t99999\n")
    proc = run("calibrate", "chitchat", str(unknown), data=data, check=False)
    assert proc.returncode == 2 and "has no QnA with id 99999" in proc.stderr


def test_the_figures_before_and_after_are_what_the_server_answers(tmp_path, embedder):
    """"before" was read off the logit before rescaling with the shipped scale and shift, but the shipped
    calibration's last step (ranking/regime.py) is no affine map of it: a covid FAQ page answered 25% of its dev
    questions right at 0.5, calibrate said 60%, and a fit that doubled the right answers looked like a loss."""
    from openqna.kb.service import AskRequest

    data = tmp_path / "data"
    store, service, _, rows, devfile = bank_project(tmp_path, embedder)

    def served() -> tuple[float, float]:  # in-scope right and off-topic rejected at 0.5, asked as a bot asks
        right, rejected = [], []
        for question, expected in rows:
            top = service.ask("bank", "test", AskRequest(question=question, top=1, threshold=0.5))[0]
            answered = top.qna is not None
            if expected is None:
                rejected.append(not answered)
            else:
                right.append(answered and top.qna.id == expected)
        return 100 * sum(right) / len(right), 100 * sum(rejected) / len(rejected)

    def said(out: str, row: str) -> tuple[float, float]:
        m = re.search(rf"^  {re.escape(row)}\s+scale\s+\S+\s+shift\s+\S+\s+in-scope answered right\s+(\S+)%"
                      r"\s+off-topic rejected\s+(\S+)%$", out, re.M)
        assert m, out
        return float(m.group(1)), float(m.group(2))

    now = served()
    first = run("calibrate", "bank", str(devfile), data=data).stdout
    assert said(first, "before") == tuple(round(x, 1) for x in now)
    after = said(first, "after (fitted on these questions)")
    assert after == tuple(round(x, 1) for x in served())  # the fit now saved: served as the tool said
    again = run("calibrate", "bank", str(devfile), "--dry-run", data=data).stdout
    assert said(again, "before") == after  # the saved fit, read as served
    store.close()
