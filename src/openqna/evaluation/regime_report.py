"""The regimes' section of ``report.md`` and their reliability diagrams (see ``regimes``)."""

from __future__ import annotations

import re
from dataclasses import asdict
from pathlib import Path

from openqna.evaluation.regimes import SPLITS, Outcome, summaries

REGIME_TEXT = {
    "many questions": ("FAQ matching's knowledge bases (banking77 and hwu64 with ten training utterances per intent,"
                       " chit-chat with half of each answer's questions), asked their held-out questions again"),
    "one question": ("FAQ pages with real answers and one question per QnA: COVID-Q (245 entries, each stored with"
                     " one question an FAQ site asks, asked the other questions of its class: real users' questions"
                     " from search engines, Quora and Yahoo Answers, other FAQ sites' phrasings and the dataset"
                     " author's paraphrases), deepset's COVID-QA FAQ bank (210 health agencies' entries, asked"
                     " annotators' paraphrases), and the three chit-chat KBs with their real answers and one"
                     " question each, asked each answer's other questions"),
    "one question, Chinese": ("Tianchi's Chinese patient questions (its dev split: 363 stored questions, no answer"
                              " texts, so each entry's answer is its question), asked the paraphrases labelled with"
                              " them"),
    "one question, intent names": ("banking77 and hwu64 with one seeded-random training utterance per intent as the"
                                   " question and the humanised intent name as the answer (the only answer text"
                                   " these sets have), asked the intents' test utterances; an intent regime, not an"
                                   " FAQ page's: no FAQ-page weight is fitted on it"),
    "one question, written from the answer": ("XQuAD's English Wikipedia paragraphs, each stored with the first"
                                              " question written about it and asked the others (the CJK section's"
                                              " English FAQ KB, same splits): questions written from the answer"),
    "documents": ("sample documents of `qna-sample-docs/data-source-formats`, each imported into a project of its own as `openqna import` imports"
                  " it (section QnAs with the heading as question, and passages), asked hand-written questions"
                  " (`evaluation/questions/documents.tsv`, written and committed before anything was measured)"
                  " with `includeUnstructuredSources`; a record is right when its text contains the labelled snippet"),
    "tiny": ("the bundled sample KB (14 QnAs) with 40 hand-written paraphrases and 20 off-topic questions"
             " (`evaluation/questions/sample-kb.tsv`) and 40 near-topic questions about openqna that none of its"
             " answers answers (`evaluation/questions/sample-kb-near.tsv`, written blind later), 12 seeded entries of covid-q and of covid-qsim-deepset, one"
             " question each, asked those entries' queries (`tiny.faq_cut`), cuts of 12, 18 and 24 chit-chat answers"
             " and of 15 banking77 intents, asked their held-out questions (*hwu64 tasks*: hwu64's test utterances"
             " without its `general_*` intents, which are chit-chat)"),
}


# The regime table of eval/report.md at commit b4c2055, before the ranker's weights for FAQ pages and the last step
# on every KB (``ranking/regime.py``): (precision, recall, off-topic rejected) at 0.5 and top-1, per regime and split.
BEFORE_COMMIT = "b4c2055"
BEFORE = {
    ("many questions", "dev"): (0.827, 0.973, 0.940, 0.819), ("many questions", "test"): (0.845, 0.983, 0.945, 0.844),
    ("documents", "dev"): (0.758, 0.794, 0.789, 0.692), ("documents", "test"): (0.840, 0.851, 0.824, 0.822),
    ("tiny", "dev"): (0.904, 0.992, 0.800, 0.941), ("tiny", "test"): (0.910, 0.989, 0.767, 0.957),
}
# (its one-question rows mixed the intent KBs with chit-chat's; the regime is now FAQ pages with real answers, so
# they are left out)
# KBs added to a regime since BEFORE_COMMIT: its "before and after" row reads the regime without them
ADDED_SINCE = {"one-question-xquad-en-faq", "tiny-covid-q", "tiny-covid-qsim-deepset"}


def plot_name(regime: str) -> str:
    return f"reliability-{re.sub(r'[^a-z0-9]+', '-', regime.lower()).strip('-')}.png"


def write_plots(out_dir: Path, metrics: dict) -> list[str]:
    """One reliability diagram per regime: the share of right top answers per confidence bin, per split."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    threshold = metrics["config"]["threshold"]
    for regime, r in metrics.get("regimes", {}).items():
        fig, ax = plt.subplots(figsize=(6.4, 4.6), dpi=100)
        ax.plot([0, 1], [0, 1], color="grey", linewidth=1, label="perfectly calibrated")
        for split, color in zip(SPLITS, ("tab:blue", "tab:red")):
            bins = [b for b in r["summary"]["all"][split]["bins"] if b["questions"]]
            ax.plot([b["confidence"] for b in bins], [b["right"] for b in bins], marker="o", color=color,
                    label=f"{split} ({r['summary']['all'][split]['questions']} questions)")
            for b in bins:
                ax.annotate(str(b["questions"]), (b["confidence"], b["right"]), textcoords="offset points",
                            xytext=(3, 4 if split == "dev" else -10), fontsize=7, color=color)
        ax.axvline(threshold, color="grey", linestyle="--", linewidth=1, label=f"threshold {threshold:g}")
        ax.set(xlim=(0, 1), ylim=(-0.02, 1.02), xlabel="top-1 confidence (mean of the bin)",
               ylabel="share whose top answer is right", title=f"{regime}: reliability (bins of 0.1)")
        ax.grid(alpha=0.3)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, fontsize=8, frameon=False)
        fig.tight_layout()
        fig.savefig(out_dir / plot_name(regime), metadata={"Software": None})
        plt.close(fig)
        written.append(plot_name(regime))
    return written


def _f(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def _row(label: list[str], s: dict) -> list[str]:
    return [*label, str(s["inscope"]), str(s["offtopic"]), _f(s["top1"]), _f(s["mrr5"]), _pct(s["precision"]),
            _pct(s["recall"]), _f(s.get("right_at_t")), _pct(s["offtopic_rejected"]), _pct(s["answered"])]


HEADER = ["in-scope", "off-topic", "top-1", "MRR@5", "precision at t", "recall at t", "right at t",
          "off-topic rejected at t", "answered at t"]


def _table(header: list[str], rows: list[list[str]], text_columns: int) -> list[str]:
    align = ["---"] * text_columns + ["---:"] * (len(header) - text_columns)
    return ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"] + \
        ["| " + " | ".join(r) + " |" for r in rows]


def confidently_wrong(questions: list[dict], threshold: float, limit: int = 5) -> list[dict]:
    """The dev split's wrong top answers at or above the threshold, most confident first."""
    wrong = [q for q in questions if q["split"] == "dev" and not q["right"] and q["confidence"] >= threshold]
    return sorted(wrong, key=lambda q: -q["confidence"])[:limit]


def section(metrics: dict) -> list[str]:
    regimes = metrics.get("regimes")
    if not regimes:
        return []
    t = metrics["config"]["threshold"]
    out = ["", f"## Regimes: the kinds of knowledge base users have (threshold t = {t:g})", "",
           ("Issue 22: the ranker was fitted and measured where every QnA has many alternate questions. Each regime"
            " below is a set of knowledge bases built through `Service`, each asked in-scope questions and questions"
            " it cannot answer, one at a time through `Service.ask` (top 5, threshold 0). Every question is in a"
            " **dev** split (for fitting and tuning only) or a **test** split (for reporting only), deterministically"
            f" (seed {metrics['config']['seed']}): paraphrase sets are split by their gold QnA (all questions of a QnA"
            " in one split), hand-written questions by a hash of the question, stratified per KB and into in-scope"
            " and off-topic. *Top-1* and *MRR@5* are over in-scope questions; *precision at t*: of top answers with"
            " confidence ≥ t, the share that are right (an off-topic question answered counts as wrong); *recall at"
            " t*: of right top answers, the share with confidence ≥ t (the issue's targets: ≥ 90% and ≥ 80% on each"
            " test split); *right at t*: of in-scope questions, the share answered right at or above t; *off-topic rejected*: of questions the KB cannot answer, the share below t. Every"
            " question's outcome is in `metrics.json` under `regimes`. The dev splits fitted the ranker's weights for"
            " FAQ pages the adaptation does not reach (`calibrations.SPARSE`, on the one-question and document dev"
            " splits) and the confidence's last step on every KB (`ranking/regime.py`, on every regime's dev split;"
            " `scripts/fit_regimes.py`); nothing was fitted or chosen on a test split."), ""]
    for regime, r in regimes.items():
        kbs = r["kbs"]
        out.append(f"- **{regime}** ({len(kbs)} KBs, {sum(k['records'] for k in kbs.values()):,} records):"
                   f" {REGIME_TEXT.get(regime, '')}; off-topic questions: "
                   + ", ".join(f"{kb} ← {k['offtopic_source']}" for kb, k in kbs.items()) + ".")
    out += [""]
    out += _table(["regime", "split", *HEADER],
                  [_row([regime, split], r["summary"]["all"][split]) for regime, r in regimes.items()
                   for split in SPLITS], text_columns=2)
    out += ["", (f"Before and after (before: this table at commit {BEFORE_COMMIT}); precision, recall and"
                 " off-topic rejected at t, and top-1:"), ""]
    rows = []
    for regime, r in regimes.items():
        added = sorted(ADDED_SINCE & set(r["kbs"]))
        same = {split: asdict(v) for split, v in summaries(
            [Outcome(**q) for q in r["questions"] if q["kb"] not in ADDED_SINCE], t)["all"].items()} \
            if added else r["summary"]["all"]
        label = f"{regime} (without {', '.join(added)}, added since)" if added else regime
        for split in SPLITS:
            now = same[split]
            was = BEFORE.get((regime, split))
            if was is not None:
                rows.append([label, split, *(f"{_pct(a)} → {_pct(b)}" for a, b in zip(
                    was[:3], (now["precision"], now["recall"], now["offtopic_rejected"]))),
                    f"{_f(was[3])} → {_f(now['top1'])}"])
    out += _table(["regime", "split", "precision at t", "recall at t", "off-topic rejected at t", "top-1"], rows,
                  text_columns=2)
    out += ["", "Per knowledge base (records; the test split, dev in brackets for top-1 and the two targets):", ""]
    rows = []
    for regime, r in regimes.items():
        for kb, k in r["kbs"].items():
            test, dev = r["summary"][kb]["test"], r["summary"][kb]["dev"]
            rows.append([regime, kb, f"{k['records']:,}", str(test["inscope"]), str(test["offtopic"]),
                         f"{_f(test['top1'])} ({_f(dev['top1'])})", _f(test["mrr5"]),
                         f"{_pct(test['precision'])} ({_pct(dev['precision'])})",
                         f"{_pct(test['recall'])} ({_pct(dev['recall'])})", _pct(test["offtopic_rejected"])])
    out += _table(["regime", "knowledge base", "records", "in-scope", "off-topic", "top-1", "MRR@5",
                   "precision at t", "recall at t", "off-topic rejected at t"], rows, text_columns=2)
    out += ["", ("Reliability (top-1 confidence in bins of 0.1 against the share of right top answers; the numbers"
                 " are questions per bin; a calibrated confidence follows the diagonal):"), ""]
    out += [f"![{regime}]({plot_name(regime)})" for regime in regimes]
    out += ["", f"The most confident wrong top answers of each regime's **dev** split (confidence ≥ {t:g}):", ""]
    rows = [[regime, q["kb"], q["question"].replace("|", "/"), (q["gold"] or "none")[:60].replace("|", "/"),
             q["top_text"][:60].replace("|", "/"), f"{q['confidence']:.3f}"]
            for regime, r in regimes.items() for q in confidently_wrong(r["questions"], t)]
    out += _table(["regime", "knowledge base", "question", "gold", "top answer (its question)", "confidence"], rows,
                  text_columns=5)
    out += ["", ("Caveats: the hand-written questions and their labels were written by one author (an AI coding"
                 " agent, see `evaluation/questions/README.md`), so their wording is one person's; the one-question"
                 " intent KBs' answers are intent names, so the answer side of the ranker has little to read there;"
                 " banking77 and hwu64 share currency questions, so a few of their \"off-topic\" questions have a"
                 " fair answer; chit-chat files 11 of its questions under two answers each, so asking one counts"
                 " wrong even when the top answer's question is the very question asked (the chit-chat rows above"
                 " at 1.000); a section QnA and the passages of the same section can both be right, so a document"
                 " question may have several right records.")]
    return out
