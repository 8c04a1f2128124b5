"""The core's front door: ``Service``, every use case over one store and one embedder, no wire dialect here.

Surfaces (the Azure routes, the CLI, the tools) translate their requests into these calls.  The use
cases live one per file over a shared state (``kb/service_base.py``): writing records
(``kb/writing.py``), searching as tools do (``kb/searching.py``) and asking as Azure does
(``kb/asking.py``).  The request and answer types are re-exported here, where callers have always
found them.
"""

from __future__ import annotations

from openqna.kb.asking import Answer, Asking, AskRequest, SpanRequest, TextAnswer, passages_of
from openqna.kb.searching import Hit, KnowledgeBaseInfo, Searching
from openqna.kb.service_base import QuerySpace, ServiceBase, taking_turns
from openqna.kb.writing import EMBED_BATCH, ImportReport, Writing, content_hash

__all__ = ["EMBED_BATCH", "Answer", "AskRequest", "Hit", "ImportReport", "KnowledgeBaseInfo", "QuerySpace",
           "Service", "ServiceBase", "SpanRequest", "TextAnswer", "content_hash", "passages_of", "taking_turns"]


class Service(Writing, Searching, Asking):
    """Writing, searching and asking one store's knowledge bases with one embedder (and the multilingual space).

    ``multilingual``: the encoder of the multilingual space (``openqna.ranking.multilingual``; default: the bundled
    one, loaded on first need).
    """
