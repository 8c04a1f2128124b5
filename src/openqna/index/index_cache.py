"""The search indexes of one process, derived from a store and kept current (DESIGN decision 7).

The store is the source of truth and only reads and writes rows; this cache owns what is
derived from them.  It holds one ``MemIndex`` per knowledge base deployment, checks the
store's version (its change sequence) on every call and, when the version moved, catches
the index up from the records whose content hash changed, or rebuilds it when too much
changed.  Indexes of large knowledge bases are saved beside the data
(``index/saved_index.py``), so a restart loads them instead of rebuilding.

An engine that searches vectors itself (PostgreSQL's pgvector) is handed in as
``nearest``; every index the cache makes asks it for candidates first.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterator
from datetime import datetime
from functools import partial
from typing import Any

import numpy as np

from openqna.filters.match import Filter
from openqna.index import saved_index
from openqna.index.analyze import exact_key
from openqna.index.memindex import IndexRecord, MemIndex
from openqna.store.base import LIVE, IndexRow, IndexSource, NearestNeighbours

BUILD_BATCH = 50_000  # records read and indexed at a time when an index is built (MemIndex.build)

NearestRows = Callable[[int, str, MemIndex, str, np.ndarray, int, Filter | None, np.ndarray], np.ndarray | None]
Records = tuple[dict[int, IndexRecord], dict[int, str], int]  # records by id, their content hashes, vector dimension


def engine_search(store: IndexSource) -> NearestRows | None:
    """The store's own nearest-neighbour search when its engine has one (pgvector), else None."""
    return store.nearest_rows if isinstance(store, NearestNeighbours) else None


class IndexCache:
    """The indexes of ``store``'s deployments, each consistent with the store when ``get`` returns it.

    Safe to share across threads: an index is built or caught up by one thread while the
    others wait for it, and an index once returned answers the same until it is replaced.
    """

    def __init__(self, store: IndexSource, *, nearest: NearestRows | None = None):
        self.store = store
        self.nearest = nearest
        self._lock = threading.Lock()
        self._indexes: dict[tuple[int, str], MemIndex] = {}
        self._saved = None if store.index_dir is None else saved_index.SavedIndexes(store.index_dir, store.instance)

    def get(self, project: str, deployment: str = LIVE) -> MemIndex:
        """The index of ``project``/``deployment``, brought up to date if the store moved since it was built."""
        pid, version = self.store.current(project, deployment)
        key = (pid, deployment)
        index = self._indexes.get(key)
        if index is not None and index.version == version:
            return index
        with self._lock:
            index = self._indexes.get(key)
            if index is None or index.version != version:
                index = self._refresh(pid, deployment, index)
                if self.nearest is not None:
                    # a proxy, not the index: a reference from the index to itself would keep an index this cache
                    # replaced (gigabytes at a million records) alive until the cyclic garbage collector ran
                    index.nearest_rows = partial(self.nearest, pid, deployment, weakref.proxy(index))
                self._indexes[key] = index
        return index

    def saved(self) -> list[tuple[str, str]]:
        """(project, deployment) of every index saved on disk: the large ones worth loading at start."""
        if self._saved is None:
            return []
        found = []
        for project in self.store.list_projects():
            pid = self.store.current(project.name)[0]
            deployments = [LIVE] + [d.name for d in self.store.list_deployments(project.name)]
            found += [(project.name, d) for d in deployments if self._saved.saved(pid, d)]
        return found

    def drop(self, project_id: int) -> None:
        """Drop the indexes of a deleted project, in memory and on disk (its id may be given to another)."""
        with self._lock:
            for key in [k for k in self._indexes if k[0] == project_id]:
                del self._indexes[key]
            if self._saved is not None:
                self._saved.drop(project_id)

    def _refresh(self, pid: int, deployment: str, old: MemIndex | None) -> MemIndex:
        """``old`` caught up with the records whose content hash changed, or an index built from scratch when much
        changed; everything is read in one transaction, with the version it shows."""
        with self.store.read_index_rows(pid, deployment) as rows:
            version = rows.version
            if old is None and self._saved is not None:  # first search in this process: start from the saved index
                old = self._saved.load(pid, deployment)
                if old is not None and old.version == version:
                    return old
            dates = _date_columns(rows.settings())
            if old is not None and old.hashes is not None and old.n:
                update = incremental_update(old, rows.content_hashes(), version,
                                            lambda ids: index_records(rows.rows(ids=ids), dates))
                if update is not None:
                    return update
            dim = rows.dim()
            hashes: dict[int, str] = {}
            batches = record_batches(rows.record_ids(), lambda span: index_records(rows.rows(id_range=span), dates), hashes)
            index = MemIndex.build(batches, dim, version, hashes)
        if self._saved is not None:
            self._saved.built(index, pid, deployment)
        return index


def record_batches(ids: list[int], read: Callable[[tuple[int, int]], Records],
                   hashes: dict[int, str]) -> Iterator[list[IndexRecord]]:
    """The records of ``ids`` (ascending), BUILD_BATCH at a time, for ``MemIndex.build``.

    ``read((first, last))`` reads the records with ids in that range; their content hashes are
    added to ``hashes``.
    """
    for start in range(0, len(ids), BUILD_BATCH):
        span = ids[start:start + BUILD_BATCH]
        records, batch_hashes, _ = read((span[0], span[-1]))
        hashes.update(batch_hashes)
        yield list(records.values())


def incremental_update(old: MemIndex, hashes: dict[int, str], version: int,
                       fetch: Callable[[list[int]], Records]) -> MemIndex | None:
    """``old`` brought to the records whose content hashes are ``hashes``; None when a rebuild is cheaper.

    ``fetch(ids)`` reads those records from the store: (records, their hashes, vector dimension).
    Content hashes cover everything the index reads (text, metadata, source, dialog, fields,
    embedder), so records whose hash did not change are kept as they are.
    """
    old_hashes = old.hashes
    if old_hashes is None:  # built without content hashes: nothing tells what changed
        return None
    changed = [rid for rid, h in hashes.items() if old_hashes.get(rid) != h]
    removed = [rid for rid, h in old_hashes.items() if hashes.get(rid) != h]
    if len(changed) + len(removed) > max(1000, len(hashes) // 4):
        return None
    records, fetched, dim = fetch(changed)
    if dim and dim != old.dim:
        return None
    kept = {rid: h for rid, h in old_hashes.items() if hashes.get(rid) == h}
    return old.updated(removed, list(records.values()), version, {**kept, **fetched})


def _date_columns(settings: dict[str, Any]) -> list[str]:
    return [c["name"] for c in (settings.get("schema") or {}).get("columns", []) if c["type"] == "DateTime"]


def index_records(rows: list[IndexRow], dates: list[str]) -> Records:
    """Stored rows as index records (with their content hashes and the vectors' dimension).  DateTime columns are
    parsed once here, not on every filter evaluation."""
    records: dict[int, IndexRecord] = {}
    hashes: dict[int, str] = {}
    dim = 0
    for row in rows:
        fields = row.fields
        for name in dates:
            if isinstance(fields.get(name), str):
                fields[name] = datetime.fromisoformat(fields[name])
        hashes[row.id] = row.content_hash
        records[row.id] = IndexRecord(row.id, row.kind, row.source, row.metadata, row.context_only,
                                      [exact_key(q) for q in row.questions], row.q_vectors, row.q_terms,
                                      row.a_vector, row.a_terms, fields, row.mq_vectors, row.ma_vector,
                                      row.uq_vectors, row.ua_vector)
        if row.a_vector is not None:
            dim = row.a_vector.shape[0]
        elif row.q_vectors:
            dim = row.q_vectors[-1].shape[0]
    return records, hashes, dim
