"""Save and train (issue 42): the trained model is served, deployed, rolled back and evicted; the train job holds out
questions and keeps only a model that wins on them; the CLI and HTTP routes, over real stores and the real model."""

from __future__ import annotations

import contextlib
import json
import re
import signal
import threading
import time
from dataclasses import replace

import httpx
import numpy as np
import pytest

from conftest import REPO, LiveServer, ServeProcess, wait_for_job
from openqna.auth.keys import create_key
from openqna.evaluation import datasets, faq
from openqna.kb.service import AskRequest
from openqna.kb.train_job import Trainer
from openqna.ranking import adapt, ranker
from openqna.records import QnA
from openqna.store.base import TestSet
from openqna.training.adapter import QueryAdapter
from openqna.training.model import TrainedModel, TrainedModels
from openqna.training.project import MIN_HELD_OUT, loses, wins
from test_cli import run
from test_native_api import wait

DATA = REPO.parent / "shared" / "data"
SHOP = [QnA(["When are you open?"], "From 9 to 5 on weekdays."),
        QnA(["Do you ship abroad?"], "We ship to every country in the EU."),
        QnA(["Can I pay by card?"], "Yes, we take all major cards."),
        QnA(["How do I return an item?"], "Send it back within 30 days.")]
ASKED = "Is there a student discount?"  # near none of them


def steering(service, question: str, target: str) -> TrainedModel:
    """An adapter that reads ``question`` as ``target`` (and leaves questions far from it nearly alone)."""
    q, t = service.embedder.embed([question, target])
    matrix = 4.0 * np.outer(q, t).astype(np.float32)
    return TrainedModel({service.embedder.name: QueryAdapter(matrix, service.embedder.name)})


def top(service, project: str, deployment: str = "test") -> tuple[str, float]:
    answer = service.ask(project, deployment, AskRequest(question=ASKED, top=1))[0]
    return (answer.qna.questions[0] if answer.qna else "", answer.confidence)


def test_a_trained_model_is_served_in_test_then_deployed_and_rolled_back(service):
    service.create_project("shop")
    service.upsert("shop", SHOP)
    service.deploy("shop", "production")
    before = top(service, "shop")
    model = steering(service, ASKED, "When are you open?")
    service.store.set_trained("shop", model.to_bytes(), {})
    assert top(service, "shop")[0] == "When are you open?" != before[0]
    assert top(service, "shop", "production") == before  # production answers as before until a deploy
    service.deploy("shop", "production")
    assert top(service, "shop", "production")[0] == "When are you open?"
    service.deploy("shop", "production", version=1)
    assert top(service, "shop", "production") == before
    # a model for another vector space is not applied to this one
    other = TrainedModel({"another-space": next(iter(model.adapters.values()))})
    service.store.set_trained("shop", other.to_bytes(), {})
    assert top(service, "shop") == before


def test_a_damaged_model_is_logged_and_answered_without(service, caplog):
    service.create_project("shop")
    service.upsert("shop", SHOP)
    before = top(service, "shop")
    service.store.set_trained("shop", b"not a model", {})
    assert top(service, "shop") == before
    assert "cannot be read" in caplog.text


def test_the_search_tool_reads_questions_through_the_trained_model(service):
    service.create_project("shop")
    service.upsert("shop", SHOP)
    assert service.search("shop", ASKED, limit=1)[0].record.questions != ["How do I return an item?"]
    service.store.set_trained("shop", steering(service, ASKED, "How do I return an item?").to_bytes(), {})
    assert service.search("shop", ASKED, limit=1)[0].record.questions == ["How do I return an item?"]


def test_models_are_loaded_on_first_use_and_evicted_past_the_memory_limit():
    matrix = np.zeros((384, 384), np.float32)
    blob = TrainedModel({"s": QueryAdapter(matrix, "s")}).to_bytes()
    loads: list[tuple[str, str]] = []

    def load(project: str, deployment: str) -> bytes | None:
        loads.append((project, deployment))
        return None if project == "untrained" else blob

    cache = TrainedModels(load, lambda: 2 * matrix.nbytes)
    for project in ("a", "b", "a", "untrained", "untrained"):
        cache.get(project, "production", 1)
    assert loads == [("a", "production"), ("b", "production"), ("untrained", "production")]
    assert cache.loaded_bytes == 2 * matrix.nbytes
    cache.get("c", "production", 1)  # a third model: the least recently used (b) goes
    assert cache.loaded_bytes == 2 * matrix.nbytes
    cache.get("a", "production", 1)
    cache.get("b", "production", 1)
    assert loads[-1] == ("b", "production") and ("a", "production") not in loads[4:]
    cache.get("a", "production", 2)  # a new version of a deployment replaces the old one's entry
    assert loads[-1] == ("a", "production")


def test_a_project_without_a_model_never_reads_the_models_memory_limit(service, monkeypatch):
    """With OPENQNA_TRAINED_MAX_MB=0 every question of every project, trained or not, answered 500 (the limit was
    read on each first load, a model or none); `openqna serve` now refuses it at start (test_cli)."""
    service.create_project("shop")
    service.upsert("shop", SHOP)
    service.store.deploy("shop", "production")
    monkeypatch.setenv("OPENQNA_TRAINED_MAX_MB", "0")
    _, key = create_key(service.store, name="bot", role="query")
    with LiveServer(service) as server:
        r = httpx.post(f"{server.url}/language/:query-knowledgebases", headers={"api-key": key}, timeout=30,
                       params={"projectName": "shop", "deploymentName": "production", "api-version": "2023-04-01"},
                       json={"question": "When are you open?", "top": 1})
    assert r.status_code == 200 and r.json()["answers"][0]["answer"] == SHOP[0].answer, r.text


def test_training_holds_out_questions_and_keeps_only_a_model_that_wins(service):
    kb = faq.chitchat_kb(service, DATA, "professional", seed=20240601)
    result = Trainer(service).train(kb.project)
    (space,) = result.spaces
    assert space.held_out_kind == "alternate questions"
    assert space.before.questions == space.after.questions >= 50 and space.examples > 200
    assert space.kept == wins(space.before, space.after) == result.kept
    stored = service.store.get_trained(kb.project)
    assert (stored is not None) == result.kept
    if stored is not None:
        assert stored.meta["spaces"][0]["after"] == result.json()["spaces"][0]["after"]


def test_a_knowledge_base_too_small_to_hold_out_is_not_trained_and_says_why(service):
    service.create_project("shop")
    service.upsert("shop", SHOP)
    result = Trainer(service).train("shop")
    assert not result.kept and service.store.get_trained("shop") is None
    assert "too few QnAs to hold any out" in result.spaces[0].reason


def test_the_train_job_over_http(service):
    _, admin = create_key(service.store, name="admin", role="admin")
    _, reader = create_key(service.store, name="bot", role="query")
    faq.chitchat_kb(service, DATA, "friend", seed=20240601)
    with LiveServer(service) as server:
        url = f"{server.url}/openqna/projects"
        assert httpx.post(f"{url}/chitchat-friend:train", headers={"api-key": reader}).status_code == 403
        missing = httpx.post(f"{url}/nowhere:train", headers={"api-key": admin})
        assert missing.status_code == 404 and "nowhere" in missing.json()["error"]["message"]
        started = httpx.post(f"{url}/chitchat-friend:train", headers={"api-key": admin})
        assert started.status_code == 202
        job = wait(started.headers["Operation-Location"], admin)
        assert job["status"] == "succeeded" and job["kind"] == "train"
        report = job["result"]
        assert report["project"] == "chitchat-friend" and report["spaces"][0]["before"]["questions"] >= 50
        status = httpx.get(f"{url}/chitchat-friend/training", headers={"api-key": admin}).json()
        assert (status["deployments"]["test"] is not None) == report["kept"]
        removed = httpx.delete(f"{url}/chitchat-friend/training", headers={"api-key": admin}).json()
        assert removed == {"project": "chitchat-friend", "removed": report["kept"]}
        assert httpx.get(f"{url}/chitchat-friend/training", headers={"api-key": admin}).json()["deployments"] == \
            {"test": None}


def test_a_train_holds_up_no_edit_and_runs_once_per_project(service, monkeypatch):
    """Every job of a process ran on one worker, so an edit of any project waited for a train (a minute of CPU) to
    end; and two :train calls trained one project twice at once, each writing over the other's model."""
    _, admin = create_key(service.store, name="admin", role="admin")
    faq.chitchat_kb(service, DATA, "friend", seed=20240601)
    service.create_project("other")
    gate, real = threading.Event(), Trainer.train

    def held(self, project):  # the real training, started only once the test has looked at the queue
        assert gate.wait(120)
        return real(self, project)

    monkeypatch.setattr(Trainer, "train", held)
    key = {"api-key": admin}
    with LiveServer(service) as server:
        url = f"{server.url}/openqna/projects"
        started = httpx.post(f"{url}/chitchat-friend:train", headers=key)
        assert started.status_code == 202
        job_id = started.headers["Operation-Location"].rsplit("/", 1)[1]
        again = httpx.post(f"{url}/Chitchat-Friend:train", headers=key)
        assert again.status_code == 409 and job_id in again.json()["error"]["message"], again.text
        edit = httpx.patch(f"{server.url}/language/authoring/query-knowledgebases/projects/other/qnas",
                           params={"api-version": "2023-04-01"}, headers=key,
                           json=[{"op": "add", "value": {"id": 1, "answer": "Nine to five.",
                                                         "questions": ["When are you open?"]}}])
        assert edit.status_code == 202
        assert wait(edit.headers["Operation-Location"], admin)["status"] == "succeeded"
        assert service.store.get_job(job_id).status == "running"  # the edit did not wait for the train
        gate.set()
        assert wait(started.headers["Operation-Location"], admin)["status"] == "succeeded"
        assert httpx.post(f"{url}/chitchat-friend:train", headers=key).status_code == 202  # one at a time, not one ever


def test_a_project_deleted_and_made_again_while_it_trains_gets_no_model(service, monkeypatch):
    """QA deleted bank4 a second into its train and uploaded a one-QnA KB as bank4: the job succeeded, kept, and the
    new project's test state held the deleted project's model.  It fails as it does when the project stays deleted."""
    from openqna.kb import train_job
    from openqna.records import ProjectNotFound

    service.create_project("shop")
    service.upsert("shop", SHOP)
    real = train_job.train_space

    def meanwhile(*args, **kwargs):  # the project is replaced while the job trains, and its adapter would win
        adapter, report = real(*args, **kwargs)
        service.delete_project("shop")
        service.create_project("shop")
        service.upsert("shop", SHOP[:1])
        return steering(service, ASKED, SHOP[0].questions[0]).adapters[service.embedder.name], report

    monkeypatch.setattr(train_job, "train_space", meanwhile)
    with pytest.raises(ProjectNotFound):
        Trainer(service).train("shop")
    assert service.store.get_trained("shop") is None


def test_train_requests_at_once_start_one_job(service, monkeypatch):
    """The 409 looked at the queue, then submitted, in two steps: 8 requests at once through a barrier got
    [202, 409, 202, 409, 409, 202, 409, 202], and 4 trains of one project ran back to back."""
    _, admin = create_key(service.store, name="admin", role="admin")
    service.create_project("shop")
    service.upsert("shop", SHOP)
    gate, real = threading.Event(), Trainer.train
    monkeypatch.setattr(Trainer, "train", lambda self, project: (gate.wait(120), real(self, project))[1])
    begin = service.store._tx

    @contextlib.contextmanager
    def slow_to_begin():  # as a busy server's write is: the race QA met on a real one, met on every run here
        time.sleep(0.1)
        with begin() as db:
            yield db

    monkeypatch.setattr(service.store, "_tx", slow_to_begin)
    barrier, codes = threading.Barrier(8), []
    with LiveServer(service) as server:
        def post() -> None:
            barrier.wait()
            codes.append(httpx.post(f"{server.url}/openqna/projects/shop:train", headers={"api-key": admin},
                                    timeout=60).status_code)

        threads = [threading.Thread(target=post) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        gate.set()
        trains = [j for j in service.store.unfinished_jobs() if j.kind == "train"]
        assert sorted(codes) == [202] + [409] * 7 and len(trains) == 1, codes
        assert wait_for_job(f"{server.url}/openqna/jobs/{trains[0].id}", headers={"api-key": admin})["status"] == \
            "succeeded"


@pytest.mark.parametrize("as_json", [True, False])
def test_the_train_command(tmp_path, as_json):
    tsv = tmp_path / "shop.tsv"
    tsv.write_text("Question\tAnswer\n" + "".join(f"{q.questions[0]}\t{q.answer}\n" for q in SHOP))
    run("import", "shop", str(tsv), data=tmp_path)
    proc = run("train", "shop", *(["--json"] if as_json else []), data=tmp_path)
    if as_json:
        report = json.loads(proc.stdout)
        assert report["kept"] is False and report["spaces"][0]["heldOutKind"] == "none"
    else:  # neither "Trained shop in 0.0 s ... 0 training questions" nor "no model ... better": nothing was trained
        assert proc.stdout.startswith("Did not train shop: there was nothing to judge a model by, so nothing changed.")
        assert re.search(r"\n  space \S+: too few QnAs to hold any out", proc.stdout)
        assert "Trained" not in proc.stdout and "training questions" not in proc.stdout
    forgot = run("train", "shop", "--forget", data=tmp_path)
    assert "shop has no trained model in the test state" in forgot.stdout
    # a server on this store is training it: the command ran all the same, and the last to finish won
    from openqna.store import Job
    from openqna.store.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path)
    store.put_job(Job("training-now", "train", "shop", "running", owner="host:1:0", lease_until=time.time() + 600))
    store.close()
    busy = run("train", "shop", data=tmp_path, check=False)
    assert busy.returncode != 0 and "being trained already (job training-now" in busy.stderr


def bank_faq(service, intents: int = 30, feedback: int = 5) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """An FAQ page of one banking77 utterance per intent (answers written for it), ``feedback`` more users'
    utterances per intent sent as feedback, and a test set of every other banking77 test utterance of those
    intents; returns each intent's QnA id and the test utterances not in the set."""
    data = datasets.banking77(DATA)
    names = sorted(data.train)[:intents]
    service.create_project("bank")
    answers = {f"About {n.replace('_', ' ')}: see the app's help page.": n for n in names}
    service.upsert("bank", [QnA(data.train[n][:1], answer) for answer, n in answers.items()])
    ids = {answers[q.answer]: q.id for q in service.records("bank", "test")}
    service.store.add_feedback("bank", [(ids[n], u, "user") for n in names for u in data.train[n][1:1 + feedback]])
    asked = [(u, n) for u, n in data.test if n in ids]
    service.store.put_test_set("bank", TestSet("users", [
        {"question": u, "expected_qna_id": ids[n], "expected_answer": None, "metadata": {}} for u, n in asked[::2]]))
    return ids, asked[1::2]


def test_a_test_sets_questions_are_not_learnt_from_though_users_sent_them_as_feedback(service):
    """A test set made from the query log (:from-log) holds the users' feedback questions: the job learnt from the
    very questions it was then judged by.  Those are left out of what it learns."""
    data = datasets.banking77(DATA)
    ids, _ = bank_faq(service, feedback=5)
    examples = Trainer(service).train("bank").spaces[0].examples
    sent = [(u, n) for n in ids for u in data.train[n][1:6]]
    service.store.put_test_set("bank", TestSet("from-log", [
        {"question": u, "expected_qna_id": ids[n], "expected_answer": None, "metadata": {}} for u, n in sent[::2]]))
    assert Trainer(service).train("bank").spaces[0].examples == examples - len(sent[::2])


def test_the_job_reads_a_question_as_the_server_does(service):
    """The job embedded its questions as written, the server them with their typos corrected and synonyms expanded:
    its "before" figure was not what a run of the test set gives ("Are all boily fluids infecstious?" 0.24 in the
    job, 0.67 served).  A test set of misspelt questions now gets the same figure from both."""
    import random

    from openqna.evaluation.typo_questions import typo
    from openqna.kb.test_sets import run_test_set

    bank_faq(service, feedback=5)
    [users] = service.store.list_test_sets("bank")
    rng = random.Random(7)
    misspelt = [dict(item, question=typo(item["question"], rng) or item["question"]) for item in users.items]
    service.store.put_test_set("bank", TestSet("users", misspelt))
    run = run_test_set(service, "bank", TestSet("users", misspelt)).summary
    before = Trainer(service).train("bank").spaces[0].test_sets_before
    assert before.top1 == pytest.approx(run["top1"], abs=0.005)


def test_test_set_questions_a_qna_stores_word_for_word_do_not_judge(service):
    """Accepting a suggestion stores the user's question in its QnA, and `openqna test-set-from-log` makes a set of
    them: each answered by an exact match, right at 100% with or without a model, and learnt from as the QnA's own
    question.  Such a set of ten or more judged ahead of the feedback, so no model could ever be kept."""
    ids, _ = bank_faq(service)
    data = datasets.banking77(DATA)
    accepted = {n: data.train[n][20] for n in ids}  # an accepted suggestion: a question added to its QnA
    for n, question in accepted.items():
        [qna] = [q for q in service.records("bank", "test") if q.id == ids[n]]
        service.upsert("bank", [replace(qna, questions=[*qna.questions, question])])
    service.store.put_test_set("bank", TestSet("users", [
        {"question": q, "expected_qna_id": ids[n], "expected_answer": None, "metadata": {}}
        for n, q in accepted.items()]))
    (space,) = Trainer(service).train("bank").spaces
    assert space.test_set_stored == len(accepted) == 30
    assert space.judged_by != "test sets" and space.test_sets_before.questions != 30
    assert space.json()["testSetQuestionsStored"] == 30


def test_the_owners_test_sets_judge_a_one_question_faq_and_its_model_is_served(service):
    ids, unseen = bank_faq(service)
    result = Trainer(service).train("bank")
    (space,) = result.spaces
    assert space.judged_by == "test sets" and space.test_sets_before.questions == 600
    assert space.held_out_kind == "one-question QnAs, found by their answers"
    assert result.kept and space.kept == (wins(space.test_sets_before, space.test_sets_after)
                                          and not loses(space.before, space.after))
    assert space.test_sets_after.top1 > space.test_sets_before.top1

    def top1(deployment: str) -> float:
        answers = [service.ask("bank", deployment, AskRequest(question=u, top=1)) for u, _ in unseen]
        return sum(bool(a) and a[0].qna.id == ids[n] for a, (_, n) in zip(answers, unseen)) / len(unseen)

    service.deploy("bank", "production")
    trained = top1("production")
    service.store.set_trained("bank", None)
    assert top1("test") < trained  # users' questions the job never saw: better answered with the model


def test_a_model_is_kept_only_if_it_wins_on_the_owners_test_set(service):
    kb = faq.chitchat_kb(service, DATA, "professional", seed=20240601)
    items = [{"question": q, "expected_qna_id": gold, "expected_answer": None, "metadata": {}}
             for q, gold in kb.queries[:120]]
    service.store.put_test_set(kb.project, TestSet("users", items))
    result = Trainer(service).train(kb.project)
    (space,) = result.spaces
    assert space.judged_by == "test sets" and space.test_sets_before.questions > 50
    assert space.kept == (wins(space.test_sets_before, space.test_sets_after)
                          and not loses(space.before, space.after)) == result.kept
    assert (service.store.get_trained(kb.project) is not None) == result.kept


def test_the_kb_adaptation_is_fitted_on_questions_mapped_by_the_trained_model(service):
    kb = faq.chitchat_kb(service, DATA, "friend", seed=20240601)
    index = service.indexes.get(kb.project, "test")
    calibration = service.calibration(service.store.get_project(kb.project))
    q = service.embedder.embed(["what's up with you"])[0]
    adapter = QueryAdapter(2.0 * np.outer(q, q).astype(np.float32), service.embedder.name)
    plain = ranker.kb_adaptation(index, calibration)
    mapped = ranker.kb_adaptation(index, calibration, adapter)
    assert plain is not None and mapped is not None and mapped is not plain
    refit = adapt.fit(index, lambda *a: ranker._held_out_logits(calibration, *a), query_map=adapter.apply)
    assert refit is not None and mapped.offset == pytest.approx(refit.offset) != pytest.approx(plain.offset)
    # the server asks with the mapped adaptation once the model is in the state it asks
    service.store.set_trained(kb.project, TrainedModel({adapter.space: adapter}).to_bytes(), {})
    service.ask(kb.project, "test", AskRequest(question="how are you", top=1))
    asked = service.indexes.get(kb.project, "test")
    assert any(key.endswith(adapter.digest) for key in asked.__dict__["_derived"])


def test_the_train_command_reports_the_test_sets_it_was_judged_by(service, tmp_path):
    bank_faq(service)
    proc = run("train", "bank", data=tmp_path / "data")
    assert re.search(r"600 test-set questions: top answer right [\d.]+% -> [\d.]+%, right at threshold", proc.stdout)
    assert "kept: it answers the test sets' questions better" in proc.stdout
    assert "The trained model is in the test state" in proc.stdout


def test_an_faq_pages_held_out_questions_are_asked_of_its_answers_alone(service):
    """A held-out question of a one-question QnA leaves that QnA its answer alone: among the other QnAs as they are
    it would rank below every record with a question; among answers only, the page's questions find their answers."""
    ids, _ = bank_faq(service, feedback=0)
    service.store.delete_test_set("bank", "users")
    result = Trainer(service).train("bank")
    (space,) = result.spaces
    assert space.held_out_kind == "one-question QnAs, found by their answers" and space.judged_by == "held-out questions"
    assert space.before.questions == MIN_HELD_OUT
    # each answer names its intent: 4 of the 10 utterances find theirs among the 30 answers (none did when the
    # held-out QnA was the only one without a question)
    assert space.before.top1 >= 0.3


def test_the_trained_offset_shifts_every_logit_and_leaves_the_order(service):
    """A model's offset is added to the logit of every record a mapped question is ranked against: the order stays,
    each confidence moves by the offset on the logit scale, and an exact match stays 1.0."""
    service.create_project("shop")
    service.upsert("shop", SHOP)
    index = service.indexes.get("shop", "test")
    calibration = service.calibration(service.store.get_project("shop"))
    eligible = np.ones(index.n, dtype=bool)
    identity = np.zeros((index.dim, index.dim), np.float32)

    def ranked(question: str, offset: float) -> list[tuple[int, float]]:
        adapter = QueryAdapter(identity, service.embedder.name, offset)
        found = ranker.rank(index, question, service.embedder.embed([question])[0], eligible, top=4,
                            calibration=calibration, query_map=adapter)
        return [(r.record_id, r.confidence) for r in found]

    plain, lifted = ranked(ASKED, 0.0), ranked(ASKED, 0.5)
    assert [i for i, _ in plain] == [i for i, _ in lifted] and len(plain) == 4
    for (_, c0), (_, c1) in zip(plain, lifted):
        assert np.log(c1 / (1 - c1)) - np.log(c0 / (1 - c0)) == pytest.approx(0.5, abs=1e-4)
    assert ranked("Do you ship abroad?", -2.0)[0][1] == 1.0


def test_a_model_that_ranks_users_questions_better_is_kept_with_the_threshold_meaning_the_same(service, capsys):
    """covid-q (245 FAQ entries, real users' questions), its dev split as the owner's test set: the model puts the right
    entry first more often, and its mapped questions, read without an offset, would answer fewer of them right at the
    threshold, so the job refused it before it had offsets.  With the offset fitted on the test set it is kept, and the
    test split, which the job never sees, gains top-1 and right at the threshold and loses no precision."""
    from openqna.evaluation import faq_regimes, regimes, training

    covid = datasets.covid_q(DATA)
    kb = faq_regimes.real_faq_kb(service, covid, [], seed=20240601, source="none")
    before = regimes.summary([o for o in training._ask_test(service, kb)], 0.5)
    service.store.put_test_set(kb.project, training.dev_set(service, kb))
    result = Trainer(service).train(kb.project)
    (space,) = result.spaces
    assert space.judged_by == "test sets" and result.kept and 0.0 < space.offset <= 0.5
    sets_before, sets_after = space.test_sets_before, space.test_sets_after
    assert sets_after.top1 >= sets_before.top1 + 0.03  # dev: 0.528 -> 0.586
    assert sets_after.right_at_threshold >= sets_before.right_at_threshold
    assert result.json()["spaces"][0]["offset"] == space.offset
    from openqna.cli.train_commands import _print
    _print(result.json())
    printed = capsys.readouterr().out
    assert re.search(r"kept: .*\n    confidence offset \+0\.\d\d \(logit\)", printed)
    # questions whose QnA is left out, as questions the KB cannot answer, are not answered more often
    unanswerable = space.no_answer_before
    assert unanswerable.questions == sets_before.questions and 0.0 < unanswerable.answered < 0.3  # 0.110 -> 0.104
    assert space.no_answer_after.answered <= unanswerable.answered + 0.01
    assert re.search(r"left out: answered anyway at the threshold 1\d\.\d% -> \d+\.\d%", printed)
    after = regimes.summary(training._ask_test(service, kb), 0.5)
    assert after.top1 >= before.top1 + 0.05  # test: 0.509 -> 0.600
    assert after.right_at_t >= before.right_at_t and after.precision >= before.precision  # 0.161 -> 0.200; 78% -> 86%


def test_without_test_sets_the_users_feedback_judges_by_cross_validation(service, capsys):
    """An FAQ page of 30 banking QnAs with ten users' questions each sent as feedback and no test set: each feedback
    question is asked of models trained without its fold, which also choose the adapter's strength; the model kept
    answers users' questions that are in neither the feedback nor the project better (top-1 0.785 -> 0.885)."""
    ids, unseen = bank_faq(service, feedback=10)
    service.store.delete_test_set("bank", "users")

    def top1() -> float:
        answers = [service.ask("bank", "test", AskRequest(question=u, top=1)) for u, _ in unseen]
        return sum(bool(a) and a[0].qna.id == ids[n] for a, (_, n) in zip(answers, unseen)) / len(unseen)

    before = top1()
    result = Trainer(service).train("bank")
    (space,) = result.spaces
    assert space.judged_by == "feedback, cross-validated" and space.test_sets_before.questions == 300
    assert result.kept and space.l2 in (0.1, 0.01)  # users' questions teach more than the shipped penalty lets in
    assert space.feedback_coverage == 1.0 and space.other_qnas_before.questions == 0  # no QnA left to fail
    assert space.test_sets_after.top1 >= space.test_sets_before.top1 + 0.05
    assert top1() >= before + 0.05
    from openqna.cli.train_commands import _print
    _print(result.json())
    assert "300 feedback questions (each asked of a model trained without it)" in capsys.readouterr().out


def test_too_little_feedback_to_judge_by_leaves_the_project_s_own_questions_to_judge(service):
    ids, _ = bank_faq(service, intents=6, feedback=3)  # 18 feedback questions, 6 QnAs: nothing can judge
    service.store.delete_test_set("bank", "users")
    result = Trainer(service).train("bank")
    (space,) = result.spaces
    assert not result.kept and space.judged_by == "" and "20 users' questions sent as feedback" in space.reason


def test_a_model_that_fails_qnas_without_feedback_is_refused_while_some_have_none(service, capsys, monkeypatch):
    """The same page with feedback for half of its QnAs: only the shipped strength is tried, and the model, which
    answers the feedback questions better (top-1 71% -> 79%, cross-validated), answers them worse when it has learnt
    nothing from their QnA's feedback (right at the threshold 47% -> 43% read without an offset, as here), as it would
    questions about the QnAs no user has sent feedback for, so it is refused and the report says why.  (With the
    offset that gives those questions back their 47%, it answers more of the questions whose QnA is left out, and is
    refused for that: ``test_a_model_that_answers_what_the_kb_cannot_is_refused``.)"""
    from openqna.training import project

    monkeypatch.setattr(project, "fit_offset", lambda before, after, threshold: 0.0)
    ids, _ = bank_faq(service, feedback=10)
    service.store.delete_test_set("bank", "users")
    for name in sorted(ids)[::2]:
        service.store.delete_feedback("bank", ids[name])
    result = Trainer(service).train("bank")
    (space,) = result.spaces
    assert space.judged_by == "feedback, cross-validated" and space.feedback_coverage == 0.5 and space.l2 == 1.0
    assert space.other_qnas_before.questions == space.test_sets_before.questions == 150
    assert not result.kept and service.store.get_trained("bank") is None
    assert loses(space.other_qnas_before, space.other_qnas_after)
    assert "worse when it has learnt nothing from their QnA's feedback" in space.reason
    from openqna.cli.train_commands import _print
    _print(result.json())
    assert "each asked of a model that learnt nothing from its QnA's feedback (50.0% of the QnAs have some)" in \
        capsys.readouterr().out


def test_a_model_that_answers_what_the_kb_cannot_is_refused(service, monkeypatch):
    """The judging questions asked with the QnAs that answer them left out, and the test sets' questions that want no
    answer, stand for questions the knowledge base cannot answer: a model that answers more of them at the threshold
    is refused, whatever else it wins (here an identity map read three logits higher, its win granted)."""
    from openqna.training import project

    bank_faq(service)
    strangers = [text for text, _ in datasets.hwu64(DATA).test[:20]]  # the owner's questions that want no answer
    service.store.put_test_set("bank", TestSet("strangers", [
        {"question": q, "expected_qna_id": None, "expected_answer": None, "metadata": {}} for q in strangers]))
    monkeypatch.setattr(project, "fit", lambda examples, units, *a, **k: QueryAdapter(
        np.zeros((units.shape[1], units.shape[1]), np.float32), service.embedder.name))
    monkeypatch.setattr(project, "fit_offset", lambda before, after, threshold: 3.0)
    monkeypatch.setattr(project, "wins", lambda before, after: True)
    result = Trainer(service).train("bank")
    (space,) = result.spaces
    assert space.judged_by == "test sets" and space.offset == 3.0
    assert space.no_answer_before.questions == space.test_sets_before.questions + len(strangers) == 620
    assert space.no_answer_after.answered > space.no_answer_before.answered + 0.1
    assert not result.kept and "answers them more often when the QnAs that answer them are left out" in space.reason


@pytest.mark.multiprocess
def test_a_shutdown_stops_a_train_and_the_next_start_runs_it(tmp_path):
    """SIGTERM during a train waited for it to end (a minute on a large KB, longer than a container's grace period,
    after which a kill left the job to fail when its lease ran out).  The train stops at its next step, writes
    nothing, and its job is queued again for the next start.  The hash embedder stands in for the model here: the
    job's life is under test, and banking77's 10,003 questions embed in no time with it."""
    from openqna.kb.service import Service
    from openqna.models.embedder import get_embedder
    from openqna.store.sqlite import SQLiteStore

    data = datasets.banking77(DATA)
    store = SQLiteStore(tmp_path / "data")
    service = Service(store, get_embedder("hash"))
    service.create_project("bank")
    service.upsert("bank", [QnA(qs, datasets.humanise(label)) for label, qs in data.train.items()])
    store.close()
    env = {"OPENQNA_EMBEDDER": "hash", "OPENQNA_SAMPLE": "0"}
    with ServeProcess(tmp_path / "data", tmp_path / "first.log", env=env) as first:
        started = httpx.post(f"{first.url}/openqna/projects/bank:train")
        assert started.status_code == 202, started.text
        poll = started.headers["Operation-Location"]
        wait_for_job(poll, states=("running",), every=0.02)
        first.proc.send_signal(signal.SIGTERM)
        # by itself, long before the train would have ended (uvicorn exits by the signal it caught, once shut down)
        assert first.proc.wait(30) in (0, -signal.SIGTERM)
    store = SQLiteStore(tmp_path / "data")
    job_id = poll.rsplit("/", 1)[1]
    stopped = store.get_job(job_id)
    assert (stopped.status, stopped.errors, store.get_trained("bank")) == ("notStarted", [], None)
    store.close()
    # one line, named by its logger (the MCP SDK's handler wrapped every line at 80 columns in a log file)
    assert re.search(r"^WARNING: +openqna\.kb\.jobs: job \S+ \(train\) stopped for the shutdown; queued again for the "
                     r"next start$", (tmp_path / "first.log").read_text(), re.M), (tmp_path / "first.log").read_text()
    with ServeProcess(tmp_path / "data", tmp_path / "second.log", env=env) as second:
        done = wait_for_job(f"{second.url}/openqna/jobs/{job_id}", seconds=180)
        assert done["status"] == "succeeded" and done["result"]["project"] == "bank", done


def test_a_model_of_the_space_a_reembed_left_is_marked_not_applied_and_a_retrain_drops_it(service, tmp_path):
    """After `openqna reembed` with another embedder a trained model stayed stored, listed and deployed ("the same
    model as test") but was never applied (adapters are keyed by the space's name): the owner lost the training
    gain and nothing said so.  The command says to retrain, /training marks the model "not applied: retrain" where
    the deployment's vectors are the new embedder's (a deployment made before still holds the old vectors, and a
    server of the old embedder applies it there), and a retrain drops the stale adapter even when it keeps none."""
    service.create_project("shop")
    service.upsert("shop", SHOP)
    service.store.set_trained("shop", steering(service, ASKED, "When are you open?").to_bytes(), {"kept": True})
    service.deploy("shop", "production")
    status = Trainer(service).status("shop")["deployments"]
    assert status["test"]["applied"] and "notApplied" not in status["test"] and status["production"]["applied"]
    proc = run("reembed", "shop", data=tmp_path / "data", env={"OPENQNA_EMBEDDER": "hash",
                                                               "OPENQNA_MULTILINGUAL": "off"})
    assert "its trained model is kept but not applied: trained for embedder" in proc.stdout
    assert "`openqna train shop` with this OPENQNA_EMBEDDER, then deploy" in proc.stdout
    from openqna.kb.service import Service
    from openqna.models.embedder import get_embedder

    other = Service(service.store, get_embedder("hash"))
    status = Trainer(other).status("shop")["deployments"]
    assert not status["test"]["applied"] and status["test"]["notApplied"].startswith("not applied: trained for")
    assert status["test"]["notApplied"].endswith("retrain")
    assert status["production"]["applied"]  # it holds the old vectors: a server of the old embedder applies it
    other.deploy("shop", "production")  # now production holds the new vectors and the stale model with them
    assert not Trainer(other).status("shop")["deployments"]["production"]["applied"]
    assert not Trainer(other).train("shop").kept  # too few QnAs: nothing kept, and the stale adapter is gone
    assert Trainer(other).status("shop")["deployments"]["test"] is None


def test_an_export_says_it_leaves_the_trained_model_test_sets_and_feedback_behind(service, tmp_path):
    """`openqna export` of a trained project silently left its model, test sets and feedback behind, where every
    other thing an export cannot hold is named in a note."""
    service.create_project("shop")
    service.upsert("shop", SHOP)
    bare = run("export", "shop", str(tmp_path / "bare.json"), data=tmp_path / "data")
    assert "no export file holds" not in bare.stderr
    service.deploy("shop", "production")  # without a model
    service.store.set_trained("shop", steering(service, ASKED, "When are you open?").to_bytes(), {"kept": True})
    service.store.put_test_set("shop", TestSet("users", [{"question": ASKED, "expected_qna_id": None,
                                                          "expected_answer": None, "metadata": {}}]))
    service.store.add_feedback("shop", [(service.records("shop", "test")[0].id, "are you open today", "user")])
    trained = run("export", "shop", str(tmp_path / "shop.json"), data=tmp_path / "data")
    assert ("note: no export file holds its trained model (Save and train), its test sets (1), the users' feedback (only "
            "as suggestions, which train nothing until accepted): after importing it elsewhere, run `openqna train` "
            "there again; `openqna backup` keeps them all") in trained.stderr
    production = run("export", "shop", str(tmp_path / "prod.json"), "--deployment", "production",
                     data=tmp_path / "data")
    assert "no export file holds its test sets (1)" in production.stderr  # production holds no model


def test_a_train_reports_the_spaces_it_has_trained_as_progress(service):
    """A train job showed no progress while it ran (33 s of "running" on a Chinese KB): it reports each vector space
    it has trained, as an import reports the texts it has embedded (``kb.progress``, the job's ``progress``)."""
    from openqna.kb.progress import SINK

    service.create_project("shop")
    service.upsert("shop", SHOP)
    reports = []
    token = SINK.set(reports.append)
    try:
        Trainer(service).train("shop")
    finally:
        SINK.reset(token)
    assert [(p.stage, p.done, p.total, p.qnas) for p in reports] == [("training", 0, 1, 4), ("training", 1, 1, 4)]
