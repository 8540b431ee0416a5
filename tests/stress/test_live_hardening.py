"""Issue 14, live processor items 8-10 and metrics item 12: callbacks that raise anything or block,
a worker that is gone, a queue bounded in bytes, and metric attributes that junk tool names cannot
use up. Real SDK, real exporters; every loop is bounded."""
from __future__ import annotations

import threading
import time
from typing import Any, List

import pytest
from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.trace import Status, StatusCode

from spanassert.config import load_config

from .report import record
from .rig import CountingProcessor, LiveRig, child, new_root, tool_attrs

RULES = """\
version: 1
tests:
  - id: no-delete
    severity: critical
    assertions: [{type: trace_must_not_call_tool, tool: delete_database}]
  - id: tools-succeed
    severity: warning
    assertions: [{type: trace_tool_status, must_succeed: true}]
"""


def _episode(rig: LiveRig, tools: List[str], fail: bool = False, args: str = "{}") -> int:
    root = new_root(rig.tracer)
    for t in tools:
        s = child(rig.tracer, root, f"execute_tool {t}", tool_attrs(t, **{"gen_ai.tool.call.arguments": args}))
        if fail:
            s.set_status(Status(StatusCode.ERROR))
        s.end()
    root.end()
    return len(tools) + 1


@pytest.mark.parametrize("exc", [SystemExit, KeyboardInterrupt, RuntimeError], ids=lambda e: e.__name__)
def test_a_callback_raising_anything_on_the_worker_stops_no_export_and_keeps_the_queue_bound(exc: Any) -> None:
    def boom(_: Any) -> None:
        raise exc("callback")

    healthy = CountingProcessor(keep_ids=False)
    rig = LiveRig(load_config(RULES), export=[healthy], background=True, max_queue_size=64,
                  on_violation=boom, on_episode=boom)
    proc = rig.processor
    counts = {"ended": 0, "peak": 0}
    escaped: List[BaseException] = []

    def agent() -> None:
        # The agent runs on a thread of its own: when the queue stays full, the agent's thread helps
        # the worker and runs callbacks itself, and on the main thread a KeyboardInterrupt is passed
        # on by design (it may be the user's Ctrl-C). Anywhere else it must be counted, never raised.
        try:
            for _ in range(300):
                counts["ended"] += _episode(rig, ["search", "lookup"], fail=True)  # found on the worker
                counts["peak"] = max(counts["peak"], len(proc._queue))
        except BaseException as e:  # noqa: BLE001 - the assertion below reports it
            escaped.append(e)

    t = threading.Thread(target=agent, name="agent")
    t.start()
    t.join(120)
    assert not t.is_alive()
    assert escaped == []
    ended, peak = counts["ended"], counts["peak"]
    assert proc.force_flush(30_000)
    rig.provider.shutdown()
    record(f"live: callback raises {exc.__name__} on the worker", inputs=ended, exceptions_escaped=0,
           spans_lost=ended - healthy.total, note=f"queue peak {peak} (bound 64); "
           f"{int(rig.total('spanassert.internal_errors'))} internal errors counted")
    assert healthy.total == ended
    assert peak <= 64
    assert rig.total("spanassert.violations") == 600
    assert rig.total("spanassert.internal_errors") >= 600


def test_a_worker_that_is_gone_means_inline_evaluation_not_lost_spans() -> None:
    healthy = CountingProcessor(keep_ids=False)
    seen: List[str] = []
    rig = LiveRig(load_config(RULES), export=[healthy], background=True, max_queue_size=16,
                  on_violation=lambda v: seen.append(v.test_id))
    proc = rig.processor
    dead = threading.Thread(target=lambda: None)
    dead.start()
    dead.join()
    proc._worker = dead  # the worker died (whatever the reason)
    ended = peak = 0
    for _ in range(200):
        ended += _episode(rig, ["search", "delete_database"], fail=True)
        peak = max(peak, len(proc._queue))
    assert healthy.total == ended  # evaluated and handed on inline, as they ended
    assert peak <= 16
    assert seen.count("no-delete") == 200 and seen.count("tools-succeed") == 400
    rig.provider.shutdown()
    assert healthy.total == ended
    record("live: worker thread gone", inputs=ended, exceptions_escaped=0, spans_lost=ended - healthy.total,
           note=f"queue peak {peak} (bound 16); every span evaluated on the agent's thread")


def _blocking_rig(release: threading.Event, on_agent: List[str], **kwargs: Any) -> Any:
    def slow_pager(v: Any) -> None:
        if v.test_id == "tools-succeed":
            release.wait(20)  # a webhook with no timeout, called on the worker
        else:
            on_agent.append(threading.current_thread().name)

    healthy = CountingProcessor(keep_ids=False)
    rig = LiveRig(load_config(RULES), export=[healthy], background=True, on_violation=slow_pager, **kwargs)
    _episode(rig, ["search"], fail=True)  # its violation blocks the worker's callback
    time.sleep(0.2)
    return rig, healthy


def _forbidden_starts(rig: Any, on_agent: List[str]) -> List[float]:
    took = []
    for _ in range(5):  # the app's threads keep starting tools, a forbidden one included
        t0 = time.monotonic()
        root = new_root(rig.tracer)
        s = child(rig.tracer, root, "execute_tool delete_database", tool_attrs("delete_database"))
        took.append(time.monotonic() - t0)
        assert on_agent and on_agent[-1] == threading.current_thread().name  # before start_span returned
        s.end()
        root.end()
    return took


def test_a_blocking_callback_on_the_worker_does_not_hold_the_engine() -> None:
    release = threading.Event()
    on_agent: List[str] = []
    rig, healthy = _blocking_rig(release, on_agent)
    try:
        took = _forbidden_starts(rig, on_agent)
        assert max(took) < 1.0, took
        assert len(on_agent) == 5
    finally:
        release.set()
    rig.provider.shutdown()
    assert healthy.total == 12
    record("live: blocking callback on the worker", inputs=12, exceptions_escaped=0, spans_lost=12 - healthy.total,
           note=f"a forbidden start took at most {max(took) * 1000:.1f} ms meanwhile")


def test_shutdown_keeps_its_deadline_when_a_callback_blocks() -> None:
    release = threading.Event()
    on_agent: List[str] = []
    rig, healthy = _blocking_rig(release, on_agent, shutdown_timeout_millis=1500)
    try:
        _forbidden_starts(rig, on_agent)
        t0 = time.monotonic()
        rig.provider.shutdown()
        shut = time.monotonic() - t0
        assert shut < 4.0, shut
        assert healthy.total == 2 + 10  # every span handed on, the queued ones unevaluated if need be
    finally:
        release.set()
    record("live: shutdown while a callback blocks", inputs=12, exceptions_escaped=0, spans_lost=12 - healthy.total,
           note=f"shutdown returned in {shut:.2f}s (deadline 1.5s)")


class SlowExport(SpanProcessor):
    """Hands spans on slowly, as a synchronous exporter would (on the worker's thread)."""

    def __init__(self) -> None:
        self.count = 0

    def on_end(self, span: Any) -> None:
        time.sleep(0.002)
        self.count += 1


def _queued_bytes(proc: Any) -> int:
    total = 0
    for item in list(getattr(proc._queue, "items", proc._queue)):
        span = item[0] if hasattr(item[0], "attributes") else item[1]
        total += sum(len(v) for v in (span.attributes or {}).values() if isinstance(v, str))
    return total


def test_the_background_queue_is_bounded_in_bytes() -> None:
    export = SlowExport()
    bound = 1 << 20
    rig = LiveRig(load_config(RULES), export=[export], background=True, max_queue_bytes=bound)
    proc = rig.processor
    big = '{"blob": "' + "x" * 16_384 + '"}'
    ended = peak = 0
    t0 = time.monotonic()
    for _ in range(150):
        ended += _episode(rig, ["search", "lookup", "search"], args=big)
        peak = max(peak, _queued_bytes(proc))
    assert proc.force_flush(60_000)
    rig.provider.shutdown()
    record("live: queue bound in bytes (16 KiB arguments)", inputs=ended, exceptions_escaped=0, spans_lost=ended - export.count,
           peak_memory=f"{peak / 1024:.0f} KiB queued", memory_bound="1 MiB", seconds=time.monotonic() - t0)
    assert export.count == ended
    assert peak <= bound


def test_junk_tool_names_cannot_push_a_real_violation_out_of_its_series() -> None:
    exported = CountingProcessor(keep_ids=False)
    rig = LiveRig(load_config(RULES), export=[exported], background=False)
    names = [f"junk{i:05d}_" + "z" * 10_000 for i in range(2_100)]
    for n in names:
        _episode(rig, [n], fail=True)
    _episode(rig, ["delete_database"])
    rig.provider.shutdown()
    points = rig.points("spanassert.violations")
    critical = [(dict(k), v) for k, v in points.items()
                if dict(k).get("spanassert.test.id") == "no-delete" and dict(k).get("spanassert.severity") == "critical"]
    assert [v for _, v in critical] == [1]
    assert critical[0][0]["gen_ai.tool.name"] == "delete_database"
    tools = {dict(k).get("gen_ai.tool.name") for k in points}
    assert len(tools) <= 64 + 2 and "_OTHER" in tools
    assert all(len(t or "") <= 128 for t in tools)
    assert all("spanassert.test.id" in dict(k) and "spanassert.severity" in dict(k) for k in points)
    record("metrics: 2,100 junk tool names of 10 KB", inputs=len(names) + 1, exceptions_escaped=0, spans_lost=0,
           note=f"{len(points)} violation series; the critical one keeps test id and severity")
