"""The receiver's early check: the violations one finished tool span has on its own, before its
trace is assembled (rules marked ``order_free``), on throwaway rule states; and what it computed,
kept for the assembled pass of the same spans (see :func:`.calls._reuse_precheck`).

A mixin of :class:`~spanassert.core.engine.Engine` (the engine's state is set in its ``__init__``).
"""
from __future__ import annotations

from typing import Any, List, Mapping, Optional, Sequence

from ..mapping import ROLE_TOOL
from .calls import CallsAndSteps
from .episode import RuleStates, give_call
from .model import CONTENT_MISSING, MISSING, Failure, ToolCall
from .plan import Slot
from .results import Violation


def _first_failure(ep: RuleStates, slot: Slot, failure: Failure,
                   span_id: Optional[str], late: bool) -> None:  # noqa: ARG001 -- give_call's `fail` signature
    """The early check keeps each rule's first failure (its caller reports them; the engine does not)."""
    if ep.failed is None:
        ep.failed = {}
    ep.failed.setdefault(slot.index, failure)


class EarlyCheck(CallsAndSteps):
    """:meth:`precheck` and what it keeps (see the module docstring)."""

    @property
    def has_precheck(self) -> bool:
        """Whether any rule can be decided on one finished tool span alone (see :meth:`precheck`)."""
        return bool(self.plans.precheck().slots)

    # Not folded: the span's fields as parameters, as Engine.start_span / end_span take them: each door
    # passes them straight; a shared record would be one more allocation per span on the hot path.
    def precheck(
        self,
        trace_id: str,
        span_id: str,
        parent_id: Optional[str],
        name: str,
        attributes: Mapping[str, Any],
        start_ns: int,
        end_ns: int,
        status_code: int = 0,
        events: Sequence[Any] = (),
        role: Optional[int] = None,
        index: int = 0,
        agent: Optional[str] = None,
        keep: bool = False,
    ) -> List[Violation]:
        """The violations one finished tool span has on its own, before its trace is assembled.

        For a receiver, which gets spans after they end and must wait for the rest of a trace
        before feeding it: the rules marked ``order_free`` (their failure at a call depends only on
        that call) are run on fresh, throwaway states, so they fire on arrival. Nothing in the
        engine changes and nothing goes to the sink: the caller reports the result, and must not
        report the same (test, assertion, span) again when the trace is fed later. ``index`` is the
        call's position as far as the caller knows it (it only shows in messages).

        ``keep``: the caller will feed this span's trace and then call :meth:`forget_precheck`. The
        checked call is kept until then (at most ``max_prechecked`` calls), so the assembled pass
        takes its decoded content, and what the rules computed from that content alone
        (``ToolCall.memo``), instead of doing that work again; where the span's record differs
        (another text, arguments bound to a parameter) it is done again, so no verdict depends on
        whether a call was kept.
        """
        plan = self.plans.precheck()
        if not plan.slots:
            return []
        if role is None:
            role = self.mapper.role(name, attributes)
        if role != ROLE_TOOL:
            return []
        tool, call_id = self.mapper.tool_start(name, attributes)  # as the assembled start reads them
        if tool is None:
            return []
        tp = plan.tool_plan(tool)
        targets = tp.targets
        if not targets:
            return []
        call = ToolCall(tool, span_id, trace_id, parent_id, start_ns, index, None, call_id)
        # No arguments at its start (the end gives them): what decoding none gives, set rather than
        # decoded by the first rule that asks.
        call._args, call._args_state = MISSING, CONTENT_MISSING
        if keep and self.prechecked_calls < self.max_prechecked:
            call.memo = {}
        fresh = RuleStates(plan)  # throwaway: nothing of the engine changes
        give_call(fresh, tp.start, call, _first_failure)
        self._finish_call(tp, call, attributes, end_ns, status_code, events)
        give_call(fresh, tp.end, call, _first_failure)
        if call.memo is not None:
            kept = self.prechecked.get(trace_id)
            if kept is None:
                kept = self.prechecked[trace_id] = {}
            if span_id not in kept:
                self.prechecked_calls += 1
            kept[span_id] = call
        if not fresh.failed:
            return []
        out: List[Violation] = []
        for i, f in sorted(fresh.failed.items()):
            slot = plan.slots[i]
            a = slot.assertion
            out.append(Violation(
                test_id=slot.test.id, assertion_type=a.type_name, assertion_index=a.index, assertion_name=a.name,
                severity=slot.severity, shadow=slot.shadow, message=f.message, span_id=f.span_id or span_id,
                trace_id=trace_id, episode_key=trace_id, tool=f.tool, call_index=f.call_index, agent=agent,
            ))
        return out


    def forget_precheck(self, trace_id: str) -> None:
        """Drop the calls :meth:`precheck` kept for ``trace_id`` (its trace was fed, or given up)."""
        kept = self.prechecked.pop(trace_id, None)
        if kept:
            self.prechecked_calls -= len(kept)


__all__ = ["EarlyCheck"]
