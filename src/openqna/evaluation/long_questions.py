"""Long messages (``ranking.focus``): the regimes' questions written as people write to a help desk.

The copy: each question, seeded-randomly, gets a greeting before it (or none), one sentence of personal detail
that asks nothing, and a closing after it (or none), the question ending with a question mark when it has no
punctuation of its own (a search query written into a message of sentences): "Good morning. I work in a grocery store and see a lot of
people every day. Should I wear a mask? Thanks in advance."  The greetings, details and closings (``GREETINGS``,
``DETAILS``, ``CLOSINGS``) were written by hand before anything was measured, for no data set in particular.
Each KB of ``KBS`` is asked its in-scope questions as written and long, and its off-topic questions long, with
``OPENQNA_QUESTION_FOCUS`` off and on (top 1, threshold 0): top-1 and right at the threshold of each, and the
share of long off-topic questions answered at the threshold (the focus must not answer what it cannot).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from openqna.evaluation.env import setting
from openqna.evaluation.regimes import SPLITS, RegimeKB, by_split_and_total, first_answer
from openqna.index.analyze import cjk_share
from openqna.kb.service import AskRequest, Service

KBS = ("banking77", "covid-q", "covid-qsim-deepset", "tiny-sample-kb", "doc-product-manual",
       "doc-multiturn-contosobenefits", "covid-qsim-tianchi-zh-dev", "cjk-jsquad-faq")
GREETINGS = ("Hi,", "Hello.", "Good morning.", "Hi there!", "Hello, I hope you can help me.", "")
DETAILS = ("I am 45 years old and I live with my parents.", "I have been trying to sort this out all week.",
           "My colleague told me to write to you.", "We just came back from a trip abroad last week.",
           "I work in a grocery store and see a lot of people every day.", "I am new to all of this.",
           "I have been reading a lot about it online and I am confused.", "I am a teacher and my school is open.")
CLOSINGS = ("Thanks in advance.", "Any advice would be appreciated.", "Thank you so much.", "Please help.", "")
# Chinese (Tianchi's patient questions) and Japanese (JSQuAD's FAQ KB) questions get their language's: written by
# hand for the Chinese and Japanese focus (issue 42's users), after the English ones were measured, in their manner
# (greetings, details that tell and closings, none of them a question).
GREETINGS_ZH = ("你好，", "您好。", "医生您好！", "打扰一下。", "")
DETAILS_ZH = ("我今年四十五岁，和父母住在一起。", "这个问题困扰我一个星期了。", "同事让我来这里问问。", "我上周刚从外地回来。",
              "我在网上查了很多资料，还是不太明白。")
CLOSINGS_ZH = ("先谢谢了。", "麻烦您了。", "谢谢！", "")
GREETINGS_JA = ("こんにちは。", "お世話になっております。", "はじめまして。", "突然のご連絡失礼いたします。", "")
DETAILS_JA = ("先月この町に引っ越してきた者です。", "一週間ずっとこの件で悩んでいます。", "同僚に聞いてみるように言われました。",
              "ネットで色々調べましたがよく分かりませんでした。", "学校で教員をしています。")
CLOSINGS_JA = ("よろしくお願いいたします。", "ご回答お待ちしております。", "ありがとうございます。", "")
_KANA = re.compile("[\u3040-\u30ff]")


def long_message(question: str, rng: random.Random) -> str:
    """``question`` between a greeting, a detail and a closing (see the module docstring), in its language."""
    asked = question.strip()
    if cjk_share(asked):
        japanese = _KANA.search(asked) is not None
        if asked and asked[-1] not in ".?!。？！":
            asked += "？"
        greetings, details, closings = ((GREETINGS_JA, DETAILS_JA, CLOSINGS_JA) if japanese else
                                        (GREETINGS_ZH, DETAILS_ZH, CLOSINGS_ZH))
        return "".join((rng.choice(greetings), rng.choice(details), asked, rng.choice(closings)))
    if asked and asked[-1] not in ".?!。？！":
        asked += "?"  # a search query ("covid symptoms") written into a message of sentences is punctuated too
    return " ".join(p for p in (rng.choice(GREETINGS), rng.choice(DETAILS), asked[:1].upper() + asked[1:],
                                rng.choice(CLOSINGS)) if p)


@dataclass
class Figures:
    questions: int = 0  # in-scope questions
    written_top1: int = 0  # as written (the focus does not touch a one-sentence question)
    written_right: int = 0  # ... right at or above the threshold
    long_top1_off: int = 0
    long_right_off: int = 0
    long_top1_on: int = 0
    long_right_on: int = 0
    offtopic: int = 0
    offtopic_answered_off: int = 0  # long off-topic questions answered at or above the threshold
    offtopic_answered_on: int = 0


def evaluate(service: Service, kbs: list[RegimeKB], *, seed: int, threshold: float, per_kb: int | None = 150) -> dict:
    out: dict[str, dict[str, Figures]] = {}
    for kb in (k for k in kbs if k.project in KBS):
        rng = random.Random(f"{seed}:long:{kb.project}")
        inscope = [q for q in kb.questions if q.gold is not None]
        off = [q for q in kb.questions if q.gold is None]
        inscope = rng.sample(inscope, min(len(inscope), per_kb or len(inscope)))
        off = rng.sample(off, min(len(off), per_kb or len(off)))
        written = {id(q): long_message(q.text, rng) for q in inscope + off}
        figures = {split: Figures() for split in SPLITS}

        def first(text: str) -> tuple[int | None, float]:
            return first_answer(service, kb, AskRequest(question=text, top=1,
                                                        include_unstructured=kb.include_unstructured))

        def count(f: Figures, top1: str, right: str, found: tuple[int | None, float], gold: str) -> None:
            top, confidence = found
            if top is not None and kb.is_right(top, gold):
                setattr(f, top1, getattr(f, top1) + 1)
                setattr(f, right, getattr(f, right) + (confidence >= threshold))

        for q in inscope:
            assert q.gold is not None
            f = figures[q.split]
            f.questions += 1
            count(f, "written_top1", "written_right", first(q.text), q.gold)
        for mode in ("off", "on"):
            with setting("OPENQNA_QUESTION_FOCUS", "1" if mode == "on" else "0"):
                for q in inscope:
                    assert q.gold is not None
                    count(figures[q.split], f"long_top1_{mode}", f"long_right_{mode}", first(written[id(q)]), q.gold)
                for q in off:
                    f = figures[q.split]
                    f.offtopic += mode == "on"
                    if first(written[id(q)])[1] >= threshold:
                        setattr(f, f"offtopic_answered_{mode}", getattr(f, f"offtopic_answered_{mode}") + 1)
        out[kb.project] = figures
    return by_split_and_total(out, Figures)


def _share(n: int, d: int) -> str:
    return "–" if not d else f"{n / d:.3f}"


def section(metrics: dict) -> list[str]:
    t = metrics.get("long_questions")
    if not t:
        return []
    threshold = metrics["config"]["threshold"]
    out = ["", "## Long messages: the question inside greetings and details", "",
           ("Each KB's questions written as a message to a help desk (`evaluation/long_questions.py`: a seeded-random"
            " greeting or none, one sentence of personal detail that asks nothing, the question, a closing or none;"
            " written by hand for no data set in particular; Tianchi's Chinese and JSQuAD's Japanese questions in"
            " their language, written later for the CJK focus), asked with `OPENQNA_QUESTION_FOCUS` off and on"
            f" (`ranking/focus.py`). *Right at t* (t = {threshold:g}): the share of in-scope questions whose top"
            " answer is right at or above t; *off-topic answered*: the share of the KB's off-topic questions, written"
            " the same way, answered at or above t. The focus gives a question back the confidence it gets alone, an"
            " off-topic one's too: JSQuAD's FAQ KB answers about a quarter of its off-topic questions as written"
            " (questions about the paragraphs left out, some of which the paragraphs kept answer in part; see the"
            " Chinese and Japanese section), and about as many of them written long with the focus on."), ""]
    header = ["knowledge base", "split", "questions", "as written: top-1 / right at t",
              "long, focus off → on: top-1", "right at t", "off-topic", "off-topic answered off → on"]
    rows = []
    for kb, figures in [*t["kbs"].items(), ("**all**", t["all"])]:
        for split in SPLITS:
            f = figures[split]
            n = f["questions"]
            rows.append([kb, split, str(n), f"{_share(f['written_top1'], n)} / {_share(f['written_right'], n)}",
                         f"{_share(f['long_top1_off'], n)} → {_share(f['long_top1_on'], n)}",
                         f"{_share(f['long_right_off'], n)} → {_share(f['long_right_on'], n)}", str(f["offtopic"]),
                         f"{_share(f['offtopic_answered_off'], f['offtopic'])} → "
                         f"{_share(f['offtopic_answered_on'], f['offtopic'])}"])
    out += ["| " + " | ".join(header) + " |", "| --- | --- | " + " | ".join(["---:"] * (len(header) - 2)) + " |"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out
