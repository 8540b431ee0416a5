from __future__ import annotations

import math

import pytest
from assertion_driver import (
    ARGS_AT_END,
    Call,
    ConfigRefused,
    Episode,
    build,
    drive,
    err,
    ok,
)

from spanassert.core.durations import parse_duration
from spanassert.core.model import CloseReason, Verdict

# -- parse_duration ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, seconds",
    [(2, 2.0), (0.25, 0.25), ("500ms", 0.5), ("2s", 2.0), ("1m", 60.0), ("1.5h", 5400.0), ("250us", 0.00025), (" 10 ms ", 0.01)],
)
def test_parse_duration_accepts_seconds_and_unit_strings(text: object, seconds: float) -> None:
    assert math.isclose(parse_duration(text), seconds)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["2", "fast", "1 day", "-1s", -1, True])
def test_parse_duration_rejects_anything_else_naming_the_forms(bad: object) -> None:
    with pytest.raises(ValueError) as exc:
        parse_duration(bad)  # type: ignore[arg-type]
    assert "duration" in str(exc.value)


# -- trace_tool_status ------------------------------------------------------------------------------


def test_tool_status_passes_when_every_call_succeeds_or_is_unset() -> None:
    run = drive({"type": "trace_tool_status"}, [ok("a"), Call("b")])
    assert run.verdict is Verdict.PASSED


def test_tool_status_fails_at_the_end_of_the_errored_call() -> None:
    run = drive({"type": "trace_tool_status", "tool": "pay"}, [ok("pay"), err("other"), err("pay", error_type="Timeout")])
    assert [(r.phase, r.position) for r in run.failures] == [("end", 2)]
    assert run.first.failure.message == "`pay` ended in error (Timeout) at call #3 (span 0000000000000003); it must succeed"
    assert "first violation at call #3" in run.outcome.message


def test_tool_status_counts_error_type_without_error_status_as_error() -> None:
    run = drive({"type": "trace_tool_status"}, [Call("a", error_type="ValueError")])
    assert run.verdict is Verdict.FAILED


def test_tool_status_with_a_call_still_open_at_close_is_inconclusive() -> None:
    run = drive({"type": "trace_tool_status"}, [ok("a"), Call("b", ends=False)])
    assert run.verdict is Verdict.INCONCLUSIVE
    assert "had not ended" in run.outcome.message


def test_tool_status_in_evicted_episode_is_inconclusive() -> None:
    assert drive({"type": "trace_tool_status"}, [ok("a")], close=CloseReason.EVICTED).verdict is Verdict.INCONCLUSIVE


def test_tool_status_must_succeed_only_accepts_true() -> None:
    with pytest.raises(ConfigRefused):
        build({"type": "trace_tool_status", "must_succeed": False})
    assert build({"type": "trace_tool_status", "must_succeed": True}).ineffective_reason() is None


# -- trace_tool_duration ----------------------------------------------------------------------------


def test_tool_duration_fails_at_end_of_the_slow_call() -> None:
    spec = {"type": "trace_tool_duration", "tool": "fetch", "max": "500ms"}
    run = drive(spec, [Call("fetch", duration=0.2), Call("other", duration=9), Call("fetch", duration=1.5)])
    assert [(r.phase, r.position) for r in run.failures] == [("end", 2)]
    assert run.first.failure.message == "`fetch` took 1.5s at call #3 (span 0000000000000003); max 500ms"


def test_tool_duration_accepts_number_of_seconds() -> None:
    assert drive({"type": "trace_tool_duration", "max": 2}, [Call("a", duration=2.0)]).verdict is Verdict.PASSED
    assert drive({"type": "trace_tool_duration", "max": 2}, [Call("a", duration=2.001)]).verdict is Verdict.FAILED


def test_tool_duration_of_a_call_that_never_ended_is_inconclusive() -> None:
    run = drive({"type": "trace_tool_duration", "max": "1s"}, [Call("a", ends=False)])
    assert run.verdict is Verdict.INCONCLUSIVE


def test_tool_duration_bad_string_is_refused_by_the_field_schema() -> None:
    with pytest.raises(ConfigRefused) as exc:
        build({"type": "trace_tool_duration", "max": "soon"})
    assert exc.value.codes == ["E_CFG_SCHEMA"]


def test_tool_duration_infinite_max_is_ineffective() -> None:
    assert build({"type": "trace_tool_duration", "max": float("inf")}).ineffective_reason()
    assert build({"type": "trace_tool_duration", "max": 0}).ineffective_reason() is None


# -- trace_args_valid -------------------------------------------------------------------------------

DISCOUNT = {
    "type": "trace_args_valid",
    "tool": "apply_discount",
    "schema": {"type": "object", "properties": {"percent": {"type": "number", "maximum": 30}}, "required": ["percent"]},
}


def test_args_valid_passes_on_valid_arguments() -> None:
    calls = [ok("apply_discount", {"percent": p}) for p in (10, 15, 25, 0)]
    assert drive(DISCOUNT, calls).verdict is Verdict.PASSED


def test_args_valid_fails_at_start_when_arguments_recorded_then() -> None:
    run = drive(DISCOUNT, [ok("apply_discount", {"percent": 10}), ok("apply_discount", {"percent": 50})])
    assert [(r.phase, r.position) for r in run.failures] == [("start", 1)]
    assert run.first.failure.message == (
        "`apply_discount` arguments at call #2 (span 0000000000000002) violate the schema: percent: violates `maximum` 30"
    )


def test_args_valid_fails_at_end_when_arguments_come_at_end() -> None:
    run = drive(DISCOUNT, [ok("apply_discount", {"reason": "x"}, args_at=ARGS_AT_END)])
    assert [(r.phase, r.position) for r in run.failures] == [("end", 0)]
    assert "(root): violates `required`" in run.first.failure.message


def test_args_valid_reports_a_violation_before_the_call_ends() -> None:
    ep = Episode(build(DISCOUNT))
    ep.start(ok("apply_discount", {"percent": 99}))
    assert [r.phase for r in ep.failures] == ["start"]


def test_args_valid_unrecorded_arguments_are_inconclusive() -> None:
    run = drive(DISCOUNT, [ok("apply_discount")])
    assert run.verdict is Verdict.INCONCLUSIVE
    assert "could not be judged" in run.outcome.message
    assert "`apply_discount` at call #1 (span 0000000000000001): its arguments were not recorded" in run.outcome.message


def test_args_valid_truncated_arguments_are_inconclusive() -> None:
    run = drive(DISCOUNT, [ok("apply_discount", '{"percent": 1')])
    assert run.verdict is Verdict.INCONCLUSIVE


def test_args_valid_ignores_other_tools() -> None:
    # No call of the tool: nothing to judge (the zero-calls rule of every per-call check).
    assert drive(DISCOUNT, [ok("other", {"percent": 99})]).verdict is Verdict.NOT_APPLICABLE
    assert drive(DISCOUNT, [ok("other", {"percent": 99}), ok("apply_discount", {"percent": 5})]).verdict \
        is Verdict.PASSED


def test_args_valid_vacuous_schema_is_ineffective() -> None:
    assert build({"type": "trace_args_valid", "tool": "t", "schema": {"description": "anything"}}).ineffective_reason()
    assert build({"type": "trace_args_valid", "tool": "t", "schema": True}).ineffective_reason()


def test_args_valid_invalid_schema_is_a_load_error() -> None:
    with pytest.raises(ConfigRefused) as exc:
        build({"type": "trace_args_valid", "tool": "t", "schema": {"type": "no-such-type"}})
    assert exc.value.codes == ["E_CFG_SCHEMA"]
    assert exc.value.problems[0][2] == "schema.type"  # at the offending keyword, not the schema


@pytest.mark.parametrize("text, seconds", [("250us", 250e-6), ("250µs", 250e-6), ("5 m", 300.0), ("1500ns", 1.5e-6)])
def test_settings_and_assertions_share_one_duration_grammar(text: str, seconds: float) -> None:
    # The same string means the same duration in `episodes.idle_timeout` and `trace_tool_duration.max`.
    from spanassert.config import load_config

    config = load_config(f"version: 1\nepisodes: {{idle_timeout: '{text}'}}\n"
                         f"tests: [{{id: t, assertions: [{{type: trace_tool_duration, max: '{text}'}}]}}]\n")
    (assertion,) = config.tests[0].assertions
    assert config.episodes.idle_timeout == pytest.approx(seconds)
    assert assertion.max_s == pytest.approx(seconds)
