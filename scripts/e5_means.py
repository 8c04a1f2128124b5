"""Make ``src/openqna/models/e5_means.npy``: the mean of multilingual-e5-small's question vectors and of its passage
vectors (``models.embedder.MultilingualE5`` subtracts them; see its docstring).

E5's vectors share one large common direction: any two questions are at cosine 0.84-0.92 (covid-qsim-tianchi-zh's
train pairs: a question and its paraphrase 0.987, a question and a different question of the same topic 0.950), so
every reader of cosines made for the other models (the ranker's weights and their regularisation, answer spans,
duplicate thresholds) would read them all as near.  Centred (the mean taken off, the vector made unit length again),
random pairs fall to 0.13 (5th-95th percentile -0.03 to 0.39), paraphrases 0.91, different questions of the same topic
0.65: a spread like the other models'.

The means come from texts that no make eval test split holds (unlabelled: only their vectors are averaged):
questions, Chinese (covid-qsim-tianchi-zh's train split), Japanese (JSQuAD questions about the paragraphs past the
400 that make eval uses) and English (banking77's and hwu64's train splits); passages, Japanese (those JSQuAD
paragraphs) and English (SciFact abstracts).  Usage: python scripts/e5_means.py [DATA_DIR]   (~2 min)
"""

from __future__ import annotations

import csv
import gzip
import json
import random
import sys
from pathlib import Path

import numpy as np

from openqna.evaluation.cjk import JSQUAD_PARAGRAPHS
from openqna.models.embedder import E5_MEANS, MultilingualE5

PER_SOURCE = 600


def main() -> None:
    data = Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/data")
    rng = random.Random(0)

    def sample(texts: list[str]) -> list[str]:
        texts = list(dict.fromkeys(t for t in texts if t.strip()))
        return rng.sample(texts, min(PER_SOURCE, len(texts)))

    with open(data / "covid-qsim-tianchi-zh" / "train.csv", encoding="utf-8") as f:
        zh = [t for row in csv.DictReader(f) for t in (row["query1"], row["query2"])]
    squad = json.loads((data / "jsquad" / "valid-v1.3.json").read_text(encoding="utf-8"))
    paragraphs = list(dict.fromkeys(p["context"] for a in squad["data"] for p in a["paragraphs"]))
    unused = set(paragraphs[JSQUAD_PARAGRAPHS:])
    ja = [qa["question"] for a in squad["data"] for p in a["paragraphs"] if p["context"] in unused for qa in p["qas"]]
    with open(data / "banking77" / "train.csv", encoding="utf-8") as f:
        en = [row["text"] for row in csv.DictReader(f)]
    en += (data / "hwu64" / "train" / "seq.in").read_text(encoding="utf-8").splitlines()
    with gzip.open(data / "beir-scifact" / "corpus.jsonl.gz", "rt", encoding="utf-8") as f:
        abstracts = [json.loads(line)["text"] for line in f]
    questions = sample(zh) + sample(ja) + sample(en)
    passages = sample(sorted(unused)) + sample(abstracts)
    model = MultilingualE5(threads=2, centred=False)
    means = np.stack([model.embed(questions).mean(0), model.embed_passages(passages).mean(0)]).astype(np.float32)
    np.save(E5_MEANS, means)
    print(f"{len(questions)} questions and {len(passages)} passages: norms {np.linalg.norm(means, axis=1).round(3)}, "
          f"written to {E5_MEANS}")


if __name__ == "__main__":
    main()
