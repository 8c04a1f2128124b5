"""The ``openqna`` command: serve, import, export, ask, deploy, calibrate, projects, and the ``table`` and
``keys`` groups (``cli/table_commands.py``, ``cli/key_commands.py``); what every command shares is in ``cli/common.py``.

Each command is a thin translation of options into core calls (no logic of its own lives here), read top
to bottom as ``openqna --help`` lists them.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import sqlite3
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any, cast

import click

from openqna import settings
from openqna.cli.common import data_option, fail, live_or_named, no_store, open_catalog, open_service
from openqna.cli.key_commands import keys
from openqna.cli.near_topic_commands import set_near_topic
from openqna.cli.table_commands import table
from openqna.cli.test_commands import test, test_diff, test_runs, test_set_from_log
from openqna.cli.train_commands import train
from openqna.filters.match import MetaEq, all_of
from openqna.formats.limits import LIMITS
from openqna.records import Conflict, NotFound, OpenQnAError


class Commands(click.Group):
    """The commands, each of which ends in one error line when a setting it reads is wrong (settings are read when
    used, such as ``OPENQNA_NEAR_TOPIC`` on every question: a bad one was a traceback)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except settings.SettingError as exc:
            fail(str(exc))


@click.group(cls=Commands)
@click.version_option(package_name="openqna")
def main() -> None:
    """openqna: knowledge-base question answering you host yourself."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")


main.add_command(table)
main.add_command(keys)
main.add_command(test)
main.add_command(test_runs)
main.add_command(test_diff)
main.add_command(test_set_from_log)
main.add_command(train)


@main.command("import")
@click.argument("project")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--kb-id", default=None, help="Keep a QnA Maker kbId (GUID) so bots reach the project by it.")
@data_option
def import_(project: str, files: tuple[Path, ...], kb_id: str | None, data_dir: str) -> None:
    """Import QnA files (TSV, CSV, XLSX, Azure JSON, QnA Maker's KB replica .zip) and documents (PDF, DOCX, HTML,
    Markdown, text).

    Every file is parsed before anything is written, so a malformed file leaves the
    project as it was.  Importing the same file twice changes nothing.  A document
    becomes QnAs (from its headings) and passages that cite its pages and sections.
    The project settings a file carries (an Azure export's Metadata, a replica's
    Settings.tsv: default answer, language, description) are applied, to a project
    that exists too, as Azure's import applies them; a replica's unstructured
    documents become passages.  What a file holds that is not imported is printed.
    QnA Maker's exports do not carry the kbId its bots are configured with: ``--kb-id``
    keeps it, so generateAnswer and train calls reach this project unchanged.
    """
    from tqdm import tqdm

    from openqna.formats import QNA_SUFFIXES, read_file
    from openqna.ingest import parse_document
    from openqna.kb.authoring import KB_ID, Authoring
    from openqna.kb.documents import DOCUMENT_SUFFIXES, ingest_document, is_document
    from openqna.records import KnowledgeBaseContent

    if kb_id and not KB_ID.match(kb_id):
        fail(f"--kb-id '{kb_id}' is not a QnA Maker kbId; it is a GUID such as 1a2b3c4d-0000-4000-8000-123456789abc.")
    content = KnowledgeBaseContent()
    parts = []
    documents = []  # (document, its source, unstructured: passages only)
    try:
        for f in tqdm(files, desc="parsing", unit="file", leave=False, disable=len(files) == 1):
            data = f.read_bytes()
            if is_document(f.name, data):
                doc = parse_document(f.name, data)
                documents.append((doc, doc.source, False))
                continue
            if f.suffix.lower() not in QNA_SUFFIXES:
                fail(f"{f.name}: unsupported file type {f.suffix.lower() or '(none)'!r}; import reads QnA files "
                      f"({', '.join(QNA_SUFFIXES)}) and documents ({', '.join(DOCUMENT_SUFFIXES)})")
            part = read_file(f, data)
            documents.extend((parse_document(d.name, d.data), d.source, True) for d in part.documents)
            parts.append((f.name, part))
        service = open_service(data_dir, create=True)
        authoring = Authoring(service)
        taken: set[int] = set()  # each file's ids are its own: one never takes another's or another source's record
        for _, part in parts:
            service.own_ids(project, part.qnas, taken)
            content.qnas.extend(part.qnas)
            content.synonyms.extend(part.synonyms)
        authoring.check_import_prompts(project, content.qnas, replacing=False)  # before anything is written
        for name, part in parts:
            if part.settings is not None:  # as Azure's import: a project that exists takes them too
                _, changes = authoring.ensure_project(project, part.settings)
                if changes:
                    click.echo(f"{project}: settings from {name}: " + ", ".join(
                        f"{c.label} {c.new!r}" + ("" if c.old is None else f" (was {c.old!r})") for c in changes))
            for note in part.notes:
                click.echo(f"note: {note}", err=True)
        if content.qnas or content.synonyms or not documents:
            report = service.import_content(project, content, progress=True)
            groups = f", {len(service.synonyms(project))} synonym groups" if content.synonyms else ""
            counts = service.counts(project)
            passages = f", {counts['passage']} passages" if counts["passage"] else ""
            click.echo(f"{project}: {report.added} added, {report.updated} updated, {report.unchanged} unchanged "
                       f"({counts['qna']} QnAs{passages}{groups})")
            _duplicates_hint(service, project)
        for doc, source, unstructured in documents:
            r = ingest_document(service, project, doc, source=source, progress=True, unstructured=unstructured)
            kind = " (unstructured: passages only)" if unstructured else ""
            click.echo(f"{project}: {source}{kind}: {r.qnas} QnAs and {r.passages} passages ({r.added} added, "
                       f"{r.updated} updated, {r.unchanged} unchanged, {r.deleted} deleted)")
            for note in r.notes:
                click.echo(f"{project}: note: {note}")
        if kb_id:
            authoring.set_kb_id(project, kb_id)
            click.echo(f"{project}: answers QnA Maker calls to knowledgebases/{kb_id.lower()}")
    except OpenQnAError as exc:
        fail(exc.message)


@main.command()
@click.argument("project")
@data_option
def sources(project: str, data_dir: str) -> None:
    """List PROJECT's sources with their record counts, and each URL source's refresh: interval, last check, last
    change and the last check's outcome (`openqna source-refresh` sets and runs it)."""
    from collections import Counter

    from openqna.kb.authoring import Authoring
    from openqna.kb.refresh import describe, format_every

    try:
        service = open_service(data_dir)
        counts = Counter((q.source.lower(), q.kind) for q in service.records(project))
        listed = Authoring(service).list_sources(project)
        refreshes = service.store.list_source_refreshes(project)
        if not listed:
            click.echo(f"{project} has no sources")
            return
        click.echo("source\tkind\tQnAs\tpassages\tlast updated\trefresh\tlast check\tlast change\toutcome")
        for s in listed:
            qnas, passages = counts[(s.source.lower(), "qna")], counts[(s.source.lower(), "passage")]
            updated = s.last_updated or "not recorded"
            line = f"{s.source}\t{s.source_kind}\t{qnas} QnAs\t{passages} passages\t{updated}"
            r = refreshes.get(s.source)
            if r is not None:
                line += (f"\t{format_every(r.every)}\t{r.checked or 'never'}\t{r.changed or 'never'}"
                         f"\t{describe(r.outcome)}")
            elif s.source_uri:
                line += "\toff\tnever\tnever\tnever checked"
            click.echo(line)
    except OpenQnAError as exc:
        fail(exc.message)


@main.command("source-refresh")
@click.argument("project")
@click.argument("source")
@click.option("--every", default=None, metavar="INTERVAL",
              help="Check SOURCE every INTERVAL: 30m, 6h, 1d, 1w (m, h, d, w; at least 10m), or 0/none to stop.")
@click.option("--now", "now", is_flag=True, help="Check SOURCE now and print what changed.")
@click.option("--json", "as_json", is_flag=True, help="Print the source's refresh state as JSON (alone: as it is).")
@data_option
def source_refresh(project: str, source: str, every: str | None, now: bool, as_json: bool, data_dir: str) -> None:
    """Refresh PROJECT's URL source SOURCE (its URL or display name) on a schedule, or now.

    `openqna serve` checks a source every INTERVAL, sending the ETag and Last-Modified it last saw; when the
    document changed it is re-imported into the live (test) state, as `PATCH .../sources` with `refresh: true`
    does.  Deployments change only when you deploy.  Exits 1 when a check (--now) failed."""
    from openqna.kb.refresh import Refresher, describe, format_every, refresh_json

    if every is None and not now and not as_json:
        fail("give --every INTERVAL (30m, 6h, 1d, 1w; 0 or none to stop) and/or --now, or --json for its state")
    try:
        refresher = Refresher(open_service(data_dir))
        name = refresher.source(project, source).source
        state = refresher.set_every(project, name, every) if every is not None else None
        if state is None and not now:  # --json alone: the state as it is
            state = refresher.status(project).get(name)
        if state is not None and not as_json:
            when = f", next check at {state.next_due}" if state.every else ""
            click.echo(f"{name}: every {format_every(state.every)}{when}" if state.every else
                       f"{name}: refresh off")
        if now:
            state = refresher.refresh(project, name)
    except OpenQnAError as exc:
        fail(exc.message)
    if state is None and not as_json:
        return
    if as_json:
        click.echo(json.dumps({"source": name, **(refresh_json(state) or {})}, indent=2, ensure_ascii=False))
    elif now and state is not None:
        click.echo(f"{name}: {describe(state.outcome)}")
        for key, sign in (("addedIds", "+"), ("updatedIds", "~"), ("deletedIds", "-")):
            ids = state.outcome.get(key) or []
            if ids:
                click.echo(f"  {sign} " + ", ".join(f"#{i}" for i in ids))
    if now and state is not None and state.outcome.get("status") == "failed":
        raise SystemExit(1)


@main.command()
@click.argument("project")
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["tsv", "csv", "excel", "json"]), default=None,
              help="File format; guessed from OUT's extension by default.")
@click.option("--deployment", default="test", show_default=True, callback=live_or_named)
@data_option
def export(project: str, out: Path, fmt: str | None, deployment: str, data_dir: str) -> None:
    """Export PROJECT to OUT in QnA Maker/Azure format.

    A .json file carries the project's settings (default answer, language, description) in its Metadata, as
    Azure's export does, so `openqna import` and Azure's import set them again."""
    from openqna.formats import ExportFormat, export_bytes
    from openqna.kb.authoring import feedback_suggestions, project_metadata, with_feedback
    from openqna.kb.catalog import Project

    by_suffix = {".tsv": "tsv", ".txt": "tsv", ".csv": "csv", ".xlsx": "excel", ".json": "json"}
    if fmt is None and out.suffix.lower() not in by_suffix:
        fail(f"cannot tell the format from '{out.name}': name it .tsv, .csv, .xlsx or .json, or pass --format")
    chosen = cast(ExportFormat, fmt or by_suffix[out.suffix.lower()])
    try:
        catalog = open_catalog(data_dir)
        content = catalog.content(project, deployment)
        content.qnas = with_feedback(content.qnas, feedback_suggestions(catalog.store, project))
        metadata = project_metadata(catalog.project(project))
    except OpenQnAError as exc:
        fail(exc.message)
    try:
        data, _, _ = export_bytes(content, chosen, project_metadata=metadata)
    except OpenQnAError as exc:  # a cell longer than Excel holds
        fail(exc.message)
    try:
        out.write_bytes(data)
    except OSError as exc:
        fail(f"cannot write {out}: {exc.strerror or exc}")
    passages = sum(q.kind == "passage" for q in content.qnas)
    click.echo(f"wrote {len(content.qnas) - passages} QnAs and {passages} passages of {project} ({deployment}) to {out}")
    if content.synonyms and chosen in ("tsv", "csv"):  # a QnA Maker TSV holds QnAs or synonyms, never both
        click.echo(f"note: {len(content.synonyms)} synonym groups are not in a .{chosen} file; export .json or .xlsx "
                   "to keep them with the QnAs", err=True)
    fresh = project_metadata(Project(project))
    if chosen != "json" and any(metadata[k] != fresh[k] for k in ("Description", "Language", "Settings")):
        click.echo(f"note: the project's settings (default answer, language, description) are not in a .{chosen} "
                   "file; export .json to keep them", err=True)
    # what a project has learnt has no place in any export format: say so (docs/authoring.md, Save and train)
    left = [what for what, held in (
        ("its trained model (Save and train)", catalog.store.get_trained(project, deployment) is not None),
        (f"its test sets ({len(catalog.store.list_test_sets(project))})", catalog.store.list_test_sets(project)),
        ("the users' feedback (only as suggestions, which train nothing until accepted)",
         catalog.store.list_feedback(project))) if held]
    if left:
        click.echo(f"note: no export file holds {', '.join(left)}: after importing it elsewhere, run `openqna train` "
                   "there again; `openqna backup` keeps them all", err=True)


@main.command()
@click.argument("project")
@click.argument("question")
@click.option("--top", default=3, show_default=True, type=click.IntRange(1, LIMITS.top))
@click.option("--threshold", default=0.0, show_default=True, type=click.FloatRange(0, 1))
@click.option("--filter", "filters", multiple=True, metavar="KEY=VALUE", help="Metadata filter; repeat to AND them.")
@click.option("--deployment", default="test", show_default=True, callback=live_or_named)
@click.option("--question-only", is_flag=True, help="Rank on questions only (rankerType=QuestionOnly).")
@click.option("--unstructured", is_flag=True,
              help="Answer from passages too (documents, OpenAI files), as Azure's includeUnstructuredSources.")
@data_option
def ask(project: str, question: str, top: int, threshold: float, filters: tuple[str, ...], deployment: str,
        question_only: bool, unstructured: bool, data_dir: str) -> None:
    """Ask PROJECT a QUESTION and print the answers with their confidence.

    Only QnAs answer unless --unstructured is given: passages (sections of documents, OpenAI
    files' texts) answer Azure queries only with includeUnstructuredSources, and so here.
    """
    from openqna.kb.service import AskRequest

    nodes = []
    for f in filters:
        key, sep, value = f.partition("=")
        if not sep or not key.strip():
            fail(f"--filter expects KEY=VALUE, got '{f}'")
        nodes.append(MetaEq(key.strip(), value.strip()))
    req = AskRequest(question=question, top=top, threshold=threshold, question_only=question_only,
                     filter=all_of(*nodes), include_unstructured=unstructured)
    if not question.strip():
        fail("the question is empty")
    if len(question) > LIMITS.question_chars:
        fail(f"the question is {len(question)} characters long; the limit is {LIMITS.question_chars}")
    try:
        answers = open_service(data_dir).ask(project, deployment, req)
    except OpenQnAError as exc:
        fail(exc.message)
    for a in answers:
        if a.qna is None:
            click.echo(f"[{a.confidence:.4f}] (default answer) {a.default_text}")
            continue
        label = "(passage) " if a.qna.kind == "passage" else ""
        click.echo(f"[{a.confidence:.4f}] #{a.qna.id} {label}{a.qna.questions[0] if a.qna.questions else ''}")
        click.echo("    " + a.qna.answer.replace("\n", "\n    "))
        for p in a.qna.dialog.prompts:
            click.echo(f"    -> {p.display_text} (#{p.qna_id})")


@main.command()
@click.argument("project")
@click.argument("deployment", default="production")
@click.option("--version", "version", default=None, metavar="N",
              help="Roll DEPLOYMENT back (or forward) to kept version N (`openqna deployments` lists them) instead of "
                   "deploying the live state.")
@data_option
def deploy(project: str, deployment: str, version: str | None, data_dir: str) -> None:
    """Copy PROJECT's live (test) state to DEPLOYMENT (default: production), recorded as a version."""
    import getpass

    from openqna.kb.catalog import version_number

    number = None
    try:
        if version is not None:
            number = version_number(version)
            if number is None:
                fail(f"--version takes a version number such as 3 or v3, not {version!r}")
        d = open_catalog(data_dir).deploy(project, deployment, version=number, by=f"cli {getpass.getuser()}")
    except OpenQnAError as exc:
        fail(exc.message)
    action = "rolled" if number is not None else "deployed"
    click.echo(f"{action} {project} to {d.name} at {d.last_deployed}: version {d.version}")


@main.command()
@click.argument("project")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of the deploys.")
@data_option
def deployments(project: str, as_json: bool, data_dir: str) -> None:
    """List PROJECT's deploys, oldest first: deployment, version, when, by whom, QnA and passage counts, content hash.

    `*` marks the version each deployment holds now; `kept` versions can be rolled back to with
    `openqna deploy PROJECT DEPLOYMENT --version N`."""
    try:
        versions = open_catalog(data_dir).versions(project)
    except OpenQnAError as exc:
        fail(exc.message)
    if as_json:
        click.echo(json.dumps([{"deployment": v.deployment, "version": v.version, "deployed_at": v.deployed_at,
                                "deployed_by": v.deployed_by, "qnas": v.qnas, "passages": v.passages, "hash": v.hash,
                                "kept": v.kept, "current": v.current} for v in versions], indent=2))
        return
    if not versions:
        click.echo(f"{project} has not been deployed since versions were kept")
    for v in versions:
        mark = "*" if v.current else " "
        kept = "kept" if v.kept else "dropped"
        click.echo(f"{mark} {v.deployment}\tv{v.version}\t{v.deployed_at}\t{v.deployed_by or '-'}\t{v.qnas} QnAs,"
                   f" {v.passages} passages\t{v.hash[:12]}\t{kept}")


@main.command()
@click.argument("project")
@click.argument("old")
@click.argument("new", default="test")
@click.option("--json", "as_json", is_flag=True, help="Print the changes as JSON.")
@data_option
def diff(project: str, old: str, new: str, as_json: bool, data_dir: str) -> None:
    """What changed in PROJECT from state OLD to state NEW (default: test, the live state).

    A state is `test`, a deployment's name, or a kept version (`v3`).  QnAs and passages are listed apart; a changed
    QnA shows which of its questions, answer, metadata and prompts changed, old and new."""
    try:
        changes = open_catalog(data_dir).compare(project, old, new)
    except OpenQnAError as exc:
        fail(exc.message)
    if as_json:
        click.echo(json.dumps(changes, indent=2, ensure_ascii=False))
        return
    for kind, label in (("qnas", "QnAs"), ("passages", "passages")):
        part = changes[kind]
        click.echo(f"{label}: {len(part['added'])} added, {len(part['changed'])} changed, {len(part['deleted'])} deleted")
        for key, sign in (("added", "+"), ("deleted", "-")):
            for item in part[key]:
                click.echo(f"  {sign} #{item['id']} {item['question']}")
        for item in part["changed"]:
            click.echo(f"  ~ #{item['id']} {item['question']}")
            for name, change in cast(dict[str, dict[str, object]], item["changes"]).items():
                click.echo(f"      {name}: {json.dumps(change['old'], ensure_ascii=False)}"
                           f" -> {json.dumps(change['new'], ensure_ascii=False)}")
    synonyms = changes["synonyms"]
    click.echo(f"synonyms: {len(synonyms['added'])} groups added, {len(synonyms['removed'])} removed")
    for key, sign in (("added", "+"), ("removed", "-")):
        for group in synonyms[key]:
            click.echo(f"  {sign} {', '.join(group)}")
    model = changes["model"]

    def trained(side: dict[str, str] | None) -> str:
        return "none" if side is None else f"{side['hash']} (trained {side['trainedDateTime']})"

    click.echo(f"trained model: {'changed' if model['changed'] else 'unchanged'}, {trained(model['old'])}"
               + (f" -> {trained(model['new'])}" if model["changed"] else ""))


@main.command()
@click.argument("project")
@data_option
def reembed(project: str, data_dir: str) -> None:
    """Re-embed PROJECT's live state with the configured embedder (then deploy again).

    A trained model (`openqna train`) is kept, but its adapter for the old embedder's space is never applied to the
    new one's vectors: this says so, and `openqna train PROJECT` trains one for the new space."""
    from openqna.kb.train_job import Trainer

    try:
        service = open_service(data_dir)
        count = service.reembed(project, progress=True)
        test = Trainer(service).status(project)["deployments"]["test"]
    except OpenQnAError as exc:
        fail(exc.message)
    click.echo(f"re-embedded {count} QnAs of {project}; deploy to update other deployments")
    if test is not None and "notApplied" in test:
        click.echo(f"its trained model is kept but {test['notApplied']} (`openqna train {project}` with this "
                   f"OPENQNA_EMBEDDER, then deploy)")


@main.command()
@data_option
def projects(data_dir: str) -> None:
    """List knowledge bases with their kind, QnA and passage counts, and deployments."""
    from openqna.kb.catalog import kind_of

    catalog = open_catalog(data_dir)
    for p in catalog.projects():
        deployments = ", ".join(d.name for d in catalog.deployments(p.name)) or "none"
        kind, counts = kind_of(p), catalog.counts(p.name)
        if p.settings.get("connected"):  # its rows are in its own database, not in the store ("0 rows")
            engine, rows = p.settings["connected"]["engine"], p.settings["connected_rows"]
            held = f"connected ({engine}), {rows} rows when connected"
        elif kind == "table":
            held = f"{counts['row']} rows"
        else:
            held = f"{counts['qna']} QnAs, {counts['passage']} passages"
        click.echo(f"{p.name}\t{kind}\t{held}\tdeployments: {deployments}")


@main.command()
@click.argument("project")
@click.option("--accept", nargs=2, type=(int, str), metavar="QNA_ID QUESTION",
              help="Add QUESTION to QnA QNA_ID as an alternate question.")
@data_option
def suggestions(project: str, accept: tuple[int, str] | None, data_dir: str) -> None:
    """List active-learning suggestions (user questions sent as feedback, and those an imported QnA Maker file
    carries), as the console's Improve tab lists them, or accept one."""
    from openqna.kb.authoring import Authoring

    try:
        if accept:
            authoring = Authoring(open_service(data_dir))
            qna, suggested = authoring.accept_suggestion(project, accept[0], accept[1])
            click.echo(f"QnA #{qna.id} now has {len(qna.questions)} questions"
                       + ("" if suggested else " (no user suggested it: added as a question, not recorded as an "
                                               "accepted suggestion for test sets)"))
            return
        authoring = Authoring(open_service(data_dir))
        found = authoring.pending_suggestions(project)
        if not found:
            click.echo(f"{project} has no suggestions (they come from user questions sent as feedback, and from "
                       "the SuggestedQuestions of an imported QnA Maker file)")
            return
        click.echo("QnA\tcount\tuser question")
        for qid, question, count in found:
            click.echo(f"#{qid}\t{count}\t{question}")
    except OpenQnAError as exc:
        fail(exc.message)


@main.command()
@click.option("--from", "source", required=True, help="Source store: a data directory or a postgresql:// URL.")
@click.option("--to", "target", required=True, help="Target store: a data directory or a postgresql:// URL.")
def migrate(source: str, target: str) -> None:
    """Copy every knowledge base (with its deployments, files and keys) from one store to another."""
    from openqna.kb.catalog import check_location, is_postgres, open_store, store_file
    from openqna.kb.connected_search import carry_secret_key
    from openqna.kb.migrate import migrate as run

    try:
        check_location(source, "--from")
        check_location(target, "--to")
        if not is_postgres(source) and not store_file(source).exists():  # opening it would make an empty store
            no_store(source, "pass --from the folder that has one, or a postgresql:// URL")
        stores = open_store(source), open_store(target)
    except OpenQnAError as exc:
        fail(exc.message)
    try:
        report = run(*stores, progress=lambda line: click.echo(line, err=True))
    except Conflict as exc:  # refused before anything was written
        fail(exc.message)
    except (OpenQnAError, sqlite3.Error) as exc:
        fail(f"the migration stopped: {exc.message if isinstance(exc, OpenQnAError) else exc}. What it copied "
             "completely stays; run the same command again to copy the rest.")
    except KeyboardInterrupt:
        fail("the migration was interrupted. What it copied completely stays; run the same command again to copy "
             "the rest.")
    for name in report.recopied:
        click.echo(f"{name}: copied again (an earlier run left it unfinished)", err=True)
    if key_note := carry_secret_key(*stores):
        click.echo(key_note, err=True)
    if not any(report.copied.values()):
        click.echo("everything was already in the target (" + ", ".join(
            f"{n} {name}" for name, n in report.already.items()) + "); nothing was changed")
        return
    already = [f"{n} {name}" for name, n in report.already.items() if n]
    click.echo(", ".join(f"{n} {name}" for name, n in report.copied.items())
               + (f" (already there: {', '.join(already)})" if already else ""))


@main.command()
@click.argument("dest", type=click.Path(file_okay=False, path_type=Path))
@data_option
def backup(dest: Path, data_dir: str) -> None:
    """Copy the embedded store (and its secret.key) into the folder DEST while servers use it.

    SQLite's online backup: one consistent snapshot, checked before it takes its name; DEST must hold
    no store.  Restore with `openqna restore DEST`, or serve DEST (OPENQNA_DATA=DEST openqna serve);
    never copy openqna.sqlite3 back by hand (SQLite would apply the old store's -wal file to it).  A
    PostgreSQL store is backed up with pg_dump, or copied into a folder with `openqna migrate`.
    """
    from openqna.kb.backup import backup as run

    try:
        report = run(data_dir, dest)
    except NotFound:  # the one thing a backup does not find is the store
        from openqna.kb.catalog import embedded_dir

        no_store(embedded_dir(data_dir))
    except OpenQnAError as exc:  # a full disk (StoreFull) among them: the backup left nothing behind
        fail(exc.message)
    except OSError as exc:
        fail(f"cannot write {dest}: {exc.strerror or exc}")
    except sqlite3.Error as exc:
        fail(f"cannot back up the store: {exc}")

    def count(n: int, what: str) -> str:
        return f"{n} {what}{'' if n == 1 else 's'}"

    click.echo(f"backed up {count(report.projects, 'project')} ({report.records} QnAs and passages) and "
               f"{count(report.keys, 'key')}{' with secret.key' if report.secret_key else ''} to {report.path} "
               f"({report.bytes / 1e6:.1f} MB, {report.seconds} s)")


@main.command()
@click.argument("backup_dir", metavar="BACKUP", type=click.Path(file_okay=False, path_type=Path))
@data_option
def restore(backup_dir: Path, data_dir: str) -> None:
    """Put the store backed up in the folder BACKUP (by `openqna backup`) in place of the store in --data.

    Refused while a server or another command has that store open: stop them first.  The old
    store's -wal and -shm files go with it (copied back by hand, the file would get the old WAL
    applied to it: later writes, or "database disk image is malformed"); secret.key is restored and
    the indexes cache dropped (rebuilt on first use).
    """
    from openqna.kb.backup import restore as run

    try:
        report = run(backup_dir, data_dir)
    except OpenQnAError as exc:
        fail(exc.message)
    except OSError as exc:
        fail(f"cannot restore into {data_dir}: {exc.strerror or exc}")
    except sqlite3.Error as exc:
        fail(f"cannot read the backup in {backup_dir}: {exc}")
    click.echo(f"restored {report.projects} project{'' if report.projects == 1 else 's'} ({report.records} QnAs and "
               f"passages) and {report.keys} key{'' if report.keys == 1 else 's'}"
               f"{' with secret.key' if report.secret_key else ''} to {report.path} ({report.seconds} s)")


@main.command()
@click.argument("project")
@click.argument("file", required=False, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--deployment", default="test", show_default=True, callback=live_or_named, help="Deployment the questions are asked of.")
@click.option("--threshold", default=0.5, show_default=True, type=click.FloatRange(0, 1),
              help="Threshold the before/after figures are measured at.")
@click.option("--dry-run", is_flag=True, help="Fit and print, but keep the project's calibration as it is.")
@click.option("--reset", is_flag=True, help="Drop the project's fitted calibration (back to the shipped one).")
@click.option("--near-topic", "near_topic", metavar="SHARE|off|default|show",
              help="The project's own OPENQNA_NEAR_TOPIC: a share from 0 to 1 (such as 0.1), off, or default (the "
                   "server's); show prints it and what it does on the KB.")
@data_option
def calibrate(project: str, file: Path | None, deployment: str, threshold: float, dry_run: bool, reset: bool,
              near_topic: str | None, data_dir: str) -> None:
    """Re-fit PROJECT's confidence on FILE: lines of QUESTION<TAB>QNA_ID, or 'none' for off-topic questions.

    FILE needs at least 10 questions, some whose top answer is right and some whose top answer
    is wrong or off-topic.  Keeps the fitted scale and shift in the project's settings, which
    every query reads.  `openqna calibrate PROJECT --reset` (no FILE) goes back to the shipped one.
    `--near-topic` sets the project's near-topic share (docs/confidence.md), before a fit on FILE if one is given.
    """
    from openqna.kb import calibrate as cal

    if file is None and not reset and near_topic is None:
        fail("give FILE, the questions to calibrate on, --reset to go back to the shipped calibration, or "
             "--near-topic SHARE|off|default")
    if dry_run and near_topic is not None and near_topic.strip().lower() != "show":
        fail("--near-topic saves the project's share, --dry-run saves nothing: give one of them")
    service = open_service(data_dir)
    try:
        if near_topic is not None:
            set_near_topic(service, project, near_topic, deployment)
            if file is None and not reset:
                return
        if reset or file is None:
            cal.save(service, project, None)
            click.echo(f"{project}: calibration reset to the shipped one")
            return
        proj = service.project(project)
        pairs = cal.read_pairs(file)
        points = cal.collect(service, project, pairs, deployment)
        cal.check(points)
        before = service.calibration(proj)
        served = cal.collect(service, project, pairs, deployment, before)  # as the server answers them now
    except OpenQnAError as exc:
        fail(exc.message)
    shipped = service.shipped_calibration
    fitted = cal.fit(points, shipped)
    rows = [("before", before, cal.score(served, cal.AS_SERVED, threshold)),
            ("after (fitted on these questions)", fitted, cal.score(points, fitted, threshold)),
            (f"after ({cal.FOLDS}-fold cross-validated)", None, cal.cross_validated(points, threshold, shipped))]
    in_scope = sum(not p.off_topic for p in points)
    click.echo(f"{len(points)} questions ({in_scope} in scope, {len(points) - in_scope} off-topic), "
               f"threshold {threshold}")
    for name, c, sc in rows:
        fit = f"scale {c.scale:7.4f}  shift {c.shift:7.4f}" if c else f"{'(a fit per fold)':<28}"
        click.echo(f"  {name:<36} {fit}  in-scope answered right {sc.in_scope:6.1%}  "
                   f"off-topic rejected {sc.off_topic:6.1%}")
    if dry_run:
        click.echo("dry run: calibration not saved")
    else:
        cal.save(service, project, fitted)
        click.echo(f"saved in project '{project}' settings (calibration)")


@main.command("eval")
@click.option("--datasets", "datasets_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              default=Path("../shared/data"), show_default=True, help="Folder of the shared public data sets.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("eval"),
              show_default=True, help="Where report.md, the plots and the embedding cache (.cache/) go.")
@click.option("--threshold", default=0.5, show_default=True, type=click.FloatRange(0, 1),
              help="Confidence threshold of the off-topic figures.")
@click.option("--quick", is_flag=True, help="Small seeded subsets, under a minute: a smoke test, not a measurement.")
@click.option("--only", type=click.Choice(["cjk"]), default=None,
              help="Run one part alone: `cjk`, the Chinese and Japanese knowledge bases and the span sets.")
def eval_(datasets_dir: Path, out_dir: Path, threshold: float, quick: bool, only: str | None) -> None:
    """Measure answer quality on the public data sets; writes OUT/report.md and plots."""
    from openqna.evaluation import run_eval

    metrics = run_eval(datasets_dir, out_dir, quick=quick, threshold=threshold, progress=True, only=only)
    click.echo(f"wrote {out_dir / 'report.md'} and {len(metrics.get('plots', []))} plots"
               f" in {metrics['timing']['total_seconds']:.0f} s")
    verdict = metrics.get("guard")
    if verdict is not None:
        click.echo(verdict["message"], err=not verdict["ok"])
        if not verdict["ok"]:
            raise SystemExit(1)


@main.command("mcp")
@click.option("--deployment", default="test", show_default=True, callback=live_or_named, help="Deployment the tools query.")
@data_option
def mcp_(deployment: str, data_dir: str) -> None:
    """Serve the knowledge bases as MCP tools over stdio (for desktop assistants, IDEs and agents)."""
    from openqna.api.tools.mcp import run_stdio

    run_stdio(open_service(data_dir), deployment=deployment)


def one_blas_thread() -> None:
    """Let numpy's BLAS run on the calling thread only, as a server's request threads need.

    Requests are already served in parallel threads.  OpenBLAS's own thread pool serialises
    concurrent callers and its threads spin against them: 16 threads each multiplying a
    10,000 x 384 matrix by a vector managed 10 products/s in all with 2 BLAS threads, and
    240-640/s with one (2-core machine; ``bench/throughput.py`` shows the effect end to end).
    """
    from threadpoolctl import threadpool_limits

    threadpool_limits(1, user_api="blas")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def port_in_use(host: str, port: int) -> bool:
    """Whether something already listens on HOST:PORT.  uvicorn would find out only after the app
    has started (and logged so), and then exit with a traceback-like message; checking first lets
    ``serve`` say so in one line.  Other bind errors (a port below 1024, an unknown address) are
    left to uvicorn."""
    import errno
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: TIME_WAIT is not "in use"
        try:
            probe.bind((host, port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


@main.command()
@click.option("--host", envvar="OPENQNA_HOST", default=settings.host(), show_default=True, show_envvar=True,
              help="Address to listen on (an address other than loopback needs an API key).")
@click.option("--port", envvar="OPENQNA_PORT", default=settings.port(), show_default=True, type=int, show_envvar=True,
              help="Port to listen on.")
@click.option("--sample/--no-sample", default=settings.sample(), show_default=True,
              help="Load the sample knowledge base 'openqna-faq' into an empty store (OPENQNA_SAMPLE=0: --no-sample).")
@data_option
def serve(host: str, port: int, sample: bool, data_dir: str) -> None:
    """Serve the HTTP API on HOST:PORT."""
    import uvicorn

    from openqna.auth.bearer import parse_issuers
    from openqna.auth.keys import list_keys
    from openqna.models.embedder import LocalEncoder
    from openqna.server import RedactSignatures, create_app, log_off_loop, plain_logging, uvicorn_options

    try:  # read on every query: a bad value fails here, at start, rather than as a 500 on each question
        settings.exact_search_max()
        settings.query_threads()
        settings.embed_batch()
        settings.embed_batch_wait_ms()
        settings.pg_vector_search()
        settings.header_timeout()
        settings.body_timeout()
        settings.slow_requests_per_address()
        settings.rate_limit()
        settings.rate_burst()
        settings.llm_model_map()
        settings.model_context()
        settings.near_topic()
        settings.secret_key()  # read when a connected table is searched
        settings.trained_max_mb()  # read when a question first loads a trained model
        issuers = parse_issuers(settings.token_issuers())
    except ValueError as e:  # IssuerConfigError is one; its message names the field
        fail(str(e))
    if port_in_use(host, port):
        fail(f"port {port} on {host} is already in use; stop what is using it or choose another with --port")
    service = open_service(data_dir, create=True)
    if not _is_loopback(host) and not issuers and not list_keys(service.store):
        fail(f"refusing to serve on {host} without API keys or token issuers; create a key with "
              f"`openqna keys create --data {data_dir}` or set OPENQNA_TOKEN_ISSUERS")
    if sample and not service.projects():
        from openqna.formats import read_file

        sample_file = resources.files("openqna") / "samples" / "openqna-faq.tsv"
        with resources.as_file(sample_file) as path:
            service.import_content("openqna-faq", read_file(path))
        service.deploy("openqna-faq", "production")
        click.echo("loaded the sample knowledge base 'openqna-faq' (deployed to production)", err=True)
    upgrade_multilingual(service)
    service.embedder.embed(["warm up"])
    if isinstance(service.embedder, LocalEncoder):  # the session of batched questions, before the first burst
        service.embedder.embed_questions(["warm up", "and a batch"])
    started = time.perf_counter()
    if loaded := service.warm():
        click.echo(f"loaded {len(loaded)} saved index(es) in {time.perf_counter() - started:.1f} s: "
                   + ", ".join(f"{p}/{d}" for p, d in loaded), err=True)
    one_blas_thread()
    # keep-alive: uvicorn's 5 s default closes pooled client connections often enough that a client sending
    # on one just as it closes sees a reset (bench/soak.py: 17 in 8,000 requests); 75 s, as nginx's default
    plain_logging()  # before the app: the MCP SDK would put its own handler on the root logger
    config = uvicorn.Config(create_app(service, closed=not _is_loopback(host)), host=host, port=port,
                            log_level="info",  # configures logging
                            timeout_keep_alive=75, **uvicorn_options())
    logging.getLogger("uvicorn.access").addFilter(RedactSignatures())
    listeners = log_off_loop()  # nothing is formatted or written on the event loop
    try:
        uvicorn.Server(config).run()
    finally:
        for listener in listeners:
            listener.stop()


def upgrade_multilingual(service: object) -> None:
    """Before serving: the records whose vectors in the multilingual space an earlier model made, embedded again by
    today's (``Service.upgrade_multilingual``), said on stderr with the deployments to deploy again."""
    from openqna.kb.service import Service
    from openqna.ranking.multilingual import E5_ONLY, FILLED

    assert isinstance(service, Service)
    e5_only = {p.name for p in service.store.list_projects() if p.settings.get(FILLED) == E5_ONLY}
    # a progress bar on a terminal; a log file gets the line below alone (a record a line, as `plain_logging` writes)
    for project, (count, deployments) in service.upgrade_multilingual(progress=sys.stderr.isatty()).items():
        its = "its" if len(deployments) == 1 else "their"
        meanwhile = (f"{its} questions in another language than {its} records' are ranked by E5's vectors alone"
                     if project in e5_only else f"{its} Chinese, Japanese and Korean questions are ranked by their "
                     "keywords")
        redeploy = (f"; deploy {', '.join(repr(d) for d in deployments)} again to give "
                    f"{'it' if len(deployments) == 1 else 'them'} the new vectors (until then {meanwhile})"
                    if deployments else "")
        done = ("gave {} records the universal sentence encoder's vectors beside E5's in the multilingual space"
                if project in e5_only else "embedded {} records again in the multilingual space, whose model is now "
                "multilingual-e5-small")
        click.echo(f"{project}: {done.format(count)}{redeploy}", err=True)


# -- duplicates and conflicts (issue 41, item 3) --------------------------------------------------------------------
def _duplicates_hint(service: object, project: str) -> None:
    """After an import: one line when it left duplicates or conflicts (skipped above ``IMPORT_CHECK_MAX`` questions)."""
    from openqna.kb import duplicates as dup
    from openqna.kb.service import Service

    assert isinstance(service, Service)
    if service.indexes.get(project).q.n > dup.IMPORT_CHECK_MAX:
        return
    found = dup.counts(dup.find(service, project, misplaced=False))
    parts = [f"{found[k]} {k}{'s' if found[k] != 1 else ''}" for k in ("duplicate", "conflict") if found[k]]
    if parts:
        click.echo(f"{project}: {' and '.join(parts)}: run `openqna duplicates {project}`")


@main.command()
@click.argument("project")
@click.option("--deployment", default="test", show_default=True, callback=live_or_named, help="The state to check: test or a deployment.")
@click.option("--json", "as_json", is_flag=True,
              help='Print a JSON list of {"kind", "qna_ids", "score", "questions", "answers"} (misplaced questions '
                   'add "question", "winner" and "margin").')
@data_option
def duplicates(project: str, deployment: str, as_json: bool, data_dir: str) -> None:
    """QnAs of PROJECT that ask the same (duplicates: same answer too; conflicts: different answers) and questions
    that the ranker answers from another QnA (misplaced), best first.

    Fix one with `openqna merge PROJECT KEEP_ID DROP_ID` or `openqna move-question PROJECT QUESTION FROM_ID TO_ID`."""
    from openqna.kb import duplicates as dup

    try:
        findings = dup.find(open_service(data_dir), project, deployment)
    except OpenQnAError as exc:
        fail(exc.message)
    if as_json:
        click.echo(json.dumps([f.to_json() for f in findings], indent=2, ensure_ascii=False))
        return
    found = dup.counts(findings)
    click.echo(f"{project}: {found['duplicate']} duplicates, {found['conflict']} conflicts, "
               f"{found['misplaced']} misplaced questions")
    for f in findings:
        a, b = f.qna_ids
        if f.kind == "misplaced":
            click.echo(f"misplaced {f.score:.2f}: {f.question!r} of #{a} is answered by #{b} ({f.questions[1]!r})"
                       f"\n    fix: openqna move-question {project} {json.dumps(f.question)} {a} {b}")
            continue
        click.echo(f"{f.kind} {f.score:.2f}: #{a} {f.questions[0]!r} ~ #{b} {f.questions[1]!r}")
        if f.kind == "conflict":
            click.echo(f"    #{a} answers: {f.answers[0][:80]!r}\n    #{b} answers: {f.answers[1][:80]!r}")
        click.echo(f"    fix: openqna merge {project} {a} {b}")


@main.command()
@click.argument("project")
@click.argument("keep_id", type=int)
@click.argument("drop_id", type=int)
@data_option
def merge(project: str, keep_id: int, drop_id: int, data_dir: str) -> None:
    """Fold QnA DROP_ID into KEEP_ID in PROJECT's test state: its questions, metadata and prompts join KEEP_ID, whose
    answer stays; prompts to DROP_ID lead to KEEP_ID; DROP_ID is deleted.  Deploy to publish it."""
    from openqna.kb import duplicates as dup

    try:
        kept = dup.merge(open_service(data_dir), project, keep_id, drop_id)
    except OpenQnAError as exc:
        fail(exc.message)
    click.echo(f"merged #{drop_id} into #{keep_id}: {len(kept.questions)} questions")


@main.command("move-question")
@click.argument("project")
@click.argument("question")
@click.argument("from_id", type=int)
@click.argument("to_id", type=int)
@data_option
def move_question(project: str, question: str, from_id: int, to_id: int, data_dir: str) -> None:
    """Move QUESTION from QnA FROM_ID to QnA TO_ID in PROJECT's test state.  Deploy to publish it."""
    from openqna.kb import duplicates as dup

    try:
        dup.move_question(open_service(data_dir), project, question, from_id, to_id)
    except OpenQnAError as exc:
        fail(exc.message)
    click.echo(f"moved {question!r} from #{from_id} to #{to_id}")


if __name__ == "__main__":
    main()
