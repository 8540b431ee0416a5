"""The receiver's engine thread: when it looks for settled traces (serve's in-process receiver, no ports)."""
from __future__ import annotations

import os
import threading
import time
from typing import Any, Dict, List

from spanassert.config import load_config
from spanassert.core.model import SpanRecord
from spanassert.serve import Receiver, ServeOptions

RULES = """\
version: 1
tests:
  - id: no-delete
    assertions: [{type: trace_must_not_call_tool, tool: delete_database}]
"""


def _trace(n: int, root_seen: bool = True) -> List[SpanRecord]:
    trace_id = f"{n:032x}"
    root = f"{n:016x}"
    return [
        SpanRecord(trace_id=trace_id, span_id=f"{n + 1000:016x}", parent_span_id=root, name="execute_tool search",
                   start_ns=1_000, end_ns=2_000,
                   attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}),
        SpanRecord(trace_id=trace_id, span_id=root, name="invoke_agent planner", start_ns=0, end_ns=3_000,
                   attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"}),
    ][:2 if root_seen else 1]


def test_a_trace_that_settled_while_another_was_judged_is_judged_at_once_not_a_tick_later() -> None:
    """Trace A is judged slowly (0.3 s); trace B, whose root never comes, arrived just after A and
    is due (--rootless-wait 0.15 s) while A is judged, never at A's release (at most a tick after A
    settled). The queue is empty then, so the engine thread used to wait a whole tick (0.1 s) on it
    before looking again; B is now taken as soon as A is done."""
    settle = 0.05
    rx = Receiver(load_config(RULES), ServeOptions(grpc_endpoint=None, http_endpoint=None, quiet=True,
                                                   settle=settle, rootless_wait=0.15),
                  out=open(os.devnull, "w"))
    fed: Dict[str, float] = {}
    done: Dict[str, float] = {}
    real_feed = rx._feed
    slow = threading.Event()

    def feed(records: List[SpanRecord]) -> None:
        tid = records[0].trace_id
        fed[tid] = time.monotonic()
        if not slow.is_set():
            slow.set()
            time.sleep(0.3)  # the first trace takes long to judge
        real_feed(records)
        done[tid] = time.monotonic()

    rx._feed = feed  # type: ignore[method-assign]  # a spy on this receiver only
    rx.start()
    try:
        a, b = _trace(1), _trace(2, root_seen=False)
        assert rx.accept(a, None, 0)
        time.sleep(0.01)
        assert rx.accept(b, None, 0)
        deadline = time.monotonic() + 10
        while len(done) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        rx.stop()
    ta, tb = a[0].trace_id, b[0].trace_id
    assert set(fed) == {ta, tb}
    assert fed[tb] >= fed[ta]
    # B was due long before A's judging ended; a tick's wait would be at least 0.1 s.
    assert fed[tb] - done[ta] < 0.09, fed[tb] - done[ta]
    assert rx.sink.episodes_closed == 2


def test_a_trace_is_judged_when_it_settled_not_at_the_next_tick() -> None:
    """With the engine idle, a trace whose root came is judged ``--settle`` after it arrived: the
    engine thread wakes for it rather than at its 0.1 s tick. Settle lower bound kept: never sooner."""
    settle = 0.15
    rx = Receiver(load_config(RULES), ServeOptions(grpc_endpoint=None, http_endpoint=None, quiet=True,
                                                   settle=settle, rootless_wait=5.0),
                  out=open(os.devnull, "w"))
    fed: List[float] = []
    real_feed = rx._feed

    def feed(records: List[Any]) -> None:
        fed.append(time.monotonic())
        real_feed(records)

    rx._feed = feed  # type: ignore[method-assign]  # a spy on this receiver only
    rx.start()
    lags: List[float] = []
    try:
        for n in range(5):
            time.sleep(0.037 * (n + 1))  # arrivals at different phases of the tick
            before = len(fed)
            sent = time.monotonic()
            assert rx.accept(_trace(10 + n), None, 0)
            deadline = time.monotonic() + 5
            while len(fed) == before and time.monotonic() < deadline:
                time.sleep(0.002)
            assert len(fed) == before + 1
            lags.append(fed[-1] - sent)
    finally:
        rx.stop()
    assert min(lags) >= settle - 0.005  # never before it settled (the queue's arrival time is a bit later)
    # A tick-bound release lags settle by up to 0.1 s, 0.05 s on average over these phases.
    assert sorted(lags)[len(lags) // 2] < settle + 0.03, lags
