"""What every recorded-trace assertion type of this family promises: documented fields, redacted
evidence, and per-episode state whose size does not grow with the episode."""
from __future__ import annotations

from typing import Any, Dict, List

import jsonschema
import pytest
from assertion_driver import Call, Episode, ModelStep, build, drive, footprint, ok

from spanassert.assertions import ASSERTION_TYPES
from spanassert.assertions.base import BuildContext
from spanassert.core.model import STATUS_ERROR

# The family: every registered type evaluated over episodes (the registry is the only list).
FAMILY = sorted(name for name, cls in ASSERTION_TYPES.items() if cls.scope == "trace")


@pytest.mark.parametrize("type_name", FAMILY)
def test_type_is_registered_and_documented(type_name: str) -> None:
    cls = ASSERTION_TYPES[type_name]
    assert cls.type_name == type_name
    assert cls.doc and "\n\n" not in cls.doc, "doc is one paragraph"
    assert "inconclusive" in cls.doc.lower()
    for name, field in cls.fields.items():
        assert field.doc, f"{type_name}.{name} has no doc"
        jsonschema.Draft202012Validator.check_schema(field.schema)


# -- redaction ---------------------------------------------------------------------------------------

SECRET = "sk-live-7f3a9c0d1e2b"

# (spec, calls) pairs that fail on a call carrying the secret in its arguments and result.
FAILING: List[Any] = [
    (
        {"type": "trace_must_not_call_tool", "tool": "send", "args_match": {"token": "^sk-"}},
        [ok("send", {"token": SECRET}, result={"echo": SECRET})],
    ),
    (
        {"type": "trace_args_valid", "tool": "send", "schema": {"properties": {"token": {"maxLength": 4}}}},
        [ok("send", {"token": SECRET}, result={"echo": SECRET})],
    ),
    (
        {"type": "trace_args_valid", "tool": "send", "schema": {"properties": {"token": {"const": "x"}}}},
        [ok("send", {"token": SECRET}, result={"echo": SECRET})],
    ),
    (
        {"type": "trace_tool_result", "tool": "send", "assert": ['json.echo == "x"', "json.echo matches /^x/", "json.echo is number"]},
        [Call("send", {"token": SECRET}, result={"echo": SECRET}, status=STATUS_ERROR)],
    ),
    (
        {"type": "trace_tool_result", "tool": "send", "assert": ["status == 200"]},
        [ok("send", {"token": SECRET}, result={"status": 500, "echo": SECRET})],
    ),
    (
        {"type": "trace_tool_status", "tool": "send"},
        [Call("send", {"token": SECRET}, result={"echo": SECRET}, status=STATUS_ERROR)],
    ),
    (
        {"type": "trace_must_call_tool", "tool": "send", "min_calls": 2, "args_match": {"token": "^sk-"}},
        [ok("send", {"token": SECRET}, result={"echo": SECRET})],
    ),
    (
        {"type": "trace_no_repeat", "max": 1},
        [ok("send", {"token": SECRET}, result={"echo": SECRET})] * 2,
    ),
    (
        {"type": "trace_no_flow", "from": {"tool": "read"}, "to": {"tool": "send"}},
        [ok("read", {}, result={"v": SECRET}), ok("send", {"token": SECRET}, result={"echo": SECRET})],
    ),
    (
        {"type": "trace_no_sensitive_data", "in": ["arguments", "results"]},
        [ok("send", {"token": SECRET, "mail": "jane@example.com"}, result={"echo": SECRET})],
    ),
    (
        {"type": "trace_must_not_call_tool", "tool": "send", "args_match": {"mail": {"detector": "email"}}},
        [ok("send", {"token": SECRET, "mail": "jane@example.com"}, result={"echo": SECRET})],
    ),
    (
        {"type": "trace_only_tools", "tools": ["read"]},
        [ok("send", {"token": SECRET}, result={"echo": SECRET})],
    ),
]


@pytest.mark.parametrize("spec, calls", FAILING)
def test_secret_values_never_appear_in_messages_by_default(spec: Dict[str, Any], calls: List[Call]) -> None:
    run = drive(spec, calls)
    assert run.verdict.value == "failed"
    for message in run.messages:
        assert SECRET not in message
        assert SECRET[:10] not in message


@pytest.mark.parametrize("spec, calls", FAILING)
def test_a_keyed_hash_stands_in_for_secret_values(spec: Dict[str, Any], calls: List[Call]) -> None:
    a = build(spec, BuildContext(evidence_key=b"k"))
    run = drive(a, calls)
    for message in run.messages:
        assert SECRET[:10] not in message


def test_argument_evidence_opt_in_shows_the_argument_value() -> None:
    spec, calls = FAILING[0]
    run = drive(dict(spec, evidence="arguments"), calls)
    assert SECRET in run.first.failure.message
    spec, calls = FAILING[1]
    assert SECRET in drive(dict(spec, evidence="arguments"), calls).first.failure.message


def test_result_evidence_opt_in_shows_result_values_but_not_arguments() -> None:
    spec, calls = FAILING[3]
    message = drive(dict(spec, evidence="result"), calls).first.failure.message
    assert SECRET in message
    spec, calls = FAILING[0]
    assert SECRET not in drive(dict(spec, evidence="result"), calls).first.failure.message


def test_keyed_hash_appears_for_argument_evidence_when_a_key_is_configured() -> None:
    spec, calls = FAILING[0]
    run = drive(build(spec, BuildContext(evidence_key=b"k")), calls)
    assert "arguments: hmac:" in run.first.failure.message


# -- state size ---------------------------------------------------------------------------------------

# spec -> a call (or step) repeated to make the episode long.
STATE_CASES: List[Any] = [
    ({"type": "trace_must_call_tool", "tool": "a"}, ok("a")),
    ({"type": "trace_must_call_tool", "tool": "a", "args_match": {"q": "x"}}, ok("a", {"q": "x"})),
    ({"type": "trace_must_not_call_tool", "tool": "b"}, ok("a")),
    ({"type": "trace_must_not_call_tool", "tool": "a", "args_match": {"q": "bad"}}, ok("a", {"q": "x"})),
    ({"type": "trace_tool_sequence", "sequence": ["a", "b"], "allow_other_tools": True}, ok("a")),
    ({"type": "trace_tool_sequence", "sequence": ["a"], "allow_other_tools": False}, ok("a")),
    ({"type": "trace_trajectory", "expected": ["a", "b"], "mode": "subset"}, ok("a")),
    ({"type": "trace_trajectory", "expected": ["a"], "mode": "prefix"}, ok("a")),
    ({"type": "trace_max_steps", "max": 100_000}, ModelStep()),
    ({"type": "trace_max_tool_calls", "max": 100_000}, ok("a")),
    ({"type": "trace_tool_status"}, ok("a")),
    ({"type": "trace_tool_duration", "max": "1s"}, ok("a")),
    ({"type": "trace_args_valid", "tool": "a", "schema": {"type": "object"}}, ok("a", {"q": 1})),
    ({"type": "trace_tool_result", "tool": "a", "assert": ["status == ok", "json.n is number"]}, ok("a", result={"n": 1})),
    ({"type": "trace_only_tools", "tools": ["a"]}, ok("a")),
    ({"type": "trace_final_tool", "tool": "a"}, ok("a")),
    ({"type": "trace_trajectory", "expected": ["a", "a"], "mode": "suffix"}, ok("a")),
    ({"type": "trace_max_tokens", "max": 10**9}, ModelStep(10, 10)),
    ({"type": "trace_max_cost", "max": 10**9, "default_price": {"input": 1, "output": 1}}, ModelStep(10, 10)),
    ({"type": "trace_max_duration", "max": "1h"}, ok("a")),
    ({"type": "trace_only_tools", "tools": ["b"]}, ok("a")),
    ({"type": "trace_no_repeat", "max": 3}, ok("a", {"q": 1})),
    ({"type": "trace_no_repeat", "max": 3, "window": 10}, ok("a", {"q": 1})),
    ({"type": "trace_no_flow", "from": {"tool": "a"}, "to": {}}, ok("a", {"q": "same-value-1"}, result={"v": "same-value-1"})),
    ({"type": "trace_no_sensitive_data", "in": ["arguments", "results"]}, ok("a", {"q": "x@example.com"}, result="ok")),
]


def _state_after(spec: Dict[str, Any], event: Any, n: int) -> int:
    ep = Episode(build(spec))
    ep.play([event] * n)
    return footprint(ep.state)


def test_every_type_of_the_family_has_a_state_size_case() -> None:
    assert sorted({spec["type"] for spec, _ in STATE_CASES}) == FAMILY


@pytest.mark.parametrize("spec, event", STATE_CASES, ids=[c[0]["type"] for c in STATE_CASES])
def test_state_size_does_not_grow_with_the_number_of_calls(spec: Dict[str, Any], event: Any) -> None:
    assert _state_after(spec, event, 10) == _state_after(spec, event, 10_000)


def test_footprint_measure_sees_a_growing_state() -> None:
    class Growing:
        __slots__ = ("seen",)

        def __init__(self, n: int) -> None:
            self.seen = list(range(n))

    assert footprint(Growing(10)) < footprint(Growing(10_000))


# -- through the real SDK and the live processor -----------------------------------------------------


def test_live_forbidden_tool_is_reported_while_its_span_is_still_open() -> None:
    from livekit import Rig, build_config

    violations: List[Any] = []
    rig = Rig(build_config([{"id": "no-delete", "assertions": [{"type": "trace_must_not_call_tool", "tool": "delete_database"}]}]),
              on_violation=violations.append)
    t = rig.tracer
    with t.start_as_current_span("invoke_agent ops", attributes={"gen_ai.operation.name": "invoke_agent"}):
        with t.start_as_current_span("execute_tool delete_database", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "delete_database"}) as span:
            seen_before_end = [v.message for v in violations]
            span_id = format(span.get_span_context().span_id, "016x")
    assert seen_before_end == [f"`delete_database` called at call #1 (span {span_id}); it must not be called"]


def test_live_result_check_reads_recorded_attributes_and_redacts_values() -> None:
    from livekit import Rig, build_config

    violations: List[Any] = []
    spec = {"type": "trace_tool_result", "tool": "fetch", "assert": ["json.token matches /^pub_/", "status == ok"]}
    rig = Rig(build_config([{"id": "result", "assertions": [spec]}]), on_violation=violations.append)
    t = rig.tracer
    with t.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}):
        with t.start_as_current_span("execute_tool fetch", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "fetch"}) as span:
            span.set_attribute("gen_ai.tool.call.result", '{"token": "%s"}' % SECRET)
    assert len(violations) == 1
    assert "`json.token matches /^pub_/` (got <redacted>)" in violations[0].message
    assert SECRET not in violations[0].message
