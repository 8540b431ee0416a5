"""Deny by default: ``trace_only_tools``.

The episode may call only the tools listed in ``tools`` or whose name the regex ``tool_pattern``
matches in full. A safety rule on the tool name alone: it fails when the offending span *starts*,
before the tool body runs (the live processor judges such a start on the agent's thread), and the
failure depends on that call alone (serve checks it on arrival). State: the first failure.
"""
from __future__ import annotations

from typing import Any, Dict, Final, FrozenSet, Optional, Pattern

from ..core.model import EpisodeView, Failure, Outcome, ToolCall
from .base import Assertion, BuildContext, Field
from .call_checks import call_ref, settled
from .registry import register

_MAX_NAMES_KNOWN: Final = 4096  # tool names whose verdict one rule remembers

# Names a pattern is tried on to tell whether it admits every tool (then the rule cannot fail).
_PROBE_NAMES: Final = ("", "a", "Z", "0", "delete_database", "rm -rf /", "Ω.tool/x:y", "x" * 257)


class OnlyToolsState:
    __slots__ = ("first_failure", "calls")

    def __init__(self) -> None:
        self.first_failure: Optional[str] = None
        self.calls = 0


class OnlyToolsAssertion(Assertion):
    type_name = "trace_only_tools"
    doc = (
        "Deny by default: every tool call of the episode must be of a tool listed in `tools` (exact "
        "names) or whose whole name matches the regex `tool_pattern`; give either or both. A safety "
        "rule: it fails when the span of an unlisted tool starts, before the tool body runs, once per "
        "call. Inconclusive when the episode closed before it finished (evicted, timed out, shut down) "
        "with no unlisted call so far. A pattern that matches every name is refused (cannot fail)."
    )
    fields = {
        "tools": Field(
            {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1},
            doc="The tools the agent may call (exact names).",
        ),
        "tool_pattern": Field(
            {"type": "string", "minLength": 1},
            doc="A regex; a tool whose whole name matches it is allowed too (e.g. `^mcp_fs_.*`).",
        ),
    }

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        self.order_free = True  # a failure at a call depends on that call's name alone
        self.untouched_close_shared = True  # closing it untouched reads only the close (see Assertion)
        self.allowed: FrozenSet[str] = frozenset(values.get("tools") or ())
        self.pattern_text: Optional[str] = values.get("tool_pattern")
        self.pattern: Optional[Pattern[str]] = None
        if self.pattern_text is not None:
            self.pattern = ctx.compile_regex(self.pattern_text, field="tool_pattern")
        if not self.allowed and self.pattern_text is None:
            ctx.error(
                "E_CFG_REQUIRED",
                "`trace_only_tools` needs `tools` (a list of tool names), `tool_pattern` (a regex), or both",
                hint="e.g. `tools: [search, lookup_order]`",
            )
        self.tools = None  # every call is judged
        self._what_text: Optional[str] = None  # the allowed tools as messages name them, made once
        self._allows: Dict[str, bool] = {}  # tool name -> allowed, as names are first seen
        self.reports_at_start = True

    def ineffective_reason(self) -> Optional[str]:
        if self.pattern is not None and all(self.pattern.fullmatch(n) for n in _PROBE_NAMES):
            return f"`tool_pattern: {self.pattern_text}` matches every tool name, so no call is ever unlisted"
        return None

    def allows(self, name: str) -> bool:
        known = self._allows.get(name)
        if known is not None:
            return known
        ok = name in self.allowed or (self.pattern is not None and self.pattern.fullmatch(name) is not None)
        if len(self._allows) < _MAX_NAMES_KNOWN:
            self._allows[name] = ok  # names come from spans: the memory is bounded
        return ok

    def _what(self) -> str:
        if self._what_text is not None:
            return self._what_text
        parts = []
        if self.allowed:
            parts.append("[" + ", ".join(sorted(self.allowed)) + "]")
        if self.pattern_text is not None:
            parts.append(f"/{self.pattern_text}/")
        self._what_text = " or ".join(parts)
        return self._what_text

    def new_state(self) -> OnlyToolsState:
        return OnlyToolsState()

    def on_call_start(self, state: OnlyToolsState, call: ToolCall) -> Optional[Failure]:
        state.calls += 1
        if self._allows.get(call.name) or self.allows(call.name):  # a name allowed before: one read
            return None
        if state.first_failure is None:
            state.first_failure = f"`{call.name}` at {call_ref(call)}"
        return Failure.at(call, f"`{call.name}` called at {call_ref(call)} is not an allowed tool; allowed: "
                                f"{self._what()}")

    def on_close(self, state: OnlyToolsState, episode: EpisodeView) -> Outcome:
        if state.first_failure is not None:
            return Outcome.failed(f"an unlisted tool was called: first {state.first_failure}")
        return settled(f"{state.calls} call(s), all of allowed tools {self._what()}", episode)


register(OnlyToolsAssertion)


__all__ = ["OnlyToolsAssertion"]
