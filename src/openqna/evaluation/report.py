"""``report.md`` and the threshold plots, from the metrics dict ``run_eval`` returns.

The report states how every figure was made next to the figure, so it can be read (and
diffed, when committed) without the code.  Plots use matplotlib's Agg backend: no display.
"""

from __future__ import annotations

from pathlib import Path

from openqna.evaluation import (
    cjk_report,
    conversations,
    filters,
    guard,
    long_questions,
    near_topic,
    regime_report,
    training,
    typo_questions,
)
from openqna.evaluation.baselines import METHOD_NAMES, METHODS
from openqna.evaluation.spans import CONFIDENCE_FIGURES, LOOKED_AT, RIGHT_F1, SPAN_METHODS, UNSEEN

_KB_NAMES = {
    "banking77": "banking77",
    "hwu64": "hwu64",
    "chitchat-professional": "chit-chat (professional)",
    "chitchat-friend": "chit-chat (friend)",
    "chitchat-comic": "chit-chat (comic)",
}


def plot_name(kb: str) -> str:
    return f"threshold-{kb}.png"


def write_plots(out_dir: Path, metrics: dict) -> list[str]:
    """One PNG per knowledge base: accuracy and rejection shares against the threshold; and the regimes'
    reliability diagrams (``regime_report``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = metrics["curves"]
    thresholds = curves["thresholds"]
    threshold = metrics["config"]["threshold"]
    written = []
    for kb in metrics["faq"]:
        c = curves[kb]
        fig, ax = plt.subplots(figsize=(6.4, 4.6), dpi=100)
        ax.plot(thresholds, c["accuracy"], label="in-scope: right answer (top-1 accuracy)", color="tab:green")
        ax.plot(thresholds, c["rejected"], label="in-scope: default answer", color="tab:orange")
        if c.get("offtopic_rejected"):
            source = metrics["offtopic"][kb]["offtopic_source"]
            ax.plot(thresholds, c["offtopic_rejected"], label=f"off-topic ({source}): default answer",
                    color="tab:blue")
        ax.axvline(threshold, color="grey", linestyle="--", linewidth=1, label=f"threshold {threshold:g}")
        ax.set(xlim=(0, 1), ylim=(0, 1.02), xlabel="confidence threshold", ylabel="share of questions",
               title=f"{_KB_NAMES.get(kb, kb)}: accuracy and rejection")
        ax.grid(alpha=0.3)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, fontsize=8, frameon=False)
        fig.tight_layout()
        fig.savefig(out_dir / plot_name(kb), metadata={"Software": None})
        plt.close(fig)
        written.append(plot_name(kb))
    return written + regime_report.write_plots(out_dir, metrics)


def _f(x: float) -> str:
    return f"{x:.3f}"


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _table(header: list[str], rows: list[list[str]], text_columns: int = 1) -> list[str]:
    align = ["---"] * text_columns + ["---:"] * (len(header) - text_columns)
    return ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"] + \
        ["| " + " | ".join(r) + " |" for r in rows]


def _accurate_section(acc: dict | None, alone: dict | None, fast: dict, threshold: float) -> list[str]:
    """FAQ matching and off-topic rejection with the accurate embedder, next to mpnet alone and the default model."""
    out = ["", "## The accurate model: all-mpnet-base-v2 with the universal sentence encoder", ""]
    if not acc:
        return []
    if "missing" in acc:
        return out + [f"Not measured: {acc['missing']}"]
    alone = alone if alone and "missing" not in alone else None
    out += [(f"The same FAQ knowledge bases and questions, embedded by `{acc['embedder']}` (`{acc['setting']}`):"
             " all-mpnet-base-v2 (12 layers and 768 dimensions against MiniLM's 6 and 384) beside Google's"
             " multilingual universal sentence encoder v3 (a CNN trained on question-answer and conversational pairs,"
             " 512 dimensions, weight 0.4 in the cosine), ranked with the calibration fitted for it on the same"
             " development data (`calibrations.calibration_for`), its last step across kinds of KB included (its"
             " figures on every kind: docs/confidence.md, \"Every kind of knowledge base, per model\"). It costs about 7-8x MiniLM's time per question and 7x per"
             " indexed text (bench/models.py); this run embedded"
             f" {acc['texts_embedded']:,} texts in {acc['embedding_model_seconds']:.0f} s and took"
             f" {acc['seconds']:.0f} s in all. *mpnet alone* is the same run with `OPENQNA_EMBEDDER=mpnet` and its own"
             " calibration. Top-1 accuracy (MRR@5 in brackets):"), ""]
    names = [METHOD_NAMES[m] for m in METHODS]
    out += _table(["knowledge base", *names, "mpnet alone's ranker", "default model's ranker"],
                  [[_KB_NAMES.get(kb, kb), *[f"{_f(r['top1'][m])} ({_f(r['mrr5'][m])})" for m in METHODS],
                    _f(alone["faq"][kb]["top1"]["ranker"]) if alone and kb in alone["faq"] else "",
                    _f(fast[kb]["top1"]["ranker"]) if kb in fast else ""]
                   for kb, r in acc["faq"].items()])
    out += ["", f"Off-topic rejection at threshold {threshold:g}, as above:", ""]
    runs = [("", acc)] + ([(", mpnet alone", alone)] if alone else [])
    out += _table(["knowledge base", "off-topic questions", "off-topic: default answer", "without currency intents",
                   "in-scope top-1 at 0", f"in-scope top-1 at {threshold:g}", "top-1 lost",
                   "in-scope: default answer"],
                  [[_KB_NAMES.get(kb, kb) + label, f"{r['offtopic_questions']} ({r['offtopic_source']})",
                    _pct(r["offtopic_rejected"]), f"{_pct(r['disjoint_rejected'])} of {r['disjoint_questions']}",
                    _f(r["top1_at_zero"]), _f(r["top1_at_threshold"]), _f(r["top1_lost"]),
                    _pct(r["inscope_rejected"])] for label, run in runs for kb, r in run["offtopic"].items()])
    return out


MOVED = 0.005  # half a point: issue 43's rule for making `fast` the default is that no set moves more


def _fast_section(metrics: dict) -> list[str]:
    """Every set of the guard table with the int8 MiniLM (``OPENQNA_EMBEDDER=fast``) beside the default model.

    Its own heading and its own column names, after the guard's table: ``guard.committed_figures`` reads the guard
    table only, so these figures never become what a later run is held to.
    """
    fast = metrics.get("fast")
    if not fast:
        return []
    out = ["", "## The int8 model (`fast`): every set of the guard table", ""]
    if "missing" in fast:
        return out + [f"Not measured: {fast['missing']}"]
    threshold = metrics["config"]["threshold"]
    out += [(f"The regimes and the Chinese and Japanese KBs built and asked again, the same questions, with"
             f" `{fast['embedder']}` (`{fast['setting']}`: all-MiniLM-L6-v2 with int8 weights, made by onnxruntime's"
             " dynamic quantization of the default's file) in a store of its own, ranked with the default's"
             " calibration (not refitted; docs/confidence.md, \"Measured, not yet recommended: `fast`\"); the"
             " multilingual space is the same as the default's. Test splits; *right at t* as in the guard table"
             f" (t = {threshold:g}). For reading only: the guard holds the default's figures, not these. This run"
             f" embedded {fast['texts_embedded']:,} texts with it in {fast['embedding_model_seconds']:.0f} s and"
             f" took {fast['seconds']:.0f} s in all."), ""]
    return out + _int8_table(guard.sets_of(metrics), fast, "default", "fast", threshold,
                             "issue 43 makes `fast` the default only when none does.")


def _int8_table(fp32_sets: list, int8: dict, fp32_name: str, int8_name: str, threshold: float, rule: str,
                default: list | None = None) -> list[str]:
    """Each guard set's top-1 and right at t with a model (``fp32_sets``) and its int8 weights (``int8``), and
    which moved by more than ``MOVED``; with the default model's top-1 beside them when ``default`` is given."""
    base = {s.name: s for s in fp32_sets}
    shipped = {s.name: s for s in default or []}
    sets = [s for s in guard.sets_of(int8) if s.name in base]
    moved = [s.name for s in sets if max(abs(s.top1 - base[s.name].top1),
                                         abs(s.right_at_t - base[s.name].right_at_t)) > MOVED + 1e-9]
    rows = []
    for s in sets:
        d = base[s.name]
        rows.append([f"`{s.name}`", s.regime, str(s.inscope), f"{d.top1:.3f}", f"{s.top1:.3f}",
                     f"{100 * (s.top1 - d.top1):+.1f}", f"{d.right_at_t:.3f}", f"{s.right_at_t:.3f}",
                     f"{100 * (s.right_at_t - d.right_at_t):+.1f}", "yes" if s.floor_met else "**no**",
                     "**yes**" if s.name in moved else ""]
                    + ([f"{shipped[s.name].top1:.3f}" if s.name in shipped else ""] if default else []))
    right = f"right at {threshold:g}"
    out = _table(["knowledge base", "regime", "in-scope", f"top-1: {fp32_name}", f"top-1: {int8_name}", "top-1: points",
                  f"{right}: {fp32_name}", f"{right}: {int8_name}", f"{right}: points", f"{int8_name}: floor met",
                  f"moved > {100 * MOVED:g} point"] + (["top-1: default model"] if default else []),
                 rows, text_columns=2)
    mean = sum(s.top1 - base[s.name].top1 for s in sets) / max(len(sets), 1)
    mean_right = sum(s.right_at_t - base[s.name].right_at_t for s in sets) / max(len(sets), 1)
    return out + ["", (f"{len(moved)} of {len(sets)} sets moved by more than {100 * MOVED:g} point on top-1 or right at"
                       f" {threshold:g} (on average {100 * mean:+.2f} points of top-1 and {100 * mean_right:+.2f} of"
                       f" right at {threshold:g}); {rule}")]


# The int8 models beside the fp32 ones they come from (full runs of ``make eval`` only): the metrics keys of the fp32
# and int8 runs, the settings' names, the heading, what the int8 model is, and a question's time against the fp32 one.
INT8_PAIRS = (
    ("accurate_sets", "accurate_fast", "accurate", "accurate-fast",
     "The accurate model with int8 weights (`accurate-fast`)",
     "the same pair, mpnet with int8 weights but for its 12 feed-forward output products and its embedding tables,"
     " `onnx_export.MPNET_INT8`", "the accurate pair's", "about 0.7x the accurate pair's"),
    ("mpnet_sets", "mpnet_fast", "mpnet", "mpnet-fast",
     "mpnet alone with int8 weights (`mpnet-fast`)",
     "the same transformer with the int8 weights `accurate-fast` runs", "mpnet alone's", "about 0.7x mpnet's"),
)


def _int8_pair_section(metrics: dict, fp32_key: str, int8_key: str, fp32_name: str, int8_name: str, heading: str,
                       what: str, calibration: str, time: str) -> list[str]:
    """Every set of the guard table with an fp32 model (``metrics[fp32_key]``) and with its int8 weights
    (``metrics[int8_key]``), the default model's top-1 last (``INT8_PAIRS``)."""
    fp32, int8 = metrics.get(fp32_key), metrics.get(int8_key)
    if not fp32 or not int8:
        return []
    out = ["", f"## {heading}: every set of the guard table", ""]
    if "missing" in fp32 or "missing" in int8:
        return out + [f"Not measured: {fp32.get('missing') or int8.get('missing')}"]
    threshold = metrics["config"]["threshold"]
    out += [(f"The regimes and the Chinese and Japanese KBs built and asked again, as in the section above, with"
             f" `{fp32['embedder']}` (`{fp32['setting']}`) and with `{int8['embedder']}` (`{int8['setting']}`: {what}),"
             f" each in a store of its own, both ranked with {calibration} calibration"
             " (`calibrations.calibration_for`: an int8 model reads as the fp32 one it comes from; not refitted). A"
             f" question takes {time} time (bench/models.py). Test splits; *right at t* as in"
             f" the guard table (t = {threshold:g}); the default model's top-1 last. For reading only. The int8 run"
             f" embedded {int8['texts_embedded']:,} texts in {int8['embedding_model_seconds']:.0f} s and took"
             f" {int8['seconds']:.0f} s in all, the fp32 run {fp32['seconds']:.0f} s."), ""]
    return out + _int8_table(guard.sets_of(fp32), int8, fp32_name, int8_name, threshold,
                             f"issue 43 would make it replace `{fp32_name}` only when none did.",
                             default=guard.sets_of(metrics))


def render(metrics: dict) -> str:
    cfg, timing = metrics["config"], metrics["timing"]
    threshold = cfg["threshold"]
    methods = [METHOD_NAMES[m] for m in METHODS]
    out = [
        "# Answer quality",
        "",
        (f"Written by `openqna eval`{' --quick (small subsets: not comparable with full runs)' if cfg['quick'] else ''}"
         f" on `{cfg['data_dir']}`: embedder `{cfg['embedder']}`, seed {cfg['seed']}, confidence threshold"
         f" {threshold:g}, total {timing['total_seconds']:.0f} s. Every figure goes through `Service` over a fresh"
         " SQLite store, as the server answers; baselines rank the same in-memory index with the same query vector."
         " Knowledge bases come from training splits and questions from test splits; nothing was tuned on them"
         " (each KB's own adaptation is fitted on its indexed questions only, as the server fits it)."),
        *guard.section(metrics, metrics.get("guard", {}).get("committed", {})),
        "",
        "## FAQ matching",
        "",
        (f"banking77 and hwu64: one QnA per intent with {cfg['per_intent_questions']} seeded-random training"
         " utterances as its questions and the intent name as its answer; every test utterance is asked."
         " Chit-chat: each answer's questions are shuffled, half (rounded up) indexed and the rest asked."
         " BM25 (`MemIndex.bm25`) and dense (cosine) score each question and a QnA takes its best question's"
         " score; RRF fuses the two rankings (k = 60); the default ranker is `Service.ask`."),
        "",
        "Top-1 accuracy:",
        "",
    ]
    faq = metrics["faq"]
    plain = metrics.get("without_adaptation", {"faq": {}, "offtopic": {}})
    methods = methods[:-1] + ["ranker without KB adaptation", "default ranker (KB-adapted)"]

    def cells(kb: str, r: dict, key: str) -> list[str]:
        return [*[_f(r[key][m]) for m in METHODS[:-1]], _f(plain["faq"][kb][key]) if kb in plain["faq"] else "",
                _f(r[key]["ranker"])]

    out += _table(["knowledge base", "QnAs", "questions indexed", "questions asked", *methods],
                  [[_KB_NAMES.get(kb, kb), str(r["records"]), str(r["indexed_questions"]), str(r["queries"]),
                    *cells(kb, r, "top1")] for kb, r in faq.items()])
    out += ["", "MRR@5:", ""]
    out += _table(["knowledge base", *methods], [[_KB_NAMES.get(kb, kb), *cells(kb, r, "mrr5")]
                                                 for kb, r in faq.items()])
    adaptations = metrics.get("adaptation", {})
    if adaptations:
        out += ["", ("KB adaptation (`ranking.adapt`, fitted by the server on the KB's indexed questions when the"
                     " index is first searched): up to 300 indexed questions of QnAs with two or more questions are"
                     " held out (each asked of the index without itself); their median right-answer logit is the"
                     " KB's *typical score*, which the confidence is read against, and a softmax classifier over the"
                     " records, trained on the other questions (4 folds), gets the weight (0, 0.25, 0.5, 1 or 2)"
                     " that maximises their top-1, used only if it gains at least one point:"), ""]
        out += _table(["knowledge base", "held-out questions", "held-out top-1 without", "held-out top-1 with",
                       "classifier weight", "typical score"],
                      [[_KB_NAMES.get(kb, kb), str(a["held_out"]), _f(a["top1_without"]), _f(a["top1_with"]),
                        f"{a['weight']:g}", f"{a['offset']:.2f}"] if a else [_KB_NAMES.get(kb, kb), "none", "", "",
                                                                            "", ""]
                       for kb, a in adaptations.items()])
    out += [
        "",
        f"## Off-topic rejection at threshold {threshold:g}",
        "",
        ("Each intent KB is asked the other data set's test questions, which it cannot answer; at the threshold a"
         " question whose best confidence is lower gets the default answer. *Top-1 lost* is the in-scope top-1"
         " accuracy at threshold 0 minus the share of in-scope questions answered correctly at the threshold"
         " (both measured with real `Service.ask` calls at that threshold). The two sets overlap on currencies:"
         " banking77's exchange-rate and currency intents ask what hwu64's *qa_currency* answers, so the"
         " questions of the intents whose name says currency or exchange are also left out in the column"
         " *without currency intents* (a rule on intent names; it changes no weight or threshold)."),
        "",
    ]
    out += _table(["knowledge base", "off-topic questions", "off-topic: default answer",
                   "without currency intents", "in-scope top-1 at 0",
                   f"in-scope top-1 at {threshold:g}", "top-1 lost", "in-scope: default answer"],
                  [[_KB_NAMES.get(kb, kb) + suffix, f"{r['offtopic_questions']} ({r['offtopic_source']})",
                    _pct(r["offtopic_rejected"]),
                    f"{_pct(r['disjoint_rejected'])} of {r['disjoint_questions']}",
                    _f(r["top1_at_zero"]), _f(r["top1_at_threshold"]),
                    _f(r["top1_lost"]), _pct(r["inscope_rejected"])]
                   for suffix, rows in (("", metrics["offtopic"]), (", without KB adaptation", plain["offtopic"]))
                   for kb, r in rows.items()])
    out += ["", "Accuracy and rejection against the threshold (from the top-1 confidences at threshold 0):", ""]
    out += [f"![{_KB_NAMES.get(kb, kb)}]({plot_name(kb)})" for kb in faq]
    out += _accurate_section(metrics.get("accurate"), metrics.get("mpnet_alone"), faq, threshold)
    out += _fast_section(metrics)
    for pair in INT8_PAIRS:
        out += _int8_pair_section(metrics, *pair)
    p = metrics["passages"]["scifact"]
    out += [
        "",
        "## Passage retrieval: BEIR SciFact",
        "",
        (f"{p['queries']} test claims over {p['documents']:,} abstracts, one passage record per abstract (title as"
         " its question, title and abstract as its text; the embedder reads the first 256 tokens), asked with"
         " `includeUnstructuredSources`. Baselines rank on the passage text. nDCG@10, binary relevance:"),
        "",
    ]
    out += _table(["", *[METHOD_NAMES[m] for m in METHODS]], [["nDCG@10", *[_f(p["ndcg10"][m]) for m in METHODS]]])
    out += [
        "",
        (f"Indexing took {p['index_seconds']:.0f} s, of which the embedding model ran {p['model_seconds']:.0f} s"
         " (0 when every vector came from the cache in `.cache/`); the queries of all four methods took"
         f" {p['query_seconds']:.1f} s."),
        "",
        "## Search in Chinese and Japanese: finding a question's paragraph",
        "",
        ("Every question of a span set is asked of a KB of all that set's paragraphs (passage records, no title),"
         " with `includeUnstructuredSources`; the right answer is the question's own paragraph. XQuAD's English and"
         " Chinese files hold the same questions over the same paragraphs, translated, so their rows compare search"
         " in Chinese with search in English directly. Nothing is fitted on these sets."),
        "",
    ]
    para = metrics.get("paragraphs", {})
    out += _table(["data set", "language", "questions", "paragraphs", "metric", *[METHOD_NAMES[m] for m in METHODS]],
                  [[name if metric == "top1" else "", r["language"] if metric == "top1" else "",
                    f"{r['queries']:,}" if metric == "top1" else "", f"{r['paragraphs']:,}" if metric == "top1" else "",
                    "top-1" if metric == "top1" else "MRR@10", *[_f(r[metric][m]) for m in METHODS]]
                   for name, r in para.items() for metric in ("top1", "mrr10")], text_columns=5)
    out += [
        "",
        "## Precise answers (answer spans)",
        "",
        ("Each question is sent with its paragraph to `Service.answer_from_text` (Azure `:query-text`); its"
         " `answerSpan` comes from `answers.span.best_spans`: the sentence closest to the question, narrowed by"
         " `answers.short_span` to the name, number, date or phrase the question asks for (*short span*, what"
         " the server answers). *Best sentence* is that sentence before narrowing (the previous method);"
         " *first sentence* is the trivial baseline; *gold sentence* (the sentence holding the gold answer) is the"
         " ceiling of any whole-sentence answer. `short_span`'s rules were written looking at the first"
         f" {LOOKED_AT} questions of each set, so its figures on the questions after those are shown apart."
         " F1 is over words for English and over characters for Chinese and Japanese; *holds answer* is"
         " the share of predicted spans that contain a gold answer verbatim."),
        "",
    ]
    rows = []
    for name, r in metrics["spans"].items():
        used = f"{r['questions']:,}" + (f" of {r['total_questions']:,}" if r["questions"] < r["total_questions"] else "")
        for n, m in enumerate([*SPAN_METHODS, UNSEEN] if UNSEEN in r["em"] else SPAN_METHODS):
            rows.append([name if n == 0 else "", used if n == 0 else "", m, _f(r["em"][m]), _f(r["f1"][m]),
                         _pct(r["holds_answer"][m])])
    out += _table(["data set", "questions", "span", "EM", "F1", "holds answer"], rows, text_columns=3)
    sampled = [name for name, r in metrics["spans"].items() if r["questions"] < r["total_questions"]]
    if sampled:
        out += ["", (f"{', '.join(sampled)}: all questions of seeded-random paragraphs until the sample size is"
                 " reached (a paragraph is embedded once for all its questions, so whole paragraphs are cheaper).")]
    confident = {name: r["confidence"] for name, r in metrics["spans"].items() if r.get("confidence")}
    if confident:
        out += ["", (f"The short span's confidence, as a threshold uses it: a short span is *right* when its F1 is at"
                     f" least {RIGHT_F1}; *right at 0.5* is the share of right spans with confidence ≥ 0.5, *wrong below"
                     " 0.5* the share of wrong ones under it, *AUROC* the chance that a right span's confidence is"
                     " above a wrong one's."), ""]
        out += _table(["data set", *CONFIDENCE_FIGURES],
                      [[name, *(_f(c[k]) for k in CONFIDENCE_FIGURES)] for name, c in confident.items()])
    out += regime_report.section(metrics)
    out += conversations.section(metrics)
    out += typo_questions.section(metrics)
    out += near_topic.section(metrics)
    out += long_questions.section(metrics)
    out += filters.section(metrics)
    if "cjk" in metrics:
        out += cjk_report.section(metrics)
    out += training.section(metrics)
    out += [
        "",
        "## Caveats",
        "",
        ("- `scripts/fit_ranker.py` fitted the ranker's weights and confidence scale on development data only:"
         " banking77 training utterances that are not in the KB, hwu64's validation split, and for chit-chat only"
         " the questions this evaluation indexes (split again); its passage weights on SciFact's train claims. The"
         " chit-chat personalities share many questions, so a question indexed (and fitted on) for one personality"
         " may be asked of another: the chit-chat figures are not strictly held out from the ranker's 9 weights."),
        (f"- `answers/short_span.py`'s hand-set rules were written while looking at the first {LOOKED_AT} questions"
         " of each span set (none was fitted); the span table shows the short span on the questions after those"
         " apart."),
        ("- banking77 and hwu64 are not perfectly disjoint (both have questions about currencies, for example), so"
         " a few \"off-topic\" questions have a fair answer in the other KB."),
        "",
        "## Runtime",
        "",
    ]
    steps = [k for k in timing if k not in ("total_seconds", "embedding_model_seconds", "texts_embedded",
                                            "texts_from_cache")]
    out += _table(["step", "seconds"], [[k, f"{timing[k]:.1f}"] for k in steps] +
                  [["total", f"{timing['total_seconds']:.1f}"]])
    out += ["", (f"The default embedding model ran {timing['embedding_model_seconds']:.0f} s for"
             f" {timing['texts_embedded']:,} texts; {timing['texts_from_cache']:,} embeddings came from the cache"
             " (*accurate_model*: the accurate model's and mpnet's FAQ and off-topic runs; *fast_model*: the int8"
             " model's regimes and CJK KBs; *accurate_fast_model*: the same with the accurate pair and with its int8"
             " mpnet; *mpnet_fast_model*: with mpnet alone and its int8 weights; their own figures above)."), ""]
    return "\n".join(out)


def write_report(out_dir: Path, metrics: dict) -> Path:
    path = out_dir / "report.md"
    path.write_text(render(metrics), encoding="utf-8")
    return path
