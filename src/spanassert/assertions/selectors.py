"""Call selectors: a bare tool name, or ``{tool, args_match: {argument: regex}}``.

Semantics (Assay's ``CallSelector``): ``args_match`` is an AND over the named arguments, each regex
searched (unanchored) in the argument's value. A missing argument, non-object arguments, or a value
that cannot be read count as *no match*. Non-string values are matched against their JSON rendering.
Matching is bounded: an argument whose text is longer than :data:`MAX_MATCH_CHARS` is not matched at
all, and the call is undecidable (its rule inconclusive). Matching a cut text would be a guess both
ways: padding would hide a forbidden value past the cut, and a cut can make a pattern match that the
whole text does not.
"""
from __future__ import annotations

import json
from typing import Any, Dict, Mapping, Optional

from ..core.model import CONTENT_MISSING, CONTENT_OK, ToolCall
from .base import BuildContext
from .detectors import DETECTOR_NAMES, expand, scan

# Matching is bounded: an argument longer than this is not searched (the call is undecidable).
MAX_MATCH_CHARS = 100_000

# An `args_match` condition: a regex searched in the argument, or `{detector: NAME}` (a built-in
# detector of secrets and personal data finds something in it; see :mod:`.detectors`).
ARG_CONDITION_SCHEMA: Dict[str, Any] = {
    "oneOf": [
        {"type": "string"},
        {
            "type": "object",
            "properties": {"detector": {"enum": list(DETECTOR_NAMES)}},
            "required": ["detector"],
            "additionalProperties": False,
        },
    ]
}

SELECTOR_SCHEMA: Dict[str, Any] = {
    "oneOf": [
        {"type": "string", "minLength": 1},
        {
            "type": "object",
            "properties": {
                "tool": {"type": "string", "minLength": 1},
                "args_match": {"type": "object", "additionalProperties": ARG_CONDITION_SCHEMA},
            },
            "required": ["tool"],
            "additionalProperties": False,
        },
    ]
}

ARGS_MATCH_SCHEMA: Dict[str, Any] = {
    "type": "object",
    "additionalProperties": ARG_CONDITION_SCHEMA,
    "minProperties": 1,
}


def render_arg(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _too_long(value: Any) -> bool:
    if isinstance(value, str):
        return len(value) > MAX_MATCH_CHARS
    if isinstance(value, (dict, list)):
        return len(render_arg(value)) > MAX_MATCH_CHARS
    return False


class DetectorCondition:
    """``{detector: NAME}`` in ``args_match``: true when the detector finds something in the
    argument's text. Shaped like a compiled regex (``search``, ``pattern``) so that every matcher
    takes either."""

    __slots__ = ("name", "names", "pattern")

    def __init__(self, name: str) -> None:
        self.name = name
        self.names = expand([name])
        self.pattern = f"detector:{name}"

    def search(self, text: str) -> Optional[str]:
        return scan(text, self.names)


class ArgsMatch:
    """An AND of ``argument -> regex`` (or ``argument -> {detector: NAME}``) conditions over a
    call's arguments."""

    __slots__ = ("patterns",)

    def __init__(self, patterns: Mapping[str, Any]) -> None:
        self.patterns = dict(patterns)

    @classmethod
    def build(cls, spec: Optional[Mapping[str, Any]], ctx: BuildContext, field: str) -> Optional["ArgsMatch"]:
        if not spec:
            return None
        compiled: Dict[str, Any] = {}
        for arg, pattern in spec.items():
            if isinstance(pattern, Mapping):
                compiled[arg] = DetectorCondition(str(pattern.get("detector")))
                continue
            rx = ctx.compile_regex(pattern, field=f"{field}.{arg}")
            if rx is not None:
                compiled[arg] = rx
        return cls(compiled)

    @property
    def uses_detectors(self) -> bool:
        """Whether a condition is a detector: the matched values are secrets or personal data, and
        no message may show them, whatever ``evidence:`` says."""
        return any(isinstance(p, DetectorCondition) for p in self.patterns.values())

    def needs_arguments(self) -> bool:
        return True

    def decidable(self, call: ToolCall) -> bool:
        """False when the arguments were not recorded, or a matched argument is longer than
        :data:`MAX_MATCH_CHARS` (the match cannot be decided)."""
        if call.arguments_state == CONTENT_MISSING:
            return False
        if call.arguments_state == CONTENT_OK and isinstance(call.arguments, dict):
            args = call.arguments
            return not any(arg in args and _too_long(args[arg]) for arg in self.patterns)
        return True

    def matches(self, call: ToolCall) -> bool:
        if call.arguments_state != CONTENT_OK:
            return False
        args = call.arguments
        if not isinstance(args, dict):
            return False
        for arg, rx in self.patterns.items():
            if arg not in args:
                return False
            text = render_arg(args[arg])
            if len(text) > MAX_MATCH_CHARS or rx.search(text) is None:
                return False  # too long to match within bounds: undecidable (see `decidable`)
        return True

    def describe(self) -> str:
        return ", ".join(
            f"{k} has {v.name}" if isinstance(v, DetectorCondition) else f"{k} =~ /{v.pattern}/"
            for k, v in self.patterns.items()
        )


class CallSelector:
    """Selects calls by exact tool name, optionally narrowed by ``args_match``."""

    __slots__ = ("tool", "args_match")

    def __init__(self, tool: str, args_match: Optional[ArgsMatch] = None) -> None:
        self.tool = tool
        self.args_match = args_match

    @classmethod
    def build(cls, spec: Any, ctx: BuildContext, field: str, aliases: Optional[Mapping[str, str]] = None) -> "CallSelector":
        if isinstance(spec, str):
            return cls((aliases or {}).get(spec, spec))
        tool = spec.get("tool", "")
        return cls((aliases or {}).get(tool, tool), ArgsMatch.build(spec.get("args_match"), ctx, f"{field}.args_match"))

    def name_matches(self, call: ToolCall) -> bool:
        return call.name == self.tool

    def matches(self, call: ToolCall) -> bool:
        if call.name != self.tool:
            return False
        return self.args_match is None or self.args_match.matches(call)

    def decidable(self, call: ToolCall) -> bool:
        """Whether ``matches`` can be trusted for this call (False: its arguments were not recorded)."""
        if call.name != self.tool or self.args_match is None:
            return True
        return self.args_match.decidable(call)

    def __str__(self) -> str:
        if self.args_match is None:
            return self.tool
        return f"{self.tool}({self.args_match.describe()})"
