"""The QnA Maker tabular layout shared by the TSV and XLSX formats.

Both formats carry the same columns (``Question, Answer, Source, Metadata`` and the newer
``SuggestedQuestions, IsContextOnly, Prompts, QnaId``), one row per question.  This module
turns such rows into QnA records and back, so the two readers differ only in how they
get cells out of a file and how they name a cell in an error.

Decisions:

* Newlines and backslashes.  QnA Maker writes a newline inside a cell as the two characters
  ``\\n`` (backslash, n), in its TSV and XLSX exports alike, and has no escape for a backslash, so
  its files cannot tell a newline from text that really holds backslash-n (``C:\\new``).  We read
  a run of backslashes before an ``n`` as pairs: each pair is one backslash, and an odd one left
  over makes the ``n`` a newline (``\\n`` is a newline, ``\\\\n`` a backslash and an ``n``);
  every other backslash is itself.  Our exports double a run of backslashes that comes before an
  ``n`` or a newline, so export -> import gives back exactly the text (``C:\\new`` is written
  ``C:\\\\new``), while a QnA Maker file reads as before unless it has two or more backslashes
  right before an ``n`` (a backslash that ended a line, or ``\\\\nas\\share``), which it
  wrote ambiguously.  A TSV writes newlines as ``\\n`` (a carriage return, alone or before a newline,
  becomes a newline: a TSV has no escape for it, and readers split rows on it); a workbook's cells
  hold the real line breaks, carriage returns included.
* Grouping.  Rows that share a QnaId are one QnA; they must agree on every QnA-level
  column.  Rows without a QnaId are one QnA when they agree on every QnA-level column
  (answer, source, metadata, suggestions, context flag, prompts): grouping on the answer
  alone would merge the legacy chit-chat rows whose answer is the same but whose
  ``Scenario:`` metadata is not, losing metadata.  Questions keep file order; the first
  is the primary question.
* An empty Question cell adds no question (QnA Maker exports a QnA without questions as
  such a row); an empty Answer cell is an error.
* Passages.  QnA Maker's layout has no place for what a record is, so a knowledge base with passages
  (sections of documents, ``kind="passage"``) is written with one more column, openqna's ``Kind``
  (``passage`` on a passage's rows, empty on a QnA's), and read back as passages; a knowledge base
  without passages is written with QnA Maker's eight columns only, as before.  Reading, ``Kind`` is
  optional (empty or ``qna`` is a QnA, ``passage`` a passage, in any case).
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from openqna import strict_json
from openqna.formats import limits
from openqna.records import MAX_QNA_ID, Dialog, FormatError, KnowledgeBaseContent, Prompt, QnA, RecordKind

COLUMNS = ("Question", "Answer", "Source", "Metadata", "SuggestedQuestions", "IsContextOnly", "Prompts", "QnaId")
KIND_COLUMN = "Kind"  # openqna's, written only when a knowledge base has passages (see "Passages" above)
SYNONYMS_COLUMN = "Synonyms"
REQUIRED_COLUMNS = ("Question", "Answer")
_BY_LOWER = {name.lower(): name for name in (*COLUMNS, KIND_COLUMN)}

# fail(message, line, zero-based column or None) builds the reader's FormatError.
Fail = Callable[[str, int, int | None], FormatError]


class CellError(ValueError):
    """A value that does not parse; ``path`` names the field (a column or a JSON path)."""

    def __init__(self, path: str, message: str):
        super().__init__(f"{path}: {message}")
        self.path = path


# --- single values -----------------------------------------------------------------------


# A run of backslashes before an "n", and (when writing) before a newline: see "Newlines and backslashes" above.
_READ_RUN = re.compile(r"(\\+)n")
_WRITE_RUN = re.compile(r"(\\+)(?=[n\n])")
_WRITE_RUN_KEEPING_LINE_BREAKS = re.compile(r"(\\+)(?=n)")


def unescape(text: str) -> str:
    """A cell as QnA Maker or our export wrote it -> the text (``\\n`` becomes a newline, ``\\\\`` before an n
    a backslash)."""
    return _READ_RUN.sub(lambda run: "\\" * (len(run[1]) // 2) + ("\n" if len(run[1]) % 2 else "n"), text)


def escape(text: str, *, keep_line_breaks: bool = False) -> str:
    """Text -> a cell that ``unescape`` reads back as ``text``: newlines become ``\\n`` (a TSV's cell; with
    ``keep_line_breaks``, a workbook's, they stay), and a run of backslashes before either is doubled."""
    if keep_line_breaks:
        return _WRITE_RUN_KEEPING_LINE_BREAKS.sub(lambda run: run[1] * 2, text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _WRITE_RUN.sub(lambda run: run[1] * 2, text).replace("\n", "\\n")


def casefold_keys(obj: Mapping[str, Any]) -> dict[str, Any]:
    """Azure matches JSON property names case-insensitively; so do we."""
    return {str(key).lower(): value for key, value in obj.items()}


def as_int(value: Any) -> int | None:
    """An integer from JSON or a cell (numeric strings too, as Azure accepts); None if it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    return None


def parse_bool(value: Any, path: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise CellError(path, f"{value!r} is not True or False")


def parse_qna_id(value: Any, path: str) -> int | None:
    """A QnA id; empty or 0 means "not assigned yet" (typed clients send 0 for unset ints)."""
    if value is None or value == "":
        return None
    number = as_int(value)
    if number is None or number < 0:
        raise CellError(path, f"{value!r} is not a positive integer")
    if number > MAX_QNA_ID:
        raise CellError(path, f"{number} is larger than {MAX_QNA_ID}, the largest QnA id")
    return number or None


def parse_metadata(text: str) -> dict[str, str]:
    """``key:value|key:value`` -> dict (keys compared case-insensitively for duplicates)."""
    metadata: dict[str, str] = {}
    for pair in text.split("|"):
        if not pair.strip():
            continue
        key, sep, value = pair.partition(":")
        if not sep:
            raise CellError("Metadata", f"{pair.strip()!r} is not a key:value pair")
        key, value = key.strip(), value.strip()
        if problem := limits.metadata_problem(key, value):
            raise CellError("Metadata", problem)
        if key.lower() in (k.lower() for k in metadata):
            raise CellError("Metadata", f"key {key!r} appears twice")
        metadata[key] = value
    return metadata


def format_metadata(metadata: Mapping[str, str]) -> str:
    return "|".join(f"{key}:{value}" for key, value in metadata.items())


def parse_prompts(items: Any, path: str) -> list[Prompt]:
    """Prompt objects (``DisplayOrder``, ``QnaId``, ``DisplayText``, any case) -> Prompts.

    A prompt may carry an inline ``Qna`` record instead of an id in Azure; that would need
    the store to create the QnA and assign its id, so only ``"Qna": null`` is accepted.
    """
    if not isinstance(items, list):
        raise CellError(path, "must be a JSON array of prompts")
    if problem := limits.prompt_count_problem(len(items)):
        raise CellError(path, problem)
    prompts = []
    for i, item in enumerate(items):
        here = f"{path}[{i}]"
        if not isinstance(item, Mapping):
            raise CellError(here, "must be an object")
        fields = casefold_keys(item)
        if fields.get("qna") is not None:
            raise CellError(f"{here}.Qna", "inline QnA records are not supported; refer to the QnA by QnaId")
        order = as_int(fields.get("displayorder", i))
        if order is None or order < 0:
            raise CellError(f"{here}.DisplayOrder", f"{fields.get('displayorder')!r} is not a non-negative integer")
        qna_id = as_int(fields.get("qnaid"))
        if qna_id is None or qna_id <= 0:
            raise CellError(f"{here}.QnaId", f"{fields.get('qnaid')!r} is not a positive integer")
        if qna_id > MAX_QNA_ID:
            raise CellError(f"{here}.QnaId", f"{qna_id} is larger than {MAX_QNA_ID}, the largest QnA id")
        text = fields.get("displaytext")
        if not isinstance(text, str):
            raise CellError(f"{here}.DisplayText", "must be a string")
        if problem := limits.prompt_text_problem(text):
            raise CellError(f"{here}.DisplayText", problem)
        prompts.append(Prompt(display_order=order, qna_id=qna_id, display_text=text.strip()))
    return prompts


def prompts_to_json(prompts: Iterable[Prompt]) -> list[dict[str, Any]]:
    """Prompts as QnA Maker's Prompts column writes them."""
    return [
        {"DisplayOrder": p.display_order, "QnaId": p.qna_id, "Qna": None, "DisplayText": p.display_text}
        for p in prompts
    ]


def check_suggestions(clusters: Any, path: str) -> list[dict]:
    """Validate QnA Maker's SuggestedQuestions clusters; they are kept verbatim, as records.py asks.

    Checked so that the JSON export can convert them: a list of objects with a string
    ``ClusterHead`` and an ``AlternateQuestionList`` of objects with a string ``Question``.
    """
    if not isinstance(clusters, list):
        raise CellError(path, "must be a JSON array of suggestion clusters")
    for i, cluster in enumerate(clusters):
        here = f"{path}[{i}]"
        if not isinstance(cluster, dict):
            raise CellError(here, "must be an object")
        fields = casefold_keys(cluster)
        if not isinstance(fields.get("clusterhead"), str):
            raise CellError(f"{here}.ClusterHead", "must be a string")
        alternates = fields.get("alternatequestionlist")
        if not isinstance(alternates, list):
            raise CellError(f"{here}.AlternateQuestionList", "must be an array")
        for j, alternate in enumerate(alternates):
            if not (isinstance(alternate, dict) and isinstance(casefold_keys(alternate).get("question"), str)):
                raise CellError(f"{here}.AlternateQuestionList[{j}]", "must be an object with a string Question")
    return clusters


def parse_kind(value: str, path: str) -> RecordKind:
    """A Kind cell or property: empty or ``qna`` (a QnA), ``passage``, in any case."""
    kind = value.strip().lower()
    if kind in ("", "qna"):
        return "qna"
    if kind == "passage":
        return "passage"
    raise CellError(path, f"{value!r} is not a record kind; expected 'qna' or 'passage'")


def parse_json_cell(text: str, path: str) -> Any:
    try:
        return strict_json.loads(text)
    except json.JSONDecodeError as err:
        raise CellError(path, f"invalid JSON: {err.msg} at character {err.pos + 1}") from None


def parse_synonym_row(text: str) -> list[str]:
    """``"sdk","software development kit"`` (quotes optional) -> ["sdk", "software development kit"]."""
    try:
        words = next(csv.reader([text], skipinitialspace=True))
    except csv.Error as err:
        raise CellError(SYNONYMS_COLUMN, f"not a comma-separated list: {err}") from None
    words = [word.strip() for word in words]
    if problem := limits.synonym_group_problem(words):
        raise CellError(SYNONYMS_COLUMN, problem)
    return words


def format_synonym_row(words: Iterable[str]) -> str:
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="").writerow(words)
    return out.getvalue()


# --- rows -> QnAs ------------------------------------------------------------------------


def header_kind(names: Sequence[str]) -> str | None:
    """"qnas" for a Question/Answer header, "synonyms" for a lone Synonyms header, else None."""
    lowered = [name.strip().lower() for name in names]
    if {"question", "answer"} <= set(lowered):
        return "qnas"
    if [name for name in lowered if name] == [SYNONYMS_COLUMN.lower()]:
        return "synonyms"
    return None


@dataclass
class _Row:
    line: int
    qna: QnA  # the row's QnA-level fields, normalised; the group's questions are set at the end


@dataclass
class _Group:
    first: _Row
    questions: list[str] = field(default_factory=list)


def _parse_header(names: Sequence[str], line: int, fail: Fail) -> dict[str, int]:
    if not any(name.strip() for name in names):
        raise fail("expected a header row naming the columns (Question, Answer, ...) or 'Synonyms'", line, None)
    columns: dict[str, int] = {}
    for index, raw in enumerate(names):
        name = _BY_LOWER.get(raw.strip().lower())
        if name is None:
            raise fail(f"unknown column {raw.strip()!r}; expected some of {', '.join((*COLUMNS, KIND_COLUMN))}",
                       line, index)
        if name in columns:
            raise fail(f"column {name!r} appears twice", line, index)
        columns[name] = index
    for name in REQUIRED_COLUMNS:
        if name not in columns:
            raise fail(f"the header has no {name!r} column", line, None)
    return columns


def _parse_row(columns: dict[str, int], values: Sequence[str], text: Callable[[str], str] = unescape
               ) -> tuple[str, QnA]:
    """One row -> (its question, a QnA holding its QnA-level fields).  Raises CellError.  ``text`` reads a text
    cell, as ``table_rows``' ``cell`` wrote it: ``unescape`` where a newline is ``\\n`` (QnA Maker's TSV and
    workbooks), the CSV's own reader where cells are quoted (``csv_file.read_cell``)."""

    def cell(name: str) -> str:
        return values[columns[name]] if name in columns else ""

    question = text(cell("Question")).strip()
    if problem := limits.question_problem(question):
        raise CellError("Question", problem)
    answer = text(cell("Answer")).strip()
    if problem := limits.answer_problem(answer):
        raise CellError("Answer", problem)
    source = text(cell("Source")).strip()
    if problem := limits.source_problem(source):
        raise CellError("Source", problem)
    metadata = parse_metadata(text(cell("Metadata")))
    suggestions = cell("SuggestedQuestions").strip()
    prompts = cell("Prompts").strip()
    context_only = cell("IsContextOnly").strip()
    qna = QnA(
        questions=[],
        answer=answer,
        id=parse_qna_id(cell("QnaId").strip(), "QnaId"),
        source=source,
        metadata=metadata,
        dialog=Dialog(
            is_context_only=parse_bool(context_only, "IsContextOnly") if context_only else False,
            prompts=parse_prompts(parse_json_cell(prompts, "Prompts"), "Prompts") if prompts else [],
        ),
        suggested_questions=(
            check_suggestions(parse_json_cell(suggestions, "SuggestedQuestions"), "SuggestedQuestions")
            if suggestions
            else []
        ),
        kind=parse_kind(cell(KIND_COLUMN), KIND_COLUMN),
    )
    return question, qna.normalised()


# The QnA-level fields, with the column that carries each, for grouping and conflict reports.
_QNA_FIELDS: tuple[tuple[str, Callable[[QnA], Any]], ...] = (
    ("Answer", lambda q: q.answer),
    ("Source", lambda q: q.source),
    ("Metadata", lambda q: sorted(q.metadata.items())),
    ("SuggestedQuestions", lambda q: json.dumps(q.suggested_questions, sort_keys=True)),
    ("IsContextOnly", lambda q: q.dialog.is_context_only),
    ("Prompts", lambda q: [(p.display_order, p.qna_id, p.display_text) for p in q.dialog.prompts]),
    (KIND_COLUMN, lambda q: q.kind),
)


def _group_key(qna: QnA) -> tuple:
    if qna.id is not None:
        return ("id", qna.id)
    return ("content", *(repr(get(qna)) for _, get in _QNA_FIELDS))


def read_table(
    header: Sequence[str],
    rows: Iterable[tuple[int, Sequence[str]]],
    fail: Fail,
    header_line: int = 1,
    text: Callable[[str], str] = unescape,
) -> list[QnA]:
    """Header + (line, cells) rows -> QnAs, grouped as the module docstring explains.

    ``rows`` must hold only non-blank rows; cells are strings ("" for empty); ``text``: as ``_parse_row``'s.
    """
    columns = _parse_header(header, header_line, fail)
    groups: dict[tuple, _Group] = {}
    for line, values in rows:
        if len(values) != len(columns):
            raise fail(
                f"expected {len(columns)} fields as in the header, found {len(values)}",
                line,
                min(len(values), len(columns)),
            )
        try:
            question, qna = _parse_row(columns, values, text)
        except CellError as err:
            raise fail(str(err), line, columns[err.path.split("[", 1)[0]]) from None
        row = _Row(line, qna)
        group = groups.setdefault(_group_key(qna), _Group(first=row))
        if group.first is not row:
            _check_same_qna(group.first, row, columns, fail)
        if question:
            group.questions.append(question)
    qnas = []
    for group in groups.values():
        group.first.qna.questions = group.questions
        qnas.append(group.first.qna)
    return qnas


def _check_same_qna(first: _Row, row: _Row, columns: dict[str, int], fail: Fail) -> None:
    for name, get in _QNA_FIELDS:
        if get(first.qna) != get(row.qna):
            raise fail(
                f"{name}: differs from line {first.line}, which has the same QnaId {row.qna.id}",
                row.line,
                columns[name],
            )


# --- QnAs -> rows ------------------------------------------------------------------------


def header(content: KnowledgeBaseContent) -> list[str]:
    """The header row ``table_rows`` writes under: QnA Maker's columns, and ``Kind`` when there are passages."""
    return [*COLUMNS, KIND_COLUMN] if _has_passages(content) else list(COLUMNS)


def _has_passages(content: KnowledgeBaseContent) -> bool:
    return any(qna.kind == "passage" for qna in content.qnas)


def table_rows(content: KnowledgeBaseContent, cell: Callable[[str], str] = escape) -> list[list[str]]:
    """One row per question (a QnA without questions gets one row with an empty Question), under ``header``.

    Ids are written only when the QnA has one; ``cell`` writes a text cell: ``escape`` for a TSV, ``escape`` keeping
    line breaks for a workbook, ``csv_file.inert_cell`` for a CSV (which quotes its cells and escapes nothing).
    """
    rows = []
    kinds = _has_passages(content)
    for qna in content.qnas:
        shared = [
            cell(qna.answer),
            cell(qna.source),
            cell(format_metadata(qna.metadata)),
            _compact_json(qna.suggested_questions),
            str(qna.dialog.is_context_only),
            _compact_json(prompts_to_json(qna.dialog.prompts)),
            "" if qna.id is None else str(qna.id),
            *(["passage" if qna.kind == "passage" else ""] if kinds else []),
        ]
        for question in qna.questions or [""]:
            rows.append([cell(question), *shared])
    return rows


def _compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# --- bytes -> text -----------------------------------------------------------------------

_BOMS = ((b"\xef\xbb\xbf", "utf-8"), (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"))


def decode_text(data: bytes, name: str) -> str:
    """UTF-8 (BOM optional), or UTF-16 with a BOM (Excel's "Unicode Text");
    undecodable bytes raise a FormatError naming their line and column."""
    encoding = "utf-8"
    for bom, bom_encoding in _BOMS:
        if data.startswith(bom):
            data, encoding = data[len(bom) :], bom_encoding
            break
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as err:
        before = data[: err.start].decode(encoding, errors="replace")
        line_start = before.rfind("\n") + 1
        raise FormatError(
            f"not valid {encoding.upper()} text (byte 0x{data[err.start]:02x}); save the file as UTF-8",
            file=name,
            line=before.count("\n") + 1,
            column=len(before) - line_start + 1,
        ) from None
