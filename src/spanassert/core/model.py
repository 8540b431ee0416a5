"""Domain records shared by every part of spanassert.

Nothing here knows the OpenTelemetry SDK. The live processor, the OTLP file readers and the OTLP
receiver all turn spans into these records (through :mod:`spanassert.mapping`) and feed them to one
engine, which is what makes their verdicts identical.

This module holds the verdicts and what an assertion reports (``Verdict``, ``Failure``,
``Outcome``, ``EpisodeView``, ``ModelStep``); the call record lives in :mod:`.toolcall`, the
decoded span in :mod:`.spans`, a rules file's problems in :mod:`.diagnostics`. Every name is
importable from here as well.
"""
from __future__ import annotations

import enum
from typing import AbstractSet, Any, Dict, Final, List, Optional, Set, Tuple

from .diagnostics import ConfigError, Diagnostic
from .spans import NO_EVENTS, SpanEvent, SpanRecord
from .toolcall import (
    CONTENT_MISSING,
    CONTENT_OK,
    CONTENT_UNPARSABLE,
    MISSING,
    STATUS_ERROR,
    STATUS_OK,
    STATUS_UNKNOWN,
    STATUS_UNSET,
    ToolCall,
    bind_arguments,
    call_status,
    decode_content,
)

__all__ = [
    "MISSING", "CONTENT_OK", "CONTENT_MISSING", "CONTENT_UNPARSABLE", "STATUS_UNSET", "STATUS_OK",
    "STATUS_ERROR", "STATUS_UNKNOWN", "call_status", "decode_content", "bind_arguments", "ToolCall", "Verdict",
    "VERDICT_RANK", "worst",
    "Severity", "CloseReason", "Failure", "Outcome", "EpisodeView", "ModelStep", "Diagnostic",
    "ConfigError", "SpanEvent", "NO_EVENTS", "SpanRecord",
]


class _TextEnum(str, enum.Enum):
    """An enum of texts that prints as its text (as `enum.StrEnum` does from Python 3.11)."""

    def __str__(self) -> str:
        return str(self.value)


class Verdict(_TextEnum):
    """The four ends of an assertion. Only ``PASSED`` is a pass."""

    PASSED = "passed"
    FAILED = "failed"
    INCONCLUSIVE = "inconclusive"
    NOT_APPLICABLE = "not_applicable"


# Worst first: a test's verdict is the worst verdict of its assertions.
VERDICT_RANK: Final = {
    Verdict.FAILED: 3,
    Verdict.INCONCLUSIVE: 2,
    Verdict.PASSED: 1,
    Verdict.NOT_APPLICABLE: 0,
}


_WORST_FIRST: Final = sorted(VERDICT_RANK, key=VERDICT_RANK.__getitem__, reverse=True)


def worst(verdicts: List[Verdict]) -> Verdict:
    """The worst verdict of ``verdicts`` (by VERDICT_RANK); NOT_APPLICABLE for none. Found by
    membership tests, worst first: a list's ``in`` compares in C, where keying ``max`` on the rank
    hashes each member through Enum's Python-level ``__hash__`` (about 1.5 µs for 20 verdicts)."""
    for v in _WORST_FIRST:
        if v in verdicts:
            return v
    return Verdict.NOT_APPLICABLE


class Severity(_TextEnum):
    CRITICAL = "critical"
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


class CloseReason(_TextEnum):
    """Why an episode closed. Only ROOT_ENDED (trace episodes) and IDLE (attribute-keyed episodes)
    let liveness rules be decided; the others make them inconclusive."""

    ROOT_ENDED = "root_ended"
    IDLE = "idle_timeout"
    FLUSH = "force_flush"
    SHUTDOWN = "shutdown"
    EVICTED = "evicted"
    END_OF_INPUT = "end_of_input"
    # Judging the episode raised inside spanassert: what failed stands, nothing else passes.
    INTERNAL_ERROR = "internal_error"
    # Replay and serve: the trace's root (its outermost agent span, or a span with no parent) was
    # not in the input, so the episode closed when its trace's spans had all been read.
    ROOT_NOT_SEEN = "root_not_seen"


class Failure:
    """What an assertion reports at the offending call (or at close).

    ``message`` names the observed value and the bound, e.g. "`delete_database` called at call #4".
    It must not contain argument or result values unless the rule opted in to evidence (see
    :meth:`spanassert.assertions.base.Assertion.show`).
    """

    __slots__ = ("message", "span_id", "call_index", "tool")

    def __init__(
        self,
        message: str,
        *,
        span_id: Optional[str] = None,
        call_index: Optional[int] = None,
        tool: Optional[str] = None,
    ) -> None:
        self.message = message
        self.span_id = span_id
        self.call_index = call_index
        self.tool = tool

    @classmethod
    def at(cls, call: ToolCall, message: str) -> Failure:
        return cls(message, span_id=call.span_id, call_index=call.index, tool=call.name)

    def __repr__(self) -> str:
        return f"Failure({self.message!r}, span_id={self.span_id!r})"


# The members read once: reading one off its class costs a descriptor call every time (Python 3.11).
_PASSED, _FAILED = Verdict.PASSED, Verdict.FAILED
_INCONCLUSIVE, _NOT_APPLICABLE = Verdict.INCONCLUSIVE, Verdict.NOT_APPLICABLE


class Outcome:
    """The final word of one assertion on one episode."""

    __slots__ = ("verdict", "message", "span_id")

    def __init__(self, verdict: Verdict, message: str = "", span_id: Optional[str] = None) -> None:
        self.verdict = verdict
        self.message = message
        self.span_id = span_id

    # Each rule's close makes one (Outcome(...) itself: a native class is not made by object.__new__).
    @classmethod
    def passed(cls, message: str = "") -> Outcome:
        return Outcome(_PASSED, message, None)

    @classmethod
    def failed(cls, message: str, span_id: Optional[str] = None) -> Outcome:
        return Outcome(_FAILED, message, span_id)

    @classmethod
    def inconclusive(cls, message: str) -> Outcome:
        return Outcome(_INCONCLUSIVE, message, None)

    @classmethod
    def not_applicable(cls, message: str = "") -> Outcome:
        return Outcome(_NOT_APPLICABLE, message, None)

    def __repr__(self) -> str:
        return f"Outcome({self.verdict.value}, {self.message!r})"


NO_IDS: Final[AbstractSet[str]] = frozenset()  # the span ids of an episode that has seen none (shared)


class ViewMore:
    """The side record of an episode (its view's fields and the engine's own) for the fields that
    are usually at their default: made at the first other value, so that an open episode does not
    hold a place for each of them. The view's fields are read and written as attributes of the view
    (properties over this record: :class:`EpisodeView`), the engine's as attributes of its
    :class:`~spanassert.core.episode.Episode`. One record for both: the episode's own record would
    be a second slot per episode."""

    __slots__ = ("final_output", "final_output_state", "embeddings", "calls_dropped", "incomplete",
                 "results_truncated", "late_calls", "unreadable_calls", "order_ties", "time_backwards", "ambiguous",
                 "reported", "traces", "inner_usage", "at_close", "in_flight", "reopened", "seen")

    def __init__(self) -> None:
        self.final_output: Optional[str] = None
        self.final_output_state: str = CONTENT_MISSING
        self.embeddings: Optional[Dict[str, Any]] = None
        self.calls_dropped = 0
        self.incomplete: Optional[List[str]] = None
        self.results_truncated = 0
        self.late_calls = 0
        self.unreadable_calls = 0
        self.order_ties = 0
        self.time_backwards = False
        self.ambiguous = 0
        # The engine's (see Episode):
        self.reported: Optional[Set[Tuple[int, Optional[str]]]] = None
        self.traces: Optional[Set[str]] = None
        self.inner_usage: Optional[Dict[str, ModelStep]] = None
        self.at_close: Optional[Set[int]] = None
        self.in_flight: Optional[List[ToolCall]] = None
        self.reopened = False
        self.seen: Optional[AbstractSet[str]] = NO_IDS


class EpisodeView:
    """What an assertion may read about its episode when it decides at close.

    Assertions keep their own O(1)/O(rule size) state: the engine does not keep the episode's
    calls. ``calls_dropped`` counts in-flight calls dropped at the ``max_calls_per_episode`` bound.
    """

    __slots__ = (
        "key",
        "trace_id",
        "root_span_id",
        "root_name",
        "agent",
        "close_reason",
        "decidable",
        "call_count",
        "step_count",
        "service",
        "start_ns",
        "end_ns",
        "more",
    )

    def __init__(self) -> None:
        self.key: str = ""
        self.trace_id: Optional[str] = None
        self.root_span_id: Optional[str] = None
        self.root_name: Optional[str] = None
        self.agent: Optional[str] = None
        self.close_reason: Optional[CloseReason] = None
        # True when the episode closed normally (root ended / idle for attribute episodes), so
        # liveness rules can be decided; False makes them inconclusive.
        self.decidable = False
        self.call_count = 0
        self.step_count = 0
        self.service: Optional[str] = None
        # Span time of the episode's GenAI spans (agent, model, tool): the earliest start and the
        # latest start or end seen. Judged from span timestamps only, never the wall clock.
        self.start_ns: Optional[int] = None
        self.end_ns: Optional[int] = None
        self.more: Optional[ViewMore] = None  # the fields usually at their default (below)

    # -- the fields usually at their default: read and written as attributes, held in `more` (a side
    # record made at the first other value; ViewMore) ----------------------------------------------------
    def _side(self) -> ViewMore:
        """The side record, made at its first use."""
        more = self.more
        if more is None:
            more = self.more = ViewMore()
        return more

    @property
    def final_output(self) -> Optional[str]:
        more = self.more
        return None if more is None else more.final_output

    @final_output.setter
    def final_output(self, value: Optional[str]) -> None:
        if value is not None or self.more is not None:
            self._side().final_output = value

    @property
    def final_output_state(self) -> str:
        more = self.more
        return CONTENT_MISSING if more is None else more.final_output_state

    @final_output_state.setter
    def final_output_state(self, value: str) -> None:
        if value is not CONTENT_MISSING or self.more is not None:
            self._side().final_output_state = value

    # Precomputed embeddings recorded on the span that carried the final output (raw attribute
    # values by name, see Mapper.embeddings), or None.
    @property
    def embeddings(self) -> Optional[Dict[str, Any]]:
        more = self.more
        return None if more is None else more.embeddings

    @embeddings.setter
    def embeddings(self, value: Optional[Dict[str, Any]]) -> None:
        if value is not None or self.more is not None:
            self._side().embeddings = value

    @property
    def calls_dropped(self) -> int:
        more = self.more
        return 0 if more is None else more.calls_dropped

    @calls_dropped.setter
    def calls_dropped(self, value: int) -> None:
        if value != 0 or self.more is not None:
            self._side().calls_dropped = value

    # Why the evidence is incomplete ("root not seen", spans over a cap): never decidable.
    @property
    def incomplete(self) -> Optional[List[str]]:
        more = self.more
        return None if more is None else more.incomplete

    @incomplete.setter
    def incomplete(self, value: Optional[List[str]]) -> None:
        if value is not None or self.more is not None:
            self._side().incomplete = value

    # Tool results cut to max_argument_bytes (their rules: inconclusive).
    @property
    def results_truncated(self) -> int:
        more = self.more
        return 0 if more is None else more.results_truncated

    @results_truncated.setter
    def results_truncated(self, value: int) -> None:
        if value != 0 or self.more is not None:
            self._side().results_truncated = value

    # ToolCall.ambiguous bits of the episode's calls (content that repeats a JSON key with
    # different values): rules judged the last value; no rule that reads such content passes.
    @property
    def ambiguous(self) -> int:
        more = self.more
        return 0 if more is None else more.ambiguous

    @ambiguous.setter
    def ambiguous(self, value: int) -> None:
        if value != 0 or self.more is not None:
            self._side().ambiguous = value

    # Calls that arrived after the episode closed: safety rules judge them; a liveness rule that
    # was met without them, and that more calls could break, is no longer a pass.
    @property
    def late_calls(self) -> int:
        more = self.more
        return 0 if more is None else more.late_calls

    @late_calls.setter
    def late_calls(self, value: int) -> None:
        if value != 0 or self.more is not None:
            self._side().late_calls = value

    # Tool calls that started at the same instant as the latest call before them (not their
    # parent): which came first is unknown (a coarse clock, parallel calls). Replay and serve order
    # such calls by span id, live by arrival; a rule on the order of calls cannot pass on either.
    @property
    def order_ties(self) -> int:
        more = self.more
        return 0 if more is None else more.order_ties

    @order_ties.setter
    def order_ties(self, value: int) -> None:
        if value != 0 or self.more is not None:
            self._side().order_ties = value

    @property
    def unreadable_calls(self) -> int:
        more = self.more
        return 0 if more is None else more.unreadable_calls

    @unreadable_calls.setter
    def unreadable_calls(self, value: int) -> None:
        if value != 0 or self.more is not None:
            self._side().unreadable_calls = value

    # A span of the episode ended before it started (the clock stepped back, or hostile times): its
    # span time (start_ns .. end_ns) may be shorter than the time that passed.
    @property
    def time_backwards(self) -> bool:
        more = self.more
        return False if more is None else more.time_backwards

    @time_backwards.setter
    def time_backwards(self, value: bool) -> None:
        if value or self.more is not None:
            self._side().time_backwards = value


class ModelStep:
    """What a model step (an LLM call span) reported when it ended: its usage and model, each None
    when not recorded. ``total_tokens`` is the recorded total, else input + output when both are
    known. ``number`` is the step's 1-based position among the episode's steps. ``model`` is the
    first model name recorded (the response's, else the request's); ``models`` every distinct name
    recorded, ``model`` first (a response naming a dated snapshot of the requested model)."""

    __slots__ = ("span_id", "number", "model", "input_tokens", "output_tokens", "total_tokens", "models")

    def __init__(self, span_id: Optional[str] = None, number: int = 0, model: Optional[str] = None,
                 input_tokens: Optional[int] = None, output_tokens: Optional[int] = None,
                 total_tokens: Optional[int] = None) -> None:
        self.span_id = span_id
        self.number = number
        self.model = model
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        if total_tokens is None and input_tokens is not None and output_tokens is not None:
            total_tokens = input_tokens + output_tokens
        self.total_tokens = total_tokens
        self.models: Tuple[str, ...] = (model,) if model is not None else ()

    def __repr__(self) -> str:
        return (f"ModelStep({self.model!r}, in={self.input_tokens}, out={self.output_tokens}, "
                f"total={self.total_tokens}, span_id={self.span_id!r})")
