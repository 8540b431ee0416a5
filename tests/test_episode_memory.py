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
