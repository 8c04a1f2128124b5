"""Azure's record-field filters as retrieval evaluates them one record at a time, and ``all_of``.

The nodes themselves are data in ``openqna.filters.nodes`` (new code imports them from there; older
modules still name them through this one, which uses them all).  Metadata keys and values compare
case-insensitively, as Azure stores them lower-cased.
"""

from __future__ import annotations

from openqna.filters.nodes import And, Filter, IdIn, KindIn, MetaEq, Not, Or, SourceIn

__all__ = ["And", "Filter", "IdIn", "KindIn", "MetaEq", "Not", "Or", "SourceIn", "all_of", "matches"]


def all_of(*filters: Filter | None) -> Filter | None:
    """AND of the given filters, skipping None; None when nothing is left."""
    kept = tuple(f for f in filters if f is not None)
    if not kept:
        return None
    return kept[0] if len(kept) == 1 else And(kept)


def matches(f: Filter | None, *, metadata: dict[str, str], source: str, kind: str, record_id: int | None) -> bool:
    """Evaluate a filter against one record (reference semantics for every store).

    ``record_id`` None: a row that names no record (``where.evaluate`` on plain rows); no IdIn holds it.
    """
    if f is None:
        return True
    if isinstance(f, MetaEq):
        return metadata.get(f.key.lower()) == f.value.lower()
    if isinstance(f, SourceIn):
        return source.lower() in {s.lower() for s in f.sources}
    if isinstance(f, KindIn):
        return kind in f.kinds
    if isinstance(f, IdIn):
        return record_id in f.ids
    if isinstance(f, And):
        return all(matches(c, metadata=metadata, source=source, kind=kind, record_id=record_id) for c in f.children)
    if isinstance(f, Or):
        return any(matches(c, metadata=metadata, source=source, kind=kind, record_id=record_id) for c in f.children)
    if isinstance(f, Not):
        return not matches(f.child, metadata=metadata, source=source, kind=kind, record_id=record_id)
    raise TypeError(f"unknown filter node {f!r}")
