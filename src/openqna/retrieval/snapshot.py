"""A ``MemIndex`` saved to disk, so a large knowledge base starts in seconds.

Building the index of a large knowledge base reads and parses every record (about 10 s at
100k QnAs) and trains its IVF index; a snapshot skips both.  It is a folder of ``.npy``
arrays opened as memory maps (vectors, postings, record flags: nothing is parsed, and pages
are read from disk only when a query touches them), the faiss IVF index, the small filter
maps, the where_str columns (codes into each column's distinct values, loaded on the first
where_str), and the per-record state (metadata, where_str rows, content hashes) that only
later updates read.

A snapshot is a cache, never the truth: the store keeps one per knowledge base and
deployment, written after a full build, and on start-up it is brought to the store's current
version through the same content-hash diff as any other update (``incremental_update``), or
ignored when too much changed.  Folders are written under a temporary name and renamed into
place, so a reader never sees half a snapshot.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pickle
import shutil
import uuid
from pathlib import Path

import numpy as np

from .memindex import MemIndex, _Ann, _Field, _Postings
from .where_numpy import encode_columns

FORMAT = 4  # 4: IVF codes are fast-scan PQ (3 held 8-bit codes)
log = logging.getLogger("openqna")
# Stores save the index of a knowledge base with at least this many vectors (about 1 s to
# build from the database); smaller ones build faster than a snapshot would pay for.
MIN_VECTORS = 20_000
_FIELD_ARRAYS = ("rows", "matrix", "lengths", "keys", "sum_norms")
_POSTING_ARRAYS = ("tids", "units", "tfs", "start")


def save(index: MemIndex, folder: Path, source: str = "") -> None:
    """Write ``index`` to ``folder`` (replaced atomically), building its IVF indexes first.

    ``source`` names the database the index was read from: ``load`` and ``version`` given
    another one ignore the snapshot (index versions are only comparable within one database).
    """
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.parent / f".{folder.name}.{uuid.uuid4().hex}.tmp"
    tmp.mkdir()
    try:
        meta = {"format": FORMAT, "source": source, "version": index.version, "dim": index.dim, "n": index.n, "fields": {}}
        for name in ("ids", "context_only", "passage"):
            np.save(tmp / f"{name}.npy", getattr(index, name))
        for f in ("q", "a"):
            fld: _Field = getattr(index, f)
            ivf = fld.ann()  # trained here when the field is large enough to need it
            for name in _FIELD_ARRAYS:
                np.save(tmp / f"{f}.{name}.npy", getattr(fld, name))
            for name in _POSTING_ARRAYS:
                np.save(tmp / f"{f}.{name}.npy", getattr(fld.postings, name))
            terms = sorted(fld.postings.vocab, key=fld.postings.vocab.__getitem__)
            (tmp / f"{f}.vocab.json").write_text(json.dumps(terms, ensure_ascii=False), encoding="utf-8")
            ann = None
            if ivf is not None:
                ivf.write(str(tmp / f"{f}.ivf"))
                ann = {"trained_on": fld._ann.trained_on, "changed": fld._ann.changed}
            meta["fields"][f] = {"n": fld.n, "next_key": fld.next_key, "ann": ann}
        with open(tmp / "maps.pickle", "wb") as out:
            pickle.dump({"exact": index.exact, "meta": index._meta_rows, "source": index._source_rows,
                         "kind": {k: np.flatnonzero(m) for k, m in index._kind_masks.items()},
                         "metadata_keys": index.metadata_keys()}, out, protocol=pickle.HIGHEST_PROTOCOL)
        with open(tmp / "columns.pickle", "wb") as out:
            pickle.dump(encode_columns(index.rows), out, protocol=pickle.HIGHEST_PROTOCOL)
        with open(tmp / "records.pickle", "wb") as out:
            pickle.dump({"metadata": index.metadata, "rows": index.rows, "hashes": index.hashes}, out,
                        protocol=pickle.HIGHEST_PROTOCOL)
        (tmp / "meta.json").write_text(json.dumps(meta), encoding="utf-8")  # last: marks the folder complete
        old = folder.parent / f".{folder.name}.{uuid.uuid4().hex}.old"
        if folder.exists():
            os.rename(folder, old)
        os.rename(tmp, folder)
        shutil.rmtree(old, ignore_errors=True)  # open memory maps of it stay valid until unmapped
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _meta(folder: Path, source: str) -> dict | None:
    try:
        meta = json.loads((Path(folder) / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta if meta.get("format") == FORMAT and meta.get("source") == source else None


def version(folder: Path, source: str = "") -> int | None:
    """The index version a snapshot of ``source`` holds, or None when there is no usable snapshot."""
    meta = _meta(folder, source)
    return None if meta is None else meta["version"]


def load(folder: Path, source: str = "") -> MemIndex | None:
    """The index saved in ``folder`` from ``source``, or None when there is none (or of another format or source)."""
    folder = Path(folder)
    meta = _meta(folder, source)
    if meta is None:
        return None

    def array(name: str) -> np.ndarray:
        return np.load(folder / f"{name}.npy", mmap_mode="r")

    index = object.__new__(MemIndex)
    index.version, index.dim, index.n = meta["version"], meta["dim"], meta["n"]
    index.ids, index.context_only, index.passage = array("ids"), array("context_only"), array("passage")
    with open(folder / "maps.pickle", "rb") as f:
        maps = pickle.load(f)
    index.exact, index._meta_rows, index._source_rows = maps["exact"], maps["meta"], maps["source"]
    index._kind_masks = {k: index._rows_mask(rows) for k, rows in maps["kind"].items()}
    index._where_columns = None
    records = folder / "records.pickle"

    def lazy() -> dict:
        with open(records, "rb") as f:
            return pickle.load(f)

    index._lazy = lazy

    def columns() -> dict:
        with open(folder / "columns.pickle", "rb") as f:
            return pickle.load(f)

    index._where_source = columns
    for f, spec in meta["fields"].items():
        terms = json.loads((folder / f"{f}.vocab.json").read_text(encoding="utf-8"))
        postings = _Postings({t: i for i, t in enumerate(terms)}, *(array(f"{f}.{n}") for n in _POSTING_ARRAYS))
        ann = None
        if spec["ann"] is not None:
            from .ann import IVFIndex

            ann = object.__new__(_Ann)
            ann.ivf = IVFIndex.read(str(folder / f"{f}.ivf"))
            ann.trained_on, ann.changed = spec["ann"]["trained_on"], spec["ann"]["changed"]
        a = {name: array(f"{f}.{name}") for name in _FIELD_ARRAYS}
        setattr(index, f, _Field(a["rows"], a["matrix"], None, index.n, index.dim, lengths=a["lengths"],
                                 postings=postings, keys=a["keys"], next_key=spec["next_key"], ann=ann,
                                 sum_norms=a["sum_norms"]))
    index._finish()
    index._metadata_keys = maps["metadata_keys"]
    return index


class Snapshots:
    """The saved indexes of one database, under ``root``: what a store calls (both stores share it).

    ``source`` names the database (a random id it keeps): index versions are only comparable
    within one database, so a snapshot of another never passes for current.
    """

    def __init__(self, root: Path, source: str):
        self.root, self.source = Path(root), source

    def folder(self, pid: int, deployment: str) -> Path:
        return self.root / f"{pid}-{hashlib.sha1(deployment.encode()).hexdigest()[:12]}"

    def load(self, pid: int, deployment: str) -> MemIndex | None:
        """The saved index of ``pid``/``deployment`` (any version: the caller brings it up to date), or None."""
        try:
            return load(self.folder(pid, deployment), self.source)
        except Exception:  # a damaged snapshot is only a cache: the caller rebuilds from the database
            log.warning("ignoring the unreadable index snapshot %s", self.folder(pid, deployment), exc_info=True)
            return None

    def built(self, index: MemIndex, pid: int, deployment: str) -> None:
        """Save a freshly built index if it is large enough to be worth it (failures are only logged)."""
        if index.q.n + index.a.n >= MIN_VECTORS:
            try:
                save(index, self.folder(pid, deployment), self.source)
            except OSError:
                log.warning("could not save the index snapshot of project %s", pid, exc_info=True)

    def saved(self, pid: int, deployment: str) -> bool:
        return version(self.folder(pid, deployment), self.source) is not None

    def drop(self, pid: int) -> None:
        """Forget every saved index of project ``pid`` (deleted: its id may be given to another)."""
        for folder in self.root.glob(f"{pid}-*"):
            shutil.rmtree(folder, ignore_errors=True)
