"""Postings and BM25: which units hold each term, and how a field scores them.

One formula for every store (DESIGN decision 3): Lucene's BM25 with its non-negative idf,
computed here with numpy over a CSR table of (term, unit, term frequency).
"""

from __future__ import annotations

import math

import numpy as np

K1 = 1.2
B = 0.75


def bm25_idf(n_docs: int, df: int) -> float:
    """Lucene's non-negative idf; shared with every store so scores agree."""
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


class Postings:
    """Term -> (units, term frequencies), held as one CSR table so it builds and renumbers with numpy."""

    def __init__(self, vocab: dict[str, int], tids: np.ndarray, units: np.ndarray, tfs: np.ndarray,
                 start: np.ndarray | None = None):
        self.vocab = vocab  # term -> term id; only grows
        self.tids, self.units, self.tfs = tids, units, tfs  # sorted by (term id, unit)
        # where each term's postings begin (given by a saved index: searching a memory map reads it from disk)
        self.start = np.searchsorted(tids, np.arange(len(vocab) + 1)) if start is None else start

    @staticmethod
    def entries(terms: list[list[str]], vocab: dict[str, int], first_unit: int = 0
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(term ids, units, tfs) of ``terms`` (one list per unit, numbered from ``first_unit``); grows ``vocab``."""
        tids = np.fromiter((vocab.setdefault(t, len(vocab)) for unit in terms for t in unit), dtype=np.int64)
        units = np.repeat(np.arange(first_unit, first_unit + len(terms), dtype=np.int64),
                          [len(unit) for unit in terms])
        span = max(1, first_unit + len(terms))
        keys, tfs = np.unique(tids * span + units, return_counts=True)
        # int32 halves the largest arrays of a big index (postings outnumber vectors tens of times)
        return (keys // span).astype(np.int32), (keys % span).astype(np.int32), tfs.astype(np.float32)

    @classmethod
    def build(cls, terms: list[list[str]]) -> "Postings":
        vocab: dict[str, int] = {}
        return cls(vocab, *cls.entries(terms, vocab))

    def renumbered(self, unit_keep: np.ndarray, unit_new: np.ndarray, terms: list[list[str]],
                   first_unit: int) -> "Postings":
        """These postings without the dropped units (renumbered) plus ``terms`` of new units from ``first_unit``."""
        vocab = dict(self.vocab)
        keep = unit_keep[self.units]
        tids, units, tfs = self.entries(terms, vocab, first_unit)
        tids = np.concatenate((self.tids[keep], tids))
        order = np.argsort(tids, kind="stable")  # kept units come first within a term and stay in order
        units = np.concatenate((unit_new[self.units[keep]].astype(np.int32), units))
        return Postings(vocab, tids[order], units[order], np.concatenate((self.tfs[keep], tfs))[order])

    def get(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        tid = self.vocab.get(term)
        if tid is None or self.start[tid] == self.start[tid + 1]:
            return None
        s, e = self.start[tid], self.start[tid + 1]
        return self.units[s:e], self.tfs[s:e]
