"""User ``mappings:`` rules, compiled once so that matching a span costs a few comparisons."""
from __future__ import annotations

from typing import Any, Callable, Final, Optional, Sequence, Tuple

from ..config.model import MappingRule

ROLE_OTHER: Final = 0
ROLE_TOOL: Final = 1
ROLE_AGENT: Final = 2
ROLE_STEP: Final = 3

# Role names a ``mappings:`` rule may give; "other" lets a user silence a span a convention matches.
ROLE_BY_NAME: Final = {"tool": ROLE_TOOL, "agent": ROLE_AGENT, "step": ROLE_STEP, "other": ROLE_OTHER}

_NAME_KEYS: Final = ("span_name", "span_name_prefix", "span_name_suffix")

# ``attributes.get`` (or a faster equivalent, see ``mapper.lookup``).
Getter = Callable[[str], Any]


def name_text(value: Any) -> Tuple[bool, Optional[str]]:
    """A name attribute (a tool's name) as ``(readable, text)``: a string as it is, bytes as UTF-8;
    absent or blank: ``(True, None)`` (the next source is read). A list, a number, a boolean or
    bytes that are not UTF-8: ``(False, None)``: readers disagree on its text (``str()`` of the
    SDK's tuple and of a decoder's list differ; a boolean is ``True`` or ``true``), so the call has
    no name (unreadable: no pass stands on it) and no later source names it."""
    if type(value) is str:
        return True, value if value.strip() else None
    if value is None:
        return True, None
    if isinstance(value, (bytes, bytearray)):
        try:
            text = bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return False, None
        return True, text if text.strip() else None
    return False, None


def _same(got: Any, want: Any, want_text: str) -> bool:
    if got is None:
        return False
    if got == want:
        return True
    if isinstance(got, bool):  # YAML `true` vs an attribute True, "true" vs True
        return want_text.lower() == str(got).lower()
    return str(got) == want_text


class CompiledRule:
    """One ``mappings:`` entry with its ``when`` split into name checks and attribute checks."""

    __slots__ = (
        "index",
        "role",
        "name_exact",
        "name_prefix",
        "name_suffix",
        "conditions",
        "gate_key",
        "tool_name",
        "tool_name_from_span",
        "arguments",
        "result",
        "agent_name",
        "call_id",
    )

    def __init__(self, rule: MappingRule, index: int) -> None:
        role = ROLE_BY_NAME.get(str(rule.role))
        if role is None:
            raise ValueError(
                f"mappings[{index}].role is {rule.role!r}; use one of: " + ", ".join(sorted(ROLE_BY_NAME))
            )
        when = dict(rule.when or {})
        if not when:
            raise ValueError(f"mappings[{index}].when is empty; a rule must say which spans it applies to")
        self.index = index
        self.role = role
        self.name_exact: Optional[str] = _opt_str(when.get("span_name"))
        self.name_prefix: Optional[str] = _opt_str(when.get("span_name_prefix"))
        self.name_suffix: Optional[str] = _opt_str(when.get("span_name_suffix"))
        self.conditions: Tuple[Tuple[str, Any, str], ...] = tuple(
            (str(k), v, str(v).lower() if isinstance(v, bool) else str(v))
            for k, v in when.items()
            if k not in _NAME_KEYS
        )
        # An attribute the span must carry: checked before anything else, as most spans lack it.
        self.gate_key: Optional[str] = self.conditions[0][0] if self.conditions else None
        self.tool_name = rule.tool_name
        self.tool_name_from_span = bool(rule.tool_name_from_span)
        self.arguments = rule.arguments
        self.result = rule.result
        self.agent_name = rule.agent_name
        self.call_id = rule.call_id

    def matches_attributes(self, get: Getter) -> bool:
        for key, want, want_text in self.conditions:  # noqa: SIM110 -- per span: an early return beats all() over a generator
            if not _same(get(key), want, want_text):
                return False
        return True

    def matches(self, name: str, get: Getter) -> bool:
        if self.name_exact is not None and name != self.name_exact:
            return False
        if self.name_prefix is not None and not name.startswith(self.name_prefix):
            return False
        if self.name_suffix is not None and not name.endswith(self.name_suffix):
            return False
        return self.matches_attributes(get)

    def tool_name_from(self, name: str, get: Getter) -> Tuple[bool, Optional[str]]:
        """``(readable, tool name)`` as this rule reads it (:func:`name_text`)."""
        if self.tool_name:
            readable, text = name_text(get(self.tool_name))
            if text is not None or not readable:
                return readable, text
        if self.tool_name_from_span:
            return True, name or None
        return True, None


def _opt_str(value: Any) -> Optional[str]:
    return None if value is None else str(value)


def compile_rules(rules: Sequence[MappingRule]) -> Tuple[CompiledRule, ...]:
    return tuple(CompiledRule(rule, i) for i, rule in enumerate(rules))
