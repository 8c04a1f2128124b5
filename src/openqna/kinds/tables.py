"""Typed knowledge bases: tables whose rows carry typed columns and text to embed.

A knowledge base with a schema (MyScale's tables) stores each row as a record of kind
``row``: its title column (if any) is the record's question, its text columns joined are
the answer, and its typed values are the record's ``fields``, which ``where_str`` filters
read.  Loading a file validates every row before anything is written, reports bad rows by
number, and makes the file's rows the records of its source, the file's name unless the load
names another (rows that vanished are deleted, unchanged rows are not re-embedded).
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, NamedTuple

from openqna import strict_json
from openqna.filters.nodes import COLUMN_TYPES, Column
from openqna.filters.values import parse_datetime_text
from openqna.kb.service import Service
from openqna.records import InvalidArgument, QnA, utf8_text

MAX_ROW_ERRORS = 20


@dataclass
class TableSchema:
    columns: list[Column]
    text: list[str]  # columns whose text is embedded and searched
    title: str | None = None  # column shown as the record's title (its "question")

    def to_json(self) -> dict:
        return {"columns": [{"name": c.name, "type": c.type} for c in self.columns], "text": self.text,
                "title": self.title}

    @classmethod
    def from_json(cls, raw: dict) -> "TableSchema":
        return cls([Column(c["name"], c["type"]) for c in raw["columns"]], list(raw["text"]), raw.get("title"))

    def validate(self) -> None:
        names = [c.name for c in self.columns]
        if len(set(names)) != len(names):
            raise InvalidArgument("column names must be unique")
        for name in self.text + ([self.title] if self.title else []):
            col = next((c for c in self.columns if c.name == name), None)
            if col is None or col.type != "String":
                raise InvalidArgument(f"text and title columns must be String columns of the schema; '{name}' is not")
        if not self.text:
            raise InvalidArgument("a table needs at least one text column to embed")


def parse_column(spec: str) -> Column:
    """``name:Type`` as the CLI takes it, e.g. ``pubdate:DateTime`` or ``tags:Array(String)``."""
    name, sep, kind = spec.partition(":")
    if not sep or kind not in COLUMN_TYPES:
        raise InvalidArgument(f"column '{spec}' must be NAME:TYPE with TYPE one of {', '.join(COLUMN_TYPES)}")
    try:
        return Column(name.strip(), kind)  # type: ignore[arg-type]
    except ValueError as exc:
        raise InvalidArgument(str(exc)) from None


def create_table(service: Service, name: str, schema: TableSchema, *, description: str = "") -> None:
    schema.validate()
    project = service.create_project(name, description=description)
    project.settings["schema"] = schema.to_json()
    service.store.update_project(project)


def table_schema(service: Service, name: str) -> TableSchema | None:
    raw = service.store.get_project(name).settings.get("schema")
    return TableSchema.from_json(raw) if raw else None


# -- reading files ------------------------------------------------------------------------------
def read_rows(name: str, data: bytes) -> Iterator[tuple[int, dict | str]]:
    """(row number, raw row) from JSONL, CSV (header row) or Parquet; numbers are 1-based data rows.

    A JSONL line that is not a JSON object comes as the reason instead of a row, so a file's bad
    lines are reported together rather than one per attempt."""
    suffix = Path(name).suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        # lines end at "\n" only (JSON Lines): str.splitlines also cuts at U+2028, U+2029 and U+0085, which JSON allows
        # raw inside a string (json.dumps(ensure_ascii=False) and JavaScript write them so)
        for number, line in enumerate(utf8_text(name, data).split("\n"), start=1):
            if not line.strip():
                continue
            try:
                row = strict_json.loads(line)
            except ValueError as exc:
                yield number, f"not valid JSON ({exc})"
                continue
            yield number, row if isinstance(row, dict) else "expected a JSON object"
    elif suffix == ".csv":
        yield from csv_rows(name, utf8_text(name, data))
    elif suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(io.BytesIO(data))
        except (pa.ArrowException, OSError) as exc:
            raise InvalidArgument(f"{name}: not a readable Parquet file ({exc})") from None
        for number, row in enumerate(table.to_pylist(), start=1):
            yield number, row
    else:
        raise InvalidArgument(f"{name}: rows load from .jsonl, .csv or .parquet files")


def csv_rows(name: str, text: str) -> Iterator[tuple[int, dict | str]]:
    """``read_rows`` for CSV: a row is its header's names with its cells, an empty cell None.

    A row with more cells than the header names comes as the reason instead: csv.DictReader would
    keep the surplus under no name and the row would load without it (an unquoted comma in
    'hello, world' loaded 'hello').  A header that names a column twice is refused for the same
    reason: one of its cells would be dropped.  Blank lines are skipped and not numbered, as
    csv.DictReader did; the reason gives the line, which quoted line breaks can move away from the
    row number.
    """
    lines = _csv_lines(name, text)
    header, _ = next(lines, ([], 0))
    repeated = sorted({c for c in header if header.count(c) > 1})
    if repeated:
        said = ", ".join(f"'{c}' {header.count(c)} times" if header.count(c) > 2 else f"'{c}' twice" for c in repeated)
        raise InvalidArgument(f"{name}: the header names column {said}; name each column once (a repeated column's "
                              "cells would overwrite each other)")
    number = 0
    for cells, line in lines:
        if not cells:
            continue
        number += 1
        if len(cells) > len(header):
            yield number, (f"{len(cells)} cells but the header names {len(header)} columns (line {line}); "
                           'quote a cell that holds a comma, as in "hello, world"')
            continue
        yield number, {k: (None if v == "" else v) for k, v in zip(header, cells)}


def _csv_lines(name: str, text: str) -> Iterator[tuple[list[str], int]]:
    """csv.reader's rows with the line each ends on; its csv.Error (a cell over csv's size limit, as when a quote
    left open reads the rest of the file into one cell) as the file's error, not a traceback."""
    reader = csv.reader(io.StringIO(text))
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise InvalidArgument(f"{name}: not readable as CSV by line {reader.line_num} ({exc}): a quote left open "
                                  "takes the lines after it into its cell, and a cell holds at most "
                                  f"{csv.field_size_limit():,} characters") from None
        yield cells, reader.line_num


def _value(column: Column, raw: Any, from_text: bool) -> Any:
    """``raw`` as the column's type (JSON-storable), or ValueError saying why not."""
    if raw is None:
        return [] if column.type == "Array(String)" else None
    kind = column.type
    if kind == "String":
        if not isinstance(raw, str):
            raise ValueError(f"expected a string, got {raw!r}")
        return raw
    if kind == "Int64":
        if isinstance(raw, bool) or not (isinstance(raw, int) or from_text and isinstance(raw, str)):
            raise ValueError(f"expected an integer, got {raw!r}")
        try:
            value = int(raw)
        except ValueError:
            raise ValueError(f"expected an integer, got {raw!r}") from None
        if not -(2**63) <= value < 2**63:
            raise ValueError(f"{value} is out of the Int64 range")
        return value
    if kind == "Float64":
        if isinstance(raw, bool) or not (isinstance(raw, (int, float)) or from_text and isinstance(raw, str)):
            raise ValueError(f"expected a number, got {raw!r}")
        try:
            value = float(raw)
        except ValueError:
            raise ValueError(f"expected a number, got {raw!r}") from None
        if not math.isfinite(value):
            raise ValueError(f"expected a finite number, got {raw!r}")
        return value
    if kind == "Bool":
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.lower() in ("true", "false", "1", "0"):
            return raw.lower() in ("true", "1")
        raise ValueError(f"expected true or false, got {raw!r}")
    if kind == "DateTime":
        if isinstance(raw, datetime):
            value = raw if raw.tzinfo else raw.replace(tzinfo=timezone.utc)
        elif isinstance(raw, str):
            value = parse_datetime_text(raw)
        else:
            raise ValueError(f"expected a date/time such as '2024-05-01 13:00:00', got {raw!r}")
        return value.astimezone(timezone.utc).replace(microsecond=0).isoformat()
    if isinstance(raw, str) and from_text:  # Array(String) in CSV: a JSON array or a|b|c
        raw = strict_json.loads(raw) if raw.lstrip().startswith("[") else [p for p in raw.split("|") if p]
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise ValueError(f"expected a list of strings, got {raw!r}")
    return list(raw)


def row_record(schema: TableSchema, row: dict, *, source: str, from_text: bool) -> QnA:
    fields: dict[str, Any] = {}
    for column in schema.columns:
        try:
            fields[column.name] = _value(column, row.get(column.name), from_text)
        except ValueError as exc:
            raise ValueError(f"column '{column.name}' ({column.type}): {exc}") from None
    unknown = sorted(set(row) - {c.name for c in schema.columns})
    if unknown:
        raise ValueError(f"unknown column(s) {', '.join(unknown)}; the schema has "
                         f"{', '.join(c.name for c in schema.columns)}")
    text = "\n\n".join(fields[c] for c in schema.text if fields.get(c))
    if not text.strip():
        raise ValueError(f"no text to embed: the text column(s) {', '.join(schema.text)} are empty")
    title = fields.get(schema.title) if schema.title else None
    return QnA([title] if title else [], text, source=source, kind="row", fields=fields)


class RowsLoaded(NamedTuple):
    rows: int  # the file's rows, now all the rows of its source
    embedded: int  # texts sent to the embedder (an unchanged row's are not)
    deleted: int  # rows of the source that the file no longer has
    replaced: int  # rows the source held before the load (0: a new source)
    replaced_source: str  # the source name those rows carried (its case may differ from the load's)


def load_rows(service: Service, kb: str, name: str, data: bytes, *, source: str | None = None,
              progress: bool = False) -> RowsLoaded:
    """Load file ``name``'s rows into table ``kb`` as the rows of ``source`` (default: ``name``), all rows valid or
    nothing is written.

    The rows that ``source`` held before are replaced: a corrected file loaded again updates its rows and deletes the
    ones it dropped, and loading it twice changes nothing.  Rows are not keyed by their own values (a table need not
    have a key column), so the source is what tells a corrected file from another one; two files of the same name
    (monthly exports) need sources of their own.  Names that differ only in case are one source, as the store
    matches rows to records so (``Writing.plan_upsert``): compared exactly, a load of PRODUCTS.csv took over the
    products.csv rows it repeated and left the others.
    """
    source = name if source is None else source.strip()
    if not source:
        raise InvalidArgument("a load's source (--source) must not be empty: it names the rows the load replaces, "
                              "such as 2024-02")
    schema = table_schema(service, kb)
    if schema is None:
        raise InvalidArgument(f"'{kb}' has no table schema; create it with `openqna table create`")
    if service.store.get_project(kb).settings.get("connected"):
        raise InvalidArgument(f"'{kb}' is a connected table: its rows live in its own database, and openqna "
                              "never writes there")
    from_text = Path(name).suffix.lower() == ".csv"
    records, errors = [], []
    for number, row in read_rows(name, data):
        if isinstance(row, str):
            errors.append(f"row {number}: {row}")
            continue
        try:
            records.append(row_record(schema, row, source=source, from_text=from_text))
        except ValueError as exc:
            errors.append(f"row {number}: {exc}")
    if errors:
        more = f" (and {len(errors) - MAX_ROW_ERRORS} more)" if len(errors) > MAX_ROW_ERRORS else ""
        raise InvalidArgument(f"{name}: {len(errors)} bad row(s), nothing was loaded: "
                              + "; ".join(errors[:MAX_ROW_ERRORS]) + more)
    existing = [q for q in service.store.list_qnas(kb) if q.source.lower() == source.lower()]
    report = service.upsert(kb, records, progress=progress)
    stale = sorted({q.id for q in existing} - set(report.ids))
    if stale:
        service.store.delete_qnas(kb, stale)
    return RowsLoaded(len(records), report.embedded, len(stale), len(existing),
                      " and ".join(sorted({q.source for q in existing})))
