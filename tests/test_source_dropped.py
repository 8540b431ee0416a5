"""Evidence an SDK's span limits dropped (never a false green).

The OpenTelemetry SDK keeps at most ``OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT`` attributes per span (128 by
default; OpenInference's flattened messages reach it) and evicts the *oldest* one for each new one:
the markers a span was recognised by (``gen_ai.operation.name``, ``gen_ai.tool.name``) go first.
The span then says so (``dropped_attributes``; ``droppedAttributesCount`` in OTLP). A span that says
it lost attributes or events makes its episode's evidence incomplete, live, in replay and in serve:
no rule the lost part could have broken is `passed`. The live processor's annotated copies keep the
counts, so a reader of what it exported sees them too."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from doors import replay_cli, serve_records, verdicts
from spanassert import AssertionSpanProcessor
from spanassert.config import load_config
from spanassert.core.model import CloseReason
from spanassert.core.spans import INCOMPLETE_SOURCE_DROPPED, INCOMPLETE_VALUE_AT_LIMIT, dropped_count
from spanassert.otlp import read_spans
from spanassert.otlp.writers import write_jsonl
from spanassert.replay import Report, replay_many

RULES = """
version: 1
tests:
  - id: steps
    assertions: [{type: trace_max_steps, max: 1}]
  - id: no-delete
    assertions: [{type: trace_must_not_call_tool, tool: delete_database}]
"""


def _limited(background: bool = False, rules: str = RULES, mem: Optional[InMemorySpanExporter] = None,
             wrap: bool = True, **limits: Any) -> Tuple[Any, TracerProvider, AssertionSpanProcessor, List[Any]]:
    """A TracerProvider with these SDK span limits and the live processor, wrapping an exporter to
    ``mem`` (or beside it, ``wrap=False``): (a tracer, the provider, the processor, closed episodes)."""
    episodes: List[Any] = []
    mem = mem if mem is not None else InMemorySpanExporter()
    proc = AssertionSpanProcessor(load_config(rules), export=SimpleSpanProcessor(mem) if wrap else None,
                                  tick_interval=0, background=background, on_episode=episodes.append)
    tp = TracerProvider(span_limits=SpanLimits(**limits))
    tp.add_span_processor(proc)
    if not wrap:  # (the processor's path without a wrapped exporter: no quick path)
        tp.add_span_processor(SimpleSpanProcessor(mem))
    return tp.get_tracer("limits"), tp, proc, episodes


def _agent(tp: TracerProvider) -> None:
    """Two model steps and a delete_database call; each span gets more attributes after it started
    than the limit keeps, so its markers (set at start) are evicted by its end."""
    t = tp.get_tracer("limits")
    with t.start_as_current_span("invoke_agent support", attributes={"gen_ai.operation.name": "invoke_agent"}):
        for _ in range(2):
            with t.start_as_current_span("llm", attributes={"gen_ai.operation.name": "chat"}) as step:
                for k in range(6):
                    step.set_attribute(f"llm.input_messages.{k}.message.content", "hi")
        with t.start_as_current_span("tool", attributes={"gen_ai.operation.name": "execute_tool",
                                                         "gen_ai.tool.name": "delete_database"}) as call:
            call.set_attribute("gen_ai.tool.call.arguments", json.dumps({"all": True}))
            for k in range(6):
                call.set_attribute(f"app.detail.{k}", "x")


def _live(limit: int) -> Dict[str, Any]:
    mem = InMemorySpanExporter()
    _, tp, _, episodes = _limited(mem=mem, max_span_attributes=limit)
    _agent(tp)
    tp.shutdown()
    last = {ep.key: ep for ep in episodes}
    assert len(last) == 1
    ep = next(iter(last.values()))
    return {"verdicts": {r.test_id: r.verdict.value for r in ep.results}, "incomplete": ep.incomplete,
            "exported": list(mem.get_finished_spans())}


def test_spans_whose_markers_the_sdk_evicted_leave_no_pass_live_replayed_or_served(tmp_path: Path) -> None:
    live = _live(limit=4)
    # Live saw every marker at the spans' starts: both rules fail where they broke.
    assert live["verdicts"] == {"steps": "failed", "no-delete": "failed"}, live
    assert INCOMPLETE_SOURCE_DROPPED in live["incomplete"]
    # What live exported says what the SDK dropped, also on the copies carrying violation events
    # (before: the copies said 0, so nothing downstream could know).
    dropped = {s.name: s.dropped_attributes for s in live["exported"]}
    assert dropped["tool"] == 5 and dropped["llm"] == 3, dropped
    path = tmp_path / "exported.jsonl"
    write_jsonl(live["exported"], str(path))
    assert '"droppedAttributesCount":5' in path.read_text()

    # Replay of the exported file: the evicted markers hide the second step and the call.
    # Before: steps `passed` (1 step seen, max 1) and no-delete `passed` (no call seen).
    config = load_config(RULES)
    report = Report(config)
    replay_many([config], read_spans([str(path)], on_issue=report.issues.append), reports=[report])
    got = {r.test_id: r.verdict.value for ep in report.episodes for r in ep.results}
    assert got == {"steps": "inconclusive", "no-delete": "inconclusive"}, got
    assert report.episodes[0].incomplete == [INCOMPLETE_SOURCE_DROPPED]

    # The CLI says so and, with --fail-on-inconclusive, fails the run.
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    ran = replay_cli(rules, path)
    assert ran.returncode == 0, ran.stderr
    assert f"[incomplete: {INCOMPLETE_SOURCE_DROPPED}]" in ran.stdout
    assert "0 passed, 0 failed, 2 inconclusive" in ran.stdout, ran.stdout
    ran = replay_cli(rules, path, "--fail-on-inconclusive")
    assert ran.returncode == 1, (ran.stdout, ran.stderr)

    # Serve: the same spans through the receiver (intake, trace buffer, engine thread).
    served = verdicts(serve_records(config, read_spans([str(path)])))
    assert served == got, served


def test_live_marks_the_episode_when_the_evicted_span_was_plain_from_its_start() -> None:
    """A span created with more attributes than the limit loses its markers before the processor
    sees it: live takes it for a plain span, as replay does; its dropped count still marks the
    episode (live = replay)."""
    t, tp, _, episodes = _limited(max_span_attributes=2)
    with t.start_as_current_span("invoke_agent support", attributes={"gen_ai.operation.name": "invoke_agent"}):
        attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "delete_database", "a": 1, "b": 2}
        t.start_span("tool", attributes=attrs).end()
    tp.shutdown()
    assert len(episodes) == 1
    # Before: no-delete `passed`, steps `passed` (the call was never seen, nothing said so).
    assert {r.test_id: r.verdict.value for r in episodes[0].results} == {
        "steps": "inconclusive", "no-delete": "inconclusive"}
    assert episodes[0].incomplete == [INCOMPLETE_SOURCE_DROPPED]


def _line(**extra: Any) -> str:
    span = {"traceId": "ab" * 16, "spanId": "cd" * 8, "name": "invoke_agent a", "kind": 1,
            "startTimeUnixNano": "1", "endTimeUnixNano": "2",
            "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}}]}
    span.update(extra)
    if "start_time_unix_nano" in extra:
        del span["startTimeUnixNano"], span["endTimeUnixNano"]
    return json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": [span]}]}]})


@pytest.mark.parametrize("typed", ["never", "always"])
@pytest.mark.parametrize("extra,dropped", [
    ({}, 0),
    ({"droppedAttributesCount": 0, "droppedEventsCount": 0}, 0),
    ({"droppedAttributesCount": 3}, 3),
    ({"droppedEventsCount": 2, "droppedAttributesCount": "4"}, 6),
    ({"dropped_attributes_count": 5, "start_time_unix_nano": "1", "end_time_unix_nano": "2"}, 5),  # proto names
    ({"droppedAttributesCount": -1}, 1),  # hostile counts: something was dropped, never nothing
    ({"droppedAttributesCount": "x"}, 1),
    ({"droppedAttributesCount": 1.5}, 1),
    ({"droppedEventsCount": [1]}, 1),
    ({"droppedAttributesCount": True}, 1),
    # An event's own attributes over the SDK's limit (Strands and GenAI events carry content there).
    ({"events": [{"name": "gen_ai.choice", "timeUnixNano": "1", "droppedAttributesCount": 2}]}, 2),
    ({"events": [{"name": "e", "timeUnixNano": "1"}, {"name": "f", "timeUnixNano": "1",
                                                       "droppedAttributesCount": "x"}]}, 1),
    # Falsy hostile counts: the fast JSON reader took them as none where the others read one.
    ({"droppedAttributesCount": False}, 1),
    ({"droppedAttributesCount": ""}, 1),
    ({"droppedAttributesCount": 0.0}, 1),
    ({"droppedEventsCount": []}, 1),
    ({"droppedAttributesCount": {}}, 1),
    ({"droppedEventsCount": "0"}, 0),
])
def test_every_json_reader_keeps_a_span_s_dropped_counts(tmp_path: Path, monkeypatch: Any, typed: str,
                                                         extra: Dict[str, Any], dropped: int) -> None:
    monkeypatch.setenv("SPANASSERT_TYPED_JSON", typed)
    path = tmp_path / "one.jsonl"
    path.write_text(_line(**extra) + "\n")
    issues: List[Any] = []
    records = list(read_spans([str(path)], on_issue=issues.append))
    if records:
        assert [r.dropped for r in records] == [dropped], (extra, issues)
    else:  # a reader may refuse a hostile count outright: then the span is an issue, never clean
        assert issues and dropped, (extra, issues)


def test_protobuf_readers_keep_the_counts_and_serve_forwards_them() -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from spanassert.otlp.proto_decode import records_from_proto
    from spanassert.otlp.proto_encode import export_request

    req = ExportTraceServiceRequest()
    span = req.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id = bytes.fromhex("ab" * 16)
    span.span_id = bytes.fromhex("cd" * 8)
    span.name = "tool"
    span.dropped_attributes_count = 7
    span.dropped_events_count = 1
    event = span.events.add()
    event.name = "gen_ai.choice"
    event.dropped_attributes_count = 2
    records = records_from_proto(req, "req")
    assert [r.dropped for r in records] == [10]
    # A JSON request's spans are forwarded rebuilt from their records: the loss goes on with them.
    fwd = export_request([(records[0], None, None)])
    assert fwd.resource_spans[0].scope_spans[0].spans[0].dropped_attributes_count == 10


def test_dropped_count_reads_hostile_counts_as_something_dropped() -> None:
    assert dropped_count(None, 0) == 0
    assert dropped_count(2, "3") == 5
    assert dropped_count(-4) == 1 and dropped_count("9" * 40) == 1 and dropped_count(False) == 1
    assert dropped_count(float("nan")) == 1 and dropped_count({}) == 1


RESULT_RULES = """
version: 1
tests:
  - id: no-error
    assertions: [{type: trace_tool_result, tool: lookup, assert: ['body not contains "ERROR"']}]
  - id: no-drop
    assertions: [{type: trace_must_not_call_tool, tool: lookup, args_match: {q: DROP}}]
"""


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
def test_a_value_the_sdk_cut_to_its_length_limit_leaves_no_pass_live(background: bool) -> None:
    """OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT cuts text values without saying so: a result whose
    "ERROR" lay past the limit read as a clean one (before: `no-error` passed)."""

    def run(limit: Any) -> Any:
        t, tp, _, episodes = _limited(background, RESULT_RULES, max_attribute_length=limit)
        with t.start_as_current_span("invoke_agent support", attributes={"gen_ai.operation.name": "invoke_agent"}):
            with t.start_as_current_span("execute_tool lookup", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
                    "gen_ai.tool.call.arguments": json.dumps({"q": "DROP"})}) as call:
                call.set_attribute("gen_ai.tool.call.result", "fine " * 10 + "ERROR: table dropped")
        tp.shutdown()
        assert len(episodes) == 1
        return {r.test_id: r.verdict.value for r in episodes[0].results}, episodes[0].incomplete

    verdicts, incomplete = run(None)
    assert verdicts == {"no-error": "failed", "no-drop": "failed"} and incomplete == []
    verdicts, incomplete = run(30)
    assert verdicts == {"no-error": "inconclusive", "no-drop": "failed"}, verdicts
    assert incomplete == [INCOMPLETE_VALUE_AT_LIMIT]


def test_what_an_assembled_trace_misses_is_kept_until_its_episode_opens_and_bounded() -> None:
    """replay/serve note what a trace misses (a parent not in it, a span that lost attributes) for
    the episode its spans open. A first part with no GenAI span (its markers evicted) still marks
    the episode a later part opens; and the notes of traces that never open one are bounded (before:
    one note per such trace, kept for ever: a long-running serve grew with every plain trace that
    had a missing parent)."""
    from spanassert.core.assembly import feed_trace
    from spanassert.core.engine import Engine
    from spanassert.core.episode import Sink
    from spanassert.core.model import SpanRecord

    closed: List[Any] = []

    class Closed(Sink):
        def episode_closed(self, result: Any) -> None:
            closed.append(result)

    engine = Engine(load_config(RULES), sink=Closed())
    tid = "ab" * 16
    feed_trace(engine, [SpanRecord(trace_id=tid, span_id="1" * 16, name="agent", start_ns=1, end_ns=9, dropped=4)])
    feed_trace(engine, [SpanRecord(trace_id=tid, span_id="2" * 16, parent_span_id="1" * 16, name="tool",
                                   start_ns=2, end_ns=3, attributes={"gen_ai.operation.name": "execute_tool",
                                                                     "gen_ai.tool.name": "lookup"})])
    engine.close_all(CloseReason.END_OF_INPUT)
    assert len(closed) == 1 and INCOMPLETE_SOURCE_DROPPED in closed[0].incomplete, [c.incomplete for c in closed]
    bound = engine.max_open + engine.late_window + 1024
    for i in range(bound + 500):
        t = format(i + 1, "032x")
        feed_trace(engine, [SpanRecord(trace_id=t, span_id="1" * 16, name="GET /", start_ns=1, end_ns=2),
                            SpanRecord(trace_id=t, span_id="2" * 16, parent_span_id="3" * 16, name="db",
                                       start_ns=1, end_ns=2, dropped=i % 2)])
    assert len(engine._notes) <= bound


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
def test_an_event_whose_attributes_the_sdk_dropped_marks_the_episode_live(background: bool) -> None:
    """OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT: an event of a tool span lost attributes (where some
    conventions put a call's content): the episode is incomplete live (before: complete, passed)."""
    t, tp, _, episodes = _limited(background, max_event_attributes=1)
    with t.start_as_current_span("invoke_agent support", attributes={"gen_ai.operation.name": "invoke_agent"}):
        with t.start_as_current_span("execute_tool lookup", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"}) as call:
            call.add_event("gen_ai.tool.message", {"role": "tool", "content": "rm -rf /", "id": "c1"})
    tp.shutdown()
    assert len(episodes) == 1
    assert episodes[0].incomplete == [INCOMPLETE_SOURCE_DROPPED]
    assert {r.test_id: r.verdict.value for r in episodes[0].results} == {"steps": "inconclusive",
                                                                        "no-delete": "inconclusive"}


@pytest.mark.parametrize("background,export", [(False, True), (True, True), (False, False)])
def test_a_span_that_lost_its_markers_before_the_episode_opened_leaves_no_pass_live(
        tmp_path: Path, background: bool, export: bool) -> None:
    """A delete_database call created with more attributes than the limit keeps is plain from its
    start; it ends under a plain HTTP root before the agent span opens the trace's episode. Replay
    and serve mark the whole assembled trace; live marked nothing (no episode to mark when the span
    ended): before, live passed no-delete and steps where replay of the same spans said inconclusive."""
    mem = InMemorySpanExporter()
    t, tp, _, episodes = _limited(background, mem=mem, wrap=export, max_span_attributes=2)
    with t.start_as_current_span("GET /support"):
        attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "delete_database", "a": 1, "b": 2}
        t.start_span("tool", attributes=attrs).end()
        with t.start_as_current_span("invoke_agent support", attributes={"gen_ai.operation.name": "invoke_agent"}):
            pass
    tp.shutdown()
    assert len(episodes) == 1
    live = {r.test_id: r.verdict.value for r in episodes[0].results}
    assert live == {"steps": "inconclusive", "no-delete": "inconclusive"}, live
    assert episodes[0].incomplete == [INCOMPLETE_SOURCE_DROPPED]

    path = tmp_path / "exported.jsonl"
    write_jsonl(list(mem.get_finished_spans()), str(path))
    config = load_config(RULES)
    report = Report(config)
    replay_many([config], read_spans([str(path)], on_issue=report.issues.append), reports=[report])
    assert {r.test_id: r.verdict.value for ep in report.episodes for r in ep.results} == live
    assert report.episodes[0].incomplete == episodes[0].incomplete


def test_a_lossy_plain_trace_that_opens_no_episode_leaves_a_bounded_note_live() -> None:
    """The note a lossy plain span leaves for an episode that may open later is bounded like
    replay's (the oldest goes): plain traces that never open one do not make memory grow."""
    t, tp, proc, _ = _limited(max_span_attributes=1)
    engine = proc.engine
    bound = engine.max_open + engine.late_window + 1024
    for _ in range(bound + 200):
        with t.start_as_current_span("GET /x"):
            t.start_span("db", attributes={"a": 1, "b": 2}).end()
    assert len(engine._notes) <= bound + 1
    tp.shutdown()


@pytest.mark.parametrize("background", [False, True])
@pytest.mark.parametrize("followed", [True, False], ids=["in-episode", "before-episode"])
@pytest.mark.parametrize("limits", [{"max_events": 1}, {"max_event_attributes": 1}], ids=["events", "event-attributes"])
def test_a_plain_span_that_lost_events_marks_its_episode_live_as_replay_does(
        tmp_path: Path, background: bool, followed: bool, limits: Dict[str, int]) -> None:
    """A plain span (an HTTP call) that lost events to OTEL_SPAN_EVENT_COUNT_LIMIT: replay and serve
    read droppedEventsCount and mark the episode; the live quick path read the attribute count
    alone (sdk.plain_dropped), so live passed where replay of the same spans said inconclusive
    (review9b). In the episode (a plain child) and before it opened (under a plain root)."""
    mem = InMemorySpanExporter()
    t, tp, _, episodes = _limited(background, mem=mem, **limits)
    with t.start_as_current_span("GET /support"):
        if not followed:
            with t.start_as_current_span("http call") as s:
                s.add_event("e1", {"a": 1, "b": 2})
                s.add_event("e2")
        with t.start_as_current_span("invoke_agent support", attributes={"gen_ai.operation.name": "invoke_agent"}):
            if followed:
                with t.start_as_current_span("http call") as s:
                    s.add_event("e1", {"a": 1, "b": 2})
                    s.add_event("e2")
    tp.shutdown()
    assert len(episodes) == 1
    live = {r.test_id: r.verdict.value for r in episodes[0].results}
    assert episodes[0].incomplete == [INCOMPLETE_SOURCE_DROPPED], live

    path = tmp_path / "exported.jsonl"
    write_jsonl(list(mem.get_finished_spans()), str(path))
    config = load_config(RULES)
    report = Report(config)
    replay_many([config], read_spans([str(path)], on_issue=report.issues.append), reports=[report])
    assert {r.test_id: r.verdict.value for ep in report.episodes for r in ep.results} == live
    assert report.episodes[0].incomplete == episodes[0].incomplete


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
def test_live_counts_a_lossy_trace_that_no_episode_follows(background: bool) -> None:
    """Live has no run to mark when every GenAI marker of an agent run was evicted (no episode
    opens; replay and serve then pass nothing, review10): the processor counts such a trace once,
    ``spanassert.overflows{spanassert.kind=trace_dropped_before_episode}``. Before: nothing said it
    was there. A lossy plain span inside an episode is no such trace (the episode is marked)."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from spanassert.live.processor import OVERFLOW_DROPPED_BEFORE_EPISODE

    def run(plays: List[Any]) -> Dict[Any, int]:
        reader = InMemoryMetricReader()
        proc = AssertionSpanProcessor(load_config(RULES), export=SimpleSpanProcessor(InMemorySpanExporter()),
                                      tick_interval=0, background=background,
                                      meter_provider=MeterProvider(metric_readers=[reader]))
        tp = TracerProvider(span_limits=SpanLimits(max_span_attributes=2))
        tp.add_span_processor(proc)
        t = tp.get_tracer("limits")
        for play in plays:
            play(t)
        tp.shutdown()
        data = reader.get_metrics_data()
        return {p.attributes.get("spanassert.kind"): p.value
                for rm in (data.resource_metrics if data else []) for sm in rm.scope_metrics for m in sm.metrics
                if m.name == "spanassert.overflows" for p in m.data.data_points}

    extra = {"app.a": 1, "app.b": 2}

    def evicted(t: Any) -> None:  # every marker evicted: no episode opens
        with t.start_as_current_span("run", attributes={"gen_ai.operation.name": "invoke_agent", **extra}):
            for tool in ("lookup_order", "delete_database"):
                t.start_span("call", attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                                                 **extra}).end()

    def lossy_child_in_episode(t: Any) -> None:  # the agent's markers fit; a plain child loses some
        with t.start_as_current_span("run", attributes={"gen_ai.operation.name": "invoke_agent"}):
            t.start_span("db", attributes={"a": 1, "b": 2, "c": 3}).end()

    assert run([evicted, evicted]) == {OVERFLOW_DROPPED_BEFORE_EPISODE: 2}
    assert OVERFLOW_DROPPED_BEFORE_EPISODE not in run([lossy_child_in_episode])
