"""An open episode's memory (issue 15, "memory per open episode"): what is held compactly answers as
the plain structures it replaces did."""
from __future__ import annotations

import gc
import sys
import tracemalloc
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from hypothesis import given, settings
from hypothesis import strategies as st

from spanassert.core.episode import Episode
from spanassert.core.model import ToolCall
from spanassert.core.plan import Plan

_IDS = st.sampled_from(["a", "b", "c", "d", "e"])
_OPS = st.lists(st.tuples(st.sampled_from(["add", "pop", "get", "has", "call", "end"]), _IDS,
                          st.sampled_from([None, "agent-1", "agent-2"])), max_size=40)


def _episode() -> Episode:
    return Episode("k", "t", Plan([], []), 0)  # a plan without rules: only the episode's own structures


@settings(max_examples=300, deadline=None)
@given(_OPS)
def test_the_open_spans_and_calls_answer_as_dicts_do(ops: List[Tuple[str, str, Optional[str]]]) -> None:
    ep = _episode()
    spans: Dict[str, Optional[str]] = {}
    calls: Dict[str, ToolCall] = {}
    for op, sid, agent in ops:
        if op == "add":
            ep.add_span(sid, agent)
            spans[sid] = agent
        elif op == "pop":
            assert ep.pop_span(sid) == spans.pop(sid, None)
        elif op == "call":
            call = ToolCall("t", sid, "t", None, 0, 0, agent, None)
            if ep.open_calls is None:
                ep.open_calls = {}
            ep.open_calls[sid] = calls[sid] = call
        elif op == "end":
            assert ep.pop_call(sid) is calls.pop(sid, None)
        assert ep.has_span(sid) == (sid in spans)
        assert ep.span_agent(sid) == spans.get(sid)
        assert ep.open_call(sid) is calls.get(sid)
        assert (ep.open_calls is None) == (not calls)
    assert not ep.has_span(None) and ep.span_agent(None) is None and ep.open_call(None) is None
    for sid in list(spans):
        assert ep.pop_span(sid) == spans.pop(sid)
    assert ep.spans is None  # nothing open: no dict held


def test_fields_usually_at_their_default_are_held_only_once_set() -> None:
    ep = _episode()
    assert ep.view is ep and ep.view.key == "k" and ep.view.trace_id == "t"
    assert ep.more is None
    assert (ep.reported, ep.traces, ep.inner_usage, ep.result, ep.at_close, ep.in_flight, ep.reopened) == \
        (None, None, None, None, None, None, False)
    ep.in_flight = None
    ep.reopened = False
    assert ep.more is None  # the default again: nothing made
    ep.at_close = {3}
    ep.at_close.add(4)
    ep.reopened = True
    assert ep.more is not None and ep.at_close == {3, 4} and ep.reopened
    assert ep.result is None and ep.traces is None
    other = _episode()
    assert other.at_close is None and not other.reopened  # per episode, not shared


def test_a_closed_episode_is_freed_without_the_garbage_collector() -> None:
    # A closed episode no one keeps is freed at once (reference counts), not left for the
    # collector: an episode that is its own view must not hold itself (a reference cycle per
    # episode made memory past max_open grow between collections).
    from spanassert import load_config
    from spanassert.core.engine import Engine

    config = load_config("version: 1\nsuite: s\ntests:\n  - id: t\n    assertions:\n"
                         "      - type: trace_max_tool_calls\n        max: 5\n"
                         "episodes:\n  late_window: 1\n")
    engine = Engine(config)
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"}
        tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t",
                "gen_ai.tool.call.arguments": '{"q": 1}'}
        for e in range(3):
            tid, root, sid = f"{e + 1:032x}", f"{e + 1:016x}", f"{e + 100:016x}"
            engine.start_span(tid, root, None, "invoke_agent a", agent, 1)
            engine.start_span(tid, sid, root, "execute_tool t", tool, 2)
            engine.end_span(tid, sid, root, "execute_tool t", tool, 2, 3)
            out = engine.end_span(tid, root, None, "invoke_agent a", agent, 1, 4, is_local_root=True)
            assert out is not None and out.episode is not None
            del out
        gc.collect()
        assert not [o for o in gc.garbage if isinstance(o, Episode)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


def test_a_rule_state_holds_its_rare_facts_only_once_one_is_set() -> None:
    """Rule states keep what they seldom hold (a first failure, calls not judged, calls past a cap)
    in a side record made at the first such value; NO_FACTS, what a close reads without one, is
    never written."""
    from spanassert.assertions.call_checks import NO_FACTS, EveryCallState, RareFacts
    from spanassert.assertions.flow import FlowState
    from spanassert.assertions.loops import NoRepeatState
    from spanassert.assertions.sensitive import SensitiveState
    from spanassert.assertions.tool_calls import MustCallState, MustNotCallState

    made = [EveryCallState(), MustCallState(), MustNotCallState(), NoRepeatState(10, 4), FlowState(),
            SensitiveState()]
    for state in made:
        rare = [n for n in ("first_failure", "undecided", "first_undecided", "overflow", "unknown_sinks")
                if hasattr(type(state), n)]
        assert rare and state.more is None, type(state)
        assert not hasattr(state, "__dict__")
        for name in rare:
            default = getattr(RareFacts(), name)
            assert getattr(state, name) == default
            setattr(state, name, default)
        assert state.more is None, type(state)  # defaults again: nothing made
        other = type(state)() if not isinstance(state, NoRepeatState) else NoRepeatState(10, 4)
        for name in rare:
            if isinstance(getattr(state, name), int):
                setattr(state, name, getattr(state, name) + 2)
                assert getattr(state, name) == 2 and getattr(other, name) == 0  # per state, not shared
            else:
                setattr(state, name, "call #1")
                assert getattr(state, name) == "call #1" and getattr(other, name) is None
        assert state.more is not None and other.more is None
    assert (NO_FACTS.first_failure, NO_FACTS.undecided, NO_FACTS.first_undecided, NO_FACTS.overflow,
            NO_FACTS.unknown_sinks) == (None, 0, None, 0, 0)


_RARE_RULES = """\
version: 1
tests:
  - id: t
    assertions:
      - {type: trace_must_call_tool, tool: refund, min_calls: 2, args_match: {amount: "^[0-9]+$"}}
      - {type: trace_must_not_call_tool, tool: send_email, args_match: {to: "@evil\\\\.com$"}}
      - {type: trace_max_tool_calls, tool: refund, max: 1}
      - {type: trace_args_valid, tool: refund, schema: {type: object, required: [amount]}}
      - {type: trace_no_repeat, max: 1, window: 3}
      - {type: trace_no_flow, from: {tool: lookup}, to: {tool: send_email}, min_length: 4}
      - {type: trace_no_sensitive_data, detectors: [email]}
"""

# What the code before rule states kept their rare facts aside said for this episode (pinned).
_RARE_SAID = [
    ["violation", "`refund` called at call #3 (span 000000000000000c) is call 2 of calls of `refund`; max 1"],
    ["violation", "`refund` called at call #6 (span 000000000000000f) with the same arguments as 1 earlier call(s) within 3 consecutive calls; max 1 identical call(s)"],
    ["closed", "trace_must_call_tool", "passed", "`refund(amount =~ /^[0-9]+$/)` called 2 time(s); min_calls 2"],
    ["closed", "trace_must_not_call_tool", "inconclusive", "whether 2 call(s) of `send_email` are `send_email(to =~ /@evil\\.com$/)` could not be decided (first: call #2 (span 000000000000000b): its arguments were recorded as a bare string, not an object of named arguments, and the tool's definition (its parameter names) was not recorded on the span or on the model step that chose it)"],
    ["closed", "trace_max_tool_calls", "failed", "`refund` called at call #3 (span 000000000000000c) is call 2 of calls of `refund`; max 1"],
    ["closed", "trace_args_valid", "inconclusive", "1 of the calls of `refund` could not be judged (had arguments valid under the schema); first: `refund` at call #1 (span 000000000000000a): its arguments were recorded as a bare string, not an object of named arguments, and the tool's definition (its parameter names) was not recorded on the span or on the model step that chose it"],
    ["closed", "trace_no_repeat", "failed", "`refund` called at call #6 (span 000000000000000f) with the same arguments as 1 earlier call(s) within 3 consecutive calls; max 1 identical call(s)"],
    ["closed", "trace_no_flow", "inconclusive", "1 result(s) of `lookup` were not recorded or could not be read whole, so what they returned could not be followed"],
    ["closed", "trace_no_sensitive_data", "inconclusive", "2 recorded value(s) to scan were missing, unparsable or too large to scan whole"],
]


def test_rules_whose_states_keep_rare_facts_aside_say_what_they_said_before() -> None:
    from spanassert.config import load_config
    from spanassert.core.engine import Engine, Sink

    out: List[List[str]] = []

    class Rec(Sink):
        def violation(self, v: Any) -> None:
            out.append(["violation", v.message])

        def episode_closed(self, r: Any) -> None:
            out.extend(["closed", x.assertion_type, x.verdict.value, x.message] for x in r.results)

    engine = Engine(load_config(_RARE_RULES), Rec())
    tid, root = "ab" * 16, "00000000000000aa"
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"}
    engine.start_span(tid, root, None, "invoke_agent a", agent, 1)
    for i, (tool, args) in enumerate([("refund", "not json"), ("send_email", "not json"), ("refund", '{"amount": 5}'),
                                      ("lookup", None), ("send_email", None), ("refund", '{"amount": 5}')]):
        sid = f"{i + 10:016x}"
        a = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}
        if args is not None:
            a["gen_ai.tool.call.arguments"] = args
        engine.start_span(tid, sid, root, f"execute_tool {tool}", a, 2 + i)
        engine.end_span(tid, sid, root, f"execute_tool {tool}", a, 2 + i, 3 + i)
    engine.end_span(tid, root, None, "invoke_agent a", agent, 1, 100, is_local_root=True)
    assert out == _RARE_SAID
