from __future__ import annotations

import itertools
import random
from typing import List

import pytest
from assertion_driver import ConfigRefused, build, drive

from spanassert.core.model import CloseReason, Verdict

SEQ = ["login", "view_balance", "logout"]


def seq(sequence: List[str], allow: bool) -> dict:
    return {"type": "trace_tool_sequence", "sequence": sequence, "allow_other_tools": allow}


def traj(expected: List[str], mode: str) -> dict:
    return {"type": "trace_trajectory", "expected": expected, "mode": mode}


# -- trace_tool_sequence ----------------------------------------------------------------------------


def test_allow_other_tools_is_required() -> None:
    with pytest.raises(ConfigRefused) as exc:
        build({"type": "trace_tool_sequence", "sequence": ["a"]})
    assert exc.value.codes == ["E_CFG_REQUIRED"]


def test_ordered_sequence_passes_with_other_tools_between() -> None:
    run = drive(seq(SEQ, True), ["login", "search", "view_balance", "login", "logout"])
    assert run.verdict is Verdict.PASSED


def test_ordered_sequence_out_of_order_fails_at_close() -> None:
    run = drive(seq(SEQ, True), ["login", "logout", "view_balance"])
    assert run.failures == []
    assert run.verdict is Verdict.FAILED
    assert "`logout` not called after `view_balance`" in run.outcome.message


def test_ordered_sequence_complete_passes_even_if_episode_evicted() -> None:
    run = drive(seq(SEQ, True), SEQ, close=CloseReason.EVICTED)
    assert run.verdict is Verdict.PASSED


def test_ordered_sequence_incomplete_in_evicted_episode_is_inconclusive() -> None:
    run = drive(seq(SEQ, True), ["login"], close=CloseReason.EVICTED)
    assert run.verdict is Verdict.INCONCLUSIVE


def test_ordered_sequence_only_listens_to_its_tools() -> None:
    assert build(seq(SEQ, True)).tools == frozenset(SEQ)
    assert build(seq(SEQ, False)).tools is None


def test_exact_sequence_passes_on_equal_lists() -> None:
    assert drive(seq(SEQ, False), SEQ).verdict is Verdict.PASSED


def test_exact_sequence_fails_at_start_of_first_deviating_call() -> None:
    run = drive(seq(SEQ, False), ["login", "search", "view_balance", "logout"])
    assert (run.first.phase, run.first.position) == ("start", 1)
    assert len(run.failures) == 1
    assert run.first.failure.message == (
        "`search` called at call #2 (span 0000000000000002); the exact sequence "
        "[login, view_balance, logout] expects `view_balance` as call 2 of 3"
    )


def test_exact_sequence_fails_at_start_of_call_beyond_the_list() -> None:
    run = drive(seq(SEQ, False), SEQ + ["login"])
    assert (run.first.phase, run.first.position) == ("start", 3)
    assert "beyond the 3 call(s)" in run.first.failure.message


def test_exact_sequence_too_short_fails_at_close() -> None:
    run = drive(seq(SEQ, False), ["login", "view_balance"])
    assert run.failures == []
    assert run.verdict is Verdict.FAILED
    assert run.outcome.message == "2 of the 3 call(s) of [login, view_balance, logout] made; next expected `logout`"


def test_exact_sequence_matched_so_far_in_flushed_episode_is_inconclusive() -> None:
    assert drive(seq(SEQ, False), SEQ, close=CloseReason.FLUSH).verdict is Verdict.INCONCLUSIVE
    assert drive(seq(SEQ, False), ["login"], close=CloseReason.FLUSH).verdict is Verdict.INCONCLUSIVE


def test_empty_exact_sequence_means_no_tool_calls() -> None:
    spec = seq([], False)
    assert build(spec).ineffective_reason() is None
    assert drive(spec, []).verdict is Verdict.PASSED
    run = drive(spec, ["anything"])
    assert (run.first.phase, run.first.position) == ("start", 0)
    assert "expected sequence is empty" in run.first.failure.message


def test_empty_ordered_sequence_is_ineffective() -> None:
    assert build(seq([], True)).ineffective_reason()


# -- trace_trajectory -------------------------------------------------------------------------------


def test_trajectory_mode_defaults_to_exact() -> None:
    a = build({"type": "trace_trajectory", "expected": ["a"]})
    assert a.mode == "exact"


def test_trajectory_unknown_mode_is_refused() -> None:
    with pytest.raises(ConfigRefused) as exc:
        build(traj(["a"], "superset"))
    assert exc.value.codes == ["E_CFG_SCHEMA"]


@pytest.mark.parametrize(
    "mode, actual, verdict",
    [
        ("exact", ["a", "b"], Verdict.PASSED),
        ("exact", ["a", "b", "c"], Verdict.FAILED),
        ("exact", ["a"], Verdict.FAILED),
        ("prefix", ["a", "b", "c", "a"], Verdict.PASSED),
        ("prefix", ["b", "a"], Verdict.FAILED),
        ("prefix", ["a"], Verdict.FAILED),
        ("contains", ["x", "a", "y", "b"], Verdict.PASSED),
        ("contains", ["b", "a"], Verdict.FAILED),
        ("subset", ["b", "x", "a"], Verdict.PASSED),
        ("subset", ["b", "b"], Verdict.FAILED),
    ],
)
def test_trajectory_modes_match_understudy(mode: str, actual: List[str], verdict: Verdict) -> None:
    assert drive(traj(["a", "b"], mode), actual).verdict is verdict


def test_prefix_fails_at_start_of_first_deviating_call() -> None:
    run = drive(traj(["a", "b"], "prefix"), ["a", "c", "b"])
    assert (run.first.phase, run.first.position) == ("start", 1)
    assert "expects `b` as call 2" in run.first.failure.message


def test_prefix_once_met_stays_passed_even_in_evicted_episode() -> None:
    assert drive(traj(["a"], "prefix"), ["a", "z"], close=CloseReason.EVICTED).verdict is Verdict.PASSED


def test_subset_names_every_missing_tool() -> None:
    run = drive(traj(["a", "b", "c"], "subset"), ["b"])
    assert run.outcome.message == "never called: `a`, `c`"


def test_subset_incomplete_in_timed_out_episode_is_inconclusive() -> None:
    run = drive(traj(["a", "b"], "subset"), ["a"], close=CloseReason.SHUTDOWN)
    assert run.verdict is Verdict.INCONCLUSIVE


def test_empty_expected_is_no_calls_in_exact_mode_and_ineffective_elsewhere() -> None:
    assert build(traj([], "exact")).ineffective_reason() is None
    assert drive(traj([], "exact"), ["a"]).verdict is Verdict.FAILED
    for mode in ("prefix", "contains", "subset"):
        assert build(traj([], mode)).ineffective_reason(), mode


def _is_subsequence(expected: List[str], actual: List[str]) -> bool:
    it = iter(actual)
    return all(any(x == y for y in it) for x in expected)


def test_incremental_modes_agree_with_whole_list_definitions() -> None:
    rng = random.Random(7)
    tools = ["a", "b", "c"]
    for _ in range(300):
        expected = [rng.choice(tools) for _ in range(rng.randint(1, 3))]
        actual = [rng.choice(tools) for _ in range(rng.randint(0, 5))]
        want = {
            "exact": actual == expected,
            "prefix": actual[: len(expected)] == expected,
            "contains": _is_subsequence(expected, actual),
            "subset": set(expected) <= set(actual),
        }
        for mode, ok in want.items():
            got = drive(traj(expected, mode), actual).verdict
            assert got is (Verdict.PASSED if ok else Verdict.FAILED), (mode, expected, actual)
        for allow, mode in ((True, "contains"), (False, "exact")):
            got = drive(seq(expected, allow), actual).verdict
            assert got is (Verdict.PASSED if want[mode] else Verdict.FAILED), (allow, expected, actual)


def test_sequence_and_trajectory_agree_on_all_short_lists() -> None:
    for n in range(4):
        for actual in itertools.product("ab", repeat=n):
            for allow, mode in ((True, "contains"), (False, "exact")):
                a = drive(seq(["a", "b"], allow), list(actual)).verdict
                b = drive(traj(["a", "b"], mode), list(actual)).verdict
                assert a is b
