"""Rule kinds about the order of calls: ``before``, ``eventually``, ``after``, ``never_after``,
``sequence``."""
from __future__ import annotations

from typing import List, Optional

from ...core.model import ToolCall
from ..base import Field
from ..selectors import SELECTOR_SCHEMA
from .common import (  # Not folded: names rules/__init__.py re-exports too (imports, no logic)
    HELD,
    INCONCLUSIVE,
    NOT_EXERCISED,
    VIOLATED,
    Operand,
    Rule,
    RuleEvaluation,
    RuleState,
    unknown_args_note,
)


# before -------------------------------------------------------------------------------------------
class _BeforeState(RuleState):
    __slots__ = ("first_idx", "then_idx", "first_unknown", "then_unknown")

    def __init__(self, rule: Rule) -> None:
        super().__init__(rule)
        self.first_idx: Optional[int] = None
        self.then_idx: Optional[int] = None
        self.first_unknown: Optional[str] = None
        self.then_unknown: Optional[str] = None

    def _feed(self, call: ToolCall) -> Optional[RuleEvaluation]:
        first, then = self.rule.operands["first"], self.rule.operands["then"]
        if self.first_idx is not None:
            # Ordering is settled; only whether `then` ever occurs (held vs not exercised) is open.
            if self.then_idx is None and then.match(call):
                self.then_idx = call.index
            return None
        f = first.match(call)
        if f:
            self.first_idx = call.index
            if self.then_idx is None and then.match(call):
                self.then_idx = call.index
            return None
        if f is None and self.first_unknown is None:
            self.first_unknown = unknown_args_note(call)
        t = then.match(call)
        if t:
            if self.first_unknown is not None:
                return self._eval(INCONCLUSIVE, [call.index],
                                  f"whether '{first}' preceded '{then}' (call #{call.index + 1}) is unknown: "
                                  f"{self.first_unknown}")
            return self._eval(
                VIOLATED, [call.index],
                f"tool '{first}' was required before tool '{then}', but '{then}' was called at call #{call.index + 1} "
                f"with no earlier '{first}'",
                call,
            )
        if t is None and self.then_unknown is None:
            self.then_unknown = unknown_args_note(call)
        return None

    # Not folded: every state's _finish has this shape (unknown first, then its own held / not exercised
    # order and messages); what they share is RuleState._eval.
    def _finish(self, complete: bool) -> RuleEvaluation:
        first, then = self.rule.operands["first"], self.rule.operands["then"]
        if self.then_unknown is not None:
            return self._eval(INCONCLUSIVE, [], f"whether '{then}' came before '{first}' is unknown: "
                                                f"{self.then_unknown}")
        if self.first_idx is not None and self.then_idx is not None:
            return self._eval(HELD, [self.first_idx, self.then_idx])
        return self._eval(NOT_EXERCISED, [], f"'{then}' never appeared, so the ordering was never constrained")


# Not folded: a kind's class body is the Rule contract (common.py) filled with its own data: kind, doc,
# operands, state class, id format. What the kinds share (building operands, the id, the `distinct`
# check) is written once in Rule; the same holds for every kind below and in presence.py.
class BeforeRule(Rule):
    kind = "before"
    doc = "The first `first` call must precede the first `then` call; `then` with no earlier `first` violates."
    operand_fields = ("first", "then")
    fields = {
        "first": Field(SELECTOR_SCHEMA, required=True, doc="The call that must come first."),
        "then": Field(SELECTOR_SCHEMA, required=True, doc="The call that may only follow `first`."),
    }
    state_class = _BeforeState
    id_format = "before:{first}->{then}"
    distinct = ("first", "then", "cannot constrain anything: a call always comes no later than itself",
                "name two different calls in `first` and `then`")


# eventually ---------------------------------------------------------------------------------------
class _EventuallyState(RuleState):
    __slots__ = ("seen", "unknown")

    def __init__(self, rule: Rule) -> None:
        super().__init__(rule)
        self.seen = 0
        self.unknown: Optional[str] = None

    def _feed(self, call: ToolCall) -> Optional[RuleEvaluation]:
        tool, within = self.rule.operands["tool"], self.rule.values["within"]
        self.seen += 1
        m = tool.match(call)
        if call.index < within:
            if m:
                return self._eval(HELD, [call.index])
            if m is None and self.unknown is None:
                self.unknown = unknown_args_note(call)
            return None
        # The deadline has passed with no certain match.
        if self.unknown is not None:
            return self._eval(INCONCLUSIVE, [call.index],
                              f"'{tool}' not certainly seen within the first {within} calls: {self.unknown}")
        if m:
            return self._eval(VIOLATED, [call.index],
                              f"tool '{tool}' appeared at call #{call.index + 1} but must appear within the first "
                              f"{within} calls",
                              call)
        return self._eval(VIOLATED, [call.index],
                          f"tool '{tool}' required within the first {within} calls but call #{call.index + 1} "
                          f"was reached without it", call)

    def _finish(self, complete: bool) -> RuleEvaluation:
        tool, within = self.rule.operands["tool"], self.rule.values["within"]
        if self.unknown is not None:
            return self._eval(INCONCLUSIVE, [], f"'{tool}' not certainly seen within the first {within} calls: "
                                                f"{self.unknown}")
        if not complete:
            return self._eval(INCONCLUSIVE, [],
                              f"'{tool}' has not appeared in {self.seen} call(s) and the episode was cut short "
                              f"inside the {within}-call deadline")
        return self._eval(VIOLATED, [],
                          f"tool '{tool}' required within the first {within} calls but the episode ended "
                          f"after {self.seen} call(s) without it")


class EventuallyRule(Rule):
    kind = "eventually"
    doc = "A matching call must occur among the first `within` calls (index < within)."
    operand_fields = ("tool",)
    fields = {
        "tool": Field(SELECTOR_SCHEMA, required=True, doc="The call that must occur."),
        "within": Field({"type": "integer", "minimum": 1}, required=True, doc="Deadline, in calls from the start."),
    }
    state_class = _EventuallyState
    id_format = "eventually:{tool}@{within}"


# after --------------------------------------------------------------------------------------------
class _AfterState(RuleState):
    """Every trigger opens an obligation answered by any `then` in the next `within` calls. One
    `then` answers every open obligation, so only the oldest open trigger matters for the deadline
    (O(1) state). Obligations made doubtful by an undecidable call (a possible trigger, or a
    possible answer) are tracked apart, so a doubtful one never masks a certain violation of a
    later trigger, and a certain answer still clears it."""

    __slots__ = ("pending", "doubtful", "triggered", "answer", "note", "unknown")

    def __init__(self, rule: Rule) -> None:
        super().__init__(rule)
        self.pending: Optional[int] = None  # oldest certainly-open trigger
        self.doubtful: Optional[int] = None  # oldest obligation that may or may not exist / be answered
        self.triggered: Optional[int] = None  # first certain trigger
        self.answer: Optional[int] = None  # first answering call
        self.note: Optional[str] = None  # the first undecidable call, for messages
        self.unknown: Optional[str] = None  # set once a doubtful obligation's window closed

    def _feed(self, call: ToolCall) -> Optional[RuleEvaluation]:
        trigger, then, within = self.rule.operands["trigger"], self.rule.operands["then"], self.rule.values["within"]
        idx = call.index
        t = then.match(call)
        if t:
            if self.pending is not None and self.answer is None:
                self.answer = idx
            self.pending = None
            self.doubtful = None
        else:
            if t is None and self.pending is not None:
                self.note = self.note or unknown_args_note(call)
                self.doubtful = self.pending if self.doubtful is None else self.doubtful
                self.pending = None
            if self.doubtful is not None and idx >= self.doubtful + within:
                self.unknown = self.note
                self.doubtful = None
            if self.pending is not None and idx >= self.pending + within:
                return self._eval(
                    VIOLATED, [self.pending, idx],
                    f"tool '{then}' required within {within} call(s) after '{trigger}' (triggered at call "
                    f"#{self.pending + 1}) and no call answered it by call #{self.pending + within + 1}",
                    call,
                )
        g = trigger.match(call)
        if g:
            if self.triggered is None:
                self.triggered = idx
            if self.pending is None:
                self.pending = idx
        elif g is None:
            self.note = self.note or unknown_args_note(call)
            if self.doubtful is None:
                self.doubtful = idx
        return None

    def _finish(self, complete: bool) -> RuleEvaluation:
        trigger, then, within = self.rule.operands["trigger"], self.rule.operands["then"], self.rule.values["within"]
        if self.pending is not None:
            if complete:
                return self._eval(
                    VIOLATED, [self.pending],
                    f"tool '{then}' required within {within} call(s) after '{trigger}' (triggered at call "
                    f"#{self.pending + 1}) and the episode ended without it",
                )
            return self._eval(INCONCLUSIVE, [self.pending],
                              f"'{trigger}' fired at call #{self.pending + 1} and the episode was cut short inside "
                              f"its {within}-call window")
        if self.doubtful is not None and self.unknown is None:
            self.unknown = self.note
        if self.unknown is not None:
            return self._eval(INCONCLUSIVE, [], f"whether every '{trigger}' was answered by '{then}' is unknown: "
                                                f"{self.unknown}")
        if self.triggered is None:
            return self._eval(NOT_EXERCISED, [], f"'{trigger}' never appeared, so no deadline started")
        spanned = [self.triggered] + ([self.answer] if self.answer is not None else [])
        return self._eval(HELD, spanned)


class AfterRule(Rule):
    kind = "after"
    doc = "Every `trigger` call must be followed by a `then` call within the next `within` calls."
    operand_fields = ("trigger", "then")
    fields = {
        "trigger": Field(SELECTOR_SCHEMA, required=True, doc="The call that opens an obligation."),
        "then": Field(SELECTOR_SCHEMA, required=True, doc="The call that answers it."),
        "within": Field({"type": "integer", "minimum": 1}, default=1, doc="Window, in calls after the trigger."),
    }
    state_class = _AfterState
    id_format = "after:{trigger}->{then}@{within}"
    distinct = ("trigger", "then", "can never hold on a finished episode: the last such call always waits for another",
                "name a different call in `then`")


# never_after --------------------------------------------------------------------------------------
class _NeverAfterState(RuleState):
    __slots__ = ("trigger_idx", "maybe_trigger", "unknown")

    def __init__(self, rule: Rule) -> None:
        super().__init__(rule)
        self.trigger_idx: Optional[int] = None
        self.maybe_trigger = False
        self.unknown: Optional[str] = None

    def _feed(self, call: ToolCall) -> Optional[RuleEvaluation]:
        trigger, forbidden = self.rule.operands["trigger"], self.rule.operands["forbidden"]
        if self.trigger_idx is not None:
            f = forbidden.match(call)
            if f:
                return self._eval(
                    VIOLATED, [self.trigger_idx, call.index],
                    f"tool '{forbidden}' at call #{call.index + 1} is forbidden after '{trigger}' "
                    f"(triggered at call #{self.trigger_idx + 1})",
                    call,
                )
            if f is None:
                self.unknown = self.unknown or unknown_args_note(call)
            return None
        if self.maybe_trigger and forbidden.match(call) is not False:
            self.unknown = self.unknown or "an earlier call that may have been the trigger had no recorded arguments"
        g = trigger.match(call)
        if g:
            self.trigger_idx = call.index
        elif g is None:
            self.maybe_trigger = True
        return None

    def _finish(self, complete: bool) -> RuleEvaluation:
        trigger, forbidden = self.rule.operands["trigger"], self.rule.operands["forbidden"]
        if self.unknown is not None:
            return self._eval(INCONCLUSIVE, [], f"whether '{forbidden}' followed '{trigger}' is unknown: "
                                                f"{self.unknown}")
        if self.trigger_idx is None:
            return self._eval(NOT_EXERCISED, [], f"'{trigger}' never appeared, so nothing was forbidden")
        return self._eval(HELD, [self.trigger_idx])


class NeverAfterRule(Rule):
    kind = "never_after"
    doc = "Once a `trigger` call has occurred, no `forbidden` call may follow."
    operand_fields = ("trigger", "forbidden")
    fields = {
        "trigger": Field(SELECTOR_SCHEMA, required=True, doc="The call after which `forbidden` is banned."),
        "forbidden": Field(SELECTOR_SCHEMA, required=True, doc="The banned call."),
    }
    state_class = _NeverAfterState
    id_format = "never_after:{trigger}->{forbidden}"


# sequence -----------------------------------------------------------------------------------------
class _SequenceState(RuleState):
    __slots__ = ("pos", "spanned", "unknown")

    def __init__(self, rule: Rule) -> None:
        super().__init__(rule)
        self.pos = 0
        self.spanned: List[int] = []  # at most len(tools) (+1 at a violation)
        self.unknown: Optional[str] = None

    def _feed(self, call: ToolCall) -> Optional[RuleEvaluation]:
        tools: List[Operand] = self.rule.operands["tools"]
        if self.pos >= len(tools):
            return None
        expected = tools[self.pos]
        m = expected.match(call)
        if m:
            self.spanned.append(call.index)
            self.pos += 1
            return None
        if m is None:
            return self._eval(INCONCLUSIVE, list(self.spanned),
                              f"whether call #{call.index + 1} is the expected '{expected}' is unknown: "
                              f"{unknown_args_note(call)}")
        if self.rule.values["strict"]:
            if self.spanned:
                return self._eval(
                    VIOLATED, [*self.spanned, call.index],
                    f"strict sequence violated: expected '{expected}' at call #{call.index + 1} but found "
                    f"'{call.name}'",
                    call,
                )
            return None
        for later in tools[self.pos + 1:]:
            lm = later.match(call)
            if lm:
                return self._eval(
                    VIOLATED, [*self.spanned, call.index],
                    f"sequence out of order: '{later}' at call #{call.index + 1} appears before '{expected}'",
                    call,
                )
            if lm is None:
                self.unknown = self.unknown or unknown_args_note(call)
        return None

    def _finish(self, complete: bool) -> RuleEvaluation:
        tools: List[Operand] = self.rule.operands["tools"]
        if self.pos >= len(tools):
            if self.unknown is not None:
                return self._eval(INCONCLUSIVE, list(self.spanned), f"the order is not certain: {self.unknown}")
            return self._eval(HELD, list(self.spanned))
        if not self.spanned:
            if self.unknown is not None:
                return self._eval(INCONCLUSIVE, [], f"the order is not certain: {self.unknown}")
            return self._eval(NOT_EXERCISED, [], "no tool named by the sequence appeared")
        if not complete:
            return self._eval(INCONCLUSIVE, list(self.spanned),
                              f"sequence reached '{tools[self.pos - 1]}' and the episode was cut short before "
                              f"'{tools[self.pos]}'")
        return self._eval(VIOLATED, list(self.spanned),
                          f"sequence reached '{tools[self.pos - 1]}' and the episode ended before '{tools[self.pos]}'")


class SequenceRule(Rule):
    kind = "sequence"
    doc = ("The listed calls must occur in this order. Non-strict: other calls may come in between, but a later "
           "member before an earlier one violates. Strict: once started, the members must be consecutive. "
           "Started but unfinished on a complete episode violates.")
    operand_fields = ("tools",)
    fields = {
        "tools": Field({"type": "array", "items": SELECTOR_SCHEMA, "minItems": 1}, required=True,
                       doc="The calls, in order."),
        "strict": Field({"type": "boolean"}, default=False, doc="Members must be consecutive once started."),
    }
    state_class = _SequenceState

    def _id(self) -> str:
        names = ">".join(str(t) for t in self.operands["tools"])
        return f"sequence{':strict' if self.values['strict'] else ''}:{names}"
