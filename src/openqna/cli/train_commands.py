"""``openqna train``: Save and train, a project's own query adapter fitted on what it holds (kb/train_job.py)."""

from __future__ import annotations

import json
from typing import Any

import click

from openqna.cli.common import data_option, fail, open_service
from openqna.records import OpenQnAError


def _pct(share: float) -> str:
    return f"{share:.1%}"


def _print(result: dict[str, Any]) -> None:
    if not result["kept"] and not any(s["before"]["questions"] or s["testSets"]["before"]["questions"]
                                      for s in result["spaces"]):
        # "Trained X in 0.0 s ... 0 training questions" read as if something had been trained
        click.echo(f"Did not train {result['project']}: there was nothing to judge a model by, so nothing changed.")
        for s in result["spaces"]:
            click.echo(f"  space {s['space']}: {s['reason']}")
        return
    click.echo(f"Trained {result['project']} in {result['seconds']:.1f} s (threshold {result['threshold']:.2f}):")
    for s in result["spaces"]:
        click.echo(f"  space {s['space']}: {s['examples']} training questions, held out: {s['heldOutKind']}")
        b, a = s["before"], s["after"]
        if b["questions"]:
            click.echo(f"    {b['questions']} held-out questions: top answer right {_pct(b['top1'])} -> "
                       f"{_pct(a['top1'])}, right at threshold {_pct(b['rightAtThreshold'])} -> "
                       f"{_pct(a['rightAtThreshold'])}")
        sb, sa = s["testSets"]["before"], s["testSets"]["after"]
        if sb["questions"]:
            which = ("feedback questions (each asked of a model trained without it)"
                     if s["judgedBy"] == "feedback, cross-validated" else "test-set questions")
            click.echo(f"    {sb['questions']} {which}: top answer right {_pct(sb['top1'])} -> "
                       f"{_pct(sa['top1'])}, right at threshold {_pct(sb['rightAtThreshold'])} -> "
                       f"{_pct(sa['rightAtThreshold'])}")
        if s.get("testSetQuestionsStored"):
            click.echo(f"    {s['testSetQuestionsStored']} test-set questions not judged by: QnAs store them word for "
                       f"word (accepted suggestions), so they are answered alike with or without a model")
        nb, na = s["withoutTheirAnswer"]["before"], s["withoutTheirAnswer"]["after"]
        if nb["questions"]:
            click.echo(f"    the same questions with the QnAs that answer them left out: answered anyway at the "
                       f"threshold {_pct(nb['answered'])} -> {_pct(na['answered'])}")
        ob, oa = s["feedbackOtherQnas"]["before"], s["feedbackOtherQnas"]["after"]
        if ob["questions"]:
            click.echo(f"    the same questions, each asked of a model that learnt nothing from its QnA's feedback "
                       f"({_pct(s['feedbackCoverage'])} of the QnAs have some): top answer right {_pct(ob['top1'])} -> "
                       f"{_pct(oa['top1'])}, right at threshold {_pct(ob['rightAtThreshold'])} -> "
                       f"{_pct(oa['rightAtThreshold'])}")
        click.echo(f"    {'kept' if s['kept'] else 'not kept'}: {s['reason']}")
        if s["kept"] and s.get("offset"):
            click.echo(f"    confidence offset {s['offset']:+.2f} (logit): the model's questions answered right at the "
                       f"threshold as often as before it")
    if result["kept"]:
        click.echo("The trained model is in the test state; `openqna deploy` puts it in production.")
    else:
        click.echo("Nothing changed: no space's model answered the questions it was judged by better.")


@click.command("train")
@click.argument("project")
@click.option("--forget", is_flag=True, help="Remove the test state's trained model instead of training one.")
@click.option("--json", "as_json", is_flag=True, help="Print the training report as JSON.")
@data_option
def train(project: str, forget: bool, as_json: bool, data_dir: str) -> None:
    """Save and train: fit PROJECT's own model on its questions, answers, headings and feedback.

    Part of the project's own questions is held out, and its test sets' questions are never learnt from: both are
    asked before and after training, through the ranker that serves it, and the model is kept only if it answers
    them better (top answer right and right at the project's threshold, neither worse; the test sets decide when
    they hold ten or more questions).  The model belongs to the test state until `openqna deploy`."""
    from openqna.kb.jobs import AlreadyQueued, JobRunner
    from openqna.kb.train_job import Trainer

    try:
        service = open_service(data_dir)
        trainer = Trainer(service)
        if forget:
            had = trainer.forget(project)
            click.echo(f"removed {project}'s trained model from the test state" if had else
                       f"{project} has no trained model in the test state")
            return
        service.project(project)  # "not found" before a job is written for it
        # run as a train job of the store's, so that a server's :train (or another command) sees it and refuses,
        # and this refuses while one is queued or running: two trainings at once end with whichever finished last
        try:
            job = JobRunner(service.store, {"train": trainer.handle}).run_here("train", project)
        except AlreadyQueued as exc:
            running = exc.job
            fail(f"project '{project}' is being trained already (job {running.id}, {running.status}, in a server or "
                 "command on this store): wait for it, then train again if you need to")
        if job.status != "succeeded" or job.result is None:
            fail("; ".join(e.get("message", "") for e in job.errors) or f"the train job ended {job.status}")
        result = json.loads(job.result)
    except OpenQnAError as exc:
        fail(exc.message)
    if as_json:
        click.echo(json.dumps(result, indent=2, ensure_ascii=False))
        return
    _print(result)
