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


# -- check() with understudy's expectation keys (understudy 0.6.0 understudy/check.py) ---------------
from opentelemetry.trace import Status, StatusCode  # noqa: E402

from spanassert import check  # noqa: E402
from spanassert.core.model import Verdict  # noqa: E402


def _spans(shape, *, root_error=False, drop_root=False, root_agent=None):
    """Real SDK spans for ``shape``: a list of tool names and ``(agent, [shape])`` sub-agents, under a
    root span (an agent span when ``root_agent`` is given, else a plain span)."""
    exp = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exp))
    t = tp.get_tracer("t")

    def walk(items):
        for it in items:
            if isinstance(it, str):
                with t.start_as_current_span(f"execute_tool {it}", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": it,
                        "gen_ai.tool.call.arguments": "{}"}):
                    pass
            else:
                agent, inner = it
                with t.start_as_current_span(f"invoke_agent {agent}", attributes={
                        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent}):
                    walk(inner)

    attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": root_agent} if root_agent else {}
    with t.start_as_current_span(f"invoke_agent {root_agent}" if root_agent else "run", attributes=attrs) as root:
        walk(shape)
        if root_error:
            root.set_status(Status(StatusCode.ERROR, "boom"))
    spans = exp.get_finished_spans()
    if drop_root:
        spans = [s for s in spans if s.parent is not None]
    return Trace.from_spans(spans)


def _verdicts(result):
    return {i.label: i.verdict for i in result.items}


def test_required_and_forbidden_agents_are_judged_as_understudy_does():
    trace = _spans([("customer_service", ["lookup_customer"]), ("billing_agent", ["get_invoice"])])
    r = check(trace, {"required_agents": ["billing_agent"], "forbidden_agents": ["admin_agent"]})
    assert r.passed and _verdicts(r) == {"required_agents: billing_agent": Verdict.PASSED,
                                         "forbidden_agents: admin_agent": Verdict.PASSED}
    r = check(trace, {"required_agents": ["admin_agent"], "forbidden_agents": ["billing_agent"]})
    assert not r.passed
    assert _verdicts(r) == {"required_agents: admin_agent": Verdict.FAILED,
                            "forbidden_agents: billing_agent": Verdict.FAILED}
    assert [i.detail for i in r.failed_checks] == ["admin_agent NOT invoked", "billing_agent INVOKED (violation)"]
    # an agent that ran without calling any tool was invoked (understudy counts its executions too)
    quiet = _spans([("triage", []), "lookup_order"])
    assert not check(quiet, {"forbidden_agents": ["triage"]}).passed
    assert check(quiet, {"required_agents": ["triage"]}).passed


def test_required_agent_tools_needs_that_agent_to_have_called_the_tool():
    trace = _spans([("customer_service", ["lookup_customer"]), ("billing_agent", ["get_invoice", "process_payment"])])
    assert check(trace, {"required_agent_tools": {"billing_agent": ["get_invoice", "process_payment"]}}).passed
    r = check(trace, {"required_agent_tools": {"customer_service": ["get_invoice"]}})
    assert _verdicts(r) == {"required_agent_tools: customer_service.get_invoice": Verdict.FAILED}


def test_agent_checks_are_never_passed_on_incomplete_evidence():
    # the root span was not recorded: a forbidden agent may have run in the part not seen
    cut = _spans([("billing_agent", ["get_invoice"])], drop_root=True)
    r = check(cut, {"forbidden_agents": ["admin_agent"], "required_agents": ["admin_agent"],
                    "required_agent_tools": {"admin_agent": ["x"]}, "expected_resolution": "completed"})
    assert set(_verdicts(r).values()) == {Verdict.INCONCLUSIVE} and not r.passed
    assert all("root not seen" in i.detail for i in r.items)
    # what was seen still decides: a forbidden agent that ran fails, a required one passes
    r = check(cut, {"forbidden_agents": ["billing_agent"], "required_agents": ["billing_agent"]})
    assert _verdicts(r) == {"forbidden_agents: billing_agent": Verdict.FAILED,
                            "required_agents: billing_agent": Verdict.PASSED}
    # no agent span at all: the instrumentation may not record agents, so "not invoked" is unknown
    bare = _spans(["lookup_order"])
    r = check(bare, {"forbidden_agents": ["admin_agent"]})
    assert _verdicts(r) == {"forbidden_agents: admin_agent": Verdict.INCONCLUSIVE}
    assert "no agent span was recorded" in r.items[0].detail


def test_expected_resolution_completed_maps_onto_terminal_state():
    ok = _spans(["lookup_order"], root_agent="support")
    assert ok.terminal_state == "completed"
    r = check(ok, {"expected_resolution": "completed"})
    assert r.passed and r.items[0].detail == "expected=completed, actual=completed"
    failed = _spans(["lookup_order"], root_agent="support", root_error=True)
    r = check(failed, {"expected_resolution": "completed"})
    assert not r.passed and r.failed_checks[0].label == "expected_resolution"
    assert r.failed_checks[0].detail == "expected=completed, actual=error"


@pytest.mark.parametrize("state, why", [
    ("max_turns_reached", "no turns"),
    ("agent_ended", "escalated or hung up"),
    ("interrupted", "pending"),
    ("return_denied_policy", "an application sets itself"),
    ("error", "an application sets itself"),
])
def test_expected_resolution_spans_cannot_carry_is_refused_with_the_reason(state, why):
    with pytest.raises(ValueError) as exc:
        check(_spans(["a"]), {"expected_resolution": state})
    assert f"expected_resolution {state!r} cannot be checked from spans" in str(exc.value) and why in str(exc.value)


def test_metrics_trajectory_match_resolution_match_and_tool_trajectory():
    trace = _spans(["lookup_order", "get_return_policy", "lookup_order"])
    r = check(trace, {"expected_trajectory": ["lookup_order", "get_return_policy"], "trajectory_match_mode": "exact",
                      "metrics": ["trajectory_match", "tool_trajectory", "resolution_match"]})
    assert r.metrics["trajectory_match"].passed is False and r.metric("trajectory_match") is r.metrics["trajectory_match"]
    assert r.metrics["tool_trajectory"].passed is None
    assert r.metrics["tool_trajectory"].value == {"sequence": ["lookup_order", "get_return_policy", "lookup_order"],
                                                  "unique_tools": ["get_return_policy", "lookup_order"], "total_calls": 3}
    # nothing to judge: informational (understudy passes resolution_match here; no pass without a check)
    assert r.metrics["resolution_match"].passed is None
    assert r.metrics["resolution_match"].detail == "No expected resolution specified"
    r = check(trace, {"expected_trajectory": ["lookup_order", "get_return_policy"], "trajectory_match_mode": "prefix",
                      "expected_resolution": "completed", "metrics": ["trajectory_match", "resolution_match"]})
    assert r.passed and r.metrics["trajectory_match"].passed is True and r.metrics["resolution_match"].passed is True


def test_unknown_metrics_are_refused():
    with pytest.raises(ValueError, match="unknown metric 'my_custom_metric'"):
        check(_spans(["a"]), {"required_tools": ["a"], "metrics": ["my_custom_metric"]})


def test_efficiency_is_informational_with_what_spans_carry():
    # understudy's own example scenes list it beside their checks; it judges nothing there either
    r = check(_spans(["a"]), {"required_tools": ["a"], "metrics": ["efficiency"]})
    m = r.metrics["efficiency"]
    assert r.passed and m.passed is None and set(m.value) == {"agent_time_ms"}
    assert isinstance(m.value["agent_time_ms"], int) and "turn_count" in m.detail and "no conversation turns" in m.detail


def test_an_understudy_expectations_model_is_accepted():
    class Expectations:  # understudy's is a pydantic model: check() reads it through model_dump()
        def model_dump(self):
            return {"required_tools": ["lookup_order"], "forbidden_tools": [], "required_agents": ["support"],
                    "forbidden_agents": [], "required_agent_tools": {}, "expected_resolution": None,
                    "metrics": [], "expected_trajectory": None, "trajectory_match_mode": "exact"}

    r = check(_spans(["lookup_order"], root_agent="support"), Expectations())
    assert r.passed and len(r.checks) == 2


def test_expectations_that_check_nothing_are_refused():
    with pytest.raises(ValueError, match="check nothing"):
        check(_spans(["a"]), {"metrics": ["trajectory_match"], "required_agents": []})
