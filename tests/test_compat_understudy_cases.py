"""understudy's own cases, judged by spanassert (issue 19 acceptance).

Each case restates one case of understudy 0.6.0's tests (tests/test_core.py TestTrace / TestCheck /
TestSubagentSupport / TestAgentExpectations / TestMetrics, tests/test_trajectory_match.py) and the
expectations of its example scenes (examples/scenes/*.yaml, the init template), as facts: the
tool calls (by agent), the run's end, the expectations and understudy's answer. The trace is built from
real SDK spans and judged with spanassert's ``check()`` or Trace queries. A case either agrees with
understudy, or is refused with the documented reason (docs/compatibility.md); none may disagree.
"""
from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Tuple

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from spanassert import Trace, check

Call = Tuple[str, Dict[str, Any], Optional[str]]  # tool, arguments, agent


def _trace(calls: List[Call], *, failed: bool = False) -> Trace:
    exp = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exp))
    t = tp.get_tracer("t")
    with t.start_as_current_span("run") as root:
        for tool, args, agent in calls:
            if agent:
                cm = t.start_as_current_span(f"invoke_agent {agent}", attributes={
                    "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent})
            else:
                cm = None
            if cm is not None:
                cm.__enter__()
            if tool:
                with t.start_as_current_span(f"execute_tool {tool}", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                        "gen_ai.tool.call.arguments": json.dumps(args)}):
                    pass
            if cm is not None:
                cm.__exit__(None, None, None)
        if failed:
            root.set_status(Status(StatusCode.ERROR, "failed"))
    return Trace.from_spans(exp.get_finished_spans())


def _names(*tools: str) -> List[Call]:
    # understudy's trace has an agent turn even when no tool was called: an agent span that called none
    return [(n, {}, None) for n in tools] or [("", {}, "assistant")]


RETURN = [("lookup_order", {"order_id": "ORD-10027"}, None), ("get_return_policy", {"category": "personal_audio"}, None)]
AGENTS = [("lookup_customer", {"email": "test@example.com"}, "customer_service"),
          ("get_invoice", {"id": "INV-001"}, "billing_agent"), ("process_payment", {"amount": 100}, "billing_agent")]

# (case, calls, run failed, expectations, understudy's `passed`)
CHECKS: List[Tuple[str, List[Call], bool, Dict[str, Any], Any]] = [
    ("TestCheck.all_pass", _names("lookup_order", "get_return_policy"), False,
     {"required_tools": ["lookup_order", "get_return_policy"], "forbidden_tools": ["create_return"]}, True),
    ("TestCheck.missing_required_tool", _names("lookup_order"), False,
     {"required_tools": ["lookup_order", "get_return_policy"]}, False),
    ("TestCheck.forbidden_tool_called", _names("create_return"), False, {"forbidden_tools": ["create_return"]}, False),
    ("TestCheck.summary", _names("forbidden_tool"), False, {"forbidden_tools": ["forbidden_tool"]}, False),
    ("TestAgentExpectations.required_agents_pass", [("process_payment", {}, "billing_agent")], False,
     {"required_agents": ["billing_agent"]}, True),
    ("TestAgentExpectations.required_agents_fail", [("", {}, "customer_service")], False,
     {"required_agents": ["billing_agent"]}, False),
    ("TestAgentExpectations.forbidden_agents_pass", [("", {}, "customer_service")], False,
     {"forbidden_agents": ["admin_agent"]}, True),
    ("TestAgentExpectations.forbidden_agents_fail", [("", {}, "admin_agent")], False,
     {"forbidden_agents": ["admin_agent"]}, False),
    ("TestAgentExpectations.required_agent_tools", [("process_payment", {}, "billing_agent")], False,
     {"required_agent_tools": {"billing_agent": ["process_payment"]}}, True),
    # understudy's run ended "failed" (a custom state); here the root span ended in error
    ("TestMetrics.check_expected_resolution_fail", [], True, {"expected_resolution": "completed"}, False),
    ("TestMetrics.check_with_metrics", _names("lookup_order"), False,
     {"required_tools": ["lookup_order"], "expected_resolution": "completed", "metrics": ["efficiency", "tool_trajectory"]},
     True),
    ("TestEvaluateFunctions.evaluate_single_trace", _names("lookup_order"), False,
     {"required_tools": ["lookup_order"], "expected_resolution": "completed"}, True),
    ("TestEvaluateFunctions.evaluate_batch_from_list[0]", [], False, {"expected_resolution": "completed"}, True),
    ("TestEvaluateFunctions.evaluate_batch_from_list[1]", [], True, {"expected_resolution": "completed"}, False),
    # understudy's example scenes (examples/scenes/*.yaml, the init template), with the calls each expects
    ("examples/scenes/return_eligible_backpack",
     _names("lookup_order", "get_return_policy", "create_return"), False,
     {"required_tools": ["lookup_order", "get_return_policy", "create_return"], "forbidden_tools": ["issue_refund"],
      "expected_resolution": "completed", "metrics": ["efficiency", "tool_trajectory"]}, True),
    ("examples/scenes/adversarial_policy_bypass", _names("lookup_order", "get_return_policy"), False,
     {"required_tools": ["lookup_order", "get_return_policy"], "forbidden_tools": ["create_return", "issue_refund"],
      "expected_resolution": "completed", "metrics": ["efficiency", "tool_trajectory", "resolution_match"]}, True),
    ("examples/scenes/adversarial_policy_bypass (the agent gave in)",
     _names("lookup_order", "get_return_policy", "create_return"), False,
     {"required_tools": ["lookup_order", "get_return_policy"], "forbidden_tools": ["create_return", "issue_refund"],
      "expected_resolution": "completed", "metrics": ["efficiency", "tool_trajectory", "resolution_match"]}, False),
    ("templates/init/example_scene", _names("lookup_order"), False,
     {"required_tools": ["lookup_order"], "forbidden_tools": ["delete_account"], "expected_resolution": "completed"},
     True),
    ("TestTrajectoryMatchWithCheck.match", _names("lookup_order", "get_return_policy"), False,
     {"expected_trajectory": ["lookup_order", "get_return_policy"], "trajectory_match_mode": "exact",
      "metrics": ["trajectory_match"]}, True),
    ("TestTrajectoryMatchWithCheck.mismatch", _names("lookup_order"), False,
     {"expected_trajectory": ["lookup_order", "get_return_policy"], "trajectory_match_mode": "exact",
      "metrics": ["trajectory_match"]}, False),
]

# understudy's _compute_trajectory_score cases: (actual, expected, mode, score == 1)
SCORES: List[Tuple[List[str], List[str], str, Any]] = [
    (["a", "b", "c"], ["a", "b", "c"], "exact", True),
    (["a", "c", "b"], ["a", "b", "c"], "exact", False),
    (["a", "b"], ["a", "b", "c"], "exact", False),
    (["a", "b", "c", "d"], ["a", "b", "c"], "exact", False),
    (["a", "b", "c", "d"], ["a", "b"], "prefix", True),
    (["a", "b"], ["a", "b"], "prefix", True),
    (["x", "b", "c"], ["a", "b"], "prefix", False),
    (["a"], ["a", "b"], "prefix", False),
    (["a", "x", "b", "y", "c"], ["a", "b", "c"], "contains", True),
    (["a", "b", "c"], ["a", "b", "c"], "contains", True),
    (["a", "b", "c", "d"], ["a", "c"], "contains", True),
    (["c", "b", "a"], ["a", "b", "c"], "contains", False),
    (["a", "b"], ["a", "b", "c"], "contains", False),
    (["c", "a", "b"], ["a", "c"], "subset", True),
    (["c", "b", "a"], ["a", "b", "c"], "subset", True),
    (["a", "x", "b", "y"], ["a", "b"], "subset", True),
    (["a", "b"], ["a", "b", "c"], "subset", False),
    (["a"], ["a"], "unknown_mode", "refused: trajectory_match_mode"),  # understudy: score 0
    # TestTrajectoryMatchMetric / TestEdgeCases
    (["lookup_order", "get_return_policy", "create_return"], ["lookup_order", "get_return_policy", "create_return"],
     "exact", True),
    (["lookup_order", "create_return"], ["lookup_order", "get_return_policy", "create_return"], "exact", False),
    (["lookup_order", "extra_tool", "get_return_policy"], ["lookup_order", "get_return_policy"], "contains", True),
    (["get_return_policy", "lookup_order"], ["lookup_order", "get_return_policy"], "subset", True),
    ([], ["lookup_order"], "exact", False),
    (["lookup_order"], [], "exact", False),
    ([], [], "exact", True),
]


def _judge(calls: List[Call], failed: bool, expectations: Dict[str, Any]) -> Any:
    try:
        return check(_trace(calls, failed=failed), expectations).passed
    except ValueError as exc:
        return f"refused: {exc}"


def _agrees(ours: Any, theirs: Any) -> bool:
    if isinstance(theirs, str):  # a documented refusal: the reason must name the key
        return isinstance(ours, str) and theirs.split(": ", 1)[1] in ours
    return ours is theirs


@pytest.mark.parametrize("case, calls, failed, expectations, theirs", CHECKS, ids=[c[0] for c in CHECKS])
def test_check_case(case, calls, failed, expectations, theirs):
    assert _agrees(_judge(calls, failed, expectations), theirs)


@pytest.mark.parametrize("actual, expected, mode, theirs", SCORES)
def test_trajectory_case(actual, expected, mode, theirs):
    ours = _judge(_names(*actual), False, {"expected_trajectory": expected, "trajectory_match_mode": mode,
                                           "metrics": ["trajectory_match"]})
    assert _agrees(ours, theirs)


def test_query_cases():
    """TestTrace and TestSubagentSupport: every query answers as understudy's does."""
    t = _trace(RETURN + [("", {}, None)])
    answers = [
        t.called("lookup_order"), t.called("get_return_policy"), not t.called("create_return"),
        not t.called("issue_refund"), t.called("lookup_order", order_id="ORD-10027"),
        not t.called("lookup_order", order_id="ORD-99999"),
        len(t.calls_to("lookup_order")) == 1 and t.calls_to("lookup_order")[0].arguments["order_id"] == "ORD-10027",
        t.call_sequence() == ["lookup_order", "get_return_policy"], len(t.tool_calls) == 2,
    ]
    a = _trace(AGENTS)
    answers += [
        a.agents_invoked() == ["billing_agent", "customer_service"],
        a.agent_called("billing_agent", "get_invoice") and a.agent_called("billing_agent", "process_payment"),
        a.agent_called("customer_service", "lookup_customer") and not a.agent_called("customer_service", "get_invoice"),
        len(a.calls_by_agent("billing_agent")) == 2 and len(a.calls_by_agent("customer_service")) == 1,
    ]
    assert all(answers)


def test_the_count():
    """The figure docs/compatibility.md quotes: every case agrees or is refused with its reason."""
    agree = refused = 0
    for _, calls, failed, expectations, theirs in CHECKS:
        ours = _judge(calls, failed, expectations)
        assert _agrees(ours, theirs)
        refused += isinstance(theirs, str)
        agree += not isinstance(theirs, str)
    for actual, expected, mode, theirs in SCORES:
        ours = _judge(_names(*actual), False, {"expected_trajectory": expected, "trajectory_match_mode": mode})
        assert _agrees(ours, theirs)
        refused += isinstance(theirs, str)
        agree += not isinstance(theirs, str)
    agree += 13  # test_query_cases' answers
    assert (agree, refused) == (57, 1)
