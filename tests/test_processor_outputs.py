"""Where violations go besides span events: OTel log records, Python logging, callbacks, no-export
mode, and the redaction of recorded values."""
from __future__ import annotations

import json
import logging

from opentelemetry import trace
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from livekit import Rig, build_config

from spanassert import AssertionSpanProcessor

SECRET = "sk-live-THIS-IS-A-SECRET-4242"

RULES = [
    {"id": "no-delete", "severity": "critical",
     "assertions": [{"type": "trace_must_not_call_tool", "tool": "delete_database"}]},
    {"id": "small-refunds", "assertions": [{"type": "trace_args_valid", "tool": "refund", "schema": {
        "type": "object", "properties": {"amount": {"type": "number", "maximum": 100}}}}]},
]


def _agent(tracer, calls):
    with tracer.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}):
        for name, args in calls:
            with tracer.start_as_current_span(f"execute_tool {name}", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                    "gen_ai.tool.call.arguments": json.dumps(args),
                    "gen_ai.tool.call.result": json.dumps({"token": SECRET})}):
                pass


def test_violations_become_otel_log_records_correlated_with_the_offending_span():
    logs = InMemoryLogRecordExporter()
    lp = LoggerProvider()
    lp.add_log_record_processor(SimpleLogRecordProcessor(logs))
    rig = Rig(build_config(RULES), logger_provider=lp)
    _agent(rig.tracer, [("delete_database", {"confirm": SECRET})])
    records = logs.get_finished_logs()
    assert len(records) == 1
    rec = records[0].log_record
    assert rec.attributes["gen_ai.evaluation.name"] == "no-delete"
    assert rec.attributes["spanassert.severity"] == "critical"
    assert rec.severity_text == "CRITICAL"
    offending = [s for s in rig.exporter.get_finished_spans() if s.name == "execute_tool delete_database"][0]
    assert rec.trace_id == offending.context.trace_id
    assert rec.span_id == offending.context.span_id
    assert getattr(rec, "event_name", "gen_ai.evaluation.result") == "gen_ai.evaluation.result"


def test_without_a_logger_provider_violations_go_to_python_logging(caplog):
    rig = Rig(build_config(RULES))
    with caplog.at_level(logging.WARNING, logger="spanassert"):
        _agent(rig.tracer, [("delete_database", {})])
    msgs = [r.getMessage() for r in caplog.records if r.name == "spanassert"]
    assert any("no-delete" in m and "delete_database" in m for m in msgs)


def test_secret_arguments_and_results_never_leave_the_process_by_default(caplog):
    logs = InMemoryLogRecordExporter()
    lp = LoggerProvider()
    lp.add_log_record_processor(SimpleLogRecordProcessor(logs))
    seen = []
    rig = Rig(build_config(RULES), logger_provider=lp, on_violation=seen.append)
    with caplog.at_level(logging.DEBUG):
        _agent(rig.tracer, [("refund", {"amount": 5000, "note": SECRET}), ("delete_database", {"k": SECRET})])
    assert len(seen) == 2
    texts = [json.dumps(v.to_dict()) for v in seen]
    texts += [json.dumps(dict(r.log_record.attributes)) + str(r.log_record.body) for r in logs.get_finished_logs()]
    texts += [r.getMessage() for r in caplog.records]
    for s in rig.exporter.get_finished_spans():
        texts += [json.dumps(dict(e.attributes)) for e in s.events if e.name == "gen_ai.evaluation.result"]
    texts += [repr(rig.metric(n)) for n in ("spanassert.violations", "spanassert.assertion.results")]
    assert texts and not [t for t in texts if SECRET in t or "5000" in t]


def test_evidence_opt_in_shows_the_value_truncated():
    rules = [{"id": "small-refunds", "assertions": [{"type": "trace_args_valid", "tool": "refund", "evidence": "arguments",
                                                     "schema": {"type": "object", "properties": {
                                                         "amount": {"type": "number", "maximum": 100}}}}]}]
    seen = []
    rig = Rig(build_config(rules), on_violation=seen.append)
    _agent(rig.tracer, [("refund", {"amount": 5000, "note": "x" * 5000})])
    assert len(seen) == 1
    assert "5000" in seen[0].message
    assert len(seen[0].message) < 1000


def test_without_a_wrapped_exporter_the_event_goes_on_the_still_open_offending_span():
    mem = InMemorySpanExporter()
    tp = TracerProvider()
    proc = AssertionSpanProcessor(build_config(RULES), tick_interval=0)
    tp.add_span_processor(proc)
    tp.add_span_processor(SimpleSpanProcessor(mem))  # the user's own exporting processor
    _agent(tp.get_tracer("t"), [("delete_database", {})])
    spans = {s.name: s for s in mem.get_finished_spans()}
    events = [e for e in spans["execute_tool delete_database"].events if e.name == "gen_ai.evaluation.result"]
    assert len(events) == 1 and events[0].attributes["gen_ai.evaluation.name"] == "no-delete"


def test_without_a_wrapped_exporter_content_violations_go_on_the_open_root():
    mem = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(AssertionSpanProcessor(build_config(RULES), tick_interval=0))
    tp.add_span_processor(SimpleSpanProcessor(mem))
    t = tp.get_tracer("t")
    with t.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}):
        with t.start_as_current_span("execute_tool refund", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "refund"}) as call:
            # Recorded at the end (as OpenInference does): judged when the tool span has ended.
            call.set_attribute("gen_ai.tool.call.arguments", json.dumps({"amount": 500}))
    root = [s for s in mem.get_finished_spans() if s.name == "invoke_agent a"][0]
    events = [e for e in root.events if e.name == "gen_ai.evaluation.result"]
    assert [e.attributes["gen_ai.evaluation.name"] for e in events] == ["small-refunds"]
    assert events[0].attributes["spanassert.span_id"] != format(root.context.span_id, "016x")


def test_without_a_wrapped_exporter_arguments_known_at_start_are_judged_on_the_open_tool_span():
    mem = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(AssertionSpanProcessor(build_config(RULES), tick_interval=0))
    tp.add_span_processor(SimpleSpanProcessor(mem))
    _agent(tp.get_tracer("t"), [("refund", {"amount": 500})])
    spans = {s.name: s for s in mem.get_finished_spans()}
    on_tool = [e.attributes["gen_ai.evaluation.name"] for e in spans["execute_tool refund"].events
               if e.name == "gen_ai.evaluation.result"]
    assert on_tool == ["small-refunds"]
    assert not [e for e in spans["invoke_agent a"].events if e.name == "gen_ai.evaluation.result"]


def test_shadow_rules_are_counted_but_never_alerted():
    rules = [dict(RULES[0], mode="shadow")]
    seen = []
    rig = Rig(build_config(rules), on_violation=seen.append)
    _agent(rig.tracer, [("delete_database", {})])
    assert seen == []
    assert rig.total("spanassert.violations") == 0
    assert rig.total("spanassert.shadow_violations") == 1
    assert not [e for s in rig.exporter.get_finished_spans() for e in s.events if e.name == "gen_ai.evaluation.result"]


def test_a_raising_callback_is_counted_not_raised():
    def boom(v):
        raise RuntimeError("pager down")

    rig = Rig(build_config(RULES), on_violation=boom)
    _agent(rig.tracer, [("delete_database", {})])
    assert rig.total("spanassert.internal_errors") == 1
    assert len(rig.exporter.get_finished_spans()) == 2


def test_a_callback_raising_systemexit_is_counted_and_keyboardinterrupt_on_the_main_thread_passes():
    import pytest

    def leave(v):
        raise SystemExit(3)

    rig = Rig(build_config(RULES), on_violation=leave)
    _agent(rig.tracer, [("delete_database", {})])  # SystemExit from the callback never reaches the app
    assert rig.total("spanassert.internal_errors") == 1
    assert len(rig.exporter.get_finished_spans()) == 2

    def interrupt(v):
        raise KeyboardInterrupt

    rig = Rig(build_config(RULES), on_violation=interrupt)
    t = rig.tracer
    root = t.start_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"})
    ctx = trace.set_span_in_context(root)
    with pytest.raises(KeyboardInterrupt):  # the user pressed Ctrl-C: the main thread gets it
        t.start_span("execute_tool delete_database", context=ctx, attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "delete_database"})
    assert rig.total("spanassert.internal_errors") == 1
    root.end()
    assert len(rig.exporter.get_finished_spans()) == 1  # the root still went on


def test_no_callback_runs_under_the_engine_lock_amendments_included():
    """Issue 14 item 9: on_violation and on_episode (a late span's amendment too) are called after
    the engine lock is released, in both evaluation modes."""
    for background in (False, True):
        calls = []
        holder = []

        def record(kind):
            return lambda x: calls.append((kind, holder[0]._lock._is_owned(), getattr(x, "amendment", False)))

        mem = InMemorySpanExporter()
        from spanassert import AssertionSpanProcessor

        proc = AssertionSpanProcessor(build_config(RULES), export=SimpleSpanProcessor(mem), tick_interval=0,
                                      background=background, on_violation=record("violation"),
                                      on_episode=record("episode"))
        holder.append(proc)
        tp = TracerProvider()
        tp.add_span_processor(proc)
        t = tp.get_tracer("t")
        root = t.start_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"})
        ctx = trace.set_span_in_context(root)
        t.start_span("execute_tool delete_database", context=ctx, attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "delete_database"}).end()
        root.end()
        late = t.start_span("execute_tool refund", context=ctx, attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "refund",
            "gen_ai.tool.call.arguments": json.dumps({"amount": 900})})
        late.end()
        assert proc.force_flush(30_000)
        tp.shutdown()
        assert calls and not any(owned for _, owned, _ in calls), calls
        kinds = [k for k, _, _ in calls]
        assert kinds.count("violation") >= 2 and "episode" in kinds
        assert any(amended for _, _, amended in calls)  # the late refund amended the closed episode
