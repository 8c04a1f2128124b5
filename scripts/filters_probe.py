"""What a metadata filter does to a confidence (``regime.FILTERED_OUT``): the records it leaves out read as rivals of
the ones it keeps, a little lower, or not at all (``inf``: the behaviour before), or as much as they are (``0``).

The knowledge bases are ``make eval``'s (same builders and seed): banking77 with many questions per QnA, the FAQ pages
covid-q, covid-qsim-deepset and chit-chat (professional) cut to one question, and the bundled sample, asked as
``make eval``'s filters section asks them (``evaluation/filters.py``: copies with each record in a random category,
and the FAQ pages kept once per tenant), once per discount, every question of the split.

Usage: python scripts/filters_probe.py [--split dev|test] [--discounts inf,0,1,2]   (dev for choosing, test to report)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

from openqna.evaluation import _fresh_service, datasets, faq, faq_regimes, filters, tiny  # noqa: E402
from openqna.models.embedder import get_embedder  # noqa: E402
from openqna.ranking import regime  # noqa: E402

DATA = HERE.parent.parent / "shared" / "data"
SEED = 20240601
THRESHOLD = 0.5


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--split", choices=("dev", "test"), default="dev")
    parser.add_argument("--discounts", default="inf,0,1,2", help="regime.FILTERED_OUT values, comma-separated")
    args = parser.parse_args()
    discounts = [float(x) for x in args.discounts.split(",")]
    with _fresh_service(HERE.parent / "eval", get_embedder("local")) as (service, _):
        banking, hwu = datasets.banking77(DATA), datasets.hwu64(DATA)
        intents = faq.intent_kb(service, banking, seed=SEED)
        covid = datasets.covid_q(DATA)
        asked_elsewhere = [text for text, _ in banking.test]
        kbs = [faq_regimes.many_question_kb(service, intents, faq_regimes.offtopic_sample(
                   [text for text, _ in hwu.test], 150, SEED, "filters"), SEED, "hwu64"),
               faq_regimes.real_faq_kb(service, covid, faq_regimes.offtopic_sample(covid.unanswered, 150, SEED, "f"),
                                       seed=SEED, source="covid-q"),
               faq_regimes.real_faq_kb(service, datasets.covid_qsim_deepset(DATA),
                                       faq_regimes.offtopic_sample(asked_elsewhere, 150, SEED, "d"), seed=SEED,
                                       source="banking77"),
               faq_regimes.one_question_chitchat_kb(service, DATA, "professional",
                                                    faq_regimes.offtopic_sample(asked_elsewhere, 150, SEED, "p"),
                                                    seed=SEED),
               tiny.sample_kb(service, seed=SEED)]
        print(f"split {args.split}, threshold {THRESHOLD}; per discount (regime.FILTERED_OUT; inf: the records a "
              "filter leaves out are no rivals)")
        for d in discounts:
            regime.FILTERED_OUT = d
            result = filters.evaluate(service, kbs, seed=SEED, threshold=THRESHOLD, per_kb=None)
            for name, by_split in [*result["kbs"].items(), ("all", result["all"])]:
                f = by_split[args.split]
                tenants = (f", per tenant right {f['tenant_right'] / f['tenant_questions']:.3f} (kept once "
                           f"{f['once_right'] / f['tenant_questions']:.3f})" if f["tenant_questions"] else "")
                print(f"{name} at {d}: right with its filter {f['right'] / f['inscope']:.3f} (unfiltered "
                      f"{f['right_unfiltered'] / f['inscope']:.3f}), precision "
                      f"{f['right'] / max(f['right'] + f['wrong'], 1):.3f}, answer left out answered "
                      f"{f['left_out_answered'] / max(f['left_out'], 1):.3f}, off-topic answered "
                      f"{f['offtopic_answered'] / max(f['offtopic'], 1):.3f}{tenants}", flush=True)


if __name__ == "__main__":
    main()
