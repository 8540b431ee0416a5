"""Trace queries and check() over spans captured from the real SDK."""
from __future__ import annotations

import json

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from spanassert import Trace, check
from spanassert.core.model import Verdict


@pytest.fixture()
def spans():
    exp = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exp))
    t = tp.get_tracer("t")
    with t.start_as_current_span("invoke_agent support", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}):
        for name, args in [("lookup_order", {"order_id": "ORD-10027", "verbose": True}),
                           ("get_return_policy", {"category": "earbuds"})]:
            with t.start_as_current_span(f"execute_tool {name}", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                    "gen_ai.tool.call.arguments": json.dumps(args)}):
                pass
        with t.start_as_current_span("invoke_agent billing", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "billing"}):
            with t.start_as_current_span("execute_tool check_balance", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "check_balance"}):
                pass
    return exp.get_finished_spans()


def test_queries_answer_like_understudy(spans):
    trace = Trace.from_spans(spans)
    assert trace.call_sequence() == ["lookup_order", "get_return_policy", "check_balance"]
    assert trace.called("lookup_order")
    assert trace.called("lookup_order", order_id="ORD-10027")
    assert not trace.called("lookup_order", order_id="ORD-1")
    assert not trace.called("issue_refund")
    assert trace.calls_to("get_return_policy")[0].arguments == {"category": "earbuds"}
    assert trace.agent_called("billing", "check_balance")
    assert not trace.agent_called("support", "check_balance")
    assert trace.agents_invoked() == ["billing", "support"]
    assert trace.terminal_state == "completed"
    assert trace.duration > 0


def test_check_with_expectations_reports_each_item(spans):
    trace = Trace.from_spans(spans)
    res = check(trace, {"required_tools": ["lookup_order"], "forbidden_tools": ["issue_refund"],
                        "expected_trajectory": ["lookup_order", "get_return_policy"],
                        "trajectory_match_mode": "prefix"})
    assert res.passed, res.summary()
    assert res.summary().count("✓") == 3
    bad = check(trace, {"forbidden_tools": ["check_balance"]})
    assert not bad.passed
    assert bad.summary().startswith("✗ forbidden_tools: check_balance")


def test_check_with_a_rules_file_and_an_empty_trace_never_passes(tmp_path):
    rules = tmp_path / "rules.yaml"
    rules.write_text("version: 1\ntests:\n  - id: must\n    assertions:\n"
                     "      - type: trace_must_call_tool\n        tool: lookup_order\n")
    empty = check(Trace.from_spans([]), str(rules))
    assert not empty.passed and "no episode" in empty.summary()


def test_unknown_expectation_key_is_refused(spans):
    with pytest.raises(ValueError, match="required_tool"):
        check(Trace.from_spans(spans), {"required_tool": ["x"]})
