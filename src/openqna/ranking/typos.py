"""Typo tolerance in the keyword features: a misspelt word still matches (issue 38).

"how do i strat the sever?" holds no word of the sample KB's "How do I start the server?": the keyword features
read nothing, and the embedder reads a sentence that is not quite the one it knows.  So a word of the question
whose term (``analyze``'s stem) the knowledge base does not hold is replaced by the KB term that is one edit away
(Damerau-Levenshtein: a letter left out, added, changed, or two swapped), or two edits away for words of
``LONG_WORD`` letters or more (of its stem), when one such term is the most frequent among them.  Only the KB's own vocabulary
is a candidate, so a word is never "corrected" into a term no record holds, and words the KB holds are never
touched; nor is a word of the bundled model's own vocabulary (``dictionary``: its 22,501 whole-word tokens, common
English words, with their common endings: ``is_word``), which is a word the user meant, not a typo: "play" is not
"pay" misspelt, nor "sewers" "several".  Without that gate the
chit-chat KBs lost 2-4 points of top-1 on their questions as written (``make eval``'s typo section).  Short words (under ``MIN_LETTERS``), numbers, CJK text and stop words are left as they are: a one-edit
neighbour of a three-letter word is mostly another word.

The corrected question is what the keyword features and the embedder read; the exact match still reads the
question as asked.  ``rapidfuzz`` finds the neighbours (its C implementation scans a 30,000-term vocabulary in
about a millisecond); the vocabulary is collected once per index version.
"""

from __future__ import annotations

import re
from functools import lru_cache

from rapidfuzz import process
from rapidfuzz.distance import DamerauLevenshtein

from openqna import settings
from openqna.index.analyze import STOP_WORDS, analyze
from openqna.index.memindex import MemIndex
from openqna.models.onnx_export import load_tokenizer

MIN_LETTERS = 4
LONG_WORD = 8
_WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?")


@lru_cache(maxsize=1)
def dictionary() -> frozenset[str]:
    """Common English words: the whole-word tokens of the bundled model's vocabulary (empty when it is missing)."""
    try:
        vocab = load_tokenizer().get_vocab()
    except Exception:  # noqa: BLE001 - no model, no dictionary: every unknown word may be corrected
        return frozenset()
    return frozenset(t for t in vocab if t.isalpha() and not t.startswith("#"))


SUFFIXES = ("s", "es", "ed", "d", "ing", "er", "ers", "ly", "ies", "ness")


def is_word(word: str, known: frozenset[str]) -> bool:
    """Whether ``word`` is a dictionary word, or one with a common English ending ("sewers", "panicking")."""
    if word in known:
        return True
    for suffix in SUFFIXES:
        base = word[: -len(suffix)]
        if word.endswith(suffix) and len(base) >= MIN_LETTERS - 1:
            if base in known or (len(base) > 1 and base[-1] == base[-2] and base[:-1] in known) \
                    or base + "e" in known or (suffix == "ies" and base + "y" in known) \
                    or (base.endswith("k") and base[:-1] in known):
                return True
    return False


def vocabulary(index: MemIndex) -> tuple[dict[str, int], list[str]]:
    """The KB's single-word terms (questions and answers) with the number of units holding each, and the same terms
    as the list the neighbour search scans; once per index."""
    def count() -> tuple[dict[str, int], list[str]]:
        found: dict[str, int] = {}
        for fld in (index.q, index.a):
            postings = fld.postings
            for term, tid in postings.vocab.items():
                if " " not in term and term.isalpha():
                    n = int(postings.start[tid + 1] - postings.start[tid])
                    if n:
                        found[term] = found.get(term, 0) + n
        return found, list(found)

    return index.derived("ranking.typos.vocabulary", count)


def correct(index: MemIndex, text: str) -> str:
    """``text`` with each misspelt word (see the module docstring) replaced by the KB term it most likely meant."""
    if not settings.typo_tolerance():
        return text
    vocab, terms = vocabulary(index)
    if not vocab:
        return text
    known = dictionary()

    def fixed(match: re.Match[str]) -> str:
        word = match.group(0)
        lower = word.lower()
        if len(lower) < MIN_LETTERS or lower in STOP_WORDS or is_word(lower, known):
            return word
        stemmed = analyze(lower, bigrams=False)
        if len(stemmed) != 1 or stemmed[0] in vocab:
            return word
        edits = 2 if len(stemmed[0]) >= LONG_WORD else 1
        found = process.extract(stemmed[0], terms, scorer=DamerauLevenshtein.distance, score_cutoff=edits,
                                limit=None)
        near = [(term, int(distance)) for term, distance, _ in found if len(term) >= MIN_LETTERS - 1]
        if not near:
            return word
        best = min(distance for _, distance in near)
        closest = sorted((term for term, distance in near if distance == best), key=lambda t: -vocab[t])
        if len(closest) > 1 and vocab[closest[0]] == vocab[closest[1]]:
            return word  # two equally likely corrections: neither
        # the term itself as the word: analysing it again gives the same term (checked, as stemmers need not)
        return closest[0] if analyze(closest[0], bigrams=False) == [closest[0]] else word

    return _WORD.sub(fixed, text)
