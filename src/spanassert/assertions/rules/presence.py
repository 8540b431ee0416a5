"""Rule kinds about whether and how often a tool is called: ``require``, ``blocklist``,
``max_calls``."""
from __future__ import annotations

import json
from typing import List, Optional

from ...core.model import ToolCall
from ..base import BuildContext, Field
from ..selectors import (
    SELECTOR_SCHEMA,
    W_CFG_TOOL_NAME,
)
from .common import (
    HELD,
    INCONCLUSIVE,
    MAX_SPANNED,
    VIOLATED,
    Rule,
    RuleEvaluation,
    RuleState,
    unknown_args_note,
)


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
            self.unknown = unknown_args_note(call)
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
    id_format = "require:{tool}"


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
    id_format = "blocklist:{pattern}"

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


# Not folded: a kind's class body, the Rule contract filled with its own data (see order.BeforeRule).
class MaxCallsRule(Rule):
    kind = "max_calls"
    doc = "At most `max` matching calls. Zero calls holds."
    operand_fields = ("tool",)
    fields = {
        "tool": Field(SELECTOR_SCHEMA, required=True, doc="The call being counted."),
        "max": Field({"type": "integer", "minimum": 0}, required=True, doc="Largest allowed count."),
    }
    state_class = _MaxCallsState
    id_format = "max_calls:{tool}<={max}"
