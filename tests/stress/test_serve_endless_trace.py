"""One endless trace (thousands of new spans per request, no root, never quiet) must not slow
everyone: it is released in pieces at the per-trace span bound, a forbidden call deep inside it is
still reported, the receiver's per-trace state
stays bounded, and the other clients' episodes are judged as usual, with no 503.

The other clients' request rate beside it is recorded, not asserted: one client posting 1000-span
requests as fast as it can takes most of the interpreter from the others whether its spans form
one endless trace or many complete ones (measured 0.04-0.07 vs 0.08-0.11 of the rate alone on a
shared 2-core machine)."""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest

from .report import mib, record
from .serve_rig import Serve, episode_body, post

_EPOCH = 1_700_000_000_000_000_000
ENDLESS = "e" * 32
CAP = 1000


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def _endless_request(k: int, per_request: int, forbidden_at: int) -> bytes:
    spans = []
    for i in range(per_request):
        n = k * per_request + i
        tool = "delete_database" if n == forbidden_at else "lookup_order"
        spans.append({
            "traceId": ENDLESS, "spanId": f"{n + 1:016x}", "parentSpanId": "f" * 16,  # the root never comes
            "name": f"execute_tool {tool}", "kind": 1,
            "startTimeUnixNano": str(_EPOCH + 10 * n), "endTimeUnixNano": str(_EPOCH + 10 * n + 5),
            "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                           {"key": "gen_ai.tool.name", "value": {"stringValue": tool}},
                           {"key": "filler", "value": {"stringValue": "x" * 200}}]})
    return json.dumps({"resourceSpans": [{"resource": {"attributes": []},
                                          "scopeSpans": [{"scope": {"name": "endless"}, "spans": spans}]}]}).encode()


def _normal(s: Serve, base: int, count: int, statuses: List[int]) -> float:
    t0 = time.monotonic()
    for i in range(count):
        n = base + i
        tools = ["lookup_order", "delete_database"] if n % 3 == 0 else ["lookup_order"]
        statuses.append(post(s.url, episode_body(n, tools))[0])
    return count / (time.monotonic() - t0)


@pytest.mark.timeout(600)
def test_an_endless_trace_is_released_in_bounded_pieces_and_slows_no_one(sizes: Any, tmp_path: Path) -> None:
    requests = sizes.pick(30, 300)
    per_request = 1000
    forbidden_at = (requests * per_request) * 3 // 4  # deep inside, long after the first release
    normal = sizes.pick(150, 1000)
    s = Serve(tmp_path / "serve", "--settle", "0.2", "--max-trace-spans", str(CAP), "--queue-size", "200000")
    statuses: List[int] = []
    endless_statuses: List[int] = []
    peak = {"rss": 0, "buffered_spans": 0}
    done = threading.Event()
    try:
        rss0 = _rss(s.proc.pid)
        alone = _normal(s, 0, normal, statuses)

        def endless() -> None:
            for k in range(requests):
                endless_statuses.append(post(s.url, _endless_request(k, per_request, forbidden_at), timeout=60)[0])
            done.set()

        def sample() -> None:
            while not done.is_set():
                peak["rss"] = max(peak["rss"], _rss(s.proc.pid))
                peak["buffered_spans"] = max(peak["buffered_spans"], s.health()["buffered_spans"])
                time.sleep(0.2)

        threads = [threading.Thread(target=endless), threading.Thread(target=sample)]
        for t in threads:
            t.start()
        beside = _normal(s, 100_000, normal, statuses)
        for t in threads:
            t.join(300)
        time.sleep(1.0)
        health = s.health()
        code, _, text = s.stop()
    finally:
        done.set()
        s.kill()
    report = json.loads(text)
    grown = peak["rss"] - rss0
    record("serve: one endless trace (no root, 1000 new spans/request)", inputs=requests * per_request + 2 * normal,
           peak_memory=f"RSS +{mib(grown)}; {peak['buffered_spans']} spans buffered",
           memory_bound=f"--max-trace-spans {CAP}",
           note=f"other clients {alone:.0f} req/s alone, {beside:.0f} beside it ({beside / alone:.2f}); "
                f"{report['receiver']['traces_released_early']} early releases")
    assert code == 0
    assert set(statuses) == {200} and set(endless_statuses) == {200}
    # Per-trace state is bounded: never more buffered than the endless trace's span bound plus the
    # other clients' episodes (3 spans each; how many wait out --settle at once depends on their rate,
    # so all of them is the bound), however many of the endless trace's spans arrive.
    assert peak["buffered_spans"] <= CAP + 3 * normal
    assert grown < 120 * (1 << 20)
    assert report["receiver"]["traces_released_early"] >= requests * per_request // CAP - 1
    # Other clients' episodes: every one decided, the forbidden call failed.
    decided = {ep["trace_id"]: ep for ep in report["episodes"]}
    for n in list(range(normal)) + list(range(100_000, 100_000 + normal)):
        ep = decided[f"{n + 1:032x}"]
        verdict = {r["test"]: r["verdict"] for r in ep["results"]}["no-delete"]
        assert verdict == ("failed" if n % 3 == 0 else "passed")
    # The endless trace: the forbidden call deep inside is reported; nothing passes on partial evidence.
    assert any(v["trace_id"] == ENDLESS and v["tool"] == "delete_database" for v in report["violations"])
    endless_results = [r for ep in report["episodes"] if ep["trace_id"].startswith(ENDLESS) for r in ep["results"]]
    assert endless_results
    # No piece of it passes a safety rule: its root never came, so an unbroken one is inconclusive.
    assert not [r for r in endless_results if r["test"] == "no-delete" and r["verdict"] == "passed"]
    assert any(r["test"] == "no-delete" and r["verdict"] == "failed" for r in endless_results)
    assert health["status"] == "ok"
