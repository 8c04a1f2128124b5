"""Documents in, passages and QnA pairs out: the ingestion side of unstructured sources.

``parse_document`` turns a PDF, Word, HTML, Markdown or text upload into a
``ParsedDocument`` (headings, paragraphs, list items and tables with page numbers; "Q:"/"A:"
pairs made headings by ``marked_pairs``);
``chunk_document`` cuts it into section-aligned passages that fit the embedder's
window; ``extract_qnas`` finds FAQ-style QnA pairs with multi-turn follow-ups.  Nothing
here stores or embeds: the service decides what to keep and when to re-embed (by
``Chunk.content_hash``).
"""

from openqna.ingest.chunker import Chunk, chunk_document
from openqna.ingest.faq_pairs import ExtractedQnA, extract_qnas, link_prompts
from openqna.ingest.parse import parse_document
from openqna.ingest.parsed import MAX_OTHER_BYTES, MAX_PDF_BYTES, Block, DocumentError, ParsedDocument
from openqna.ingest.token_count import TokenCounter, count_tokens

__all__ = [
    "MAX_OTHER_BYTES",
    "MAX_PDF_BYTES",
    "Block",
    "Chunk",
    "DocumentError",
    "ExtractedQnA",
    "ParsedDocument",
    "TokenCounter",
    "chunk_document",
    "count_tokens",
    "extract_qnas",
    "link_prompts",
    "parse_document",
]
