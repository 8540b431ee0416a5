"""An open episode's memory (issue 15, "memory per open episode"): what is held compactly answers as
the plain structures it replaces did."""
from __future__ import annotations

import gc
import sys
import tracemalloc
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from hypothesis import given, settings
from hypothesis import strategies as st

from spanassert.core.episode import Episode
from spanassert.core.model import ToolCall

_IDS = st.sampled_from(["a", "b", "c", "d", "e"])
_OPS = st.lists(st.tuples(st.sampled_from(["add", "pop", "get", "has", "call", "end"]), _IDS,
                          st.sampled_from([None, "agent-1", "agent-2"])), max_size=40)


class _Plan:
    slots: List[object] = []  # no rules: only the episode's own structures are exercised


def _episode() -> Episode:
    return Episode("k", "t", _Plan(), 0)  # type: ignore[arg-type]  # a plan without rules


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
