"""understudy compatibility (issue 19): the Trace queries keep understudy 0.6.0's exact signatures and
answers, over spans captured from the real SDK. The names and signatures below are read from
understudy 0.6.0's own source (understudy/trace.py, understudy/models.py: Expectations)."""
from __future__ import annotations

import inspect
import json

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from spanassert import Trace


def _agent_trace():
    """support runs lookup_order, then hands off to billing, which runs check_balance."""
    exp = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exp))
    t = tp.get_tracer("t")

    def tool(name, args=None):
        with t.start_as_current_span(f"execute_tool {name}", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                "gen_ai.tool.call.arguments": json.dumps(args or {})}):
            pass

    with t.start_as_current_span("invoke_agent support", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}):
        tool("lookup_order", {"order_id": "ORD-10027"})
        with t.start_as_current_span("invoke_agent billing", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "billing"}):
            tool("check_balance")
        tool("get_return_policy")
    return Trace.from_spans(exp.get_finished_spans())


def test_query_signatures_are_understudys():
    # understudy 0.6.0: def agents_invoked(self) -> list[str]; def calls_by_agent(self, agent: str)
    # -> list[ToolCall]; def agent_called(self, agent: str, tool: str) -> bool;
    # def called(self, tool_name: str, **kwargs); def calls_to(self, tool_name: str); def call_sequence(self)
    params = {name: list(inspect.signature(getattr(Trace, name)).parameters)
              for name in ("agents_invoked", "calls_by_agent", "agent_called", "called", "calls_to",
                           "call_sequence")}
    assert params["agents_invoked"] == ["self"]
    assert params["calls_by_agent"] == ["self", "agent"]
    assert params["agent_called"] == ["self", "agent", "tool"]
    assert params["call_sequence"] == ["self"]
    assert len(params["called"]) == 3 and len(params["calls_to"]) == 2
    # the properties understudy reads as attributes stay attributes
    for prop in ("tool_calls", "terminal_state", "duration"):
        assert not callable(getattr(_agent_trace(), prop))


def test_agents_invoked_is_a_method_returning_sorted_distinct_names():
    trace = _agent_trace()
    assert trace.agents_invoked() == ["billing", "support"]  # understudy: sorted(set(...))


def test_calls_by_agent_takes_the_agent_and_returns_its_calls():
    trace = _agent_trace()
    assert [c.name for c in trace.calls_by_agent("support")] == ["lookup_order", "get_return_policy"]
    assert [c.name for c in trace.calls_by_agent("billing")] == ["check_balance"]
    assert trace.calls_by_agent("nobody") == []
    with pytest.raises(TypeError):
        trace.calls_by_agent()  # type: ignore[call-arg]  # the old dict form is gone: it is not understudy's
    assert trace.agent_called("billing", "check_balance") and not trace.agent_called("support", "check_balance")
