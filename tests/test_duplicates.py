"""Duplicates, conflicts and misplaced questions (``kb/duplicates.py``), merge and move, over the real model; the
HTTP routes through a real server.  The CLI's are in test_cli.py."""

from __future__ import annotations

import httpx
import pytest

from openqna.kb import duplicates as dup
from openqna.records import Dialog, InvalidArgument, NotFound, Prompt, QnA

PASSWORD = "Use the Forgot password link on the sign-in page."


def faq(service) -> dict[str, int]:
    """A small FAQ with one duplicate (reset), one conflict (hours), one misplaced question (credit card in shipping)
    and QnAs that must not be flagged; "contact" has a prompt to the duplicate that a merge drops."""
    service.create_project("faq")
    records = {
        "reset": QnA(["How do I reset my password?", "I forgot my password"], PASSWORD),
        "reset2": QnA(["How can I reset my password?"], PASSWORD, metadata={"topic": "account", "team": "web"}),
        "hours": QnA(["What are your opening hours?"], "We are open 9 to 5, Monday to Friday."),
        "hours2": QnA(["What are your opening hours?", "When do you open?"], "We are open 8 to 8 every day."),
        "ship": QnA(["Do you ship abroad?", "Can I pay by credit card?"], "We ship to every country in the European Union."),
        "pay": QnA(["Which payment methods do you accept?", "Do you take PayPal?"],
                   "We accept Visa, Mastercard and PayPal."),
        "delete": QnA(["How do I delete my account?"], "Go to Settings, Privacy, Delete account."),
        "office": QnA(["Where is your office?", "What is your address?"], "Our office is at 1 Main Street, Springfield."),
    }
    report = service.upsert("faq", list(records.values()), match_content=False)
    ids = dict(zip(records, report.ids))
    contact = QnA(["How do I contact support?", "How can I reach you?"], "Write to support@example.com.",
                  dialog=Dialog(prompts=[Prompt(1, ids["reset2"], "Reset my password"),
                                         Prompt(2, ids["delete"], "Delete my account")]))
    ids["contact"] = service.upsert("faq", [contact], match_content=False).ids[0]
    return ids


def kinds(findings) -> set[tuple[str, tuple[int, ...]]]:
    return {(f.kind, tuple(f.qna_ids)) for f in findings}


def test_finds_the_duplicate_the_conflict_and_the_misplaced_question_only(service):
    ids = faq(service)
    findings = dup.find(service, "faq")
    assert kinds(findings) == {("duplicate", (ids["reset"], ids["reset2"])), ("conflict", (ids["hours"], ids["hours2"])),
                               ("misplaced", (ids["ship"], ids["pay"]))}, [f.to_json() for f in findings]
    by_kind = {f.kind: f.to_json() for f in findings}
    assert by_kind["conflict"]["score"] == 1.0
    assert by_kind["conflict"]["questions"] == ["What are your opening hours?"] * 2
    assert by_kind["conflict"]["answers"] == ["We are open 9 to 5, Monday to Friday.", "We are open 8 to 8 every day."]
    assert by_kind["duplicate"]["answers"] == [PASSWORD, PASSWORD]
    assert QUESTIONS_SAME <= by_kind["duplicate"]["score"] < 1.0
    misplaced = by_kind["misplaced"]
    assert misplaced["question"] == "Can I pay by credit card?" and misplaced["winner"] == ids["pay"]
    assert misplaced["margin"] >= dup.MISPLACED_MARGIN
    assert [f.score for f in findings] == sorted((f.score for f in findings), reverse=True)
    # the import check skips the misplaced questions; a deployment is read as deployed
    assert dup.counts(dup.find(service, "faq", misplaced=False)) == {"duplicate": 1, "conflict": 1, "misplaced": 0}
    service.deploy("faq", "production")
    assert kinds(dup.find(service, "faq", "production")) == kinds(findings)


QUESTIONS_SAME = dup.QUESTION_SAME


def test_merge_moves_questions_metadata_and_prompts_in_one_write(service, monkeypatch):
    ids = faq(service)
    before = service.store.current("faq")[1]

    def every_record(*args, **kwargs):
        raise AssertionError("a merge finds the prompts to the dropped QnA with a query, not by reading every record")

    monkeypatch.setattr(service.store, "list_qnas", every_record)
    kept = dup.merge(service, "faq", ids["reset"], ids["reset2"])
    assert service.store.current("faq")[1] == before + 1  # one write of the live state
    assert kept.questions == ["How do I reset my password?", "I forgot my password", "How can I reset my password?"]
    assert kept.answer == PASSWORD and kept.metadata == {"topic": "account", "team": "web"}
    records = service.store.get_qnas("faq", [ids["reset"], ids["reset2"], ids["contact"]])
    assert ids["reset2"] not in records
    assert [(p.qna_id, p.display_text) for p in records[ids["contact"]].dialog.prompts] == \
        [(ids["reset"], "Reset my password"), (ids["delete"], "Delete my account")]
    assert ("duplicate", (ids["reset"], ids["reset2"])) not in kinds(dup.find(service, "faq"))
    answer = service.ask("faq", "test", __import__("openqna.kb.service", fromlist=["AskRequest"]).AskRequest(
        question="How can I reset my password?"))[0]
    assert answer.qna is not None and answer.qna.id == ids["reset"] and answer.confidence == 1.0


def test_move_question(service):
    ids = faq(service)
    old, new = dup.move_question(service, "faq", "can i pay by credit card? ", ids["ship"], ids["pay"])
    assert old.questions == ["Do you ship abroad?"]
    assert new.questions[-1] == "Can I pay by credit card?"
    assert not [f for f in dup.find(service, "faq") if f.kind == "misplaced"]


def test_errors_say_what_to_fix(service):
    ids = faq(service)
    with pytest.raises(NotFound, match="no QnA with id 999"):
        dup.merge(service, "faq", ids["reset"], 999)
    with pytest.raises(InvalidArgument, match="name two different QnAs"):
        dup.merge(service, "faq", ids["reset"], ids["reset"])
    with pytest.raises(InvalidArgument, match="has no question 'Hello'"):
        dup.move_question(service, "faq", "Hello", ids["ship"], ids["pay"])
    with pytest.raises(InvalidArgument, match="only question: merge"):
        dup.move_question(service, "faq", "How do I delete my account?", ids["delete"], ids["office"])
    with pytest.raises(NotFound):
        dup.find(service, "nope")


def test_http_routes(service, live):
    ids = faq(service)
    base = f"{live.url}/openqna/projects/faq"
    found = httpx.get(f"{base}/duplicates").json()
    assert {(f["kind"], tuple(f["qna_ids"])) for f in found["value"]} == kinds(dup.find(service, "faq"))
    r = httpx.post(f"{base}/qnas/:merge", json={"keep": ids["reset"], "drop": 4242})
    assert r.status_code == 404 and "no QnA with id 4242" in r.json()["error"]["message"]
    r = httpx.post(f"{base}/qnas/:merge", json={"keep": ids["reset"]})
    assert r.status_code == 400 and "'drop' is required" in r.json()["error"]["message"]
    r = httpx.get(f"{base}/duplicates", params={"deploymentName": "production"})
    assert r.status_code == 404 and "was not found" in r.json()["error"]["message"]
    r = httpx.post(f"{base}/qnas/:merge", json={"keep": ids["reset"], "drop": ids["reset2"]})
    assert r.status_code == 200 and r.json()["deleted"] == ids["reset2"]
    r = httpx.post(f"{base}/qnas/:move-question",
                   json={"question": "Can I pay by credit card?", "from": ids["ship"], "to": ids["pay"]})
    assert r.status_code == 200 and "Can I pay by credit card?" in r.json()["to"]["questions"]
    r = httpx.post(f"{base}/qnas/:move-question", json={"question": "Nothing", "from": ids["ship"], "to": ids["pay"]})
    assert r.status_code == 400 and "has no question" in r.json()["error"]["message"]
    left = httpx.get(f"{base}/duplicates").json()["value"]
    assert [(f["kind"], f["qna_ids"]) for f in left] == [("conflict", [ids["hours"], ids["hours2"]])]


def test_a_chinese_kb_is_compared_in_the_space_it_is_read_in(service):
    """The default model cannot read Chinese: an import of 80 Chinese QnAs reported 171 duplicates, "两种感冒药能混吃吗"
    and "怀孕后能吃感冒药吗" among them at 1.00, each with a merge to run.  Its questions are compared in the
    multilingual space, as the server ranks them."""
    import csv

    from conftest import SHARED_DATA

    with open(SHARED_DATA / "covid-qsim-tianchi-zh" / "derived" / "faq.tsv", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f, delimiter="\t") if r["split"] == "train"]
    distinct = list({r["question"]: r for r in rows}.values())[::20][:40]  # different questions, most of them
    service.create_project("zh")
    service.upsert("zh", [QnA([r["question"]], f"关于{r['category']}的回答第{i}条。") for i, r in enumerate(distinct)]
                   + [QnA(["请问呕血与咯血有什么区别？"], "呕血来自消化道，咯血来自呼吸道。"),
                      QnA(["请问呕血与咯血这两者之间有什么区别？"], "呕血来自消化道，咯血来自呼吸道。")])
    ids = {q.questions[0]: q.id for q in service.store.list_qnas("zh")}
    found = dup.find(service, "zh")
    pair = (ids["请问呕血与咯血有什么区别？"], ids["请问呕血与咯血这两者之间有什么区别？"])
    assert ("duplicate", tuple(sorted(pair))) in kinds(found)
    assert len(found) == 1, [(f.kind, f.questions, round(f.score, 3)) for f in found]
