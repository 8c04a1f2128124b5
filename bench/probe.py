"""GET /healthz every 50 ms, each on a new connection as a load balancer's health check makes it, until stdin closes.

bench/soak.py's storms run it beside each storm, in a process of its own so that the load the storm generates in
the soak's process (its event loop, its interpreter lock) does not delay the probes and pass for a slow server.
Each probe is a line of OUT: the monotonic clock when it began (the same clock as the soak's), its latency in ms and
1 if it was answered 200, else 0; a probe not answered within --timeout counts as that long.  --source is the
address the probes come from (the storms come from 127.0.0.1, and a health check from another host than the
attacker's: the cap on slow requests refuses the attacker's address, not everyone's).

Usage: python bench/probe.py BASE_URL OUT [--every 0.05] [--timeout 10] [--source 127.0.0.2]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time

import httpx


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base")
    parser.add_argument("out")
    parser.add_argument("--every", type=float, default=0.05)
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--source", default=None, help="local address to connect from")
    args = parser.parse_args()
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    transport = httpx.HTTPTransport(local_address=args.source, limits=httpx.Limits(max_keepalive_connections=0))
    with httpx.Client(base_url=args.base, timeout=args.timeout, transport=transport) as client, \
            open(args.out, "w", buffering=1) as out:
        while not stop.is_set():
            started = time.monotonic()
            try:
                ok = client.get("/healthz").status_code == 200
                seconds = time.monotonic() - started
            except httpx.TimeoutException:
                ok, seconds = False, args.timeout
            except httpx.HTTPError:
                ok, seconds = False, time.monotonic() - started
            out.write(f"{started:.4f} {seconds * 1000:.1f} {int(ok)}\n")
            stop.wait(max(0.0, args.every - seconds))


if __name__ == "__main__":
    main()
