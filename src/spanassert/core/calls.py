"""Calls and steps: a tool call's start (its position, and arguments already on the span), its end
(its content, read only as far as the rules of its tool need it), model steps and their usage, span
time, and a late call of a closed episode (the receiver's early check of one finished tool span,
which reuses them, is :mod:`.precheck`).

A mixin of :class:`~spanassert.core.engine.Engine` (the engine's state is set in its ``__init__``).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Final, List, Mapping, Optional, Sequence, Tuple

from ..assertions.base import NEED_ARGUMENTS, call_ref
from ..mapping.mapper import Others
from ..mapping.usage import step_usage
from .episode import (
    MAX_TOOL_DEFINITIONS,
    NO_STATE,
    OUT_OF_ORDER,
    OVERFLOW_CALL_DROPPED,
    OVERFLOW_RESULT_TRUNCATED,
    UNREADABLE_ARGUMENTS,
    UNREADABLE_NO_NAME,
    UNREADABLE_TOO_LARGE,
    Episode,
    SpanOutcome,
    give_call,
)
from .lifecycle import EpisodeLifecycle
from .model import (
    CONTENT_OK,
    CONTENT_UNPARSABLE,
    Failure,
    ToolCall,
    call_status,
    decode_content,
)
from .plan import Slot, ToolPlan
from .results import Violation
from .toolcall import AMBIGUOUS_ARGUMENT_SOURCES, AMBIGUOUS_ARGUMENTS, AMBIGUOUS_RESULT, ARGUMENTS_IN_DOUBT
from .verdicts import violation_of

MAX_TOOL_NAMES: Final = 4096  # distinct tool names the engine keeps one string of (names come from spans)


def _same_content(a: Any, b: Any) -> bool:
    """Two recordings of a call's arguments say the same (a JSON text and its value, or two texts
    that differ only in spacing or key order)."""
    if a == b:
        return True
    va, sa = decode_content(a)
    vb, sb = decode_content(b)
    return sa == CONTENT_OK and sb == CONTENT_OK and va == vb


def _bounded(others: Tuple[Tuple[str, Any], ...], limit: int) -> Tuple[Tuple[str, Any], ...]:
    """Other sources of a call's content (``Mapper.call_end``) with each text cut to ``limit``, as a
    result is: one cut short decodes to nothing, and disagrees (never compared or scanned whole)."""
    if all(type(v) is not str or len(v) <= limit for _, v in others):
        return others
    return tuple((k, v[:limit] if type(v) is str and len(v) > limit else v) for k, v in others)


def _reuse_precheck(prechecked: Dict[str, Dict[str, ToolCall]], call: ToolCall) -> None:
    """``call`` (an assembled trace's) takes what serve's early check of the same span decoded and
    computed, for the content both recorded alike (the same text object, decoded as is): its
    arguments when they decoded to an object (never bound to a parameter, whatever the episode
    knows of the tool), its result, and the rules' memo of that content (``ToolCall.memo``)."""
    kept = prechecked.get(call.trace_id)
    early = kept.get(call.span_id) if kept is not None else None
    if early is None or early is call:
        return
    call.memo = early.memo
    raw = call._args_raw
    if (raw is not None and call._args_state is None and early._args_state == CONTENT_OK
            and type(early._args) is dict and not early._args_bound
            and (raw is early._args_raw or (type(raw) is str and raw == early._args_raw))):
        call._args, call._args_state, call._args_bound = early._args, CONTENT_OK, False
        if early.ambiguous & AMBIGUOUS_ARGUMENTS:
            call.ambiguous |= AMBIGUOUS_ARGUMENTS
    raw = call._result_raw
    if (raw is not None and call._result_state is None and early._result_state is not None
            and (raw is early._result_raw or (type(raw) is str and raw == early._result_raw))):
        call._result, call._result_state = early._result, early._result_state
        if early.ambiguous & AMBIGUOUS_RESULT:
            call.ambiguous |= AMBIGUOUS_RESULT


class CallsAndSteps(EpisodeLifecycle):
    """What tool calls and model steps do to an episode's rules (see the module docstring)."""

    max_in_flight: int
    max_arg_bytes: int
    truncated_results: int
    tool_names: Dict[str, str]
    tool_called: Optional[Callable[[str], None]]
    prechecked: Dict[str, Dict[str, ToolCall]]
    prechecked_calls: int
    max_prechecked: int

    def _learn_tools(self, ep: Episode, attributes: Mapping[str, Any]) -> None:
        """Remember the tool definitions an ending model step or agent span recorded."""
        found = self.mapper.tool_definitions(attributes)
        if not found:
            return
        known = ep.tool_params
        if known is None:
            known = ep.tool_params = {}
        for tool, params in found.items():
            if tool in known or len(known) < MAX_TOOL_DEFINITIONS:
                known[tool] = params  # the latest definition wins, in live and replay alike

    @staticmethod
    def _starts_with_parent(ep: Episode, parent_id: Optional[str], start_ns: int) -> bool:
        """Whether the call started at ``start_ns`` is inside a call that started at the same instant
        (a tool span under a tool span: every door orders the parent first)."""
        open_calls = ep.open_calls
        parent = open_calls.get(parent_id) if open_calls is not None and parent_id is not None else None
        return parent is not None and parent.start_ns == start_ns

    def _start_call(self, ep: Episode, tool: str, trace_id: str, span_id: str, parent_id: Optional[str],
                    start_ns: int, agent: Optional[str], call_id: Optional[str],
                    attributes: Optional[Mapping[str, Any]] = None, args_raw: Any = None) -> ToolCall:
        view = ep
        # One string per tool name for the whole engine: the states that keep names (the last
        # names, the last call) then share it instead of holding each span's copy.
        known = self.tool_names.get(tool)
        if known is not None:
            tool = known
        elif len(self.tool_names) < MAX_TOOL_NAMES:
            self.tool_names[tool] = tool
        if start_ns > ep.last_call_ns:
            ep.last_call_ns = start_ns
        elif start_ns == ep.last_call_ns:
            if view.call_count and not self._starts_with_parent(ep, parent_id, start_ns):
                view.order_ties += 1
        elif ep.reopened and OUT_OF_ORDER not in (view.incomplete or ()):
            # A later part of the trace holds a call that started before calls already judged:
            # rules on the order of calls saw them out of order.
            self._mark_incomplete(ep, [OUT_OF_ORDER], True)
        plan = ep.plan
        tp = plan.tool_plans.get(tool)
        if tp is None:
            tp = plan.tool_plan(tool)
        others: Others = None
        if not (tp.needs_args and tp.start):
            args_raw = None
        else:
            if attributes is not None:
                # Arguments already on the span at its start (many instrumentations set them before
                # the tool runs): argument rules decide now, before the tool body. Replay and serve
                # feed the finished span, so they decide on the same value at the same position.
                # (A guard's pending call gives them as ``args_raw``.)
                args_raw, others = self.mapper.arguments_read(attributes)
            if args_raw is not None and type(args_raw) is str and len(args_raw) > self.max_arg_bytes:
                args_raw = None  # too large: the end reports it as unreadable
        call = ToolCall(tool, span_id, trace_id, parent_id, start_ns, view.call_count, agent, call_id, args_raw)
        call.tool_plan = tp
        if ep.tool_params is not None:
            call.params = ep.tool_params.get(tool)  # before anything decodes the arguments
        if args_raw is not None:
            call.args_at_start = True
            if others is not None:
                call.set_others(AMBIGUOUS_ARGUMENT_SOURCES, _bounded(others, self.max_arg_bytes))
        if self.prechecked:
            _reuse_precheck(self.prechecked, call)
        view.call_count += 1
        if self.tool_called is not None:
            self.tool_called(tool)
        open_calls = ep.open_calls
        if open_calls is None:
            open_calls = ep.open_calls = {}
        elif len(open_calls) >= self.max_in_flight:
            # Bounded memory: forget the oldest in-flight call; its content is never judged.
            oldest = next(iter(open_calls))
            del open_calls[oldest]
            view.calls_dropped += 1
            self.sink.overflow(OVERFLOW_CALL_DROPPED)
        open_calls[span_id] = call
        starts = tp.start
        if starts:
            # give_call, inlined: this loop runs for every call of every episode.
            states = ep.states
            for i, handler in starts:
                st = states[i]
                if st is NO_STATE:
                    st = states[i] = plan.slots[i].assertion.new_state()
                f = handler(st, call)
                if f is not None:
                    self._fail_at_start(ep, plan.slots[i], f, span_id)
        view.step_count += 1
        if plan.step_slots:
            self._step_rules(ep, span_id)
        return call

    def _fail_at_start(self, ep: Episode, slot: Slot, failure: Failure, span_id: Optional[str],
                       late: bool = False) -> Optional[Violation]:
        """A failure as a call starts: what a guard asked before the call decides (``at_start``)."""
        v = self._fail(ep, slot, failure, span_id, late)
        if v is not None:
            v.at_start = True
        return v

    def _judge_arguments(self, ep: Episode, call: ToolCall, args_raw: Any) -> List[Violation]:
        """A guard asked from inside a tool span whose start recorded no arguments gives them: the
        rules that judge a call on its own arguments (``order_free``) judge them now, on fresh
        states, and their failures are reported at this call. The span's end judges the arguments
        it records with the episode's states, as always (a rule fails once per span)."""
        if type(args_raw) is str and len(args_raw) > self.max_arg_bytes:
            return []  # too large to judge; the end reports it as unreadable
        plan = ep.plan
        probe = ToolCall(call.name, call.span_id, call.trace_id, call.parent_span_id, call.start_ns, call.index,
                         call.agent, call.call_id, args_raw)
        probe.params = call.params
        probe.args_at_start = True
        out: List[Violation] = []
        for i, handler in plan.tool_plan(call.name).start:
            slot = plan.slots[i]
            a = slot.assertion
            if a.order_free and NEED_ARGUMENTS in a.needs:
                f = handler(a.new_state(), probe)
                if f is not None:
                    v = self._fail(ep, slot, f, call.span_id)
                    if v is not None:
                        v.at_start = True
                        out.append(v)
        return out + self._blocks_in_doubt(ep, probe, out)

    def _blocks_again(self, ep: Episode, call: ToolCall) -> List[Violation]:
        """For a guard deciding ``call`` (just started): the tests with ``action: block`` that failed
        earlier in the episode and that this call breaks again (``Assertion.blocks_again``: a count
        over its cap, a spent budget, a call forbidden after its trigger). Their violations go on the
        call's span (a guard labels them `blocked`) but not to the sink: the rule failed once, and is
        counted once."""
        failed = ep.failed
        if not failed:
            return []
        out: List[Violation] = []
        plan = ep.plan
        reported = ep.reported or set()
        marked = ep.marks.get(call.span_id) if ep.marks else None
        for i in list(failed):
            slot = plan.slots[i]
            if slot.test.action != "block" or (i, call.span_id) in reported:
                continue  # not a block test, or it failed at this very call
            if marked and any(v.test_id == slot.test.id and v.assertion_index == slot.assertion.index
                              for v in marked):
                continue  # asked again about the same call
            why = slot.assertion.blocks_again(ep.state(slot), call)
            if why is not None:
                v = violation_of(ep, slot, why, call.span_id, call.name, call.index)
                v.at_start = True
                if ep.marks is None:
                    ep.marks = {}
                ep.marks.setdefault(call.span_id, []).append(v)
                out.append(v)
        return out

    def _blocks_in_doubt(self, ep: Episode, call: ToolCall, found: List[Violation]) -> List[Violation]:
        """For a guard deciding ``call``: when its arguments are in doubt (a JSON key repeated with
        different values, or the span's sources of them disagree: ARGUMENTS_IN_DOUBT), the tests
        with ``action: block`` that read its arguments at its start and have not failed on it
        (``found``): the rule judged one reading, and the tool may act on another, so the guard
        fails closed. As :meth:`_blocks_again`, their violations go on the call's span (a guard
        labels them `blocked`) but not to the sink: the rule did not fail (its verdict is
        ``inconclusive``)."""
        if not call.ambiguous & ARGUMENTS_IN_DOUBT and (call._args_raw is None or call._args_state == CONTENT_OK):
            return []  # no arguments, or decoded with no doubt (the common case: a cheap answer)
        plan = ep.plan
        slots = [plan.slots[i] for i, _ in plan.tool_plan(call.name).start]
        slots = [slot for slot in slots
                 if slot.test.action == "block" and NEED_ARGUMENTS in slot.assertion.needs]
        if not slots:
            return []
        # (Reading the state decodes the arguments if no rule did: what sets the repeated-key bit.)
        state = call.arguments_state
        doubt = call.ambiguous & ARGUMENTS_IN_DOUBT if state else 0
        if state == CONTENT_UNPARSABLE:
            # JSON that does not parse (truncated): the rule cannot read it, and the tool may (a lenient
            # parser repairs `{"amount": 5000` to an amount of 5000).
            why = ("the call's arguments were recorded but could not be parsed (truncated JSON?): no rule can "
                   "read them, and the tool may; a guard fails closed")
        elif not doubt:
            return []
        else:
            why = ("the call's arguments repeat a JSON key with different values" if doubt & AMBIGUOUS_ARGUMENTS
                   else "the call's span records its arguments twice, with different values")
            why += ": the rule judged one reading, and the tool may act on another; a guard fails closed"
        why += f" ({call_ref(call)})"
        failed = {(v.test_id, v.assertion_index) for v in found}
        out: List[Violation] = []
        for slot in slots:
            if (slot.test.id, slot.assertion.index) in failed:
                continue  # it failed on the value read: that failure blocks
            v = violation_of(ep, slot, why, call.span_id, call.name, call.index)
            v.at_start = True
            if ep.marks is None:
                ep.marks = {}
            ep.marks.setdefault(call.span_id, []).append(v)
            out.append(v)
        return out

    def _adopt_pending(self, ep: Episode, tool: str, call_id: Optional[str], span_id: str,
                       parent_id: Optional[str], attributes: Mapping[str, Any]) -> bool:
        """A tool span starts (or is recognised at its end) in an episode with calls a guard
        decided (:meth:`Engine.decide_pending`): if it is one of them (same call id; else same tool
        and the same arguments, or none on the span yet; oldest first), the decided call becomes
        this span's call, with its violations, and is not started again. False when it is none."""
        pending = ep.pending
        assert pending is not None
        found: Optional[str] = None
        if call_id is not None:
            for key, (call, _) in pending.items():
                if call.call_id == call_id and call.name == tool:
                    found = key
                    break
        if found is None:
            span_args: Any = self.mapper.arguments_raw(attributes)
            for key, (call, args) in pending.items():
                if call.name != tool or (call_id is not None and call.call_id is not None):
                    continue  # another tool, or both have call ids and they differ
                if span_args is None or args is None or _same_content(span_args, args):
                    found = key
                    break
        if found is None:
            return False
        call = pending.pop(found)[0]
        if not pending:
            ep.pending = None
        call.span_id = span_id
        if parent_id is not None:
            call.parent_span_id = parent_id
        if ep.open_calls is not None and ep.open_calls.pop(found, None) is not None:
            ep.open_calls[span_id] = call
        # What was said about the placeholder is said about the span (messages name it).
        marks = ep.marks.pop(found, None) if ep.marks else None
        if marks:
            for v in marks:
                v.span_id = span_id
                v.message = v.message.replace(found, span_id)
            assert ep.marks is not None
            ep.marks.setdefault(span_id, []).extend(marks)
        if ep.reported:
            for mark in [m for m in ep.reported if m[1] == found]:
                ep.reported.discard(mark)
                ep.reported.add((mark[0], span_id))
        if ep.failed:
            for f in ep.failed.values():
                if f.span_id == found:
                    f.span_id = span_id
                    f.message = f.message.replace(found, span_id)
        return True

    def _end_call(self, ep: Episode, call: ToolCall, attributes: Mapping[str, Any], end_ns: int,
                  status_code: int, events: Sequence[Any]) -> None:
        plan = ep.plan
        tp = call.tool_plan
        if tp is None:
            tp = plan.tool_plan(call.name)
        if not tp.targets:
            return  # no rule reads this tool's calls: their content is never looked at
        cut = self.truncated_results
        unreadable = self._finish_call(tp, call, attributes, end_ns, status_code, events,
                                       ep.tool_params.get(call.name) if ep.tool_params is not None else None)
        if unreadable is not None:
            self._unreadable(ep, unreadable, call.name)
        if self.truncated_results != cut:
            ep.results_truncated += 1
            self.sink.overflow(OVERFLOW_RESULT_TRUNCATED)
        if tp.end:
            # give_call, inlined: this loop runs for every call of every episode.
            states = ep.states
            for i, handler in tp.end:
                st = states[i]
                if st is NO_STATE:
                    st = states[i] = plan.slots[i].assertion.new_state()
                f = handler(st, call)
                if f is not None:
                    self._fail(ep, plan.slots[i], f, call.span_id)
        if call.ambiguous:
            ep.ambiguous |= call.ambiguous  # read by the rules above: their passes are no passes
        call.memo = None  # read by the rules of its start and end only

    def _finish_call(self, tp: ToolPlan, call: ToolCall, attributes: Mapping[str, Any],
                     end_ns: int, status_code: int, events: Sequence[Any],
                     params: Optional[Tuple[str, ...]] = None) -> Optional[str]:
        """Give a call its content (what the rules in ``tp`` read of it); returns why it is
        unreadable, if so. ``params``: the tool's parameter names as the episode knows them now."""
        unreadable: Optional[str] = None
        args_raw, result_raw, error_type, args_others, result_others = self.mapper.call_end(
            attributes, events, status_code, tp.needs_args, tp.needs_result)
        limit = self.max_arg_bytes
        if args_others is not None:
            args_others = _bounded(args_others, limit)
        if result_others is not None:
            result_others = _bounded(result_others, limit)
        too_large = False
        if args_raw is not None and type(args_raw) is str and len(args_raw) > limit:
            args_raw = None
            unreadable = UNREADABLE_TOO_LARGE
            too_large = True
        cut = result_raw is not None and type(result_raw) is str and len(result_raw) > limit
        if cut:
            result_raw = result_raw[:limit]
            self.truncated_results += 1
        call.finish(end_ns, call_status(status_code, error_type), error_type, args_raw, result_raw, args_others,
                    result_others)
        call.result_truncated = cut
        if self.prechecked and call.tool_plan is not None:  # an episode's call (not the early check's own)
            _reuse_precheck(self.prechecked, call)
        if too_large:
            call._args_state = CONTENT_UNPARSABLE  # recorded, but not kept: undecidable
            return unreadable
        if args_raw is None and not call.args_at_start:
            if not tp.needs_args:
                return None  # nothing recorded that a rule reads: nothing to decode
            state = call.arguments_state
        else:
            state = call.arguments_state
            if state == CONTENT_UNPARSABLE:
                return UNREADABLE_ARGUMENTS
        if tp.needs_args and state == CONTENT_OK and (call._args_bound or not isinstance(call._args, dict)):
            # Recorded as a bare value: bind it to the tool's parameter, by the definition on the
            # tool span itself, else by the one the episode knows (the same ones live and replay).
            own = self.mapper.declared_parameters(call.name, attributes)
            call.set_params(own if own is not None else (params if params is not None else call.params))
        return unreadable


    def _report(self, ep: Episode, slot: Slot, failure: Failure, span_id: str, late: bool,
                out: Optional[List[Violation]]) -> None:
        """A rule failed at a step or at a span's time: to the sink, and (a late span's) to ``out``."""
        v = self._fail(ep, slot, failure, span_id, late)
        if out is not None and v is not None:
            out.append(v)

    def _step(self, ep: Episode, span_id: str, late: bool = False, out: Optional[List[Violation]] = None) -> None:
        ep.step_count += 1
        if ep.plan.step_slots:
            self._step_rules(ep, span_id, late, out)

    def _step_rules(self, ep: Episode, span_id: str, late: bool = False,
                    out: Optional[List[Violation]] = None) -> None:
        plan = ep.plan
        for i in plan.step_slots:
            slot = plan.slots[i]
            f = slot.assertion.on_step(ep.state(slot), ep)
            if f is not None:
                self._report(ep, slot, f, span_id, late, out)

    def _step_end(self, ep: Episode, span_id: str, attributes: Mapping[str, Any], late: bool = False,
                  out: Optional[List[Violation]] = None) -> None:
        """A model step ended: its usage goes to the rules that read it (``on_step_end``)."""
        more = ep.more  # ep.inner_usage, read without its property (every step's end)
        inner = more.inner_usage.pop(span_id, None) if more is not None and more.inner_usage else None
        # The step's own number (from its start): later steps may have started since.
        number = ep.step_spans.get(span_id, ep.step_count) if ep.step_spans else ep.step_count
        step = step_usage(attributes, span_id, number, inner)
        plan = ep.plan
        states = ep.states
        for i in plan.step_end_slots:
            slot = plan.slots[i]
            st = states[i]
            if st is NO_STATE:
                st = states[i] = slot.assertion.new_state()
            f = slot.assertion.on_step_end(st, step)
            if f is not None:
                self._report(ep, slot, f, span_id, late, out)

    # Not folded: _step_end's loop above has this shape; each walks its own slot list and calls its own hook
    # with its own arguments, and a shared loop needs a bound method or *args per slot per span.
    def _time(self, ep: Episode, ns: int, span_id: str, judge: bool = True, late: bool = False,
              out: Optional[List[Violation]] = None) -> None:
        """A span of the episode started or ended at ``ns``: the episode's span time takes it in, and
        at span ends the rules on span time judge it (``on_time``). Only at ends: the live processor
        positions starts on the agent's thread ahead of queued ends, so starts and ends reach the
        engine in different orders in different doors, while ends alone keep one order everywhere
        (and a span that starts past a bound ends past it, or the close judges it)."""
        view = ep
        if view.start_ns is None or ns < view.start_ns:
            view.start_ns = ns
        if view.end_ns is None or ns > view.end_ns:
            view.end_ns = ns
        if not judge:
            return
        plan = ep.plan
        quiet = plan.time_quiet_ns
        if quiet is not None and ns - view.start_ns <= quiet:
            return  # within every time rule's quiet bound: none would say or change anything
        states = ep.states
        for i in plan.time_slots:
            slot = plan.slots[i]
            st = states[i]
            if st is NO_STATE:
                st = states[i] = slot.assertion.new_state()
            f = slot.assertion.on_time(st, ns, view)
            if f is not None:
                self._report(ep, slot, f, span_id, late, out)

    def _unreadable(self, ep: Optional[Episode], reason: str, tool: Optional[str]) -> None:
        if ep is not None:
            ep.unreadable_calls += 1
        self.sink.unreadable(reason, tool)

    def _record_final_output(self, ep: Episode, attributes: Mapping[str, Any], events: Sequence[Any]) -> None:
        if not ep.plan.reads_output:
            return  # no rule of the episode reads it (the rules declare it: NEED_FINAL_OUTPUT)
        out = self.mapper.final_output(attributes, events)
        if out is not None:
            ep.final_output = out
            ep.final_output_state = "ok"
        embeddings = self.mapper.embeddings(attributes)
        if embeddings is not None:
            ep.embeddings = embeddings


    def _late_call(self, ep: Episode, trace_id: str, span_id: str, parent_id: Optional[str], name: str,
                   attributes: Mapping[str, Any], start_ns: int, end_ns: int, status_code: int,
                   events: Sequence[Any]) -> Optional[SpanOutcome]:
        """A tool span of an episode that already closed: still checked by the safety rules."""
        self.sink.late_span()
        tool = self.mapper.tool_name(name, attributes)
        if tool is None:
            self._unreadable(ep, UNREADABLE_NO_NAME, None)
            self._amend(ep, late=True)  # a call of the episode that cannot be judged: no pass rests on it
            return None
        plan = ep.plan
        call = ToolCall(tool, span_id=span_id, trace_id=trace_id, parent_span_id=parent_id, start_ns=start_ns,
                        index=ep.call_count, call_id=self.mapper.call_id(attributes))
        ep.call_count += 1
        ep.late_calls += 1
        if start_ns >= ep.last_call_ns:
            ep.last_call_ns = start_ns
        elif OUT_OF_ORDER not in (ep.incomplete or ()):
            # It started before calls already judged: rules on the order of calls saw it out of order.
            self._mark_incomplete(ep, [OUT_OF_ORDER], True)
        out: List[Violation] = []
        safety = tuple(i for i in plan.tool_plan(tool).targets if not plan.slots[i].assertion.decides_on_close)
        if safety:
            tp = ToolPlan(plan.slots, safety)
            give_call(ep, tp.start, call, self._fail, late=True, out=out)
            reason = self._finish_call(tp, call, attributes, end_ns, status_code, events,
                                       ep.tool_params.get(tool) if ep.tool_params is not None else None)
            if reason is not None:
                self.sink.unreadable(reason, call.name)
            give_call(ep, tp.end, call, self._fail, late=True, out=out)
            if call.ambiguous:
                ep.ambiguous |= call.ambiguous
        self._step(ep, span_id, True, out)  # a tool call is a step (trace_max_steps)
        self._late_time(ep, start_ns, end_ns, span_id, out)
        ep.marks = None
        # Always: a met liveness rule that this call could break (the last call is ..., every trigger
        # is followed by ...) was decided without it; _amend says so only when a verdict changed.
        self._amend(ep, late=True)
        return SpanOutcome(out, None) if out else None

    def _late_step(self, ep: Episode, span_id: str, attributes: Mapping[str, Any], start_ns: int,
                   end_ns: int) -> Optional[SpanOutcome]:
        """A model step of an episode that already closed (a background model call that ended after
        the agent's root): it still counts, as a step, in the episode's usage and in its span time,
        so the budgets are judged on it and a broken one amends the episode."""
        self.sink.late_span()
        out: List[Violation] = []
        self._step(ep, span_id, True, out)
        if ep.plan.step_end_slots:
            self._step_end(ep, span_id, attributes, True, out)
        self._late_time(ep, start_ns, end_ns, span_id, out)
        ep.marks = None
        self._amend(ep, late=True)
        return SpanOutcome(out, None) if out else None

    def _late_time(self, ep: Episode, start_ns: int, end_ns: int, span_id: str, out: List[Violation]) -> None:
        """A late agent, model or tool span's times: the episode's span time takes them in and the
        rules on span time judge its end (``_amend`` then decides the episode again)."""
        if ep.plan.time_slots:
            if end_ns < start_ns:
                ep.time_backwards = True
            self._time(ep, start_ns, span_id, judge=False)
            self._time(ep, max(start_ns, end_ns), span_id, late=True, out=out)
