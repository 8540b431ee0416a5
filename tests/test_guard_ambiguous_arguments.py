"""A guard fails closed on arguments in doubt (fg9): a call whose arguments repeat a JSON key with
different values (``{"amount": 5000, "amount": 5}``: Python reads 5, a parser that keeps the first
reads 5000), or whose tool span records them twice with different values (``gen_ai.tool.call.arguments``
and ``input.value``), cannot be shown to keep a rule that reads them: a block test with such a rule
refuses it, whichever value the rule would pass. The rule itself did not fail: it is not counted as a
violation, and its verdict is ``inconclusive`` live and in replay, as without a guard."""
from __future__ import annotations

import json
from pathlib import Path
from typing import List

from test_guard_core import AGENT, Rig, _labels

from spanassert.replay import replay

REPEATED = '{"amount": 5000, "amount": 5}'

RULES = """\
version: 1
tests:
  - id: small-refunds
    action: block
    assertions:
      - type: trace_args_valid
        tool: refund
        schema: {properties: {amount: {maximum: 100}}}
  - id: two-refunds-at-most
    action: block
    assertions:
      - {type: trace_max_tool_calls, tool: refund, max: 2}
  - id: alert-refunds
    assertions:
      - type: trace_args_valid
        tool: refund
        schema: {properties: {amount: {maximum: 200}}}
"""


def _verdicts(rig: Rig) -> dict:
    [ep] = rig.episodes
    return {r.test_id: r.verdict.value for r in ep.results}


def test_a_repeated_key_is_refused_by_the_block_tests_that_read_arguments(tmp_path: Path) -> None:
    rig = Rig(tmp_path, RULES, jsonl=True)
    with rig.tracer.start_as_current_span("invoke_agent helper", attributes=AGENT):
        d = rig.guard.check("refund", REPEATED, call_id="c0")
        assert d.blocked
        # Only the block test that reads arguments: not the count cap, not the alert test.
        assert [r.test_id for r in d.rules] == ["small-refunds"]
        assert "repeat a JSON key" in d.message and "fail" in d.message
        rig.guard.refusal_span("refund", REPEATED, d)
    rig.processor.shutdown()
    assert [_labels(s) for s in rig.spans("execute_tool refund")] == [[("small-refunds", "blocked")]]
    assert rig.decisions() == {"blocked": 1}
    assert sum(rig.counts("spanassert.violations").values()) == 0  # the rule did not fail
    assert _verdicts(rig)["small-refunds"] == "inconclusive"
    assert _verdicts(rig)["alert-refunds"] == "inconclusive"
    replayed = replay(rig.config, [str(rig.jsonl)])
    assert [e.verdict_signature() for e in replayed.episodes] == [e.verdict_signature() for e in rig.episodes]


def test_a_key_repeated_with_the_same_value_or_a_failure_decides_as_before(tmp_path: Path) -> None:
    rig = Rig(tmp_path, RULES)
    with rig.tracer.start_as_current_span("invoke_agent helper", attributes=AGENT):
        same = rig.guard.check("refund", '{"amount": 5, "amount": 5}', call_id="c0")
        rig.tool_span("refund", {"amount": 5}, call_id="c0")
        over = rig.guard.check("refund", '{"amount": 5, "amount": 5000}', call_id="c1")
    assert same.allowed
    assert over.blocked and [r.test_id for r in over.rules] == ["small-refunds"]
    assert "maximum" in over.message  # the failure on the value read, not the doubt


def test_a_decision_outside_any_trace_fails_closed_too(tmp_path: Path) -> None:
    rig = Rig(tmp_path, RULES)
    d = rig.guard.check("refund", REPEATED)
    assert d.blocked and [r.test_id for r in d.rules] == ["small-refunds"]


def test_a_tool_span_that_records_its_arguments_twice_differently_is_refused(tmp_path: Path) -> None:
    """Asked inside the tool's own span, whose start recorded the arguments under two conventions'
    keys with different values (or with a key repeated): the decision is its start's, refused."""
    rig = Rig(tmp_path, RULES, jsonl=True)
    allowed: List[bool] = []
    with rig.tracer.start_as_current_span("invoke_agent helper", attributes=AGENT):
        for i, attrs in enumerate(({"gen_ai.tool.call.arguments": json.dumps({"amount": 5}),
                                    "input.value": json.dumps({"amount": 5000})},
                                   {"gen_ai.tool.call.arguments": REPEATED})):
            with rig.tracer.start_as_current_span("execute_tool refund", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "refund",
                    "gen_ai.tool.call.id": f"c{i}", **attrs}):
                d = rig.guard.check("refund", None, call_id=f"c{i}")
                allowed.append(d.allowed)
                assert [r.test_id for r in d.rules] == ["small-refunds"], d.message
    assert allowed == [False, False]
    rig.processor.shutdown()
    assert _verdicts(rig)["small-refunds"] == "inconclusive"
    replayed = replay(rig.config, [str(rig.jsonl)])
    assert [e.verdict_signature() for e in replayed.episodes] == [e.verdict_signature() for e in rig.episodes]


def test_arguments_given_inside_a_span_that_recorded_none_fail_closed(tmp_path: Path) -> None:
    """A framework that writes the arguments at the span's end (ADK) asks inside the span with the
    arguments it has: a repeated key there is refused too."""
    rig = Rig(tmp_path, RULES)
    with rig.tracer.start_as_current_span("invoke_agent helper", attributes=AGENT):
        with rig.tracer.start_as_current_span("execute_tool refund", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "refund"}):
            d = rig.guard.check("refund", REPEATED, call_id="c0")
    assert d.blocked and [r.test_id for r in d.rules] == ["small-refunds"]


def test_a_shadow_block_test_would_block(tmp_path: Path) -> None:
    rules = RULES.replace("  - id: small-refunds\n    action: block\n",
                          "  - id: small-refunds\n    action: block\n    mode: shadow\n")
    rig = Rig(tmp_path, rules)
    with rig.tracer.start_as_current_span("invoke_agent helper", attributes=AGENT):
        d = rig.guard.check("refund", REPEATED, call_id="c0")
    assert d.allowed and d.would_block and [r.test_id for r in d.rules] == ["small-refunds"]


def test_a_card_in_the_spans_other_source_is_found_at_its_start(tmp_path: Path) -> None:
    """The detectors scan the other source at the call's start too: the guard's refusal names the
    finding (not only the doubt)."""
    rules = """\
version: 1
tests:
  - id: no-cards
    action: block
    assertions: [{type: trace_no_sensitive_data, detectors: [credit_card]}]
"""
    rig = Rig(tmp_path, rules)
    with rig.tracer.start_as_current_span("invoke_agent helper", attributes=AGENT):
        with rig.tracer.start_as_current_span("execute_tool refund", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "refund", "gen_ai.tool.call.id": "c0",
                "gen_ai.tool.call.arguments": json.dumps({"note": "hi"}),
                "input.value": json.dumps({"note": "4111 1111 1111 1111"})}):
            d = rig.guard.check("refund", None, call_id="c0")
    assert d.blocked and "credit_card found" in d.message and "its other source, input.value" in d.message, d.message


def test_arguments_that_do_not_parse_are_refused_by_the_block_tests_that_read_them(tmp_path: Path) -> None:
    """Truncated JSON no rule can read, and the tool may (a lenient parser repairs `{"amount": 5000`):
    refused by the block tests whose rules read arguments, whatever the rule would say; the rule did
    not fail (inconclusive). Arguments not given at all decide as before."""
    rig = Rig(tmp_path, RULES, jsonl=True)
    with rig.tracer.start_as_current_span("invoke_agent helper", attributes=AGENT):
        d = rig.guard.check("refund", '{"amount": 5000', call_id="c0")
        assert d.blocked and [r.test_id for r in d.rules] == ["small-refunds"], d.message
        assert "could not be parsed" in d.message and "fails closed" in d.message
        rig.guard.refusal_span("refund", '{"amount": 5000', d)
        none = rig.guard.check("refund", None, call_id="c1")
        assert none.allowed
    rig.processor.shutdown()
    assert sum(rig.counts("spanassert.violations").values()) == 0
    assert _verdicts(rig)["small-refunds"] == "inconclusive"
    replayed = replay(rig.config, [str(rig.jsonl)])
    assert [e.verdict_signature() for e in replayed.episodes] == [e.verdict_signature() for e in rig.episodes]
