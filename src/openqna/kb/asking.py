"""Asking as Azure does: qnaId lookup, context and follow-ups, filters, threshold, spans, one default answer.

``rank`` is what ``ask`` ranks; a follow-up question (``previousUserQuery``, prompts of the previous
answer) adds evidence there and never confidence from nothing (``ranking.followup``).  ``answer_from_text``
is ``:query-text``: answers from records given with the question, nothing stored.
``rank`` gathers the conversation's evidence (prompts, the previous question) here because it needs the
store (the previous QnA) and the index together.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from openqna.answers.span import Span, best_spans, sentence_spans
from openqna.filters.match import Filter, IdIn, KindIn, all_of
from openqna.formats.limits import LIMITS
from openqna.index.analyze import Synonyms, analyze, exact_key, expand_with_synonyms, unread_share
from openqna.index.memindex import MemIndex
from openqna.kb.catalog import kind_of
from openqna.kb.service_base import QuerySpace, ServiceBase, taking_turns
from openqna.models.embedder import Embedder
from openqna.ranking import calibrations, focus, followup, ranker, typos
from openqna.ranking.multilingual import own_language_rows
from openqna.records import InvalidArgument, QnA
from openqna.store import Project
from openqna.store.base import LIVE

DECIMALS = 4  # a confidence is answered rounded, as Azure's are


@dataclass
class SpanRequest:
    threshold: float = 0.0
    top_answers: int = 1

@dataclass
class AskRequest:
    question: str | None = None
    qna_id: int | None = None
    top: int = 3
    threshold: float = 0.0
    previous_qna_id: int | None = None
    previous_user_query: str | None = None
    question_only: bool = False
    filter: Filter | None = None
    include_unstructured: bool = False
    span: SpanRequest | None = None
    explain: bool = False  # fill Answer.parts (the console's Inspect)

@dataclass
class Answer:
    qna: QnA | None  # None: the project's default answer
    confidence: float
    span: Span | None = None
    default_text: str = ""
    parts: dict[str, float] = field(default_factory=dict)  # ranker.Ranked.parts, when the request asked

@dataclass
class TextAnswer:
    record_id: str
    text: str
    confidence: float
    offset: int
    length: int
    span: Span | None = None


def one_per_section(answers: list[Answer]) -> list[Answer]:
    """``answers`` without a section's second answer: a document's section is imported as a QnA (its heading the
    question) and as passages under the same heading, and with includeUnstructuredSources both came back, one after
    the other ("vision insurance": the Vision Coverage passage at 0.813, then its QnA at 0.768), pushing the real
    second choice out.  A passage or QnA is left out when one of the other kind, from the same source under the same
    heading, ranks above it."""
    kept: list[Answer] = []
    seen: set[tuple[str, str, str, str]] = set()
    for a in answers:
        q = a.qna
        if q is None or not q.questions:
            kept.append(a)
            continue
        # the section the heading sits under: a QnA's "section" metadata; a passage's, less its own heading
        under = q.metadata.get("section", "")
        if q.kind == "passage":
            under = under.rsplit(" > ", 1)[0] if " > " in under else ""
        key = (q.source.lower(), exact_key(q.questions[0]), under)
        other = "qna" if q.kind == "passage" else "passage"
        if (*key, other) in seen:
            continue
        seen.add((*key, q.kind))
        kept.append(a)
    return kept


class Asking(ServiceBase):
    # -- asking -----------------------------------------------------------------------
    def ask(self, project: str, deployment: str, req: AskRequest) -> list[Answer]:
        """Azure's query semantics: qnaId lookup, context, filters, threshold, one default answer."""
        return self.ask_in(project, deployment, req)[0]

    @taking_turns
    def ask_in(self, project: str, deployment: str, req: AskRequest) -> tuple[list[Answer], Project]:
        """``ask``, with the project as read for it (its settings, such as the query log's, need no second read)."""
        if deployment.lower() == LIVE:  # "Test" is the live state, as Azure's runtime reads it
            deployment = LIVE
        proj = self.store.get_project(project)
        if kind_of(proj) == "table":  # its rows are no answers: ranked here they all fell below any threshold
            raise InvalidArgument(f"'{project}' is a table: its rows answer searches (get_related_{project}, the "
                                  f"tools' search), not questions; ask a project of QnAs and passages.")
        index = self.indexes.get(project, deployment)
        if req.qna_id is None and index.n:
            self.check_embedder(proj, deployment)
        if req.qna_id is not None:
            found = self.store.get_qnas(project, [req.qna_id], deployment).get(req.qna_id)
            answers = [Answer(found, 1.0)] if found else []
        else:
            answers, vector = self._search(project, deployment, index, req, self.calibration(proj))
            if answers and req.span is not None:
                self._add_spans(req, vector, answers, index)
        if not answers:
            return [Answer(None, 0.0, default_text=self.default_answer(proj, deployment, index))], proj
        return [with_prompts_shown(a, index) for a in answers], proj

    def default_answer(self, proj: Project, deployment: str, index: MemIndex | None = None) -> str:
        """What ``deployment`` answers when nothing passes: the project's default answer when the version it holds was
        deployed (``Deployment.default_answer``), the live one for 'test' and for a deployment made before versions
        kept it.  Editing the default answer, like editing a QnA, changes no deployment until the next deploy.
        ``index``: the deployment's, which keeps it read once per deploy."""
        if deployment.lower() == LIVE:
            return proj.default_answer
        index = index or self.indexes.get(proj.name, deployment)
        deployed = index.derived("default_answer", lambda: next(
            (d.default_answer for d in self.store.list_deployments(proj.name) if d.name == deployment), None))
        return deployed or proj.default_answer

    def prepared_synonyms(self, project: str, deployment: str, index: MemIndex) -> Synonyms:
        """The deployment's synonym groups, read from the store and prepared for matching once per index version."""
        return index.derived("synonyms", lambda: Synonyms(self.store.get_synonyms(project, deployment)))

    def kana_words(self, project: str, deployment: str, index: MemIndex) -> Callable[[], typos.KanaWords]:
        """The deployment's kana words (``typos.KanaWords``), read from the store once per index version when a
        question first needs them (one written in kana)."""
        def read() -> typos.KanaWords:
            return typos.KanaWords.of(text for q in self.store.list_qnas(project, deployment)
                                      for text in (*q.questions, q.answer))
        return lambda: index.derived("kana_words", read)

    def read_as(self, project: str, deployment: str, question: str) -> str:
        """``question`` as the ranker reads it: its synonyms expanded and its typos corrected (``ranking.typos``),
        for Inspect to show ("咯学" read as the KB's "咯血")."""
        index = self.indexes.get(project, deployment)
        synonyms = self.prepared_synonyms(project, deployment, index)
        return typos.correct(index, expand_with_synonyms(question, synonyms),
                             self.kana_words(project, deployment, index))

    def _search(self, project: str, deployment: str, index, req: AskRequest,
                calibration: calibrations.Calibration) -> tuple[list[Answer], np.ndarray]:
        # the threshold is compared with the confidence as answered, to 4 decimals: an answer shown at 0.9023 passes
        # a threshold of 0.9023 (ranked at 0.90226 it did not); the ranker's cut lets those that round up through
        # with passages, a document's section may answer twice, as its QnA and as its passage: the QnAs' and the
        # passages' best are kept, and the second of each section left out (``one_per_section``)
        ranked, vector = self.rank(project, deployment, index,
                                   replace(req, threshold=max(0.0, req.threshold - 0.5 * 10**-DECIMALS)), calibration,
                                   keep=2 * req.top if req.include_unstructured else None)
        qnas = self.store.get_qnas(project, [r.record_id for r in ranked], deployment)
        answers = [Answer(qnas[r.record_id], round(r.confidence, DECIMALS), parts=r.parts) for r in ranked
                   if r.record_id in qnas]
        threshold = round(req.threshold, 12)  # QnA Maker's 57.99 / 100 is 0.5799000000000001
        return one_per_section([a for a in answers if a.confidence >= threshold])[: req.top], vector

    def rank(self, project: str, deployment: str, index, req: AskRequest,
             calibration: calibrations.Calibration | None = None, *, only: np.ndarray | None = None,
             space: QuerySpace | None = None, keep: int | None = None) -> tuple[list[ranker.Ranked], np.ndarray]:
        """What ``ask`` ranks for ``req`` (unrounded), and the query vector; ``calibration`` overrides the project's.

        A question with Chinese, Japanese or Korean text asked of a knowledge base with the multilingual space is
        ranked there, with that space's own calibration (``openqna.ranking.multilingual``).  A question in another
        language than most of the records is read across languages only where it crosses them: the records in its
        own language (the English QnAs of a mostly Chinese KB) are ranked apart, as one language, and the two lists
        merged by confidence (read across languages, "hello" got the one English QnA of such a KB at 0.70).  The
        other way round, a question in the KB's main language reads its few records in another language as one
        language too (the Chinese "能寄到国外吗" finds the English shipping QnA of that KB at 0.009): read across
        languages, a few records are few rivals, and "谢谢" got the English support QnA at 0.58.  ``only``: the
        records ranked, of those the request allows; ``space``: where; ``keep``: how many of the QnAs' and the
        passages' best together are kept (default ``req.top``; each kind's own list holds ``req.top``).
        """
        question = req.question or ""
        synonyms = self.prepared_synonyms(project, deployment, index)
        if space is None:
            space = self.query_space(index, question, calibration, project=project, deployment=deployment)
            # a question crossing languages, of a KB that holds records in its own language too: those are read as
            # in one language (the others across), each list on its own scale
            own = own_language_rows(index, question) if space.crossing else None
            if own is not None and own.any() and not own.all():
                ranked, vectors = [], []
                for rows, across in ((own, False), (~own, True)):
                    here = space if space.crossing == across else self.query_space(
                        index, question, calibration, project=project, deployment=deployment, across=across)
                    found, vector = self.rank(project, deployment, index, req, calibration, only=rows, space=here,
                                              keep=keep)
                    ranked += found
                    vectors.append((here is space, vector))
                return (sorted(ranked, key=lambda r: -r.confidence)[: keep or req.top],
                        max(vectors, key=lambda v: v[0])[1])
        index, embedder, calibration = space.index, space.embedder, space.calibration
        if req.question_only and space.crossing and embedder is self.multilingual.crossing:
            # CROSSLINGUAL reads the answer most: the stored questions alone have a fit of their own
            calibration = replace(calibrations.CROSSLINGUAL_QUESTIONS, near_topic=calibration.near_topic)
        kinds = ("qna", "passage") if req.include_unstructured else ("qna",)
        flt = all_of(req.filter, KindIn(kinds))
        eligible = index.mask(flt) if only is None else index.mask(flt) & only
        children: set[int] = set()
        exact_prompt: set[int] = set()
        asked_prompts: set[int] = set()  # prompts whose display text the question asks (``followup.prompt_matches``)
        asked_before = ""  # the previous QnA's question, read as the previous turn when a client sends none
        if req.previous_qna_id is not None:
            prev = self.store.get_qnas(project, [req.previous_qna_id], deployment).get(req.previous_qna_id)
            if prev is not None:
                asked_before = prev.questions[0] if prev.questions else ""
                key = exact_key(question)
                for p in prev.dialog.prompts:
                    children.add(p.qna_id)
                    if exact_key(p.display_text) == key:
                        exact_prompt.add(p.qna_id)
                asked_prompts = followup.prompt_matches(question, {p.qna_id: p.display_text
                                                                   for p in prev.dialog.prompts})
        reachable = ~index.context_only | index.mask(IdIn(tuple(children)))
        eligible &= reachable
        # A filter restricts which records answer, not what a confidence means: the records it leaves out are still
        # read as rivals, a little lower (``regime.FILTERED_OUT``)
        rivals = None if req.filter is None else index.mask(KindIn(kinds)) & reachable
        if rivals is not None and only is not None:
            rivals &= only
        kana = self.kana_words(project, deployment, index)
        expanded = typos.correct(index, expand_with_synonyms(question, synonyms), kana)
        # Bot Framework's C# clients send previousUserQuery "" (or none) on a follow-up turn: the previous QnA's own
        # question then stands for what was asked before it
        previous = (req.previous_user_query or "").strip() or asked_before
        # The expanded question is what the vector and the keyword features read; the exact match reads the
        # question as asked (``rank``'s ``keywords``), so synonyms never lower a stored question asked word for word.
        # One text a call: the embedder caches single queries, and the previous one was asked a turn ago.
        vectors = space.mapped(np.concatenate([embedder.embed([text]) for text in
                                               [expanded] + ([expand_with_synonyms(previous, synonyms)]
                                                             if previous else [])]))
        vector = vectors[0]
        # a manual's sections are read through their text (``ranker.read_as_passages``), but in a conversation, and
        # in a KB whose FAQ adapts (its QnAs' logits are on the adapted scale, where a section read as a passage
        # ranked below every FAQ QnA), by their headings as well
        sections = not (children or previous) and ranker.kb_adaptation(index, calibration, space.adapter) is None
        options = dict(question_only=req.question_only, boosted_ids=children, exact_prompt_ids=exact_prompt,
                       calibration=calibration, flt=None if space.multilingual else flt, reads_cjk=space.reads_cjk,
                       sections_as_passages=sections, query_map=space.adapter)
        # the filter a store pushes into its own vector search, per kind ranked (none in the multilingual space)
        kind_flt = {kind: None if space.multilingual else all_of(req.filter, KindIn((kind,)))
                    for kind in ("qna", "passage")}

        def of_kind(kind: str | None) -> dict:
            """``ranker.rank``'s arguments for the records of one ``kind`` (None: any): the filter a store pushes
            into its own vector search, and the records read as rivals."""
            pool = rivals if rivals is None or kind is None else rivals & (index.passage if kind == "passage"
                                                                           else ~index.passage)
            return {"pool": pool, **({"flt": kind_flt[kind]} if kind else {})}

        def alone(mask: np.ndarray, kind: str | None) -> list[ranker.Ranked]:
            """The question without the conversation, as the cap of what the context may give (``followup.capped``)."""
            return ranker.rank(index, question, vectors[0], mask, top=followup.POOL, keywords=expanded,
                               **{**options, "boosted_ids": frozenset(), "exact_prompt_ids": frozenset(),
                                  **of_kind(kind)})

        def conversation(mask: np.ndarray, kind: str | None) -> tuple[list[ranker.Ranked], np.ndarray, dict]:
            """The question alone among ``mask``'s records (of one ``kind``, or any), and the query vector and logit
            offsets the conversation gives them.  A QnA's are what they are without passages, whose sections would
            otherwise take the few candidates the previous turn is read into (a follow-up's QnA fell from 0.306
            to 0.011 with includeUnstructuredSources); passages read it among every record, as before (read among
            passages alone, one more off-topic follow-up of make eval's dev split was answered)."""
            first = alone(mask, kind) if children or previous else []
            if not previous:
                return first, vectors[0], {}
            among, best = (eligible, alone(eligible, None)) if kind == "passage" else (mask, first)
            return (first, *self._follow_up(project, deployment, index, among, question, previous,
                                            best[0].confidence if best else 0.0, expanded, vectors, options,
                                            embedder))

        evidence = (asked_prompts | exact_prompt | followup.records_with_words(index, question)
                    if children or previous else set())

        # a long message's asking sentences, each also asked alone (``focus``); none in a conversation
        focused = [] if children or previous else focus.pieces(question)
        if focused:
            texts = [typos.correct(index, expand_with_synonyms(piece, synonyms), kana) for piece in focused]
            focused_vectors = space.mapped(embedder.embed(texts))

        def ranked_in(mask: np.ndarray, kind: str | None) -> list[ranker.Ranked]:
            """The records of ``mask`` (of one ``kind``, or any) ranked, with the conversation's evidence."""
            nonlocal vector
            extra = of_kind(kind)
            first, vector, offsets = conversation(mask, kind)
            if not children and not previous and not focused:
                return ranker.rank(index, question, vector, mask, top=req.top, keywords=expanded,
                                   threshold=req.threshold, explain=req.explain, **{**options, **extra})
            if not children and not previous:  # a sentence's words and vector; the exact match reads the message
                whole = ranker.rank(index, question, vector, mask, top=max(req.top, focus.POOL), keywords=expanded,
                                    explain=req.explain, **{**options, **extra})
                if whole and whole[0].confidence >= focus.SURE:  # the message is answered as it is
                    return [r for r in whole if r.confidence >= req.threshold][: req.top]
                return focus.best_of(
                    [whole, *(ranker.rank(index, question, v, mask, top=req.top, keywords=keywords,
                                          explain=req.explain, **{**options, **extra})
                              for v, keywords in zip(focused_vectors, texts))], req.top, req.threshold)
            contextual = ranker.rank(index, question, vector, mask, logit_offsets=offsets,
                                     top=max(req.top, followup.POOL), keywords=expanded, explain=req.explain,
                                     **{**options, **extra})
            capped = followup.capped(contextual, first, evidence, prompted=exact_prompt)
            return [r for r in capped if r.confidence >= req.threshold][: req.top]

        passages = eligible & index.passage
        if not passages.any() or not (eligible & ~index.passage).any():
            return ranked_in(eligible, None), vector
        # Passages compete for rank, not for the scale: a QnA's confidence is what it is without them (the last
        # step reads every candidate as a rival), and a passage's is read among the passages.
        found = ranked_in(passages, "passage")
        qnas = ranked_in(eligible & ~index.passage, "qna")  # last: the vector returned is the QnAs' query's
        return sorted(qnas + found, key=lambda r: -r.confidence)[: keep or req.top], vector

    def _follow_up(self, project: str, deployment: str, index, eligible: np.ndarray, question: str, previous: str,
                   confidence: float, expanded: str, vectors: np.ndarray, options: dict,
                   embedder: Embedder) -> tuple[np.ndarray, dict[int, float]]:
        """The query vector and logit offsets of a question asked after ``previousUserQuery`` (see followup);
        ``confidence``: the question's best without context."""
        if confidence >= 1.0 or not followup.needs_context(question, confidence):
            return vectors[0], {}
        vector = followup.context_vector(vectors[0], vectors[1])
        candidates = ranker.rank(index, question, vector, eligible, top=followup.CANDIDATES, keywords=expanded,
                                 **options)
        qnas = self.store.get_qnas(project, [r.record_id for r in candidates], deployment)
        qsims = dict(zip(qnas, index.q.dense_rows(vector, np.asarray([index.row_of[i] for i in qnas], np.int64))))

        def gain(ids: list[int], sentences: np.ndarray) -> np.ndarray:
            rows = np.asarray([index.row_of[i] for i in ids], np.int64)
            return ranker.question_gain(index, vector, rows, sentences, options["calibration"])

        offsets = followup.sentence_offsets(vector, {i: q.answer for i, q in qnas.items()},
                                            {i: float(qsims[i]) for i in qnas},
                                            embedder.embed, gain, f"{question} {previous}")
        return vector, offsets

    def reader(self, question: str, index: MemIndex | None = None) -> Embedder:
        """The embedder that reads ``question``'s answer spans: the multilingual one for a CJK question (when the
        setting is not ``off``), or for one ranked in the space of ``index`` (``MultilingualSpace.index_for``), else
        this service's."""
        multilingual = self.multilingual.reads(question) or (
            index is not None and self.multilingual.index_for(index, question) is not None)
        return self.multilingual.embedder if multilingual else self.embedder

    def _add_spans(self, req: AskRequest, vector: np.ndarray, answers: list[Answer], index: MemIndex) -> None:
        """Answer spans; ``vector``, the question's in the space it was ranked in, is made again by ``reader``."""
        assert req.span is not None
        chosen = answers[: req.span.top_answers]
        reader = self.reader(req.question or "", index)
        if reader is not self.embedder:
            vector = reader.embed([req.question or ""])[0]  # a cache hit when it was ranked in that space
        spans = best_spans(req.question or "", vector, [a.qna.answer for a in chosen], reader.embed)
        for answer, span in zip(chosen, spans):
            if span is not None and span.confidence >= round(req.span.threshold, 12):  # as the answers' threshold
                answer.span = span

    @taking_turns
    def answer_from_text(self, question: str, records: list[tuple[str, str]], *,
                         span: bool = True) -> list[TextAnswer]:
        """Azure's :query-text: the best passages of ad-hoc records, ≤3 per record, best first.

        Only the ``LIMITS.text_passages`` passages that share the most words with the question are embedded and
        scored (``shortlist``), and none when the embedder reads none of the question (a Chinese question and an
        English-only model), which its words alone then rank: the model's run is nearly all of a request's CPU, and
        records at Azure's limits hold ~85 passages of English (~5,800 tokens) or ~70 of Chinese (~17,900).
        """
        by_id = dict(records)
        passages = [(rid, s, e) for rid, text in records for s, e in passages_of(text)]
        if not passages:
            return []
        q_terms = set(analyze(question, bigrams=False))
        terms = [set(analyze(by_id[rid][s:e], bigrams=False)) for rid, s, e in passages]
        keep = shortlist(q_terms, terms, LIMITS.text_passages)
        passages, terms = [passages[i] for i in keep], [terms[i] for i in keep]
        texts = [by_id[rid][s:e] for rid, s, e in passages]
        overlaps = [len(q_terms & t) / max(len(q_terms), 1) for t in terms]
        unread = unread_share(question, self.reads_cjk)
        qv, cosines = None, np.zeros(len(texts))
        if unread < 1.0:  # one the embedder reads none of is ranked by its words alone (``text_confidences``)
            vectors = self.embedder.embed([question] + texts)
            qv, cosines = vectors[0], vectors[1:] @ vectors[0]
        scores = ranker.text_confidences(calibrations.QUERY_TEXT, cosines, np.asarray(overlaps), unread).tolist()
        order = sorted(range(len(passages)), key=lambda i: -scores[i])
        out: list[TextAnswer] = []
        per_record: dict[str, int] = {}
        for i in order:
            rid, s, e = passages[i]
            if per_record.get(rid, 0) >= LIMITS.text_answers_per_record:
                continue
            per_record[rid] = per_record.get(rid, 0) + 1
            out.append(TextAnswer(rid, texts[i], scores[i], s, e - s))
        if span and out:
            reader = self.reader(question)
            if reader is not self.embedder or qv is None:
                qv = reader.embed([question])[0]
            best = best_spans(question, qv, [out[0].text], reader.embed)[0]
            out[0].span = best
        return out


def with_prompts_shown(answer: Answer, index: MemIndex) -> Answer:
    """``answer`` with the follow-up prompts a bot should show, in the order it should show them.

    Prompts that lead to no record of ``index`` (its deployment) are left out: deleting a QnA, or an import or a
    source refresh that drops it, leaves the prompts of other QnAs that point at it in place, and a bot would show a
    button whose qnaId answers nothing.  The others are sorted by ``displayOrder`` (ties as stored; a prompt written
    without one was given its place in the list when it was read): Bot Framework's card builders show the prompts in
    list order, not by ``displayOrder``.  The authoring API and exports keep the stored order, so what an editor
    reads and writes back is what it wrote.
    """
    qna = answer.qna
    if qna is None:
        return answer
    prompts = sorted((p for p in qna.dialog.prompts if p.qna_id in index.row_of), key=lambda p: p.display_order)
    if prompts == qna.dialog.prompts:
        return answer
    return replace(answer, qna=replace(qna, dialog=replace(qna.dialog, prompts=prompts)))


def shortlist(question: set[str], passages: list[set[str]], most: int) -> list[int]:
    """The indexes of the ``most`` passages (in their order) that share the rarest of the question's terms.

    A passage scores the sum of the idf, among these passages, of the question's terms it holds; ties, and
    the places left when fewer passages share a term, go to the earlier passages.  A paraphrase sharing no
    word with the question is therefore found only among the first ``most`` passages: the price of a bounded
    request, which cost no top answer on XQuAD packed into full records (docs/settings.md, Limits).
    """
    if len(passages) <= most:
        return list(range(len(passages)))
    n = len(passages)
    idf = {t: math.log(1.0 + (n - df + 0.5) / (df + 0.5))
           for t in question if (df := sum(t in p for p in passages))}
    scores = [sum(idf.get(t, 0.0) for t in question & p) for p in passages]
    return sorted(sorted(range(n), key=lambda i: -scores[i])[:most])


def passages_of(text: str, max_chars: int = 400) -> list[tuple[int, int]]:
    """Group consecutive sentences into passages of up to ``max_chars``; a longer sentence (a list without full
    stops, a wall of text) is cut into pieces of up to ``max_chars``, each at its last space if it has one."""
    out: list[tuple[int, int]] = []
    for s, e in (piece for span in sentence_spans(text) for piece in _pieces(text, *span, max_chars)):
        if out and e - out[-1][0] <= max_chars and s - out[-1][1] <= 2:
            out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def _pieces(text: str, start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    """``text[start:end]`` cut into spans of up to ``max_chars``, each ending at its last whitespace when it has one
    (Chinese and Japanese have none: a hard cut), surrounding whitespace left out."""
    out = []
    while end - start > max_chars:
        cut = max(text.rfind(" ", start + 1, start + max_chars + 1), text.rfind("\n", start + 1, start + max_chars + 1))
        cut = cut if cut > start else start + max_chars
        out.append((start, len(text[:cut].rstrip())))
        start = cut
        while start < end and text[start].isspace():
            start += 1
    if end > start:
        out.append((start, end))
    return out
