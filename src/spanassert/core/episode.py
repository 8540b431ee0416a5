"""The episode: one agent run (a trace, or a conversation across traces) as the engine holds it while
its spans arrive: the rule states of its plan, what it has seen, and what it has said. Also what the
engine says to a front door (:class:`Sink`, :class:`SpanOutcome`), the reasons it names, and the one
loop that gives a tool call to the rules of a plan (:func:`give_call`).
"""
from __future__ import annotations

from typing import AbstractSet, Any, Callable, Dict, List, Optional, Set, Tuple, TypeVar

from .model import EpisodeView, Failure, ModelStep, ToolCall
from .plan import Plan, Slot
from .results import EpisodeResult, Violation

NO_STATE: Any = object()  # a rule whose state is not made yet (made on its first use)

UNREADABLE_NO_NAME = "no_tool_name"
UNREADABLE_ARGUMENTS = "unparsable_arguments"
UNREADABLE_TOO_LARGE = "arguments_too_large"

OVERFLOW_EPISODE_EVICTED = "episode_evicted"
OVERFLOW_CALL_DROPPED = "in_flight_call_dropped"
OVERFLOW_TRACE_SPANS = "trace_over_span_cap"  # a trace with spans dropped by the per-trace cap
OVERFLOW_RESULT_TRUNCATED = "result_truncated"  # a tool result cut to max_argument_bytes

# Why an episode's evidence is incomplete (EpisodeResult.incomplete, reports).
INCOMPLETE_ROOT_NOT_SEEN = "root not seen"


def parents_not_in_input(count: int) -> str:
    """Why an episode whose trace's root was seen is still incomplete: ``count`` of its spans have
    a parent that is not in the input (replay, serve: not in the file or request; live: in another
    process, a remote parent)."""
    return f"{count} span(s) whose parent is not in the input"


PARENTS_NOT_IN_INPUT_SUFFIX = parents_not_in_input(0)[1:]
OUT_OF_ORDER = "calls arrived after the episode closed, before calls already judged (order unknown)"
MAX_SEEN_IDS = 1024  # span ids an episode remembers for late parts (past it: parents unknown)

MAX_TOOL_DEFINITIONS = 256  # tools whose parameter names one episode remembers
PENDING_PREFIX = "pending:"  # a guard's pending call's placeholder span id (no span id has it)
NO_IDS: AbstractSet[str] = frozenset()  # the span ids of an episode that has seen none (shared)


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


class RuleStates:
    """One state per rule of a plan, made on first use, and the first failure of each rule: an
    episode's, or the receiver's throwaway ones for one span (Engine.precheck)."""

    __slots__ = ("plan", "states", "failed")

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.states: List[Any] = [NO_STATE] * len(plan.slots)
        self.failed: Optional[Dict[int, Failure]] = None

    def state(self, slot: Slot) -> Any:
        st = self.states[slot.index]
        if st is NO_STATE:
            st = slot.assertion.new_state()
            self.states[slot.index] = st
        return st


States = TypeVar("States", bound=RuleStates)
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


class Episode(RuleStates):
    """One agent run as the engine holds it (see the module docstring)."""

    __slots__ = (
        "key",
        "trace_id",
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
        "pending",
    )

    def __init__(self, key: str, trace_id: str, plan: Plan, now_ns: int) -> None:
        self.key = key
        self.trace_id = trace_id
        RuleStates.__init__(self, plan)
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
        self.seen: Optional[AbstractSet[str]] = NO_IDS  # a set from the first id on (Engine._seen)
        self.last_call_ns = 0  # the latest start of a call judged so far
        self.reopened = False  # closed once, and went on (another local root, a late part)
        # Tool name -> parameter names, from the tool definitions recorded on the spans of this
        # episode that have ended (model steps, agents): what binds a bare-value argument to its
        # parameter name. Read at span end only, so that live and replay learn them at the same
        # point; bounded by MAX_TOOL_DEFINITIONS.
        self.tool_params: Optional[Dict[str, Tuple[str, ...]]] = None
        # Calls a guard decided before their span started (Engine.decide_pending), with the
        # arguments it was given, by placeholder span id, until the tool span that follows is
        # matched to one (CallsAndSteps._adopt_pending).
        self.pending: Optional[Dict[str, Tuple[ToolCall, Any]]] = None
