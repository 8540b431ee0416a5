"""``trace_tool_result``: Reelier-style property checks on what each call of a tool returned.

The ``assert`` lines are parsed at load (:mod:`.result_grammar`); a line outside the grammar is a load
error. Every line is evaluated on every call of the tool when its span ends, and all the lines that
fail on one call are reported together in one violation (soft within the call).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from ..core.model import Failure, ToolCall
from .base import EVIDENCE_RESULT, NEED_RESULT, NEED_STATUS, BuildContext, Field
from .call_checks import EveryCallAssertion, EveryCallState, call_ref
from .registry import register
from .result_grammar import (
    FAILED,
    FORMS,
    UNDECIDED,
    ResultCheck,
    ResultView,
    compile_result_checks,
)
from .selectors import CallSelector, tool_fields, tool_selector


class ToolResultAssertion(EveryCallAssertion):
    type_name = "trace_tool_result"
    tool_required = True
    what = "returned results satisfying `assert`"
    doc = (
        "Every call of `tool` must return a result that satisfies every line of `assert`, written in "
        "Reelier's result grammar (`status == ok`, `body contains \"text\"`, `json.items is array`, "
        "`json.id matches /^usr_/`, `json.items length >= 1`, `json.total == 3`). A safety rule: it "
        "fails at the offending call when its span ends, listing every line that failed there "
        "(observed values shown only with `evidence: result`). Inconclusive when a line needs data "
        "that was not recorded (no result, a truncated result, no numeric status in it), when a call "
        "had not ended by close, or when the episode closed before it finished. Not applicable to an "
        "episode with no call of `tool`."
    )
    fields = {
        **tool_fields("Exact name of the tool whose results are checked.", required=True),
        "assert": Field(
            {"type": "array", "items": {"type": "string"}},
            required=True,
            doc="Result assertions, one per line, each one of: " + FORMS + ".",
        ),
    }

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        selector = tool_selector(values, ctx, required=True)
        self.tool = selector.name_label if selector is not None else ""
        self.lines: List[str] = list(values.get("assert") or [])
        self.checks: List[ResultCheck] = compile_result_checks(self.lines, ctx, "assert")
        self.select_calls(selector or CallSelector(""))
        needs = {NEED_RESULT}
        if any(c.reads_status for c in self.checks):
            needs.add(NEED_STATUS)
        self.needs = frozenset(needs)

    def ineffective_reason(self) -> Optional[str]:
        if not self.lines:
            return "`assert` is empty, so every result satisfies it"
        return None

    def _show(self, value: Any) -> str:
        return self.show(value, EVIDENCE_RESULT)

    def on_call_end(self, state: EveryCallState, call: ToolCall) -> Optional[Failure]:
        state.open = max(0, state.open - 1)  # an end whose start was not seen must not go negative
        view = ResultView.of(call)
        failed: List[str] = []
        undecided: Optional[str] = None  # the first line that could not be judged, and why
        for check in self.checks:
            verdict, observed = check.check(call, view, self._show)
            if verdict == FAILED:
                failed.append(f"`{check.line.strip()}` ({observed})" if observed else f"`{check.line.strip()}`")
            elif verdict == UNDECIDED and undecided is None:
                undecided = f"`{check.line.strip()}`: {observed}"
        if failed:
            return state.fail(
                call,
                f"`{call.name}` result at {call_ref(call)} failed {len(failed)} of {len(self.checks)} "
                "assertion(s): " + "; ".join(failed),
            )
        if undecided is not None:
            state.undecide(call, undecided)
        else:
            state.checked += 1
        return None


register(ToolResultAssertion)


__all__ = ["ToolResultAssertion"]
