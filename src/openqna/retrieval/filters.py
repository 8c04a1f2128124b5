"""Filters are data (DESIGN decision 5).

Every surface turns its filter syntax (Azure metadata/source filters today,
``where_str`` later) into this small AST; each store evaluates it its own way
(the in-memory index with sets of record ids, PostgreSQL with bound parameters).
Metadata keys and values compare case-insensitively, as Azure stores them lower-cased.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union


@dataclass(frozen=True)
class MetaEq:
    """Metadata ``key`` equals ``value`` (both compared lower-cased)."""

    key: str
    value: str


@dataclass(frozen=True)
class SourceIn:
    """The record's source is one of ``sources`` (exact, case-insensitive)."""

    sources: tuple[str, ...]


@dataclass(frozen=True)
class KindIn:
    """The record is of one of these kinds ("qna", "passage")."""

    kinds: tuple[str, ...]


@dataclass(frozen=True)
class IdIn:
    ids: tuple[int, ...]


@dataclass(frozen=True)
class And:
    children: tuple["Filter", ...]


@dataclass(frozen=True)
class Or:
    children: tuple["Filter", ...]


@dataclass(frozen=True)
class Not:
    child: "Filter"


Filter = Union[MetaEq, SourceIn, KindIn, IdIn, And, Or, Not]


def all_of(*filters: Filter | None) -> Filter | None:
    """AND of the given filters, skipping None; None when nothing is left."""
    kept = tuple(f for f in filters if f is not None)
    if not kept:
        return None
    return kept[0] if len(kept) == 1 else And(kept)


def matches(f: Filter | None, *, metadata: dict[str, str], source: str, kind: str, record_id: int) -> bool:
    """Evaluate a filter against one record (reference semantics for every store)."""
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
