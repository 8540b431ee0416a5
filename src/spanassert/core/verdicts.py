"""Verdicts: a rule's failure as it happens (a violation, reported once per rule and span), every
rule's verdict when an episode closes, the downgrade of a pass that rests on evidence not seen, and
amendments when later evidence reaches a closed episode.

A mixin of :class:`~spanassert.core.engine.Engine` (the engine's state is set in its ``__init__``).
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Dict, Final, List, Optional, Sequence, Tuple

from ..assertions.base import NEED_ARGUMENTS, NEED_RESULT
from .episode import (
    INCOMPLETE_JUDGING_FAILED,
    INCOMPLETE_OPENING_NOT_JUDGED,
    INCOMPLETE_ROOT_NOT_SEEN,
    NO_STATE,
    OUT_OF_ORDER,
    Episode,
    Sink,
)
from .model import CloseReason, EpisodeView, Failure, Outcome, ToolCall, Verdict
from .plan import Plan, Slot
from .results import AssertionResult, EpisodeResult, Violation, episode_result
from .toolcall import AMBIGUOUS_ARGUMENTS, AMBIGUOUS_RESULT, ARGUMENTS_IN_DOUBT, RESULT_IN_DOUBT

# Enum members read once (reading one off its class costs a descriptor call each time).
_PASSED, _FAILED, _NOT_APPLICABLE = Verdict.PASSED, Verdict.FAILED, Verdict.NOT_APPLICABLE
_UNDECIDED_MATCH: Final = ("no violation seen, but `match` could not be decided: the span that opened this episode "
                           "records its agent name or service.name as a value that is not text (a list, a number)")
_ROOT_ENDED, _IDLE, _END_OF_INPUT = CloseReason.ROOT_ENDED, CloseReason.IDLE, CloseReason.END_OF_INPUT
_INTERNAL_ERROR: Final = CloseReason.INTERNAL_ERROR
# A rule whose decision at close raised (an error inside spanassert): unknown, never a pass.
_CLOSE_RAISED: Final = Outcome(Verdict.INCONCLUSIVE, "deciding this rule raised an internal error")


def violation_of(ep: Episode, slot: Slot, message: str, span_id: Optional[str], tool: Optional[str],
                 call_index: Optional[int], late: bool = False, at_close: bool = False) -> Violation:
    """The violation of ``slot``'s rule in ``ep`` at ``span_id``."""
    a = slot.assertion
    return Violation(
        test_id=slot.test.id,
        assertion_type=a.type_name,
        assertion_index=a.index,
        assertion_name=a.name,
        severity=slot.severity,
        shadow=slot.shadow,
        message=message,
        span_id=span_id,
        trace_id=ep.trace_id,
        episode_key=ep.key,
        tool=tool,
        call_index=call_index,
        late=late,
        at_close=at_close,
        agent=ep.agent,
    )


class Verdicts:
    """Failures, closes and amendments (see the module docstring)."""

    sink: Sink
    by_trace_key: bool
    late_window: int
    open: OrderedDict[str, Episode]
    by_trace: Dict[str, Episode]
    recent: OrderedDict[str, Episode]
    _capture: Optional[List[Violation]]  # violations of a guard's pending call, while it is decided
    _dry: bool  # ... and, outside any trace, not reported (nothing is recorded)
    # (plan, close reason) -> per slot, the shared outcome of an untouched rule (see _results)
    _untouched: Dict[Tuple[Plan, Optional[CloseReason]], List[Optional[Outcome]]]

    def _mark_incomplete(self, ep: Episode, incomplete: Sequence[str], root_seen: bool) -> None:
        view = ep
        reasons = list(incomplete)
        if not root_seen and INCOMPLETE_ROOT_NOT_SEEN not in reasons:
            reasons.insert(0, INCOMPLETE_ROOT_NOT_SEEN)
        if reasons:
            if view.incomplete is None:
                view.incomplete = []
            for r in reasons:
                if r not in view.incomplete:
                    view.incomplete.append(r)
        if not root_seen:
            ep.hold = True


    def _fail(self, ep: Episode, slot: Slot, failure: Failure, span_id: Optional[str],
              late: bool = False, at_close: bool = False) -> Optional[Violation]:
        sid = failure.span_id or span_id
        mark = (slot.index, sid)
        if ep.reported is None:
            ep.reported = set()
        elif mark in ep.reported:
            return None
        ep.reported.add(mark)
        if ep.failed is None:
            ep.failed = {}
        ep.failed.setdefault(slot.index, failure)
        v = violation_of(ep, slot, failure.message, sid, failure.tool, failure.call_index, late=late,
                         at_close=at_close)
        if sid is not None:
            if ep.marks is None:
                ep.marks = {}
            ep.marks.setdefault(sid, []).append(v)
        if self._capture is not None:
            self._capture.append(v)
            if self._dry:
                return v
        self.sink.violation(v)
        return v

    # -- closing ------------------------------------------------------------------------------------
    def _close(self, ep: Episode, reason: CloseReason) -> EpisodeResult:
        view = ep
        view.close_reason = reason
        if ep.open_calls or ep.more is not None:
            ep.in_flight = list(ep.open_calls.values()) if ep.open_calls else None
        results = self._results(ep)
        again = ep.result is not None  # a reopened episode: this result replaces the first one
        result = self._episode_result(ep, results, amendment=again)
        self._forget(ep)
        self.sink.evaluated(ep.eval_s)
        if again:
            self.sink.episode_amended(result)
        else:
            self.sink.episode_closed(result)
        return result

    def _episode_result(self, ep: Episode, results: List[AssertionResult], amendment: bool,
                        late: bool = False) -> EpisodeResult:
        view = ep
        assert view.close_reason is not None
        more = view.more  # unreadable calls and what is incomplete: at their default without it
        result = episode_result(
            ep.key, ep.trace_id, view.root_span_id, view.root_name, view.agent, view.service, view.close_reason,
            results, view.call_count, view.step_count, 0 if more is None else more.unreadable_calls, late,
            None if more is None else more.incomplete, amendment)
        ep.result = result
        return result

    def _results(self, ep: Episode) -> List[AssertionResult]:
        """Every rule's verdict on the episode as its states and view stand (at close, and again
        when later evidence amends a closed episode)."""
        view = ep
        reason = view.close_reason
        # No side record: every field kept there is at its default (nothing incomplete, late,
        # unreadable, truncated, dropped or in flight), read here without going through it.
        plain = view.more is None
        if not plain and view.incomplete:
            view.decidable = False  # the missing evidence could hold what a rule looks for
        elif self.by_trace_key:
            view.decidable = reason is _ROOT_ENDED
        else:
            view.decidable = reason is _IDLE or reason is _END_OF_INPUT
        results: List[AssertionResult] = []
        append = results.append
        in_flight = [] if plain else ep.in_flight or []
        plan = ep.plan
        states = ep.states
        failed = ep.failed
        # Whether some evidence was not seen: only then can a pass be downgraded (see _downgrade).
        unseen = reason is _INTERNAL_ERROR or (not plain and bool(
            view.incomplete or view.late_calls or view.unreadable_calls or in_flight or view.results_truncated
            or view.calls_dropped or view.order_ties or view.ambiguous))
        # The outcomes of the rules no call, step or span time reached (their state never made),
        # decided once per plan and close reason (see Assertion.untouched_close_shared). Only
        # when nothing is incomplete: then these rules read nothing else of the episode.
        cut = not plain and bool(view.incomplete)
        shared = None if cut else self._untouched.get((plan, reason))
        if shared is None and not cut:
            shared = self._untouched[(plan, reason)] = self._untouched_outcomes(plan, view)
        for slot in plan.slots:
            i = slot.index
            st = states[i]
            first = failed.get(i) if failed else None
            outcome = shared[i] if st is NO_STATE and shared is not None else None
            if outcome is None:
                a = slot.assertion
                try:
                    if st is NO_STATE:
                        st = states[i] = a.new_state()
                    outcome = a.on_close(st, view)
                except Exception as exc:  # noqa: BLE001 - one rule's error must not lose the others' verdicts
                    self.sink.internal_error("close", exc)  # counted by the door (replay: raised again)
                    outcome = _CLOSE_RAISED
            if first is not None:
                verdict, message, sid = _FAILED, first.message, first.span_id
            else:
                verdict, message, sid = outcome.verdict, outcome.message, outcome.span_id
                if verdict is _FAILED:
                    if ep.at_close is not None and i in ep.at_close:
                        sid = sid or view.root_span_id  # reported when the episode first closed
                    else:
                        v = self._fail(ep, slot, Failure(message, span_id=sid or view.root_span_id),
                                       view.root_span_id, at_close=True)
                        sid = v.span_id if v is not None else (sid or view.root_span_id)
                        if ep.at_close is None:
                            ep.at_close = set()
                        ep.at_close.add(i)
                elif verdict is _PASSED and unseen:
                    verdict, message = self._downgrade(slot, view, in_flight, message)
                if verdict is _PASSED and plan.undecided and slot.test.id in plan.undecided:
                    verdict, message = Verdict.INCONCLUSIVE, _UNDECIDED_MATCH
            test_id, type_name, a_index, a_name, severity, shadow = slot.head
            append(AssertionResult(test_id, type_name, a_index, a_name, verdict, message, sid, severity, shadow))
        if plan.excluded:
            # A span of the trace lost before the episode opened may be the one whose agent,
            # service or attributes `match` would have selected: not "not applicable", unknown.
            lost = not plain and INCOMPLETE_OPENING_NOT_JUDGED in (view.incomplete or ())
            verdict, message = ((Verdict.INCONCLUSIVE, "`match` did not select this episode, but the span that "
                                 "opened it may not have been judged (internal error)") if lost
                                else (_NOT_APPLICABLE, "`match` did not select this episode"))
            for t in plan.excluded:
                severity = str(getattr(t.severity, "value", t.severity))
                for a in t.trace_assertions:
                    append(AssertionResult(t.id, a.type_name, a.index, a.name, verdict, message, None, severity,
                                           t.shadow))
        return results

    @staticmethod
    def _untouched_outcomes(plan: Plan, view: EpisodeView) -> List[Optional[Outcome]]:
        """Per slot of ``plan``: the outcome of a rule that declares ``untouched_close_shared``
        on a fresh state in an episode closed as ``view`` is (nothing incomplete), else None."""
        out: List[Optional[Outcome]] = []
        for slot in plan.slots:
            a = slot.assertion
            outcome = None
            if a.untouched_close_shared:
                try:
                    outcome = a.on_close(a.new_state(), view)
                except Exception:  # noqa: BLE001 - decided again per episode, where the error is counted
                    outcome = None
            out.append(outcome)
        return out

    @staticmethod
    def _downgrade(slot: Slot, view: EpisodeView, in_flight: List[ToolCall], message: str) -> Tuple[Verdict, str]:
        """A pass that rests on data we did not see is not a pass."""
        if view.close_reason is _INTERNAL_ERROR:
            return Verdict.INCONCLUSIVE, "judging this episode raised an internal error; the rest of it was not judged"
        a = slot.assertion
        incomplete = view.incomplete
        if incomplete and (not a.pass_survives_unseen_calls or OUT_OF_ORDER in incomplete
                           or INCOMPLETE_OPENING_NOT_JUDGED in incomplete or INCOMPLETE_JUDGING_FAILED in incomplete):
            # A safety rule never broke in what was seen, or a liveness rule that calls not seen
            # could still break was met: the part not seen could break it. Nor is a liveness pass
            # sure when which calls belong to the episode is unknown: calls arrived out of order,
            # or a span of it could not be judged (internal error): the span that opened it, or
            # one whose end would have closed it (live: a sub-agent span under a plain root)
            # before a call that met the rule.
            return Verdict.INCONCLUSIVE, "no violation seen, but the evidence is incomplete (" + \
                "; ".join(incomplete) + ")"
        if view.order_ties and a.order_matters:
            return Verdict.INCONCLUSIVE, (
                f"{view.order_ties} tool call(s) started at the same instant as the call before them, so their "
                "order is unknown"
            )
        if view.late_calls and a.decides_on_close and not a.pass_survives_unseen_calls:
            return Verdict.INCONCLUSIVE, (
                f"{view.late_calls} call(s) arrived after the episode closed; this rule was decided without them"
            )
        if view.unreadable_calls:
            return Verdict.INCONCLUSIVE, (
                f"{view.unreadable_calls} tool span(s) could not be read (no tool name or unreadable content)"
            )
        if in_flight and slot.content_needed:
            pending = [c for c in in_flight if a.applies_to(c.name)]
            if pending:
                return Verdict.INCONCLUSIVE, (
                    f"{len(pending)} call(s) of `{pending[0].name}` had not ended when the episode closed"
                )
        if view.results_truncated and NEED_RESULT in a.needs:
            return Verdict.INCONCLUSIVE, (
                f"{view.results_truncated} tool result(s) were cut to max_argument_bytes: the rest was not checked")
        ambiguous = view.ambiguous
        if ambiguous:
            read = None
            if ambiguous & ARGUMENTS_IN_DOUBT and NEED_ARGUMENTS in a.needs:
                read, bits = "arguments", ambiguous & ARGUMENTS_IN_DOUBT
            elif ambiguous & RESULT_IN_DOUBT and NEED_RESULT in a.needs:
                read, bits = "result", ambiguous & RESULT_IN_DOUBT
            if read is not None:
                if bits & (AMBIGUOUS_ARGUMENTS | AMBIGUOUS_RESULT):
                    return Verdict.INCONCLUSIVE, (
                        f"a tool call's recorded {read} repeat a JSON key with different values: the last one was "
                        "judged, and a reader that takes another (the first, as some parsers do) could break this "
                        "rule")
                return Verdict.INCONCLUSIVE, (
                    f"a tool span recorded its {read} twice (under two conventions' keys, or a key and span "
                    "events) with different values: the first was judged, and the other could break this rule")
        if view.calls_dropped and slot.content_needed:
            return Verdict.INCONCLUSIVE, f"{view.calls_dropped} in-flight call(s) were dropped (bound reached)"
        return Verdict.PASSED, message

    def _forget(self, ep: Episode) -> None:
        ep.closed = True
        self.open.pop(ep.key, None)
        trace_id = ep.trace_id
        assert trace_id is not None  # an episode's, set when it opens (Optional on a view only)
        traces = ep.traces or {trace_id}
        for tid in traces:
            if self.by_trace.get(tid) is ep:
                del self.by_trace[tid]
            if self.late_window:
                self.recent[tid] = ep
                self.recent.move_to_end(tid)
            elif tid not in self.by_trace:
                self.sink.trace_released(tid)
        while len(self.recent) > self.late_window:
            tid, _ = self.recent.popitem(last=False)
            if tid not in self.by_trace:
                self.sink.trace_released(tid)
        # Keep what late spans need (assertion states); drop the rest.
        ep.drop_spans()
        ep.pending = None


    def _amend(self, ep: Episode, late: bool = False) -> None:
        """Later evidence for a closed episode (a late span broke a rule, or more of its trace
        showed it incomplete): its verdicts are decided again from its rule states, and the result,
        if it changed, goes to the sink as an amendment (``episode_amended``)."""
        old = ep.result
        if old is None:
            return
        results = self._results(ep)
        if [(r.verdict, r.span_id) for r in results] == [(r.verdict, r.span_id) for r in old.results] and \
                old.incomplete == (ep.incomplete or []):
            return
        if late:
            for new, before in zip(results, old.results):
                if new.verdict is Verdict.FAILED and before.verdict is not Verdict.FAILED:
                    new.message += " (late span, after the episode closed)"
        self.sink.episode_amended(self._episode_result(ep, results, amendment=True, late=late or old.late))
