"""The one engine behind every front door.

It is fed span starts and span ends as plain values (ids, name, an attribute mapping, times) — the
live processor, the file replayer and the OTLP receiver all call the same two methods — and it owns
everything after that: recognising tool calls (through :mod:`spanassert.mapping`), grouping spans
into episodes, running every assertion incrementally, and deciding verdicts. It never imports the
OpenTelemetry SDK, which is what makes live, replay and serve verdicts identical by construction.

Order and time: a call's position is its start; its content (arguments, result, status, duration)
is given to assertions only at its end, everywhere, so that a replay (which knows everything at
once) shows the assertions exactly what the live processor saw.

Not thread-safe: callers serialise access (the processor holds one lock around it).
The engine is split by job (one class, its methods in a line of base classes, one per module:
single inheritance, which a compiled build's native classes need): :mod:`.plan` (which rules apply,
and which of them a call of a tool touches), :mod:`.episode` (the episode record, the sink, the
dispatch loop), and ``Engine`` < :mod:`.precheck` (the receiver's early check) < :mod:`.calls` (tool
calls, model steps, late calls) < :mod:`.lifecycle` (opening, reopening, closing episodes) <
:mod:`.verdicts` (failures, closes, amendments).
This module holds the engine's state and its two entry points, :meth:`Engine.start_span` and
:meth:`Engine.end_span`.

Not thread-safe: callers serialise access (the processor holds one lock around it).
"""
from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any, Dict, Final, List, Mapping, Optional, Sequence, Tuple

from ..config.model import Config, require_runnable
from ..mapping import ROLE_AGENT, ROLE_OTHER, ROLE_STEP, ROLE_TOOL, Mapper
from ..mapping.usage import has_usage, step_usage
from .episode import (
    INCOMPLETE_ROOT_NOT_SEEN,
    MAX_TOOL_DEFINITIONS,
    NO_SPAN,
    OUT_OF_ORDER,
    OVERFLOW_CALL_DROPPED,
    OVERFLOW_EPISODE_EVICTED,
    OVERFLOW_RESULT_TRUNCATED,
    OVERFLOW_TRACE_SPANS,
    PENDING_PREFIX,
    UNREADABLE_ARGUMENTS,
    UNREADABLE_NO_NAME,
    UNREADABLE_TOO_LARGE,
    Episode,
    Sink,
    SpanOutcome,
)
from .lifecycle import FAR_FUTURE
from .model import CloseReason, ToolCall
from .plan import Plans, overrides
from .precheck import EarlyCheck
from .results import EpisodeResult, Violation

_clock: Final = time.perf_counter


class Engine(EarlyCheck):
    """Episodes, bounds and verdicts for one rules file (see the module docstring)."""

    def __init__(self, config: Config, sink: Optional[Sink] = None, mapper: Optional[Mapper] = None) -> None:
        require_runnable(config)  # a file whose own unit-test forms fail is run by no door
        self.config = config
        self.sink = sink or Sink()
        # Sink.tool_called as the engine calls it at every call: None when it does nothing.
        self.tool_called = self.sink.tool_called if overrides(self.sink, "tool_called", Sink) else None
        # Whether the sink records each episode's evaluation time (Sink.evaluated does something):
        # only then are span starts and ends timed.
        self.timed = overrides(self.sink, "evaluated", Sink)
        self.mapper = mapper or Mapper(config.mappings)
        es = config.episodes
        self.by_trace_key = es.by_trace
        self.key_attr = es.key
        self.idle_ns = int(es.idle_timeout * 1e9)
        self.max_open = max(1, int(es.max_open))
        self.max_in_flight = max(1, int(es.max_calls_per_episode))
        self.max_arg_bytes = int(es.max_argument_bytes)
        self.late_window = max(0, int(es.late_window))
        self.plans = Plans(config)
        # Open episodes in order of last activity (oldest first): idle closing and eviction read
        # from the front.
        self.open: OrderedDict[str, Episode] = OrderedDict()
        # trace id -> its open episode (the fast "is this trace in an episode?" check).
        self.by_trace: Dict[str, Episode] = {}
        # Recently closed episodes by trace id, for late spans.
        self.recent: OrderedDict[str, Episode] = OrderedDict()
        self._trace_seq: Dict[str, int] = {}
        # Assembled traces (replay, serve): what is missing from the trace being fed, noted by
        # begin_trace() before its first span and applied to its episode.
        self._notes: Dict[str, Tuple[List[str], bool]] = {}
        # Live: pending marks (see judging_failed) were forgotten past their bound: every episode
        # that opens is marked incomplete.
        self._marks_lost = False
        self.truncated_results = 0  # tool results cut to max_argument_bytes (all episodes)
        self.track_span_ids = False  # set by feed_trace (replay, serve): see Episode.seen
        self.now_ns = 0
        # No open episode can be idle before this time: callers that feed span times (replay, serve)
        # need to call tick() only once it has passed. Touching an episode only moves its own
        # deadline later, so an early value just costs one tick that closes nothing.
        self.idle_deadline = FAR_FUTURE
        self._capture: Optional[List[Violation]] = None  # see decide_pending
        self._dry = False  # deciding outside any trace: report nothing (decide_pending(dry=True))
        self._pending_seq = 0
        self._untouched: Dict[Tuple[Any, Optional[CloseReason]], List[Any]] = {}  # see Verdicts._results
        self.tool_names: Dict[str, str] = {}  # see CallsAndSteps._start_call
        # Serve's early checks kept for the assembled pass: trace id -> span id -> the checked call
        # (see EarlyCheck.precheck, keep=True); at most max_prechecked calls, each dropped when
        # its trace is fed (forget_precheck).
        self.prechecked: Dict[str, Dict[str, ToolCall]] = {}
        self.prechecked_calls = 0
        self.max_prechecked = 1 << 16

    @property
    def open_count(self) -> int:
        return len(self.open)

    def start_span(
        self,
        trace_id: str,
        span_id: str,
        parent_id: Optional[str],
        name: str,
        attributes: Mapping[str, Any],
        start_ns: int,
        resource: Optional[Mapping[str, Any]] = None,
        role: Optional[int] = None,
        local_root: bool = False,
    ) -> bool:
        """Position a span that starts. Returns whether its start was fully taken into account: a
        GenAI span placed in an open episode (a call started or folded into its parent, a step
        counted, an agent noted). False for other spans, late spans, and tool spans whose tool name
        is not known yet (they are positioned when they end): a live caller that defers span ends
        must not run later starts before such an end (see the live processor).

        ``local_root``: its parent is not in this process (none, or remote); such a span of a
        trace whose episode already closed continues that episode (another local root of the same
        trace) rather than arriving late."""
        if role is None:
            role = self.mapper.role(name, attributes)
        if start_ns > self.now_ns:
            self.now_ns = start_ns
        ep = self.by_trace.get(trace_id)
        if ep is None and (local_root or role == ROLE_AGENT) and self.by_trace_key and trace_id in self.recent:
            # Another local root of a trace whose episode already closed (an MCP server's second
            # `tools/call`, a second request of the trace), or another agent run in it: the same
            # episode goes on (one episode per trace), so none of its calls is judged "late".
            ep = self._reopen(self.recent[trace_id])
            if role == ROLE_AGENT:
                ep.root_is_agent = True
                ep.root_span_id = span_id
                ep.root_name = name
            elif role == ROLE_OTHER:
                ep.add_span(span_id, None)
                return False
        if role == ROLE_OTHER:
            if ep is not None:
                if self.track_span_ids:
                    self._seen(ep, span_id)
                if ep.has_span(parent_id):
                    ep.add_span(span_id, ep.span_agent(parent_id))
            return False
        t0 = _clock() if self.timed else 0.0
        positioned = True
        if ep is None:
            if not self.by_trace_key:
                ep = self._conversation_episode(trace_id, attributes, start_ns, resource, role, span_id, name)
            if ep is None and role != ROLE_AGENT and trace_id in self.recent:
                return False  # a late span: judged when it ends, with its content
            if ep is None:
                ep = self._open(self._new_trace_key(trace_id), trace_id, start_ns, attributes, resource, role,
                                span_id, name)
        if start_ns > ep.last_ns:
            ep.last_ns = start_ns
        if self.track_span_ids:
            self._seen(ep, span_id)
        self.open.move_to_end(ep.key)
        parent_agent = ep.agent1 if parent_id == ep.span1 else ep.span_agent(parent_id)
        if role == ROLE_AGENT:
            agent = self.mapper.agent_name(name, attributes) or parent_agent
            ep.add_span(span_id, agent)
            if ep.agent is None:
                ep.agent = agent
        elif role == ROLE_STEP:
            ep.add_span(span_id, parent_agent)
            if ep.step_spans is not None and parent_id in ep.step_spans:
                self._absorb(ep, span_id)
            else:
                if ep.step_spans is None:
                    ep.step_spans = {}
                self._step(ep, span_id)
                ep.step_spans[span_id] = ep.step_count  # its number, for messages at its end
        else:  # ROLE_TOOL
            if ep.spans is None and ep.span1 is not NO_SPAN and span_id != ep.span1:
                ep.spans = {span_id: parent_agent}  # ep.add_span, inlined for the common case
            else:
                ep.add_span(span_id, parent_agent)
            tool, call_id = self.mapper.tool_start(name, attributes)
            outer = ep.open_calls.get(parent_id) if ep.open_calls is not None and parent_id is not None else None
            if outer is not None and (tool is None or tool == outer.name):
                self._absorb(ep, span_id)
            elif tool is not None:
                if ep.pending is None or not self._adopt_pending(ep, tool, call_id, span_id, parent_id, attributes):
                    self._start_call(ep, tool, trace_id, span_id, parent_id, start_ns, parent_agent, call_id,
                                     attributes)
            else:
                positioned = False  # the name may only be set later; the call is positioned when its span ends
        if ep.plan.time_slots:  # the span time takes the start in (rules judge it at ends: see _time)
            view = ep
            if view.start_ns is None or start_ns < view.start_ns:
                view.start_ns = start_ns
            if view.end_ns is None or start_ns > view.end_ns:
                view.end_ns = start_ns
        if self.timed:
            ep.eval_s += _clock() - t0
        return positioned

    # Not folded: the span's fields as parameters, like start_span's (and precheck's): each door passes them
    # straight; a shared record would be one more allocation per span on the hot path.
    def end_span(
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
        is_local_root: bool = False,
        resource: Optional[Mapping[str, Any]] = None,
        role: Optional[int] = None,
    ) -> Optional[SpanOutcome]:
        if end_ns > self.now_ns:
            self.now_ns = end_ns
        ep = self.by_trace.get(trace_id)
        if ep is None:
            if trace_id in self.recent:
                if role is None:
                    role = self.mapper.role(name, attributes)
                if role == ROLE_TOOL:
                    return self._late_call(self.recent[trace_id], trace_id, span_id, parent_id, name, attributes,
                                           start_ns, end_ns, status_code, events)
                if role == ROLE_STEP:
                    return self._late_step(self.recent[trace_id], span_id, attributes, start_ns, end_ns)
                if role == ROLE_AGENT:
                    late = self.recent[trace_id]
                    out: List[Violation] = []
                    self._late_time(late, start_ns, end_ns, span_id, out)
                    if out:
                        self._amend(late, late=True)
                        return SpanOutcome(out, None)
            return None
        t0 = _clock() if self.timed else 0.0
        # ep.pop_span and ep.pop_call, inlined for the common cases (every span end of an episode).
        spans = ep.spans
        if span_id == ep.span1 or spans is None:
            agent = ep.pop_span(span_id)
        else:
            agent = spans.pop(span_id, None)
            if not spans:
                ep.spans = None
        # A call started as a tool is still one: no need to read its markers again.
        open_calls = ep.open_calls
        if open_calls is None:
            call = None
        else:
            call = open_calls.pop(span_id, None)
            if not open_calls:
                ep.open_calls = None
        if call is None and role is None and not is_local_root and \
                (ep.absorbed is None or span_id not in ep.absorbed):
            role = self.mapper.role(name, attributes)
        if role == ROLE_OTHER and call is None and not is_local_root and \
                (ep.absorbed is None or span_id not in ep.absorbed):
            # A plain (non-GenAI) child span: its parent link is gone, and that is all. It is no
            # activity of the episode: span time and idleness count agent, model and tool spans
            # (the rules reference), so a live caller need not hand such an end to the engine.
            marks = ep.marks.pop(span_id, None) if ep.marks else None
            if self.timed:
                ep.eval_s += _clock() - t0
            return SpanOutcome(marks, None) if marks else None
        if end_ns > ep.last_ns:
            ep.last_ns = end_ns
        self.open.move_to_end(ep.key)
        if call is not None:
            role = ROLE_TOOL
        elif ep.absorbed is not None and span_id in ep.absorbed:
            ep.absorbed.discard(span_id)
            role = ROLE_OTHER
            if ep.plan.step_end_slots and ep.step_spans is not None and parent_id in ep.step_spans \
                    and has_usage(attributes):
                if ep.inner_usage is None:
                    ep.inner_usage = {}
                ep.inner_usage[parent_id] = step_usage(attributes)
            if ep.plan.reads_args:
                self._learn_tools(ep, attributes)  # a provider's model span inside a framework's
        elif role is None:
            role = self.mapper.role(name, attributes)
        if role in (ROLE_STEP, ROLE_AGENT) and ep.plan.reads_args:
            self._learn_tools(ep, attributes)
        if role == ROLE_TOOL:
            if call is None:
                tool, call_id = self.mapper.tool_start(name, attributes)
                if tool is None:
                    self._unreadable(ep, UNREADABLE_NO_NAME, None)
                    self._step(ep, span_id)
                else:
                    if ep.pending is None or not self._adopt_pending(ep, tool, call_id, span_id, parent_id,
                                                                     attributes):
                        self._start_call(ep, tool, trace_id, span_id, parent_id, start_ns, agent, call_id)
                    call = ep.pop_call(span_id)
            if call is not None:
                self._end_call(ep, call, attributes, end_ns, status_code, events)
        elif role == ROLE_STEP and (ep.step_spans is None or span_id not in ep.step_spans):
            self._step(ep, span_id)  # recognised as a model call only at its end
        if role == ROLE_STEP and ep.plan.step_end_slots:
            self._step_end(ep, span_id, attributes)
        if ep.step_spans is not None:
            ep.step_spans.pop(span_id, None)
        if ep.plan.time_slots:
            if end_ns < start_ns:
                ep.time_backwards = True
            self._time(ep, end_ns, span_id)
        closing: Optional[EpisodeResult] = None
        if ep.hold:
            pass  # the trace's root is not in the input: end_trace() closes the episode
        elif self.by_trace_key:
            if role == ROLE_AGENT and span_id == ep.root_span_id:
                self._record_final_output(ep, attributes, events)
                closing = self._close(ep, CloseReason.ROOT_ENDED)
            elif is_local_root and not ep.root_is_agent:
                ep.root_span_id = span_id
                ep.root_name = name
                self._record_final_output(ep, attributes, events)
                closing = self._close(ep, CloseReason.ROOT_ENDED)
        else:
            if role == ROLE_AGENT:
                self._record_final_output(ep, attributes, events)
            if is_local_root:
                # The trace is done; the conversation goes on until it is idle.
                self.by_trace.pop(trace_id, None)
                if trace_id not in self.recent:
                    self.sink.trace_released(trace_id)
        marks = ep.marks.pop(span_id, None) if ep.marks else None
        if closing is not None:
            ep.marks = None
        elif self.timed:
            ep.eval_s += _clock() - t0
        if marks is None and closing is None:
            return None
        return SpanOutcome(marks or [], closing)

    # -- a guard's questions: a call decided before it runs -------------------------------------------
    def decide_pending(self, trace_id: str, tool: str, args_raw: Any, call_id: Optional[str],
                       parent_id: Optional[str], agent: Optional[str], start_ns: int, dry: bool = False,
                       ) -> Tuple[str, List[Violation]]:
        """A guard asks about a call before the framework runs it: the call is recorded now, at this
        place in the trace's episode (opened if need be), as a tool span starting with these
        arguments would be, and the violations its start produces are returned. The tool span that
        follows is matched to it (``_adopt_pending``) and not counted again.

        Returns (placeholder span id, starting with ``PENDING_PREFIX``; violations). A call id
        already pending gets the same answer again, recorded once (a framework that asks twice).

        ``dry``: a call outside any trace (its span, if any, will be a trace of its own): decided as
        the first call of an empty episode, and nothing is recorded or reported."""
        if dry:
            return self._decide_dry(trace_id, tool, args_raw, call_id, agent, start_ns)
        ep = self.by_trace.get(trace_id)
        if ep is None:
            if self.by_trace_key and trace_id in self.recent:
                ep = self._reopen(self.recent[trace_id])
            else:
                ep = self._open(self._new_trace_key(trace_id), trace_id, start_ns, {}, None, ROLE_TOOL, "", tool)
        if start_ns > self.now_ns:
            self.now_ns = start_ns
        if start_ns > ep.last_ns:
            ep.last_ns = start_ns
        self.open.move_to_end(ep.key)
        pending = ep.pending
        if pending is None:
            pending = ep.pending = {}
        elif call_id is not None:
            for key, (call, _) in pending.items():
                if call.call_id == call_id and call.name == tool:
                    return key, list(ep.marks.get(key, ())) if ep.marks else []
        self._pending_seq += 1
        key = f"{PENDING_PREFIX}{self._pending_seq:x}"
        if agent is None and parent_id is not None:
            agent = ep.span_agent(parent_id)
        t0 = _clock()
        found: List[Violation] = []
        self._capture = found
        try:
            call = self._start_call(ep, tool, trace_id, key, parent_id, start_ns, agent, call_id, args_raw=args_raw)
        finally:
            self._capture = None
        found.extend(self._blocks_in_doubt(ep, call, found))
        found.extend(self._blocks_again(ep, call))
        if len(pending) >= self.max_in_flight:
            pending.pop(next(iter(pending)))  # bounded like open_calls (whose bound dropped it there too)
        pending[key] = (call, args_raw)
        ep.eval_s += _clock() - t0
        return key, found

    def _decide_dry(self, trace_id: str, tool: str, args_raw: Any, call_id: Optional[str],
                    agent: Optional[str], start_ns: int) -> Tuple[str, List[Violation]]:
        self._pending_seq += 1
        key = f"{PENDING_PREFIX}{self._pending_seq:x}"
        ep = Episode(trace_id, trace_id, self.plans.select(agent, None, {}, None), start_ns)
        found: List[Violation] = []
        self._capture, self._dry = found, True
        try:
            call = self._start_call(ep, tool, trace_id, key, None, start_ns, agent, call_id, args_raw=args_raw)
        finally:
            self._capture, self._dry = None, False
        return key, found + self._blocks_in_doubt(ep, call, found)

    def started_call(self, trace_id: str, span_id: str, tool: str, args_raw: Any = None,
                     call_id: Optional[str] = None) -> Optional[List[Violation]]:
        """The violations of the call of ``tool`` whose span ``span_id`` has started and not ended
        (a guard asked from inside the tool's own span: its start decided it), or None when no
        such call is open. When that span recorded no arguments at its start (a framework that
        writes them at the end) and the guard has them (``args_raw``), the rules that judge a call
        on its own arguments decide now (``_judge_arguments``)."""
        ep = self.by_trace.get(trace_id)
        call = ep.open_call(span_id) if ep is not None else None
        if ep is None or call is None or call.name != tool:
            return None
        if call.call_id is None and call_id is not None:
            call.call_id = call_id
        found = list(ep.marks.get(span_id, ())) if ep.marks else []
        if args_raw is not None and not call.args_at_start and not call.ended:
            found += self._judge_arguments(ep, call, args_raw)
        else:
            found += self._blocks_in_doubt(ep, call, found)
        return found + self._blocks_again(ep, call)


__all__ = [
    "INCOMPLETE_ROOT_NOT_SEEN", "MAX_TOOL_DEFINITIONS", "OUT_OF_ORDER", "OVERFLOW_CALL_DROPPED",
    "OVERFLOW_EPISODE_EVICTED", "OVERFLOW_RESULT_TRUNCATED", "OVERFLOW_TRACE_SPANS", "ROLE_AGENT",
    "ROLE_OTHER", "ROLE_STEP", "ROLE_TOOL", "UNREADABLE_ARGUMENTS", "UNREADABLE_NO_NAME",
    "UNREADABLE_TOO_LARGE", "Engine", "Episode", "Sink", "SpanOutcome", "PENDING_PREFIX",
]
