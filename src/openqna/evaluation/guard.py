"""``make eval``'s guard: no set ranks below its best single signal, and no set falls against the committed report.

Two rules, on the **test** split of every knowledge base of the regimes and of the Chinese and Japanese section
(with the real FAQ pages ranked in the multilingual space, ``space_faq``):

* **the floor**: the default ranker's top-1 is at least the best single signal's (``baselines.SIGNALS``: BM25
  alone and dense alone, each over a record's questions, its text, or both) less ``FLOOR_SLACK``;
* **no regression**: neither the top-1 nor the share of in-scope questions answered right at the threshold
  (*right at t*) is more than ``REGRESSION_SLACK`` below what the committed ``eval/report.md`` says for the same
  set (its guard table, read back by ``committed_figures``).

``openqna eval`` writes the report either way and exits non-zero when a rule fails, naming the sets, so that a
change which lowers a set lands only with a commit of the new report that says why.  A quick run (``--quick``)
and a run of one part (``--only``) check nothing: their subsets are not the report's sets.
"""

from __future__ import annotations

import math
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from openqna.evaluation.baselines import SIGNALS
from openqna.evaluation.space_faq import IN_SPACE

FLOOR_SLACK = 0.005  # half a point
REGRESSION_SLACK = 0.01  # one point
HEADING = "## Guard"
SET, TOP1, RIGHT = "set", "top-1", "right at t"


@dataclass
class SetFigures:
    """One set's test-split figures, as the guard table shows them."""

    name: str
    regime: str
    inscope: int
    top1: float
    right_at_t: float
    signals: dict[str, float]
    discord: dict[str, list[int]] = field(default_factory=dict)

    @property
    def odds(self) -> float | None:
        """How likely a ranker as good as its best single signal would trail it by as much or more on these questions:
        the one-sided exact (McNemar) binomial test on the questions only one of the two gets right (None: no such
        question, or the ranker is not behind)."""
        name, _ = self.best_signal
        ranker_only, signal_only = self.discord.get(name, [0, 0])
        n = ranker_only + signal_only
        if not n or signal_only <= ranker_only:
            return None
        return sum(math.comb(n, k) for k in range(signal_only, n + 1)) / 2 ** n

    @property
    def best_signal(self) -> tuple[str, float]:
        name = max(SIGNALS, key=lambda s: self.signals.get(s, 0.0))
        return name, self.signals.get(name, 0.0)

    @property
    def floor_met(self) -> bool:
        return self.top1 >= self.best_signal[1] - FLOOR_SLACK - 1e-9


def sets_of(metrics: dict) -> list[SetFigures]:
    """Every regime KB and every CJK KB with in-scope test questions, in report order."""
    groups = [(regime, r) for regime, r in metrics.get("regimes", {}).items()]
    if "cjk" in metrics:
        groups.append(("Chinese and Japanese", metrics["cjk"]))
    out = []
    if metrics.get("cjk_faq_pages"):  # real FAQ pages ranked in the multilingual space (``space_faq``), as now ranked
        groups.append(("one question, in the multilingual space", {
            "kbs": {kb + IN_SPACE: k for kb, k in metrics["cjk_faq_pages"]["kbs"].items()},
            "summary": {kb + IN_SPACE: k["after"] for kb, k in metrics["cjk_faq_pages"]["kbs"].items()}}))
    for regime, r in groups:
        by_set = {kb: r["summary"][kb] for kb in r["kbs"]} | r.get("subsets", {})
        for kb, splits in by_set.items():
            test = splits["test"]
            if test["inscope"]:
                out.append(SetFigures(kb, regime, test["inscope"], test["top1"], test.get("right_at_t", 0.0),
                                      test.get("signals", {}), test.get("discord", {})))
    return out


def committed_report(report: Path) -> str | None:
    """The text of ``report`` as committed at ``HEAD`` (None outside a git checkout or when it is not committed);
    the working copy would hold this run's own figures once it is written."""
    try:
        done = subprocess.run(["git", "show", f"HEAD:./{report.name}"], cwd=report.parent, capture_output=True,
                              text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def committed_figures(text: str) -> dict[str, tuple[float, float]]:
    """``{set: (top-1, right at t)}`` from the guard table of a report's text (empty when it has none)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(HEADING)), None)
    if start is None:
        return {}
    header: list[str] | None = None
    out: dict[str, tuple[float, float]] = {}
    for line in lines[start + 1:]:
        if line.startswith("## "):
            break
        if not line.startswith("|"):
            if header is not None and out:
                break
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
            continue
        if set("".join(cells)) <= set("-: "):
            continue
        row = dict(zip(header, cells))
        try:
            out[row[SET].strip("`")] = (float(row[TOP1]), float(row[RIGHT]))
        except (KeyError, ValueError):
            continue
    return out


@dataclass
class Verdict:
    below_floor: list[str]
    regressed: list[str]
    compared: int  # sets found in the committed report

    @property
    def ok(self) -> bool:
        return not self.below_floor and not self.regressed

    def message(self) -> str:
        parts = []
        if self.below_floor:
            parts.append("below the best single signal: " + "; ".join(self.below_floor))
        if self.regressed:
            parts.append("fell against the committed eval/report.md: " + "; ".join(self.regressed))
        return " | ".join(parts) if parts else f"guard: every set holds ({self.compared} compared with the report)"


def check(metrics: dict, committed: dict[str, tuple[float, float]]) -> Verdict:
    below, fell = [], []
    sets = sets_of(metrics)
    for s in sets:
        name, best = s.best_signal
        if not s.floor_met:
            below.append(f"{s.name} top-1 {s.top1:.3f} < {name} {best:.3f} - {FLOOR_SLACK:g}")
        was = committed.get(s.name)
        if was is None:
            continue
        for label, now, before in ((TOP1, s.top1, was[0]), (RIGHT, s.right_at_t, was[1])):
            if now < before - REGRESSION_SLACK - 1e-9:
                fell.append(f"{s.name} {label} {before:.3f} -> {now:.3f}")
    return Verdict(below, fell, sum(s.name in committed for s in sets))


def section(metrics: dict, committed: dict[str, tuple[float, float]]) -> list[str]:
    """The guard table of ``report.md`` (the table ``committed_figures`` reads back)."""
    sets = sets_of(metrics)
    if not sets:
        return []
    t = metrics["config"]["threshold"]
    out = ["", f"{HEADING}: every set against its best single signal and the committed report", "",
           (f"The test split of every knowledge base above. *BM25 alone* and *dense alone* rank the same index with one"
            " signal, reading a record's questions, its answer or passage text, or both (each column shows the best"
            " of the three; `evaluation/baselines.py`). The floor: the default ranker's top-1 is at least the best"
            f" single signal's less {100 * FLOOR_SLACK:g} points. *Right at t* (t = {t:g}): of the in-scope"
            " questions, the share whose top answer is right with confidence at or above t. *Committed*: the same"
            " figures in the `eval/report.md` of the commit this run started from; `make eval` exits non-zero when a"
            f" set is below its floor or falls by more than {100 * REGRESSION_SLACK:g} point on either figure"
            " (`evaluation/guard.py`). *Only ranker / only signal*: the in-scope questions only the ranker's first"
            " answer gets right, and only the best signal's; *chance*, where the ranker trails, how likely a ranker"
            " exactly as good as that signal would trail it by as much on these questions (a one-sided exact McNemar"
            " test): a floor missed at a chance of 0.2 says little, one at 0.01 is a real loss."), ""]
    rows = []
    for s in sets:
        bm25 = max(s.signals.get(n, 0.0) for n in SIGNALS if n.startswith("bm25"))
        dense = max(s.signals.get(n, 0.0) for n in SIGNALS if n.startswith("dense"))
        name, best = s.best_signal
        was = committed.get(s.name)
        rows.append([f"`{s.name}`", s.regime, str(s.inscope), f"{bm25:.3f}", f"{dense:.3f}", name,
                     f"{s.top1:.3f}", "yes" if s.floor_met else "**no**",
                     "{} / {}".format(*s.discord.get(name, ["–", "–"])),
                     "–" if s.odds is None else f"{s.odds:.2f}", f"{s.right_at_t:.3f}",
                     "–" if was is None else f"{was[0]:.3f}", "–" if was is None else f"{was[1]:.3f}"])
    header = [SET, "regime", "in-scope", "BM25 alone", "dense alone", "best signal", TOP1, "floor met",
              "only ranker / only signal", "chance", RIGHT,
              "committed top-1", "committed right at t"]
    out += ["| " + " | ".join(header) + " |", "| " + " | ".join(["---"] * 2 + ["---:"] * (len(header) - 2)) + " |"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out
