"""What every rule kind shares: the four outcomes, a rule's evaluation, operands (call selectors
with aliases), and the ``Rule`` / ``RuleState`` bases the kinds extend."""
from __future__ import annotations

import json
from typing import Any, ClassVar, Dict, FrozenSet, List, Mapping, Optional, Sequence, Tuple, Type

from ...core.model import ToolCall
from ..base import BuildContext, Field
from ..selectors import (
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
def unknown_args_note(call: ToolCall) -> str:
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
    """A parsed rule. Subclasses declare ``kind``, ``fields``, their state class and the form of
    their id; ``distinct`` when two of their operands must differ."""

    kind: ClassVar[str] = ""
    fields: ClassVar[Dict[str, Field]] = {}
    doc: ClassVar[str] = ""
    # Fields that are call selectors (everything else is a plain value).
    operand_fields: ClassVar[Tuple[str, ...]] = ()
    state_class: ClassVar[Type[RuleState]] = RuleState
    # The rule id (kind plus operands, stable across runs), filled from the fields, operands by
    # their labels: "before:{first}->{then}". A kind whose id is not one format overrides _id.
    id_format: ClassVar[str] = ""
    # Two operands that must not select the same calls, and why not / how to fix it: (a, b, why, hint).
    distinct: ClassVar[Optional[Tuple[str, str, str, str]]] = None

    def __init__(self, values: Dict[str, Any], operands: Dict[str, Any]) -> None:
        self.values = values
        self.operands = operands
        self.rule_id = self._id()

    def _id(self) -> str:
        return self.id_format.format_map({**self.values, **self.operands})

    @property
    def reads_arguments(self) -> bool:
        return any(op.reads_arguments for op in self.all_operands())

    def all_operands(self) -> List[Operand]:
        out: List[Operand] = []
        for v in self.operands.values():
            out.extend(v if isinstance(v, list) else [v])
        return out

    def check(self, ctx: BuildContext, field: str) -> None:
        """Semantic checks beyond the field schemas (report through ``ctx.error``): the ``distinct``
        operands."""
        if self.distinct is None:
            return
        a, b, why, hint = self.distinct
        if self.operands[a].key == self.operands[b].key:
            ctx.error(E_CFG_RULE, f"`{self.kind}` with {a} == {b} ('{self.operands[a]}') {why}", field=field, hint=hint)

    def new_state(self) -> RuleState:
        return self.state_class(self)

    def __repr__(self) -> str:
        return f"Rule({self.rule_id})"
