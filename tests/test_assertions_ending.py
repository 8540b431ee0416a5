from __future__ import annotations

from typing import Any, Dict

import pytest
from assertion_driver import build, drive

from spanassert.config import load_config
from spanassert.core.model import CloseReason, ConfigError, Verdict

FINAL: Dict[str, Any] = {"type": "trace_final_tool", "tool": "reply"}
SUFFIX: Dict[str, Any] = {"type": "trace_trajectory", "expected": ["verify", "reply"], "mode": "suffix"}

# -- trace_final_tool ----------------------------------------------------------------------------------


def test_final_tool_passes_when_the_last_call_is_the_tool() -> None:
    run = drive(FINAL, ["search", "reply", "search", "reply"])
    assert run.verdict is Verdict.PASSED
    assert run.outcome.message == "the last of 4 call(s) is `reply`"


def test_final_tool_fails_at_close_naming_the_last_call() -> None:
    run = drive(FINAL, ["reply", "search"])
    assert run.failures == []
    assert run.outcome.verdict is Verdict.FAILED
    assert run.outcome.span_id == "0000000000000002"
    assert run.outcome.message == "the last call is `search` at call #2 (span 0000000000000002); the episode must end with `reply`"
    assert drive(FINAL, []).verdict is Verdict.FAILED


def test_final_tool_is_inconclusive_on_a_cut_short_episode() -> None:
    assert drive(FINAL, ["reply"], close=CloseReason.EVICTED).verdict is Verdict.INCONCLUSIVE
    assert drive(FINAL, [], close=CloseReason.SHUTDOWN).verdict is Verdict.INCONCLUSIVE


def test_final_tool_reacts_to_every_call() -> None:
    a = build(FINAL)
    assert a.tools is None and a.decides_on_close


def test_final_tool_needs_a_tool() -> None:
    with pytest.raises(ConfigError):
        load_config("version: 1\ntests:\n  - id: t\n    assertions:\n      - {type: trace_final_tool, tool: ''}\n")


# -- trace_trajectory mode: suffix ---------------------------------------------------------------------------


def test_suffix_passes_when_the_calls_end_with_expected() -> None:
    assert drive(SUFFIX, ["search", "verify", "reply"]).verdict is Verdict.PASSED
    assert drive(SUFFIX, ["verify", "reply"]).verdict is Verdict.PASSED


def test_suffix_fails_at_close_naming_the_last_call() -> None:
    run = drive(SUFFIX, ["verify", "reply", "search"])
    assert run.outcome.verdict is Verdict.FAILED and run.outcome.span_id == "0000000000000003"
    assert run.outcome.message == ("the calls end with [reply, search] (last: call #3 (span 0000000000000003)); "
                                   "they must end with [verify, reply]")
    assert drive(SUFFIX, ["reply"]).verdict is Verdict.FAILED
    assert drive(SUFFIX, []).verdict is Verdict.FAILED


def test_suffix_is_inconclusive_on_a_cut_short_episode() -> None:
    assert drive(SUFFIX, ["verify", "reply"], close=CloseReason.IDLE).verdict is Verdict.PASSED
    assert drive(SUFFIX, ["verify", "reply"], close=CloseReason.EVICTED).verdict is Verdict.INCONCLUSIVE


def test_empty_suffix_is_refused() -> None:
    with pytest.raises(ConfigError) as info:
        load_config("version: 1\ntests:\n  - id: t\n    assertions:\n"
                    "      - {type: trace_trajectory, expected: [], mode: suffix}\n")
    assert "E_ASSERT_INEFFECTIVE" in [d.code for d in info.value.diagnostics]
