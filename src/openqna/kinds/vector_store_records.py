"""How an OpenAI vector store's file becomes openqna records: chunks as passages, attributes as typed columns.

* The embedder reads only 256 word pieces of a text.  So a record's answer is the whole chunk
  (the result text; embedded from its start; BM25-indexed in full) and its questions are
  sub-windows of at most 256 MiniLM tokens (32 shared between neighbours, each under the
  section's heading), each embedded.  Retrieval takes the best question unit, so a fact deep in
  an 800-token chunk is found through its window.
* ``fields`` holds ``file_id``, ``filename``, ``chunk_index``, pages, ``attributes`` as given, and
  one typed column per attribute named ``attr_<str|num|bool>_<hex of key>`` (``kb/attribute_columns.py``);
  OpenAI's filters read them through ``attribute_ref``, where_str by the attributes' own keys.

The lifecycle of stores, files and batches is ``kinds/vector_stores.py``; the wire is
``api/openai/vector_stores_api.py``.
"""

from __future__ import annotations

from typing import Any

from openqna.filters.nodes import Ref
from openqna.ingest import Block, ParsedDocument, chunk_document
from openqna.ingest.chunker import Chunk
from openqna.kb.attribute_columns import attribute_column, attribute_fields
from openqna.records import QnA

WINDOW_TOKENS = 256  # what the embedder reads, [CLS] and [SEP] included
WINDOW_OVERLAP = 32


def attribute_ref(key: str, value: object) -> Ref:
    """What a filter on attribute ``key`` with a value like ``value`` reads."""
    return Ref(attribute_column(key, value))


def chunk_record(file_id: str, filename: str, chunk: Chunk, attributes: dict | None) -> QnA:
    """The passage record of one chunk: windows as questions, the chunk as answer, attributes as fields."""
    fields: dict[str, Any] = {"file_id": file_id, "filename": filename, "chunk_index": chunk.ordinal}
    if chunk.page_start is not None:
        fields.update(page_start=chunk.page_start, page_end=chunk.page_end)
    fields.update(attributes=attributes, **attribute_fields(attributes))
    return QnA(embedding_windows(chunk) or [chunk.text], chunk.text, source=file_id, kind="passage", fields=fields)


def embedding_windows(chunk: Chunk) -> list[str]:
    """Sub-windows of ``chunk`` that the embedder reads whole, each under the section's heading."""
    head, sep, body = chunk.text.partition("\n\n")
    blocks = []
    if sep and chunk.heading_path and chunk.heading_path[-1].startswith(head):
        blocks.append(Block("heading", head, level=1))
    else:
        body = chunk.text
    blocks += [Block("paragraph", p) for p in body.split("\n\n") if p.strip()]
    doc = ParsedDocument(chunk.source, None, blocks)
    return [c.text for c in chunk_document(doc, max_tokens=WINDOW_TOKENS, overlap_tokens=WINDOW_OVERLAP)]
