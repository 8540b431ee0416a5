"""Budgets: ``trace_max_steps`` (Assay V1) and ``trace_max_tool_calls``.

Both are safety rules on a running count: they fail at the step or call that goes over the bound,
once per episode (the calls after it are over too, but one report says it). The count is the state.
"""
from __future__ import annotations

from typing import Any, Dict, Final, Optional

from ..core.model import EpisodeView, Failure, Outcome, ToolCall
from .base import NEED_STEPS, Assertion, BuildContext, Field
from .call_checks import call_ref, calls_of, within_bound
from .registry import register
from .selectors import tool_fields, tool_selector

# Assay treats a bound of u32::MAX as "no bound": no episode reaches it.
UNREACHABLE_BOUND: Final = 2**32 - 1


def unreachable(maximum: float) -> Optional[str]:
    """Why a rule's ``max`` cannot fail: no episode reaches it (None when one can)."""
    return f"`max: {maximum}` is a bound no episode reaches" if maximum >= UNREACHABLE_BOUND else None


class CountState:
    # A count only goes up, and a rule fails when it first goes over its max: it is over exactly when
    # its count is above the max (no flag of its own).
    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0


class _CountBound(Assertion):
    """What both share: the bound `max` on a running count (refused when no episode reaches it),
    and the count as the state."""

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        self.max: int = values.get("max", UNREACHABLE_BOUND)

    def ineffective_reason(self) -> Optional[str]:
        return unreachable(self.max)

    def new_state(self) -> CountState:
        return CountState()


class MaxStepsAssertion(_CountBound):
    type_name = "trace_max_steps"
    doc = (
        "The episode may take at most `max` steps, a step being a model call or a tool call (agent "
        "and workflow spans are not steps). A safety rule: it fails at the step that goes over `max`, "
        "once per episode. Inconclusive when the episode closed before it finished (evicted, timed "
        "out, shut down) without going over: later steps could have. A `max` of 4294967295 or more is "
        "refused (cannot fail)."
    )
    # Not folded: a type's user-facing declaration (doc, fields schema), data read by the docs, the schema
    # and the tests; types of one family share only its shape.
    fields = {
        "max": Field({"type": "integer", "minimum": 0}, required=True, doc="Most steps (model calls + tool calls) "
                                                                           "allowed."),
    }

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        # Steps arrive through on_step (the engine counts tool calls there too), not as calls.
        self.tools = frozenset()
        self.needs = frozenset((NEED_STEPS,))
        self.wants_steps = True

    def on_step(self, state: CountState, episode: EpisodeView) -> Optional[Failure]:
        before = state.count
        state.count = episode.step_count
        if state.count <= self.max or before > self.max:
            return None  # within max, or over it already (reported then)
        # The engine knows which span made this step and attaches it.
        return Failure(f"step #{state.count} goes over the limit; max {self.max} steps")

    def blocks_again(self, state: CountState, call: ToolCall) -> Optional[str]:
        if state.count <= self.max:
            return None
        return f"{call_ref(call)} is step #{state.count}, over the limit; max {self.max} steps"

    def on_close(self, state: CountState, episode: EpisodeView) -> Outcome:
        steps = max(state.count, episode.step_count)
        return within_bound(steps > self.max, f"{steps} step(s); max {self.max}", episode)


register(MaxStepsAssertion)


class MaxToolCallsAssertion(_CountBound):
    type_name = "trace_max_tool_calls"
    doc = (
        "The episode may contain at most `max` calls of `tool` (or tool calls of any name when `tool` "
        "is not given). A safety rule: it fails at the start of the call that goes over `max`, once per "
        "episode. Inconclusive when the episode closed before it finished without going over. A `max` "
        "of 4294967295 or more is refused (cannot fail)."
    )
    fields = {
        "max": Field({"type": "integer", "minimum": 0}, required=True, doc="Most calls allowed (0: the tool must not "
                                                                           "be called)."),
        **tool_fields("Count only calls of this tool (exact name).", required=False),
    }

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        self.untouched_close_shared = True  # closing it untouched reads only the close (see Assertion)
        self.selector = tool_selector(values, ctx, required=False)
        self.tool: Optional[str] = self.selector.name_label if self.selector is not None else None
        self.select_calls(self.selector)

    def on_call_start(self, state: CountState, call: ToolCall) -> Optional[Failure]:
        if self.selector is not None and not self.selector.name_matches(call):
            return None
        state.count += 1
        if state.count != self.max + 1:
            return None  # within max, or over it already (reported at the call that went over)
        return Failure.at(
            call, f"`{call.name}` called at {call_ref(call)} is call {state.count} of {calls_of(self.tool)}; max "
                  f"{self.max}"
        )

    def blocks_again(self, state: CountState, call: ToolCall) -> Optional[str]:
        if state.count <= self.max or (self.selector is not None and not self.selector.name_matches(call)):
            return None
        return (f"`{call.name}` called at {call_ref(call)} is call {state.count} of {calls_of(self.tool)}; "
                f"max {self.max}")

    def on_close(self, state: CountState, episode: EpisodeView) -> Outcome:
        return within_bound(state.count > self.max, f"{state.count} {calls_of(self.tool)}; max {self.max}", episode)


register(MaxToolCallsAssertion)


__all__ = ["MaxStepsAssertion", "MaxToolCallsAssertion", "UNREACHABLE_BOUND", "unreachable"]
