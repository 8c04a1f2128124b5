"""One analyzer for every store (DESIGN decision 3).

Text becomes terms the same way at index and query time, whichever store holds
them, so BM25 gives the same scores on SQLite and PostgreSQL:

* Unicode NFKC, case folding; punctuation (including Azure's list and full-width
  forms) separates words, so "COVID-19" and "COVID 19" analyse alike.
* Latin-script words: English stop words dropped, Snowball-stemmed, and word
  bigrams (shingles, as the original Answers index had) added so phrase order
  counts for something.
* Chinese, Japanese and Korean runs: overlapping character bigrams plus the
  single ideographs and katakana characters (hiragana is mostly particles), so a
  query finds text without spaces and a one-character word still matches.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache

import Stemmer

# Snowball's English stop list, minus words that carry meaning in FAQ questions
# ("not", "no", "off", "on", "up", "down", "over", "again", "more", "most", "few").
STOP_WORDS = frozenset(
    """a about above after against all am an and any are as at be because been before being below
    between both but by can could did do does doing during each for from further had has have having he
    her here hers herself him himself his i if in into is it its itself just me my myself nor of once only
    or other our ours ourselves own same she should so some such than that the their theirs them themselves
    then there these they this those through to too under until very was we were what when where which
    while who whom why will with would you your yours yourself yourselves s t d ll m re ve""".split()
)

# The Chinese, Japanese and Korean characters (a character class's ranges), for every reader of CJK text
CJK_RANGES = (
    "\u3040-\u309f"  # hiragana
    "\u30a0-\u30ff\u31f0-\u31ff"  # katakana
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # CJK ideographs
    "\uac00-\ud7af\u1100-\u11ff"  # hangul
)
_TOKEN = re.compile(rf"([{CJK_RANGES}]+)|([^\W_{CJK_RANGES}]+)")
_HIRAGANA = re.compile("[\u3040-\u309f]")
_CJK_RUN = re.compile(f"[{CJK_RANGES}]+")

_stemmer = Stemmer.Stemmer("english")


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """The English Snowball stem that every analysed term uses (shared with the short-span finder)."""
    stemmed: str = _stemmer.stemWord(word)  # PyStemmer ships no type hints
    return stemmed


def _cjk_terms(run: str) -> list[str]:
    terms = [c for c in run if not _HIRAGANA.match(c)] if len(run) > 1 else [run]
    terms.extend(run[i : i + 2] for i in range(len(run) - 1))
    return terms


def normalise(text: str) -> str:
    """NFKC + case folding: full-width Latin becomes ASCII, 'Straße' matches 'strasse'."""
    return unicodedata.normalize("NFKC", text).casefold()


def analyze(text: str, *, bigrams: bool = True) -> list[str]:
    """Terms of ``text`` in order, with repeats (BM25 counts term frequency)."""
    terms: list[str] = []
    words: list[str] = []
    for cjk, word in _TOKEN.findall(normalise(text)):
        if cjk:
            terms.extend(_cjk_terms(cjk))
            words.append("")  # a CJK run breaks a Latin phrase
        elif word not in STOP_WORDS:
            stemmed = stem(word)
            terms.append(stemmed)
            words.append(stemmed)
    if bigrams:
        terms.extend(f"{a} {b}" for a, b in zip(words, words[1:]) if a and b)
    return terms


def unread_share(text: str, reads_cjk: bool = False) -> float:
    """The share of ``text`` to be read by its words alone: all of it when it has no letter or digit at all ("🙂",
    "👍👍", "?!"), whatever the embedder; else, for an English-only embedder (not ``reads_cjk``), its Chinese,
    Japanese and Korean words' share (``cjk_share``).  MiniLM reads an emoji as its unknown token, as it reads much
    CJK text, so an emoji alone came out at cosine 0.9 and more with a Chinese QnA of a mostly English KB, and was
    given it at confidence 0.98; E5, in a mostly CJK KB's space, gave "🙂" its opening hours at 0.76."""
    if not any(ch.isalnum() for ch in text):
        return 1.0
    return 0.0 if reads_cjk else cjk_share(text)


def cjk_share(text: str) -> float:
    """The share of ``text``'s words written in Chinese, Japanese or Korean (0..1).

    A CJK character other than hiragana counts as a word, as the analyzer indexes it; a Latin
    word or a number counts once.  The ranker reads it to know how much of a question an
    English-only embedder could not read ("Surface Pro 4の充電時間は": 4 of 7).
    """
    cjk = latin = 0
    for run, word in _TOKEN.findall(normalise(text)):
        if run:
            cjk += len(run) - len(_HIRAGANA.findall(run)) or 1
        elif word not in STOP_WORDS:
            latin += 1
    return cjk / (cjk + latin) if cjk else 0.0


def synonym_key(text: str) -> tuple[str, ...]:
    """A synonym's words as ``expand_with_synonyms`` matches them: Latin words stemmed (stop words left out), and each
    run of Chinese, Japanese or Korean characters whole, since those are written without spaces."""
    return tuple(run or stem(word) for run, word in _TOKEN.findall(normalise(text)) if run or word not in STOP_WORDS)


def _holds(words: tuple[str, ...], key: tuple[str, ...]) -> bool:
    """Whether ``key`` (``synonym_key``) occurs in ``words`` (the text's ``synonym_key``).  Latin words match whole; a
    CJK run of two characters or more matches inside a run too, at the key's edges ("マイナカード" in
    "マイナカードの申請", "社保卡" in "社保卡丢了"), as text written without spaces needs; a single CJK character
    only as a whole run (车 must not match inside 火车)."""
    def edge(k: str, w: str, where: str) -> bool:
        if k == w:
            return True
        if len(k) < 2 or not _CJK_RUN.fullmatch(k):
            return False
        return (k in w) if where == "inside" else w.endswith(k) if where == "end" else w.startswith(k)

    n = len(key)
    if n == 1:
        return any(edge(key[0], w, "inside") for w in words)
    return n > 1 and any(edge(key[0], words[i], "end") and words[i + 1 : i + n - 1] == key[1:-1]
                         and edge(key[-1], words[i + n - 1], "start") for i in range(len(words) - n + 1))


class Synonyms:
    """A project's synonym groups, read for matching once: each member's ``synonym_key``, and the groups by the first
    word a key can match on, so a question looks up only the groups its own words may open.

    Built per index version (``MemIndex.derived``): with 1,000 groups, working every member's key out again took
    about 30 ms a question, ten times the rest of ``Service.ask``.  A key's first word matches a word of the
    question whole (``by_word``), unless it is a CJK run of two characters or more, which may match inside one
    (``_holds``) and so holds the run's first two characters (``by_pair``); a group reached either way is checked
    as before.
    """

    def __init__(self, groups: Sequence[Sequence[str]]) -> None:
        self.groups = [list(group) for group in groups]
        self.keys = [[synonym_key(member) for member in group] for group in self.groups]
        self.by_word: dict[str, list[int]] = {}
        self.by_pair: dict[str, list[int]] = {}
        for g, keys in enumerate(self.keys):
            for key in keys:
                if not key:
                    continue
                first = key[0]
                pair = len(first) > 1 and _CJK_RUN.fullmatch(first)
                seen = (self.by_pair if pair else self.by_word).setdefault(first[:2] if pair else first, [])
                if not seen or seen[-1] != g:
                    seen.append(g)

    def expand(self, text: str) -> str:
        """``text`` with the other members of every group whose member appears in it (``expand_with_synonyms``)."""
        if not self.groups:
            return text
        words = synonym_key(text)
        reached: set[int] = set()
        for w in words:
            reached.update(self.by_word.get(w, ()))
            if len(w) > 1 and self.by_pair and _CJK_RUN.fullmatch(w):
                for i in range(len(w) - 1):
                    reached.update(self.by_pair.get(w[i : i + 2], ()))
        extra: list[str] = []
        for g in sorted(reached):
            keys = self.keys[g]
            if any(_holds(words, k) for k in keys):
                extra.extend(m for m, k in zip(self.groups[g], keys) if k and not _holds(words, k))
        return text if not extra else text + " " + " ".join(extra)


def expand_with_synonyms(text: str, groups: Synonyms | Sequence[Sequence[str]]) -> str:
    """Append the other members of every synonym group whose member appears in ``text``.

    Azure's word alterations are symmetric groups matched case-insensitively;
    expanding the query (not the index) keeps deploys cheap and edits immediate.
    ``groups`` read once as ``Synonyms`` leave a question only the work its own words need.
    """
    return (groups if isinstance(groups, Synonyms) else Synonyms(groups)).expand(text)


_WORD = re.compile(r"[^\W_]+")


def exact_key(text: str) -> str:
    """Key under which a question matches exactly: case, width and punctuation ignored."""
    return " ".join(_WORD.findall(normalise(text)))
