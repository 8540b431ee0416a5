from __future__ import annotations

import pytest
from assertion_driver import Call, ConfigRefused, Episode, build, drive, err, ok

from spanassert.core.model import CloseReason, Verdict


def rule(*lines: str, **extra: object) -> dict:
    spec = {"type": "trace_tool_result", "tool": "registry_latest", "assert": list(lines)}
    spec.update(extra)
    return spec


SHAPE = rule("status == ok", "json.version matches /^\\d+\\./", "json.tags is array")


def test_tool_result_passes_when_every_line_holds() -> None:
    run = drive(SHAPE, [ok("registry_latest", result={"version": "0.13.0", "tags": []})])
    assert run.verdict is Verdict.PASSED


def test_tool_result_fails_at_call_end_listing_every_failing_line() -> None:
    run = drive(
        SHAPE,
        [
            ok("registry_latest", result={"version": "0.13.0", "tags": []}),
            err("registry_latest", result={"version": "latest", "tags": "x"}),
        ],
    )
    assert [(r.phase, r.position) for r in run.failures] == [("end", 1)]
    assert run.first.failure.message == (
        "`registry_latest` result at call #2 (span 0000000000000002) failed 3 of 3 assertion(s): "
        "`status == ok` (got error); `json.version matches /^\\d+\\./` (got <redacted>); `json.tags is array` (got string)"
    )


def test_tool_result_pin_shows_the_observed_value_only_with_result_evidence() -> None:
    calls = [ok("registry_latest", result={"version": "0.13.0"})]
    hidden = drive(rule('json.version == "0.12.1"'), calls)
    assert hidden.first.failure.message.endswith('`json.version == "0.12.1"` (got <redacted>)')
    shown = drive(rule('json.version == "0.12.1"', evidence="result"), calls)
    assert shown.first.failure.message.endswith("`json.version == \"0.12.1\"` (got '0.13.0')")


def test_tool_result_is_evaluated_at_call_end_not_start() -> None:
    ep = Episode(build(rule("status == ok")))
    call = ep.start(err("registry_latest"))
    assert ep.failures == []
    ep.end(err("registry_latest"), call)
    assert [r.phase for r in ep.failures] == ["end"]


def test_tool_result_not_recorded_is_inconclusive() -> None:
    run = drive(rule("json.version is string"), [ok("registry_latest")])
    assert run.verdict is Verdict.INCONCLUSIVE
    assert "could not be judged" in run.outcome.message


def test_tool_result_numeric_status_absent_is_inconclusive() -> None:
    run = drive(rule("status == 200"), [ok("registry_latest", result={"version": "1"})])
    assert run.verdict is Verdict.INCONCLUSIVE


def test_tool_result_json_form_on_plain_text_fails() -> None:
    run = drive(rule("json.version is set"), [ok("registry_latest", result="Service unavailable")])
    assert run.verdict is Verdict.FAILED
    assert "(the result is not JSON)" in run.first.failure.message


def test_tool_result_ignores_other_tools() -> None:
    # No call of the tool: nothing to judge (the zero-calls rule of every per-call check).
    assert drive(rule("status == ok"), [err("other")]).verdict is Verdict.NOT_APPLICABLE


def test_tool_result_open_call_at_close_is_inconclusive() -> None:
    run = drive(rule("status == ok"), [Call("registry_latest", ends=False)])
    assert run.verdict is Verdict.INCONCLUSIVE


def test_tool_result_in_evicted_episode_is_inconclusive() -> None:
    run = drive(rule("status == ok"), [ok("registry_latest")], close=CloseReason.EVICTED)
    assert run.verdict is Verdict.INCONCLUSIVE


def test_tool_result_bad_line_is_a_load_error_naming_the_line() -> None:
    with pytest.raises(ConfigRefused) as exc:
        build(rule("status == ok", "version = json.version"))
    code, message, field, hint = exc.value.problems[0]
    assert (code, field) == ("E_CFG_RESULT_GRAMMAR", "assert[1]")
    assert "`version = json.version`" in message and "binds" in message
    assert "status ==|!=" in (hint or "")


def test_tool_result_empty_assert_list_is_ineffective() -> None:
    assert build(rule()).ineffective_reason()
    assert build(rule("status == ok")).ineffective_reason() is None


def test_tool_result_needs_status_only_when_a_line_reads_it() -> None:
    assert build(rule("json.a is set")).needs == frozenset({"result"})
    assert build(rule("status == error")).needs == frozenset({"result", "status"})
