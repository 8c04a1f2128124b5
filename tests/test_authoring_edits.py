"""QnA edits and feedback (``Authoring.update_qnas``, ``add_feedback``) read only the records they name.

Issue 43: a write of one QnA read every QnA, hash and feedback row of its project (40 s at 1M QnAs on
PostgreSQL). These tests pin the errors an edit gives and that an edit of one QnA reads no whole table.
"""

from __future__ import annotations

import pytest

from openqna.kb.authoring import Authoring, QnaOp
from openqna.kb.service import Service
from openqna.models.embedder import HashEmbedder
from openqna.records import Conflict, Dialog, InvalidArgument, Prompt, QnA
from openqna.store.sqlite import SQLiteStore


class NarrowReads(SQLiteStore):
    """A store that fails a test, once ``narrow`` is set, on any read of a whole project's records or feedback."""

    narrow = False

    def list_qnas(self, project, deployment="test", offset=0, limit=None, *, kinds=None):
        assert not self.narrow, "list_qnas read every record"
        return super().list_qnas(project, deployment, offset, limit, kinds=kinds)

    def content_hashes(self, project, ids=None):
        assert not self.narrow or ids is not None, "content_hashes read every record's hash"
        return super().content_hashes(project, ids)

    def list_feedback(self, project, ids=None):
        assert not self.narrow or ids is not None, "list_feedback read every QnA's feedback"
        return super().list_feedback(project, ids)


@pytest.fixture
def store(tmp_path):
    store = NarrowReads(tmp_path / "data")
    yield store
    store.close()


@pytest.fixture
def authoring(store):
    service = Service(store, HashEmbedder())
    service.create_project("kb")
    service.upsert("kb", [
        QnA(["How do I charge the battery?"], "Plug it in for two hours.", dialog=Dialog(prompts=[Prompt(0, 2, "Fast")])),
        QnA(["Fast charging"], "Use the 65 W charger.", dialog=Dialog(is_context_only=True)),
        QnA(["Where is the pen?"], "The pen attaches magnetically."),
    ])
    return Authoring(service)


def stored(authoring: Authoring) -> dict[int, QnA]:
    return {q.id: q for q in authoring.store.list_qnas("kb")}


def test_an_edit_of_one_qna_reads_no_whole_table(authoring, store):
    store.add_feedback("kb", [(1, "battery dies", "u1"), (3, "stylus", "u2")])
    store.narrow = True
    authoring.update_qnas("kb", [
        QnaOp("replace", QnA(["How do I charge the battery?", "battery dies"], "Plug it in.", id=1,
                             dialog=Dialog(prompts=[Prompt(0, 3, "Pen")]))),
        QnaOp("add", QnA(["A new question"], "A new answer.")),
        QnaOp("delete", QnA([], "", id=2)),
    ])
    authoring.add_feedback("kb", [(3, "pen lost", "u3")])
    store.narrow = False
    after = stored(authoring)
    assert after.keys() == {1, 3, 4}
    assert after[1].answer == "Plug it in." and [p.qna_id for p in after[1].dialog.prompts] == [3]
    # the edited QnA's feedback was read: the question it added from it is an accepted suggestion
    assert [(a.qna_id, a.question, a.via) for a in store.list_accepted("kb")] == [(1, "battery dies", "suggestion")]
    assert store.list_feedback("kb") == {1: [("battery dies", 1)], 3: [("pen lost", 1), ("stylus", 1)]}


def test_adding_an_existing_id_or_changing_a_missing_one_gives_every_error(authoring):
    before = stored(authoring)
    with pytest.raises(InvalidArgument) as err:
        authoring.update_qnas("kb", [
            QnaOp("add", QnA(["again"], "a", id=1)),
            QnaOp("replace", QnA(["q"], "a", id=99)),
            QnaOp("delete", QnA([], "", id=98)),
            QnaOp("replace", QnA(["q"], "a")),
            QnaOp("delete", QnA([], "", id=10**30)),  # past SQL's integers: names no QnA
            QnaOp("add", QnA(["fine"], "a")),
        ])
    assert err.value.message == (
        "[0] add: QnA 1 already exists; use 'replace'. [1] replace: there is no QnA with id 99. "
        "[2] delete: there is no QnA with id 98. [3] replace: there is no QnA with id None. "
        f"[4] delete: there is no QnA with id {10**30}.")
    assert stored(authoring) == before


def test_operations_apply_in_the_order_given(authoring, store):
    """Each operation applies to the state the ones before it left: every op was checked against the state before
    the change, and all writes made before all deletes, so [delete 1, replace 1] "succeeded" with the replace dropped,
    and [delete 3, add 3] and [add 6000, delete 6000] were refused."""
    store.add_feedback("kb", [(3, "stylus", "u2")])
    before = stored(authoring)
    with pytest.raises(InvalidArgument) as err:
        authoring.update_qnas("kb", [QnaOp("delete", QnA([], "", id=1)),
                                     QnaOp("replace", QnA(["Charging?"], "Two hours.", id=1))])
    assert err.value.message == "[1] replace: there is no QnA with id 1."
    assert stored(authoring) == before
    authoring.update_qnas("kb", [QnaOp("delete", QnA([], "", id=3)),
                                 QnaOp("add", QnA(["Where is the stylus?"], "In its slot.", id=3)),
                                 QnaOp("add", QnA(["Temporary?"], "Yes.", id=6000)),
                                 QnaOp("replace", QnA(["Temporary?"], "Still.", id=6000)),
                                 QnaOp("delete", QnA([], "", id=6000)),
                                 QnaOp("replace", QnA(["Fast charging"], "Use the 100 W charger.", id=2)),
                                 QnaOp("replace", QnA(["Fast charging"], "Use the 65 W charger, or faster.", id=2))])
    after = stored(authoring)
    assert sorted(after) == [1, 2, 3]
    assert (after[3].questions, after[3].answer) == (["Where is the stylus?"], "In its slot.")
    assert after[2].answer == "Use the 65 W charger, or faster."
    assert store.list_feedback("kb") == {}  # the users' questions were the deleted QnA's, not the new one's
    with pytest.raises(InvalidArgument) as err:  # an id added twice is refused, naming the first add
        authoring.update_qnas("kb", [QnaOp("add", QnA(["A?"], "a", id=7)), QnaOp("add", QnA(["B?"], "b", id=7))])
    assert err.value.message == "[1] add: QnA 7 is also added by [0]; every QnA added needs its own id."


def test_an_edit_started_from_an_older_qna_is_a_conflict(authoring):
    when = stored(authoring)[3].last_updated
    authoring.update_qnas("kb", [QnaOp("replace", QnA(["Where is the pen?"], "In the box.", id=3),
                                       if_last_updated=when)])
    with pytest.raises(Conflict, match=r"\[0\] replace: QnA 3 was changed elsewhere at .* \(this edit started from "):
        authoring.update_qnas("kb", [QnaOp("replace", QnA(["Where is the pen?"], "Gone.", id=3),
                                           if_last_updated="2000-01-01T00:00:00Z")])
    assert stored(authoring)[3].answer == "In the box."
    # an add has no earlier version to compare: with or without an id, the precondition is an error, not a crash
    with pytest.raises(InvalidArgument) as err:
        authoring.update_qnas("kb", [QnaOp("add", QnA(["New?"], "Yes."), if_last_updated=when),
                                     QnaOp("add", QnA(["Newer?"], "Yes.", id=77), if_last_updated=when)])
    assert err.value.message == (
        "[0] add: ifLastUpdated is for 'replace' and 'delete'; a QnA being added has no earlier version to compare "
        "it with. [1] add: ifLastUpdated is for 'replace' and 'delete'; a QnA being added has no earlier version "
        "to compare it with.")


def test_two_edits_in_one_second_from_the_same_state_are_a_conflict(authoring):
    """Stamps are to the second: a QnA written twice within one kept its stamp, so the second of two edits started
    from the same state passed the check and silently undid the first (4 times in 5 over HTTP)."""
    authoring.update_qnas("kb", [QnaOp("replace", QnA(["Where is the pen?"], "On the desk.", id=3))])
    when = stored(authoring)[3].last_updated  # read at once, as the console reads a QnA it opens
    authoring.update_qnas("kb", [QnaOp("replace", QnA(["Where is the pen?"], "In the box.", id=3),
                                       if_last_updated=when)])
    assert stored(authoring)[3].last_updated > when
    with pytest.raises(Conflict, match=r"\[0\] replace: QnA 3 was changed elsewhere"):
        authoring.update_qnas("kb", [QnaOp("replace", QnA(["Where is the pen?"], "In the drawer.", id=3),
                                           if_last_updated=when)])
    assert stored(authoring)[3].answer == "In the box."


def test_a_replace_without_questions_keeps_the_stored_ones(authoring):
    authoring.update_qnas("kb", [QnaOp("replace", QnA([], "Magnetically, on the side.", id=3), keep_questions=True)])
    assert stored(authoring)[3].questions == ["Where is the pen?"]


def test_prompts_must_lead_to_a_qna_that_exists_after_the_edit(authoring):
    before = stored(authoring)
    with pytest.raises(InvalidArgument) as err:
        authoring.update_qnas("kb", [QnaOp("add", QnA(["Colours?"], "Black.", dialog=Dialog(prompts=[
            Prompt(0, 3, "Pen"), Prompt(1, 99, "Nowhere")])))])
    assert err.value.message == ("QnA 'Colours?' has follow-up prompts to QnA ids that do not exist: [99]. Add those "
                                 "QnAs first (or in the same request, with their ids), or remove the prompts.")
    with pytest.raises(InvalidArgument, match=r"to QnA ids that do not exist: \[2\]\. Add"):  # deleted in the edit
        authoring.update_qnas("kb", [QnaOp("delete", QnA([], "", id=2)),
                                     QnaOp("replace", QnA(["Where is the pen?"], "Side.", id=3,
                                                          dialog=Dialog(prompts=[Prompt(0, 2, "Fast")])))])
    assert stored(authoring) == before
    # to a QnA stored and not in the edit, and to one added by it
    authoring.update_qnas("kb", [
        QnaOp("replace", QnA(["Where is the pen?"], "Side.", id=3,
                             dialog=Dialog(prompts=[Prompt(0, 2, "Fast"), Prompt(1, 50, "Colours")]))),
        QnaOp("add", QnA(["Colours?"], "Black.", id=50)),
    ])
    assert [p.qna_id for p in stored(authoring)[3].dialog.prompts] == [2, 50]


def test_feedback_on_an_unknown_qna_is_refused(authoring, store):
    with pytest.raises(InvalidArgument) as err:
        authoring.add_feedback("kb", [(1, "battery dies", "u1"), (99, "where?", "u1")])
    assert err.value.message == "records[1].qnaId: there is no QnA with id 99."
    with pytest.raises(InvalidArgument, match=r"records\[0\]\.qnaId: there is no QnA with id 1000000"):
        authoring.add_feedback("kb", [(10**30, "where?", "u1")])
    assert store.list_feedback("kb") == {}
    authoring.add_feedback("kb", [(1, "battery dies", "u1"), (1, "battery dies", "u2")])
    assert store.list_feedback("kb") == {1: [("battery dies", 2)]}


def test_a_replaced_passage_stays_a_passage(authoring):
    """Azure's QnA records carry no kind: a read-modify-write of a passage (GET .../qnas, PATCH replace) made it an
    ordinary QnA, which then answered without includeUnstructuredSources.  And an edit that gave a question twice
    stored it twice."""
    authoring.service.upsert("kb", [QnA(["Power and charging"], "It takes two to four hours to charge.", id=4,
                                        kind="passage")])
    authoring.update_qnas("kb", [
        QnaOp("replace", QnA(["Power and charging"], "It takes two to four hours to charge fully.", id=4)),
        QnaOp("replace", QnA(["Where is the pen?", "pen", " Where is the pen?"], "On the side.", id=3)),
    ])
    after = stored(authoring)
    assert (after[4].kind, after[4].answer) == ("passage", "It takes two to four hours to charge fully.")
    assert (after[3].kind, after[3].answer) == ("qna", "On the side.")
    assert after[3].questions == ["Where is the pen?", "pen"]  # a question given twice is kept once
