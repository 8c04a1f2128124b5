"""bench/run.py's writer, on fake section results: no benchmark is run (no model, no server).

results.md opens with its header, then one section per benchmark whose first line says when and where
its figures were measured; a rerun of some benchmarks keeps the other sections as they were and adds
one line to history.md, keeping the earlier lines.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bench_run", REPO / "bench" / "run.py")
run = importlib.util.module_from_spec(_spec)
sys.modules["bench_run"] = run
_spec.loader.exec_module(run)

XEON = {"cpu": "Intel(R) Xeon(R) Processor", "cores": 2, "python": "3.11.7", "platform": "Linux-x86_64"}
EPYC = {"cpu": "AMD EPYC", "cores": 2, "python": "3.11.7", "platform": "Linux-x86_64"}
MEASURED = re.compile(r"^Measured \d{4}-\d\d-\d\d \d\d:\d\d UTC on .+, \d+ cores, ")


def section(when: str, where: dict, lines: list[str], load: str = "", returncode: int = 0) -> dict:
    return {"when": when, "machine": where, "load": load, "seconds": 12.5, "returncode": returncode,
            "lines": lines, "stderr_tail": ["Traceback", "ValueError: boom"] if returncode else []}


def sections(text: str) -> dict[str, list[str]]:
    """results.md's `## name — ...` sections: name -> the lines under the heading, blank lines dropped."""
    out: dict[str, list[str]] = {}
    for block in text.split("\n## ")[1:]:
        heading, *body = block.splitlines()
        out[heading.split(" — ")[0]] = [line for line in body if line.strip()]
    return out


def entries(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("- ")]


def seed(folder: Path) -> None:
    """An earlier state: two sections in results.json, two lines of history, a hand-kept section."""
    old = {"foundation": section("2026-12-02 07:17 UTC", XEON, ["query: p50 3.60 ms, ratio 1.92"]),
           "batching": section("2026-12-02 23:51 UTC", EPYC, ["| batch | ms |", "|---|---|", "| 1 | 5.73 |"],
                               load="no other bench of ours running")}
    (folder / "results.json").write_text(json.dumps({"results": old}, indent=2) + "\n", encoding="utf-8")
    (folder / "history.md").write_text(run.HISTORY_HEADER + "\n- 2026-12-01 02:11 UTC — make bench (every benchmark)"
                                       "\n- 2026-12-02 07:17 UTC — rerun on an Intel Xeon: foundation, why\n",
                                       encoding="utf-8")
    (folder / "soak-and-crash.md").write_text("## soak and crash — by hand\n\nMeasured by hand.\n", encoding="utf-8")


def test_rerun_keeps_other_sections_and_adds_one_history_line(tmp_path):
    seed(tmp_path)
    before = entries(tmp_path / "history.md")
    new = {"throughput": section("2026-12-05 10:00 UTC", EPYC, ["Azure c=16: 233 req/s", "plot: tp.png"],
                                 load="load average 0.42 at the start")}
    run.write_results(new, note="after   the turns\n(issue 29)", folder=tmp_path)

    text = (tmp_path / "results.md").read_text(encoding="utf-8")
    assert text.startswith(run.HEADER)
    head = text[:text.index("\n## ")]
    assert "; rerun" not in head and max(len(line) for line in head.splitlines()) <= 110  # no history in the header
    assert "`make bench`" in head and "`python bench/run.py NAME...`" in head and "history.md" in head
    got = sections(text)
    assert list(got) == ["foundation", "throughput", "batching", "soak and crash"]  # SCRIPTS' order, hand-kept last
    for name in ("foundation", "throughput", "batching"):
        assert MEASURED.match(got[name][0]), got[name][0]
    assert got["foundation"] == ["Measured 2026-12-02 07:17 UTC on Intel(R) Xeon(R) Processor, 2 cores, Python 3.11.7,"
                                 " Linux-x86_64. `python bench/foundation.py`, 12.5 s",
                                 "- query: p50 3.60 ms, ratio 1.92"]
    assert got["throughput"] == ["Measured 2026-12-05 10:00 UTC on AMD EPYC, 2 cores, Python 3.11.7, Linux-x86_64;"
                                 " load average 0.42 at the start. `python bench/throughput.py`, 12.5 s",
                                 "- Azure c=16: 233 req/s", "![throughput](tp.png)"]
    assert got["batching"][0].endswith("; no other bench of ours running. `python bench/batching.py`, 12.5 s")
    assert got["batching"][1:] == ["| batch | ms |", "|---|---|", "| 1 | 5.73 |"]  # a table stays a table
    assert got["soak and crash"] == ["Measured by hand."]

    after = entries(tmp_path / "history.md")
    assert after[:-1] == before
    assert after[-1] == ("- 2026-12-05 10:00 UTC — rerun throughput on AMD EPYC, 2 cores, Python 3.11.7, Linux-x86_64"
                         " (load average 0.42 at the start): after the turns (issue 29)")

    kept = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))["results"]
    assert list(kept) == ["foundation", "throughput", "batching"]
    assert kept["throughput"] == new["throughput"] and kept["foundation"]["machine"] == XEON


def test_full_run_on_an_empty_folder_starts_the_history(tmp_path):
    new = {name: section("2026-12-05 10:00 UTC", EPYC, [f"{name}: 1.00x"]) for name in run.SCRIPTS}
    new["million"] = section("2026-12-05 10:09 UTC", EPYC, [], returncode=1)
    run.write_results(new, folder=tmp_path)

    got = sections((tmp_path / "results.md").read_text(encoding="utf-8"))
    assert list(got) == list(run.SCRIPTS)
    assert all(MEASURED.match(body[0]) for body in got.values())
    assert got["million"] == ["Measured 2026-12-05 10:09 UTC on AMD EPYC, 2 cores, Python 3.11.7, Linux-x86_64."
                              " `python bench/million.py`, 12.5 s, **failed** (1): Traceback / ValueError: boom"]
    history = (tmp_path / "history.md").read_text(encoding="utf-8")
    assert history.startswith(run.HISTORY_HEADER + "\n- ")
    assert entries(tmp_path / "history.md") == ["- 2026-12-05 10:00 UTC — make bench (every benchmark) on AMD EPYC,"
                                                " 2 cores, Python 3.11.7, Linux-x86_64; failed: million (1)"]

    run.write_results({"tools": section("2026-12-05 11:00 UTC", XEON, ["tools: 0.98x"])}, "again", folder=tmp_path)
    lines = entries(tmp_path / "history.md")
    assert len(lines) == 2 and lines[1].startswith("- 2026-12-05 11:00 UTC — rerun tools on Intel(R) Xeon(R)")
    assert sections((tmp_path / "results.md").read_text(encoding="utf-8"))["tools"][1:] == ["- tools: 0.98x"]


def test_names_on_the_command_line():
    assert run.parse_args([]).names == list(run.SCRIPTS)
    args = run.parse_args(["throughput", "batching", "--note", "why"])
    assert args.names == ["throughput", "batching"] and args.note == "why"
    assert run.parse_args(["--only", "models", "tools"]).names == ["models", "tools"]


def test_the_committed_files_are_what_the_writer_writes():
    bench = REPO / "bench"
    results = json.loads((bench / "results.json").read_text(encoding="utf-8"))["results"]
    assert list(results) == [name for name in run.SCRIPTS if name in results]
    handwritten = (bench / "soak-and-crash.md").read_text(encoding="utf-8")
    assert (bench / "results.md").read_text(encoding="utf-8") == run.render(results, handwritten)
    hand = sections("\n" + handwritten)  # kept by hand, but opening with when and where all the same
    assert list(hand) == ["soak and crash"] and re.match(r"^Measured \d{4}-\d\d-\d\d \d\d:\d\d.* UTC.*, \d+ cores",
                                                         hand["soak and crash"][0])
    history = entries(bench / "history.md")
    assert (bench / "history.md").read_text(encoding="utf-8").startswith(run.HISTORY_HEADER + "\n- ")
    when = [re.match(r"^- (\d{4}-\d\d-\d\d \d\d:\d\d UTC) — ", line).group(1) for line in history]
    assert when == sorted(when)
