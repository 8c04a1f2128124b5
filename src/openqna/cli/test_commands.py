"""``openqna test``, ``test-runs``, ``test-diff`` and ``test-set-from-log``: test sets run against a deployment or
``test`` (kb/test_sets.py), and made from confirmed questions (kb/labelled_questions.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from openqna.cli.common import data_option, fail, live_or_named, open_catalog, open_service
from openqna.records import OpenQnAError


def _pct(share: float | None) -> str:
    return "-" if share is None else f"{share:.0%}"


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _qna(qna_id: Any, question: str | None) -> str:
    if qna_id is None:
        return "no answer"
    if isinstance(qna_id, str):
        return f"a QnA answering {qna_id!r} (none has that answer)"
    return f"#{qna_id} {question!r}" if question else f"#{qna_id}"


def _print_run(summary: dict[str, Any]) -> None:
    s = summary
    click.echo(f"Run {s['run_id']}: test set {s['test_set']!r} against {s['deployment']}, {s['questions']} questions "
               f"({s['answerable']} with an expected answer, {s['no_answer']} that should get none)")
    click.echo(f"  top answer right:            {_pct(s['top1'])}")
    click.echo(f"  right at threshold {s['threshold']:.2f}:     {_pct(s['right_at_threshold'])}")
    click.echo(f"  no-answer questions refused: {_pct(s['no_answer_rejected'])}")
    if s.get("expected_missing"):
        click.echo(f"  {s['expected_missing']} question(s) expect a QnA this state does not hold (an id no QnA has, "
                   "or an answer none gives): fix the set, or the KB")
    if not s["wrong"]:
        click.echo("Every question got what it should.")
        return
    click.echo(f"{len(s['wrong'])} questions did not get what they should:")
    for w in s["wrong"]:
        click.echo(f"  - {w['question']!r}")
        click.echo(f"      expected {_qna(w['expected'], w['expected_question'])}")
        click.echo(f"      got      {_qna(w['got'], w['got_question'])} (confidence {w['confidence']:.2f})")


def _print_diff(diff: dict[str, Any]) -> None:
    click.echo(f"From run {diff['old']} to run {diff['new']}:")
    for name, label in (("top1", "top answer right"), ("right_at_threshold", "right at threshold"),
                        ("no_answer_rejected", "no-answer questions refused")):
        figures = diff["summary"][name]
        click.echo(f"  {label}: {_pct(figures['old'])} -> {_pct(figures['new'])}")
    for key, label in (("worse", "now wrong (were right)"), ("better", "now right (were wrong)")):
        click.echo(f"{len(diff[key])} {label}" + (":" if diff[key] else ""))
        for c in diff[key]:
            b, a = c["before"], c["after"]
            click.echo(f"  - {c['question']!r}: {_qna(b['got'], b['got_question'])} ({b['confidence']:.2f}) -> "
                       f"{_qna(a['got'], a['got_question'])} ({a['confidence']:.2f})")
    for key, label in (("only_old", "only in the old run"), ("only_new", "only in the new run")):
        if diff[key]:
            click.echo(f"{len(diff[key])} questions {label}: " + "; ".join(repr(q) for q in diff[key]))


@click.command("test")
@click.argument("project")
@click.argument("file", required=False, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--set", "set_name", default=None, metavar="NAME", help="Run the stored test set NAME.")
@click.option("--save-as", default=None, metavar="NAME", help="Store FILE as the set NAME (default: the file's name "
              "without its extension).")
@click.option("--deployment", default="test", show_default=True, callback=live_or_named, help="What to ask: a deployment, or test (the live "
              "state).")
@click.option("--threshold", default=None, type=click.FloatRange(0, 1),
              help="Read 'right' at this confidence (default: the project's testThreshold setting, else 0.5).")
@click.option("--compare", "compare", default=None, type=int, metavar="RUN_ID",
              help="Also show what changed, question by question, since run RUN_ID.")
@click.option("--json", "as_json", is_flag=True, help='Print {"questions", "top1", "right_at_threshold", '
              '"no_answer_rejected", "wrong": [...], ...} as JSON.')
@data_option
def test(project: str, file: Path | None, set_name: str | None, save_as: str | None, deployment: str,
         threshold: float | None, compare: int | None, as_json: bool, data_dir: str) -> None:
    """Run a test set against PROJECT: import FILE (TSV, CSV or XLSX) as a set, or run the stored --set NAME.

    A test-set file has a header row with the columns question, expected_qna_id (or expected_answer: the answer's
    text) and optional metadata (key:value|key:value, used as a filter).  An empty expected value, 0 or none means
    the question should get no answer.  Every question is asked (top 3), and the run is stored
    (`openqna test-runs` lists runs, `openqna test-diff` compares two)."""
    from openqna.kb.test_sets import diff_runs, run_test_set, summary_json

    if (file is None) == (set_name is None):
        fail("give a test-set FILE to import and run, or --set NAME to run a stored set (not both)")
    if save_as is not None and file is None:
        fail("--save-as names a set imported from FILE; give the FILE")
    try:
        service = open_service(data_dir)
        if file is not None:
            stored = service.import_test_set(project, save_as or file.stem, file.read_bytes(), file.name)
            if not as_json:
                click.echo(f"saved {len(stored.items)} questions as test set {stored.name!r}")
        else:
            assert set_name is not None
            stored = service.test_set(project, set_name)
        old = service.test_run(project, compare) if compare is not None else None
        run = run_test_set(service, project, stored, deployment, threshold)
    except OpenQnAError as exc:
        fail(exc.message)
    summary = summary_json(run)
    diff = diff_runs(old, run) if old is not None else None
    if as_json:
        click.echo(json.dumps({**summary, **({"diff": diff} if diff else {})}, indent=2, ensure_ascii=False))
        return
    _print_run(summary)
    if diff is not None:
        _print_diff(diff)


@click.command("test-runs")
@click.argument("project")
@click.option("--set", "set_name", default=None, metavar="NAME", help="Only the runs of this test set.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of the runs.")
@data_option
def test_runs(project: str, set_name: str | None, as_json: bool, data_dir: str) -> None:
    """List PROJECT's test runs, newest first: run id, set, what it ran against, when, and its figures."""
    from openqna.kb.test_sets import summary_json

    try:
        catalog = open_catalog(data_dir)
        runs = catalog.test_runs(project, set_name)
        sets = catalog.test_sets(project)
    except OpenQnAError as exc:
        fail(exc.message)
    if as_json:
        click.echo(json.dumps([summary_json(r) for r in runs], indent=2, ensure_ascii=False))
        return
    click.echo("test sets: " + (", ".join(f"{s.name} ({len(s.items)} questions)" for s in sets) or "none"))
    if not runs:
        click.echo("no runs yet: `openqna test PROJECT FILE` imports a set and runs it")
    for r in runs:
        s = r.summary
        click.echo(f"run {r.id}\t{r.test_set}\t{r.deployment}\t{r.created}\t{s['questions']} questions\t"
                   f"top answer right {_pct(s['top1'])}, right at {r.threshold:.2f} {_pct(s['right_at_threshold'])},"
                   f" no-answer refused {_pct(s['no_answer_rejected'])}")


@click.command("test-diff")
@click.argument("project")
@click.argument("old", type=int)
@click.argument("new", type=int)
@click.option("--json", "as_json", is_flag=True, help="Print the differences as JSON.")
@data_option
def test_diff(project: str, old: int, new: int, as_json: bool, data_dir: str) -> None:
    """What changed from test run OLD to run NEW of PROJECT, question by question: which went from right to wrong
    and from wrong to right, and what each got in either run."""
    from openqna.kb.test_sets import diff_runs

    try:
        catalog = open_catalog(data_dir)
        diff = diff_runs(catalog.test_run(project, old), catalog.test_run(project, new))
    except OpenQnAError as exc:
        fail(exc.message)
    if as_json:
        click.echo(json.dumps(diff, indent=2, ensure_ascii=False))
        return
    _print_diff(diff)


@click.command("test-set-from-log")
@click.argument("project")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help='Print {"name", "questions", "accepted", "feedback", '
              '"skipped", "items"} as JSON.')
@data_option
def test_set_from_log(project: str, name: str, as_json: bool, data_dir: str) -> None:
    """Store test set NAME of PROJECT made of the questions whose QnA someone confirmed: the suggestions accepted
    (and logged questions added to a QnA) and the logged questions whose feedback names one QnA.

    A question nobody confirmed is left out (the answer it got is only what was ranked first), and so are questions
    whose QnA was deleted or whose feedback names more than one QnA.  Run it with `openqna test PROJECT --set NAME`."""
    try:
        stored, report = open_catalog(data_dir).test_set_from_log(project, name)
    except OpenQnAError as exc:
        fail(exc.message)
    if as_json:
        click.echo(json.dumps({"name": stored.name, **report, "items": stored.items}, indent=2, ensure_ascii=False))
        return
    skipped = report["skipped"]
    click.echo(f"saved {_count(report['questions'], 'question')} as test set {stored.name!r}: "
               f"{_count(report['accepted'], 'accepted suggestion')}, "
               f"{_count(report['feedback'], 'logged question')} with feedback")
    left = [f"{n} {why}" for n, why in ((skipped["gone"], "whose QnA was deleted"),
                                        (skipped["ambiguous"], "whose feedback names more than one QnA"),
                                        (skipped["over"], "oldest beyond the 2,000 a set holds")) if n]
    if left:
        click.echo("left out: " + "; ".join(left))
    for item in stored.items:
        click.echo(f"  {item['question']!r} -> QnA #{item['expected_qna_id']} ({item['origin']})")
    click.echo(f"run it: openqna test {project} --set {stored.name}")
