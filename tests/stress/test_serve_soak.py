"""Soak: serve at the highest loopback rate this machine gives (several keep-alive senders posting
as fast as they can), RSS sampled every second; memory must level off. `make stress` runs it for 5
minutes; `make test` runs a short variant. The curve's figures go into the stress table."""
from __future__ import annotations

import http.client
import json
import re
import threading
import time
from pathlib import Path
from typing import Any, List, Tuple

import pytest

from .report import mib, record
from .serve_rig import Serve, episode_request

PER_REQUEST = 20  # episodes (3 spans each) per request, as an SDK exporter batches spans


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def _slope_per_minute(points: List[Tuple[float, int]]) -> float:
    """Least-squares slope of RSS over time, in bytes per minute."""
    n = len(points)
    if n < 2:
        return 0.0
    mt = sum(t for t, _ in points) / n
    mr = sum(r for _, r in points) / n
    den = sum((t - mt) ** 2 for t, _ in points) or 1.0
    return 60 * sum((t - mt) * (r - mr) for t, r in points) / den


@pytest.mark.timeout(900)
def test_serve_memory_levels_off_under_sustained_loopback_load(sizes: Any, tmp_path: Path) -> None:
    duration = sizes.pick(8.0, 300.0)
    senders = 4
    s = Serve(tmp_path / "serve", "--settle", "0.2", report=False)
    host, port = s.http.rsplit(":", 1)
    stop = threading.Event()
    lock = threading.Lock()
    counts = {"ok": 0, "other": 0, "episodes": 0}
    samples: List[Tuple[float, int]] = []
    try:
        def sender(w: int) -> None:
            conn = http.client.HTTPConnection(host, int(port), timeout=30)
            i = 0
            while not stop.is_set():
                first = w * 10_000_000 + i * PER_REQUEST
                doc = {"resourceSpans": []}
                for n in range(first, first + PER_REQUEST):
                    tools = ["lookup_order", "delete_database"] if n % 10 == 0 else ["lookup_order", "refund"]
                    doc["resourceSpans"] += episode_request(n, tools)["resourceSpans"]
                try:
                    conn.request("POST", "/v1/traces", body=json.dumps(doc).encode(),
                                 headers={"Content-Type": "application/json"})
                    resp = conn.getresponse()
                    resp.read()
                    ok = resp.status == 200
                except (OSError, http.client.HTTPException):
                    conn.close()
                    conn = http.client.HTTPConnection(host, int(port), timeout=30)
                    ok = False
                with lock:
                    counts["ok" if ok else "other"] += 1
                    counts["episodes"] += PER_REQUEST if ok else 0
                i += 1
            conn.close()

        threads = [threading.Thread(target=sender, args=(w,)) for w in range(senders)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        while time.monotonic() - t0 < duration:
            samples.append((time.monotonic() - t0, _rss(s.proc.pid)))
            time.sleep(1.0)
        stop.set()
        for t in threads:
            t.join(60)
        elapsed = time.monotonic() - t0
        code, _, _ = s.stop(timeout=120)
    finally:
        stop.set()
        s.kill()
    decided = int(re.search(r"(\d+) episode\(s\) decided", s.stdout_tail).group(1))
    accepted = int(re.search(r"(\d+) span\(s\) accepted", s.stdout_tail).group(1))
    rss = [r for _, r in samples]
    half = len(samples) // 2
    second_half = samples[half:]
    growth_2nd = max(r for _, r in second_half) - second_half[0][1]
    slope = _slope_per_minute(second_half)
    curve = ", ".join(f"{int(samples[min(len(samples) - 1, int(len(samples) * q))][0])}s {mib(samples[min(len(samples) - 1, int(len(samples) * q))][1])}"
                      for q in (0.0, 0.25, 0.5, 0.75, 1.0))
    rate = accepted / elapsed
    record(f"serve: soak {duration:.0f}s at full loopback rate", inputs=counts["ok"] + counts["other"],
           spans_lost=abs(accepted - 3 * counts["episodes"]), peak_memory=f"RSS max {mib(max(rss))}",
           memory_bound=f"2nd half +{mib(growth_2nd)}, {slope / (1 << 20):+.2f} MiB/min",
           seconds=elapsed, note=f"{rate:.0f} spans/s, {decided} episodes decided; RSS curve {curve}")
    assert code == 0
    assert counts["other"] == 0
    assert accepted == 3 * counts["episodes"] and decided == counts["episodes"]
    # Levels off: over the second half, RSS grows by less than 16 MiB and 8% of itself.
    assert growth_2nd < max(16 << 20, 0.08 * second_half[0][1]), curve
    assert max(rss) < 512 << 20
