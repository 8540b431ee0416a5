from __future__ import annotations

from typing import Any, Dict

import pytest
from assertion_driver import ARGS_AT_START, Call, Episode, build, drive, footprint, ok

from spanassert.assertions.flow import MAX_FLOW_SOURCES
from spanassert.config import load_config
from spanassert.core.model import CloseReason, ConfigError, Verdict

EMAIL = "jane.customer@example.org"
SPEC: Dict[str, Any] = {"type": "trace_no_flow", "from": {"tool": "lookup_customer"}, "to": {"tool": "send_email"},
                        "min_length": 8}


def lookup(**kw: Any) -> Call:
    return ok("lookup_customer", {"id": 7}, result={"name": "Jane", "email": EMAIL, "account": 123456789012, **kw})


def test_a_source_value_inside_a_sink_argument_fails_at_the_sink() -> None:
    run = drive(SPEC, [lookup(), ok("search", {"q": EMAIL}), ok("send_email", {"to": "x@y.z", "body": f"Hi {EMAIL}!"})])
    assert [(r.phase, r.position) for r in run.failures] == [("start", 2)]  # arguments known at start
    assert run.first.failure.message == (
        "a value read from `lookup_customer` ($.email of its result at call #1 (span 0000000000000001)) appears in "
        "the arguments of `send_email` at $.body, call #3 (span 0000000000000003); it must not flow there")
    assert EMAIL not in " ".join(run.messages)
    assert run.first.failure.tool == "send_email"
    late = drive(SPEC, [lookup(), Call("send_email", {"body": EMAIL}, args_at="end")])
    assert [(r.phase, r.position) for r in late.failures] == [("end", 1)]


def test_numbers_flow_by_their_decimal_text() -> None:
    run = drive(SPEC, [lookup(), ok("send_email", {"body": "acct 123456789012"})])
    assert run.verdict is Verdict.FAILED and "$.account" in run.first.failure.message
    assert drive(SPEC, [lookup(), ok("send_email", {"n": 123456789012})]).verdict is Verdict.FAILED


def test_short_values_and_other_tools_do_not_count() -> None:
    calls = [lookup(), ok("send_email", {"body": "Hi Jane, your id 7"}), ok("search", {"q": EMAIL})]
    run = drive(SPEC, calls)
    assert run.verdict is Verdict.PASSED
    assert run.outcome.message == "no value read from `lookup_customer` (2 followed) reached `send_email`"


def test_a_sink_before_the_source_read_is_not_a_flow() -> None:
    assert drive(SPEC, [ok("send_email", {"body": EMAIL}), lookup()]).verdict is Verdict.PASSED


def test_paths_narrow_source_and_sink() -> None:
    spec = dict(SPEC, **{"from": {"tool": "lookup_customer", "path": "email"}, "to": {"tool": "send_email", "path": "to"}})
    assert drive(spec, [lookup(), ok("send_email", {"to": "a@b.cd", "body": EMAIL})]).verdict is Verdict.PASSED
    assert drive(spec, [lookup(), ok("send_email", {"to": EMAIL})]).verdict is Verdict.FAILED
    spec = dict(SPEC, **{"from": {"tool": "lookup_customer", "path": "rows.*.iban"}})
    rows = ok("lookup_customer", {}, result={"rows": [{"iban": "DE89370400440532013000"}, {"iban": "GB82WEST12345698765432"}]})
    run = drive(spec, [rows, ok("send_email", {"body": "pay GB82WEST12345698765432"})])
    assert "$.rows[1].iban" in run.first.failure.message


def test_a_sink_path_needs_named_arguments_a_bare_value_is_undecidable() -> None:
    # Issue 12 situation 4: a sink recorded as the bare value (no definition to bind it) has no
    # `to.path` to look under; the rule must not pass on it.
    spec = dict(SPEC, to={"tool": "send_email", "path": "to"})
    run = drive(spec, [lookup(), ok("send_email", EMAIL)])
    assert run.verdict is Verdict.INCONCLUSIVE and "not an object with `to.path` in it" in run.outcome.message
    # Without a path, the bare value itself is searched.
    assert drive(SPEC, [lookup(), ok("send_email", EMAIL)]).verdict is Verdict.FAILED


def test_any_sink_when_to_tool_is_left_out_and_arguments_at_start() -> None:
    spec = dict(SPEC, to={})
    run = drive(spec, [lookup(), Call("anything", {"x": [EMAIL]}, args_at=ARGS_AT_START)])
    assert [(r.phase, r.position) for r in run.failures] == [("start", 1)]
    assert "$.x[0]" in run.first.failure.message


def test_no_source_call_is_not_applicable() -> None:
    run = drive(SPEC, [ok("send_email", {"body": EMAIL})])
    assert run.verdict is Verdict.NOT_APPLICABLE


@pytest.mark.parametrize("calls, why", [
    ([Call("lookup_customer", {}, status="ok"), ok("send_email", {"body": "x"})], "were not recorded"),
    ([ok("lookup_customer", {}, result='{"email": "jane.customer@exa'), ok("send_email", {"body": "x"})], "read whole"),
    ([lookup(), Call("send_email", status="ok")], "arguments of 1 call(s)"),
])
def test_unknown_content_makes_a_pass_inconclusive(calls: Any, why: str) -> None:
    run = drive(SPEC, calls)
    assert run.verdict is Verdict.INCONCLUSIVE and why in run.outcome.message


def test_cut_short_episode_is_inconclusive() -> None:
    assert drive(SPEC, [lookup()], close=CloseReason.IDLE).verdict is Verdict.PASSED
    assert drive(SPEC, [lookup()], close=CloseReason.EVICTED).verdict is Verdict.INCONCLUSIVE


def test_past_the_cap_a_pass_is_inconclusive_but_a_flow_of_a_kept_value_still_fails() -> None:
    ep = Episode(build(SPEC))
    big = {f"k{i}": f"value-number-{i:06d}" for i in range(MAX_FLOW_SOURCES + 50)}
    ep.play([ok("lookup_customer", {}, result=big)])
    assert ep.state.count == MAX_FLOW_SOURCES
    size = footprint(ep.state)
    ep.play([ok("lookup_customer", {}, result={"x": f"another-value-{i:08d}"}) for i in range(100)])
    assert footprint(ep.state) == size
    assert ep.close().verdict is Verdict.INCONCLUSIVE
    ep.play([ok("send_email", {"body": "see value-number-000003 now"})])
    assert ep.close().verdict is Verdict.FAILED


def test_min_length_beyond_what_is_read_is_refused() -> None:
    text = ("version: 1\ntests:\n  - id: t\n    assertions:\n      - type: trace_no_flow\n"
            "        from: {tool: a}\n        to: {tool: b}\n        min_length: 100001\n")
    with pytest.raises(ConfigError) as info:
        load_config(text)
    assert "E_ASSERT_INEFFECTIVE" in [d.code for d in info.value.diagnostics]


def test_from_needs_a_tool() -> None:
    text = "version: 1\ntests:\n  - id: t\n    assertions:\n      - type: trace_no_flow\n        from: {path: a}\n        to: {}\n"
    with pytest.raises(ConfigError):
        load_config(text)


@pytest.mark.parametrize("arguments, where", [
    ({EMAIL: "cc"}, "$ (an object key)"),
    ({"recipients": {f"<{EMAIL}>": {"role": "to"}}}, "$.recipients (an object key)"),
    ({"batch": [{"body": "hello"}, {EMAIL: True}]}, "$.batch[1] (an object key)"),
])
def test_a_source_value_used_as_an_object_key_of_the_sink_flows_too(arguments: Dict[str, Any], where: str) -> None:
    """Arguments keyed by the value read (a mapping of recipients by address) carry it: they were
    judged `passed` before keys were looked at. The key itself is never shown."""
    run = drive(SPEC, [lookup(), ok("send_email", arguments)])
    assert run.verdict is Verdict.FAILED
    assert f"appears in the arguments of `send_email` at {where}," in run.first.failure.message
    assert EMAIL not in " ".join(run.messages)
    narrowed = dict(SPEC, to={"tool": "send_email", "path": "recipients"})
    assert drive(narrowed, [lookup(), ok("send_email", {"recipients": {EMAIL: 1}})]).verdict is Verdict.FAILED
    assert drive(narrowed, [lookup(), ok("send_email", {"cc": {EMAIL: 1}, "recipients": {}})]).verdict is Verdict.PASSED


def test_a_from_path_no_result_holds_is_not_a_pass() -> None:
    """review11: `from.path` that selects nothing in any result (the value sits deeper, in a wrapper
    the path does not name) passed, "0 followed"; nothing was followed, so the rule does not apply."""
    spec = dict(SPEC, **{"from": {"tool": "lookup_customer", "path": "email"}})
    wrapped = ok("lookup_customer", {"id": 7}, result={"customer": {"email": EMAIL}})
    run = drive(spec, [wrapped, ok("send_email", {"to": "x@y.z"})])
    assert run.verdict is Verdict.NOT_APPLICABLE
    assert "returned nothing under `email`" in run.outcome.message
    assert drive(spec, [lookup(), ok("send_email", {"to": "x@y.z"})]).verdict is Verdict.PASSED
