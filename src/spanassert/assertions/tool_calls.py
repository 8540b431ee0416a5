"""Required and forbidden tools: ``trace_must_call_tool`` and ``trace_must_not_call_tool`` (Assay V1).

Both select calls by exact tool name (or ``tool_pattern``, an anchored regex), optionally narrowed
by ``args_match`` (an AND of ``argument -> regex``, see :mod:`.selectors`). A forbidden tool is a
safety rule and fails the moment the offending span starts (or, with ``args_match``, as soon as its
arguments are known); a required tool is a liveness rule and is decided when the episode closes.
"""
from __future__ import annotations

from typing import Any, Dict, Final, Optional

from ..core.model import CONTENT_MISSING, EpisodeView, Failure, Outcome, ToolCall
from .base import EVIDENCE_ARGUMENTS, NEED_ARGUMENTS, Assertion, BuildContext, Field
from .call_checks import RareFactsHolder, call_ref, fail_first, settled, unfinished
from .registry import register
from .selectors import ARGS_MATCH_SCHEMA, ArgsMatch, CallSelector, tool_fields, tool_selector

_ARGS_MATCH_RULE: Final = (
    "`{argument: regex}`, every regex searched (unanchored) in that argument's value (non-strings as "
    "JSON); a missing argument is no match. Arguments recorded as a bare value are bound to the "
    "tool's single parameter when its definition was recorded; otherwise the call is undecidable."
)


class MustCallState(RareFactsHolder):
    """Its rare facts (RareFactsHolder): undecided (name-matching calls whose
    arguments could not be matched), first_undecided (the first such call, and why)."""

    __slots__ = ("count", "open")

    def __init__(self) -> None:
        self.count = 0  # calls that matched
        self.open = 0  # name-matching calls whose arguments are still to come (args_match only)
        self.more = None


class _ToolRule(Assertion):
    """What both rules share: the calls of `tool` (or `tool_pattern`) they select, narrowed by
    `args_match`, whose arguments they then need."""

    tool_required = True

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        self.selector = tool_selector(values, ctx, required=True,
                                      args_match=ArgsMatch.build(values.get("args_match"), ctx, "args_match")
                                      ) or CallSelector("")
        self.tool = self.selector.name_label
        self.select_calls(self.selector)
        self.needs = frozenset((NEED_ARGUMENTS,)) if self.selector.args_match is not None else frozenset()

    def ineffective_reason(self) -> Optional[str]:
        if not self.tool:
            return "`tool` is empty, and no call has an empty name"
        return None


class MustCallToolAssertion(_ToolRule):
    type_name = "trace_must_call_tool"
    decides_on_close = True
    doc = (
        "The episode must contain at least `min_calls` calls of `tool` (exact name), optionally only "
        "calls whose arguments match `args_match`. Errored calls count. A liveness rule: decided when "
        "the episode closes, and passed as soon as the count is reached. Inconclusive when the episode "
        "closed before it finished (evicted, timed out, shut down) with the count not yet reached, or "
        "when calls of the tool had unrecorded arguments that could have made up the shortfall."
    )
    fields = {
        **tool_fields("Exact name of the tool that must be called.", required=True, empty_is_ineffective=True),
        "min_calls": Field(
            {"type": "integer", "minimum": 0}, default=1, doc="Fewest calls required. Default 1; 0 is refused (cannot "
                                                              "fail)."
        ),
        "args_match": Field(ARGS_MATCH_SCHEMA, doc="Count only calls whose arguments match " + _ARGS_MATCH_RULE),
    }

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        self.pass_survives_unseen_calls = True  # calls that were not seen cannot undo the count reached
        self.untouched_close_shared = True  # closing it untouched reads only the close (see Assertion)
        self.min_calls: int = values.get("min_calls", 1)

    def ineffective_reason(self) -> Optional[str]:
        if self.min_calls <= 0 and self.tool:
            return "`min_calls: 0` holds for every episode, including one that never calls the tool"
        return super().ineffective_reason()

    def new_state(self) -> MustCallState:
        return MustCallState()

    def on_call_start(self, state: MustCallState, call: ToolCall) -> Optional[Failure]:
        if not self.selector.name_matches(call):
            return None
        if self.selector.args_match is None:
            # The name is known at start: the call counts even if its span never ends.
            state.count += 1
        else:
            state.open += 1
        return None

    def on_call_end(self, state: MustCallState, call: ToolCall) -> Optional[Failure]:
        if self.selector.args_match is None or not self.selector.name_matches(call):
            return None
        state.open = max(0, state.open - 1)  # an end whose start was not seen must not go negative
        if not self.selector.decidable(call):
            _undecided(state, self.selector, call)
        elif self.selector.matches(call):
            state.count += 1
        return None

    def on_close(self, state: MustCallState, episode: EpisodeView) -> Outcome:
        what = str(self.selector)
        seen = f"`{what}` called {state.count} time(s); min_calls {self.min_calls}"
        if state.count >= self.min_calls:
            return Outcome.passed(seen)
        if not episode.decidable:
            return Outcome.inconclusive(f"{seen}, but {unfinished(episode)}")
        unknown = state.undecided + state.open
        if unknown and state.count + unknown >= self.min_calls:
            why = f" (first: {state.first_undecided})" if state.first_undecided else ""
            return Outcome.inconclusive(
                f"{seen}; whether {unknown} more call(s) of `{self.tool}` match could not be decided{why}"
            )
        return Outcome.failed(seen)


register(MustCallToolAssertion)


class MustNotCallState(RareFactsHolder):
    """Its rare facts (RareFactsHolder): first_failure, undecided (name-matching
    calls whose arguments could not be matched), first_undecided (the first such call, and why)."""

    __slots__ = ("open",)

    def __init__(self) -> None:
        self.open = 0  # name-matching calls started, not ended (args_match only)
        self.more = None


def _undecided(state: Any, selector: CallSelector, call: ToolCall) -> None:
    state.undecided += 1
    if state.first_undecided is None and selector.args_match is not None:
        state.first_undecided = f"{call_ref(call)}: {selector.args_match.undecidable_reason(call)}"


class MustNotCallToolAssertion(_ToolRule):
    type_name = "trace_must_not_call_tool"
    doc = (
        "The episode must contain no call of `tool` (exact name); with `args_match`, no call of it "
        "whose arguments match. A safety rule: without `args_match` it fails at the offending span's "
        "start, before the tool body runs; with `args_match` as soon as the arguments are known (span "
        "start when recorded then, else span end). Inconclusive when a call of the tool had unrecorded "
        "arguments (so the match could not be decided), or when the episode closed before it finished."
    )
    fields = {
        **tool_fields("Exact name of the forbidden tool.", required=True, empty_is_ineffective=True),
        "args_match": Field(ARGS_MATCH_SCHEMA, doc="Forbid only calls whose arguments match " + _ARGS_MATCH_RULE),
    }

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        self.order_free = True  # a failure at a call depends on that call alone (serve checks it on arrival)
        self.untouched_close_shared = True  # closing it untouched reads only the close (see Assertion)
        self.reports_at_start = self.selector.args_match is None

    def new_state(self) -> MustNotCallState:
        return MustNotCallState()

    def _forbidden(self, state: MustNotCallState, call: ToolCall) -> Failure:
        if self.selector.args_match is None:
            message = f"`{call.name}` called at {call_ref(call)}; it must not be called"
        else:
            message = (
                f"`{call.name}` called at {call_ref(call)} with arguments matching "
                f"{self.selector.args_match.describe()}; such calls are forbidden"
            )
            # A detector condition matched a secret or personal data: never shown, whatever `evidence:` says.
            if not self.selector.args_match.uses_detectors:
                message += self.evidence_note(call.arguments, EVIDENCE_ARGUMENTS)
        return fail_first(state, call, message)

    def on_call_start(self, state: MustNotCallState, call: ToolCall) -> Optional[Failure]:
        if not self.selector.name_matches(call):
            return None
        if self.selector.args_match is None:
            return self._forbidden(state, call)
        state.open += 1
        if call.arguments_state != CONTENT_MISSING and self.selector.matches(call):
            return self._forbidden(state, call)
        return None

    def on_call_end(self, state: MustNotCallState, call: ToolCall) -> Optional[Failure]:
        if self.selector.args_match is None or not self.selector.name_matches(call):
            return None
        state.open = max(0, state.open - 1)  # an end whose start was not seen must not go negative
        if not self.selector.decidable(call):
            _undecided(state, self.selector, call)
            return None
        # Judged again at end: the end may carry the arguments. One failure per span is reported.
        if self.selector.matches(call):
            return self._forbidden(state, call)
        return None

    def on_close(self, state: MustNotCallState, episode: EpisodeView) -> Outcome:
        what = str(self.selector)
        if state.first_failure is not None:
            return Outcome.failed(f"`{what}` called at {state.first_failure}; it must not be called")
        if state.undecided:
            why = f" (first: {state.first_undecided})" if state.first_undecided else ""
            return Outcome.inconclusive(
                f"whether {state.undecided} call(s) of `{self.tool}` are `{what}` could not be decided{why}"
            )
        if state.open:
            return Outcome.inconclusive(f"{state.open} call(s) of `{self.tool}` had not ended when the episode closed")
        return settled(f"`{what}` not called", episode)


register(MustNotCallToolAssertion)


__all__ = ["MustCallToolAssertion", "MustNotCallToolAssertion"]
