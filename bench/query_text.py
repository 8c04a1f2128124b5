"""CPU of Azure ``:query-text`` at its limits (issue 40): one request at a time, then eight at once.

Each body fills the limits (``LIMITS.text_records`` records of ``LIMITS.text_record_chars`` characters, about
26 KB of JSON) with paragraphs, English (SciFact abstracts) or Chinese (XQuAD, which holds more of the model's
tokens per character), and asks a question.  The server is a real ``openqna serve`` process on an empty store; its CPU (user + system, all
threads) is read from the process before and after.  ``PYTHONPATH=/other/checkout/src`` measures other code.

Usage: python bench/query_text.py [--single 4] [--concurrent 8] [--lang en|zh]
"""

from __future__ import annotations

import argparse
import gzip
import json
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from throughput import free_port, start_server, stop_server, wait_ready

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def texts(lang: str) -> tuple[list[str], list[str]]:
    """(paragraphs, questions): SciFact abstracts and claims in English (enough that no two bodies share a
    paragraph), XQuAD's paragraphs and questions in Chinese (which the bodies share: 60,000 characters in all)."""
    if lang == "en":
        with gzip.open(DATA / "beir-scifact" / "corpus.jsonl.gz", "rt", encoding="utf-8") as f:
            paragraphs = [json.loads(line)["text"] for line in f]
        with open(DATA / "beir-scifact" / "queries.jsonl", encoding="utf-8") as f:
            return paragraphs, [json.loads(line)["text"] for line in f]
    articles = json.loads((DATA / "xquad" / "xquad.zh.json").read_text(encoding="utf-8"))["data"]
    paragraphs = [p for a in articles for p in a["paragraphs"]]
    return [p["context"] for p in paragraphs], [q["question"] for p in paragraphs for q in p["qas"]]


def bodies(lang: str, n: int, records: int, chars: int) -> list[dict]:
    """``n`` bodies of ``records`` records, each ``chars`` characters of consecutive paragraphs."""
    paragraphs, questions = texts(lang)
    out, at = [], 0
    for i in range(n):
        recs = []
        for r in range(records):
            text = ""
            while len(text) < chars:
                text += paragraphs[at % len(paragraphs)] + "\n"
                at += 1
            recs.append({"id": str(r), "text": text[:chars]})
        out.append({"question": questions[i * 7 % len(questions)], "records": recs, "language": lang})
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--single", type=int, default=4, help="requests sent one at a time")
    parser.add_argument("--concurrent", type=int, default=8, help="requests sent at once")
    parser.add_argument("--lang", choices=("en", "zh"), default="en")
    args = parser.parse_args()

    import httpx
    import psutil

    from openqna.formats.limits import LIMITS

    todo = bodies(args.lang, 1 + args.single + args.concurrent, LIMITS.text_records, LIMITS.text_record_chars)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as data, open(Path(data) / "server.log", "w") as log:
        proc = start_server(data, port, log)
        try:
            wait_ready(base, proc)
            server = psutil.Process(proc.pid)

            def send(body: dict) -> float:
                t = time.perf_counter()
                r = httpx.post(f"{base}/language/:query-text", params={"api-version": "2023-04-01"}, json=body,
                               timeout=600)
                assert r.status_code == 200 and r.json()["answers"], r.text[:300]
                return time.perf_counter() - t

            send(todo[0])  # loads the model
            size = len(json.dumps(todo[1]).encode())
            cpu0 = sum(server.cpu_times()[:2])
            walls = [send(b) for b in todo[1:1 + args.single]]
            single_cpu = (sum(server.cpu_times()[:2]) - cpu0) / args.single
            print(f"one at a time ({args.lang}, {size / 1024:.1f} KB bodies): {single_cpu:.2f} s of server CPU "
                  f"a request, wall {min(walls):.2f}-{max(walls):.2f} s")
            cpu0, t = sum(server.cpu_times()[:2]), time.perf_counter()
            with ThreadPoolExecutor(args.concurrent) as pool:
                walls = list(pool.map(send, todo[1 + args.single:]))
            total, cpu = time.perf_counter() - t, sum(server.cpu_times()[:2]) - cpu0
            print(f"{args.concurrent} at once: all answered in {total:.2f} s (each {min(walls):.2f}-{max(walls):.2f} s), "
                  f"{cpu:.2f} s of server CPU ({cpu / args.concurrent:.2f} s a request)")
        finally:
            stop_server(proc)


if __name__ == "__main__":
    main()
