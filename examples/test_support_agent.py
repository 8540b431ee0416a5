"""The support agent under pytest, with the spanassert plugin (installed with the package).

    python -m pytest examples/test_support_agent.py

The agent uses the global tracer provider, as instrumented code usually does; the plugin captures
what each test emits.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from support_agent import SCENARIOS, SupportAgent

BY_NAME = {s.name: s for s in SCENARIOS}
RULES = Path(__file__).parent / "rules.yaml"


@pytest.mark.spanassert(config="rules.yaml")
@pytest.mark.parametrize("scenario", ["order-status", "refund-within-policy"])
def test_scenario_follows_the_rules(scenario: str) -> None:
    SupportAgent().run(BY_NAME[scenario])


def test_refund_looks_up_the_order_and_policy_first(spanassert_trace) -> None:
    SupportAgent().run(BY_NAME["refund-within-policy"])
    trace = spanassert_trace.trace
    assert trace.call_sequence() == ["lookup_order", "get_refund_policy", "issue_refund"]
    assert trace.called("issue_refund", order_id="ORD-10027")
    assert not trace.called("delete_customer")


def test_closing_an_account_breaks_the_deletion_rule(spanassert_trace) -> None:
    SupportAgent().run(BY_NAME["close-account"])
    result = spanassert_trace.check(RULES)
    assert not result.passed
    assert [i.label for i in result.items if i.verdict.value == "failed"] == ["never-delete-customers"]


def test_understudy_style_expectations(spanassert_trace) -> None:
    SupportAgent().run(BY_NAME["refund-within-policy"])
    result = spanassert_trace.check({
        "required_tools": ["lookup_order"],
        "forbidden_tools": ["delete_customer"],
        "expected_trajectory": ["lookup_order", "issue_refund"],
        "trajectory_match_mode": "contains",
    })
    assert result.passed, result.summary()
