"""Azure question answering JSON: the ``format=json`` export file and the ``:import`` body.

The export file is PascalCase::

    {"Metadata": {...project...},
     "Assets": {"Qnas": [{"Id", "Answer", "Source", "Questions", "Metadata",
                          "Dialog": {"IsContextOnly", "Prompts": [{"DisplayOrder", "QnaId", "DisplayText"}]},
                          "ActiveLearningSuggestions": [{"ClusterHead", "SuggestedQuestions": [...]}],
                          "Kind": "passage" (openqna's, on passages only)}],
                "Synonyms": [{"Alterations": ["word", ...]}]}}

and the authoring import body is the same in camelCase (``{"assets": {"qnas": [...]}}``).
Azure matches property names case-insensitively, so reading does too, and ignores
properties it does not know (``LastUpdatedDateTime``, ``SourceDisplayName``).  Metadata
may be an object or a list of ``{"Key"|"Name", "Value"}`` pairs; an ``Id`` of 0 or none
means "not assigned yet".  Active-learning suggestions are converted to and from QnA
Maker's SuggestedQuestions clusters, the form ``QnA.suggested_questions`` keeps; the
cluster totals are recomputed as sums, which is what QnA Maker's files hold.

A passage (a section of a document, ``kind="passage"``: it answers only with ``includeUnstructuredSources``)
is written among the QnAs with one more property, ``"Kind": "passage"``, and read back as a passage; a QnA
carries no ``Kind`` (read as ``"qna"``).  Azure's export has no place for passages (its unstructured sources
are not QnAs), so they stay in ``Qnas`` with the ids that prompts and feedback name, and a client that does
not know ``Kind`` ignores it, as Azure ignores properties it does not know.

Syntax errors carry json's line and column; schema errors name a path such as
``Assets.Qnas[3].Answer`` (canonical PascalCase names, whatever case the file used).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from openqna import strict_json
from openqna.formats import limits, qna_table
from openqna.formats.qna_table import CellError, as_int, casefold_keys
from openqna.records import Dialog, FormatError, KnowledgeBaseContent, ProjectSettings, QnA, RecordKind


def read_json(data: bytes | str | Mapping[str, Any], name: str = "upload.json") -> KnowledgeBaseContent:
    """An export file or import body, as bytes, text or already-parsed JSON.

    A file (bytes or text) must hold its QnAs where Azure's export does, in ``Assets`` (or hold only ``Metadata``,
    a project's settings): a file with neither would import nothing, silently (``{"qnas": [...]}`` from another
    tool); or it may be an array of QnA objects, as
    ``Assets.Qnas`` holds them (``[{"questions": [...], "answer": "..."}]``).  An import body (already parsed)
    may carry no assets: Azure's ``:import`` then sets the project's metadata alone."""
    document = data if isinstance(data, Mapping) else _load(data, name)
    listed = isinstance(document, list)
    if listed and not document:
        raise FormatError("is an empty array: a file of QnA objects needs at least one", file=name)
    if listed:
        document = {"assets": {"qnas": document}}
    elif (not isinstance(data, Mapping) and isinstance(document, Mapping)
          and not {"assets", "metadata"} & casefold_keys(document).keys()):  # a project's settings alone: none
        found = ", ".join(repr(k) for k in list(document)[:5]) or "none"
        raise FormatError("has no 'Assets': an Azure export file holds its QnAs in Assets.Qnas (or the file may be "
                          f"an array of QnA objects, each with 'questions' and 'answer'); its keys: {found}", file=name)
    try:
        return _content(document)
    except CellError as err:
        message = str(err).replace("Assets.Qnas[", "[", 1) if listed and str(err).startswith("Assets.Qnas[") else str(err)
        raise FormatError(message, file=name) from None


def _load(data: bytes | str, name: str) -> Any:
    text = qna_table.decode_text(data, name) if isinstance(data, bytes) else data.removeprefix("\ufeff")
    try:
        return strict_json.loads(text)
    except json.JSONDecodeError as err:
        raise FormatError(f"invalid JSON: {err.msg}", file=name, line=err.lineno, column=err.colno) from None


def _object(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise CellError(path, "must be an object")
    return casefold_keys(value)


def _array(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise CellError(path, "must be an array")
    return value


def _string(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise CellError(path, "is required" if value is None else "must be a string")
    return value


def _content(document: Any) -> KnowledgeBaseContent:
    root = _object(document, "(root)")
    settings = None if root.get("metadata") is None else project_settings(root["metadata"])
    if root.get("assets") is None:
        return KnowledgeBaseContent(settings=settings)
    assets = _object(root["assets"], "Assets")
    qnas: list[QnA] = []
    where_id: dict[int, str] = {}
    for i, item in enumerate(_array(assets.get("qnas") or [], "Assets.Qnas")):
        path = f"Assets.Qnas[{i}]"
        qna = _qna(item, path)
        if qna.id is not None:
            if qna.id in where_id:
                raise CellError(f"{path}.Id", f"{qna.id} is also the Id of {where_id[qna.id]}")
            where_id[qna.id] = path
        qnas.append(qna)
    groups = _array(assets.get("synonyms") or [], "Assets.Synonyms")
    if len(groups) > limits.MAX_SYNONYM_GROUPS:
        raise CellError("Assets.Synonyms", f"has {len(groups)} groups; the limit is {limits.MAX_SYNONYM_GROUPS}")
    synonyms = [_synonyms(group, f"Assets.Synonyms[{i}]") for i, group in enumerate(groups)]
    return KnowledgeBaseContent(qnas=qnas, synonyms=synonyms, settings=settings)


def project_settings(value: Any, path: str = "Metadata") -> ProjectSettings:
    """The project settings of an export file's ``Metadata`` (an import body's ``metadata``), checked as
    ``PATCH .../projects/{p}`` checks them.

    ``Settings.DefaultAnswer`` is the default answer (the SDK's sample also puts a ``DefaultAnswer`` beside
    ``Settings``); ``ProjectName`` is not a setting (the project imported into has its own name), nor are the
    timestamps.  A null or empty value says nothing, except a description, which may be empty."""
    meta = _object(value, path)
    settings = _object(meta["settings"], f"{path}.Settings") if meta.get("settings") is not None else {}
    description = _setting(meta, "description", f"{path}.Description", limits.MAX_DESCRIPTION_CHARS)
    language = _setting(meta, "language", f"{path}.Language", 20) or None
    if language is not None and not limits.LANGUAGE_CODE.fullmatch(language):
        raise CellError(f"{path}.Language", f"{language!r} is not a language code such as 'en', 'de' or 'zh-Hans'")
    default_answer = (_setting(settings, "defaultanswer", f"{path}.Settings.DefaultAnswer",
                               limits.MAX_DEFAULT_ANSWER_CHARS)
                      or _setting(meta, "defaultanswer", f"{path}.DefaultAnswer", limits.MAX_DEFAULT_ANSWER_CHARS))
    multilingual = meta.get("multilingualresource")
    if multilingual is not None and not isinstance(multilingual, bool):
        raise CellError(f"{path}.MultilingualResource", "must be true or false")
    kb_id = meta.get("kbid")
    return ProjectSettings(description=description, language=language, default_answer=default_answer or None,
                           multilingual=multilingual, kb_id=kb_id if isinstance(kb_id, str) and kb_id else None)


def _setting(fields: dict[str, Any], name: str, path: str, max_chars: int) -> str | None:
    value = fields.get(name)
    if value is None:
        return None
    text = _string(value, path).strip()
    if len(text) > max_chars:
        raise CellError(path, f"is {len(text):,} characters long; the limit is {max_chars:,}")
    return text


def _qna(item: Any, path: str) -> QnA:
    fields = _object(item, path)
    source = fields.get("source")
    questions = _array(fields.get("questions") or [], f"{path}.Questions")
    qna = QnA(
        questions=[_string(q, f"{path}.Questions[{i}]") for i, q in enumerate(questions)],
        answer=_string(fields.get("answer"), f"{path}.Answer"),
        id=qna_table.parse_qna_id(fields.get("id"), f"{path}.Id"),
        source="" if source is None else _string(source, f"{path}.Source"),
        metadata=_metadata(fields.get("metadata"), f"{path}.Metadata"),
        dialog=_dialog(fields.get("dialog"), f"{path}.Dialog"),
        suggested_questions=suggestions_from_azure(
            fields.get("activelearningsuggestions") or [], f"{path}.ActiveLearningSuggestions"
        ),
        kind=_kind(fields.get("kind"), f"{path}.Kind"),
    ).normalised()
    if problems := limits.qna_problems(qna):
        field, message = problems[0]
        raise CellError(f"{path}.{field}", message)
    return qna


def _kind(value: Any, path: str) -> RecordKind:
    """``Kind`` as the export writes it: absent (a QnA), ``qna`` or ``passage``, in any case."""
    return "qna" if value is None else qna_table.parse_kind(_string(value, path), path)


def _metadata(value: Any, path: str) -> dict[str, str]:
    if value is None:
        return {}
    if isinstance(value, Mapping):
        pairs = [(key, _string(v, f"{path}.{key}")) for key, v in value.items()]
    else:
        pairs = []
        for i, pair in enumerate(_array(value, path)):
            fields = _object(pair, f"{path}[{i}]")
            key = fields.get("key", fields.get("name"))
            pairs.append((_string(key, f"{path}[{i}].Key"), _string(fields.get("value"), f"{path}[{i}].Value")))
    metadata: dict[str, str] = {}
    for key, value in pairs:
        if key.strip().lower() in (k.strip().lower() for k in metadata):
            raise CellError(path, f"key {key!r} appears twice")
        metadata[key] = value
    return metadata


def _dialog(value: Any, path: str) -> Dialog:
    if value is None:
        return Dialog()
    fields = _object(value, path)
    context_only = fields.get("iscontextonly")
    return Dialog(
        is_context_only=False if context_only is None else qna_table.parse_bool(context_only, f"{path}.IsContextOnly"),
        prompts=qna_table.parse_prompts(fields.get("prompts") or [], f"{path}.Prompts"),
    )


def _synonyms(value: Any, path: str) -> list[str]:
    fields = _object(value, path)
    alterations = _array(fields.get("alterations"), f"{path}.Alterations")
    words = [_string(word, f"{path}.Alterations[{i}]").strip() for i, word in enumerate(alterations)]
    if problem := limits.synonym_group_problem(words):
        raise CellError(f"{path}.Alterations", problem)
    return words


def suggestions_from_azure(clusters: Any, path: str) -> list[dict]:
    """Azure ``activeLearningSuggestions`` -> QnA Maker SuggestedQuestions clusters."""
    converted = []
    for i, cluster in enumerate(_array(clusters, path)):
        here = f"{path}[{i}]"
        fields = _object(cluster, here)
        alternates = []
        suggestions = _array(fields.get("suggestedquestions") or [], f"{here}.SuggestedQuestions")
        for j, suggestion in enumerate(suggestions):
            at = f"{here}.SuggestedQuestions[{j}]"
            item = _object(suggestion, at)
            alternates.append(
                {
                    "Question": _string(item.get("question"), f"{at}.Question"),
                    "AutoSuggestedCount": _count(item, "AutoSuggestedCount", at),
                    "UserSuggestedCount": _count(item, "UserSuggestedCount", at),
                }
            )
        converted.append(
            {
                "ClusterHead": _string(fields.get("clusterhead"), f"{here}.ClusterHead"),
                "TotalAutoSuggestedCount": sum(a["AutoSuggestedCount"] for a in alternates),
                "TotalUserSuggestedCount": sum(a["UserSuggestedCount"] for a in alternates),
                "AlternateQuestionList": alternates,
            }
        )
    return converted


def _count(item: dict[str, Any], name: str, path: str) -> int:
    count = as_int(item.get(name.lower(), 0))
    if count is None or count < 0:
        raise CellError(f"{path}.{name}", f"{item.get(name.lower())!r} is not a non-negative integer")
    return count


def suggestions_to_azure(clusters: list[dict]) -> list[dict]:
    """QnA Maker SuggestedQuestions clusters (as ``qna_table.check_suggestions`` accepts) -> Azure's shape."""
    converted = []
    for cluster in clusters:
        fields = casefold_keys(cluster)
        alternates = [casefold_keys(a) for a in fields["alternatequestionlist"]]
        converted.append(
            {
                "ClusterHead": fields["clusterhead"],
                "SuggestedQuestions": [
                    {
                        "Question": a["question"],
                        "UserSuggestedCount": as_int(a.get("usersuggestedcount")) or 0,
                        "AutoSuggestedCount": as_int(a.get("autosuggestedcount")) or 0,
                    }
                    for a in alternates
                ],
            }
        )
    return converted


def hoist_prompt_qnas(value: dict[str, Any], new_id: Callable[[], int]) -> list[dict[str, Any]]:
    """Move QnAs written inline in ``value``'s prompts out, each under an id from ``new_id``.

    Azure's QnaPrompt holds either a ``qnaId`` or a whole ``qna`` record ("Either QnAId or QnA
    record needs to be present"): that is how one update call adds a QnA and its follow-up
    together.  The prompt is pointed at the new id (in place) and the records are returned,
    nested follow-ups included, ready to be added with the same change.
    """
    hoisted: list[dict[str, Any]] = []

    def visit(record: dict[str, Any]) -> None:
        dialog = _get(record, "dialog")
        prompts = _get(dialog, "prompts") if isinstance(dialog, dict) else None
        if not isinstance(prompts, list):
            return
        for prompt in prompts:
            inline = _get(prompt, "qna") if isinstance(prompt, dict) else None
            if not isinstance(inline, Mapping):
                continue
            qna_id = new_id()
            record_out = {k: v for k, v in inline.items() if k.lower() != "id"}
            record_out["id"] = qna_id
            for key in [k for k in prompt if k.lower() in ("qna", "qnaid")]:
                del prompt[key]
            prompt["qnaId"] = qna_id
            hoisted.append(record_out)
            visit(record_out)

    visit(value)
    return hoisted


def _get(mapping: dict[str, Any], name: str) -> Any:
    return next((v for k, v in mapping.items() if k.lower() == name), None)


def write_json(content: KnowledgeBaseContent, project_metadata: dict | None = None) -> dict:
    """The Azure export file; ``Metadata`` (project details) is written only when given."""
    document: dict[str, Any] = {}
    if project_metadata is not None:
        document["Metadata"] = dict(project_metadata)
    document["Assets"] = {
        "Qnas": [_qna_json(qna) for qna in content.qnas],
        "Synonyms": [{"Alterations": list(group)} for group in content.synonyms],
    }
    return document


def _qna_json(qna: QnA) -> dict[str, Any]:
    record: dict[str, Any] = {} if qna.id is None else {"Id": qna.id}
    record.update(
        Answer=qna.answer,
        Source=qna.source,
        Questions=list(qna.questions),
        Metadata=dict(qna.metadata),
        Dialog={
            "IsContextOnly": qna.dialog.is_context_only,
            "Prompts": [
                {"DisplayOrder": p.display_order, "QnaId": p.qna_id, "DisplayText": p.display_text}
                for p in qna.dialog.prompts
            ],
        },
        ActiveLearningSuggestions=suggestions_to_azure(qna.suggested_questions),
    )
    if qna.kind == "passage":
        record["Kind"] = "passage"
    return record
