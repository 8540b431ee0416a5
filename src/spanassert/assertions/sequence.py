"""Order of tool calls: ``trace_tool_sequence`` (Assay V1) and ``trace_trajectory`` (understudy modes).

Both compare the episode's tool-name list (in start order) with an expected list, through one of four
incremental matchers:

- exact: the lists are equal. Fails at the first call that deviates or goes beyond the list.
- prefix: the episode's first calls are the expected list. Fails at the first deviation; passes once
  the list is complete, whatever comes after.
- ordered (understudy ``contains``, Assay ``allow_other_tools: true``): the expected list occurs in
  order, other calls allowed between (greedy). Passes once complete.
- subset: every expected tool is called at least once, in any order. Passes once complete.
- suffix: the episode's last calls are the expected list. Decided at close (only then is the
  last call known); a failure names the last call.

Each matcher keeps a position (or the set of names still missing): O(rule size), never the episode.
"""
from __future__ import annotations

from collections import deque
from typing import Any, Deque, Dict, Final, FrozenSet, List, Optional, Set

from ..core.model import EpisodeView, Failure, Outcome, ToolCall
from .base import Assertion, BuildContext, Field
from .call_checks import call_ref, unfinished
from .registry import register
from .selectors import warn_tool_name


class SequenceState:
    __slots__ = ("pos", "first_failure")

    def __init__(self) -> None:
        self.pos = 0  # expected entries matched so far
        self.first_failure: Optional[str] = None


class SubsetState(SequenceState):
    __slots__ = ("missing",)

    def __init__(self, missing: Set[str]) -> None:
        super().__init__()
        self.missing = missing  # expected names not yet called


def _names(names: List[str]) -> str:
    return "[" + ", ".join(names) + "]"


class _Matcher:
    """One way of comparing the tool-name list with ``expected``."""

    # Whether the matcher must see every call (exact, prefix) or only calls of expected tools.
    needs_all_calls = False
    # Whether a match stays a match when calls are inserted anywhere (ordered subsequence, subset):
    # Assertion.pass_survives_unseen_calls.
    survives_unseen_calls = False

    def __init__(self, expected: List[str]) -> None:
        self.expected = list(expected)
        self.names = _names(self.expected)  # how messages name the list (made once: every close names it)

    def new_state(self) -> SequenceState:
        return SequenceState()

    def on_call(self, state: SequenceState, call: ToolCall) -> Optional[str]:
        raise NotImplementedError

    def on_close(self, state: SequenceState, episode: EpisodeView) -> Outcome:
        raise NotImplementedError


class ExactMatcher(_Matcher):
    needs_all_calls = True

    def on_call(self, state: SequenceState, call: ToolCall) -> Optional[str]:
        if state.first_failure is not None:
            return None
        n = len(self.expected)
        pos = state.pos
        state.pos += 1
        if pos >= n:
            if n == 0:
                return (f"`{call.name}` called at {call_ref(call)}; the expected sequence is empty, so no tool may be "
                        "called")
            return (f"`{call.name}` called at {call_ref(call)}, beyond the {n} call(s) of the exact sequence "
                    f"{self.names}")
        want = self.expected[pos]
        if call.name != want:
            return (
                f"`{call.name}` called at {call_ref(call)}; the exact sequence {self.names} "
                f"expects `{want}` as call {pos + 1} of {n}"
            )
        return None

    def on_close(self, state: SequenceState, episode: EpisodeView) -> Outcome:
        if state.first_failure is not None:
            return Outcome.failed(f"the calls deviate from {self.names} at {state.first_failure}")
        n = len(self.expected)
        if state.pos < n:
            seen = (f"{state.pos} of the {n} call(s) of {self.names} made; next expected "
                    f"`{self.expected[state.pos]}`")
            if not episode.decidable:
                return Outcome.inconclusive(f"{seen}, but {unfinished(episode)}")
            return Outcome.failed(seen)
        if not episode.decidable:
            # More calls could have followed and broken the equality.
            return Outcome.inconclusive(f"the calls equal {self.names} so far, but {unfinished(episode)}")
        if n == 0:
            return Outcome.passed("no tool was called")
        return Outcome.passed(f"the calls are exactly {self.names}")


class PrefixMatcher(_Matcher):
    needs_all_calls = True

    def on_call(self, state: SequenceState, call: ToolCall) -> Optional[str]:
        if state.first_failure is not None or state.pos >= len(self.expected):
            return None
        pos = state.pos
        state.pos += 1
        want = self.expected[pos]
        if call.name != want:
            return (
                f"`{call.name}` called at {call_ref(call)}; the calls must start with {self.names}, "
                f"which expects `{want}` as call {pos + 1}"
            )
        return None

    def on_close(self, state: SequenceState, episode: EpisodeView) -> Outcome:
        if state.first_failure is not None:
            return Outcome.failed(f"the calls do not start with {self.names}: deviation at "
                                  f"{state.first_failure}")
        n = len(self.expected)
        if state.pos >= n:
            return Outcome.passed(f"the calls start with {self.names}")
        seen = (f"only {state.pos} of the {n} expected first call(s) {self.names} made; next expected "
                f"`{self.expected[state.pos]}`")
        if not episode.decidable:
            return Outcome.inconclusive(f"{seen}, but {unfinished(episode)}")
        return Outcome.failed(seen)


class OrderedMatcher(_Matcher):
    survives_unseen_calls = True
    def on_call(self, state: SequenceState, call: ToolCall) -> Optional[str]:
        # Greedy: matching the earliest occurrence never loses a subsequence that exists.
        if state.pos < len(self.expected) and call.name == self.expected[state.pos]:
            state.pos += 1
        return None

    def on_close(self, state: SequenceState, episode: EpisodeView) -> Outcome:
        n = len(self.expected)
        if state.pos >= n:
            return Outcome.passed(f"{self.names} called in order")
        after = f" after `{self.expected[state.pos - 1]}`" if state.pos else ""
        seen = (
            f"{state.pos} of the {n} tool(s) of {self.names} called in order; "
            f"`{self.expected[state.pos]}` not called{after}"
        )
        if not episode.decidable:
            return Outcome.inconclusive(f"{seen}, but {unfinished(episode)}")
        return Outcome.failed(seen)


class SubsetMatcher(_Matcher):
    survives_unseen_calls = True
    def new_state(self) -> SequenceState:
        return SubsetState(set(self.expected))

    def on_call(self, state: SequenceState, call: ToolCall) -> Optional[str]:
        assert isinstance(state, SubsetState)
        if state.missing:
            state.missing.discard(call.name)
        return None

    def on_close(self, state: SequenceState, episode: EpisodeView) -> Outcome:
        assert isinstance(state, SubsetState)
        if not state.missing:
            return Outcome.passed(f"every tool of {self.names} called")
        missing = [name for name in dict.fromkeys(self.expected) if name in state.missing]
        seen = "never called: " + ", ".join(f"`{m}`" for m in missing)
        if not episode.decidable:
            return Outcome.inconclusive(f"{seen} so far, but {unfinished(episode)}")
        return Outcome.failed(seen)


class SuffixState(SequenceState):
    __slots__ = ("recent", "last_span", "last_index")

    def __init__(self, n: int) -> None:
        super().__init__()
        self.recent: Deque[str] = deque(maxlen=max(n, 1))  # the last n names: O(rule size)
        self.last_span: Optional[str] = None
        self.last_index = -1


class SuffixMatcher(_Matcher):
    needs_all_calls = True

    def new_state(self) -> SequenceState:
        return SuffixState(len(self.expected))

    def on_call(self, state: SequenceState, call: ToolCall) -> Optional[str]:
        assert isinstance(state, SuffixState)
        state.recent.append(call.name)
        state.last_span = call.span_id
        state.last_index = call.index
        return None

    def on_close(self, state: SequenceState, episode: EpisodeView) -> Outcome:
        assert isinstance(state, SuffixState)
        seen = list(state.recent)
        if not episode.decidable:
            return Outcome.inconclusive(f"the calls so far end with {_names(seen)}, but {unfinished(episode)}")
        if seen == self.expected:
            return Outcome.passed(f"the calls end with {self.names}")
        if state.last_index < 0:
            return Outcome.failed(f"no tool was called; the calls must end with {self.names}")
        last = f"call #{state.last_index + 1}" + (f" (span {state.last_span})" if state.last_span else "")
        return Outcome.failed(
            f"the calls end with {_names(seen)} (last: {last}); they must end with {self.names}",
            span_id=state.last_span,
        )


class _OrderAssertion(Assertion):
    """Drives one matcher; subclasses pick it from their fields."""

    decides_on_close = True
    order_matters = True
    matcher: _Matcher

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        self.untouched_close_shared = True  # closing it untouched reads only the close (see Assertion)

    def _use(self, matcher: _Matcher, ctx: BuildContext, field: str) -> None:
        self.matcher = matcher
        self.pass_survives_unseen_calls = matcher.survives_unseen_calls
        self.tools = None if matcher.needs_all_calls else frozenset(matcher.expected)
        for i, name in enumerate(matcher.expected):
            warn_tool_name(ctx, name, f"{field}[{i}]", instead=_PATTERN_INSTEAD)

    def named_tools(self) -> FrozenSet[str]:
        return frozenset(self.matcher.expected)

    def new_state(self) -> SequenceState:
        return self.matcher.new_state()

    def on_call_start(self, state: SequenceState, call: ToolCall) -> Optional[Failure]:
        message = self.matcher.on_call(state, call)
        if message is None:
            return None
        state.first_failure = call_ref(call)
        return Failure.at(call, message)

    def on_close(self, state: SequenceState, episode: EpisodeView) -> Outcome:
        return self.matcher.on_close(state, episode)


_TOOL_LIST_SCHEMA: Final[Dict[str, Any]] = {"type": "array", "items": {"type": "string", "minLength": 1}}
_PATTERN_INSTEAD = ("these names are exact; to select calls by pattern use `expected: {type: sequence_valid, rules: "
                    "[{type: sequence, tools: [{tool_pattern: REGEX}, ...]}]}`")


class ToolSequenceAssertion(_OrderAssertion):
    type_name = "trace_tool_sequence"
    doc = (
        "With `allow_other_tools: true`, the tools in `sequence` must be called in that order, other "
        "calls allowed between (an ordered subsequence); it passes as soon as the last one is called. "
        "With `allow_other_tools: false`, the episode's tool calls must be exactly `sequence` (an empty "
        "sequence means no tool call at all); it fails at the start of the first call that deviates "
        "from it or goes beyond it, and at close when calls are missing. Inconclusive when the episode "
        "closed before it finished and the result was not yet certain. An empty sequence with "
        "`allow_other_tools: true` is refused (cannot fail)."
    )
    fields = {
        "sequence": Field(_TOOL_LIST_SCHEMA, required=True, doc="Tool names, in the order they must be called."),
        "allow_other_tools": Field(
            {"type": "boolean"},
            required=True,
            doc="Required. `true`: other calls may come between (ordered subsequence); `false`: the calls must equal "
                "`sequence` exactly.",
        ),
    }

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        self.sequence: List[str] = list(values.get("sequence") or [])
        self.allow_other_tools: bool = bool(values.get("allow_other_tools"))
        self._use(OrderedMatcher(self.sequence) if self.allow_other_tools else ExactMatcher(self.sequence), ctx,
                  "sequence")

    def ineffective_reason(self) -> Optional[str]:
        if self.allow_other_tools and not self.sequence:
            return "an empty `sequence` with `allow_other_tools: true` is found in every episode"
        return None


register(ToolSequenceAssertion)


TRAJECTORY_MODES: Final = ("exact", "prefix", "contains", "subset", "suffix")


class TrajectoryAssertion(_OrderAssertion):
    type_name = "trace_trajectory"
    doc = (
        "Compares the episode's tool calls with `expected` by `mode`: `exact` (the same list), `prefix` "
        "(the calls start with `expected`), `contains` (`expected` occurs in order, other calls allowed "
        "between), `subset` (every expected tool is called, any order) or `suffix` (the calls end with "
        "`expected`, decided at close; a failure names the last call). `exact` and `prefix` fail at "
        "the start of the first call that deviates (or, for `exact`, goes beyond the list); every mode "
        "fails at close when expected calls are missing, and `prefix`, `contains` and `subset` pass as "
        "soon as they are met. Inconclusive when the episode closed before it finished and the result "
        "was not yet certain. An empty `expected` means no calls in `exact` mode and is refused in the "
        "others (cannot fail)."
    )
    fields = {
        "expected": Field(_TOOL_LIST_SCHEMA, required=True, doc="The expected tool names, in order (order is ignored "
                                                                "by `subset`)."),
        "mode": Field(
            {"enum": list(TRAJECTORY_MODES)},
            default="exact",
            doc="How `expected` is compared: exact, prefix, contains, subset or suffix. Default: exact.",
        ),
    }

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        self.expected: List[str] = list(values.get("expected") or [])
        self.mode: str = values.get("mode") or "exact"
        matchers = {"exact": ExactMatcher, "prefix": PrefixMatcher, "contains": OrderedMatcher, "subset": SubsetMatcher,
                    "suffix": SuffixMatcher}
        self._use(matchers.get(self.mode, ExactMatcher)(self.expected), ctx, "expected")

    def ineffective_reason(self) -> Optional[str]:
        if not self.expected and self.mode != "exact":
            return f"an empty `expected` in `{self.mode}` mode is met by every episode"
        return None


register(TrajectoryAssertion)


__all__ = [
    "ToolSequenceAssertion",
    "TrajectoryAssertion",
    "ExactMatcher",
    "PrefixMatcher",
    "OrderedMatcher",
    "SubsetMatcher",
    "SuffixMatcher",
    "TRAJECTORY_MODES",
]
