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
"""
from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from ..assertions.base import NEED_ARGUMENTS, NEED_RESULT, Assertion
from ..config.model import Config, TestCase, require_runnable
from ..mapping import ROLE_AGENT, ROLE_OTHER, ROLE_STEP, ROLE_TOOL, Mapper
from ..mapping.usage import has_usage, step_usage
from .model import (
    CONTENT_OK,
    CONTENT_UNPARSABLE,
    STATUS_ERROR,
    STATUS_OK,
    STATUS_UNSET,
    CloseReason,
    EpisodeView,
    Failure,
    ModelStep,
    ToolCall,
    Verdict,
)
from .results import AssertionResult, EpisodeResult, Violation

_NO_STATE = object()
_clock = time.perf_counter
_FAR_FUTURE = 1 << 127
_MAX_PATTERN_PLANS = 4096  # tool names whose `tool_pattern` dispatch is remembered per plan
_PRECHECK_KEY = ("\0precheck",)  # the early-check plan's key in Engine._plans (no test id has a NUL)

UNREADABLE_NO_NAME = "no_tool_name"
UNREADABLE_ARGUMENTS = "unparsable_arguments"
UNREADABLE_TOO_LARGE = "arguments_too_large"

OVERFLOW_EPISODE_EVICTED = "episode_evicted"
OVERFLOW_CALL_DROPPED = "in_flight_call_dropped"
OVERFLOW_TRACE_SPANS = "trace_over_span_cap"  # a trace with spans dropped by the per-trace cap
OVERFLOW_RESULT_TRUNCATED = "result_truncated"  # a tool result cut to max_argument_bytes

# Why an episode's evidence is incomplete (EpisodeResult.incomplete, reports).
INCOMPLETE_ROOT_NOT_SEEN = "root not seen"
OUT_OF_ORDER = "calls arrived after the episode closed, before calls already judged (order unknown)"
_MAX_SEEN_IDS = 1024  # span ids an episode remembers for late parts (past it: parents unknown)

MAX_TOOL_DEFINITIONS = 256  # tools whose parameter names one episode remembers


class Sink:
    """Receives what the engine decides. The default does nothing; front doors override."""

    def violation(self, violation: Violation) -> None:
        pass

    def episode_closed(self, result: EpisodeResult) -> None:
        pass

    def episode_amended(self, result: EpisodeResult) -> None:
        """A closed episode's result changed (a late span broke a rule, or more of its trace came):
        ``result`` (``amendment=True``) replaces the one given to :meth:`episode_closed`."""

    def episode_opened(self) -> None:
        pass

    def unreadable(self, reason: str, tool: Optional[str]) -> None:
        pass

    def overflow(self, kind: str) -> None:
        pass

    def late_span(self) -> None:
        pass

    def tool_called(self, name: str) -> None:
        """A call of ``name`` started (replay lists rule names no call matched: near misses)."""

    def evaluated(self, seconds: float) -> None:
        pass

    def trace_tracked(self, trace_id: str) -> None:
        """The engine now follows this trace (an open or recently closed episode holds it)."""

    def trace_released(self, trace_id: str) -> None:
        """The engine no longer follows this trace: its spans can skip the engine."""


class SpanOutcome:
    """What the engine has to say about one span as it ends: the violations to attach to it, and
    the episode result when this span closed its episode (the root)."""

    __slots__ = ("violations", "episode")

    def __init__(self, violations: List[Violation], episode: Optional[EpisodeResult]) -> None:
        self.violations = violations
        self.episode = episode


class _Slot:
    __slots__ = ("index", "test", "assertion", "content_needed", "shadow", "severity")

    def __init__(self, index: int, test: TestCase, assertion: Assertion) -> None:
        self.index = index
        self.test = test
        self.assertion = assertion
        self.content_needed = bool(assertion.needs)
        self.shadow = test.shadow
        self.severity = test.severity.value if hasattr(test.severity, "value") else str(test.severity)


class _ToolPlan:
    """What one call of one tool touches in a plan: the slots whose ``on_call_start`` /
    ``on_call_end`` do something (bound methods, resolved once), and the content they read."""

    __slots__ = ("targets", "start", "end", "needs_args", "needs_result")

    def __init__(self, slots: List[_Slot], targets: Tuple[int, ...]) -> None:
        self.targets = targets
        self.start = tuple((i, slots[i].assertion.on_call_start) for i in targets
                           if _overrides(slots[i].assertion, "on_call_start"))
        self.end = tuple((i, slots[i].assertion.on_call_end) for i in targets
                         if _overrides(slots[i].assertion, "on_call_end"))
        self.needs_args = any(NEED_ARGUMENTS in slots[i].assertion.needs for i in targets)
        self.needs_result = any(NEED_RESULT in slots[i].assertion.needs for i in targets)


def _overrides(assertion: Assertion, method: str) -> bool:
    return getattr(type(assertion), method) is not getattr(Assertion, method)


class _Plan:
    """The trace assertions of the tests that apply to an episode, with per-tool dispatch tables so
    that a call touches only the rules that can apply to it."""

    __slots__ = ("slots", "by_tool", "any_tool", "step_slots", "step_end_slots", "time_slots", "excluded",
                 "_tool_plans", "_other_tools", "_pattern_slots",
                 "reads_args")

    def __init__(self, slots: List[_Slot], excluded: List[TestCase]) -> None:
        self.slots = slots
        self.excluded = excluded
        any_tool: List[int] = []
        by_tool: Dict[str, List[int]] = {}
        steps: List[int] = []
        step_ends: List[int] = []
        times: List[int] = []
        patterns: List[_Slot] = []
        for s in slots:
            a = s.assertion
            if a.wants_steps:
                steps.append(s.index)
                if _overrides(a, "on_step_end"):
                    step_ends.append(s.index)
            if _overrides(a, "on_time"):
                times.append(s.index)
            if a.tools is None:
                any_tool.append(s.index)
            else:
                for t in a.tools:
                    by_tool.setdefault(t, []).append(s.index)
                if a.tool_pattern is not None:
                    patterns.append(s)
        # Rules that select calls by `tool_pattern`: a name's plan is computed on its first call.
        self._pattern_slots: Tuple[_Slot, ...] = tuple(patterns)
        self.any_tool: Tuple[int, ...] = tuple(any_tool)
        self.by_tool: Dict[str, Tuple[int, ...]] = {
            t: tuple(sorted(set(v) | set(any_tool) | {p.index for p in patterns if p.assertion.applies_to(t)}))
            for t, v in by_tool.items()
        }
        self.step_slots: Tuple[int, ...] = tuple(steps)
        self.step_end_slots: Tuple[int, ...] = tuple(step_ends)
        self.time_slots: Tuple[int, ...] = tuple(times)
        self._tool_plans: Dict[str, _ToolPlan] = {t: _ToolPlan(slots, v) for t, v in self.by_tool.items()}
        self._other_tools = _ToolPlan(slots, self.any_tool)
        # Whether some rule reads arguments: only then are tool definitions read off spans.
        self.reads_args = any(NEED_ARGUMENTS in s.assertion.needs for s in slots)

    def tool_plan(self, name: str) -> _ToolPlan:
        plan = self._tool_plans.get(name)
        if plan is not None:
            return plan
        if not self._pattern_slots:
            return self._other_tools
        return self._pattern_plan(name)

    def _pattern_plan(self, name: str) -> _ToolPlan:
        matched = [s.index for s in self._pattern_slots if s.assertion.applies_to(name)]
        plan = _ToolPlan(self.slots, tuple(sorted(set(matched) | set(self.any_tool)))) if matched \
            else self._other_tools
        if len(self._tool_plans) < _MAX_PATTERN_PLANS + len(self.by_tool):
            self._tool_plans[name] = plan  # names come from spans: the cache is bounded
        return plan


class Episode:
    __slots__ = (
        "key",
        "trace_id",
        "plan",
        "states",
        "failed",
        "reported",
        "view",
        "root_is_agent",
        "spans",
        "step_spans",
        "open_calls",
        "marks",
        "last_ns",
        "traces",
        "closed",
        "eval_s",
        "absorbed",
        "inner_usage",
        "hold",
        "result",
        "at_close",
        "in_flight",
        "seen",
        "last_call_ns",
        "reopened",
        "tool_params",
    )

    def __init__(self, key: str, trace_id: str, plan: _Plan, now_ns: int) -> None:
        self.key = key
        self.trace_id = trace_id
        self.plan = plan
        self.states: List[Any] = [_NO_STATE] * len(plan.slots)
        self.failed: Optional[Dict[int, Failure]] = None
        self.reported: Optional[Set[Tuple[int, Optional[str]]]] = None
        self.view = EpisodeView()
        self.view.key = key
        self.view.trace_id = trace_id
        self.root_is_agent = False
        # span_id -> name of the nearest agent at or above it, for the spans of this episode that
        # are still open (entries leave when their span ends).
        self.spans: Dict[str, Optional[str]] = {}
        self.step_spans: Optional[Dict[str, int]] = None  # open model steps -> their step number
        self.open_calls: Dict[str, ToolCall] = {}
        self.marks: Optional[Dict[str, List[Violation]]] = None
        self.last_ns = now_ns
        self.traces: Optional[Set[str]] = None  # attribute-keyed episodes span several traces
        self.closed = False
        self.eval_s = 0.0  # time spent evaluating this episode's spans
        # Open spans folded into their parent call or step (an MCP `tools/call` span inside a
        # framework's `execute_tool` span, a provider chat span inside a framework's): one call.
        self.absorbed: Optional[Set[str]] = None
        # Usage recorded by provider spans folded into a step, by the step's span id (read when the
        # step ends, for what its own span does not record).
        self.inner_usage: Optional[Dict[str, ModelStep]] = None
        # Replay and serve, a trace whose root is not in the input: no span end closes the
        # episode; the end of the trace's spans does (Engine.end_trace).
        self.hold = False
        self.result: Optional[EpisodeResult] = None  # the last result given out (for amendments)
        self.at_close: Optional[Set[int]] = None  # slots that failed (and were reported) at a close
        self.in_flight: Optional[List[ToolCall]] = None  # calls not ended when it closed
        # Assembled traces only: ids of the spans seen (bounded; None past the bound), so that a
        # late part of the trace can tell a parent seen earlier from one missing from the input.
        self.seen: Optional[Set[str]] = set()
        self.last_call_ns = 0  # the latest start of a call judged so far
        self.reopened = False  # closed once, and went on (another local root, a late part)
        # Tool name -> parameter names, from the tool definitions recorded on the spans of this
        # episode that have ended (model steps, agents): what binds a bare-value argument to its
        # parameter name. Read at span end only, so that live and replay learn them at the same
        # point; bounded by MAX_TOOL_DEFINITIONS.
        self.tool_params: Optional[Dict[str, Tuple[str, ...]]] = None

    def state(self, slot: _Slot) -> Any:
        st = self.states[slot.index]
        if st is _NO_STATE:
            st = slot.assertion.new_state()
            self.states[slot.index] = st
        return st


class Engine:
    """Episodes, bounds and verdicts for one rules file (see the module docstring)."""

    def __init__(self, config: Config, sink: Optional[Sink] = None, mapper: Optional[Mapper] = None) -> None:
        require_runnable(config)  # a file whose own unit-test forms fail is run by no door
        self.config = config
        self.sink = sink or Sink()
        self.mapper = mapper or Mapper(config.mappings)
        es = config.episodes
        self.by_trace_key = es.by_trace
        self.key_attr = es.key
        self.idle_ns = int(es.idle_timeout * 1e9)
        self.max_open = max(1, int(es.max_open))
        self.max_in_flight = max(1, int(es.max_calls_per_episode))
        self.max_arg_bytes = int(es.max_argument_bytes)
        self.late_window = max(0, int(es.late_window))
        self._slots_all: List[_Slot] = []
        self._tests = [t for t in config.tests if t.trace_assertions]
        for t in self._tests:
            for a in t.trace_assertions:
                self._slots_all.append(_Slot(len(self._slots_all), t, a))
        self._needs_match = any(t.match is not None for t in self._tests)
        self._plans: Dict[Tuple[str, ...], _Plan] = {}
        self._full_plan = self._plan_for(tuple(t.id for t in self._tests))
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
        self.truncated_results = 0  # tool results cut to max_argument_bytes (all episodes)
        self.track_span_ids = False  # set by feed_trace (replay, serve): see Episode.seen
        self.now_ns = 0
        # No open episode can be idle before this time: callers that feed span times (replay, serve)
        # need to call tick() only once it has passed. Touching an episode only moves its own
        # deadline later, so an early value just costs one tick that closes nothing.
        self.idle_deadline = _FAR_FUTURE

    # -- plans ------------------------------------------------------------------------------------
    def _plan_for(self, test_ids: Tuple[str, ...]) -> _Plan:
        plan = self._plans.get(test_ids)
        if plan is None:
            wanted = set(test_ids)
            # Slots keep dense indices per plan so per-episode state lists stay short.
            slots: List[_Slot] = []
            for s in self._slots_all:
                if s.test.id in wanted:
                    slots.append(_Slot(len(slots), s.test, s.assertion))
            excluded = [t for t in self._tests if t.id not in wanted]
            plan = _Plan(slots, excluded)
            self._plans[test_ids] = plan
        return plan

    def _select_plan(self, agent: Optional[str], service: Optional[str], attributes: Mapping[str, Any],
                     resource: Optional[Mapping[str, Any]]) -> _Plan:
        if not self._needs_match:
            return self._full_plan
        merged: Dict[str, Any] = dict(resource or {})
        merged.update(attributes)
        ids = tuple(t.id for t in self._tests if t.match is None or t.match.selects(agent, service, merged))
        return self._plan_for(ids)

    # -- the two entry points -------------------------------------------------------------------
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
                ep.view.root_span_id = span_id
                ep.view.root_name = name
            elif role == ROLE_OTHER:
                ep.spans[span_id] = None
                return False
        if role == ROLE_OTHER:
            if ep is not None:
                if self.track_span_ids:
                    self._seen(ep, span_id)
                if parent_id in ep.spans:
                    ep.spans[span_id] = ep.spans[parent_id]
            return False
        t0 = _clock()
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
        parent_agent = ep.spans.get(parent_id) if parent_id is not None else None
        if role == ROLE_AGENT:
            agent = self.mapper.agent_name(name, attributes) or parent_agent
            ep.spans[span_id] = agent
            if ep.view.agent is None:
                ep.view.agent = agent
        elif role == ROLE_STEP:
            ep.spans[span_id] = parent_agent
            if ep.step_spans is not None and parent_id in ep.step_spans:
                self._absorb(ep, span_id)
            else:
                if ep.step_spans is None:
                    ep.step_spans = {}
                self._step(ep, span_id)
                ep.step_spans[span_id] = ep.view.step_count  # its number, for messages at its end
        else:  # ROLE_TOOL
            ep.spans[span_id] = parent_agent
            tool, call_id = self.mapper.tool_start(name, attributes)
            outer = ep.open_calls.get(parent_id) if parent_id is not None else None
            if outer is not None and (tool is None or tool == outer.name):
                self._absorb(ep, span_id)
            elif tool is not None:
                self._start_call(ep, tool, trace_id, span_id, parent_id, start_ns, parent_agent, call_id, attributes)
            else:
                positioned = False  # the name may only be set later; the call is positioned when its span ends
        if ep.plan.time_slots:
            self._time(ep, start_ns, span_id, judge=False)
        ep.eval_s += _clock() - t0
        return positioned

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
            return None
        t0 = _clock()
        if end_ns > ep.last_ns:
            ep.last_ns = end_ns
        self.open.move_to_end(ep.key)
        agent = ep.spans.pop(span_id, None)
        # A call started as a tool is still one: no need to read its markers again.
        call = ep.open_calls.pop(span_id, None)
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
                    call = self._start_call(ep, tool, trace_id, span_id, parent_id, start_ns, agent, call_id)
                    ep.open_calls.pop(span_id, None)
            if call is not None:
                self._end_call(ep, call, attributes, end_ns, status_code, events)
        elif role == ROLE_STEP and (ep.step_spans is None or span_id not in ep.step_spans):
            self._step(ep, span_id)  # recognised as a model call only at its end
        if role == ROLE_STEP and ep.plan.step_end_slots:
            self._step_end(ep, span_id, attributes)
        if ep.step_spans is not None:
            ep.step_spans.pop(span_id, None)
        if ep.plan.time_slots:
            self._time(ep, end_ns, span_id)
        closing: Optional[EpisodeResult] = None
        if ep.hold:
            pass  # the trace's root is not in the input: end_trace() closes the episode
        elif self.by_trace_key:
            if role == ROLE_AGENT and span_id == ep.view.root_span_id:
                self._record_final_output(ep, attributes, events)
                closing = self._close(ep, CloseReason.ROOT_ENDED)
            elif is_local_root and not ep.root_is_agent:
                ep.view.root_span_id = span_id
                ep.view.root_name = name
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
        else:
            ep.eval_s += _clock() - t0
        if marks is None and closing is None:
            return None
        return SpanOutcome(marks or [], closing)

    def tick(self, now_ns: Optional[int] = None) -> List[EpisodeResult]:
        """Close episodes idle for longer than ``idle_timeout``. ``now_ns`` defaults to the latest
        span time seen (replay) — the processor passes the wall clock."""
        if now_ns is None:
            now_ns = self.now_ns
        closed: List[EpisodeResult] = []
        while self.open:
            ep = next(iter(self.open.values()))
            if ep.last_ns + self.idle_ns > now_ns:
                self.idle_deadline = ep.last_ns + self.idle_ns
                break
            closed.append(self._close(ep, CloseReason.IDLE))
            ep.marks = None
        else:
            self.idle_deadline = _FAR_FUTURE
        return closed

    def close_all(self, reason: CloseReason) -> List[EpisodeResult]:
        """Decide every open episode now (force_flush, shutdown, end of input)."""
        out = []
        for ep in list(self.open.values()):
            out.append(self._close(ep, reason))
            ep.marks = None
        return out

    def abandon(self, trace_id: str) -> Optional[EpisodeResult]:
        """Close the episode of ``trace_id`` after an error inside spanassert while judging it
        (``CloseReason.INTERNAL_ERROR``): failures found so far stand, every other rule is
        inconclusive, since the rest of its evidence was never judged. None when no episode of
        that trace is open. If closing raises too, the episode is dropped (the caller counts it)."""
        self._notes.pop(trace_id, None)
        ep = self.by_trace.get(trace_id)
        if ep is None or ep.closed:
            return None
        try:
            return self._close(ep, CloseReason.INTERNAL_ERROR)
        except Exception:
            if not ep.closed:
                self._forget(ep)
            ep.marks = None
            raise

    # -- assembled traces (replay, serve) ------------------------------------------------------------
    def begin_trace(self, trace_id: str, incomplete: Sequence[str] = (), root_seen: bool = True,
                    outside_parents: Iterable[str] = ()) -> None:
        """Before the spans of one assembled trace are fed: what is missing from it. ``incomplete``
        lists why the evidence is incomplete (its episode's rules that the missing part could have
        broken end `inconclusive`, never `passed`); ``root_seen=False`` means no span of the trace
        closes its episode: :meth:`end_trace` does, after its last span. ``outside_parents``: parents
        of these spans that are not among them (for a later part of a trace, they may be spans of
        its earlier part)."""
        if not incomplete and root_seen:
            return
        ep = self.by_trace.get(trace_id)
        if ep is not None:
            self._mark_incomplete(ep, incomplete, root_seen)
        elif self.by_trace_key and trace_id in self.recent and incomplete:
            # More of a trace whose episode closed, itself cut (spans over the cap, parents
            # missing): the closed episode's evidence is incomplete; its verdicts are amended.
            old = self.recent[trace_id]
            reasons = [r for r in incomplete if r != INCOMPLETE_ROOT_NOT_SEEN]
            seen = old.seen
            missing = sum(1 for p in outside_parents if seen is None or p not in seen)
            if missing:
                reasons.append(f"{missing} span(s) whose parent is not in the input")
            if reasons:
                self._mark_incomplete(old, reasons, True)
                self._amend(old)
            self._notes[trace_id] = (list(incomplete), root_seen)
        else:
            self._notes[trace_id] = (list(incomplete), root_seen)

    def end_trace(self, trace_id: str) -> Optional[EpisodeResult]:
        """After the last span of an assembled trace: close its episode if no span could
        (its root was not in the input)."""
        self._notes.pop(trace_id, None)
        ep = self.by_trace.get(trace_id)
        if ep is None or not ep.hold or not self.by_trace_key:
            return None
        result = self._close(ep, CloseReason.ROOT_NOT_SEEN)
        ep.marks = None
        return result

    def _mark_incomplete(self, ep: Episode, incomplete: Sequence[str], root_seen: bool) -> None:
        view = ep.view
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

    def _apply_notes(self, ep: Episode, trace_id: str) -> None:
        note = self._notes.pop(trace_id, None)
        if note is not None:
            self._mark_incomplete(ep, note[0], note[1])

    @property
    def open_count(self) -> int:
        return len(self.open)

    # -- episodes ---------------------------------------------------------------------------------
    def _new_trace_key(self, trace_id: str) -> str:
        n = self._trace_seq.get(trace_id, 0)
        self._trace_seq[trace_id] = n + 1
        if len(self._trace_seq) > self.max_open + self.late_window + 1024:
            # Bounded: forget the oldest sequence counters (their traces are long closed).
            for k in list(self._trace_seq)[: len(self._trace_seq) // 2]:
                del self._trace_seq[k]
        return trace_id if n == 0 else f"{trace_id}#{n + 1}"

    def _conversation_episode(self, trace_id: str, attributes: Mapping[str, Any], now_ns: int,
                              resource: Optional[Mapping[str, Any]], role: int, span_id: str,
                              name: str) -> Optional[Episode]:
        conv = self.mapper.conversation_key(attributes, self.key_attr)
        if conv is None:
            return None
        ep = self.open.get(conv)
        if ep is None:
            ep = self._open(conv, trace_id, now_ns, attributes, resource, role, span_id, name)
        else:
            self.by_trace[trace_id] = ep
            self.sink.trace_tracked(trace_id)
            if self._notes:
                self._apply_notes(ep, trace_id)
        if ep.traces is None:
            ep.traces = set()
        ep.traces.add(trace_id)
        return ep

    def _open(self, key: str, trace_id: str, now_ns: int, attributes: Mapping[str, Any],
              resource: Optional[Mapping[str, Any]], role: int, span_id: str, name: str) -> Episode:
        while len(self.open) >= self.max_open:
            oldest = next(iter(self.open.values()))
            self.sink.overflow(OVERFLOW_EPISODE_EVICTED)
            self._close(oldest, CloseReason.EVICTED)
            oldest.marks = None
        agent = self.mapper.agent_name(name, attributes) if role == ROLE_AGENT else None
        service = None
        if resource is not None:
            sv = resource.get("service.name")
            service = sv if isinstance(sv, str) else None
        plan = self._select_plan(agent, service, attributes, resource)
        ep = Episode(key, trace_id, plan, now_ns)
        if now_ns + self.idle_ns < self.idle_deadline:
            self.idle_deadline = now_ns + self.idle_ns
        ep.view.service = service
        if role == ROLE_AGENT:
            ep.root_is_agent = True
            ep.view.root_span_id = span_id
            ep.view.root_name = name
        self.open[key] = ep
        self.by_trace[trace_id] = ep
        self.sink.trace_tracked(trace_id)
        self.sink.episode_opened()
        if self._notes:
            self._apply_notes(ep, trace_id)
        return ep

    def _reopen(self, ep: Episode) -> Episode:
        """A closed trace episode goes on (another local root of its trace started). Its rule
        states are still there; verdicts decided only at close are decided again at the next close,
        whose result goes out as an amendment."""
        while len(self.open) >= self.max_open:
            oldest = next(iter(self.open.values()))
            self.sink.overflow(OVERFLOW_EPISODE_EVICTED)
            self._close(oldest, CloseReason.EVICTED)
            oldest.marks = None
        self.recent.pop(ep.trace_id, None)
        ep.closed = False
        ep.reopened = True
        if ep.at_close and ep.failed:
            for i in ep.at_close:  # decided at close: decided again at the next close
                ep.failed.pop(i, None)
        self.open[ep.key] = ep
        self.by_trace[ep.trace_id] = ep
        self.sink.trace_tracked(ep.trace_id)
        if self._notes:
            self._apply_notes(ep, ep.trace_id)
        return ep

    @staticmethod
    def _seen(ep: Episode, span_id: str) -> None:
        seen = ep.seen
        if seen is not None:
            if len(seen) < _MAX_SEEN_IDS:
                seen.add(span_id)
            else:
                ep.seen = None  # too many to remember: a later part's parents count as unknown

    @staticmethod
    def _absorb(ep: Episode, span_id: str) -> None:
        if ep.absorbed is None:
            ep.absorbed = set()
        ep.absorbed.add(span_id)

    # -- calls and steps ----------------------------------------------------------------------------
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

    def _start_call(self, ep: Episode, tool: str, trace_id: str, span_id: str, parent_id: Optional[str],
                    start_ns: int, agent: Optional[str], call_id: Optional[str],
                    attributes: Optional[Mapping[str, Any]] = None) -> ToolCall:
        view = ep.view
        if start_ns >= ep.last_call_ns:
            ep.last_call_ns = start_ns
        elif ep.reopened and OUT_OF_ORDER not in (view.incomplete or ()):
            # A later part of the trace holds a call that started before calls already judged:
            # rules on the order of calls saw them out of order.
            self._mark_incomplete(ep, [OUT_OF_ORDER], True)
        plan = ep.plan
        tp = plan.tool_plan(tool)
        args_raw = None
        if attributes is not None and tp.needs_args and tp.start:
            # Arguments already on the span at its start (many instrumentations set them before
            # the tool runs): argument rules decide now, before the tool body. Replay and serve
            # feed the finished span, so they decide on the same value at the same position.
            args_raw = self.mapper.arguments_raw(attributes)
            if args_raw is not None and type(args_raw) is str and len(args_raw) > self.max_arg_bytes:
                args_raw = None  # too large: the end reports it as unreadable
        call = ToolCall(tool, span_id, trace_id, parent_id, start_ns, view.call_count, agent, call_id, args_raw)
        if ep.tool_params is not None:
            call.params = ep.tool_params.get(tool)  # before anything decodes the arguments
        if args_raw is not None:
            call.args_at_start = True
        view.call_count += 1
        self.sink.tool_called(tool)
        open_calls = ep.open_calls
        if len(open_calls) >= self.max_in_flight:
            # Bounded memory: forget the oldest in-flight call; its content is never judged.
            oldest = next(iter(open_calls))
            del open_calls[oldest]
            view.calls_dropped += 1
            self.sink.overflow(OVERFLOW_CALL_DROPPED)
        open_calls[span_id] = call
        starts = tp.start
        if starts:
            self._run_handlers(ep, starts, call)
        view.step_count += 1
        if plan.step_slots:
            self._step_rules(ep, span_id)
        return call

    def _end_call(self, ep: Episode, call: ToolCall, attributes: Mapping[str, Any], end_ns: int,
                  status_code: int, events: Sequence[Any]) -> None:
        plan = ep.plan
        tp = plan.tool_plan(call.name)
        if not tp.targets:
            return  # no rule reads this tool's calls: their content is never looked at
        cut = self.truncated_results
        unreadable = self._finish_call(tp, call, attributes, end_ns, status_code, events,
                                       ep.tool_params.get(call.name) if ep.tool_params is not None else None)
        if unreadable is not None:
            self._unreadable(ep, unreadable, call.name)
        if self.truncated_results != cut:
            ep.view.results_truncated += 1
            self.sink.overflow(OVERFLOW_RESULT_TRUNCATED)
        if tp.end:
            self._run_handlers(ep, tp.end, call)

    def _run_handlers(self, ep: Episode, handlers: Tuple[Tuple[int, Any], ...], call: ToolCall) -> None:
        """Give ``call`` to each (slot index, bound on_call_start / on_call_end) of ``handlers``."""
        plan = ep.plan
        states = ep.states
        for i, handler in handlers:
            st = states[i]
            if st is _NO_STATE:
                st = states[i] = plan.slots[i].assertion.new_state()
            f = handler(st, call)
            if f is not None:
                self._fail(ep, plan.slots[i], f, call.span_id)

    def _finish_call(self, tp: _ToolPlan, call: ToolCall, attributes: Mapping[str, Any],
                     end_ns: int, status_code: int, events: Sequence[Any],
                     params: Optional[Tuple[str, ...]] = None) -> Optional[str]:
        """Give a call its content (what the rules in ``tp`` read of it); returns why it is
        unreadable, if so. ``params``: the tool's parameter names as the episode knows them now."""
        unreadable: Optional[str] = None
        args_raw, result_raw, error_type = self.mapper.call_end(
            attributes, events, status_code, tp.needs_args, tp.needs_result)
        limit = self.max_arg_bytes
        too_large = False
        if args_raw is not None and type(args_raw) is str and len(args_raw) > limit:
            args_raw = None
            unreadable = UNREADABLE_TOO_LARGE
            too_large = True
        cut = result_raw is not None and type(result_raw) is str and len(result_raw) > limit
        if cut:
            result_raw = result_raw[:limit]
            self.truncated_results += 1
        status = STATUS_ERROR if (status_code == 2 or error_type) else (STATUS_OK if status_code == 1 else STATUS_UNSET)
        call.finish(end_ns, status, error_type, args_raw, result_raw)
        call.result_truncated = cut
        if too_large:
            call._args_state = CONTENT_UNPARSABLE  # recorded, but not kept: undecidable
        elif (args_raw is not None or call.args_at_start) and call.arguments_state == CONTENT_UNPARSABLE:
            unreadable = UNREADABLE_ARGUMENTS
        if tp.needs_args and call.arguments_state == CONTENT_OK and (
                call.arguments_bound or not call.arguments_named):
            # Recorded as a bare value: bind it to the tool's parameter, by the definition on the
            # tool span itself, else by the one the episode knows (the same ones live and replay).
            own = self.mapper.declared_parameters(call.name, attributes)
            call.set_params(own if own is not None else (params if params is not None else call.params))
        return unreadable

    # -- early check (receiver) -----------------------------------------------------------------------
    @property
    def has_precheck(self) -> bool:
        """Whether any rule can be decided on one finished tool span alone (see :meth:`precheck`)."""
        return bool(self._precheck_plan().slots)

    def _precheck_plan(self) -> _Plan:
        plan = self._plans.get(_PRECHECK_KEY)
        if plan is None:
            # Only rules whose failure at a call depends on that call alone, and only tests that
            # apply to every episode: a `match` may need the root span, which may not be here yet.
            slots: List[_Slot] = []
            for s in self._slots_all:
                a = s.assertion
                if a.order_free and not a.decides_on_close and s.test.match is None:
                    slots.append(_Slot(len(slots), s.test, a))
            plan = _Plan(slots, [])
            self._plans[_PRECHECK_KEY] = plan
        return plan

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
    ) -> List[Violation]:
        """The violations one finished tool span has on its own, before its trace is assembled.

        For a receiver, which gets spans after they end and must wait for the rest of a trace
        before feeding it: the rules marked ``order_free`` (their failure at a call depends only on
        that call) are run on fresh, throwaway states, so they fire on arrival. Nothing in the
        engine changes and nothing goes to the sink: the caller reports the result, and must not
        report the same (test, assertion, span) again when the trace is fed later. ``index`` is the
        call's position as far as the caller knows it (it only shows in messages).
        """
        plan = self._precheck_plan()
        if not plan.slots:
            return []
        if role is None:
            role = self.mapper.role(name, attributes)
        if role != ROLE_TOOL:
            return []
        tool = self.mapper.tool_name(name, attributes)
        if tool is None:
            return []
        tp = plan.tool_plan(tool)
        targets = tp.targets
        if not targets:
            return []
        call = ToolCall(tool, span_id=span_id, trace_id=trace_id, parent_span_id=parent_id, start_ns=start_ns,
                        index=index, call_id=self.mapper.call_id(attributes))
        states = {i: plan.slots[i].assertion.new_state() for i in targets}
        failures: Dict[int, Failure] = {}
        for i in targets:
            f = plan.slots[i].assertion.on_call_start(states[i], call)
            if f is not None:
                failures[i] = f
        self._finish_call(tp, call, attributes, end_ns, status_code, events)
        for i in targets:
            f = plan.slots[i].assertion.on_call_end(states[i], call)
            if f is not None and i not in failures:
                failures[i] = f
        out: List[Violation] = []
        for i, f in sorted(failures.items()):
            slot = plan.slots[i]
            a = slot.assertion
            out.append(Violation(
                test_id=slot.test.id, assertion_type=a.type_name, assertion_index=a.index, assertion_name=a.name,
                severity=slot.severity, shadow=slot.shadow, message=f.message, span_id=f.span_id or span_id,
                trace_id=trace_id, episode_key=trace_id, tool=f.tool, call_index=f.call_index, agent=agent,
            ))
        return out

    def _step(self, ep: Episode, span_id: str) -> None:
        ep.view.step_count += 1
        if ep.plan.step_slots:
            self._step_rules(ep, span_id)

    def _step_rules(self, ep: Episode, span_id: str) -> None:
        plan = ep.plan
        for i in plan.step_slots:
            slot = plan.slots[i]
            f = slot.assertion.on_step(ep.state(slot), ep.view)
            if f is not None:
                self._fail(ep, slot, f, span_id)

    def _step_end(self, ep: Episode, span_id: str, attributes: Mapping[str, Any]) -> None:
        """A model step ended: its usage goes to the rules that read it (``on_step_end``)."""
        inner = ep.inner_usage.pop(span_id, None) if ep.inner_usage else None
        # The step's own number (from its start): later steps may have started since.
        number = ep.step_spans.get(span_id, ep.view.step_count) if ep.step_spans else ep.view.step_count
        step = step_usage(attributes, span_id, number, inner)
        plan = ep.plan
        for i in plan.step_end_slots:
            slot = plan.slots[i]
            f = slot.assertion.on_step_end(ep.state(slot), step)
            if f is not None:
                self._fail(ep, slot, f, span_id)

    def _time(self, ep: Episode, ns: int, span_id: str, judge: bool = True) -> None:
        """A span of the episode started or ended at ``ns``: the episode's span time takes it in, and
        at span ends the rules on span time judge it (``on_time``). Only at ends: the live processor
        positions starts on the agent's thread ahead of queued ends, so starts and ends reach the
        engine in different orders in different doors, while ends alone keep one order everywhere
        (and a span that starts past a bound ends past it, or the close judges it)."""
        view = ep.view
        if view.start_ns is None or ns < view.start_ns:
            view.start_ns = ns
        if view.end_ns is None or ns > view.end_ns:
            view.end_ns = ns
        if not judge:
            return
        plan = ep.plan
        for i in plan.time_slots:
            slot = plan.slots[i]
            f = slot.assertion.on_time(ep.state(slot), ns, view)
            if f is not None:
                self._fail(ep, slot, f, span_id)

    def _unreadable(self, ep: Optional[Episode], reason: str, tool: Optional[str]) -> None:
        if ep is not None:
            ep.view.unreadable_calls += 1
        self.sink.unreadable(reason, tool)

    def _record_final_output(self, ep: Episode, attributes: Mapping[str, Any], events: Sequence[Any]) -> None:
        out = self.mapper.final_output(attributes, events)
        if out is not None:
            ep.view.final_output = out
            ep.view.final_output_state = "ok"

    def _fail(self, ep: Episode, slot: _Slot, failure: Failure, span_id: Optional[str],
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
        a = slot.assertion
        v = Violation(
            test_id=slot.test.id,
            assertion_type=a.type_name,
            assertion_index=a.index,
            assertion_name=a.name,
            severity=slot.severity,
            shadow=slot.shadow,
            message=failure.message,
            span_id=sid,
            trace_id=ep.trace_id,
            episode_key=ep.key,
            tool=failure.tool,
            call_index=failure.call_index,
            late=late,
            at_close=at_close,
            agent=ep.view.agent,
        )
        if sid is not None:
            if ep.marks is None:
                ep.marks = {}
            ep.marks.setdefault(sid, []).append(v)
        self.sink.violation(v)
        return v

    # -- closing ------------------------------------------------------------------------------------
    def _close(self, ep: Episode, reason: CloseReason) -> EpisodeResult:
        view = ep.view
        view.close_reason = reason
        ep.in_flight = list(ep.open_calls.values())
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
        view = ep.view
        assert view.close_reason is not None
        result = EpisodeResult(
            key=ep.key, trace_id=ep.trace_id, root_span_id=view.root_span_id, root_name=view.root_name,
            agent=view.agent, service=view.service, close_reason=view.close_reason, results=results,
            call_count=view.call_count, step_count=view.step_count, unreadable_calls=view.unreadable_calls,
            incomplete=view.incomplete or [], amendment=amendment, late=late,
        )
        ep.result = result
        return result

    def _results(self, ep: Episode) -> List[AssertionResult]:
        """Every rule's verdict on the episode as its states and view stand (at close, and again
        when later evidence amends a closed episode)."""
        view = ep.view
        reason = view.close_reason
        if view.incomplete:
            view.decidable = False  # the missing evidence could hold what a rule looks for
        elif self.by_trace_key:
            view.decidable = reason is CloseReason.ROOT_ENDED
        else:
            view.decidable = reason in (CloseReason.IDLE, CloseReason.END_OF_INPUT)
        results: List[AssertionResult] = []
        in_flight = ep.in_flight or []
        plan = ep.plan
        for slot in plan.slots:
            a = slot.assertion
            first = ep.failed.get(slot.index) if ep.failed else None
            outcome = a.on_close(ep.state(slot), view)
            if first is not None:
                verdict, message, sid = Verdict.FAILED, first.message, first.span_id
            else:
                verdict, message, sid = outcome.verdict, outcome.message, outcome.span_id
                if verdict is Verdict.FAILED:
                    if ep.at_close is not None and slot.index in ep.at_close:
                        sid = sid or view.root_span_id  # reported when the episode first closed
                    else:
                        v = self._fail(ep, slot, Failure(message, span_id=sid or view.root_span_id),
                                       view.root_span_id, at_close=True)
                        sid = v.span_id if v is not None else (sid or view.root_span_id)
                        if ep.at_close is None:
                            ep.at_close = set()
                        ep.at_close.add(slot.index)
                elif verdict is Verdict.PASSED:
                    verdict, message = self._downgrade(slot, view, in_flight, message)
            results.append(AssertionResult(
                test_id=slot.test.id, assertion_type=a.type_name, index=a.index, name=a.name,
                verdict=verdict, message=message, span_id=sid, severity=slot.severity, shadow=slot.shadow,
            ))
        for t in plan.excluded:
            for a in t.trace_assertions:
                results.append(AssertionResult(
                    test_id=t.id, assertion_type=a.type_name, index=a.index, name=a.name,
                    verdict=Verdict.NOT_APPLICABLE, message="`match` did not select this episode",
                    span_id=None, severity=str(getattr(t.severity, "value", t.severity)), shadow=t.shadow,
                ))
        return results

    @staticmethod
    def _downgrade(slot: _Slot, view: EpisodeView, in_flight: List[ToolCall], message: str) -> Tuple[Verdict, str]:
        """A pass that rests on data we did not see is not a pass."""
        if view.close_reason is CloseReason.INTERNAL_ERROR:
            return Verdict.INCONCLUSIVE, "judging this episode raised an internal error; the rest of it was not judged"
        a = slot.assertion
        if view.incomplete and (not a.pass_survives_unseen_calls or OUT_OF_ORDER in view.incomplete):
            # A safety rule never broke in what was seen, or a liveness rule that calls not seen
            # could still break was met: the part not seen could break it.
            return Verdict.INCONCLUSIVE, "no violation seen, but the evidence is incomplete (" + \
                "; ".join(view.incomplete) + ")"
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
        if view.calls_dropped and slot.content_needed:
            return Verdict.INCONCLUSIVE, f"{view.calls_dropped} in-flight call(s) were dropped (bound reached)"
        return Verdict.PASSED, message

    def _forget(self, ep: Episode) -> None:
        ep.closed = True
        self.open.pop(ep.key, None)
        traces = ep.traces or {ep.trace_id}
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
        ep.spans = {}
        ep.open_calls = {}

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
                        index=ep.view.call_count, call_id=self.mapper.call_id(attributes))
        ep.view.call_count += 1
        ep.view.late_calls += 1
        if start_ns >= ep.last_call_ns:
            ep.last_call_ns = start_ns
        elif OUT_OF_ORDER not in (ep.view.incomplete or ()):
            # It started before calls already judged: rules on the order of calls saw it out of order.
            self._mark_incomplete(ep, [OUT_OF_ORDER], True)
        out: List[Violation] = []
        safety = [i for i in plan.tool_plan(tool).targets if not plan.slots[i].assertion.decides_on_close]
        for i in safety:
            slot = plan.slots[i]
            f = slot.assertion.on_call_start(ep.state(slot), call)
            if f is not None:
                v = self._fail(ep, slot, f, span_id, late=True)
                if v is not None:
                    out.append(v)
        if safety:
            reason = self._finish_call(_ToolPlan(plan.slots, tuple(safety)), call, attributes, end_ns,
                                       status_code, events,
                                       ep.tool_params.get(tool) if ep.tool_params is not None else None)
            if reason is not None:
                self.sink.unreadable(reason, call.name)
            for i in safety:
                slot = plan.slots[i]
                f = slot.assertion.on_call_end(ep.state(slot), call)
                if f is not None:
                    v = self._fail(ep, slot, f, span_id, late=True)
                    if v is not None:
                        out.append(v)
        ep.marks = None
        # Always: a met liveness rule that this call could break (the last call is ..., every trigger
        # is followed by ...) was decided without it; _amend says so only when a verdict changed.
        self._amend(ep, late=True)
        return SpanOutcome(out, None) if out else None

    def _amend(self, ep: Episode, late: bool = False) -> None:
        """Later evidence for a closed episode (a late span broke a rule, or more of its trace
        showed it incomplete): its verdicts are decided again from its rule states, and the result,
        if it changed, goes to the sink as an amendment (``episode_amended``)."""
        old = ep.result
        if old is None:
            return
        results = self._results(ep)
        if [(r.verdict, r.span_id) for r in results] == [(r.verdict, r.span_id) for r in old.results] and \
                old.incomplete == (ep.view.incomplete or []):
            return
        if late:
            for i, (new, before) in enumerate(zip(results, old.results)):
                if new.verdict is Verdict.FAILED and before.verdict is not Verdict.FAILED:
                    new.message += " (late span, after the episode closed)"
        self.sink.episode_amended(self._episode_result(ep, results, amendment=True, late=late or old.late))

__all__ = ["Engine", "Sink", "SpanOutcome", "Episode", "ROLE_AGENT", "ROLE_OTHER", "ROLE_STEP", "ROLE_TOOL"]
