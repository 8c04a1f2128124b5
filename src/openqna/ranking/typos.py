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

Chinese is typed through a pinyin input method, so its typos are homophones: the right syllables, the wrong
character of the list the method offers ("咯学" for "咯血", "能哺能" for "能不能").  ``correct_homophones`` reads a
Han character of the question neither of whose two-character words (the analyzer's bigrams with the character before
and after it) the KB holds, nor the language (jieba's dictionary), as the character of the same syllable
(``pypinyin``'s dictionary, its usual reading, tones ignored) that makes one the KB holds, when that puts it in a word
of two characters or more and makes the characters around it at least ten times likelier words of the language
(``Words``, a unigram model of jieba's word counts): "学" between "咯" and "异" becomes "血" when the KB holds "咯血";
"哪些事" stays, though the KB's "这些是" holds "些是".  Of two such characters the likelier is taken, and none when
two are as likely; text with
kana is Japanese, whose kanji are typed by another reading, and is left as it is.
"""

from __future__ import annotations

import math
import os
import re
import unicodedata
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
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


def correct(index: MemIndex, text: str, kana: Callable[[], KanaWords] | None = None) -> str:
    """``text`` with each misspelt word (see the module docstring) replaced by the KB term it most likely meant, and
    each Japanese kana word written as the KB writes it (``correct_kana``, given the KB's ``kana`` words)."""
    if not settings.typo_tolerance():
        return text
    text = correct_homophones(index, text)
    if kana is not None and _KANA.search(text):
        text = correct_kana(kana(), text)
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


LONGEST = 3  # the language model's longest words
LIKELIER = math.log(10)  # a replacement makes the characters around it this much likelier words, or is none
_HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff]")
_HAN_WORD = re.compile("[\u3400-\u4dbf\u4e00-\u9fff]+\\Z")
_HAN_RUN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff]{2,}")
_KANA = re.compile("[\u3040-\u30ff\u31f0-\u31ff]")


@lru_cache(maxsize=1)
def _pinyin() -> dict[int, str]:
    """pypinyin's dictionary: a Han character's code point to its readings ("gē,kǎ,lo"), without the phrase
    dictionary (tens of MB, for reading words in context, which a character's syllables do not need)."""
    os.environ.setdefault("PYPINYIN_NO_PHRASES", "1")
    from pypinyin.pinyin_dict import pinyin_dict

    return pinyin_dict


@lru_cache(maxsize=8192)
def syllable(char: str) -> str:
    """The toneless pinyin syllable ``char`` is read as first (its usual reading: "血" -> "xue"), or "" for a
    character pypinyin does not know.  Rarer readings are left out: by "nai", "哪" and "能" sound alike."""
    readings = _pinyin().get(ord(char))
    if not readings:
        return ""
    first = readings.split(",")[0]
    return "".join(c for c in unicodedata.normalize("NFD", first) if not unicodedata.combining(c))


@dataclass(frozen=True)
class HanBigrams:
    """The KB's two-character Han words (bigrams) with the units holding each, and two ways in: by the first
    character and the syllable of the second, and by the syllable of the first and the second character."""

    count: dict[str, int]
    by_first: dict[tuple[str, str], list[str]]
    by_second: dict[tuple[str, str], list[str]]


def han_bigrams(index: MemIndex) -> HanBigrams:
    """``index``'s Han bigrams (see ``HanBigrams``); once per index version."""
    def collect() -> HanBigrams:
        count: dict[str, int] = {}
        for fld in (index.q, index.a):
            postings = fld.postings
            for term, tid in postings.vocab.items():
                if len(term) == 2 and _HAN.match(term[0]) and _HAN.match(term[1]):
                    n = int(postings.start[tid + 1] - postings.start[tid])
                    if n:
                        count[term] = count.get(term, 0) + n
        by_first: dict[tuple[str, str], list[str]] = defaultdict(list)
        by_second: dict[tuple[str, str], list[str]] = defaultdict(list)
        for term in count:
            by_first[(term[0], syllable(term[1]))].append(term[1])
            by_second[(syllable(term[0]), term[1])].append(term[0])
        return HanBigrams(count, dict(by_first), dict(by_second))

    return index.derived("ranking.typos.han_bigrams", collect)


def _key(word: str) -> int:
    """A word of up to three Han characters as one integer (each code point is under 2**16)."""
    key = 0
    for char in word:
        key = (key << 16) | ord(char)
    return (key << 2) | len(word)


@dataclass(frozen=True)
class Words:
    """Chinese words of one to three characters with their log frequencies (jieba's dictionary: 349,046 words
    counted in a large corpus, of which these are read): a small language model of which characters go together.
    Held as two arrays (words as ``_key`` integers, sorted, and their log probabilities): 3 MB, where a dict of
    the same 257,000 words took 80."""

    keys: np.ndarray
    logps: np.ndarray
    unknown: float  # a character the dictionary does not have

    def logp(self, word: str) -> float | None:
        key = _key(word)
        at = int(np.searchsorted(self.keys, key))
        return float(self.logps[at]) if at < len(self.keys) and self.keys[at] == key else None

    def __contains__(self, word: str) -> bool:
        return self.logp(word) is not None

    def split(self, text: str) -> tuple[float, list[str]]:
        """``text``'s likeliest split into the dictionary's words (a unigram model) and its log probability."""
        best = [0.0] + [-math.inf] * len(text)
        back = [0] * (len(text) + 1)
        for end in range(1, len(text) + 1):
            for size in range(1, min(LONGEST, end) + 1):
                lp = self.logp(text[end - size:end])
                if lp is None:
                    lp = self.unknown if size == 1 else -math.inf
                if best[end - size] + lp > best[end]:
                    best[end], back[end] = best[end - size] + lp, size
        out, end = [], len(text)
        while end:
            out.append(text[end - back[end]:end])
            end -= back[end]
        return best[-1], out[::-1]


@lru_cache(maxsize=1)
def words() -> Words:
    """jieba's dictionary's words of one to three Han characters (about 257,000; read once, in about 0.5 s)."""
    from importlib.resources import files

    keys: list[int] = []
    counts: list[int] = []
    total = 0
    with (files("jieba") / "dict.txt").open(encoding="utf-8") as lines:
        for line in lines:
            word, count, _ = line.split(" ", 2)
            total += int(count)
            if len(word) <= LONGEST and _HAN_WORD.match(word):
                keys.append(_key(word))
                counts.append(int(count))
    order = np.argsort(np.array(keys, dtype=np.int64), kind="stable")
    log_total = math.log(total)
    logps = (np.log(np.array(counts, dtype=np.float64)) - log_total).astype(np.float32)
    return Words(np.array(keys, dtype=np.int64)[order], logps[order], -log_total)


def correct_homophones(index: MemIndex, text: str) -> str:
    """``text`` with each Han character typed as a homophone of the one the KB holds replaced (module docstring)."""
    if not _HAN.search(text) or _KANA.search(text):
        return text
    kb = han_bigrams(index)
    if not kb.count:
        return text

    def replacement(run: list[str], i: int) -> tuple[str, int] | None:
        """The character ``run[i]`` was most likely meant to be and how many units hold its bigrams, or None: the
        KB holds one of its bigrams as typed, no homophone makes one, or two are as likely."""
        char = run[i]
        before = run[i - 1] if i else ""
        after = run[i + 1] if i + 1 < len(run) else ""
        pairs = [pair for pair in (before + char if before else "", char + after if after else "") if pair]
        if any(pair in kb.count for pair in pairs):
            return None
        lm = words()  # read on the first character the KB does not hold (a second or two, once per process)
        if any(pair in lm for pair in pairs):
            return None  # a word of the language as typed: "疑似" is no typo of the KB's "一是"
        sound = syllable(char)
        score: dict[str, int] = {}
        if sound and before:
            for other in kb.by_first.get((before, sound), ()):
                score[other] = score.get(other, 0) + kb.count[before + other]
        if sound and after:
            for other in kb.by_second.get((sound, after), ()):
                score[other] = score.get(other, 0) + kb.count[other + after]
        score.pop(char, None)
        if not score:
            return None
        # the characters around it read as words more likely with the replacement than as typed, and the
        # replacement in a word of two characters or more: "项目要进行" is not "项目么进行" however often the KB's
        # "什么" holds "么", and "哪些事" not "哪些是" however common "是" is
        window = "".join(run[max(0, i - LONGEST + 1):i + LONGEST])
        at = min(i, LONGEST - 1)
        typed = lm.split(window)[0]
        likely = []
        for other, n in score.items():
            logp, split = lm.split(window[:at] + other + window[at + 1:])
            start = 0
            for word in split:
                if start <= at < start + len(word):
                    if len(word) > 1 and logp >= typed + LIKELIER:
                        likely.append((logp, n, other))
                    break
                start += len(word)
        likely.sort(reverse=True)
        if not likely or (len(likely) > 1 and likely[0][:2] == likely[1][:2]):
            return None
        return likely[0][2], likely[0][1]

    def fixed(match: re.Match[str]) -> str:
        # the likeliest replacement first: of "咯学" neither bigram is known, and "学" -> "血" (the KB's "咯血")
        # is likelier than "咯" -> any character before "学"; then its neighbours are read again
        run = list(match.group(0))
        done: set[int] = set()
        while True:
            found = [(r[1], i, r[0]) for i in range(len(run)) if i not in done
                     and (r := replacement(run, i)) is not None]
            if not found:
                return "".join(run)
            _, i, char = max(found)
            run[i] = char
            done.add(i)

    return _HAN_RUN.sub(fixed, text)



# Japanese writes a word in hiragana or in katakana by habit, and an input method leaves a word in hiragana when its
# conversion is skipped: "ごみ" and "ゴミ", "りんご" and "リンゴ" are the same word, which the analyzer's character
# bigrams read as different terms.
_KATAKANA_RUN = re.compile("[\u30a1-\u30f6][\u30a1-\u30f6\u30fc]+")  # letters and the long-vowel mark (not first)
_HIRAGANA_RUN = re.compile("[\u3041-\u3096][\u3041-\u3096\u30fc]*")  # and the long-vowel mark ("すごーい")
_KANA_SHIFT = 0x60  # katakana ァ..ヶ (U+30A1..30F6) stand 0x60 above hiragana ぁ..ゖ (U+3041..3096)
# The particles (and the small "っ" of "ごみって") that may stand right after a word written in hiragana; before one,
# only the particles.  A stretch of hiragana between other letters is no word: "どんな" holds "どん" but is no "ドン".
_PARTICLES = frozenset("のはがをにでともへやか")
_AFTER_WORD = _PARTICLES | {"っ"}
LONGEST_KANA_WORD = 12


def to_hiragana(text: str) -> str:
    """``text`` with its katakana letters written in hiragana (the long-vowel mark and everything else as they are)."""
    return "".join(chr(ord(c) - _KANA_SHIFT) if "\u30a1" <= c <= "\u30f6" else c for c in text)


def to_katakana(text: str) -> str:
    """``text`` with its hiragana letters written in katakana."""
    return "".join(chr(ord(c) + _KANA_SHIFT) if "\u3041" <= c <= "\u3096" else c for c in text)


@dataclass(frozen=True)
class KanaWords:
    """What a KB writes in kana, for ``correct_kana``: its katakana words (whole runs of katakana, two letters or
    more) by their hiragana spelling; its words in hiragana (the start of a run of hiragana, two letters or more,
    that ends the run or stands before a particle: "りんご" of "りんごの"); and its runs of hiragana, each after a
    newline, to be searched."""

    katakana: dict[str, str]
    words: frozenset[str]
    hiragana: str

    @classmethod
    def of(cls, texts: Iterable[str]) -> KanaWords:
        katakana: dict[str, str] = {}
        words: set[str] = set()
        hiragana: list[str] = []
        for text in texts:
            text = unicodedata.normalize("NFKC", text)  # half-width katakana as full-width
            if not _KANA.search(text):
                continue
            for word in _KATAKANA_RUN.findall(text):
                if len(word) <= LONGEST_KANA_WORD:
                    katakana.setdefault(to_hiragana(word), word)
            for run in _HIRAGANA_RUN.findall(text):
                hiragana.append(run)
                words.update(run[:end] for end in range(2, min(len(run), LONGEST_KANA_WORD) + 1)
                             if end == len(run) or run[end] in _AFTER_WORD)
        return cls(katakana, frozenset(words), "\n" + "\n".join(hiragana))

    def writes_in_hiragana(self, word: str) -> bool:
        """Whether the KB writes ``word`` in hiragana anywhere (inside a run too)."""
        return word in self.hiragana


def correct_kana(words: KanaWords, text: str) -> str:
    """``text`` with each kana word written in the other script when that is how the KB writes it (issue 42's
    Japanese FAQ pages: "粗大ごみの出し方" asked of a KB of "粗大ゴミ").

    Character bigrams cannot tell a word from a stretch of grammar ("どんな" holds the bigram of "ドン"), so this
    reads the KB's own words (``KanaWords``): a stretch of a hiragana run of the question that starts the run or
    follows a particle, and stands before one (``_PARTICLES``: "ごみの", "のごみは") or, of three letters or more,
    ends the run, is written in katakana when it spells a whole katakana word of the KB and the KB writes it nowhere
    in hiragana, the longest first (two letters at the end of a run are mostly an ending: "掛かり", "人はえ"); a
    katakana run of the question that is no katakana word of the KB is written in hiragana when it spells a word
    the KB writes in hiragana ("リンゴ" for "りんごの苗木").  The KB's own words are never touched.
    Measured on JSQuAD's KBs (``make eval``'s typo section): a seeded katakana word of each question written in
    hiragana, and what changes in the questions as written.
    """
    if not _KANA.search(text):
        return text

    def katakana(match: re.Match[str]) -> str:
        run = match.group(0)
        if to_hiragana(run) in words.katakana:
            return run  # a word of the KB as it writes it
        other = to_hiragana(run)
        return other if other in words.words else run

    def hiragana(match: re.Match[str]) -> str:
        run = match.group(0)
        out, i = [], 0
        while i < len(run):
            if i == 0 or run[i - 1] in _PARTICLES:
                for end in range(min(len(run), i + LONGEST_KANA_WORD), i + 1, -1):
                    word = run[i:end]
                    # a word of two letters only before a particle: "ごみの", not "人はえ" or "掛かり"
                    if (run[end] in _AFTER_WORD if end < len(run) else len(word) > 2) \
                            and word in words.katakana and not words.writes_in_hiragana(word):
                        out.append(words.katakana[word])
                        i = end
                        break
                else:
                    out.append(run[i])
                    i += 1
                continue
            out.append(run[i])
            i += 1
        return "".join(out)

    return _HIRAGANA_RUN.sub(hiragana, _KATAKANA_RUN.sub(katakana, text))
