"""Whole-list evaluation: every rule over a list of calls, through the same incremental states the
live path feeds one call at a time."""
from __future__ import annotations

from typing import Any, Iterable, List, Sequence

from ...core.model import MISSING, ToolCall
from .common import Rule, RuleEvaluation


def as_tool_calls(calls: Iterable[Any]) -> List[ToolCall]:
    """Turn tool names, ``{tool|tool_name|name, args|arguments}`` mappings or ToolCalls into ended
    ToolCalls indexed from 0. A bare name has no recorded arguments."""
    out: List[ToolCall] = []
    for i, c in enumerate(calls):
        if isinstance(c, ToolCall):
            out.append(c)
            continue
        if isinstance(c, str):
            call = ToolCall(c, index=i)
            call.finish(end_ns=0)
        else:
            name = c.get("tool") or c.get("tool_name") or c.get("name") or ""
            args = c.get("args", c.get("arguments", MISSING))
            call = ToolCall(str(name), index=i)
            call.finish(end_ns=0, arguments_raw=None if args is MISSING else args)
        out.append(call)
    return out


def evaluate_rules(rules: Sequence[Rule], calls: Iterable[Any], *, complete: bool = True) -> List[RuleEvaluation]:
    """Evaluate every rule over a whole list of calls (through the same incremental states the live
    path uses) and return one evaluation per rule, in rule order."""
    states = [r.new_state() for r in rules]
    for call in as_tool_calls(calls):
        for st in states:
            st.feed(call)
    return [st.finish(complete) for st in states]
