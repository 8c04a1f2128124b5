"""A ``MemIndex`` saved to disk, so a large knowledge base starts in seconds.

Building the index of a large knowledge base reads and parses every record (about 10 s at
100k QnAs) and trains its IVF index; a saved index skips both.  It is a folder of ``.npy``
arrays opened as memory maps (vectors, postings, record flags: nothing is parsed, and pages
are read from disk only when a query touches them), the faiss IVF index, the small filter
maps, the where_str columns (codes into each column's distinct values, loaded on the first
where_str), and the per-record state (metadata, where_str rows, content hashes) that only
later updates read.

A saved index is a cache, never the truth: the index cache (``index_cache.py``) keeps one
per knowledge base and deployment, written after a full build, and on start-up it is brought
to the store's current version through the same content-hash diff as any other update
(``incremental_update``), or ignored when too much changed.  Folders are written under a
temporary name and renamed into place, so a reader never sees half a saved index.
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
from typing import Any

import numpy as np

from openqna.filters.masks import encode_columns
from openqna.index.field import Field, FieldAnn
from openqna.index.memindex import MemIndex
from openqna.index.postings import Postings

FORMAT = 7  # 7: the universal sentence encoder's fields "uq" and "ua" beside them; 6: the multilingual space is E5's, 384 dimensions; 5: the multilingual fields "mq" and "ma" when the index has them; 4: IVF codes are fast-scan PQ
log = logging.getLogger("openqna")
# Stores save the index of a knowledge base with at least this many vectors (about 1 s to
# build from the database); smaller ones build faster than saving would pay for.
MIN_VECTORS = 20_000
_FIELD_ARRAYS = ("rows", "matrix", "lengths", "keys", "sum_norms")
_POSTING_ARRAYS = ("tids", "units", "tfs", "start")


def save(index: MemIndex, folder: Path, source: str = "") -> None:
    """Write ``index`` to ``folder`` (replaced atomically), building its IVF indexes first.

    ``source`` names the database the index was read from: ``load`` and ``version`` given
    another one ignore the saved index (index versions are only comparable within one database).
    """
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.parent / f".{folder.name}.{uuid.uuid4().hex}.tmp"
    tmp.mkdir()
    try:
        meta: dict[str, Any] = {"format": FORMAT, "source": source, "version": index.version, "dim": index.dim,
                                "n": index.n, "fields": {}}
        for name in ("ids", "context_only", "passage"):
            np.save(tmp / f"{name}.npy", getattr(index, name))
        for f in ("q", "a", "mq", "ma", "uq", "ua"):
            fld: Field | None = getattr(index, f)
            if fld is None:  # an index without the multilingual space
                continue
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
                assert fld.shared_ann is not None  # ann() returned an index: it built shared_ann
                ann = {"trained_on": fld.shared_ann.trained_on, "changed": fld.shared_ann.changed}
            meta["fields"][f] = {"n": fld.n, "next_key": fld.next_key, "ann": ann}
        with open(tmp / "maps.pickle", "wb") as out:
            pickle.dump({"exact": index.exact, "meta": index.meta_rows, "source": index.source_rows,
                         "kind": {k: np.flatnonzero(m) for k, m in index.kind_masks.items()},
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


def _meta(folder: Path, source: str) -> dict[str, Any] | None:
    try:
        meta = json.loads((Path(folder) / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta if meta.get("format") == FORMAT and meta.get("source") == source else None


def version(folder: Path, source: str = "") -> int | None:
    """The index version saved in ``folder`` from ``source``, or None when there is no usable saved index."""
    meta = _meta(folder, source)
    return None if meta is None else meta["version"]


def load(folder: Path, source: str = "") -> MemIndex | None:
    """The index saved in ``folder`` from ``source``, or None when there is none (or of another format or source)."""
    folder = Path(folder)
    meta = _meta(folder, source)
    if meta is None:
        return None

    def array(name: str) -> np.ndarray:
        # a plain ndarray over the memory map (which it keeps open): a slice of an np.memmap runs Python code
        # (__array_finalize__), some 130 slices of postings a question, 0.5 ms of an in-process ask's 8.5
        loaded: np.ndarray = np.load(folder / f"{name}.npy", mmap_mode="r").view(np.ndarray)
        return loaded

    with open(folder / "maps.pickle", "rb") as f:
        maps = pickle.load(f)

    def records() -> dict[str, Any]:
        with open(folder / "records.pickle", "rb") as f:
            saved: dict[str, Any] = pickle.load(f)
            return saved

    def columns() -> dict[str, Any]:
        with open(folder / "columns.pickle", "rb") as f:
            saved: dict[str, Any] = pickle.load(f)
            return saved

    fields = {}
    for f, spec in meta["fields"].items():
        terms = json.loads((folder / f"{f}.vocab.json").read_text(encoding="utf-8"))
        postings = Postings({t: i for i, t in enumerate(terms)}, *(array(f"{f}.{n}") for n in _POSTING_ARRAYS))
        ann = None
        if spec["ann"] is not None:
            ann = FieldAnn.read(str(folder / f"{f}.ivf"), spec["ann"]["trained_on"], spec["ann"]["changed"])
        a = {name: array(f"{f}.{name}") for name in _FIELD_ARRAYS}
        fields[f] = Field(a["rows"], a["matrix"], None, meta["n"], a["matrix"].shape[1], lengths=a["lengths"],
                          postings=postings, keys=a["keys"], next_key=spec["next_key"], ann=ann,
                          sum_norms=a["sum_norms"])
    return MemIndex.from_saved(
        version=meta["version"], dim=meta["dim"], n=meta["n"], ids=array("ids"), context_only=array("context_only"),
        passage=array("passage"), exact=maps["exact"], meta_rows=maps["meta"], source_rows=maps["source"],
        kind_rows=maps["kind"], metadata_keys=maps["metadata_keys"], q=fields["q"], a=fields["a"],
        records=records, where_columns=columns, mq=fields.get("mq"), ma=fields.get("ma"),
        uq=fields.get("uq"), ua=fields.get("ua"))


class SavedIndexes:
    """The saved indexes of one database, under ``root``: what the index cache calls.

    ``source`` names the database (a random id it keeps): index versions are only comparable
    within one database, so an index saved from another never passes for current.
    """

    def __init__(self, root: Path, source: str):
        self.root, self.source = Path(root), source

    def folder(self, pid: int, deployment: str) -> Path:
        return self.root / f"{pid}-{hashlib.sha1(deployment.encode()).hexdigest()[:12]}"

    def load(self, pid: int, deployment: str) -> MemIndex | None:
        """The saved index of ``pid``/``deployment`` (any version: the caller brings it up to date), or None."""
        try:
            return load(self.folder(pid, deployment), self.source)
        except Exception:  # a damaged saved index is only a cache: the caller rebuilds from the database
            log.warning("ignoring the unreadable saved index %s", self.folder(pid, deployment), exc_info=True)
            return None

    def built(self, index: MemIndex, pid: int, deployment: str) -> None:
        """Save a freshly built index if it is large enough to be worth it (failures are only logged)."""
        if index.q.n + index.a.n >= MIN_VECTORS:
            try:
                save(index, self.folder(pid, deployment), self.source)
            except OSError:
                log.warning("could not save the index of project %s", pid, exc_info=True)

    def saved(self, pid: int, deployment: str) -> bool:
        return version(self.folder(pid, deployment), self.source) is not None

    def drop(self, pid: int) -> None:
        """Forget every saved index of project ``pid`` (deleted: its id may be given to another)."""
        for folder in self.root.glob(f"{pid}-*"):
            shutil.rmtree(folder, ignore_errors=True)
