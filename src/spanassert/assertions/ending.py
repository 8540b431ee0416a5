"""The end of an episode: ``trace_final_tool``.

The last tool call of the episode (in start order) must be of ``tool``. A liveness rule: only the
close can tell which call was last. State: the name, span and position of the latest call.
"""
from __future__ import annotations

from typing import Any, Dict, FrozenSet, Optional

from ..core.model import EpisodeView, Failure, Outcome, ToolCall
from .base import Assertion, BuildContext, Field
from .call_checks import unfinished
from .registry import register
from .selectors import warn_tool_name


class LastCallState:
    __slots__ = ("name", "span_id", "index", "calls")

    def __init__(self) -> None:
        self.name: Optional[str] = None
        self.span_id: Optional[str] = None
        self.index = -1
        self.calls = 0


class FinalToolAssertion(Assertion):
    type_name = "trace_final_tool"
    decides_on_close = True
    order_matters = True
    doc = (
        "The episode's last tool call (in start order) must be a call of `tool` (exact name), e.g. the "
        "tool that hands the answer to the user. A liveness rule, decided when the episode closes; a "
        "failure names the last call. Fails when no tool was called. Inconclusive when the episode "
        "closed before it finished (a later call could still have come)."
    )
    # Not folded: a type's user-facing declaration (doc, fields schema), data read by the docs, the schema
    # and the tests; types of one family share only its shape.
    fields = {
        "tool": Field({"type": "string", "minLength": 1}, required=True,
                      doc="Exact name of the tool the episode must end with."),
    }

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        self.untouched_close_shared = True  # closing it untouched reads only the close (see Assertion)
        self.tool: str = values.get("tool") or ""
        warn_tool_name(ctx, self.tool, "tool")
        self.tools = None  # every call may be the last one

    def named_tools(self) -> FrozenSet[str]:
        return frozenset((self.tool,))

    def new_state(self) -> LastCallState:
        return LastCallState()

    def on_call_start(self, state: LastCallState, call: ToolCall) -> Optional[Failure]:
        state.calls += 1
        if call.index >= state.index:
            state.name, state.span_id, state.index = call.name, call.span_id, call.index
        return None

    def on_close(self, state: LastCallState, episode: EpisodeView) -> Outcome:
        if state.name is None:
            seen = f"no tool was called; the episode must end with a call of `{self.tool}`"
            if not episode.decidable:
                return Outcome.inconclusive(f"{seen}, but {unfinished(episode)}")
            return Outcome.failed(seen)
        last = f"call #{state.index + 1}" + (f" (span {state.span_id})" if state.span_id else "")
        if not episode.decidable:
            return Outcome.inconclusive(f"the last call so far is `{state.name}` at {last}, but {unfinished(episode)}")
        if state.name == self.tool:
            return Outcome.passed(f"the last of {state.calls} call(s) is `{self.tool}`")
        return Outcome.failed(f"the last call is `{state.name}` at {last}; the episode must end with `{self.tool}`",
                              span_id=state.span_id)


register(FinalToolAssertion)


__all__ = ["FinalToolAssertion"]
