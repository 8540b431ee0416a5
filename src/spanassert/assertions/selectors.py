"""Call selectors: a bare tool name, or ``{tool | tool_pattern, args_match: {argument: regex}}``.

A tool name is compared exactly. ``tool_pattern`` is the explicit pattern form: a regular
expression matched against the whole name (anchored: ``delete_.*`` matches ``delete_db``, not
``undelete_db``). :func:`warn_tool_name` warns at load about an exact name that holds regex or glob
characters or whitespace, since no call is named that way and the rule would pass forever.

Semantics (Assay's ``CallSelector``): ``args_match`` is an AND over the named arguments, each regex
searched (unanchored) in the argument's value. A missing argument counts as *no match*; non-string
values are matched against their JSON rendering. Arguments that are not an object of named
arguments (a bare value, an array, a non-JSON string) are bound to the tool's single parameter when
its definition was recorded (see :func:`spanassert.core.model.bind_arguments`); otherwise the match
cannot be decided and the call is *undecidable* (its rule inconclusive, never passed: Assay counts
such a call as no match, which would let ``"prod"`` pass a rule against ``{name: prod}``).
Matching is bounded: an argument whose text is longer than :data:`MAX_MATCH_CHARS` is not matched at
all, and the call is undecidable (its rule inconclusive). Matching a cut text would be a guess both
ways: padding would hide a forbidden value past the cut, and a cut can make a pattern match that the
whole text does not.
"""
from __future__ import annotations

import json
import re
from typing import Any, Dict, Final, Mapping, Optional, Pattern

from ..core.model import CONTENT_MISSING, CONTENT_OK, ToolCall
from .base import BuildContext
from .detectors import DETECTOR_NAMES, expand, scan

# Matching is bounded: an argument longer than this is not searched (the call is undecidable).
MAX_MATCH_CHARS: Final = 100_000

# An `args_match` condition: a regex searched in the argument, or `{detector: NAME}` (a built-in
# detector of secrets and personal data finds something in it; see :mod:`.detectors`).
ARG_CONDITION_SCHEMA: Final[Dict[str, Any]] = {
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

SELECTOR_SCHEMA: Final[Dict[str, Any]] = {
    "oneOf": [
        {"type": "string", "minLength": 1},
        {
            "type": "object",
            "properties": {
                "tool": {"type": "string", "minLength": 1},
                "tool_pattern": {"type": "string", "minLength": 1},
                "args_match": {"type": "object", "additionalProperties": ARG_CONDITION_SCHEMA},
            },
            "oneOf": [{"required": ["tool"]}, {"required": ["tool_pattern"]}],
            "additionalProperties": False,
        },
    ]
}

W_CFG_TOOL_NAME: Final = "W_CFG_TOOL_NAME"
E_CFG_CONFLICT: Final = "E_CFG_CONFLICT"
E_CFG_REQUIRED: Final = "E_CFG_REQUIRED"

TOOL_PATTERN_DOC: Final = ("An anchored regular expression for the tool name, instead of `tool` (`delete_.*` matches "
                    "`delete_db`, not `undelete_db`).")

# Characters that mean something in a regex or a glob and (almost) never occur in a tool name.
_PATTERN_CHARS: Final = re.compile(r"[*?\[\]()|^$\\{}+]")
_GLOB_STAR: Final = re.compile(r"(?<![.\]\)])\*")

ARGS_MATCH_SCHEMA: Final[Dict[str, Any]] = {
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
    def build(cls, spec: Optional[Mapping[str, Any]], ctx: BuildContext, field: str) -> Optional[ArgsMatch]:
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

    def decidable(self, call: ToolCall) -> bool:
        """False when the arguments were not recorded, are not an object of named arguments (and
        could not be bound to the tool's parameter), or a matched argument is longer than
        :data:`MAX_MATCH_CHARS` (the match cannot be decided)."""
        state = call.arguments_state
        if state == CONTENT_MISSING:
            return False
        if state == CONTENT_OK:
            args = call.arguments
            if not isinstance(args, dict):
                return False
            return not any(arg in args and _too_long(args[arg]) for arg in self.patterns)
        return True  # recorded but unparsable: no match (the engine counts the span unreadable)

    def undecidable_reason(self, call: ToolCall) -> str:
        """Why :meth:`decidable` is False for ``call``."""
        problem = call.arguments_problem
        if problem is not None:
            return problem
        return f"an argument it matches is longer than {MAX_MATCH_CHARS} characters"

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
    """Selects calls by exact tool name (or, with ``pattern``, by an anchored regex over the name),
    optionally narrowed by ``args_match``."""

    __slots__ = ("tool", "args_match", "pattern", "_text")

    def __init__(self, tool: str, args_match: Optional[ArgsMatch] = None,
                 pattern: Optional[Pattern[str]] = None) -> None:
        self.tool = tool  # the exact name; "" with a pattern
        self.args_match = args_match
        self.pattern = pattern
        self._text: Optional[str] = None  # str(self), made once (messages at every close name it)

    @classmethod
    def build(cls, spec: Any, ctx: BuildContext, field: str,
              aliases: Optional[Mapping[str, str]] = None) -> CallSelector:
        if isinstance(spec, str):
            warn_tool_name(ctx, spec, field)
            return cls((aliases or {}).get(spec, spec))
        args_match = ArgsMatch.build(spec.get("args_match"), ctx, f"{field}.args_match")
        if spec.get("tool_pattern"):
            return cls("", args_match, compile_tool_pattern(ctx, spec["tool_pattern"], f"{field}.tool_pattern"))
        tool = spec.get("tool", "")
        warn_tool_name(ctx, tool, f"{field}.tool")
        return cls((aliases or {}).get(tool, tool), args_match)

    def name_matches(self, call: ToolCall) -> bool:
        if self.pattern is None:
            return call.name == self.tool
        return self.pattern.fullmatch(call.name) is not None

    def matches(self, call: ToolCall) -> bool:
        if not self.name_matches(call):
            return False
        return self.args_match is None or self.args_match.matches(call)

    def decidable(self, call: ToolCall) -> bool:
        """Whether ``matches`` can be trusted for this call (False: its arguments were not recorded)."""
        if self.args_match is None or not self.name_matches(call):
            return True
        return self.args_match.decidable(call)

    @property
    def name_label(self) -> str:
        """The name part as messages show it: the exact name, or ``/pattern/``."""
        return self.tool if self.pattern is None else f"/{self.pattern.pattern}/"

    def __str__(self) -> str:
        text = self._text
        if text is None:
            text = self.name_label if self.args_match is None else f"{self.name_label}({self.args_match.describe()})"
            self._text = text
        return text


# -- `tool` / `tool_pattern` on an assertion -------------------------------------------------------
def compile_tool_pattern(ctx: BuildContext, pattern: str, field: str) -> Optional[Pattern[str]]:
    """``tool_pattern``, compiled for whole-name matching (errors and backtracking risk reported)."""
    return ctx.compile_regex(pattern, field=field)


def tool_selector(values: Mapping[str, Any], ctx: BuildContext, *, required: bool,
                  args_match: Optional[ArgsMatch] = None) -> Optional[CallSelector]:
    """The selector of an assertion with ``tool`` and ``tool_pattern`` fields (at most one of them;
    exactly one when ``required``). None when neither is given (every call) or after an error."""
    tool, pattern = values.get("tool"), values.get("tool_pattern")
    if tool is not None and pattern:
        ctx.error(E_CFG_CONFLICT, "give `tool` (an exact name) or `tool_pattern` (a regex), not both",
                  field="tool_pattern", hint="keep one of them")
        return None
    if pattern:
        compiled = compile_tool_pattern(ctx, pattern, "tool_pattern")
        return None if compiled is None else CallSelector("", args_match, compiled)
    if tool is not None:
        warn_tool_name(ctx, tool, "tool", pattern_field="tool_pattern")
        return CallSelector(tool, args_match)
    if required:
        ctx.error(E_CFG_REQUIRED, "needs `tool` (an exact tool name) or `tool_pattern` (an anchored regex)",
                  hint="add `tool: NAME`, or `tool_pattern: REGEX` to select calls by pattern")
    return None


def tool_name_problem(name: str) -> Optional[str]:
    """Why ``name`` cannot be a tool name compared exactly, or None: regex or glob characters, or
    whitespace."""
    if not isinstance(name, str) or not name:
        return None
    if name != name.strip():
        return "has leading or trailing whitespace"
    if any(c.isspace() for c in name):
        return "contains whitespace"
    chars = sorted(set(_PATTERN_CHARS.findall(name)))
    if chars:
        return "contains regex or glob characters (" + " ".join(f"`{c}`" for c in chars) + ")"
    return None


def as_regex(name: str) -> str:
    """A pattern that probably says what ``name`` meant: a glob's ``*`` becomes ``.*``."""
    return _GLOB_STAR.sub(".*", name.replace("?", ".")) if "*" in name and ".*" not in name else name


def warn_tool_name(ctx: BuildContext, name: Any, field: str, *, pattern_field: Optional[str] = None,
                   instead: Optional[str] = None) -> None:
    """Warn (``W_CFG_TOOL_NAME``, at ``field``) when an exact tool name can never match a call.

    ``pattern_field`` names this assertion's pattern form; ``instead`` says where to write a
    pattern when the assertion has none."""
    problem = tool_name_problem(name) if isinstance(name, str) else None
    if problem is None:
        return
    if "whitespace" in problem:
        hint = f"write the name without it: `{name.strip()}`" if name != name.strip() else \
            "tool names are compared exactly and rarely contain spaces: check the spelling"
    elif pattern_field is not None:
        hint = (f"to select calls by pattern write `{pattern_field}: {json.dumps(as_regex(name))}` (an anchored "
                "regex) instead; if a tool is really named that, ignore this warning")
    else:
        hint = (instead or "to select calls by pattern use `trace_must_not_call_tool` / `trace_must_call_tool` "
                "with `tool_pattern:`, or a sequence rule operand `{tool_pattern: REGEX}`") + \
            "; if a tool is really named that, ignore this warning"
    ctx.warn(W_CFG_TOOL_NAME, f"tool name {json.dumps(name)} {problem}; names are compared exactly, so no call "
             "will ever match it and the rule would pass forever", field=field, hint=hint)


def tool_fields(tool_doc: str, *, required: bool, empty_is_ineffective: bool = False) -> Dict[str, Any]:
    """The ``tool`` and ``tool_pattern`` fields of an assertion type (with ``tool_required = required``
    on the class, so ``spanassert schema`` asks for exactly one of them)."""
    from .base import Field

    suffix = "" if required else " Default: every call."
    return {
        # Assay: an empty `tool` on the must/must-not types is refused as ineffective, not as a type error.
        "tool": Field({"type": "string"} if empty_is_ineffective else {"type": "string", "minLength": 1},
                      doc=tool_doc + suffix),
        "tool_pattern": Field({"type": "string", "minLength": 1}, doc=TOOL_PATTERN_DOC + suffix),
    }
