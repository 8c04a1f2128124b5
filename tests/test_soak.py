"""30 seconds of 32 clients on every surface at once, on SQLite and on PostgreSQL (``make soak`` runs 5 minutes),
and a few seconds of each storm of issue 40 with /healthz probed meanwhile (``make soak`` runs 30 s of each).

Fails on any error (5xx, transport failure, unexpected status, a failed job), on any acknowledged write
missing at the end, and on a traceback in the server's log.  The RSS samples are printed for the record
(the 5-minute figures are in bench/results.md), not asserted: a 30 s run on a shared machine is too
short and too noisy to tell growth from warm-up.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from pg import pg_dsn, pg_server  # noqa: F401  (fixtures)

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("soak", REPO / "bench" / "soak.py")
soak = importlib.util.module_from_spec(_spec)
sys.modules["soak"] = soak  # dataclasses look their module up there
_spec.loader.exec_module(soak)


def check(result: dict) -> None:
    print({k: result[k] for k in ("requests", "requests_per_second", "p50_ms", "p99_ms", "acknowledged", "rss_mb")})
    assert result["errors"] == []
    assert result["missing"] == []
    assert result["server_log_errors"] == []
    assert result["acknowledged"]["qna_additions"] > 0 and result["acknowledged"]["files"] > 0
    assert result["acknowledged"]["deploys"] > 0
    assert set(result["per_operation"]) == {op for op, _ in soak.MIX}  # every surface was exercised


def test_soak_sqlite(tmp_path):
    check(soak.run_server_soak(tmp_path, seconds=30, clients=32))


def test_soak_postgres(tmp_path, pg_dsn):  # noqa: F811
    check(soak.run_server_soak(tmp_path, seconds=30, clients=32, store_url=pg_dsn))


def test_storms(tmp_path):
    """A few seconds of each storm (``make soak`` runs 30 s of each): 100 clients hanging up mid-body each second, a
    slowloris of 50 sockets, 100 clients asking at once.  /healthz must answer every probe, during each storm and
    after it, within a bound far above issue 40's 1 s (a shared machine, and liveness, not timing, is the point);
    the clients must all be answered."""
    result = soak.run_server_storms(tmp_path, seconds=4, after=3, disconnects=100, slow_sockets=50, clients=100)
    print(soak.storm_table(result))
    for name in ("disconnect_storm", "slowloris", "many_clients"):
        for phase, healthz in result[name]["healthz"].items():
            assert healthz["probes"] > 0 and healthz["failures"] == 0 and healthz["max_ms"] < 5000, (name, phase)
    assert result["disconnect_storm"]["disconnects"] >= 100
    assert result["slowloris"]["answered_503"] > 0  # the cap (32 slow requests an address) refused the rest
    assert result["many_clients"]["errors"] == 0 and result["many_clients"]["answers"] >= 100
    assert result["server_log_errors"] == []
