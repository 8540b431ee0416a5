"""The episode: one agent run (a trace, or a conversation across traces) as the engine holds it while
its spans arrive: the rule states of its plan, what it has seen, and what it has said. Also what the
engine says to a front door (:class:`Sink`, :class:`SpanOutcome`), the reasons it names, and the one
loop that gives a tool call to the rules of a plan (:func:`give_call`).
"""
from __future__ import annotations

from typing import AbstractSet, Any, Callable, Dict, Final, List, Optional, Set, Tuple, TypeVar

from .model import NO_IDS, EpisodeView, Failure, ModelStep, ToolCall
from .native import mypyc_attr, trait
from .plan import Plan, Slot
from .results import EpisodeResult, Violation

NO_STATE: Final[Any] = object()  # a rule whose state is not made yet (made on its first use)

UNREADABLE_NO_NAME: Final = "no_tool_name"
UNREADABLE_ARGUMENTS: Final = "unparsable_arguments"
UNREADABLE_TOO_LARGE: Final = "arguments_too_large"

OVERFLOW_EPISODE_EVICTED: Final = "episode_evicted"
OVERFLOW_CALL_DROPPED: Final = "in_flight_call_dropped"
OVERFLOW_TRACE_SPANS: Final = "trace_over_span_cap"  # a trace with spans dropped by the per-trace cap
OVERFLOW_RESULT_TRUNCATED: Final = "result_truncated"  # a tool result cut to max_argument_bytes
# Replay: a trace whose spans say the SDK dropped attributes or events (span limits) and in which no
# span is recognised: its GenAI markers may be what was dropped, so an episode may be missing.
OVERFLOW_DROPPED_NO_EPISODE: Final = "trace_dropped_no_episode"

# Why an episode's evidence is incomplete (EpisodeResult.incomplete, reports).
INCOMPLETE_ROOT_NOT_SEEN: Final = "root not seen"
# Live: an error inside spanassert while it judged a span of the episode (that span's evidence is lost).
INCOMPLETE_JUDGING_FAILED: Final = "a span could not be judged (internal error)"
# Live: a span of the trace could not be judged before any episode of it was open (it may be the
# span that would have opened it: its agent, service and attributes select the rules by `match`).
INCOMPLETE_OPENING_NOT_JUDGED = "a span of this trace could not be judged before the episode opened (internal error)"
OVERFLOW_PENDING_MARKS: Final = "judging_failed_not_remembered"  # past MAX_PENDING_MARKS (every episode is marked)
MAX_PENDING_MARKS: Final = 4096  # traces with such a span and no episode yet, remembered until one opens


def parents_not_in_input(count: int) -> str:
    """Why an episode whose trace's root was seen is still incomplete: ``count`` of its spans have
    a parent that is not in the input (replay, serve: not in the file or request; live: in another
    process, a remote parent)."""
    return f"{count} span(s) whose parent is not in the input"


PARENTS_NOT_IN_INPUT_SUFFIX: Final = parents_not_in_input(0)[1:]
OUT_OF_ORDER: Final = "calls arrived after the episode closed, before calls already judged (order unknown)"
MAX_SEEN_IDS: Final = 1024  # span ids an episode remembers for late parts (past it: parents unknown)

MAX_TOOL_DEFINITIONS: Final = 256  # tools whose parameter names one episode remembers
PENDING_PREFIX: Final = "pending:"  # a guard's pending call's placeholder span id (no span id has it)
NO_SPAN: Final[Any] = object()  # Episode.span1 when it holds no span (equal to no span id)


@mypyc_attr(allow_interpreted_subclasses=True)  # subclassed by code that is not compiled (see core.native)
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

    def internal_error(self, kind: str, exc: BaseException) -> None:
        """An error inside spanassert that the engine caught and judged around (a rule's decision
        at close raised: that rule is `inconclusive`). Doors that count internal errors override
        this; the default raises it again (replay stops with an internal error)."""
        raise exc

    def root_elsewhere(self, trace_id: str) -> bool:
        """Asked when an episode opens for this trace (or the trace joins a conversation's
        episode): whether the trace's root is known to be outside what this door sees (live: a span
        of the trace in this process has a remote parent). Then the episode is incomplete ("root
        not seen") and no span of the trace closes it: :meth:`Engine.end_trace` does."""
        return False

    def trace_released(self, trace_id: str) -> None:
        """The engine no longer follows this trace: its spans can skip the engine."""


class SpanOutcome:
    """What the engine has to say about one span as it ends: the violations to attach to it, and
    the episode result when this span closed its episode (the root)."""

    __slots__ = ("violations", "episode")

    def __init__(self, violations: List[Violation], episode: Optional[EpisodeResult]) -> None:
        self.violations = violations
        self.episode = episode


@trait
class StateHolder:
    """One state per rule of a plan, made on first use, and the first failure of each rule: an
    episode's (:class:`Episode`), or the receiver's throwaway ones for one span
    (:class:`RuleStates`, Engine.precheck). The fields are its subclasses' slots."""

    __slots__ = ()
    plan: Plan
    states: List[Any]
    failed: Optional[Dict[int, Failure]]

    def state(self, slot: Slot) -> Any:
        st = self.states[slot.index]
        if st is NO_STATE:
            st = slot.assertion.new_state()
            self.states[slot.index] = st
        return st


class RuleStates(StateHolder):
    """A plan's rule states on their own (the receiver's throwaway ones for one span)."""

    __slots__ = ("plan", "states", "failed")

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.states = [NO_STATE] * len(plan.slots)
        self.failed = None


States = TypeVar("States", bound=StateHolder)
Handlers = Tuple[Tuple[int, Callable[[Any, ToolCall], Optional[Failure]]], ...]


def give_call(ep: States, handlers: Handlers, call: ToolCall,
              fail: Callable[[States, Slot, Failure, Optional[str], bool], Optional[Violation]],
              late: bool = False, out: Optional[List[Violation]] = None) -> None:
    """The one call dispatch loop (calls as they start and end, late calls, the receiver's early
    check): give ``call`` to each (slot index, bound ``on_call_start`` / ``on_call_end``) of
    ``handlers`` (a :class:`~spanassert.core.plan.ToolPlan`'s), making a rule's state on its first
    use. A failure goes at once to ``fail(ep, slot, failure, call.span_id, late)``; the violation it
    returns, if any, is appended to ``out``."""
    slots = ep.plan.slots
    states = ep.states
    for i, handler in handlers:
        st = states[i]
        if st is NO_STATE:
            st = states[i] = slots[i].assertion.new_state()
        f = handler(st, call)
        if f is not None:
            v = fail(ep, slots[i], f, call.span_id, late)
            if out is not None and v is not None:
                out.append(v)


class Episode(EpisodeView, StateHolder):
    """One agent run as the engine holds it (see the module docstring). It is its own view
    (``view`` is the episode itself: one object, not two, per open episode); rules read it as an
    :class:`EpisodeView` only."""

    __slots__ = (
        "plan",
        "states",
        "failed",
        "root_is_agent",
        "span1",
        "agent1",
        "spans",
        "step_spans",
        "open_calls",
        "marks",
        "last_ns",
        "closed",
        "eval_s",
        "absorbed",
        "hold",
        "last_call_ns",
        "tool_params",
        "pending",
        "result",
    )

    def __init__(self, key: str, trace_id: str, plan: Plan, now_ns: int) -> None:
        EpisodeView.__init__(self)
        self.key = key
        self.trace_id = trace_id
        self.plan = plan
        self.states = [NO_STATE] * len(plan.slots)
        self.failed = None
        self.root_is_agent = False
        # span_id -> name of the nearest agent at or above it, for the spans of this episode that
        # are still open (entries leave when their span ends): one entry held in `span1`/`agent1`
        # (most of the time the only one: the root agent's, between calls), the others in `spans`,
        # a dict made for them and dropped when empty. Read and written through span_agent,
        # has_span, add_span and pop_span.
        self.span1: Any = NO_SPAN
        self.agent1: Optional[str] = None
        self.spans: Optional[Dict[str, Optional[str]]] = None
        self.step_spans: Optional[Dict[str, int]] = None  # open model steps -> their step number
        # The calls started and not ended, by span id; None when there is none (made at the
        # first, dropped when the last ends: see pop_call).
        self.open_calls: Optional[Dict[str, ToolCall]] = None
        self.marks: Optional[Dict[str, List[Violation]]] = None
        self.last_ns = now_ns
        self.closed = False
        self.eval_s = 0.0  # time spent evaluating this episode's spans
        # Open spans folded into their parent call or step (an MCP `tools/call` span inside a
        # framework's `execute_tool` span, a provider chat span inside a framework's): one call.
        self.absorbed: Optional[Set[str]] = None
        # Replay and serve, a trace whose root is not in the input: no span end closes the
        # episode; the end of the trace's spans does (Engine.end_trace).
        self.hold = False
        self.last_call_ns = 0  # the latest start of a call judged so far
        # Tool name -> parameter names, from the tool definitions recorded on the spans of this
        # episode that have ended (model steps, agents): what binds a bare-value argument to its
        # parameter name. Read at span end only, so that live and replay learn them at the same
        # point; bounded by MAX_TOOL_DEFINITIONS.
        self.tool_params: Optional[Dict[str, Tuple[str, ...]]] = None
        # Calls a guard decided before their span started (Engine.decide_pending), with the
        # arguments it was given, by placeholder span id, until the tool span that follows is
        # matched to one (CallsAndSteps._adopt_pending).
        self.pending: Optional[Dict[str, Tuple[ToolCall, Any]]] = None
        self.result: Optional[EpisodeResult] = None  # the last result given out (for amendments)

    # -- the fields usually at their default, held in the view's side record (`more`, a ViewMore) -----------

    # (slot, span) failures reported
    @property
    def reported(self) -> Optional[Set[Tuple[int, Optional[str]]]]:
        more = self.more
        return None if more is None else more.reported

    @reported.setter
    def reported(self, value: Optional[Set[Tuple[int, Optional[str]]]]) -> None:
        if value is not None or self.more is not None:
            self._side().reported = value

    # Attribute-keyed episodes span several traces.
    @property
    def traces(self) -> Optional[Set[str]]:
        more = self.more
        return None if more is None else more.traces

    @traces.setter
    def traces(self, value: Optional[Set[str]]) -> None:
        if value is not None or self.more is not None:
            self._side().traces = value

    # Usage recorded by provider spans folded into a step, by the step's span id (read when the
    # step ends, for what its own span does not record).
    @property
    def inner_usage(self) -> Optional[Dict[str, ModelStep]]:
        more = self.more
        return None if more is None else more.inner_usage

    @inner_usage.setter
    def inner_usage(self, value: Optional[Dict[str, ModelStep]]) -> None:
        if value is not None or self.more is not None:
            self._side().inner_usage = value

    # Slots that failed (and were reported) at a close.
    @property
    def at_close(self) -> Optional[Set[int]]:
        more = self.more
        return None if more is None else more.at_close

    @at_close.setter
    def at_close(self, value: Optional[Set[int]]) -> None:
        if value is not None or self.more is not None:
            self._side().at_close = value

    # Calls not ended when it closed.
    @property
    def in_flight(self) -> Optional[List[ToolCall]]:
        more = self.more
        return None if more is None else more.in_flight

    @in_flight.setter
    def in_flight(self, value: Optional[List[ToolCall]]) -> None:
        if value is not None or self.more is not None:
            self._side().in_flight = value

    # Closed once, and went on (another local root, a late part).
    @property
    def reopened(self) -> bool:
        more = self.more
        return False if more is None else more.reopened

    @reopened.setter
    def reopened(self, value: bool) -> None:
        if value or self.more is not None:
            self._side().reopened = value

    # Assembled traces only (replay, serve): ids of the spans seen (bounded; None past the bound),
    # so that a late part of the trace can tell a parent seen earlier from one missing from the
    # input. A set from the first id on (Engine._seen); live episodes never set it.
    @property
    def seen(self) -> Optional[AbstractSet[str]]:
        more = self.more
        return NO_IDS if more is None else more.seen

    @seen.setter
    def seen(self, value: Optional[AbstractSet[str]]) -> None:
        if value is not NO_IDS or self.more is not None:
            self._side().seen = value

    @property
    def view(self) -> EpisodeView:
        """The episode's view: the episode itself (a property, not a field: a field holding the
        episode would make each episode a reference cycle, freed only by the garbage collector)."""
        return self

    # -- the open spans' agents (see __init__) ------------------------------------------------------------
    def span_agent(self, span_id: Optional[str]) -> Optional[str]:
        """The agent at or above open span ``span_id``; None when there is none or the span is not
        an open span of this episode."""
        if span_id == self.span1:
            return self.agent1
        spans = self.spans
        return spans.get(span_id) if spans is not None and span_id is not None else None

    def has_span(self, span_id: Optional[str]) -> bool:
        if span_id == self.span1:
            return True
        spans = self.spans
        return spans is not None and span_id in spans

    def add_span(self, span_id: str, agent: Optional[str]) -> None:
        if span_id == self.span1:
            self.agent1 = agent
            return
        spans = self.spans
        if spans is not None and span_id in spans:
            spans[span_id] = agent
        elif self.span1 is NO_SPAN:
            self.span1 = span_id
            self.agent1 = agent
        elif spans is None:
            self.spans = {span_id: agent}
        else:
            spans[span_id] = agent

    def pop_span(self, span_id: str) -> Optional[str]:
        if span_id == self.span1:
            agent = self.agent1
            self.span1 = NO_SPAN
            self.agent1 = None
            return agent
        spans = self.spans
        if spans is None:
            return None
        agent = spans.pop(span_id, None)
        if not spans:
            self.spans = None
        return agent

    def drop_spans(self) -> None:
        """Forget the open spans and calls (a closed episode keeps what late spans need)."""
        self.span1 = NO_SPAN
        self.agent1 = None
        self.spans = None
        self.open_calls = None

    # -- the open calls ----------------------------------------------------------------------------------
    def open_call(self, span_id: Optional[str]) -> Optional[ToolCall]:
        open_calls = self.open_calls
        return open_calls.get(span_id) if open_calls is not None and span_id is not None else None

    def pop_call(self, span_id: str) -> Optional[ToolCall]:
        open_calls = self.open_calls
        if open_calls is None:
            return None
        call = open_calls.pop(span_id, None)
        if not open_calls:
            self.open_calls = None
        return call
