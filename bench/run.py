"""`make bench`: run every benchmark script once, in its own process, and write bench/results.md.

Each script prints its figures together with a baseline measured in the same run (the
embedder alone, a plain copy of the same rows, the reference filter evaluator, the query
embedding alone, /healthz of the same server); this collects them with a note of the machine
and the time they took.  A script that draws a plot prints ``plot: FILE`` (a file next to
this one) and results.md shows the image.

Usage: python bench/run.py [--only NAME ...]   (--only reruns those and keeps the other sections of results.json)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = {
    "foundation": "import throughput vs the embedder; Azure SDK latency vs in-process",
    "multilingual": "a Chinese question in the multilingual space vs the same question in English; its memory at 100k records; install size",
    "models": "the accurate embedding model (all-mpnet-base-v2 with the universal sentence encoder) and mpnet alone vs the default (all-MiniLM-L6-v2)",
    "answers": "/v1/answers with 200 documents vs the question embedding",
    "stores": "100k QnAs on SQLite and PostgreSQL vs the query embedding",
    "authoring": "deploy and export of 10k QnAs vs plain copies",
    "tools": "where_str compile and filtered search vs unfiltered",
    "vector_store": "vector store search at 10k and 100k chunks, in-process and over HTTP, vs the query embedding",
    "throughput": "HTTP requests/s at concurrency 1/4/16 vs /healthz and the embedder alone",
    "throughput_pg": "HTTP requests/s of the Azure query on PostgreSQL vs the same server on SQLite",
    "batching": "the question embedder's batch size against its threads; scoring question vectors in one product",
    "hotspots": "py-spy profile of a server answering Azure queries at concurrency 16, batching off and on",
    "peers": "Chroma, LanceDB, numpy and bm25s on the same vectors vs the query embedding",
    "coldstart": "launch to first answer and RSS with 100k QnAs vs an empty store",
    "million": "1M passages: start-up, tool search latency and RSS vs the query embedding",
    "console": "the console's QnA editor at 100 and 10k QnAs in chromium vs fetching them through the API",
    "connected": "tool search on a connected chdb (ClickHouse) table of 1M rows vs the same rows loaded into openqna",
}


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.platform()}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", nargs="*", choices=sorted(SCRIPTS))
    only = parser.parse_args().only
    names = only or list(SCRIPTS)
    results, earlier_when = {}, None
    previous = HERE / "results.json"
    if only and previous.exists():  # keep the sections not rerun, marked with when they ran
        earlier = json.loads(previous.read_text(encoding="utf-8"))
        earlier_when = earlier["when"]
        results = {name: {"when": earlier_when, **r} for name, r in earlier["results"].items()
                   if name in SCRIPTS and name not in names}
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    for name in names:
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, str(HERE / f"{name}.py")], capture_output=True, text=True,
                              env={**os.environ, "HF_HUB_OFFLINE": "1"})
        lines = [line.strip() for line in proc.stdout.replace("\r", "\n").splitlines()
                 if line.strip() and "it/s" not in line and "text/s" not in line]
        results[name] = {"when": stamp, "seconds": round(time.perf_counter() - t, 1), "returncode": proc.returncode,
                         "lines": lines, "stderr_tail": proc.stderr.strip().splitlines()[-3:] if proc.returncode else []}
        print(f"{name}: {results[name]['seconds']} s", file=sys.stderr)
    out = ["# Benchmarks\n", f"Run {earlier_when or stamp} on {machine()}"
           + (f"; rerun {stamp}: {', '.join(names)}" if earlier_when else "")
           + ". Every figure comes with a baseline measured in "
           "the same run; this machine is shared and noisy, so read ratios, not absolute times.\n"]
    for name in [n for n in SCRIPTS if n in results]:
        r = results[name]
        out.append(f"## {name} — {SCRIPTS[name]}\n")
        out.append(f"`python bench/{name}.py`, {r['seconds']} s, {r.get('when', stamp)}" + ("" if r["returncode"] == 0 else
                   f", **failed** ({r['returncode']}): " + " / ".join(r["stderr_tail"])) + "\n")
        out.extend(line if line.startswith("|") else f"- {line}"  # a table's rows stay a table
                   for line in r["lines"] if not line.startswith("plot: "))
        out.extend(f"\n![{name}]({line[6:]})" for line in r["lines"] if line.startswith("plot: "))
        out.append("")
    # `make soak` (10 minutes) and the crash tests are not part of `make bench`: their figures are kept by hand
    out.append((HERE / "soak-and-crash.md").read_text(encoding="utf-8"))
    (HERE / "results.md").write_text("\n".join(out) + "\n", encoding="utf-8")
    (HERE / "results.json").write_text(json.dumps({"when": earlier_when or stamp, "machine": machine(), "results": results},
                                                  indent=2) + "\n", encoding="utf-8")
    print(f"wrote {HERE / 'results.md'}", file=sys.stderr)


if __name__ == "__main__":
    main()
