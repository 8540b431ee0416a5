"""Same spans → same verdicts and violations, live (the processor in the SDK), replayed (the
exported OTLP JSON Lines file read back) and served (the same spans handed to serve's receiver in
process, as its OTLP endpoints would). A property test over random agent episodes."""
from __future__ import annotations

import itertools
import json
import os
import tempfile

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from otlp_file_exporter import FileSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import NonRecordingSpan, SpanContext, Status, StatusCode, TraceFlags

from doors import serve_records
from livekit import build_config

from spanassert import AssertionSpanProcessor
from spanassert.replay import replay

TOOLS = ["lookup_order", "refund", "search", "delete_database", "send_email"]

RULES = build_config([
    {"id": "no-delete", "severity": "critical",
     "assertions": [{"type": "trace_must_not_call_tool", "tool": "delete_database"}]},
    {"id": "no-external-mail", "assertions": [{"type": "trace_must_not_call_tool", "tool": "send_email",
                                               "args_match": {"to": "@evil\\.com$"}}]},
    {"id": "lookup", "assertions": [{"type": "trace_must_call_tool", "tool": "lookup_order", "min_calls": 1}]},
    {"id": "refund-after-lookup", "assertions": [
        {"type": "trace_tool_sequence", "sequence": ["lookup_order", "refund"], "allow_other_tools": True}]},
    {"id": "exact", "assertions": [
        {"type": "trace_tool_sequence", "sequence": ["lookup_order", "refund"], "allow_other_tools": False}]},
    {"id": "steps", "assertions": [{"type": "trace_max_steps", "max": 4}]},
    {"id": "calls", "assertions": [{"type": "trace_max_tool_calls", "max": 2, "tool": "search"}]},
    {"id": "ok", "assertions": [{"type": "trace_tool_status", "must_succeed": True}]},
    {"id": "args", "assertions": [{"type": "trace_args_valid", "tool": "refund", "schema": {
        "type": "object", "properties": {"amount": {"type": "number", "maximum": 100}}, "required": ["amount"]}}]},
    {"id": "traj", "assertions": [{"type": "trace_trajectory", "expected": ["lookup_order", "refund"],
                                   "mode": "contains"}]},
    {"id": "prefix", "assertions": [{"type": "trace_trajectory", "expected": ["lookup_order"], "mode": "prefix"}]},
    {"id": "result", "assertions": [{"type": "trace_tool_result", "tool": "lookup_order",
                                     "assert": ["json.status is string", "json.items length >= 1"]}]},
    {"id": "only", "assertions": [{"type": "trace_only_tools", "tools": ["lookup_order", "refund", "search"],
                                   "tool_pattern": "send_.*"}]},
    {"id": "loops", "assertions": [{"type": "trace_no_repeat", "max": 1, "cycle_length": 3}]},
    {"id": "loops-window", "assertions": [{"type": "trace_no_repeat", "max": 1, "window": 3, "cycle_length": 0}]},
    {"id": "flow", "assertions": [{"type": "trace_no_flow", "from": {"tool": "lookup_order", "path": "contact"},
                                   "to": {}, "min_length": 8}]},
    {"id": "pii", "assertions": [{"type": "trace_no_sensitive_data", "detectors": ["credit_card", "secrets"],
                                  "tools": ["refund", "send_email"]}]},
    {"id": "pii-results", "assertions": [{"type": "trace_no_sensitive_data", "detectors": ["email"], "in": "results"}]},
    {"id": "tokens", "assertions": [{"type": "trace_max_tokens", "max": 600}]},
    {"id": "cost", "assertions": [{"type": "trace_max_cost", "max": 0.002, "prices": {"gpt-4o": {"input": 2.5, "output": 10}}}]},
    # Span time here is wall time (other tests replay these episodes in new runs): a bound no run
    # reaches; tests/test_assertions_budgets.py sets timestamps and crosses it in all three doors.
    {"id": "duration", "assertions": [{"type": "trace_max_duration", "max": "1h"}]},
    {"id": "final", "assertions": [{"type": "trace_final_tool", "tool": "refund"}]},
    {"id": "suffix", "assertions": [{"type": "trace_trajectory", "expected": ["lookup_order", "refund"], "mode": "suffix"}]},
    {"id": "pii-match", "assertions": [{"type": "trace_must_not_call_tool", "tool": "refund",
                                        "args_match": {"note": {"detector": "credit_card"}}}]},
])

call = st.fixed_dictionaries({
    "tool": st.sampled_from(TOOLS),
    "amount": st.one_of(st.none(), st.integers(min_value=0, max_value=200)),
    "to": st.sampled_from(["a@ok.org", "x@evil.com"]),
    "error": st.booleans(),
    "items": st.integers(min_value=0, max_value=2),
    "nested": st.booleans(),
    "model_step": st.booleans(),
    "usage": st.sampled_from([None, (100, 20, "gpt-4o"), (400, 50, "gpt-4o"), (10, 10, "o3")]),
    "note": st.sampled_from([None, "thanks", "card 4111 1111 1111 1111", "4111111111111112"]),
    # Plain (non-GenAI) spans: a sibling HTTP call before the call, the call made inside one, and
    # a call whose span only becomes a tool span after it started.
    "plain": st.sampled_from([None, "sibling", "inside", "marked_late"]),
})
episode = st.lists(call, min_size=0, max_size=7)
# Where an episode's trace starts: here (its agent span is the root), under a remote parent (a
# sub-agent service: the agent span's parent is in another process), or under a plain local root
# whose parent is remote (an HTTP server span, its parent from a traceparent header). With a
# remote parent the trace's root is not here: every door says "root not seen".
TOPS = [None, "remote", "remote_http"]
tops = st.lists(st.sampled_from(TOPS), min_size=4, max_size=4)
_remote_ids = itertools.count(0x7E000001)


def _top_context(tracer, top):
    """The context the episode's agent span starts in, and a plain span to end after it."""
    if top is None:
        return None, None
    n = next(_remote_ids)
    remote = SpanContext((n << 64) | n, n, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    ctx = trace.set_span_in_context(NonRecordingSpan(remote))
    if top == "remote":
        return ctx, None
    server = tracer.start_span("POST /agent", context=ctx, attributes={"http.request.method": "POST"})
    return trace.set_span_in_context(server), server


def run(tracer, episodes, tops=(None,) * 4):
    for ep, top in zip(episodes, itertools.chain(tops, itertools.repeat(None))):
        ctx, server = _top_context(tracer, top)
        with tracer.start_as_current_span("invoke_agent support", context=ctx, attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}):
            for c in ep:
                if c["model_step"]:
                    usage = {}
                    if c["usage"] is not None:
                        usage = {"gen_ai.usage.input_tokens": c["usage"][0], "gen_ai.usage.output_tokens": c["usage"][1],
                                 "gen_ai.response.model": c["usage"][2]}
                    with tracer.start_as_current_span("chat gpt", attributes={"gen_ai.operation.name": "chat", **usage}):
                        pass
                plain = c.get("plain")
                if plain == "sibling":
                    with tracer.start_as_current_span("POST /v1/chat/completions", attributes={"http.method": "POST"}):
                        with tracer.start_as_current_span("db.query"):
                            pass
                parent = tracer.start_span("invoke_agent sub", attributes={
                    "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "sub"}) if c["nested"] else None
                ctx = trace.set_span_in_context(parent) if parent is not None else None
                wrapper = None
                if plain == "inside":
                    wrapper = tracer.start_span("GET /orders", context=ctx, attributes={"http.method": "GET"})
                    ctx = trace.set_span_in_context(wrapper)
                args = {"to": c["to"]}
                if c["amount"] is not None:
                    args["amount"] = c["amount"]
                if c["note"] is not None:
                    args["note"] = c["note"]
                result = {"status": "ok", "items": [1] * c["items"]}
                if c["tool"] == "lookup_order":
                    result["contact"] = c["to"]
                if plain == "marked_late":
                    s = tracer.start_span("work", context=ctx)
                    s.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": c["tool"]})
                else:
                    s = tracer.start_span(f"execute_tool {c['tool']}", context=ctx, attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": c["tool"]})
                s.set_attribute("gen_ai.tool.call.arguments", json.dumps(args))
                s.set_attribute("gen_ai.tool.call.result", json.dumps(result))
                if c["error"]:
                    s.set_status(Status(StatusCode.ERROR))
                s.end()
                if wrapper is not None:
                    wrapper.end()
                if parent is not None:
                    parent.end()
        if server is not None:
            server.end()


def sig(results):
    return sorted(tuple(r.verdict_signature()) for r in results)


def incomplete(results):
    return sorted(tuple(r.incomplete) for r in results)


def vsig(violations):
    return sorted((v.test_id, v.assertion_index, v.span_id, v.message) for v in violations)


def serve_in_process(path, rules=RULES):
    """The spans of ``path`` handed to serve's receiver as its endpoints would (one request per
    span, in export order), then a graceful stop; returns its report."""
    from spanassert.otlp.reader import read_spans

    return serve_records(rules, read_spans([path]), per_request=1, rootless_wait=None)


def _call(tool, amount=None):
    return {"tool": tool, "amount": amount, "to": "a@ok.org", "error": False, "items": 0, "nested": False,
            "model_step": False, "usage": None, "note": None, "plain": None}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(episode, min_size=1, max_size=4), tops)
# Found by this property: a loop rule judging cycles at starts and repeats at ends named a different
# first failure live (starts are judged on the agent's thread ahead of queued ends) than in replay.
@example([[_call("lookup_order", 0), _call("refund"), _call("lookup_order", 0), _call("refund")]], [None] * 4)
# Plain child spans (issue 15: they never reach the engine live unless a GenAI span starts below
# one); found by this property: exporting a plain span's end ahead of a queued end of its trace
# let serve see a span after its trace's root.
@example([[{**_call("refund"), "plain": "sibling"}, {**_call("send_email"), "plain": "inside", "nested": True},
           {**_call("search"), "plain": "marked_late"}, {**_call("refund"), "plain": "inside"}]], [None] * 4)
# A trace whose root is in another process (issue: live said `passed` where replay said
# `inconclusive`, "root not seen"): under the agent span, and under a plain server span above it.
@example([[_call("lookup_order", 0), _call("refund")], [{**_call("refund"), "plain": "inside"}, _call("search")],
          [_call("lookup_order", 0)]], ["remote", "remote_http", None, None])
def test_live_replay_and_serve_give_identical_verdicts_and_violations(episodes, tops):
    live_eps, live_vs = [], []
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "traces.jsonl")
        proc = AssertionSpanProcessor(RULES, export=SimpleSpanProcessor(FileSpanExporter(path)),
                                      on_episode=live_eps.append, on_violation=live_vs.append, tick_interval=0)
        tp = TracerProvider(resource=Resource.create({"service.name": "agent"}))
        tp.add_span_processor(proc)
        run(tp.get_tracer("prop"), episodes, tops)
        tp.shutdown()
        report = replay(RULES, [path])
        served = serve_in_process(path)
    assert not report.input_errors
    assert len(report.episodes) == len(live_eps) == len(served.episodes) == len(episodes)
    assert sig(report.episodes) == sig(live_eps) == sig(served.episodes)
    assert incomplete(report.episodes) == incomplete(live_eps) == incomplete(served.episodes)
    assert incomplete(live_eps).count(("root not seen",)) == sum(1 for t in tops[:len(episodes)] if t is not None)
    assert vsig(report.violations) == vsig(live_vs) == vsig(served.violations)
