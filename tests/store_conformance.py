"""The store conformance suite (DESIGN decision 7): every store must pass it unchanged.

A test module for a store defines a ``store`` fixture, a ``reopen`` fixture (a
function that opens another store object on the same database, as another
process would) and does ``from store_conformance import *``.  Vectors here are small and hand-made so
similarities and BM25 scores can be computed by hand.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from openqna.clock import stamped
from openqna.index.analyze import analyze
from openqna.index.index_cache import IndexCache, engine_search
from openqna.records import MAX_QNA_ID, Dialog, InvalidArgument, NotFound, ProjectNotFound, Prompt, QnA
from openqna.store import ApiKey, Project, StoredQnA, Unit


def vec(*xs: float) -> np.ndarray:
    v = np.asarray(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def item(questions, answer, *, vectors, answer_vector, id=None, source="Editorial", metadata=None,
         context_only=False, prompts=(), kind="qna"):
    q = QnA(list(questions), answer, id, source, dict(metadata or {}), Dialog(context_only, list(prompts)), kind)
    units = [Unit("q", i, analyze(t), v) for i, (t, v) in enumerate(zip(questions, vectors))]
    units.append(Unit("a", 0, analyze(answer), answer_vector))
    return StoredQnA(q, units, f"hash-{questions[0]}")


@pytest.fixture
def indexes(store):
    """The index cache over the store under test, as ``Service`` makes it: every store must serve it alike."""
    return IndexCache(store, nearest=engine_search(store))


@pytest.fixture
def kb(store):
    store.create_project(Project("kb1", "first"))
    ids = store.put_qnas("kb1", [
        item(["How do I charge the battery?", "charging time"], "Plug it in for two hours.",
             vectors=[vec(1, 0, 0, 0), vec(0.9, 0.1, 0, 0)], answer_vector=vec(0.8, 0.2, 0, 0),
             metadata={"category": "power", "product": "surface"}, source="manual.pdf",
             prompts=[Prompt(0, 3, "Fast charging")]),
        item(["Where is the pen?"], "The pen attaches magnetically.",
             vectors=[vec(0, 1, 0, 0)], answer_vector=vec(0, 0.9, 0.1, 0),
             metadata={"category": "accessories", "product": "surface"}, source="faq.tsv"),
        item(["Fast charging"], "Use the 65 W charger for fast charging of the battery.",
             vectors=[vec(0.7, 0, 0.7, 0)], answer_vector=vec(0.6, 0, 0.8, 0), context_only=True,
             metadata={"category": "power"}, source="manual.pdf"),
        item(["Battery report passage"], "A passage about battery health and charging cycles.",
             vectors=[vec(0.5, 0, 0, 0.5)], answer_vector=vec(0.5, 0, 0, 0.5), kind="passage", source="paper.pdf"),
    ])
    assert ids == [1, 2, 3, 4]
    return store


def test_projects_crud(store):
    store.create_project(Project("Alpha", "d", "en", settings={"defaultAnswer": "nope"}))
    p = store.get_project("alpha")  # names are case-insensitive, as Azure's
    assert (p.name, p.description, p.default_answer) == ("Alpha", "d", "nope")
    p.description = "changed"
    store.update_project(p)
    assert store.get_project("Alpha").description == "changed"
    assert [x.name for x in store.list_projects()] == ["Alpha"]
    store.delete_project("Alpha")
    with pytest.raises(ProjectNotFound):
        store.get_project("Alpha")
    with pytest.raises(ProjectNotFound):
        store.put_qnas("Alpha", [])


def test_records_roundtrip_and_ids(kb):
    got = kb.get_qnas("kb1", [1, 3])
    assert got[1].questions == ["How do I charge the battery?", "charging time"]
    assert got[1].metadata == {"category": "power", "product": "surface"}
    assert got[1].dialog.prompts == [Prompt(0, 3, "Fast charging")]
    assert got[3].dialog.is_context_only is True
    assert kb.count_qnas("kb1") == 4
    assert [q.id for q in kb.list_qnas("kb1", offset=1, limit=2)] == [2, 3]
    assert kb.content_hashes("kb1")[2] == "hash-Where is the pen?"


def test_content_hashes_of_named_records_are_read_in_batches(kb):
    """An edit reads the hashes of the records it names, however many (more than a statement may hold: SQLite takes
    999 variables before 3.32, 32766 after unless built otherwise), from the live state only; ids of no live record
    are left out."""
    kb.deploy("kb1", "production")
    kb.delete_qnas("kb1", [2])  # still deployed, no longer live
    kb.put_qnas("kb1", [item([f"question {i}"], f"answer {i}", vectors=[vec(1, 0, 0, 0)], answer_vector=vec(0, 1, 0, 0))
                        for i in range(1200)])
    every = kb.content_hashes("kb1")
    assert len(every) == 1203 and 2 not in every
    assert kb.content_hashes("kb1", range(1, 40_001)) == every
    assert kb.content_hashes("kb1", [3, 3, 2, 99_999, np.int64(4), 2**70]) == {3: every[3], 4: every[4]}
    assert kb.content_hashes("kb1", []) == {}
    assert kb.get_qnas("kb1", [3, 2**70]).keys() == {3}  # an id past 64 bits names no record
    with pytest.raises(ProjectNotFound):
        kb.content_hashes("nope", [1])


def test_records_of_one_source_are_read_alone(kb):
    """A vector store indexes a file by reading that file's records (its chunks), from the live state only."""
    assert [q.id for q in kb.source_records("kb1", "manual.pdf")] == [1, 3]
    assert kb.source_records("kb1", "paper.pdf")[0].answer == "A passage about battery health and charging cycles."
    assert kb.source_records("kb1", "Manual.pdf") == [] and kb.source_records("kb1", "nope") == []
    kb.deploy("kb1", "production")
    kb.delete_qnas("kb1", [1])
    assert [q.id for q in kb.source_records("kb1", "manual.pdf")] == [3]
    with pytest.raises(ProjectNotFound):
        kb.source_records("nope", "manual.pdf")


def test_feedback_of_named_qnas_is_read_in_batches(kb):
    kb.add_feedback("kb1", [(i, f"question {i % 3}", "u") for i in range(1, 1201)] + [(7, "question 1", "v")])
    every = kb.list_feedback("kb1")
    assert kb.list_feedback("kb1", range(1, 1201)) == every and len(every) == 1200
    assert kb.list_feedback("kb1", [7, 8, 5000]) == {7: [("question 1", 2)], 8: [("question 2", 1)]}
    assert kb.list_feedback("kb1", []) == {}


def test_records_are_counted_by_kind(kb):
    """``openqna projects`` counts QnAs and passages apart without reading every record."""
    assert kb.count_kinds("kb1") == {"qna": 3, "passage": 1}
    kb.put_qnas("kb1", [item(["a section"], "passage text", vectors=[vec(0, 0, 1, 0)], answer_vector=vec(0, 0, 1, 0),
                             kind="passage")])
    assert kb.count_kinds("kb1") == {"qna": 3, "passage": 2} and kb.count_qnas("kb1") == 5


def test_records_of_some_kinds_are_listed_a_page_at_a_time(kb):
    """Azure's QnA list pages through QnAs only: a page read before the passages were left out came back short."""
    kb.put_qnas("kb1", [item([f"q{i}"], f"answer {i}", vectors=[vec(0, 0, 0, 1)], answer_vector=vec(0, 0, 0, 1))
                        for i in range(2)])
    assert [q.id for q in kb.list_qnas("kb1", kinds=("qna",))] == [1, 2, 3, 5, 6]
    assert [q.id for q in kb.list_qnas("kb1", offset=2, limit=2, kinds=("qna", "row"))] == [3, 5]
    assert [q.id for q in kb.list_qnas("kb1", kinds=("passage",))] == [4]
    assert kb.list_qnas("kb1", kinds=()) == [] and len(kb.list_qnas("kb1")) == 6
    kb.deploy("kb1", "production")
    assert [q.id for q in kb.list_qnas("kb1", "production", offset=3, kinds=("qna",))] == [5, 6]


def test_delete_never_reuses_ids(kb, indexes):
    assert kb.delete_qnas("kb1", [4, 99]) == 1
    assert kb.count_qnas("kb1") == 3
    new = kb.put_qnas("kb1", [item(["new"], "n", vectors=[vec(0, 0, 0, 1)], answer_vector=vec(0, 0, 0, 1))])
    assert new == [5]
    assert indexes.get("kb1").row_of.keys() == {1, 2, 3, 5}


def test_a_qna_without_an_id_is_not_taken_over_by_one_named_later_in_the_same_write(kb):
    """The next free id is 5: a write of a QnA without an id, then one with id 5, keeps both (the first was given 5,
    then replaced by the second: lost, the write said nothing)."""
    def new(question, id=None):
        return item([question], "a " + question, id=id, vectors=[vec(0, 0, 0, 1)], answer_vector=vec(0, 0, 0, 1))

    ids = kb.put_qnas("kb1", [new("no id"), new("five", 5), new("also no id"), new("three", 3)])
    assert ids == [6, 5, 7, 3]
    assert {q.id: q.questions[0] for q in kb.get_qnas("kb1", [3, 5, 6, 7]).values()} == {
        3: "three", 5: "five", 6: "no id", 7: "also no id"}
    assert kb.put_qnas("kb1", [new("next")]) == [8]
    # a free id, not one above every id named: a QnA named with a high id beside it leaves no gap
    assert kb.put_qnas("kb1", [new("after"), new("high", 100)]) == [9, 100]


def test_ids_are_not_given_out_past_the_largest(kb):
    """After a QnA added with id 2**31-1 the next add without an id got 2**31, which no client can send back; ids are
    never reused, so such an add (and a reservation) is refused and writes nothing, while an own id still goes in."""
    def new(question, id=None):
        return item([question], "a", id=id, vectors=[vec(0, 0, 0, 1)], answer_vector=vec(0, 0, 0, 1))

    assert kb.reserve_ids("kb1", 2) == [5, 6]
    assert kb.put_qnas("kb1", [new("highest", MAX_QNA_ID)]) == [MAX_QNA_ID]
    for write in (lambda: kb.put_qnas("kb1", [new("own id", 7), new("no id")]),
                  lambda: kb.replace_qnas("kb1", [new("no id")], [1]),
                  lambda: kb.reserve_ids("kb1", 1)):
        with pytest.raises(InvalidArgument, match="give each new QnA an unused id of its own"):
            write()
    assert kb.count_qnas("kb1") == 5 and set(kb.get_qnas("kb1", [1, 7])) == {1}
    assert kb.put_qnas("kb1", [new("own id", 7)]) == [7]
    assert kb.delete_qnas("kb1", [MAX_QNA_ID]) == 1
    with pytest.raises(InvalidArgument):  # a deleted id is not given out again, however high
        kb.put_qnas("kb1", [new("no id")])


def test_deleting_a_qna_takes_the_prompts_to_it_out_of_the_live_state(kb):
    """The QnAs that lead to a deleted QnA lose those prompts in the same transaction, with a new last_updated and a
    new content hash; the others, and a deployment, keep theirs until the next deploy."""
    kb.put_qnas("kb1", [item(["Charging menu"], "Pick one.", id=5, vectors=[vec(0, 0, 1, 1)],
                             answer_vector=vec(0, 0, 1, 1), prompts=[Prompt(0, 3, "Fast"), Prompt(1, 2, "Pen")])])
    kb.deploy("kb1", "production")
    assert set(kb.records_prompting("kb1", [3])) == {1, 5}
    assert set(kb.records_prompting("kb1", [2, 4, 2**70])) == {5}
    before, hashes = kb.get_qnas("kb1", [1, 2, 5]), kb.content_hashes("kb1")
    with stamped("2031-01-02T03:04:05Z"):
        assert kb.delete_qnas("kb1", [3]) == 1
    after = kb.get_qnas("kb1", [1, 2, 5])
    assert after[1].dialog.prompts == [] and after[5].dialog.prompts == [Prompt(1, 2, "Pen")]
    assert after[1].last_updated == after[5].last_updated == "2031-01-02T03:04:05Z"
    assert after[2].last_updated == before[2].last_updated
    changed = kb.content_hashes("kb1")
    assert changed[2] == hashes[2] and changed[1] != hashes[1] and changed[5] != hashes[5]
    assert kb.records_prompting("kb1", [3]) == {}
    assert kb.get_qnas("kb1", [1], "production")[1].dialog.prompts == [Prompt(0, 3, "Fast charging")]
    kb.deploy("kb1", "production")
    assert kb.get_qnas("kb1", [1], "production")[1].dialog.prompts == []
    assert len({v.hash for v in kb.list_versions("kb1")}) == 2  # the new content is a version of its own


def test_an_import_that_drops_a_qna_takes_the_prompts_to_it_out(kb):
    """``replace_qnas`` (an import, a refresh, a merge) unlinks in its one transaction, the records it writes too."""
    kb.replace_qnas("kb1", [item(["Charging menu"], "Pick one.", id=5, vectors=[vec(0, 0, 1, 1)],
                                 answer_vector=vec(0, 0, 1, 1), prompts=[Prompt(0, 3, "Fast"), Prompt(1, 2, "Pen")])],
                    [3])
    found = kb.get_qnas("kb1", [1, 5])
    assert found[1].dialog.prompts == [] and found[5].dialog.prompts == [Prompt(1, 2, "Pen")]
    assert kb.delete_qnas("kb1", [3]) == 0  # nothing deleted: nothing else changes
    assert kb.get_qnas("kb1", [5])[5].dialog.prompts == [Prompt(1, 2, "Pen")]


def test_records_prompting_reads_many_ids(kb):
    """More ids than one statement takes (``ID_BATCH``): every batch is asked, each record named once."""
    kb.put_qnas("kb1", [item(["far"], "far", id=5, vectors=[vec(0, 0, 1, 1)], answer_vector=vec(0, 0, 1, 1),
                             prompts=[Prompt(0, 3, "x"), Prompt(1, 1200, "y")])])
    assert sorted(kb.records_prompting("kb1", range(1, 1300))) == [1, 5]
    with pytest.raises(ProjectNotFound):
        kb.records_prompting("nope", [3])


def test_replace_keeps_id_and_drops_old_units(kb, indexes):
    kb.put_qnas("kb1", [item(["Where can I find the stylus?"], "In the box.", id=2,
                             vectors=[vec(0, 0, 0, 1)], answer_vector=vec(0, 0, 0, 1))])
    assert kb.get_qnas("kb1", [2])[2].questions == ["Where can I find the stylus?"]
    index = indexes.get("kb1")
    sims = index.dense(vec(0, 0, 0, 1), "q", index.mask(None))
    assert sims[index.row_of[2]] == pytest.approx(1.0)
    assert index.bm25(analyze("pen"), "q", index.mask(None)).max() == 0.0


def test_query_reads_say_what_does_not_exist(kb):
    """The reads every question makes (``current``, synonyms, the answers' records) answer in one read where they
    can, and still tell a missing project from a missing deployment, however the name is cased."""
    kb.deploy("kb1", "production")
    kb.set_synonyms("kb1", [["pen", "stylus"]])
    assert kb.get_synonyms("KB1") == [["pen", "stylus"]] and kb.get_synonyms("kb1", "production") == []
    assert sorted(kb.get_qnas("KB1", [1, 2], "production")) == [1, 2]
    assert kb.get_qnas("kb1", [999], "production") == {} and kb.get_qnas("kb1", []) == {}
    pid, version = kb.current("Kb1", "production")
    assert version == kb.version("kb1", "production") > 0 and kb.current("kb1")[0] == pid
    for read in (lambda d: kb.get_qnas("kb1", [1], d), lambda d: kb.get_qnas("kb1", [], d),
                 lambda d: kb.get_synonyms("kb1", d), lambda d: kb.current("kb1", d)):
        with pytest.raises(NotFound) as raised:
            read("staging")
        assert not isinstance(raised.value, ProjectNotFound)
    for read in (lambda: kb.get_qnas("nope", [1]), lambda: kb.get_qnas("nope", [1], "production"),
                 lambda: kb.get_synonyms("nope"), lambda: kb.get_synonyms("nope", "production"),
                 lambda: kb.current("nope"), lambda: kb.current("nope", "production")):
        with pytest.raises(ProjectNotFound):
            read()


def test_deployments_are_copies(kb, indexes):
    with pytest.raises(NotFound):
        indexes.get("kb1", "production")
    kb.deploy("kb1", "production")
    kb.set_synonyms("kb1", [["pen", "stylus"]])
    kb.delete_qnas("kb1", [1])
    kb.put_qnas("kb1", [item(["Where is the pen?"], "Changed answer.", id=2,
                             vectors=[vec(0, 1, 0, 0)], answer_vector=vec(0, 1, 0, 0))])
    assert kb.count_qnas("kb1", "production") == 4
    assert kb.get_qnas("kb1", [2], "production")[2].answer == "The pen attaches magnetically."
    assert kb.get_qnas("kb1", [2])[2].answer == "Changed answer."
    assert kb.get_synonyms("kb1", "production") == []
    assert 1 in indexes.get("kb1", "production").row_of
    assert 1 not in indexes.get("kb1").row_of
    assert [d.name for d in kb.list_deployments("kb1")] == ["production"]
    kb.deploy("kb1", "production")
    assert kb.count_qnas("kb1", "production") == 3
    assert kb.get_synonyms("kb1", "production") == [["pen", "stylus"]]


def test_every_deploy_is_a_version_and_a_rollback_restores_it(kb, indexes):
    first = kb.deploy("kb1", "production", by="key ci")
    assert first.version == 1
    kb.put_qnas("kb1", [item(["Where is the pen?"], "Changed answer.", id=2,
                             vectors=[vec(0, 1, 0, 0)], answer_vector=vec(0, 1, 0, 0))])
    kb.delete_qnas("kb1", [1])
    kb.set_synonyms("kb1", [["pen", "stylus"]])
    assert kb.deploy("kb1", "production").version == 2
    assert 1 not in indexes.get("kb1", "production").row_of
    events = kb.list_versions("kb1")
    assert [(v.deployment, v.version, v.qnas, v.passages, v.current, v.kept) for v in events] == [
        ("production", 1, 3, 1, False, True), ("production", 2, 2, 1, True, True)]
    assert events[0].deployed_by == "key ci" and events[0].hash != events[1].hash

    back = kb.deploy("kb1", "production", version=1, by="cli me")
    assert back.version == 1
    assert kb.get_qnas("kb1", [2], "production")[2].answer == "The pen attaches magnetically."
    assert kb.count_qnas("kb1", "production") == 4 and kb.get_synonyms("kb1", "production") == []
    assert 1 in indexes.get("kb1", "production").row_of  # the index reads the rolled-back content
    assert kb.get_qnas("kb1", [2])[2].answer == "Changed answer."  # the live state is untouched
    assert [(v.version, v.current) for v in kb.list_versions("kb1")] == [(1, False), (2, False), (1, True)]
    assert [d.version for d in kb.list_deployments("kb1")] == [1]
    assert [q.answer for q in kb.version_records("kb1", 2) if q.id == 2] == ["Changed answer."]


def test_the_same_content_is_one_version(kb):
    assert kb.deploy("kb1", "production").version == 1
    assert kb.deploy("kb1", "staging").version == 1
    assert kb.deploy("kb1", "production").version == 1
    assert [(v.deployment, v.version) for v in kb.list_versions("kb1")] == [
        ("production", 1), ("staging", 1), ("production", 1)]
    assert {d.name: d.version for d in kb.list_deployments("kb1")} == {"production": 1, "staging": 1}


def test_a_deployment_keeps_the_default_answer_it_was_deployed_with(kb):
    """The default answer is part of what a deploy records: editing it changed production's answer at once (QnAs and
    synonyms were isolated, it was read from the live project).  Content alike with another default answer is
    another version, and a rollback restores the old one."""
    project = kb.get_project("kb1")
    project.settings["defaultAnswer"] = "Sorry, ask the help desk."
    kb.update_project(project)
    assert kb.deploy("kb1", "production").version == 1
    project.settings["defaultAnswer"] = "DRAFT - do not ship"
    kb.update_project(project)
    assert [(d.name, d.default_answer) for d in kb.list_deployments("kb1")] == [
        ("production", "Sorry, ask the help desk.")]
    assert kb.deploy("kb1", "staging").version == 2  # the same records, another default answer
    assert {d.name: d.default_answer for d in kb.list_deployments("kb1")} == {
        "production": "Sorry, ask the help desk.", "staging": "DRAFT - do not ship"}
    assert kb.deploy("kb1", "production").version == 2
    assert kb.deploy("kb1", "production", version=1).version == 1  # a rollback
    assert {d.name: d.default_answer for d in kb.list_deployments("kb1")}["production"] == "Sorry, ask the help desk."
    assert [(v.version, v.default_answer) for v in kb.list_versions("kb1")] == [
        (1, "Sorry, ask the help desk."), (2, "DRAFT - do not ship"), (2, "DRAFT - do not ship"),
        (1, "Sorry, ask the help desk.")]
    project.settings["defaultAnswer"] = "  "  # blank: the built-in one, as the live state answers
    kb.update_project(project)
    kb.deploy("kb1", "blank")
    assert {d.name: d.default_answer for d in kb.list_deployments("kb1")}["blank"] == "No good match found in KB."


def test_old_versions_lose_their_content_but_never_a_deployed_one(kb, monkeypatch):
    monkeypatch.setenv("OPENQNA_VERSIONS_KEPT", "2")
    kb.deploy("kb1", "staging")  # v1, held by staging throughout
    for answer in ("two", "three", "four"):
        kb.put_qnas("kb1", [item([f"Where is pen {answer}?"], answer, id=2,
                                 vectors=[vec(0, 1, 0, 0)], answer_vector=vec(0, 1, 0, 0))])
        kb.deploy("kb1", "production")
    kept = {v.version: v.kept for v in kb.list_versions("kb1")}
    assert kept == {1: True, 2: False, 3: True, 4: True}
    with pytest.raises(NotFound, match="not kept"):
        kb.deploy("kb1", "production", version=2)
    with pytest.raises(NotFound, match="no longer kept"):
        kb.version_records("kb1", 2)
    with pytest.raises(NotFound, match="never deployed"):
        kb.deploy("kb1", "production", version=9)
    assert kb.get_qnas("kb1", [2], "production")[2].answer == "four"  # a refused rollback changed nothing
    kb.deploy("kb1", "production", version=1)
    assert kb.get_qnas("kb1", [2], "production")[2].answer == "The pen attaches magnetically."


def test_a_version_name_is_no_deployment_name(kb):
    from openqna.records import InvalidArgument

    with pytest.raises(InvalidArgument, match="may not start with '~'"):
        kb.deploy("kb1", "~v1")
    kb.deploy("kb1", "production")
    assert [d.name for d in kb.list_deployments("kb1")] == ["production"]  # the version's copy is not listed
    with pytest.raises(NotFound):
        kb.list_qnas("kb1", "~v1")


def test_versions_move_on_every_write(kb):
    v1 = kb.version("kb1")
    kb.set_synonyms("kb1", [["a", "b"]])
    v2 = kb.version("kb1")
    kb.delete_qnas("kb1", [2])
    v3 = kb.version("kb1")
    assert v1 < v2 < v3
    kb.delete_qnas("kb1", [2])  # deleting nothing is not a change
    assert kb.version("kb1") == v3


def test_keys(store):
    key = ApiKey("k1", "ci", "query", ["kb1"], "2026-01-01T00:00:00Z")
    assert not store.has_keys()
    store.add_key(key, "hash1")
    assert store.has_keys()
    assert store.find_key("hash1") == key
    assert store.find_key("other") is None
    assert store.list_keys() == [key]
    assert store.delete_key("k1") and not store.delete_key("k1")
    assert store.list_keys() == [] and not store.has_keys()


def test_delete_project_removes_everything(kb, indexes):
    kb.deploy("kb1", "production")
    kb.delete_project("kb1")
    kb.create_project(Project("kb1"))
    assert kb.count_qnas("kb1") == 0
    assert kb.list_deployments("kb1") == []
    assert indexes.get("kb1").n == 0


def test_sources(kb):
    from openqna.store import Source

    kb.put_source("kb1", Source("faq.tsv", "FAQ", "http://x/faq.tsv", "url", content_hash="h1"))
    kb.put_source("kb1", Source("faq.tsv", "FAQ v2", "http://x/faq.tsv", "url", content_hash="h2"))
    [src] = kb.list_sources("kb1")
    assert (src.display_name, src.content_hash) == ("FAQ v2", "h2") and src.last_updated
    assert src.file_records is None  # none recorded yet: no record counts as edited (kb/source_edits.py)
    src.file_records = {12: "d" * 32, 3: "e" * 32}
    kb.put_source("kb1", src)
    assert kb.list_sources("kb1")[0].file_records == {3: "e" * 32, 12: "d" * 32}
    assert kb.delete_source("kb1", "faq.tsv") and not kb.delete_source("kb1", "faq.tsv")
    assert kb.list_sources("kb1") == []


def test_feedback_is_counted_per_question(kb):
    kb.add_feedback("kb1", [(1, "battery dies fast", "u1"), (1, "battery dies fast", "u2"), (1, "charger?", "u1"),
                            (2, "stylus", "u3")])
    assert kb.list_feedback("kb1") == {1: [("battery dies fast", 2), ("charger?", 1)], 2: [("stylus", 1)]}
    assert kb.delete_feedback("kb1", 1, "charger?") == 1
    assert kb.delete_feedback("kb1", 2) == 1
    assert kb.list_feedback("kb1") == {1: [("battery dies fast", 2)]}


def test_the_query_log_keeps_questions_by_time_and_forgets_old_ones(kb):
    from openqna.store import LoggedQuery

    old = LoggedQuery("2026-01-01T10:00:00Z", "production", "where is my order", "h1", -1, 0.0)
    new = [LoggedQuery("2026-03-01T09:00:00Z", "production", "battery dies fast", "h2", 1, 0.4),
           LoggedQuery("2026-03-02T09:00:00Z", "staging", "battery dies fast", "h1", 1, 0.91)]
    kb.log_queries("kb1", [old, *new])
    assert kb.list_queries("kb1", "2026-01-01T00:00:00Z") == [old, *new]
    assert kb.list_queries("kb1", "2026-02-01T00:00:00Z") == new
    assert kb.list_queries("kb1", "2026-01-01T00:00:00Z", newest=2) == new  # the newest, still oldest first
    assert kb.count_queries("kb1", "2026-01-01T00:00:00Z") == 3 and kb.count_queries("kb1", "2026-03-02") == 1
    assert kb.queried_questions("kb1") == {"where is my order", "battery dies fast"}
    summary = kb.summarize_queries("kb1", "2026-01-01T00:00:00Z", 0.5)
    assert summary.users == 2 and summary.daily == {"2026-01-01": (1, 1), "2026-03-01": (1, 0), "2026-03-02": (1, 0)}
    by_question = {g.question: g for g in summary.groups}
    assert len(summary.groups) == 2 and by_question["where is my order"].low == 0  # a default answer is not low
    battery = by_question["battery dies fast"]
    assert (battery.qna_id, battery.count, battery.first, battery.last, battery.low) \
        == (1, 2, "2026-03-01T09:00:00Z", "2026-03-02T09:00:00Z", 1)
    assert battery.low_sum == pytest.approx(0.4)
    assert kb.summarize_queries("kb1", "2026-03-02", 0.5).users == 1
    assert kb.delete_queries("kb1", "2026-02-01T00:00:00Z") == 1
    assert kb.list_queries("kb1", "2000-01-01T00:00:00Z") == new
    assert kb.delete_queries("kb1") == 2 and kb.list_queries("kb1", "2000-01-01T00:00:00Z") == []


def test_jobs_persist(store):
    from openqna.store import Job

    job = Job("j1", "export", "kb1", params={"format": "tsv"}, owner="host:1", expires="2030-01-01T00:00:00Z")
    store.put_job(job)
    assert [j.id for j in store.unfinished_jobs()] == ["j1"]
    job.status, job.result, job.result_name = "succeeded", b"\x00bytes", "kb1.tsv"
    store.put_job(job)
    got = store.get_job("j1")
    assert (got.status, got.result, got.result_name, got.params) == ("succeeded", b"\x00bytes", "kb1.tsv",
                                                                     {"format": "tsv"})
    assert got.created and got.updated >= got.created
    assert store.unfinished_jobs() == [] and store.get_job("nope") is None


def test_finished_jobs_are_deleted_once_expired(store):
    from openqna.store import Job

    for jid, status, expires in (("old-done", "succeeded", "2020-01-01T00:00:00Z"),
                                 ("old-failed", "failed", "2020-01-01T00:00:00Z"),
                                 ("old-running", "running", "2020-01-01T00:00:00Z"),
                                 ("old-queued", "notStarted", "2020-01-01T00:00:00Z"),
                                 ("new-done", "succeeded", "2030-01-01T00:00:00Z"),
                                 ("no-expiry", "succeeded", "")):
        store.put_job(Job(jid, "export", "kb1", status, expires=expires, result=b"file"))
    assert store.delete_finished_jobs("2026-01-01T00:00:00Z") == 2
    assert store.get_job("old-done") is None and store.get_job("old-failed") is None
    assert all(store.get_job(j) is not None for j in ("old-running", "old-queued", "new-done", "no-expiry"))
    assert store.delete_finished_jobs("2026-01-01T00:00:00Z") == 0


def _queue(store, *kinds: str) -> list[str]:
    from openqna.store import Job

    ids = [f"job-{i}" for i in range(len(kinds))]
    for jid, kind in zip(ids, kinds):
        store.put_job(Job(jid, kind, "kb1", params={"n": jid}))
    return ids


def test_claim_takes_the_oldest_job_of_the_kinds_asked(store):
    a, b, c = _queue(store, "import", "deploy", "import")
    first = store.claim_job("host:1", ["import", "export"], 30)
    assert (first.id, first.status, first.owner, first.params) == (a, "running", "host:1", {"n": a})
    assert first.lease_until is not None and store.get_job(a).lease_until == pytest.approx(first.lease_until)
    assert store.get_job(a).status == "running" and store.get_job(a).owner == "host:1"
    assert store.claim_job("host:2", ["import"], 30).id == c  # queue order, not id order or kind
    assert store.claim_job("host:2", ["import"], 30) is None  # a running job is never claimed twice
    assert store.claim_job("host:2", [], 30) is None  # a worker without handlers claims nothing
    assert store.claim_job("host:2", ["deploy"], 30).id == b
    assert store.claim_job("host:2", ["deploy", "import"], 30) is None
    assert [j.id for j in store.unfinished_jobs()] == [a, b, c]


def test_projects_take_turns_in_the_queue(store):
    """A project that queued many jobs does not hold the others' behind all of them: each claim takes the oldest job
    of the project with the fewest unfinished jobs before it (its running ones counted), and a project's own jobs
    still start in the order they came."""
    from openqna.store import Job

    for jid, project, kind in [("a1", "a", "import"), ("a2", "a", "import"), ("a3", "a", "import"),
                               ("a4", "a", "import"), ("b1", "b", "import"), ("t1", "b", "train"),
                               ("b2", "b", "import"), ("c1", "c", "import")]:
        store.put_job(Job(jid, kind, project))
    claimed = [store.claim_job("host:1", ["import"], 30).id]  # a1 runs: a2 is a's second, after b1 and c1
    store.put_job(Job("d1", "import", "d"))  # a newcomer waits only a turn, not for a's whole queue
    while (job := store.claim_job("host:1", ["import"], 30)) is not None:
        claimed.append(job.id)
    assert claimed == ["a1", "b1", "c1", "d1", "a2", "b2", "a3", "a4"]
    assert store.claim_job("host:1", ["train"], 30).id == "t1"  # another lane's jobs take no turn of these


def test_projects_take_turns_when_each_job_ends_before_the_next_is_claimed(store):
    """A worker that finishes each job before it claims the next (the usual case: one worker a lane) still lets the
    projects take turns: of the jobs at the lowest turn, the project that has had fewest claimed goes first, so b's
    one edit waits one of a's jobs, not all of them."""
    from openqna.store import Job

    for jid, project in [("a1", "a"), ("a2", "a"), ("a3", "a"), ("a4", "a"), ("b1", "b"), ("b2", "b"), ("c1", "c")]:
        store.put_job(Job(jid, "qnas", project))
    order = []
    while (job := store.claim_job("host:1", ["qnas"], 30)) is not None:
        order.append(job.id)
        job.status = "succeeded"
        assert store.finish_job(job)
    assert order == ["a1", "b1", "c1", "a2", "b2", "a3", "a4"]


def test_a_job_waits_for_its_projects_earlier_jobs_of_the_kinds_it_keeps_order_with(store):
    """Imports run on a worker of their own, but keep each project's order with the shared worker's kinds: an edit
    queued after an import to its project waits for the import to end (not only to start), and an import queued after
    an edit waits for the edit, while other projects' jobs of either worker go on."""
    from openqna.store import Job

    bulk, shared = ["import", "upload"], ["qnas", "deploy"]
    for jid, project, kind in [("imp-a", "a", "import"), ("edit-a", "a", "qnas"), ("edit-b", "b", "qnas"),
                               ("deploy-b", "b", "deploy"), ("up-b", "b", "upload"), ("train-a", "a", "train")]:
        store.put_job(Job(jid, kind, project))
    imp = store.claim_job("bulk", bulk, 30, after=shared)
    assert imp.id == "imp-a"
    assert store.claim_job("shared", shared, 30, after=bulk).id == "edit-b"  # a's edit waits for a's import
    assert store.claim_job("bulk", bulk, 30, after=shared) is None  # b's upload waits for b's edit and deploy
    finished = store.get_job("edit-b")
    finished.status = "succeeded"
    assert store.finish_job(finished)
    assert store.claim_job("shared", shared, 30, after=bulk).id == "deploy-b"
    assert store.claim_job("shared", shared, 30, after=bulk) is None  # a's import is still running
    assert store.claim_job("train", ["train"], 30).id == "train-a"  # a kind no order is asked of runs beside it
    imp.status = "succeeded"
    assert store.finish_job(imp)
    assert store.claim_job("shared", shared, 30, after=bulk).id == "edit-a"
    assert store.claim_job("shared", shared, 30) is None  # without ``after``: as before, nothing else queued
    assert store.claim_job("bulk", bulk, 30, after=shared) is None  # b's deploy is running
    deploy = store.get_job("deploy-b")
    deploy.status = "failed"  # a failed job is as finished as a succeeded one
    assert store.finish_job(deploy)
    assert store.claim_job("bulk", bulk, 30, after=shared).id == "up-b"


def test_only_the_owner_renews_and_finishes_a_job(store):
    [a] = _queue(store, "export")
    job = store.claim_job("host:1", ["export"], 30)
    assert store.renew_job(a, "host:1", 30) and not store.renew_job(a, "host:2", 30)
    assert store.fail_expired_jobs([{"code": "x", "message": "lost"}]) == []  # the lease holds
    thief = store.get_job(a)
    thief.owner, thief.status = "host:2", "succeeded"
    assert not store.finish_job(thief) and store.get_job(a).status == "running"
    job.status, job.result, job.result_name = "succeeded", b"\x00bytes", "kb1.tsv"
    assert store.finish_job(job)
    got = store.get_job(a)
    assert (got.status, got.owner, got.result, got.lease_until) == ("succeeded", "host:1", b"\x00bytes", None)
    assert not store.finish_job(job) and not store.renew_job(a, "host:1", 30)  # finished is final


def test_a_job_whose_lease_ran_out_fails_once(store):
    from openqna.store import Job

    lost, held = _queue(store, "import", "import")
    job = store.claim_job("host:1", ["import"], -1)  # a lease already over: its worker died
    store.claim_job("host:2", ["import"], 30)
    store.put_job(Job("no-lease", "deploy", "kb1", "running", owner="host:3"))  # written running, never leased
    errors = [{"code": "InternalServerError", "message": "worker died"}]
    assert sorted(store.fail_expired_jobs(errors)) == sorted([lost, "no-lease"])
    got = store.get_job(lost)
    assert (got.status, got.errors, got.lease_until) == ("failed", errors, None)
    assert store.get_job(held).status == "running"
    assert store.fail_expired_jobs(errors) == []
    job.status = "succeeded"  # the worker was only slow: too late, the job stays failed
    assert not store.finish_job(job) and not store.renew_job(lost, "host:1", 30)
    assert store.get_job(lost).status == "failed"


def test_a_jobs_write_commits_only_while_its_lease_holds(store):
    """A handler's write (``RUNNING_JOB`` set) commits only while the job is its worker's and the lease has not run
    out, and extends the lease; a job another worker failed meanwhile wrote its changes minutes later."""
    from openqna.store.base import RUNNING_JOB, JobLease, LeaseLost

    store.create_project(Project("leased"))
    live, failed, late = _queue(store, "import", "import", "import")
    store.claim_job("host:1", ["import"], 30)
    store.claim_job("host:1", ["import"], -1)  # its lease ran out while its process was stopped ...
    assert store.fail_expired_jobs([{"code": "InternalServerError", "message": "lost"}]) == [failed]  # ... failed
    store.claim_job("host:1", ["import"], -1)  # ran out, and no worker has failed it yet
    for job_id, written in ((live, True), (failed, False), (late, False)):
        token = RUNNING_JOB.set(JobLease(job_id, "host:1", 30))
        try:
            record = item([f"q {job_id}"], f"a {job_id}", vectors=[vec(1, 0)], answer_vector=vec(0, 1))
            if written:
                store.put_qnas("leased", [record])
            else:
                with pytest.raises(LeaseLost):
                    store.put_qnas("leased", [record])
        finally:
            RUNNING_JOB.reset(token)
    assert [q.answer for q in store.list_qnas("leased")] == [f"a {live}"]
    assert store.get_job(live).lease_until > time.time() + 20  # extended by the write
    assert store.get_job(late).status == "running"  # refused, not failed: its runner fails it


def _claim_all(opener, name: str, start, out) -> None:
    """One worker process: open the store, wait for the others, claim until the queue is empty."""
    store, got = opener(), []
    start.wait()
    while (job := store.claim_job(name, ["import"], 30)) is not None:
        got.append(job.id)
    out.put((name, got))


def test_racing_workers_claim_each_job_exactly_once(store, reopen):
    """Worker processes race for one queue: every job is claimed by exactly one of them."""
    import multiprocessing

    ids = _queue(store, *["import"] * 300)
    ctx = multiprocessing.get_context("spawn")  # fresh interpreters, as separate `openqna serve` processes are
    start, out = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=_claim_all, args=(reopen, f"w{i}", start, out)) for i in range(4)]
    for p in procs:
        p.start()
    claimed = dict(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    every = [jid for got in claimed.values() for jid in got]
    assert sorted(every) == sorted(ids)  # each job once: none lost, none twice
    for name, got in claimed.items():
        assert all(store.get_job(jid).owner == name for jid in got)
    assert store.claim_job("late", ["import"], 30) is None


def _submit_alone(opener, name: str, project: str, start, out) -> None:
    """One server process: open the store, wait for the others, submit a train job of ``project`` unless one is."""
    from openqna.store import Job

    store = opener()
    start.wait()
    out.put((name, store.put_job_alone(Job(name, "train", project, owner=""))))


def test_one_unfinished_job_of_a_kind_per_project_whoever_submits_at_once(store, reopen):
    """:train's "already training" 409 looked at the queue, then submitted: 8 requests at once started 4 trains on one
    SQLite server, and two PostgreSQL servers ran two of one project at once.  The look and the insert are one step."""
    import multiprocessing

    from openqna.store import Job

    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=_submit_alone, args=(reopen, f"t{i}", ["kb1", "KB1"][i % 2], start, out))
             for i in range(4)]
    for p in procs:
        p.start()
    answers = dict(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    (inserted,) = [name for name, earlier in answers.items() if earlier is None]
    assert {earlier.id for earlier in answers.values() if earlier is not None} == {inserted}
    assert [j.id for j in store.unfinished_jobs()] == [inserted]
    # another kind, or another project, is not held up; a finished job holds up nothing
    assert store.put_job_alone(Job("export", "export", "kb1")) is None
    assert store.put_job_alone(Job("other", "train", "kb2")) is None
    done = store.get_job(inserted)
    done.status = "succeeded"
    store.put_job(done)
    assert store.put_job_alone(Job("next", "train", "kb1")) is None


def test_settings_compare_and_set(store):
    store.create_project(Project("cas", settings={"n": 1}))
    version = store.version("cas")
    assert not store.update_settings("cas", {"n": 0}, {"n": 2})  # another writer got there first
    assert store.get_project("cas").settings == {"n": 1} and store.version("cas") == version
    assert store.update_settings("cas", {"n": 1}, {"n": 2, "more": [1, "two"]})
    assert store.get_project("cas").settings == {"n": 2, "more": [1, "two"]} and store.version("cas") > version
    with pytest.raises(NotFound):
        store.update_settings("nope", {}, {})


def _bump_counters(opener, name: str, store_id: str, rounds: int, start, out) -> None:
    """One server process changing a vector store's state ``rounds`` times."""
    from openqna.kb.jobs import JobRunner
    from openqna.kb.service import Service
    from openqna.kinds.vector_stores import VectorStores
    from openqna.models.embedder import HashEmbedder

    store = opener()
    core = VectorStores(Service(store, HashEmbedder()), JobRunner(store, {}))

    def change(vs):
        counters = vs["metadata"]
        counters[name] = str(int(counters.get(name, "0")) + 1)
        counters["total"] = str(int(counters.get("total", "0")) + 1)

    start.wait()
    for _ in range(rounds):
        core._update(store_id, change)
    out.put(name)


def test_vector_store_state_changes_are_never_lost_across_processes(store, reopen):
    """Processes read-modify-write one vector store's state at once: every change lands (compare-and-set)."""
    import multiprocessing

    from openqna.kb.jobs import JobRunner
    from openqna.kb.service import Service
    from openqna.kinds.vector_stores import VectorStores
    from openqna.models.embedder import HashEmbedder

    core = VectorStores(Service(store, HashEmbedder()), JobRunner(store, {}))
    vs = core.create(name="shared")
    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Barrier(3), ctx.Queue()
    procs = [ctx.Process(target=_bump_counters, args=(reopen, f"w{i}", vs.id, 40, start, out)) for i in range(3)]
    for p in procs:
        p.start()
    assert sorted(out.get(timeout=120) for _ in procs) == ["w0", "w1", "w2"]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    assert core.get(vs.id).metadata == {"w0": "40", "w1": "40", "w2": "40", "total": "120"}


def test_records_carry_their_update_time(kb):
    assert kb.get_qnas("kb1", [1])[1].last_updated.endswith("Z")


def test_files(store):
    from openqna.store import StoredFile

    store.put_file(StoredFile("file-a", "a.jsonl", "answers", 3, 100, data=b"abc", project="file-a"))
    store.put_file(StoredFile("file-b", "b.jsonl", "search", 4, 200, data=b"abcd", scope=["alpha", "beta"],
                              expires_at=3800))
    assert store.get_file("file-a").expires_at is None and store.get_file("file-b").expires_at == 3800
    assert store.get_file("file-a").data == b"" and store.get_file("file-a", with_data=True).data == b"abc"
    assert store.get_file("file-a").scope is None and store.get_file("file-b").scope == ["alpha", "beta"]
    assert [f.scope for f in store.list_files()] == [["alpha", "beta"], None]
    assert [f.id for f in store.list_files()] == ["file-b", "file-a"]
    assert [f.id for f in store.list_files("answers")] == ["file-a"]
    assert store.delete_file("file-a") and not store.delete_file("file-a") and store.get_file("file-a") is None


def test_replace_qnas_applies_an_import_whole_or_not_at_all(kb):
    """An import's upserts, deletions and synonyms are one transaction: no half-applied import is ever visible."""
    kb.set_synonyms("kb1", [["pen", "stylus"]])
    new = item(["Where is the charger?"], "In the box.", vectors=[vec(0, 0, 0, 1)], answer_vector=vec(0, 0, 0, 1))
    changed = item(["Where is the pen?"], "Clipped to the side.", id=2, vectors=[vec(0, 1, 0, 0)],
                   answer_vector=vec(0, 1, 0, 0))
    broken = item(["broken"], "x", id=3, vectors=[vec(1, 0, 0, 0)], answer_vector=vec(1, 0, 0, 0))
    broken.units[0] = Unit("q", 0, ["broken"], "not a vector")  # type: ignore[arg-type]
    with pytest.raises((ValueError, TypeError)):
        kb.replace_qnas("kb1", [changed, broken], [4], [["charger", "adapter"]])
    assert kb.get_qnas("kb1", [2])[2].answer == "The pen attaches magnetically."
    assert kb.count_qnas("kb1") == 4 and kb.get_synonyms("kb1") == [["pen", "stylus"]]

    assert kb.replace_qnas("kb1", [changed, new], [3, 4], [["charger", "adapter"]]) == [2, 5]
    assert sorted(q.id for q in kb.list_qnas("kb1")) == [1, 2, 5]
    assert kb.get_qnas("kb1", [2])[2].answer == "Clipped to the side."
    assert kb.get_synonyms("kb1") == [["charger", "adapter"]]
    assert kb.replace_qnas("kb1", [], [], None) == [] and kb.get_synonyms("kb1") == [["charger", "adapter"]]


def test_test_sets_and_runs_round_trip(kb):
    from openqna.store.base import TestRun, TestSet

    items = [{"question": "Where is the pen?", "expected_qna_id": 2, "expected_answer": None, "metadata": {}},
             {"question": "Café au lait?", "expected_qna_id": None, "expected_answer": "Yes,  we do",
              "metadata": {"topic": "drinks"}},
             {"question": "Capital of Peru?", "expected_qna_id": None, "expected_answer": None, "metadata": {}}]
    first = kb.put_test_set("kb1", TestSet("smoke", items))
    assert first.created and first.modified == first.created
    again = kb.put_test_set("kb1", TestSet("smoke", items[:2]))
    assert again.created == first.created
    kb.put_test_set("kb1", TestSet("Another set", items[2:]))
    assert [(s.name, len(s.items)) for s in kb.list_test_sets("kb1")] == [("Another set", 1), ("smoke", 2)]
    assert kb.get_test_set("kb1", "smoke").items == items[:2]
    with pytest.raises(NotFound, match="Test set 'nope'"):
        kb.get_test_set("kb1", "nope")
    with pytest.raises(ProjectNotFound):
        kb.list_test_sets("missing")

    results = [{"question": "Where is the pen?", "expected": 2, "got": 3, "confidence": 0.61, "right": False}]
    one = kb.add_test_run("kb1", TestRun(0, "smoke", "test", "2026-01-01T00:00:00Z", 0.5, {"questions": 1}, results))
    two = kb.add_test_run("kb1", TestRun(0, "Another set", "production", "2026-01-02T00:00:00Z", 0.7,
                                         {"questions": 1, "top1": None}, []))
    assert (one.id, two.id) == (1, 2)
    listed = kb.list_test_runs("kb1")
    assert [(r.id, r.test_set, r.deployment, r.threshold, r.summary, r.results) for r in listed] == [
        (2, "Another set", "production", 0.7, {"questions": 1, "top1": None}, []),
        (1, "smoke", "test", 0.5, {"questions": 1}, [])]
    assert [r.id for r in kb.list_test_runs("kb1", "smoke")] == [1]
    got = kb.get_test_run("kb1", 1)
    assert got.results == results and got.created == "2026-01-01T00:00:00Z"
    with pytest.raises(NotFound, match="Test run 9"):
        kb.get_test_run("kb1", 9)

    assert kb.delete_test_set("kb1", "smoke") and not kb.delete_test_set("kb1", "smoke")
    assert [s.name for s in kb.list_test_sets("kb1")] == ["Another set"]
    assert [r.id for r in kb.list_test_runs("kb1")] == [2, 1]  # a run outlives its set: the history stays
    kb.delete_project("kb1")
    kb.create_project(Project("kb1"))
    assert kb.list_test_sets("kb1") == [] and kb.list_test_runs("kb1") == []


def test_source_refresh_round_trip_and_claim(kb, reopen):
    from openqna.store import Source
    from openqna.store.base import SourceRefresh

    kb.put_source("kb1", Source("https://example.com/faq.md", "FAQ", "https://example.com/faq.md"))
    assert kb.list_source_refreshes("kb1") == {}
    state = SourceRefresh("https://example.com/faq.md", 3600, "2026-01-01T01:00:00Z", "2026-01-01T00:00:00Z",
                          "2026-01-01T00:00:00Z", '"abc"', "Thu, 01 Jan 2026 00:00:00 GMT",
                          {"status": "updated", "added": 1, "updated": 0, "deleted": 2, "addedIds": [7],
                           "updatedIds": [], "deletedIds": [3, 4], "note": "café"})
    kb.put_source_refresh("kb1", state)
    assert kb.list_source_refreshes("kb1") == {state.source: state}
    assert kb.due_source_refreshes("2026-01-01T00:59:59Z") == []
    assert kb.due_source_refreshes("2026-01-01T01:00:00Z") == [("kb1", state)]
    # two processes claim the same due check: exactly one gets it
    other = reopen()
    try:
        claims = [kb.claim_source_refresh("kb1", state.source, state.next_due, "2026-01-01T02:00:00Z"),
                  other.claim_source_refresh("kb1", state.source, state.next_due, "2026-01-01T02:00:00Z")]
    finally:
        other.close()
    assert claims == [True, False]
    assert kb.due_source_refreshes("2026-01-01T01:30:00Z") == []
    off = SourceRefresh(state.source, 0, "", "2026-01-01T00:00:00Z", "", "", "", {"status": "unchanged"})
    kb.put_source_refresh("kb1", off)
    assert kb.due_source_refreshes("2099-01-01T00:00:00Z") == []
    assert kb.list_source_refreshes("kb1")[state.source].outcome == {"status": "unchanged"}
    assert kb.delete_source("kb1", state.source)
    assert kb.list_source_refreshes("kb1") == {}


def test_a_trained_model_is_deployed_kept_with_its_version_and_rolled_back(kb, reopen):
    """The live state's trained model moves the live version; a deploy copies it, a version keeps it (its content
    hash changes with the model) and a rollback restores what that version held; deleting the project drops it."""
    live = kb.version("kb1")
    kb.deploy("kb1", "production")
    first = kb.list_versions("kb1")[-1]
    kb.set_trained("kb1", b"model-one", {"kept": True})
    assert kb.version("kb1") > live
    trained = reopen().get_trained("kb1")
    assert trained is not None and trained.data == b"model-one" and trained.meta == {"kept": True}
    assert kb.get_trained("kb1", "production") is None  # nothing changes in production until a deploy
    second = kb.deploy("kb1", "production")
    assert second.version == first.version + 1  # same records, another model: another version
    deployed = kb.get_trained("kb1", "production")
    assert deployed is not None and deployed.data == b"model-one" and deployed.hash == trained.hash
    kb.set_trained("kb1", b"model-two")
    third = kb.deploy("kb1", "production")
    assert reopen().get_trained("kb1", "production").data == b"model-two"
    kb.deploy("kb1", "production", version=second.version)
    assert kb.get_trained("kb1", "production").data == b"model-one"
    kb.deploy("kb1", "production", version=first.version)
    assert kb.get_trained("kb1", "production") is None
    kb.set_trained("kb1", None)
    assert kb.get_trained("kb1") is None and third.version == second.version + 1
    kb.set_trained("kb1", b"model-three")
    kb.delete_project("kb1")
    kb.create_project(Project("kb1", "again"))
    assert kb.get_trained("kb1") is None


def test_a_model_trained_for_a_deleted_project_lands_in_no_project_made_again_under_its_name(kb):
    """A train job reads the project's id at its start and writes its model at the end: the project deleted and made
    again (with one QnA) meanwhile got the deleted project's model, which a deploy then published.  SQLite gave the
    new project the deleted one's id, so the id alone told nothing: ids are never given twice, on either store."""
    pid = kb.current("kb1")[0]
    kb.delete_project("kb1")
    kb.create_project(Project("kb1", "again"))
    assert kb.current("kb1")[0] != pid
    with pytest.raises(ProjectNotFound):
        kb.set_trained("kb1", b"the deleted project's model", {"kept": True}, project_id=pid)
    assert kb.get_trained("kb1") is None
    kb.set_trained("kb1", b"its own model", project_id=kb.current("kb1")[0])
    assert kb.get_trained("kb1").data == b"its own model"


def test_accepted_questions_round_trip(kb):
    from openqna.store.base import AcceptedQuestion

    assert kb.list_accepted("kb1") == []
    kb.add_accepted("kb1", [AcceptedQuestion(2, "Where's my pen?", "suggestion"),
                            AcceptedQuestion(1, "Café au lait?", "log", "2026-01-01T00:00:00Z")])
    got = kb.list_accepted("kb1")
    assert [(a.qna_id, a.question, a.via) for a in got] == [(1, "Café au lait?", "log"),
                                                           (2, "Where's my pen?", "suggestion")]
    assert got[0].accepted == "2026-01-01T00:00:00Z" and got[1].accepted > got[0].accepted
    with pytest.raises(ProjectNotFound):
        kb.list_accepted("missing")
    kb.delete_project("kb1")
    kb.create_project(Project("kb1"))
    assert kb.list_accepted("kb1") == []


# what a vector store with two files was at schema 11: its files' states in its settings
SCHEMA_11_VECTOR_STORE = {"defaultAnswer": "x", "openai_vector_store": {
    "id": "vs_old", "name": "old", "seq": 1, "batches": {"vsfb_1": {"id": "vsfb_1", "files": ["file-b"]}},
    "files": {"file-a": {"id": "file-a", "seq": 20, "status": "completed", "attributes": {"n": 1}},
              "file-b": {"id": "file-b", "seq": 10, "status": "failed", "attributes": None}}}}


def test_schema_11_vector_stores_move_their_files_to_rows(store, reopen):
    """A schema-11 database opens at the current schema with each vector store's files moved from its settings to
    rows of their own (nothing else of the settings changed, nor the project's modified time).  Both engines take
    the same SQL to go back to schema 11, sent through the store's own transaction."""
    from openqna.store.base import AttachedFile

    store.create_project(Project("vs_old", settings=SCHEMA_11_VECTOR_STORE))
    store.create_project(Project("plain"))
    modified = store.get_project("vs_old").modified
    version_sql = "SELECT value FROM meta WHERE key='schema_version'"
    with store._reading() as db:
        current = db.execute(version_sql).fetchone()[0]
    with store._tx() as db:  # back to schema 11
        db.execute("DROP TABLE vector_store_files")
        db.execute("UPDATE meta SET value='11' WHERE key='schema_version'")
    store.close()
    new = reopen()
    try:
        moved = SCHEMA_11_VECTOR_STORE["openai_vector_store"]["files"]
        assert new.list_attached_files("vs_old") == [AttachedFile("file-b", 10, moved["file-b"]),
                                                     AttachedFile("file-a", 20, moved["file-a"])]
        project = new.get_project("vs_old")
        vs = {k: v for k, v in SCHEMA_11_VECTOR_STORE["openai_vector_store"].items() if k != "files"}
        assert project.settings == {"defaultAnswer": "x", "openai_vector_store": vs} and project.modified == modified
        assert new.list_attached_files("plain") == [] and new.get_project("plain").settings == Project("p").settings
        with new._reading() as db:
            assert db.execute(version_sql).fetchone()[0] == current and int(current) > 11
    finally:
        new.close()


def test_attached_files_are_rows_of_their_own(store, reopen):
    """A vector store's files (``kinds/vector_stores.py``): each one row, read alone or by ids, ordered by ``seq``, and
    changed by a compare-and-set that another process's change makes fail; a project's delete takes them along."""
    from openqna.store.base import AttachedFile

    store.create_project(Project("vs_1"))
    store.create_project(Project("vs_2"))
    a = AttachedFile("file-a", 20, {"id": "file-a", "status": "in_progress", "attributes": {"n": 1.5, "s": "é"}})
    b = AttachedFile("file-b", 10, {"id": "file-b", "status": "in_progress", "attributes": None})
    store.put_attached_files("vs_1", [a, b])
    store.put_attached_files("vs_2", [AttachedFile("file-a", 1, {"id": "file-a", "other": True})])
    assert store.list_attached_files("vs_1") == [b, a]  # by seq
    assert store.list_attached_files("vs_1", ["file-a", "file-x"]) == [a]
    assert store.list_attached_files("vs_1", [f"file-{i}" for i in range(1200)] + ["file-b"]) == [b]  # in batches
    assert store.get_attached_file("vs_1", "file-a") == a and store.get_attached_file("vs_1", "File-A") is None
    assert store.get_attached_file("vs_2", "file-a").state == {"id": "file-a", "other": True}
    done = {**a.state, "status": "completed"}
    other = reopen()  # another process
    assert other.swap_attached_file("vs_1", "file-a", a.state, done)
    assert not store.swap_attached_file("vs_1", "file-a", a.state, {**a.state, "status": "cancelled"})  # lost
    assert store.get_attached_file("vs_1", "file-a") == AttachedFile("file-a", 20, done)  # its seq kept
    assert not store.swap_attached_file("vs_1", "file-x", {}, None)  # not there
    assert store.swap_attached_file("vs_1", "file-b", b.state, None)  # removed
    assert store.list_attached_files("vs_1") == [AttachedFile("file-a", 20, done)]
    store.put_attached_files("vs_1", [AttachedFile("file-a", 30, a.state)])  # attached again: replaced
    assert store.list_attached_files("vs_1") == [AttachedFile("file-a", 30, a.state)]
    for read in (lambda: store.list_attached_files("missing"), lambda: store.get_attached_file("missing", "file-a"),
                 lambda: store.put_attached_files("missing", [a]),
                 lambda: store.swap_attached_file("missing", "file-a", a.state, None)):
        with pytest.raises(ProjectNotFound):
            read()
    store.delete_project("vs_1")
    store.create_project(Project("vs_1"))
    assert store.list_attached_files("vs_1") == [] and len(store.list_attached_files("vs_2")) == 1
    other.close()
