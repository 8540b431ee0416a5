"""Never a false green, live: an episode whose trace's root is in another process.

A span of this process whose parent came from another process (an MCP server handling
``tools/call`` under the client's trace, a sub-agent service, an HTTP server span whose parent
came in a ``traceparent`` header) means the trace's root is not here. Replay and serve of this
process's exported spans say "root not seen" (no span without a parent): safety rules still fail
at the offending call, liveness rules are `inconclusive`. The live processor must say the same,
with the same reason, in both evaluation modes, and the same spans exported by the SDK's own
exporter and replayed must give the same verdicts.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from otlp_file_exporter import FileSpanExporter

from livekit import build_config

from spanassert import AssertionSpanProcessor
from spanassert.core.model import CloseReason, Verdict
from spanassert.replay import replay

RULES = build_config([
    {"id": "no-delete", "assertions": [{"type": "trace_must_not_call_tool", "tool": "delete_database"}]},
    {"id": "one-refund", "assertions": [{"type": "trace_max_tool_calls", "tool": "refund", "max": 1}]},
    {"id": "must-search", "assertions": [{"type": "trace_must_call_tool", "tool": "search"}]},
    {"id": "search-first", "assertions": [{"type": "trace_trajectory", "expected": ["search"], "mode": "prefix"}]},
    {"id": "must-lookup", "assertions": [{"type": "trace_must_call_tool", "tool": "lookup"}]},
])
AGENT = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}
TRACE_ID = 0x5EED0000000000000000000000000001


def _remote_context(span_id: int = 0xBEEF) -> Any:
    remote = SpanContext(TRACE_ID, span_id, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    return trace.set_span_in_context(NonRecordingSpan(remote))


def _tool(tracer: Any, name: str, ctx: Any) -> None:
    tracer.start_span(f"execute_tool {name}", context=ctx, attributes={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
        "gen_ai.tool.call.arguments": json.dumps({"q": name})}).end()


def _agent_under_remote_parent(tracer: Any) -> None:
    """A sub-agent service: its agent span's parent is the caller's span in another process."""
    agent = tracer.start_span("invoke_agent support", context=_remote_context(), attributes=AGENT)
    ctx = trace.set_span_in_context(agent)
    for name in ("search", "refund", "refund", "delete_database"):
        _tool(tracer, name, ctx)
    agent.end()


def _http_server_above_agent(tracer: Any) -> None:
    """An HTTP server span (parent from a traceparent header) with the agent span below it: the
    remote parent is on a plain local root the processor's fast path does not give the engine."""
    server = tracer.start_span("POST /agent", context=_remote_context(), attributes={"http.request.method": "POST"})
    sctx = trace.set_span_in_context(server)
    tracer.start_span("auth", context=sctx).end()  # a plain child before the agent starts
    agent = tracer.start_span("invoke_agent support", context=sctx, attributes=AGENT)
    ctx = trace.set_span_in_context(agent)
    for name in ("search", "refund", "refund", "delete_database"):
        _tool(tracer, name, ctx)
    agent.end()
    server.end()


def _mcp_server_calls(tracer: Any) -> None:
    """An MCP server: each `tools/call` span is its own local root under the client's span."""
    for i, name in enumerate(("search", "refund", "refund", "delete_database")):
        _tool(tracer, name, _remote_context(0xBEEF + i))


def _callback_into_this_process(tracer: Any) -> None:
    """The trace starts here (its root is here), leaves the process and comes back: one span of
    it has a remote parent. Replay: root seen, "1 span(s) whose parent is not in the input"."""
    agent = tracer.start_span("invoke_agent support", attributes=AGENT)
    ctx = trace.set_span_in_context(agent)
    _tool(tracer, "search", ctx)
    tid = agent.get_span_context().trace_id
    remote = SpanContext(tid, 0xCA11BAC, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    callback = tracer.start_span("POST /callback", context=trace.set_span_in_context(NonRecordingSpan(remote)))
    _tool(tracer, "refund", ctx)
    callback.end()
    _tool(tracer, "refund", ctx)
    agent.end()


def _run(play: Any, tmp_path: Path, background: Optional[bool]) -> Dict[str, Any]:
    path = tmp_path / f"spans-{background}.jsonl"
    episodes: List[Any] = []
    violations: List[Any] = []
    proc = AssertionSpanProcessor(RULES, export=SimpleSpanProcessor(FileSpanExporter(str(path))),
                                  background=background, on_episode=episodes.append,
                                  on_violation=violations.append, tick_interval=0)
    tp = TracerProvider(resource=Resource.create({"service.name": "agent"}))
    tp.add_span_processor(proc)
    play(tp.get_tracer("t"))
    tp.shutdown()
    return {"episodes": episodes, "violations": violations, "replayed": replay(RULES, [str(path)])}


def _verdicts(result: Any) -> Dict[str, Verdict]:
    return {r.test_id: r.verdict for r in result.results}


def _vsig(violations: Any) -> List[Any]:
    return sorted((v.test_id, v.span_id, v.message) for v in violations)


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
@pytest.mark.parametrize("play", [_agent_under_remote_parent, _http_server_above_agent, _mcp_server_calls],
                         ids=["agent-span", "http-server-span", "mcp-tools-call-spans"])
def test_a_remote_parent_makes_the_live_episode_incomplete_as_replay_does(play: Any, background: bool,
                                                                          tmp_path: Path) -> None:
    out = _run(play, tmp_path, background)
    live = out["episodes"][-1]  # an MCP server's later calls amend the first result
    assert _verdicts(live) == {
        "no-delete": Verdict.FAILED, "one-refund": Verdict.FAILED, "must-search": Verdict.PASSED,
        # Before: `passed` (search came first in what was seen; calls before it are not seen) and
        # `failed` (no lookup in what was seen; it may be in the part not seen).
        "search-first": Verdict.INCONCLUSIVE, "must-lookup": Verdict.INCONCLUSIVE}
    assert live.incomplete == ["root not seen"]
    assert live.close_reason is CloseReason.ROOT_NOT_SEEN
    assert out["violations"], "the safety rules failed at the offending calls"
    assert {v.tool for v in out["violations"]} == {"refund", "delete_database"}
    [replayed] = out["replayed"].episodes
    assert replayed.incomplete == live.incomplete
    assert replayed.close_reason is live.close_reason
    assert sorted(replayed.verdict_signature()) == sorted(live.verdict_signature())
    assert [(r.test_id, r.message) for r in replayed.results] == [(r.test_id, r.message) for r in live.results]
    assert _vsig(out["replayed"].violations) == _vsig(out["violations"])


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
def test_a_span_that_comes_back_from_another_process_makes_the_episode_incomplete(background: bool,
                                                                                   tmp_path: Path) -> None:
    out = _run(_callback_into_this_process, tmp_path, background)
    [live] = out["episodes"]
    [replayed] = out["replayed"].episodes
    assert live.incomplete == replayed.incomplete == ["1 span(s) whose parent is not in the input"]
    assert live.close_reason is replayed.close_reason is CloseReason.ROOT_ENDED
    # The callback span (a plain local root under a remote parent) does not end the episode.
    assert live.root_name == "invoke_agent support"
    assert _verdicts(live) == _verdicts(replayed) == {
        "no-delete": Verdict.INCONCLUSIVE, "one-refund": Verdict.FAILED,  # no-delete: `passed` before
        "must-search": Verdict.PASSED, "search-first": Verdict.INCONCLUSIVE, "must-lookup": Verdict.INCONCLUSIVE}


def test_an_unrelated_server_span_with_a_remote_parent_leaves_nothing_behind(tmp_path: Path) -> None:
    """Web requests with a traceparent and no agent below them: the processor remembers each such
    trace only while its span is open."""
    proc = AssertionSpanProcessor(RULES, export=SimpleSpanProcessor(FileSpanExporter(os.devnull)), tick_interval=0)
    tp = TracerProvider()
    tp.add_span_processor(proc)
    tracer = tp.get_tracer("t")
    for i in range(50):
        s = tracer.start_span("GET /health", context=_remote_context(0x100 + i))
        tracer.start_span("db", context=trace.set_span_in_context(s)).end()
        s.end()
    assert not proc._remote
    tp.shutdown()


def test_past_its_bound_the_processor_marks_episodes_incomplete_rather_than_pass_them(tmp_path: Path) -> None:
    """The traces remembered are bounded. A span with a remote parent that does not fit is counted,
    and while it is open every episode that opens is incomplete: its root may be elsewhere."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    episodes: List[Any] = []
    proc = AssertionSpanProcessor(RULES, export=SimpleSpanProcessor(FileSpanExporter(os.devnull)), tick_interval=0,
                                  on_episode=episodes.append, meter_provider=MeterProvider(metric_readers=[reader]))
    proc._remote.limit = 1
    tp = TracerProvider()
    tp.add_span_processor(proc)
    tracer = tp.get_tracer("t")
    held = tracer.start_span("GET /slow", context=_remote_context(0x1))  # remembered: the one place
    other = SpanContext(0xABC, 0x2, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    lost = tracer.start_span("GET /other", context=trace.set_span_in_context(NonRecordingSpan(other)))
    _agent_under_remote_parent(tracer)  # under the held trace's remote parent
    agent = tracer.start_span("invoke_agent support", attributes=AGENT)  # a trace rooted here
    _tool(tracer, "search", trace.set_span_in_context(agent))
    agent.end()
    lost.end()
    agent = tracer.start_span("invoke_agent support", attributes=AGENT)  # nothing lost is open now
    _tool(tracer, "search", trace.set_span_in_context(agent))
    agent.end()
    held.end()
    tp.shutdown()
    rooted_here = [e for e in episodes if e.trace_id != format(TRACE_ID, "032x")]
    # The first is held as "root not seen" (no span here ends it: it closes at shutdown).
    assert sorted(e.incomplete for e in rooted_here) == [[], ["root not seen"]]
    points = [p for m in reader.get_metrics_data().resource_metrics[0].scope_metrics[0].metrics
              if m.name == "spanassert.overflows" for p in m.data.data_points]
    assert {p.attributes.get("spanassert.kind"): p.value for p in points} == {
        "remote_parent_not_remembered": 1}


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
def test_a_guard_deciding_under_a_remote_parent_opens_an_episode_whose_root_is_elsewhere(
        background: bool, tmp_path: Path) -> None:
    """An MCP server's guard decides a `tools/call` under the client's span (a remote parent)
    before the call's span starts: the episode that decision opens has its root in the client's
    process, so it is "root not seen" and closes when the call's span ends, as replay says."""
    path = tmp_path / "guarded.jsonl"
    episodes: List[Any] = []
    rules = build_config([
        {"id": "no-delete", "action": "block",
         "assertions": [{"type": "trace_must_not_call_tool", "tool": "delete_database"}]},
        {"id": "must-lookup", "assertions": [{"type": "trace_must_call_tool", "tool": "lookup"}]},
    ])
    proc = AssertionSpanProcessor(rules, export=SimpleSpanProcessor(FileSpanExporter(str(path))),
                                  background=background, on_episode=episodes.append, tick_interval=0)
    tp = TracerProvider(resource=Resource.create({"service.name": "mcp-server"}))
    tp.add_span_processor(proc)
    guard = proc.guard(tracer_provider=tp)
    tracer = tp.get_tracer("t")
    from opentelemetry import context as otel_context

    token = otel_context.attach(_remote_context())
    try:
        assert guard.check("lookup", {"q": "x"}, call_id="1").allowed
        span = tracer.start_span("execute_tool lookup", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup", "gen_ai.tool.call.id": "1",
            "gen_ai.tool.call.arguments": json.dumps({"q": "x"})})
    finally:
        otel_context.detach(token)
    span.end()
    proc.force_flush(5_000)  # closes whatever is still open (reason: flush)
    # Closed by the call's span ending (before any flush could close it).
    assert [(e.close_reason, e.incomplete) for e in episodes][:1] == [(CloseReason.ROOT_NOT_SEEN, ["root not seen"])]
    tp.shutdown()
    live = episodes[0]
    [replayed] = replay(rules, [str(path)]).episodes
    assert replayed.incomplete == live.incomplete and replayed.close_reason is live.close_reason
    assert _verdicts(live) == _verdicts(replayed) == {"no-delete": Verdict.INCONCLUSIVE,
                                                      "must-lookup": Verdict.PASSED}
