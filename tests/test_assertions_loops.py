from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from assertion_driver import Call, Episode, build, drive, footprint, ok

from spanassert.assertions.loops import MAX_DISTINCT_CALLS
from spanassert.config import load_config
from spanassert.core.model import CloseReason, ConfigError, Verdict

NO_CYCLES: Dict[str, Any] = {"type": "trace_no_repeat", "max": 2, "cycle_length": 0}


def test_the_same_call_over_max_fails_at_the_call_that_goes_over() -> None:
    calls = [ok("search", {"q": "x", "n": 1}), ok("search", {"n": 1, "q": "x"}), ok("search", {"q": "y"}),
             ok("search", {"q": "x", "n": 1}), ok("search", {"q": "x", "n": 1})]
    run = drive(NO_CYCLES, calls)
    assert [(r.phase, r.position) for r in run.failures] == [("end", 3)]
    assert run.first.failure.message == (
        "`search` called at call #4 (span 0000000000000004) with the same arguments as 2 earlier call(s); "
        "max 2 identical call(s)")
    assert run.outcome.verdict is Verdict.FAILED


def test_key_order_and_whitespace_do_not_make_calls_different_but_values_do() -> None:
    same = [ok("a", '{"x": 1, "y": [1, 2]}'), ok("a", '{"y":[1,2],"x":1}'), ok("a", {"x": 1, "y": [1, 2]})]
    assert drive(NO_CYCLES, same).verdict is Verdict.FAILED
    different = [ok("a", {"x": 1}), ok("a", {"x": 1.5}), ok("a", {"x": "1"}), ok("b", {"x": 1}), ok("a", {"x": 1})]
    assert drive(NO_CYCLES, different).verdict is Verdict.PASSED


EQUAL_VALUES = {
    "an integer and a number with a zero fraction": ('{"q": 1}', '{"q": 1.0}'),
    "an exponent": ('{"q": 1}', '{"q": 1e0}'),
    "a large number written with an exponent": ('{"q": 100000000000000000000}', '{"q": 1E20}'),
    "negative zero": ('{"q": 0}', '{"q": -0.0}'),
    "nested, in an array": ('{"q": [1, {"r": 2}]}', '{"q": [1.0, {"r": 2.00}]}'),
    "key order": ('{"a": 1, "b": 2}', '{"b": 2, "a": 1}'),
    "a composed and a decomposed string": ('{"q": "caf\u00e9"}', '{"q": "cafe\u0301"}'),
    "a composed and a decomposed key": ('{"caf\u00e9": 1}', '{"cafe\u0301": 1}'),
    "escaped and unescaped non-ASCII": ('{"q": "caf\u00e9"}', '{"q": "café"}'),
    "unescaped composed and decomposed": ('{"q": "café"}', '{"q": "café"}'),
    "a bare number argument": ('2', '2.0'),
}


@pytest.mark.parametrize("case", list(EQUAL_VALUES))
def test_arguments_that_are_equal_values_are_the_same_call(case: str) -> None:
    first, second = EQUAL_VALUES[case]
    run = drive(NO_CYCLES, [ok("a", first), ok("a", second), ok("a", second)])
    assert run.verdict is Verdict.FAILED, case
    assert [(r.phase, r.position) for r in run.failures] == [("end", 2)]
    run = drive(dict(NO_CYCLES, window=3), [ok("a", first), ok("a", second), ok("a", first)])
    assert run.verdict is Verdict.FAILED, case
    run = drive(dict(NO_CYCLES, window=100), [ok("a", first), ok("a", second), ok("a", first)])
    assert run.verdict is Verdict.FAILED, case


def test_values_that_only_look_alike_stay_different_calls() -> None:
    different = [ok("a", '{"q": 1}'), ok("a", '{"q": 1.5}'), ok("a", '{"q": true}'), ok("a", '{"q": "1"}'),
                 ok("a", '{"q": "1.0"}'), ok("a", '{"q": [1]}'), ok("a", '{"Q": 1}'), ok("a", '{"q": 1, "r": null}'),
                 ok("a", '{"q": "v1.0"}'), ok("a", '{"q": "V1.0"}'), ok("é", '{"q": 1}'), ok("é", '{"q": 1}'),
                 ok("a", '{"q": 1e-5}'), ok("a", '{"q": 0.00002}')]
    spec = dict(NO_CYCLES, max=1)
    assert drive(spec, different).verdict is Verdict.PASSED
    assert drive(spec, different + [ok("a", '{"q":1.00}')]).verdict is Verdict.FAILED
    # One key written in both forms in one object: both values are kept, in either order.
    both = '{"caf\u00e9": 1, "cafe\u0301": 2}'
    swapped = '{"caf\u00e9": 2, "cafe\u0301": 1}'
    assert drive(spec, [ok("a", both), ok("a", swapped)]).verdict is Verdict.FAILED
    assert drive(spec, [ok("a", both), ok("a", '{"caf\u00e9": 1}')]).verdict is Verdict.PASSED


def test_arguments_too_deep_to_compare_as_values_make_a_pass_inconclusive() -> None:
    deep = "[" * 70 + "1.0" + "]" * 70
    run = drive(NO_CYCLES, [ok("a", deep), ok("a", '{"q": 1}')])
    assert run.verdict is Verdict.INCONCLUSIVE
    assert "nested too deeply" in run.outcome.message
    shallow = "[" * 60 + "1" + "]" * 60
    assert drive(NO_CYCLES, [ok("a", shallow)] * 3).verdict is Verdict.FAILED


def test_window_counts_only_recent_calls() -> None:
    spec = dict(NO_CYCLES, window=4)
    spread = [ok("a", {"q": 1}), ok("b", {}), ok("c", {}), ok("a", {"q": 1}), ok("d", {}), ok("e", {}), ok("a", {"q": 1})]
    assert drive(spec, spread).verdict is Verdict.PASSED
    close = [ok("a", {"q": 1}), ok("b", {}), ok("a", {"q": 1}), ok("a", {"q": 1})]
    run = drive(spec, close)
    assert run.first.position == 3
    assert "within 4 consecutive calls" in run.first.failure.message


def test_cycles_of_tool_names_fail_at_the_end_of_the_call_completing_the_extra_repetition() -> None:
    spec = {"type": "trace_no_repeat", "max": 2}
    calls = [ok("plan", {"i": i}) if i % 2 == 0 else ok("act", {"i": i}) for i in range(6)]
    run = drive(spec, calls)
    assert [(r.phase, r.position) for r in run.failures] == [("end", 5)]
    assert run.first.failure.message == (
        "`act` called at call #6 (span 0000000000000006) completes the pattern [plan, act] a 3rd time in a row; "
        "max 2 repetition(s)")
    three = ["a", "b", "c"] * 3
    run = drive({"type": "trace_no_repeat", "max": 2}, [ok(n, {"i": i}) for i, n in enumerate(three)])
    assert run.first.position == 8 and "[a, b, c]" in run.first.failure.message
    assert drive(spec, [ok(n, {"i": i}) for i, n in enumerate(["a", "b", "a", "b", "c", "a", "b"])]).verdict is Verdict.PASSED


def test_a_run_of_one_tool_is_not_a_cycle() -> None:
    calls = [ok("poll", {"i": i}) for i in range(10)]
    assert drive({"type": "trace_no_repeat", "max": 2}, calls).verdict is Verdict.PASSED


def test_unrecorded_arguments_make_a_pass_inconclusive() -> None:
    run = drive(NO_CYCLES, [ok("a", {"q": 1}), Call("a")])
    assert run.verdict is Verdict.INCONCLUSIVE
    assert "not recorded" in run.outcome.message


def test_a_cut_short_episode_is_inconclusive() -> None:
    assert drive(NO_CYCLES, [ok("a", {})], close=CloseReason.SHUTDOWN).verdict is Verdict.INCONCLUSIVE


def test_past_the_cap_a_pass_is_inconclusive_and_state_stays_bounded() -> None:
    a = build(NO_CYCLES)
    ep = Episode(a)
    ep.play([ok("a", {"i": i}) for i in range(MAX_DISTINCT_CALLS + 10)])
    assert len(ep.state.counts) == MAX_DISTINCT_CALLS
    size = footprint(ep.state)
    ep.play([ok("a", {"i": -i}) for i in range(1, 2000)])
    assert footprint(ep.state) == size
    run = ep.close()
    assert run.verdict is Verdict.INCONCLUSIVE
    assert f"more than {MAX_DISTINCT_CALLS} distinct calls" in run.outcome.message
    # A call already remembered still fails when it goes over.
    ep = Episode(a)
    ep.play([ok("a", {"i": 0}), ok("a", {"i": 0})] + [ok("a", {"i": i}) for i in range(1, MAX_DISTINCT_CALLS + 5)])
    ep.play([ok("a", {"i": 0})])
    assert ep.close().verdict is Verdict.FAILED


def test_windowed_state_is_bounded_by_the_window() -> None:
    ep = Episode(build(dict(NO_CYCLES, window=50)))
    ep.play([ok("a", {"i": i}) for i in range(1000)])
    size = footprint(ep.state)
    ep.play([ok("a", {"i": i}) for i in range(1000, 5000)])
    assert footprint(ep.state) == size


def test_arguments_never_appear_in_messages() -> None:
    run = drive(dict(NO_CYCLES, evidence="all"), [ok("a", {"token": "sk-live-secret"})] * 3)
    assert all("sk-live" not in m for m in run.messages)


@pytest.mark.parametrize("extra, why", [
    ({"max": 4294967295}, "no episode reaches"),
    ({"max": 3, "window": 3, "cycle_length": 0}, "never more than"),
    ({"max": 3, "window": 2, "tool": "a"}, "never more than"),
])
def test_rules_that_cannot_fail_are_refused_at_load(extra: Dict[str, Any], why: str) -> None:
    fields = "".join(f"        {k}: {v}\n" for k, v in extra.items())
    text = f"version: 1\ntests:\n  - id: t\n    assertions:\n      - type: trace_no_repeat\n{fields}"
    with pytest.raises(ConfigError) as info:
        load_config(text)
    d = [d for d in info.value.diagnostics if d.code == "E_ASSERT_INEFFECTIVE"]
    assert d and why in d[0].message


def _reference_failures(names: List[str], args: List[int], maximum: int, window: Optional[int],
                        cycle_length: int) -> List[Tuple[int, str]]:
    """What trace_no_repeat must report, computed naively from the whole list at every call."""
    out: List[Tuple[int, str]] = []
    cycled = False
    for j in range(len(names)):
        kind = None
        periods = range(2, cycle_length + 1) if cycle_length >= 2 else range(0)
        for p in periods if not cycled else ():
            run = 0
            while j - run - p >= 0 and names[j - run] == names[j - run - p]:
                run += 1
            pattern = names[j - p + 1:j + 1]
            primitive = not any(p % d == 0 and pattern == pattern[:d] * (p // d) for d in range(1, p))
            if run >= p * maximum and len(pattern) == p and primitive:
                cycled, kind = True, "cycle"
                break
        key = (names[j], args[j])
        lo = 0 if window is None else max(0, j - window + 1)
        if sum(1 for i in range(lo, j + 1) if (names[i], args[i]) == key) == maximum + 1:
            kind = "repeat"  # reported before a cycle at the same call
        if kind is not None:
            out.append((j, kind))
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 2)), max_size=90),
       maximum=st.integers(1, 3), window=st.sampled_from([None, 2, 3, 5, 64, 65]),
       cycle_length=st.sampled_from([0, 2, 3, 4]))
def test_repeats_and_cycles_are_reported_where_a_naive_count_over_the_whole_list_says(
        calls: List[Tuple[str, int]], maximum: int, window: Optional[int], cycle_length: int) -> None:
    spec: Dict[str, Any] = {"type": "trace_no_repeat", "max": maximum, "cycle_length": cycle_length}
    if window is not None:
        spec["window"] = window
    if window is not None and window <= maximum and cycle_length < 2:
        return  # refused at load: it cannot fail
    names = [n for n, _ in calls]
    args = [a for _, a in calls]
    run = drive(spec, [ok(n, {"q": a}) for n, a in calls])
    got = [(r.position, "cycle" if "completes the pattern" in r.failure.message else "repeat") for r in run.failures]
    assert got == _reference_failures(names, args, maximum, window, cycle_length)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 5)), max_size=60),
       maximum=st.integers(1, 3), window=st.sampled_from([None, 2, 3, 5, 64, 65]), buckets=st.integers(1, 4))
def test_calls_whose_keys_collide_can_only_make_the_rule_fail_never_pass(
        calls: List[Tuple[str, int]], maximum: int, window: Optional[int], buckets: int) -> None:
    """trace_no_repeat counts 64-bit keyed hashes (values.call_key), not the values: two different
    calls may share a key. Forcing keys to collide (a few buckets: the rule's key_of) never removes a
    failure: wherever the exact keys fail the rule, the colliding ones fail it at that call or earlier."""
    from spanassert.assertions.values import call_key, canonical_bytes

    spec: Dict[str, Any] = {"type": "trace_no_repeat", "max": maximum, "cycle_length": 0}
    if window is not None:
        if window <= maximum:
            return  # refused at load: it cannot fail
        spec["window"] = window
    episode = [ok(n, {"q": a}) for n, a in calls]
    rule = build(spec)
    assert rule.key_of is call_key  # type: ignore[attr-defined]  # a NoRepeatAssertion
    exact = drive(rule, episode)
    rule = build(spec)
    rule.key_of = lambda n, a: sum(canonical_bytes([n, a])) % buckets  # type: ignore[attr-defined]
    coarse = drive(rule, episode)
    if buckets == 1 and len(episode) > maximum:
        assert coarse.verdict == Verdict.FAILED  # one key for every call: the rule counts by key_of
    if exact.failures:
        assert coarse.failures and coarse.failures[0].position <= exact.failures[0].position
        assert coarse.verdict == Verdict.FAILED
    assert exact.verdict != Verdict.FAILED or coarse.verdict == Verdict.FAILED
