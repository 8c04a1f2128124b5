"""QnA Maker TSV files: QnA files and synonym files.

A QnA file is tab-separated with a header row (see ``table`` for the columns and how rows
become QnAs); a synonym file has the single header ``Synonyms`` and one comma-separated,
optionally quoted group per line.  There is no quoting: a field ends at the next tab, a
row at the next newline (LF or CRLF), which is why newlines inside text are written as
``\\n``, a run of backslashes before an ``n`` or a newline is doubled so that ``C:\\new``
survives (``qna_table``, "Newlines and backslashes"), and tabs inside text are written as a
space (QnA Maker has no tab escape).  Tabs, and carriage returns (which become newlines), are
all of the text that a TSV export loses.  Blank lines are skipped; errors name the
1-based line (header = 1) and field.
"""

from __future__ import annotations

from openqna.formats import limits, qna_table
from openqna.formats.qna_table import CellError
from openqna.records import FormatError, KnowledgeBaseContent, QnA


def read_tsv(data: bytes | str, name: str = "upload.tsv") -> KnowledgeBaseContent:
    text = qna_table.decode_text(data, name) if isinstance(data, bytes) else data.removeprefix("\ufeff")
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    header = lines[0].split("\t")
    body = [(number, line) for number, line in enumerate(lines[1:], start=2) if line.strip("\t ")]

    def fail(message: str, line: int, column: int | None) -> FormatError:
        return FormatError(message, file=name, line=line, column=None if column is None else column + 1)

    if qna_table.header_kind(header) == "synonyms":
        synonyms = []
        for number, line in body:
            try:
                synonyms.append(qna_table.parse_synonym_row(line))
            except CellError as err:
                raise fail(str(err), number, 0) from None
        return KnowledgeBaseContent(synonyms=synonyms)
    if [h.strip().lower() for h in header] == ["scenario", "response"]:
        return _scenario_responses(body, fail)
    rows = [(number, line.split("\t")) for number, line in body]
    return KnowledgeBaseContent(qnas=qna_table.read_table(header, rows, fail))


def _scenario_responses(body: list[tuple[int, str]], fail) -> KnowledgeBaseContent:
    """QnA Maker's chit-chat ``Scenario<TAB>Response`` files: each response answers its scenario.

    The scenario name ("Bot_Age") becomes the question ("Bot Age"), tagged as chit-chat the
    way QnA Maker tagged its chit-chat QnAs; several responses to one scenario stay separate
    QnAs, since they are alternatives, not alternate questions.
    """
    qnas = []
    for number, line in body:
        cells = line.split("\t")
        if len(cells) != 2 or not cells[0].strip() or not cells[1].strip():
            raise fail("expected a scenario and a response separated by one tab", number, None)
        scenario, response = cells[0].strip(), qna_table.unescape(cells[1]).strip()
        if problem := limits.answer_problem(response):
            raise fail(f"Response: {problem}", number, 1)
        qnas.append(QnA([scenario.replace("_", " ")], response,
                        metadata={"editorial": "chitchat", "scenario": scenario}).normalised())
    return KnowledgeBaseContent(qnas=qnas)


def write_tsv(content: KnowledgeBaseContent) -> str:
    """The QnAs as a QnA Maker TSV with the full newer column set, one row per question."""
    rows = [qna_table.header(content), *qna_table.table_rows(content)]
    return "".join("\t".join(cell.replace("\t", " ") for cell in row) + "\n" for row in rows)


def write_synonyms_tsv(content: KnowledgeBaseContent) -> str:
    """The synonym groups as a QnA Maker synonyms TSV (``"word","other word"`` per line)."""
    lines = [qna_table.SYNONYMS_COLUMN, *(qna_table.format_synonym_row(group) for group in content.synonyms)]
    return "".join(line + "\n" for line in lines)
