from __future__ import annotations

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

from spanassert.core.model import CloseReason, Verdict

# -- trace_must_call_tool ---------------------------------------------------------------------------


def test_required_tool_called_passes() -> None:
    run = drive({"type": "trace_must_call_tool", "tool": "get_weather"}, ["search", "get_weather"])
    assert run.verdict is Verdict.PASSED
    assert run.failures == []
    assert "called 1 time(s); min_calls 1" in run.outcome.message


def test_required_tool_missing_fails_at_close_naming_count_and_bound() -> None:
    run = drive({"type": "trace_must_call_tool", "tool": "get_weather", "min_calls": 2}, ["get_weather", "search"])
    assert run.failures == []  # a liveness rule never fails at a call
    assert run.verdict is Verdict.FAILED
    assert run.outcome.message == "`get_weather` called 1 time(s); min_calls 2"


def test_required_tool_counts_errored_calls() -> None:
    run = drive({"type": "trace_must_call_tool", "tool": "pay", "min_calls": 2}, [err("pay"), ok("pay")])
    assert run.verdict is Verdict.PASSED


def test_required_tool_is_inconclusive_when_episode_evicted_before_count_reached() -> None:
    run = drive({"type": "trace_must_call_tool", "tool": "pay"}, ["search"], close=CloseReason.EVICTED)
    assert run.verdict is Verdict.INCONCLUSIVE
    assert "evicted" in run.outcome.message


def test_required_tool_already_reached_passes_even_when_episode_shut_down() -> None:
    run = drive({"type": "trace_must_call_tool", "tool": "pay"}, ["pay"], close=CloseReason.SHUTDOWN)
    assert run.verdict is Verdict.PASSED


def test_required_tool_counts_a_call_whose_span_never_ended() -> None:
    run = drive({"type": "trace_must_call_tool", "tool": "pay"}, [Call("pay", ends=False)], close=CloseReason.FLUSH)
    assert run.verdict is Verdict.PASSED


def test_required_tool_with_args_match_counts_only_matching_calls() -> None:
    spec = {"type": "trace_must_call_tool", "tool": "lookup", "args_match": {"order_id": "^ORD-"}}
    assert drive(spec, [ok("lookup", {"order_id": "X-1"}), ok("lookup", {"order_id": "ORD-7"})]).verdict is Verdict.PASSED
    run = drive(spec, [ok("lookup", {"order_id": "X-1"}), ok("lookup", {"other": "ORD-7"})])
    assert run.verdict is Verdict.FAILED
    assert run.outcome.message == "`lookup(order_id =~ /^ORD-/)` called 0 time(s); min_calls 1"


def test_required_tool_with_args_match_is_inconclusive_when_arguments_were_not_recorded() -> None:
    spec = {"type": "trace_must_call_tool", "tool": "lookup", "args_match": {"order_id": "^ORD-"}}
    run = drive(spec, [ok("lookup")])
    assert run.verdict is Verdict.INCONCLUSIVE
    assert "not recorded" in run.outcome.message


def test_required_tool_with_args_match_fails_when_unrecorded_calls_could_not_make_up_the_shortfall() -> None:
    spec = {"type": "trace_must_call_tool", "tool": "lookup", "min_calls": 3, "args_match": {"order_id": "^ORD-"}}
    run = drive(spec, [ok("lookup"), ok("lookup", {"order_id": "ORD-1"})])
    assert run.verdict is Verdict.FAILED


def test_required_tool_with_args_match_reads_arguments_recorded_at_span_end() -> None:
    spec = {"type": "trace_must_call_tool", "tool": "lookup", "args_match": {"order_id": "^ORD-"}}
    run = drive(spec, [ok("lookup", {"order_id": "ORD-1"}, args_at=ARGS_AT_END)])
    assert run.verdict is Verdict.PASSED


def test_required_tool_min_calls_zero_is_ineffective() -> None:
    a = build({"type": "trace_must_call_tool", "tool": "x", "min_calls": 0})
    assert "min_calls: 0" in (a.ineffective_reason() or "")


def test_required_tool_empty_name_is_ineffective() -> None:
    assert build({"type": "trace_must_call_tool", "tool": ""}).ineffective_reason()
    assert build({"type": "trace_must_call_tool", "tool": "x"}).ineffective_reason() is None


def test_required_tool_has_no_max_calls_field() -> None:
    with pytest.raises(ConfigRefused) as exc:
        build({"type": "trace_must_call_tool", "tool": "x", "max_calls": 0})
    assert exc.value.codes == ["E_CFG_UNKNOWN_KEY"]


def test_required_tool_bad_args_match_regex_is_a_load_error_at_its_key() -> None:
    with pytest.raises(ConfigRefused) as exc:
        build({"type": "trace_must_call_tool", "tool": "x", "args_match": {"q": "("}})
    assert exc.value.problems[0][0] == "E_CFG_REGEX"
    assert exc.value.problems[0][2] == "args_match.q"


def test_required_tool_only_listens_to_its_own_tool() -> None:
    a = build({"type": "trace_must_call_tool", "tool": "pay"})
    assert a.tools == frozenset({"pay"})
    assert a.decides_on_close


# -- trace_must_not_call_tool -----------------------------------------------------------------------


def test_forbidden_tool_is_reported_at_span_start() -> None:
    run = drive({"type": "trace_must_not_call_tool", "tool": "delete_database"}, ["list", "read", "delete_database"])
    assert run.verdict is Verdict.FAILED
    assert (run.first.phase, run.first.position) == ("start", 2)
    f = run.first.failure
    assert f.message == "`delete_database` called at call #3 (span 0000000000000003); it must not be called"
    assert (f.span_id, f.call_index, f.tool) == ("0000000000000003", 2, "delete_database")


def test_forbidden_tool_is_reported_before_the_call_ends() -> None:
    a = build({"type": "trace_must_not_call_tool", "tool": "rm"})
    ep = Episode(a)
    ep.start(Call("rm"))
    assert [r.phase for r in ep.failures] == ["start"]


def test_forbidden_tool_reports_every_offending_call() -> None:
    run = drive({"type": "trace_must_not_call_tool", "tool": "rm"}, ["rm", "ls", "rm"])
    assert [r.position for r in run.failures] == [0, 2]
    assert "call #1" in run.outcome.message


def test_forbidden_tool_not_called_passes() -> None:
    run = drive({"type": "trace_must_not_call_tool", "tool": "rm"}, ["ls", "rmdir"])
    assert run.verdict is Verdict.PASSED


def test_forbidden_tool_not_seen_in_an_evicted_episode_is_inconclusive() -> None:
    run = drive({"type": "trace_must_not_call_tool", "tool": "rm"}, ["ls"], close=CloseReason.EVICTED)
    assert run.verdict is Verdict.INCONCLUSIVE


def test_forbidden_call_with_args_match_fails_at_start_when_arguments_recorded_then() -> None:
    spec = {"type": "trace_must_not_call_tool", "tool": "http_post", "args_match": {"url": "evil\\.com"}}
    run = drive(spec, [ok("http_post", {"url": "https://ok.org"}), ok("http_post", {"url": "https://evil.com/x"})])
    assert (run.first.phase, run.first.position) == ("start", 1)
    assert "with arguments matching url =~ /evil\\.com/" in run.first.failure.message


def test_forbidden_call_with_args_match_fails_at_end_when_arguments_come_at_end() -> None:
    spec = {"type": "trace_must_not_call_tool", "tool": "http_post", "args_match": {"url": "evil"}}
    run = drive(spec, [ok("http_post", {"url": "evil"}, args_at=ARGS_AT_END)])
    assert (run.first.phase, run.first.position) == ("end", 0)
    assert len(run.failures) == 1


def test_forbidden_call_with_args_match_is_inconclusive_when_arguments_never_recorded() -> None:
    spec = {"type": "trace_must_not_call_tool", "tool": "http_post", "args_match": {"url": "evil"}}
    run = drive(spec, [ok("http_post"), ok("http_post", {"url": "fine"})])
    assert run.verdict is Verdict.INCONCLUSIVE
    assert "whether 1 call(s) of `http_post` are `http_post(url =~ /evil/)` could not be decided" in run.outcome.message
    assert "its arguments were not recorded" in run.outcome.message


def test_forbidden_call_with_args_match_fails_even_when_other_calls_were_undecidable() -> None:
    spec = {"type": "trace_must_not_call_tool", "tool": "http_post", "args_match": {"url": "evil"}}
    run = drive(spec, [ok("http_post"), ok("http_post", {"url": "evil"})])
    assert run.verdict is Verdict.FAILED


def test_forbidden_call_with_args_match_allows_non_matching_calls() -> None:
    spec = {"type": "trace_must_not_call_tool", "tool": "http_post", "args_match": {"url": "evil"}}
    assert drive(spec, [ok("http_post", {"url": "fine"}), ok("other", {"url": "evil"})]).verdict is Verdict.PASSED


def test_forbidden_tool_empty_name_is_ineffective() -> None:
    assert build({"type": "trace_must_not_call_tool", "tool": ""}).ineffective_reason()


def test_forbidden_tool_needs_arguments_only_with_args_match() -> None:
    assert build({"type": "trace_must_not_call_tool", "tool": "x"}).needs == frozenset()
    assert build({"type": "trace_must_not_call_tool", "tool": "x", "args_match": {"a": "b"}}).needs == frozenset({"arguments"})
