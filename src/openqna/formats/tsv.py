"""QnA Maker TSV files: QnA files and synonym files.

A QnA file is tab-separated with a header row (see ``table`` for the columns and how rows
become QnAs); a synonym file has the single header ``Synonyms`` and one comma-separated,
optionally quoted group per line.  There is no quoting: a field ends at the next tab, a
row at the next newline (LF or CRLF), which is why newlines inside text are written as
``\\n`` and tabs inside text are written as a space (QnA Maker has no tab escape; this is
the one place where a TSV export loses anything).  Blank lines are skipped; errors name the
1-based line (header = 1) and field.
"""

from __future__ import annotations

from openqna.formats import table
from openqna.formats.table import CellError
from openqna.records import FormatError, KnowledgeBaseContent


def read_tsv(data: bytes | str, name: str = "upload.tsv") -> KnowledgeBaseContent:
    text = table.decode_text(data, name) if isinstance(data, bytes) else data.removeprefix("\ufeff")
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    header = lines[0].split("\t")
    body = [(number, line) for number, line in enumerate(lines[1:], start=2) if line.strip("\t ")]

    def fail(message: str, line: int, column: int | None) -> FormatError:
        return FormatError(message, file=name, line=line, column=None if column is None else column + 1)

    if table.header_kind(header) == "synonyms":
        synonyms = []
        for number, line in body:
            try:
                synonyms.append(table.parse_synonym_row(line))
            except CellError as err:
                raise fail(str(err), number, 0) from None
        return KnowledgeBaseContent(synonyms=synonyms)
    rows = [(number, line.split("\t")) for number, line in body]
    return KnowledgeBaseContent(qnas=table.read_table(header, rows, fail))


def write_tsv(content: KnowledgeBaseContent) -> str:
    """The QnAs as a QnA Maker TSV with the full newer column set, one row per question."""
    rows = [list(table.COLUMNS), *table.table_rows(content)]
    return "".join("\t".join(cell.replace("\t", " ") for cell in row) + "\n" for row in rows)


def write_synonyms_tsv(content: KnowledgeBaseContent) -> str:
    """The synonym groups as a QnA Maker synonyms TSV (``"word","other word"`` per line)."""
    lines = [table.SYNONYMS_COLUMN, *(table.format_synonym_row(group) for group in content.synonyms)]
    return "".join(line + "\n" for line in lines)
