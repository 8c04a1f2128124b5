"""Typo tolerance (``ranking.typos``): a typo'd copy of the regimes' questions, asked with and without it.

The copy: in each in-scope question, one seeded-random word of five letters or more that is not a stop word gets
one seeded-random edit of the kinds people make (``typo``): two neighbouring letters swapped, a letter left out, a
letter doubled, or a letter replaced by a neighbour on a QWERTY keyboard; never the first letter.  A Chinese
question is typed through a pinyin input method, so its typo is a homophone (``typo_zh``): one seeded-random Han
character replaced by another of the same syllable (its usual reading, tones ignored), drawn as often as the language
uses it (jieba's dictionary's single-character counts), as a user picks the wrong one of the method's candidates.  A
Japanese question (one with kana) gets one seeded-random katakana word written in hiragana (``typo_ja``), as when the
input method's conversion is skipped or the user writes the word that way ("ごみ" for "ゴミ").  A
question with no such word or character is left out.  Each KB of ``KBS`` is asked its in-scope questions typo'd and as written, and its
off-topic questions as written, with ``OPENQNA_TYPO_TOLERANCE`` on and off (top 1, threshold 0): the figures are
top-1 and right at the threshold on the typo'd and on the clean questions, and the share of off-topic questions rejected at the threshold
(the tolerance must cost no precision).
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache

from openqna.evaluation.env import setting
from openqna.evaluation.regimes import SPLITS, RegimeKB, by_split_and_total, first_answer
from openqna.index.analyze import STOP_WORDS
from openqna.kb.service import AskRequest, Service
from openqna.ranking.typos import syllable, to_hiragana

KBS = ("banking77", "covid-q", "covid-qsim-deepset", "chitchat-professional-one-question", "tiny-sample-kb",
       "tiny-banking77", "doc-product-manual", "doc-multiturn-contosobenefits", "covid-qsim-tianchi-zh-dev",
       "cjk-jsquad-faq", "cjk-jsquad-paragraphs")
ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")


def _neighbours(letter: str) -> str:
    for r, row in enumerate(ROWS):
        i = row.find(letter)
        if i >= 0:
            near = row[max(i - 1, 0):i] + row[i + 1:i + 2]
            for other in (ROWS[r - 1] if r else "", ROWS[r + 1] if r + 1 < len(ROWS) else ""):
                near += other[i:i + 1]
            return near
    return ""


_HAN = re.compile("[\u4e00-\u9fff]")


@lru_cache(maxsize=1)
def _homophones() -> dict[str, tuple[list[str], list[int]]]:
    """A syllable's characters and how often the language uses each (jieba's single-character words)."""
    from importlib.resources import files

    out: dict[str, tuple[list[str], list[int]]] = defaultdict(lambda: ([], []))
    with (files("jieba") / "dict.txt").open(encoding="utf-8") as lines:
        for line in lines:
            word, count, _ = line.split(" ", 2)
            if len(word) == 1 and _HAN.match(word) and (sound := syllable(word)):
                out[sound][0].append(word)
                out[sound][1].append(int(count))
    return dict(out)


def typo_zh(question: str, rng: random.Random) -> str | None:
    """``question`` with one Han character typed as a homophone (see the module docstring), or None without one."""
    sounds = _homophones()
    chosen = [i for i, c in enumerate(question) if _HAN.match(c) and len(sounds.get(syllable(c), ((), ()))[0]) > 1]
    if not chosen:
        return None
    i = rng.choice(chosen)
    chars, counts = sounds[syllable(question[i])]
    others = [(c, n) for c, n in zip(chars, counts) if c != question[i]]
    other = rng.choices([c for c, _ in others], weights=[n for _, n in others])[0]
    return question[:i] + other + question[i + 1:]


_KANA = re.compile("[\u3040-\u30ff]")
_KATAKANA_WORD = re.compile("[\u30a1-\u30f6][\u30a1-\u30f6\u30fc]+")


def typo_ja(question: str, rng: random.Random) -> str | None:
    """``question`` with one katakana word written in hiragana (see the module docstring), or None without one."""
    words = list(_KATAKANA_WORD.finditer(question))
    if not words:
        return None
    w = rng.choice(words)
    return question[:w.start()] + to_hiragana(w.group(0)) + question[w.end():]


def typo(question: str, rng: random.Random) -> str | None:
    """``question`` with one edit in one of its longer words (see the module docstring), or None without one."""
    if _KANA.search(question):
        return typo_ja(question, rng)
    if _HAN.search(question):
        return typo_zh(question, rng)
    words = question.split(" ")
    chosen = [i for i, w in enumerate(words) if len(w) >= 5 and w.isalpha() and w.lower() not in STOP_WORDS]
    if not chosen:
        return None
    i = rng.choice(chosen)
    w = words[i]
    at = rng.randrange(1, len(w) - 1)
    kind = rng.choice(("swap", "drop", "double", "key"))
    if kind == "swap":
        w = w[:at] + w[at + 1] + w[at] + w[at + 2:]
    elif kind == "drop":
        w = w[:at] + w[at + 1:]
    elif kind == "double":
        w = w[:at] + w[at] + w[at:]
    else:
        near = _neighbours(w[at].lower()) or w[at]
        w = w[:at] + rng.choice(near) + w[at + 1:]
    words[i] = w
    return " ".join(words)


@dataclass
class Figures:
    questions: int = 0  # in-scope questions with a typo'd copy
    typo_top1_off: int = 0  # the typo'd question's top answer is right, tolerance off
    typo_top1_on: int = 0
    typo_right_off: int = 0  # ... and its confidence at least the threshold
    typo_right_on: int = 0
    clean_top1_off: int = 0  # the question as written
    clean_top1_on: int = 0
    clean_right_off: int = 0
    clean_right_on: int = 0
    offtopic: int = 0
    offtopic_rejected_off: int = 0  # below the threshold
    offtopic_rejected_on: int = 0


def evaluate(service: Service, kbs: list[RegimeKB], *, seed: int, threshold: float, per_kb: int | None = 150) -> dict:
    out: dict[str, dict[str, Figures]] = {}
    for kb in (k for k in kbs if k.project in KBS):
        rng = random.Random(f"{seed}:typos:{kb.project}")
        inscope = [q for q in kb.questions if q.gold is not None]
        off = [q for q in kb.questions if q.gold is None]
        inscope = rng.sample(inscope, min(len(inscope), per_kb or len(inscope)))
        off = rng.sample(off, min(len(off), per_kb or len(off)))
        typoed = [(q, typo(q.text, rng)) for q in inscope]
        figures = {split: Figures() for split in SPLITS}

        def first(text: str) -> tuple[int | None, float]:
            return first_answer(service, kb, AskRequest(question=text, top=1,
                                                        include_unstructured=kb.include_unstructured))

        for mode in ("off", "on"):
            with setting("OPENQNA_TYPO_TOLERANCE", "1" if mode == "on" else "0"):
                for q, wrong in typoed:
                    if wrong is None:
                        continue
                    f = figures[q.split]
                    assert q.gold is not None
                    for label, text in (("typo", wrong), ("clean", q.text)):
                        top, confidence = first(text)
                        if top is not None and kb.is_right(top, q.gold):
                            setattr(f, f"{label}_top1_{mode}", getattr(f, f"{label}_top1_{mode}") + 1)
                            if confidence >= threshold:
                                setattr(f, f"{label}_right_{mode}", getattr(f, f"{label}_right_{mode}") + 1)
                    if mode == "on":
                        f.questions += 1
                for q in off:
                    f = figures[q.split]
                    f.offtopic += mode == "on"
                    if first(q.text)[1] < threshold:
                        setattr(f, f"offtopic_rejected_{mode}", getattr(f, f"offtopic_rejected_{mode}") + 1)
        out[kb.project] = figures
    return by_split_and_total(out, Figures)


def _share(n: int, d: int) -> str:
    return "–" if not d else f"{n / d:.3f}"


def section(metrics: dict) -> list[str]:
    t = metrics.get("typos")
    if not t:
        return []
    out = ["", "## Typos: a misspelt word still matches", "",
           ("Each KB's in-scope questions with one typo each (`evaluation/typo_questions.py`: in one seeded-random word of five"
            " letters or more, two neighbouring letters swapped, one left out, one doubled, or one replaced by a"
            " keyboard neighbour; never the first letter; in a Chinese question, one character typed as a homophone,"
            " as a pinyin input method's wrong candidate: another of its syllable, as common as the language uses it;"
            " in a Japanese question, one katakana word written in hiragana, as when the input method's conversion is"
            " skipped),"
            " asked with `OPENQNA_TYPO_TOLERANCE` off and on"
            " (`ranking/typos.py`); the same questions as written, and the KB's off-topic questions, show what the"
            f" tolerance costs (off-topic rejected at t = {metrics['config']['threshold']:g}). *Right at t*: the top"
            " answer right with a confidence of at least t."), ""]
    header = ["knowledge base", "split", "questions", "typo'd top-1 off → on", "typo'd right at t off → on",
              "as written top-1 off → on", "as written right at t off → on", "off-topic", "off-topic rejected off → on"]
    rows = []
    for kb, figures in [*t["kbs"].items(), ("**all**", t["all"])]:
        for split in SPLITS:
            f = figures[split]
            n = f["questions"]
            rows.append([kb, split, str(n), f"{_share(f['typo_top1_off'], n)} → {_share(f['typo_top1_on'], n)}",
                         f"{_share(f.get('typo_right_off', 0), n)} → {_share(f.get('typo_right_on', 0), n)}",
                         f"{_share(f['clean_top1_off'], n)} → {_share(f['clean_top1_on'], n)}",
                         f"{_share(f.get('clean_right_off', 0), n)} → {_share(f.get('clean_right_on', 0), n)}",
                         str(f["offtopic"]),
                         f"{_share(f['offtopic_rejected_off'], f['offtopic'])} → "
                         f"{_share(f['offtopic_rejected_on'], f['offtopic'])}"])
    out += ["| " + " | ".join(header) + " |", "| --- | --- | " + " | ".join(["---:"] * (len(header) - 2)) + " |"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out
