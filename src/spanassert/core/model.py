"""Domain records shared by every part of spanassert.

Nothing here knows the OpenTelemetry SDK. The live processor, the OTLP file readers and the OTLP
receiver all turn spans into these records (through :mod:`spanassert.mapping`) and feed them to one
engine, which is what makes their verdicts identical.
"""
from __future__ import annotations

import enum
import json
from dataclasses import field
from typing import Any, Dict, List, Mapping, Optional, Tuple

from .records import record


class _Missing:
    """The value of data the instrumentation did not record (distinct from a recorded ``null``)."""

    __slots__ = ()
    _instance: Optional[_Missing] = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class Verdict(str, enum.Enum):
    """The four ends of an assertion. Only ``PASSED`` is a pass."""

    PASSED = "passed"
    FAILED = "failed"
    INCONCLUSIVE = "inconclusive"
    NOT_APPLICABLE = "not_applicable"

    def __str__(self) -> str:
        return self.value


# Worst first: a test's verdict is the worst verdict of its assertions.
VERDICT_RANK = {
    Verdict.FAILED: 3,
    Verdict.INCONCLUSIVE: 2,
    Verdict.PASSED: 1,
    Verdict.NOT_APPLICABLE: 0,
}


def worst(verdicts: List[Verdict]) -> Verdict:
    if not verdicts:
        return Verdict.NOT_APPLICABLE
    return max(verdicts, key=VERDICT_RANK.__getitem__)


class Severity(str, enum.Enum):
    CRITICAL = "critical"
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    def __str__(self) -> str:
        return self.value


class CloseReason(str, enum.Enum):
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

    def __str__(self) -> str:
        return self.value


# Content states of a call's arguments / result.
CONTENT_OK = "ok"
CONTENT_MISSING = "missing"  # not recorded (instrumentation did not capture content)
CONTENT_UNPARSABLE = "unparsable"  # recorded, looked like JSON, did not parse (e.g. truncated)

STATUS_UNSET = "unset"
STATUS_OK = "ok"
STATUS_ERROR = "error"


def decode_content(raw: Any) -> Tuple[Any, str]:
    """Turn a recorded arguments/result attribute into (value, state).

    - absent -> (MISSING, "missing")
    - a structured value (dict/list/number/bool) -> itself
    - a string holding JSON -> the parsed value
    - a string that looks like a JSON object/array but does not parse -> (raw, "unparsable")
    - any other string -> the string itself (a bare, non-JSON argument is still an argument)
    """
    if raw is None or raw is MISSING:
        return MISSING, CONTENT_MISSING
    if isinstance(raw, (bytes, bytearray)):
        try:
            raw = bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            return MISSING, CONTENT_UNPARSABLE
    if isinstance(raw, str):
        s = raw.strip()
        if not s:
            return raw, CONTENT_OK
        if s[0] in "{[\"" or s in ("null", "true", "false") or s[0] in "-0123456789":
            try:
                return json.loads(s), CONTENT_OK
            except (ValueError, RecursionError):
                if s[0] in "{[":
                    return raw, CONTENT_UNPARSABLE
                return raw, CONTENT_OK
        return raw, CONTENT_OK
    if isinstance(raw, tuple):
        return list(raw), CONTENT_OK
    return raw, CONTENT_OK


def bind_arguments(value: Any, params: Optional[Tuple[str, ...]]) -> Any:
    """Recorded arguments that are not an object, as the object of named arguments they stand for,
    or None when that cannot be known.

    Some instrumentations record a one-parameter tool's input as the bare value (OpenInference's
    LangChain instrumentation writes ``"prod"``, not ``{"name": "prod"}``). When the tool's
    definition was recorded (``params``: its parameter names) and names exactly one parameter, the
    value is bound to it; a tool defined with no parameter binds an empty or null input to ``{}``.
    Otherwise (no definition, several parameters) nobody can say which argument the value is.
    """
    if params is None:
        return None
    if len(params) == 1:
        return {params[0]: value}
    if not params and (value is None or value == ""):
        return {}
    return None


def _shape(value: Any) -> str:
    if isinstance(value, str):
        return "a bare string"
    if isinstance(value, list):
        return "an array"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a bare boolean"
    if isinstance(value, (int, float)):
        return "a bare number"
    return f"a bare {type(value).__name__}"


class ToolCall:
    """One tool invocation in an episode.

    Its *position* (``index``, ``start_ns``, ``name``, ``agent``) is known when the span starts; its
    *content* (arguments, result, status, duration) when it ends (``ended`` is then True). Arguments
    and results are decoded lazily, the first time a rule asks for them.

    ``params`` holds the tool's parameter names when its definition was recorded (on the tool span,
    or on the model step or agent span that offered the tool); arguments recorded as a bare value
    are then bound to the single parameter (:func:`bind_arguments`). ``arguments_named`` says
    whether the arguments are an object of named arguments; rules on a named argument cannot judge a
    call for which it is False (``arguments_problem`` says why).
    """

    # Hand-written rather than a dataclass: the generated __init__ copies a closure cell per default
    # on every call, +30 ns per call on the engine's hot path (measured, Python 3.11).
    __slots__ = (
        "name",
        "call_id",
        "trace_id",
        "span_id",
        "parent_span_id",
        "start_ns",
        "end_ns",
        "index",
        "agent",
        "status",
        "error_type",
        "ended",
        "_args_raw",
        "_args",
        "_args_state",
        "_result_raw",
        "_result",
        "_result_state",
        "args_at_start",
        "params",
        "_args_bound",
        "result_truncated",
    )

    def __init__(
        self,
        name: str,
        span_id: str = "",
        trace_id: str = "",
        parent_span_id: Optional[str] = None,
        start_ns: int = 0,
        index: int = 0,
        agent: Optional[str] = None,
        call_id: Optional[str] = None,
        arguments_raw: Any = None,
    ) -> None:
        self.name = name
        self.call_id = call_id
        self.trace_id = trace_id
        self.span_id = span_id
        self.parent_span_id = parent_span_id
        self.start_ns = start_ns
        self.end_ns: Optional[int] = None
        self.index = index
        self.agent = agent
        self.status = STATUS_UNSET
        self.error_type: Optional[str] = None
        self.ended = False
        self._args_raw = arguments_raw
        self._args: Any = None
        self._args_state: Optional[str] = None
        self._result_raw: Any = None
        self._result: Any = None
        self._result_state: Optional[str] = None
        # The arguments were on the span when it started (and rules judged them then); stays True
        # when the end carries the same arguments, so they are neither decoded nor judged twice.
        self.args_at_start = False
        self.params: Optional[Tuple[str, ...]] = None
        self._args_bound = False
        # The recorded result was longer than ``episodes.max_argument_bytes`` and only its head was
        # kept: what it shows is true, what it does not show is unknown.
        self.result_truncated = False

    def finish(
        self,
        end_ns: int,
        status: str = STATUS_UNSET,
        error_type: Optional[str] = None,
        arguments_raw: Any = None,
        result_raw: Any = None,
    ) -> None:
        """Record the content known at span end. Arguments seen at start are kept unless the end
        carries them too."""
        self.end_ns = end_ns
        self.status = status
        self.error_type = error_type
        if arguments_raw is not None and not (self.args_at_start and (
                arguments_raw is self._args_raw or arguments_raw == self._args_raw)):
            self._args_raw = arguments_raw
            self._args_state = None
            self.args_at_start = False
        self._result_raw = result_raw
        self._result_state = None
        self.result_truncated = False
        self.ended = True

    # -- content, decoded on demand -------------------------------------------------------------
    def _decode_arguments(self) -> None:
        value, state = decode_content(self._args_raw)
        bound = None
        if state == CONTENT_OK and not isinstance(value, dict):
            bound = bind_arguments(value, self.params)
        self._args_bound = bound is not None
        self._args, self._args_state = (bound if bound is not None else value), state

    def set_params(self, params: Optional[Tuple[str, ...]]) -> None:
        """The tool's recorded parameter names (None: unknown); arguments are bound again."""
        if params == self.params:
            return
        self.params = params
        if self._args_state == CONTENT_OK and (self._args_bound or not isinstance(self._args, dict)):
            self._args_state = None  # decoded again, lazily, with the new parameter names
            # Bound differently from what the rules saw at the call's start: they judge it again.
            self.args_at_start = False

    @property
    def arguments(self) -> Any:
        """Parsed arguments (bound to the tool's parameter when recorded as a bare value and the
        tool's definition allows it), or MISSING when not recorded (or not decodable)."""
        if self._args_state is None:
            self._decode_arguments()
        return self._args if self._args_state == CONTENT_OK else MISSING

    @property
    def arguments_state(self) -> str:
        if self._args_state is None:
            self._decode_arguments()
        return self._args_state  # type: ignore[return-value]  # decoded just above: a state, never None

    @property
    def arguments_named(self) -> bool:
        """Whether the arguments are an object of named arguments (as recorded, or bound)."""
        return self.arguments_state == CONTENT_OK and isinstance(self._args, dict)

    @property
    def arguments_bound(self) -> bool:
        """Whether the arguments were recorded as a bare value and bound to the tool's parameter."""
        return self.arguments_state == CONTENT_OK and self._args_bound

    @property
    def arguments_problem(self) -> Optional[str]:
        """Why a rule on a named argument cannot judge this call; None when it can."""
        state = self.arguments_state
        if state == CONTENT_MISSING:
            return "its arguments were not recorded"
        if state != CONTENT_OK:
            return "its arguments were recorded but could not be parsed (truncated?)"
        if isinstance(self._args, dict):
            return None
        shape = _shape(self._args)
        if self.params is None:
            why = ("the tool's definition (its parameter names) was not recorded on the span or on the model "
                   "step that chose it")
        else:
            why = f"the tool's recorded definition has {len(self.params)} parameters, not one"
        return f"its arguments were recorded as {shape}, not an object of named arguments, and {why}"

    @property
    def result(self) -> Any:
        if self._result_state is None:
            self._result, self._result_state = decode_content(self._result_raw)
        return self._result if self._result_state == CONTENT_OK else MISSING

    @property
    def result_state(self) -> str:
        if self._result_state is None:
            self._result, self._result_state = decode_content(self._result_raw)
        return self._result_state

    @property
    def result_text(self) -> Optional[str]:
        """The result as recorded, as text (for `body contains` style checks); None if absent."""
        raw = self._result_raw
        if raw is None:
            return None
        if isinstance(raw, str):
            return raw
        if isinstance(raw, (bytes, bytearray)):
            return bytes(raw).decode("utf-8", "replace")
        return json.dumps(raw, sort_keys=True, default=str)

    @property
    def duration_s(self) -> Optional[float]:
        if self.end_ns is None:
            return None
        return (self.end_ns - self.start_ns) / 1e9

    def __repr__(self) -> str:
        return f"ToolCall({self.name!r}, index={self.index}, span_id={self.span_id!r})"


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


class Outcome:
    """The final word of one assertion on one episode."""

    __slots__ = ("verdict", "message", "span_id")

    def __init__(self, verdict: Verdict, message: str = "", span_id: Optional[str] = None) -> None:
        self.verdict = verdict
        self.message = message
        self.span_id = span_id

    @classmethod
    def passed(cls, message: str = "") -> Outcome:
        return cls(Verdict.PASSED, message)

    @classmethod
    def failed(cls, message: str, span_id: Optional[str] = None) -> Outcome:
        return cls(Verdict.FAILED, message, span_id)

    @classmethod
    def inconclusive(cls, message: str) -> Outcome:
        return cls(Verdict.INCONCLUSIVE, message)

    @classmethod
    def not_applicable(cls, message: str = "") -> Outcome:
        return cls(Verdict.NOT_APPLICABLE, message)

    def __repr__(self) -> str:
        return f"Outcome({self.verdict.value}, {self.message!r})"


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
        "unreadable_calls",
        "final_output",
        "final_output_state",
        "embeddings",
        "service",
        "calls_dropped",
        "start_ns",
        "end_ns",
        "incomplete",
        "results_truncated",
        "late_calls",
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
        self.unreadable_calls = 0
        self.final_output: Optional[str] = None
        self.final_output_state: str = CONTENT_MISSING
        # Precomputed embeddings recorded on the span that carried the final output (raw attribute
        # values by name, see Mapper.embeddings), or None.
        self.embeddings: Optional[Dict[str, Any]] = None
        self.service: Optional[str] = None
        self.calls_dropped = 0
        # Span time of the episode's GenAI spans (agent, model, tool): the earliest start and the
        # latest start or end seen. Judged from span timestamps only, never the wall clock.
        self.start_ns: Optional[int] = None
        self.end_ns: Optional[int] = None
        # Why the evidence is incomplete ("root not seen", spans over a cap): never decidable.
        self.incomplete: Optional[List[str]] = None
        self.results_truncated = 0  # tool results cut to max_argument_bytes (their rules: inconclusive)
        # Calls that arrived after the episode closed: safety rules judge them; a liveness rule that
        # was met without them, and that more calls could break, is no longer a pass.
        self.late_calls = 0


class ModelStep:
    """What a model step (an LLM call span) reported when it ended: its usage and model, each None
    when not recorded. ``total_tokens`` is the recorded total, else input + output when both are
    known. ``number`` is the step's 1-based position among the episode's steps."""

    __slots__ = ("span_id", "number", "model", "input_tokens", "output_tokens", "total_tokens")

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

    def __repr__(self) -> str:
        return (f"ModelStep({self.model!r}, in={self.input_tokens}, out={self.output_tokens}, "
                f"total={self.total_tokens}, span_id={self.span_id!r})")


class Diagnostic:
    """One problem found in a rules file (or an input file). Errors are data: code, position, fix."""

    __slots__ = ("code", "severity", "message", "file", "line", "column", "path", "hint")

    def __init__(
        self,
        code: str,
        message: str,
        *,
        severity: str = "error",
        file: Optional[str] = None,
        line: Optional[int] = None,
        column: Optional[int] = None,
        path: str = "",
        hint: Optional[str] = None,
    ) -> None:
        self.code = code
        self.severity = severity
        self.message = message
        self.file = file
        self.line = line
        self.column = column
        self.path = path
        self.hint = hint

    def to_dict(self) -> Dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity,
            "message": self.message,
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "path": self.path,
            "hint": self.hint,
        }

    def format(self) -> str:
        where = self.file or "<config>"
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        text = f"{where}: {self.severity} [{self.code}] {self.message}"
        if self.path:
            text += f" (at {self.path})"
        if self.hint:
            text += f"\n    fix: {self.hint}"
        return text

    def __repr__(self) -> str:
        return f"Diagnostic({self.code}, {self.message!r}, line={self.line})"


class ConfigError(Exception):
    """A rules file that cannot be used. ``diagnostics`` lists every problem found, not just the first."""

    def __init__(self, diagnostics: List[Diagnostic]) -> None:
        self.diagnostics = list(diagnostics)
        errors = [d for d in self.diagnostics if d.severity == "error"] or self.diagnostics
        head = errors[0].format() if errors else "invalid configuration"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        super().__init__(head + more)


class SpanEvent:
    """A span event as files and the receiver deliver it (same duck type as the SDK's ``Event``)."""

    __slots__ = ("name", "timestamp", "attributes")

    def __init__(self, name: str, timestamp: int = 0, attributes: Optional[Mapping[str, Any]] = None) -> None:
        self.name = name
        self.timestamp = timestamp
        self.attributes: Mapping[str, Any] = attributes or {}

    def __repr__(self) -> str:
        return f"SpanEvent({self.name!r})"


# The events of a span that has none, shared by every such decoded span (read-only: nothing appends
# to a record's events). Replay holds many records at once; an empty list each is one more object
# per span for the garbage collector to scan.
NO_EVENTS: List[SpanEvent] = ()  # type: ignore[assignment]  # an empty tuple: read-only and shared


@record
class SpanRecord:
    """A finished span decoded from OTLP (a file line, a protobuf message, a receiver request).

    Ids are lowercase hex (trace 32 chars, span 16); ``parent_span_id`` is None for a root.
    ``kind`` and ``status_code`` use OTLP numbering (kind 1=INTERNAL … 5=CONSUMER; status 0 UNSET,
    1 OK, 2 ERROR). Attribute values are decoded AnyValues: str, bool, int, float, bytes, list
    (arrayValue) or dict (kvlistValue). ``source`` says where it came from ("file.jsonl:12").
    """

    trace_id: str
    span_id: str
    parent_span_id: Optional[str] = None
    name: str = ""
    kind: int = 1
    start_ns: int = 0
    end_ns: int = 0
    attributes: Dict[str, Any] = field(default_factory=dict)
    status_code: int = 0
    status_message: str = ""
    events: List[SpanEvent] = field(default_factory=list)
    resource: Dict[str, Any] = field(default_factory=dict)
    scope: str = ""
    source: Optional[str] = None

    def __post_init__(self) -> None:
        # Decoders give an empty parent id for a root, and None for an absent map or list.
        if not self.parent_span_id:
            self.parent_span_id = None
        if self.attributes is None:
            self.attributes = {}
        if not self.events:
            self.events = []
        if self.resource is None:
            self.resource = {}

    def __repr__(self) -> str:
        return f"SpanRecord({self.name!r}, trace={self.trace_id[:8]}…, span={self.span_id})"
