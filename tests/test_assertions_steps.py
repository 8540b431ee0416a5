from __future__ import annotations

from assertion_driver import ModelStep, build, drive

from spanassert.core.model import CloseReason, Verdict

# -- trace_max_steps ---------------------------------------------------------------------------------


def test_steps_count_model_calls_and_tool_calls() -> None:
    run = drive({"type": "trace_max_steps", "max": 3}, [ModelStep(), "search", ModelStep()])
    assert run.verdict is Verdict.PASSED
    assert run.outcome.message == "3 step(s); max 3"


def test_max_steps_fails_at_the_step_that_goes_over_once() -> None:
    run = drive({"type": "trace_max_steps", "max": 2}, [ModelStep(), "search", ModelStep(), "search", ModelStep()])
    assert [(r.phase, r.position) for r in run.failures] == [("step", 3)]
    assert run.first.failure.message == "step #3 goes over the limit; max 2 steps"
    assert run.verdict is Verdict.FAILED
    assert run.outcome.message == "5 step(s); max 2"


def test_max_steps_reacts_to_steps_not_calls() -> None:
    a = build({"type": "trace_max_steps", "max": 2})
    assert a.wants_steps
    assert a.tools == frozenset()
    assert a.needs == frozenset({"steps"})


def test_max_steps_under_the_limit_in_evicted_episode_is_inconclusive() -> None:
    run = drive({"type": "trace_max_steps", "max": 5}, [ModelStep()], close=CloseReason.EVICTED)
    assert run.verdict is Verdict.INCONCLUSIVE


def test_max_steps_at_u32_max_is_ineffective() -> None:
    assert build({"type": "trace_max_steps", "max": 2**32 - 1}).ineffective_reason()
    assert build({"type": "trace_max_steps", "max": 2**32 - 2}).ineffective_reason() is None


# -- trace_max_tool_calls ---------------------------------------------------------------------------


def test_max_tool_calls_counts_every_call_by_default() -> None:
    assert drive({"type": "trace_max_tool_calls", "max": 2}, ["a", "b"]).verdict is Verdict.PASSED
    run = drive({"type": "trace_max_tool_calls", "max": 2}, ["a", ModelStep(), "b", "c", "d"])
    assert [(r.phase, r.position) for r in run.failures] == [("start", 2)]
    assert run.first.failure.message == "`c` called at call #3 (span 0000000000000003) is call 3 of tool calls; max 2"


def test_max_tool_calls_of_one_tool_ignores_others() -> None:
    spec = {"type": "trace_max_tool_calls", "max": 1, "tool": "search"}
    assert build(spec).tools == frozenset({"search"})
    assert drive(spec, ["search", "fetch", "fetch"]).verdict is Verdict.PASSED
    run = drive(spec, ["search", "fetch", "search"])
    assert (run.first.phase, run.first.position) == ("start", 2)
    assert "is call 2 of calls of `search`; max 1" in run.first.failure.message


def test_max_tool_calls_zero_forbids_the_tool() -> None:
    spec = {"type": "trace_max_tool_calls", "max": 0, "tool": "rm"}
    assert build(spec).ineffective_reason() is None
    assert drive(spec, ["rm"]).verdict is Verdict.FAILED


def test_max_tool_calls_under_limit_in_shut_down_episode_is_inconclusive() -> None:
    run = drive({"type": "trace_max_tool_calls", "max": 3}, ["a"], close=CloseReason.SHUTDOWN)
    assert run.verdict is Verdict.INCONCLUSIVE


def test_max_tool_calls_unreachable_bound_is_ineffective() -> None:
    assert build({"type": "trace_max_tool_calls", "max": 2**32}).ineffective_reason()
