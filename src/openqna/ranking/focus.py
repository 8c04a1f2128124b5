"""The question inside a long message: its asking sentences ranked on their own beside the whole message.

People write to a help desk as they would to a person: "Hello doctor. My husband has been coughing for a few days
and I am worried. Should he get tested for the virus? Thanks in advance."  Every feature the ranker reads falls
with such a message's length: its vector drifts from the stored question's (the greeting and the details are
meaning too), and the share of its words a record holds shrinks.  The right QnA still often comes first, but far
below any threshold: ``make eval``'s questions wrapped that way (a greeting, a personal detail and a closing around
the question, ``evaluation/long_questions.py``) were right at 0.5 for 0.373 of the test split against 0.526 as
written, and on covid-q's real users' questions for 0.056 against 0.155; with the focus, 0.526 and 0.155.

So a message of several sentences whose best answer is not sure (``SURE``) is also asked sentence by sentence, for
the sentences that ask something (a question mark, or a question word first) and name something (``MIN_TERMS``
content words): each record the whole message ranks among its ``POOL`` best keeps the best confidence any of them,
or the whole message, gives it.  A sentence that is a stored question word for word is no exact match ("Hi, how is
your day going? How do I reset my password?" is not chit-chat's at 1.0).  A sentence asked alone is an ordinary
question and gets an ordinary question's confidence, so a threshold means what it means for short questions; a
message with no asking sentence, or of one sentence, or already answered surely, is ranked exactly as before.
"""

from __future__ import annotations

import re

from openqna import settings
from openqna.index.analyze import CJK_RANGES, STOP_WORDS, analyze, cjk_share
from openqna.ranking import regime
from openqna.ranking.ranker import Ranked

MIN_WORDS = 12  # a message shorter than this is one question, whatever its punctuation
MIN_TERMS = 1  # content words a sentence needs to be asked on its own
MAX_PIECES = 4  # asking sentences asked on their own, at most (the first ones)
# A message whose best answer is at least this sure is answered as it is: its sentences are asked only to rescue a
# confidence that sank.  Asked always, they cost intent sets of two-sentence questions ("is there a fee for a
# transfer? if so how much will it be?") half a point of top-1 (banking77 0.858 -> 0.853 on its dev split).
SURE = 0.5
# A sentence asked alone lifts only the records the whole message ranks among its best this many: the message's
# details still say which answers are in question (a banking question's second sentence asked alone once answered
# hwu64's off-topic messages).
POOL = 5
# the first words of a sentence that asks (a question mark also says so)
ASKING_WORDS = frozenset("how what what's whats why when where who whom whose which can could do does did is are was "
                         "were will would should shall may might must isn't aren't can't don't doesn't".split())
# A sentence ends at a full stop, question or exclamation mark (CJK or not), or at a line's end; not at one followed
# by a digit ("$1.00") or by Chinese or Japanese text (a Japanese title's "!": "ちかっぱしんけん!』と").  Users leave
# out the space after one ("check what's going on.I don't want"): no space is needed.
_SENTENCE = re.compile("(?s).+?(?:[。！？]+|[.!?]+(?![0-9\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff"
                       "\uff00-\uffef])|\n|$)")
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?")
# Chinese and Japanese chat strings a message's clauses together with commas ("客服你好，我上周买了这款耳机，…，还没拆封，
# 请问可以退货吗？", "引っ越してきたのですが、転入の手続きはどこですればいいですか") and puts the question last: the last
# clause of such a sentence is asked on its own too (the message above got its right QnA at 0.114, its last clause
# alone at 0.937)
_CLAUSE = re.compile("[，、,]")


# A Japanese sentence that ends as a statement or a greeting does ("…者です", "お願いします", "…でした", "はじめまして",
# "こんにちは", a verb's or an adjective's plain form: "…遅れている", "…多い") tells something; one that ends otherwise
# asks ("印鑑登録に必要なもの", "水道を使い始める手続き"), as do
# ``regime.CJK_ASKS``' interrogatives, requests and particles in Chinese or Japanese, and a wish ("…したい").
_JA_TELLS = re.compile("(?:です|ます|た|だ|ね|よ|て|は|わ|[うくぐすつぬぶむるい])$")
_KANA = re.compile("[\u3040-\u30ff]")
_ASIDE = re.compile(r"\s*[（(][^（）()]*[）)]$")
_CJK = re.compile(f"[{CJK_RANGES}]")


def message_words(text: str) -> float:
    """How many words long ``text`` reads: its words, and a word for each one and a half Chinese, Japanese or Korean
    characters in them ("我上个月刚搬到这里" reads as "I moved here last month")."""
    words = 0.0
    for word in _WORD.findall(text):
        cjk = len(_CJK.findall(word))
        words += cjk / 1.5 + (len(word) > cjk)
    return words


def asks(sentence: str) -> bool:
    """Whether ``sentence`` asks something: a question mark, an English question word first, or in Chinese, Japanese or
    Korean what ``regime.CJK_ASKS`` finds, a wish or request ("たい", "ください", "싶어요"), or a Japanese sentence that does
    not end as a statement (``_JA_TELLS``)."""
    text = sentence.strip()
    if text.endswith(("?", "？")):
        return True
    words = [w.lower() for w in _WORD.findall(text)]
    if words and words[0] in ASKING_WORDS:
        return True
    if not cjk_share(text):
        return False
    bare = _ASIDE.sub("", text.rstrip("。．.！!、，, 　"))  # "…ことができる（第31条第5項）" ends as its sentence does
    if regime.CJK_ASKS.search(bare) or bare.endswith(("たい", "ください", "싶어요", "싶습니다")):
        return True
    return _KANA.search(bare) is not None and _JA_TELLS.search(bare) is None


def pieces(question: str) -> list[str]:
    """The sentences of ``question`` to be asked on their own (none for a short or one-sentence question, or with
    ``OPENQNA_QUESTION_FOCUS`` off)."""
    if not settings.question_focus() or message_words(question) < MIN_WORDS:
        return []
    sentences = []
    for m in _SENTENCE.finditer(question):
        sentence = m.group().strip()
        sentences.append(sentence)
        clauses = [c.strip() for c in _CLAUSE.split(sentence)] if cjk_share(sentence) else []
        if len(clauses) > 1 and _WORD.search(clauses[-1]):
            sentences.append(clauses[-1])
    sentences = [s for s in dict.fromkeys(sentences) if _WORD.search(s)]
    if len(sentences) < 2:
        return []
    out = []
    for sentence in sentences:
        content = [t for t in analyze(sentence, bigrams=False) if t not in STOP_WORDS]
        if asks(sentence) and len(content) >= MIN_TERMS and sentence.strip() != question.strip():
            out.append(sentence)
    return out[:MAX_PIECES]


def best_of(rankings: list[list[Ranked]], top: int, threshold: float = 0.0) -> list[Ranked]:
    """Each record's best confidence over ``rankings``, best first.  The first ranking is the whole message's (its
    ``POOL`` best): a sentence lifts only a record the whole message also ranks among them."""
    best: dict[int, Ranked] = {r.record_id: r for r in rankings[0]} if rankings else {}
    for ranked in rankings[1:]:
        for r in ranked:
            if r.record_id in best and r.confidence > best[r.record_id].confidence:
                best[r.record_id] = r
    out = sorted(best.values(), key=lambda r: -r.confidence)
    return [r for r in out if r.confidence >= threshold][:top]
