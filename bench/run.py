"""`make bench`: run every benchmark script once, in its own process, and write bench/results.md.

Each script prints its figures together with a baseline measured in the same run (the
embedder alone, a plain copy of the same rows, the reference filter evaluator, the query
embedding alone, /healthz of the same server); this collects them, each section with when and
where it ran (UTC start time, CPU model, cores, the load average at its start) and the time it
took.  A script that draws a plot prints ``plot: FILE`` (a file next to this one) and results.md
shows the image.

results.json keeps every section's lines and metadata, so a rerun of some benchmarks rewrites
results.md with the others as they were.  Each run appends one line to history.md (when, where,
which benchmarks, and the ``--note`` saying why), instead of growing results.md's header.

Usage: python bench/run.py [NAME ...] [--note TEXT]   (no NAME: every benchmark; ``--only NAME ...`` also works)
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
from typing import Any

HERE = Path(__file__).resolve().parent
SCRIPTS = {
    "foundation": "import throughput vs the embedder; Azure SDK latency vs in-process",
    "multilingual": "a Chinese question in the multilingual space vs the same question in English; its memory at 100k records; install size",
    "models": "the accurate embedding model (all-mpnet-base-v2 with the universal sentence encoder), the same with int8 mpnet (accurate-fast), mpnet alone and int8 mpnet alone (mpnet-fast) vs the default (all-MiniLM-L6-v2)",
    "int8": "the int8 MiniLM (OPENQNA_EMBEDDER=fast): question embedding and indexing vs the fp32 default",
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
    "scale": "two `openqna serve` processes on one PostgreSQL at 1M QnAs: requests/s, p99 and a write's propagation "
             "vs the same two at 10k and the query embedding",
    "console": "the console's QnA editor at 100 and 10k QnAs in chromium vs fetching them through the API",
    "bombs": "decompression bombs inside the upload limits vs reading nothing and ordinary files of the same size",
    "connected": "tool search on connected chdb (ClickHouse) and PostgreSQL tables of 1M rows through the engine's "
                 "HNSW index vs brute force in the engine and the same rows loaded into openqna",
    "training": "openqna train on banking77 and a 1,000-QnA FAQ vs embedding their texts; question p50 with a trained model vs without",
}

HEADER = """# Benchmarks

The current figures of `make bench` (`bench/run.py`), one section per benchmark script. Every figure
comes with a baseline measured in the same run of the same script (the embedder alone, a plain copy of
the same rows, /healthz of the same server, ...): the machines are shared and noisy, so read ratios,
not absolute times. Sections are rerun one at a time, so they can come from different days and
machines: each section's first line says when (UTC) and where its figures were measured.

Rerun: `make bench` (every benchmark, 10 to 15 minutes), or `python bench/run.py NAME...` for some of
them (the other sections stay as they are), with `--note "why"` to say why. Each run adds a dated
line to [history.md](history.md), the record of why figures changed.
"""

HISTORY_HEADER = """# Benchmark history

One line per run of `bench/run.py` (`make bench`, or a rerun of some benchmarks), oldest first: when and
where it ran, which benchmarks, and why (its `--note`). The current figures are in [results.md](results.md);
the figures of each run, and the runs older than the first line here, are in the git history of
results.md and results.json.
"""


def machine() -> dict[str, Any]:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}


def load_note() -> str:
    """The machine's load as a section records it; the machines are shared, so it says how to read the rates."""
    try:
        return f"load average {os.getloadavg()[0]:.2f} at the start"
    except OSError:  # not available on this platform
        return ""


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def run_benchmark(name: str) -> dict[str, Any]:
    """Run bench/NAME.py in its own process: its printed lines and when, where and how long it ran."""
    when, where, load = utc_now(), machine(), load_note()
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, str(HERE / f"{name}.py")], capture_output=True, text=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    lines = [line.strip() for line in proc.stdout.replace("\r", "\n").splitlines()
             if line.strip() and "it/s" not in line and "text/s" not in line]
    return {"when": when, "machine": where, "load": load, "seconds": round(time.perf_counter() - t, 1),
            "returncode": proc.returncode, "lines": lines,
            "stderr_tail": proc.stderr.strip().splitlines()[-3:] if proc.returncode else []}


def where(m: dict[str, Any] | None) -> str:
    if not m:
        return "a machine not recorded"
    return f"{m['cpu']}, {m['cores']} cores, Python {m['python']}, {m['platform']}"


def measured(name: str, r: dict[str, Any]) -> str:
    """A section's first line: when and where its figures were measured, and how long the script took."""
    load = f"; {r['load']}" if r.get("load") else ""
    failed = "" if r["returncode"] == 0 else f", **failed** ({r['returncode']}): " + " / ".join(r["stderr_tail"])
    return f"Measured {r['when']} on {where(r.get('machine'))}{load}. `python bench/{name}.py`, {r['seconds']} s{failed}"


def render(results: dict[str, dict[str, Any]], handwritten: str = "") -> str:
    """results.md: the header, then one section per benchmark in SCRIPTS' order, then the hand-kept sections."""
    out = [HEADER]
    for name in [n for n in SCRIPTS if n in results]:
        r = results[name]
        out.append(f"## {name} — {SCRIPTS[name]}\n")
        out.append(measured(name, r) + "\n")
        out.extend(line if line.startswith("|") else f"- {line}"  # a table's rows stay a table
                   for line in r["lines"] if not line.startswith("plot: "))
        out.extend(f"\n![{name}]({line[6:]})" for line in r["lines"] if line.startswith("plot: "))
        out.append("")
    if handwritten:
        out.append(handwritten)
    return "\n".join(out) + "\n"


def history_entry(new: dict[str, dict[str, Any]], note: str = "") -> str:
    """One line of history.md for a run: when it started, where, which benchmarks, and the note."""
    first = min(new.values(), key=lambda r: r["when"])
    what = ("make bench (every benchmark)" if set(new) >= set(SCRIPTS)
            else "rerun " + ", ".join(n for n in SCRIPTS if n in new))
    load = f" ({first['load']})" if first.get("load") else ""
    failed = [f"{n} ({r['returncode']})" for n, r in new.items() if r["returncode"] != 0]
    text = f"- {first['when']} — {what} on {where(first.get('machine'))}{load}"
    text += f"; failed: {', '.join(failed)}" if failed else ""
    return text + (f": {' '.join(note.split())}" if note.strip() else "")


def append_history(path: Path, entry: str) -> None:
    """Add a run's line at the end of history.md (created with its header the first time); earlier lines stay."""
    text = path.read_text(encoding="utf-8").rstrip("\n") if path.exists() else ""
    if not text:
        text = HISTORY_HEADER.rstrip("\n")
    separator = "\n" if text.splitlines()[-1].startswith("- ") else "\n\n"  # a blank line after the header
    path.write_text(text + separator + entry + "\n", encoding="utf-8")


def write_results(new: dict[str, dict[str, Any]], note: str = "", folder: Path = HERE) -> None:
    """Merge a run's sections into folder's results.json, rewrite results.md, add the run to history.md.

    ``new`` maps benchmark names to run_benchmark()'s results; the sections of results.json not in it are
    kept as they were, with their own date and machine.
    """
    previous = folder / "results.json"
    kept = json.loads(previous.read_text(encoding="utf-8"))["results"] if previous.exists() else {}
    merged = {**kept, **new}
    results = {name: merged[name] for name in SCRIPTS if name in merged}
    # `make soak` (10 minutes) and the crash tests are not part of `make bench`: their figures are kept by hand
    handwritten = folder / "soak-and-crash.md"
    (folder / "results.md").write_text(render(results, handwritten.read_text(encoding="utf-8")
                                              if handwritten.exists() else ""), encoding="utf-8")
    previous.write_text(json.dumps({"results": results}, indent=2) + "\n", encoding="utf-8")
    append_history(folder / "history.md", history_entry(new, note))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Run the benchmarks and write bench/results.md.")
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help="benchmarks to rerun, the other sections kept (default: every one): " + ", ".join(SCRIPTS))
    parser.add_argument("--only", nargs="*", default=[], metavar="NAME", help="the same as naming them")
    parser.add_argument("--note", default="", help="why this run: it goes into bench/history.md")
    args = parser.parse_args(argv)
    names = list(dict.fromkeys([*args.names, *args.only]))
    unknown = [n for n in names if n not in SCRIPTS]
    if unknown:
        parser.error(f"no benchmark {', '.join(unknown)} (choose from {', '.join(SCRIPTS)})")
    args.names = names or list(SCRIPTS)
    return args


def main() -> None:
    args = parse_args()
    new = {}
    for name in args.names:
        new[name] = run_benchmark(name)
        print(f"{name}: {new[name]['seconds']} s", file=sys.stderr)
    write_results(new, args.note)
    print(f"wrote {HERE / 'results.md'} and a line of {HERE / 'history.md'}", file=sys.stderr)


if __name__ == "__main__":
    main()
