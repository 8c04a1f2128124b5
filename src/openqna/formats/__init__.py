"""Import and export of knowledge bases in the file formats QnA Maker and Azure use.

``read_file`` picks the reader from the file name: ``.tsv``/``.txt`` (tab-separated QnA or
synonym files), ``.csv`` (the same columns, comma-separated: ``csv_file``), ``.xlsx``, ``.json`` (Azure export file or import body) and ``.zip`` (QnA
Maker's KB replica: ``KnowledgeBaseReplica.xlsx``, or ``QnAs.tsv`` plus ``Synonyms.tsv``, with
``Settings.tsv`` (the default answer and language, ``replica_settings``) and the text of its unstructured
documents in ``UnstructuredContent/``, which the importer makes passages).  Every reader returns normalised
records (and what else its file carries: project settings, documents, notes on what no import keeps) and raises
``FormatError`` with
the file, line and column of the first problem.  The writers produce the same formats, so
read -> write -> read gives equal content.
"""

from __future__ import annotations

import json
import zipfile
from io import BytesIO
from pathlib import Path, PurePosixPath
from typing import Literal

from openqna.formats import limits, zip_limits
from openqna.formats.azure_json import read_json, write_json
from openqna.formats.csv_file import read_csv, write_csv
from openqna.formats.replica_settings import read_settings_tsv
from openqna.formats.tsv import read_tsv, write_synonyms_tsv, write_tsv
from openqna.formats.xlsx import read_xlsx, write_xlsx
from openqna.records import FormatError, KnowledgeBaseContent, UnstructuredFile

__all__ = [
    "ExportFormat",
    "IMPORT_FORMATS",
    "export_archive",
    "export_bytes",
    "import_format_of",
    "is_archive",
    "read_csv",
    "read_file",
    "read_json",
    "read_tsv",
    "read_xlsx",
    "write_csv",
    "write_json",
    "write_synonyms_tsv",
    "write_tsv",
    "write_xlsx",
]

ExportFormat = Literal["json", "tsv", "excel", "csv"]  # csv: the command line's only
AssetKind = Literal["qnas", "synonyms"]

_MAX_BYTES = {
    ".tsv": limits.MAX_TEXT_FILE_BYTES,
    ".txt": limits.MAX_TEXT_FILE_BYTES,
    ".csv": limits.MAX_TEXT_FILE_BYTES,
    ".xlsx": limits.MAX_XLSX_FILE_BYTES,
}
# a replica holds a workbook or two TSVs, and the text of its unstructured documents: what all its members may
# unpack to together
REPLICA_MAX_UNPACKED = 4 * limits.MAX_TEXT_FILE_BYTES + limits.MAX_XLSX_FILE_BYTES
UNSTRUCTURED_FOLDER = "unstructuredcontent/"
_MEDIA_TYPES = {
    "json": "application/json",
    "tsv": "text/tab-separated-values; charset=utf-8",
    "csv": "text/csv; charset=utf-8",
    "excel": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
}


def read_file(path: Path | str, data: bytes | None = None) -> KnowledgeBaseContent:
    """Read an import file; ``data`` are its bytes when it was uploaded rather than stored at ``path``."""
    name = Path(path).name
    if data is None:
        data = Path(path).read_bytes()
    return _read(name, data)


QNA_SUFFIXES = (".tsv", ".txt", ".csv", ".xlsx", ".json", ".zip")  # the QnA files read_file reads


def _read(name: str, data: bytes) -> KnowledgeBaseContent:
    suffix = PurePosixPath(name).suffix.lower()
    limit = _MAX_BYTES.get(suffix)
    if limit is not None and len(data) > limit:
        raise FormatError(f"the file is {len(data):,} bytes; the limit for {suffix} files is {limit:,}", file=name)
    if suffix in (".tsv", ".txt"):
        return read_tsv(data, name)
    if suffix == ".csv":
        return read_csv(data, name)
    if suffix == ".xlsx":
        return read_xlsx(data, name)
    if suffix == ".json":
        return read_json(data, name)
    if suffix == ".zip":
        return _read_replica(data, name)
    raise FormatError(f"unsupported file type {suffix or '(none)'!r}; expected {', '.join(QNA_SUFFIXES)}", file=name)


def _read_replica(data: bytes, name: str) -> KnowledgeBaseContent:
    """QnA Maker's "KB replica" export: the workbook, or the QnAs and Synonyms TSVs."""
    # what every member really unpacks to, before any is read: a member whose header lies about its size is a
    # format error here, not a crash when it is read (a workbook inside is checked again as a workbook)
    zip_limits.check(data, lambda message: FormatError(message, file=name), max_unpacked=REPLICA_MAX_UNPACKED,
                     max_tags=REPLICA_MAX_UNPACKED, unreadable="not a readable .zip archive")
    try:
        archive = zipfile.ZipFile(BytesIO(data))
    except zipfile.BadZipFile:
        raise FormatError("not a readable .zip archive", file=name) from None
    members = {info.filename.lower(): info for info in archive.infolist() if "/" not in info.filename}

    def member(filename: str) -> KnowledgeBaseContent | None:
        info = members.get(filename.lower())
        if info is None:
            return None
        inner = f"{name}/{info.filename}"
        limit = _MAX_BYTES[PurePosixPath(filename).suffix]
        if info.file_size > limit:
            raise FormatError(f"the file is {info.file_size:,} bytes; the limit is {limit:,}", file=inner)
        return _read(inner, archive.read(info))

    if (workbook := member("KnowledgeBaseReplica.xlsx")) is not None:
        content = workbook
        read = {"knowledgebasereplica.xlsx"}
    else:
        qnas, synonyms = member("QnAs.tsv"), member("Synonyms.tsv")
        if qnas is None and synonyms is None:
            raise FormatError("the archive holds neither KnowledgeBaseReplica.xlsx nor QnAs.tsv", file=name)
        content = qnas or KnowledgeBaseContent()  # a synonyms export holds Synonyms.tsv alone
        if synonyms is not None:
            content.synonyms = synonyms.synonyms
        read = {"qnas.tsv", "synonyms.tsv"}
        if (info := members.get("settings.tsv")) is not None:
            content.settings, content.notes = read_settings_tsv(archive.read(info), f"{name}/{info.filename}")
            read.add("settings.tsv")
    content.documents = _unstructured(archive, name)
    skipped = [info.filename for info in archive.infolist() if not info.is_dir()
               and info.filename.lower() not in read and not _is_unstructured_text(info.filename)]
    if skipped:
        content.notes.append(f"{name}: not imported: {', '.join(skipped)} (a replica's QnAs.tsv, Synonyms.tsv, "
                             "Settings.tsv, KnowledgeBaseReplica.xlsx and UnstructuredContent/*.txt are read)")
    return content


def _is_unstructured_text(filename: str) -> bool:
    lowered = filename.lower()
    return lowered.startswith(UNSTRUCTURED_FOLDER) and lowered.endswith(".txt") and "/" not in lowered[
        len(UNSTRUCTURED_FOLDER):]


def _unstructured(archive: zipfile.ZipFile, name: str) -> list[UnstructuredFile]:
    """The documents of ``UnstructuredContent/``: QnA Maker keeps each unstructured source's text there as
    ``<source>.txt`` (``botframework-blog.pdf.txt``), so the source is the name without that ``.txt``.  The text is
    the Markdown QnA Maker extracted (its headings as ``#``, its links as ``[text](url)``), so it is read as Markdown:
    its passages get their sections' titles, as the document itself would have given them."""
    documents = []
    for info in archive.infolist():
        if info.is_dir() or not _is_unstructured_text(info.filename):
            continue
        inner = f"{name}/{info.filename}"
        if info.file_size > limits.MAX_TEXT_FILE_BYTES:
            raise FormatError(f"the file is {info.file_size:,} bytes; the limit is {limits.MAX_TEXT_FILE_BYTES:,}",
                              file=inner)
        filename = PurePosixPath(info.filename).name
        stem = filename[: -len(".txt")]
        source = stem if PurePosixPath(stem).suffix else filename
        documents.append(UnstructuredFile(f"{stem}.md", archive.read(info), source))
    return documents


def is_archive(data: bytes) -> bool:
    """A .zip that is not itself a workbook (an .xlsx is a zip too), whatever the file was called."""
    if data[:4] != b"PK\x03\x04":
        return False
    try:
        return "[Content_Types].xml" not in zipfile.ZipFile(BytesIO(data)).namelist()
    except zipfile.BadZipFile:
        return False


# Azure's import formats (the ``format`` parameter of ``:import``), the suffix each is read as, and how to name it
IMPORT_FORMATS = {"json": (".json", "a JSON file"), "tsv": (".tsv", "a tab-separated (TSV) file"),
                  "excel": (".xlsx", "an Excel workbook")}


def import_format_of(data: bytes) -> str | None:
    """The ``:import`` format that ``data`` plainly is (``IMPORT_FORMATS``), by its first bytes: an Excel workbook,
    JSON, or UTF-8 text with a tab on its first line; None when it is none of these plainly (a KB replica's .zip,
    a text that is neither), which the reader of the format asked for then reads, and refuses if it must."""
    if data[:4] == b"PK\x03\x04":
        try:
            return "excel" if "xl/workbook.xml" in zipfile.ZipFile(BytesIO(data)).namelist() else None
        except zipfile.BadZipFile:
            return None
    head = data[:4096].lstrip(b"\xef\xbb\xbf \t\r\n")
    if head[:1] in (b"{", b"["):
        return "json"
    try:
        first = data[:4096].decode("utf-8").split("\n", 1)[0]
    except UnicodeDecodeError as exc:  # cut inside a character at the 4,096th byte is no sign
        if exc.start < 4090:
            return None
        first = data[: exc.start].decode("utf-8").split("\n", 1)[0]
    return "tsv" if "\t" in first else None


def export_archive(
    content: KnowledgeBaseContent,
    fmt: ExportFormat,
    asset_kind: AssetKind = "qnas",
    project_metadata: dict | None = None,
) -> tuple[bytes, str, str]:
    """What Azure's ``:export`` delivers: the JSON file, or for ``tsv`` and ``excel`` a .zip.

    The REST spec calls those formats a "knowledge base replica including all assets", and the
    SDK's export sample opens them with ``zipfile``; the archive uses QnA Maker's replica layout
    (``QnAs.tsv`` and ``Synonyms.tsv``, or ``KnowledgeBaseReplica.xlsx``), which ``read_file``
    and ``:import`` read back.
    """
    if fmt == "json":
        return export_bytes(content, fmt, asset_kind, project_metadata)
    buffer = BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        if fmt == "excel":
            archive.writestr("KnowledgeBaseReplica.xlsx", export_bytes(content, "excel", asset_kind)[0])
        else:
            if asset_kind != "synonyms":
                archive.writestr("QnAs.tsv", export_bytes(content, "tsv", "qnas")[0])
            archive.writestr("Synonyms.tsv", export_bytes(content, "tsv", "synonyms")[0])
    return buffer.getvalue(), "KnowledgeBase.zip", "application/zip"


def export_bytes(
    content: KnowledgeBaseContent,
    fmt: ExportFormat,
    asset_kind: AssetKind = "qnas",
    project_metadata: dict | None = None,
) -> tuple[bytes, str, str]:
    """A download: (bytes, file name, media type), mirroring Azure's ``:export?format=&assetKind=``.

    JSON and Excel hold both QnAs and synonyms in one file; a TSV file holds one kind, so
    ``asset_kind`` picks the QnAs or the synonyms file there.  ``asset_kind="synonyms"``
    leaves the QnAs out of every format.  TSV starts with a UTF-8 BOM, as QnA Maker's
    exports do, so Excel opens it as UTF-8.
    """
    if asset_kind == "synonyms":
        content = KnowledgeBaseContent(synonyms=content.synonyms)
    if fmt == "json":
        written = write_json(content, project_metadata)
        if asset_kind == "synonyms":  # no "Qnas": [] that an import would read as "no QnAs any more"
            written["Assets"].pop("Qnas", None)
        body = json.dumps(written, ensure_ascii=False, indent=2).encode("utf-8")
        filename = "KnowledgeBase.json"
    elif fmt == "excel":
        body, filename = write_xlsx(content), "KnowledgeBase.xlsx"
    elif fmt == "tsv":
        text = write_synonyms_tsv(content) if asset_kind == "synonyms" else write_tsv(content)
        body, filename = text.encode("utf-8-sig"), "Synonyms.tsv" if asset_kind == "synonyms" else "QnAs.tsv"
    elif fmt == "csv":  # as the TSV: a BOM, so that Excel reads it as UTF-8
        body = write_csv(content, synonyms=asset_kind == "synonyms").encode("utf-8-sig")
        filename = "Synonyms.csv" if asset_kind == "synonyms" else "QnAs.csv"
    else:
        raise ValueError(f"unknown export format {fmt!r}")
    return body, filename, _MEDIA_TYPES[fmt]
