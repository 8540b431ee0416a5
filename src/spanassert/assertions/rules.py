"""The sequence-rule language: eight rule kinds over the ordered tool calls of an episode.

One evaluator serves every surface (``expected: sequence_valid``, policy files, tests, the
whole-list helper): each rule builds a :class:`RuleState` that is fed one call at a time in start
order, costs O(1) per call (O(rule size) for ``sequence``) and keeps O(rule size) memory. A state
reports a violation at the first call where it becomes certain, and everything else when it is
finished: over a *complete* episode an unmet deadline is a violation; over a *partial* one (evicted,
timed out, shut down) it is inconclusive, because a later call could still have met it.

Each rule ends as ``held``, ``violated``, ``not_exercised`` (its antecedent never fired, so it
checked nothing) or ``inconclusive`` (the episode was partial, or a call's arguments were not
recorded so an ``args_match`` operand could not be decided and the answer depended on it).

Messages number calls from 1 ("call #1" is the first call of the episode); ``spanned`` holds 0-based
call indices, as Assay's rule records do.

Operands are call selectors (:mod:`.selectors`): a bare tool name, resolved through the policy's
``aliases`` (an alias names one or several tools), ``{tool, args_match}``, or ``{tool_pattern,
args_match}`` (an anchored regex over the name; no aliases). ``blocklist`` alone
takes a plain substring ``pattern`` of the tool name (``*`` is literal, no alias, no arguments).
"""
from __future__ import annotations

import json
from typing import Any, ClassVar, Dict, FrozenSet, Iterable, List, Mapping, Optional, Sequence, Tuple, Type

from ..core.model import MISSING, ToolCall
from ..core.suggest import did_you_mean
from .base import BuildContext, Field
from .schema_fast import plainly_valid
from .selectors import (
    SELECTOR_SCHEMA,
    W_CFG_TOOL_NAME,
    ArgsMatch,
    CallSelector,
    as_regex,
    compile_tool_pattern,
    warn_tool_name,
)

HELD = "held"
VIOLATED = "violated"
NOT_EXERCISED = "not_exercised"
INCONCLUSIVE = "inconclusive"

E_CFG_RULE = "E_CFG_RULE"

# Spanned indices kept per rule: a claim stays checkable without letting a count rule grow its state.
MAX_SPANNED = 64


class RuleEvaluation:
    """What one rule found over one episode: the rule id (kind plus operands, stable across runs),
    the outcome, the call indices it read to reach it, and why (for every outcome but ``held``).
    ``span_id`` is the span of the call where a violation became certain, when there is one."""

    __slots__ = ("rule_id", "kind", "outcome", "spanned", "reason", "span_id")

    def __init__(
        self,
        rule_id: str,
        kind: str,
        outcome: str,
        spanned: Optional[List[int]] = None,
        reason: Optional[str] = None,
        span_id: Optional[str] = None,
    ) -> None:
        self.rule_id = rule_id
        self.kind = kind
        self.outcome = outcome
        self.spanned = spanned if spanned is not None else []
        self.reason = reason
        self.span_id = span_id

    @property
    def violated(self) -> bool:
        return self.outcome == VIOLATED

    def to_dict(self) -> Dict[str, Any]:
        return {
            "rule_id": self.rule_id,
            "kind": self.kind,
            "outcome": self.outcome,
            "spanned": list(self.spanned),
            "reason": self.reason,
        }

    def __repr__(self) -> str:
        return f"RuleEvaluation({self.rule_id!r}, {self.outcome}, spanned={self.spanned}, reason={self.reason!r})"


# -- operands -------------------------------------------------------------------------------------
class Operand:
    """A rule operand: a call selector whose tool may be an alias for several tools.

    ``match`` is three-valued: True, False, or None when the call is one of the named tools but its
    arguments cannot be read as named arguments (not recorded, or a bare value that could not be
    bound to the tool's parameter), so an ``args_match`` cannot be decided.
    """

    __slots__ = ("label", "selectors", "key")

    def __init__(self, label: str, selectors: Sequence[CallSelector], key: Tuple[Any, ...]) -> None:
        self.label = label
        self.selectors = tuple(selectors)
        # Equality of written operands (tool + args_match), for "cannot constrain" checks.
        self.key = key

    @property
    def tools(self) -> FrozenSet[str]:
        """The exact names this operand selects (its ``tool_pattern`` selectors have none)."""
        return frozenset(s.tool for s in self.selectors if s.pattern is None)

    @property
    def reads_arguments(self) -> bool:
        return any(s.args_match is not None for s in self.selectors)

    def match(self, call: ToolCall) -> Optional[bool]:
        result: Optional[bool] = False
        for sel in self.selectors:
            if not sel.name_matches(call):
                continue
            if sel.args_match is None:
                return True
            if not sel.decidable(call):
                result = None
                continue
            if sel.args_match.matches(call):
                return True
        return result

    def __str__(self) -> str:
        return self.label


def _resolve(tool: str, aliases: Optional[Mapping[str, Any]]) -> List[str]:
    members = (aliases or {}).get(tool)
    if members is None:
        return [tool]
    if isinstance(members, str):
        return [members]
    return [str(m) for m in members]


def build_operand(spec: Any, ctx: BuildContext, field: str, aliases: Optional[Mapping[str, Any]] = None) -> Operand:
    """Build an operand from a selector spec (already shape-checked)."""
    if isinstance(spec, str):
        if spec not in (aliases or {}):
            warn_tool_name(ctx, spec, field, instead="to select calls by pattern write the operand as "
                           f"`{{tool_pattern: {json.dumps(as_regex(spec))}}}` (an anchored regex)")
        return Operand(spec, [CallSelector(t) for t in _resolve(spec, aliases)], (spec, ()))
    raw_match = spec.get("args_match") or {}
    args_match = ArgsMatch.build(raw_match, ctx, f"{field}.args_match")
    if spec.get("tool_pattern"):
        pattern = spec["tool_pattern"]
        name = f"/{pattern}/"
        selectors = [CallSelector("", args_match, compile_tool_pattern(ctx, pattern, f"{field}.tool_pattern"))]
    else:
        name = spec["tool"]
        if name not in (aliases or {}):
            warn_tool_name(ctx, name, f"{field}.tool", pattern_field="tool_pattern")
        selectors = [CallSelector(t, args_match) for t in _resolve(name, aliases)]
    # Rule ids name the constrained arguments, not the regexes: ids stay short and stable.
    label = f"{name}[{','.join(sorted(raw_match))}]" if raw_match else name
    key = (name, tuple(sorted(raw_match.items())))
    return Operand(label, selectors, key)


# -- rule kinds -----------------------------------------------------------------------------------
def _unknown_args_note(call: ToolCall) -> str:
    why = call.arguments_problem or "an argument it matches is too long to match within bounds"
    return f"`{call.name}` at call #{call.index + 1}: {why}, so its `args_match` could not be decided"


class RuleState:
    """Per-episode state of one rule. ``feed`` returns an evaluation only when a violation becomes
    certain at that call; ``finish`` gives the final evaluation."""

    __slots__ = ("rule", "decided")

    def __init__(self, rule: Rule) -> None:
        self.rule = rule
        self.decided: Optional[RuleEvaluation] = None

    def feed(self, call: ToolCall) -> Optional[RuleEvaluation]:
        if self.decided is not None:
            return None
        ev = self._feed(call)
        if ev is None:
            return None
        self.decided = ev
        return ev if ev.outcome == VIOLATED else None

    def finish(self, complete: bool = True) -> RuleEvaluation:
        if self.decided is not None:
            return self.decided
        return self._finish(complete)

    # helpers
    def _eval(self, outcome: str, spanned: Optional[List[int]] = None, reason: Optional[str] = None,
              call: Optional[ToolCall] = None) -> RuleEvaluation:
        return RuleEvaluation(self.rule.rule_id, self.rule.kind, outcome, spanned, reason,
                              call.span_id if call is not None else None)

    def _feed(self, call: ToolCall) -> Optional[RuleEvaluation]:
        raise NotImplementedError

    def _finish(self, complete: bool) -> RuleEvaluation:
        raise NotImplementedError


class Rule:
    """A parsed rule. Subclasses declare ``kind``, ``fields`` and their state class."""

    kind: ClassVar[str] = ""
    fields: ClassVar[Dict[str, Field]] = {}
    doc: ClassVar[str] = ""
    # Fields that are call selectors (everything else is a plain value).
    operand_fields: ClassVar[Tuple[str, ...]] = ()
    state_class: ClassVar[Type[RuleState]] = RuleState

    def __init__(self, values: Dict[str, Any], operands: Dict[str, Any]) -> None:
        self.values = values
        self.operands = operands

    @property
    def rule_id(self) -> str:
        raise NotImplementedError

    @property
    def reads_arguments(self) -> bool:
        return any(op.reads_arguments for op in self.all_operands())

    def all_operands(self) -> List[Operand]:
        out: List[Operand] = []
        for v in self.operands.values():
            out.extend(v if isinstance(v, list) else [v])
        return out

    def check(self, ctx: BuildContext, field: str) -> None:
        """Semantic checks beyond the field schemas (report through ``ctx.error``)."""

    def new_state(self) -> RuleState:
        return self.state_class(self)

    def __repr__(self) -> str:
        return f"Rule({self.rule_id})"


# require ------------------------------------------------------------------------------------------
class _RequireState(RuleState):
    __slots__ = ("unknown",)

    def __init__(self, rule: Rule) -> None:
        super().__init__(rule)
        self.unknown: Optional[str] = None

    def _feed(self, call: ToolCall) -> Optional[RuleEvaluation]:
        m = self.rule.operands["tool"].match(call)
        if m:
            return self._eval(HELD, [call.index])
        if m is None and self.unknown is None:
            self.unknown = _unknown_args_note(call)
        return None

    def _finish(self, complete: bool) -> RuleEvaluation:
        tool = self.rule.operands["tool"]
        if self.unknown is not None:
            return self._eval(INCONCLUSIVE, [], f"required tool '{tool}' not found for certain: {self.unknown}")
        if not complete:
            return self._eval(INCONCLUSIVE, [], f"required tool '{tool}' not seen before the episode was cut short")
        return self._eval(VIOLATED, [], f"required tool '{tool}' not found in trace")


class RequireRule(Rule):
    kind = "require"
    doc = "At least one matching call must occur."
    operand_fields = ("tool",)
    fields = {"tool": Field(SELECTOR_SCHEMA, required=True, doc="The call that must occur.")}
    state_class = _RequireState

    @property
    def rule_id(self) -> str:
        return f"require:{self.operands['tool']}"


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
            self.first_unknown = _unknown_args_note(call)
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
            self.then_unknown = _unknown_args_note(call)
        return None

    def _finish(self, complete: bool) -> RuleEvaluation:
        first, then = self.rule.operands["first"], self.rule.operands["then"]
        if self.then_unknown is not None:
            return self._eval(INCONCLUSIVE, [], f"whether '{then}' came before '{first}' is unknown: "
                                                f"{self.then_unknown}")
        if self.first_idx is not None and self.then_idx is not None:
            return self._eval(HELD, [self.first_idx, self.then_idx])
        return self._eval(NOT_EXERCISED, [], f"'{then}' never appeared, so the ordering was never constrained")


class BeforeRule(Rule):
    kind = "before"
    doc = "The first `first` call must precede the first `then` call; `then` with no earlier `first` violates."
    operand_fields = ("first", "then")
    fields = {
        "first": Field(SELECTOR_SCHEMA, required=True, doc="The call that must come first."),
        "then": Field(SELECTOR_SCHEMA, required=True, doc="The call that may only follow `first`."),
    }
    state_class = _BeforeState

    @property
    def rule_id(self) -> str:
        return f"before:{self.operands['first']}->{self.operands['then']}"

    def check(self, ctx: BuildContext, field: str) -> None:
        if self.operands["first"].key == self.operands["then"].key:
            ctx.error(
                E_CFG_RULE,
                f"`before` with first == then ('{self.operands['first']}') cannot constrain anything: "
                "a call always comes no later than itself",
                field=field,
                hint="name two different calls in `first` and `then`",
            )


# blocklist ----------------------------------------------------------------------------------------
class _BlocklistState(RuleState):
    __slots__ = ()

    def _feed(self, call: ToolCall) -> Optional[RuleEvaluation]:
        pattern = self.rule.values["pattern"]
        if pattern in call.name:
            return self._eval(VIOLATED, [call.index],
                              f"tool '{call.name}' at call #{call.index + 1} matches blocklist "
                              f"pattern '{pattern}'", call)
        return None

    def _finish(self, complete: bool) -> RuleEvaluation:
        return self._eval(HELD, [])


class BlocklistRule(Rule):
    kind = "blocklist"
    doc = "No tool name may contain `pattern` (a plain substring: `*` is literal; no aliases, no arguments)."
    fields = {"pattern": Field({"type": "string", "minLength": 1}, required=True,
                               doc="Substring of the tool name that is forbidden.")}
    state_class = _BlocklistState

    @property
    def rule_id(self) -> str:
        return f"blocklist:{self.values['pattern']}"

    def check(self, ctx: BuildContext, field: str) -> None:
        # Assay's semantics stay: a plain substring, `*` included. A pattern that looks like a glob
        # or regex is still only a substring, which is worth a warning.
        pattern = self.values["pattern"]
        literal = sorted({c for c in pattern if c in "*?[]()|^$\\{}+"})
        if literal:
            chars = " ".join(f"`{c}`" for c in literal)
            ctx.warn(W_CFG_TOOL_NAME,
                     f"blocklist pattern {json.dumps(pattern)} is a plain substring (Assay's semantics): it blocks "
                     f"only tool names that contain {chars} literally",
                     field=f"{field}.pattern",
                     hint="write the substring itself (`delete_` blocks every name containing it), or use "
                          "`trace_must_not_call_tool` with `tool_pattern:` for an anchored regex")


# max_calls ----------------------------------------------------------------------------------------
class _MaxCallsState(RuleState):
    __slots__ = ("count", "unknown", "hits")

    def __init__(self, rule: Rule) -> None:
        super().__init__(rule)
        self.count = 0
        self.unknown = 0
        self.hits: List[int] = []

    def _feed(self, call: ToolCall) -> Optional[RuleEvaluation]:
        m = self.rule.operands["tool"].match(call)
        if m is None:
            self.unknown += 1
            return None
        if not m:
            return None
        self.count += 1
        if len(self.hits) < MAX_SPANNED:
            self.hits.append(call.index)
        limit = self.rule.values["max"]
        if self.count > limit:
            return self._eval(
                VIOLATED, list(self.hits),
                f"tool '{self.rule.operands['tool']}' exceeded max calls ({self.count} > {limit}) at call "
                f"#{call.index + 1}",
                call,
            )
        return None

    def _finish(self, complete: bool) -> RuleEvaluation:
        limit = self.rule.values["max"]
        if self.count + self.unknown > limit:
            return self._eval(INCONCLUSIVE, list(self.hits),
                              f"{self.count} certain and {self.unknown} undecidable call(s) of "
                              f"'{self.rule.operands['tool']}' against max {limit}: their arguments could not be read "
                              "as named arguments "
                              "(not recorded, or not an object)")
        return self._eval(HELD, list(self.hits))


class MaxCallsRule(Rule):
    kind = "max_calls"
    doc = "At most `max` matching calls. Zero calls holds."
    operand_fields = ("tool",)
    fields = {
        "tool": Field(SELECTOR_SCHEMA, required=True, doc="The call being counted."),
        "max": Field({"type": "integer", "minimum": 0}, required=True, doc="Largest allowed count."),
    }
    state_class = _MaxCallsState

    @property
    def rule_id(self) -> str:
        return f"max_calls:{self.operands['tool']}<={self.values['max']}"


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
                self.unknown = _unknown_args_note(call)
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

    @property
    def rule_id(self) -> str:
        return f"eventually:{self.operands['tool']}@{self.values['within']}"


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
                self.note = self.note or _unknown_args_note(call)
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
            self.note = self.note or _unknown_args_note(call)
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

    @property
    def rule_id(self) -> str:
        return f"after:{self.operands['trigger']}->{self.operands['then']}@{self.values['within']}"

    def check(self, ctx: BuildContext, field: str) -> None:
        if self.operands["trigger"].key == self.operands["then"].key:
            ctx.error(
                E_CFG_RULE,
                f"`after` with trigger == then ('{self.operands['then']}') can never hold on a finished "
                "episode: the last such call always waits for another",
                field=field,
                hint="name a different call in `then`",
            )


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
                self.unknown = self.unknown or _unknown_args_note(call)
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

    @property
    def rule_id(self) -> str:
        return f"never_after:{self.operands['trigger']}->{self.operands['forbidden']}"


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
                              f"{_unknown_args_note(call)}")
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
                self.unknown = self.unknown or _unknown_args_note(call)
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

    @property
    def rule_id(self) -> str:
        names = ">".join(str(t) for t in self.operands["tools"])
        return f"sequence{':strict' if self.values['strict'] else ''}:{names}"


RULE_KINDS: Dict[str, Type[Rule]] = {
    cls.kind: cls
    for cls in (RequireRule, BeforeRule, BlocklistRule, MaxCallsRule, EventuallyRule, AfterRule, NeverAfterRule,
                SequenceRule)
}

# The shape accepted where a list of rules is a field; each rule is checked in detail by parse_rule
# (which gives better messages than a oneOf over eight kinds would).
RULE_ITEM_SCHEMA: Dict[str, Any] = {
    "type": "object",
    "required": ["type"],
    "properties": {"type": {"enum": sorted(RULE_KINDS)}},
}


def rule_schema() -> Dict[str, Any]:
    """The precise JSON Schema of one rule (for ``spanassert schema`` and editors)."""
    variants = []
    for kind, cls in sorted(RULE_KINDS.items()):
        variants.append({
            "type": "object",
            "description": cls.doc,
            "properties": {"type": {"const": kind},
                           **{k: dict(f.schema, description=f.doc) for k, f in cls.fields.items()}},
            "required": ["type"] + [k for k, f in cls.fields.items() if f.required],
            "additionalProperties": False,
        })
    return {"oneOf": variants}


# -- parsing --------------------------------------------------------------------------------------
def _did_you_mean(word: str, choices: Iterable[str]) -> str:
    guess = did_you_mean(word, choices)
    return f" (did you mean `{guess}`?)" if guess else ""


def _schema_problem(schema: Mapping[str, Any], value: Any,
                    label: str) -> Optional[Tuple[str, str, Tuple[()], None]]:  # noqa: ARG001 -- the `check` signature
    """A rule value's problem, as :func:`~spanassert.config.fields.field_problems` asks for it (the
    rule language words an operand's shape its own way; the message names the key)."""
    problem = _operand_problem(value, schema)
    return None if problem is None else (E_CFG_RULE, problem, (), None)


def _operand_problem(value: Any, schema: Mapping[str, Any]) -> Optional[str]:
    if plainly_valid(schema, value):
        return None
    import jsonschema  # imported when a rule is parsed, not when the package is (start-up stays light)

    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError as exc:
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in exc.absolute_path)
        prefix = f"at {where}: " if where else ""
        if exc.validator == "oneOf":
            bad = exc.instance
            if isinstance(bad, dict) and "args_match" in bad and not isinstance(bad.get("args_match"), dict):
                return prefix + "`args_match` must be a map of argument name to regex"
            return prefix + ("expected a tool name, `{tool: NAME, args_match: {ARG: REGEX}}` or "
                             "`{tool_pattern: REGEX, args_match: {ARG: REGEX}}`")
        return prefix + str(exc.message)
    return None


def parse_rule(spec: Any, ctx: BuildContext, field: str, aliases: Optional[Mapping[str, Any]] = None) -> Optional[Rule]:
    """Parse one rule mapping; problems go to ``ctx.error`` (and None is returned)."""
    if not isinstance(spec, Mapping):
        ctx.error(E_CFG_RULE, f"a rule must be a mapping with a `type`, got {type(spec).__name__}", field=field)
        return None
    kind = spec.get("type")
    if not isinstance(kind, str) or kind not in RULE_KINDS:
        ctx.error(E_CFG_RULE, f"unknown rule type {kind!r}{_did_you_mean(str(kind), RULE_KINDS)}",
                  field=f"{field}.type",
                  hint="one of: " + ", ".join(sorted(RULE_KINDS)))
        return None
    from ..config.fields import MISSING_KEY, UNKNOWN_KEY, field_problems  # config imports assertions

    cls = RULE_KINDS[kind]
    ok = True
    for p in field_problems(spec, cls.fields, known=lambda key: key == "type", check=_schema_problem):
        ok = False
        if p.kind == UNKNOWN_KEY:
            ctx.error(E_CFG_RULE, f"`{kind}` rule has no key `{p.key}`{_did_you_mean(str(p.key), cls.fields)}",
                      field=f"{field}.{p.key}", hint="accepted keys: " + ", ".join(cls.fields))
        elif p.kind == MISSING_KEY:
            ctx.error(E_CFG_RULE, f"`{kind}` rule needs `{p.key}`", field=field, hint=p.field.doc if p.field else None)
        elif p.problem is not None:
            ctx.error(E_CFG_RULE, f"`{kind}` rule `{p.key}`: {p.problem[1]}", field=f"{field}.{p.key}")
    if not ok:
        return None
    values: Dict[str, Any] = {name: spec.get(name, fld.default) for name, fld in cls.fields.items()}
    operands: Dict[str, Any] = {}
    for name in cls.operand_fields:
        value = values[name]
        if isinstance(value, list):
            operands[name] = [build_operand(v, ctx, f"{field}.{name}[{i}]", aliases) for i, v in enumerate(value)]
        else:
            operands[name] = build_operand(value, ctx, f"{field}.{name}", aliases)
    rule = cls(values, operands)
    before = len(ctx.errors)
    rule.check(ctx, field)
    return rule if len(ctx.errors) == before else None


def parse_rules(specs: Sequence[Any], ctx: BuildContext, field: str,
                aliases: Optional[Mapping[str, Any]] = None) -> List[Rule]:
    out: List[Rule] = []
    for i, spec in enumerate(specs):
        rule = parse_rule(spec, ctx, f"{field}[{i}]", aliases)
        if rule is not None:
            out.append(rule)
    return out


# -- whole-list evaluation ------------------------------------------------------------------------
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


__all__ = [
    "HELD",
    "VIOLATED",
    "NOT_EXERCISED",
    "INCONCLUSIVE",
    "RuleEvaluation",
    "Operand",
    "Rule",
    "RuleState",
    "RULE_KINDS",
    "RULE_ITEM_SCHEMA",
    "rule_schema",
    "parse_rule",
    "parse_rules",
    "build_operand",
    "as_tool_calls",
    "evaluate_rules",
]
