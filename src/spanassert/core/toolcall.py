"""A tool call's record: what a tool span said, decoded lazily.

:class:`ToolCall` holds one call's position (known when its span starts) and its content (known
when it ends); ``decode_content`` and ``bind_arguments`` turn recorded attributes into the value
rules read, and ``MISSING`` stands for data the instrumentation did not record.
"""
from __future__ import annotations

import json
import sys
from typing import Any, Callable, ClassVar, Dict, Final, List, Optional, Tuple


class _Missing:
    """The value of data the instrumentation did not record (distinct from a recorded ``null``)."""

    __slots__ = ()
    _instance: ClassVar[Optional[_Missing]] = None

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


MISSING: Final[Any] = _Missing()


# Content states of a call's arguments / result.
CONTENT_OK: Final = "ok"
CONTENT_MISSING: Final = "missing"  # not recorded (instrumentation did not capture content)
CONTENT_UNPARSABLE: Final = "unparsable"  # recorded, looked like JSON, did not parse (e.g. truncated)

STATUS_UNSET: Final = "unset"
STATUS_OK: Final = "ok"
STATUS_ERROR: Final = "error"
STATUS_UNKNOWN: Final = "unknown"  # a status code OTLP does not define (not 0, 1, 2): unreadable, never "unset"


def call_status(status_code: int, error_type: Optional[str]) -> str:
    """A call's status from its span's OTLP status code (0 UNSET, 1 OK, 2 ERROR) and the error type
    recorded on it (which makes it an error whatever the code). Any other code (3, -1: a hostile or
    broken producer) is :data:`STATUS_UNKNOWN`, which the rules that read a status cannot judge."""
    if status_code == 2 or error_type:
        return STATUS_ERROR
    if status_code == 1:
        return STATUS_OK
    return STATUS_UNSET if status_code == 0 else STATUS_UNKNOWN


# Recorded JSON is parsed by msgspec once it pays: it parses small documents five to ten times
# faster than json.loads, and importing it costs about what json.loads spends on a few thousand
# arguments. Where msgspec refuses a text (NaN, a lone surrogate, a number out of range) json.loads
# reads it as before; where both accept one they give the same value (tests/test_toolcall_decode.py),
# so the value does not depend on which one read it.
_FAST_AFTER = 4096
_fast_loads: Optional[Callable[[str], Any]] = None
_slow_decodes = 0


def _count_slow_decode() -> None:
    global _fast_loads, _slow_decodes
    _slow_decodes += 1
    if _slow_decodes >= _FAST_AFTER or "msgspec.json" in sys.modules:
        try:
            import msgspec.json
        except ImportError:  # pragma: no cover - msgspec is a core dependency
            _slow_decodes = -(1 << 62)  # never again
            return
        _fast_loads = msgspec.json.Decoder().decode


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
    if type(raw) is not str:
        if isinstance(raw, (bytes, bytearray)):
            try:
                raw = bytes(raw).decode("utf-8")
            except UnicodeDecodeError:
                return MISSING, CONTENT_UNPARSABLE
        elif isinstance(raw, tuple):
            return list(raw), CONTENT_OK
        elif not isinstance(raw, str):
            return raw, CONTENT_OK
    s = raw.strip()
    if not s:
        return raw, CONTENT_OK
    first = s[0]
    if first in "{[\"" or first in "-0123456789" or s in ("null", "true", "false"):
        fast = _fast_loads
        if fast is not None:
            try:
                return fast(s), CONTENT_OK
            except Exception:  # noqa: BLE001 - msgspec refused it: json.loads decides, as before
                pass
        else:
            _count_slow_decode()
        try:
            return json.loads(s), CONTENT_OK
        except (ValueError, RecursionError):
            if first in "{[":
                return raw, CONTENT_UNPARSABLE
            return raw, CONTENT_OK
    return raw, CONTENT_OK


# ToolCall.ambiguous bits: recorded JSON that repeats a key in an object with different values;
# a span that records the content in two sources (two conventions' keys, or a key and span events)
# that say different things.
AMBIGUOUS_ARGUMENTS = 1
AMBIGUOUS_RESULT = 2
AMBIGUOUS_ARGUMENT_SOURCES = 4
AMBIGUOUS_RESULT_SOURCES = 8
# Every bit that puts a call's arguments (result) in doubt.
ARGUMENTS_IN_DOUBT: Final = AMBIGUOUS_ARGUMENTS | AMBIGUOUS_ARGUMENT_SOURCES
RESULT_IN_DOUBT: Final = AMBIGUOUS_RESULT | AMBIGUOUS_RESULT_SOURCES


def _as_written(value: Any) -> Optional[str]:
    """A decoded value as JSON writes it (``1`` and ``1.0``, ``true`` and ``1`` differ, key order
    does not); None when it cannot be written."""
    try:
        return json.dumps(value, sort_keys=True, default=repr)
    except (TypeError, ValueError, RecursionError):
        return None


def sources_disagree(raw: Any, others: Tuple[Tuple[str, Any], ...]) -> bool:
    """Whether another source of a call's content (``others``: (source, value as recorded), see
    ``Mapper.call_end``) says something else than the first, ``raw``: it decodes to another value
    as written (:func:`_as_written`), or only one of them decodes, or neither does and their texts
    differ. Reached only when a span records the content twice, not as the same text."""
    value, state = decode_content(raw)
    written: Optional[str] = None
    for _, other in others:
        if other is raw or (type(other) is str and other == raw):
            continue
        other_value, other_state = decode_content(other)
        if other_state != state:
            return True
        if state != CONTENT_OK:
            if other != raw:
                return True
            continue
        if other_value == value and type(other_value) is type(value):
            if written is None:
                written = _as_written(value)
            if written is not None and written == _as_written(other_value):
                continue
        return True
    return False


def content_text(value: Any) -> Optional[str]:
    """A recorded value as text (a structured one as JSON), for the detectors; None when absent."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    return json.dumps(value, sort_keys=True, default=str)


def repeats_keys(text: str, value: Any) -> bool:
    """Whether the JSON ``text`` (``value``: what a parser that keeps the last of repeated keys read
    of it) repeats a key within an object with values that differ: parsers disagree on what it
    says (Python, JavaScript and Go keep the last, others the first, strict ones refuse it).

    Cheap when it does not: every key is followed by a colon, so a text with no more colons than
    the top object has keys repeats none; without ``\\u`` escapes (the only way to write a colon
    that is not one), it repeats none exactly when its colons number the decoded keys plus the
    colons in the decoded strings (a repeated pair drops its key and every colon inside it). Only
    past those, it is parsed again keeping every pair."""
    kind = type(value)
    if kind is dict:
        colons = text.count(":")
        if colons == len(value):
            return False
    elif kind is list:
        colons = text.count(":")
        if not colons:
            return False
    else:
        return False
    if "\\u" not in text and _keys_and_colons(value) == colons:
        return False
    return _differing_repeat(text)


def _keys_and_colons(value: Any) -> int:
    """Keys of every object in ``value`` plus the colons of every string in it (keys included)."""
    n = 0
    stack = [value]
    pop = stack.pop
    push = stack.append
    while stack:
        v = pop()
        kind = type(v)
        if kind is dict:
            for k, item in v.items():
                n += 1
                if type(k) is str:
                    n += k.count(":")
                push(item)
        elif kind is list:
            for item in v:
                push(item)
        elif kind is str:
            n += v.count(":")
    return n


class _Repeated(Exception):
    pass


def _no_differing_repeat(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for k, v in pairs:
        # As written, not as Python compares (true == 1, 1 == 1.0): a schema tells them apart.
        if k in out and json.dumps(out[k], sort_keys=True) != json.dumps(v, sort_keys=True):
            raise _Repeated()
        out[k] = v
    return out


def _differing_repeat(text: str) -> bool:
    """Parse ``text`` again keeping every pair: whether an object repeats a key with another value."""
    try:
        json.loads(text, object_pairs_hook=_no_differing_repeat)
    except _Repeated:
        return True
    except (ValueError, RecursionError):
        return True  # read once, not twice: not one reading
    return False


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
        "tool_plan",
        "memo",
        "ambiguous",
        "_args_others",
        "_result_others",
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
        # What the rules of its episode's plan do with a call of this tool (the engine's ToolPlan),
        # found at the call's start and kept for its end.
        self.tool_plan: Any = None
        # Results that rules computed from this call's recorded content alone, kept for another
        # record of the same span (serve's early check, then its assembled trace: see
        # Engine.precheck). None (the default, live and replay): nothing is kept.
        self.memo: Optional[Dict[Any, Any]] = None
        # AMBIGUOUS_ARGUMENTS / AMBIGUOUS_RESULT: that content, as decoded, repeats a key with
        # different values (repeats_keys): rules judge the last value; a pass on it is no pass.
        # AMBIGUOUS_ARGUMENT_SOURCES / AMBIGUOUS_RESULT_SOURCES: the span recorded that content
        # in another source too (``_args_others``, ``_result_others``: see ``Mapper.call_end``),
        # which says something else (sources_disagree): rules judge the first source.
        self.ambiguous = 0
        self._args_others: Optional[Tuple[Tuple[str, Any], ...]] = None
        self._result_others: Optional[Tuple[Tuple[str, Any], ...]] = None

    def finish(
        self,
        end_ns: int,
        status: str = STATUS_UNSET,
        error_type: Optional[str] = None,
        arguments_raw: Any = None,
        result_raw: Any = None,
        arguments_other: Optional[Tuple[Tuple[str, Any], ...]] = None,
        result_other: Optional[Tuple[Tuple[str, Any], ...]] = None,
    ) -> None:
        """Record the content known at span end. Arguments seen at start are kept unless the end
        carries them too. ``arguments_other`` / ``result_other``: what other sources of the span
        say of them (:meth:`set_others`)."""
        self.end_ns = end_ns
        self.status = status
        self.error_type = error_type
        if arguments_raw is not None:
            if not (self.args_at_start and (arguments_raw is self._args_raw or arguments_raw == self._args_raw)):
                self._args_raw = arguments_raw
                self._args_state = None
                self.args_at_start = False
            if arguments_other is not None or self._args_others is not None:
                self.set_others(AMBIGUOUS_ARGUMENT_SOURCES, arguments_other)
        self._result_raw = result_raw
        self._result_state = None
        self.result_truncated = False
        if result_other is not None or self._result_others is not None:
            self.set_others(AMBIGUOUS_RESULT_SOURCES, result_other)
        self.ended = True

    def set_others(self, bit: int, others: Optional[Tuple[Tuple[str, Any], ...]]) -> None:
        """What the span's other sources of its arguments (``bit``: AMBIGUOUS_ARGUMENT_SOURCES) or
        result (AMBIGUOUS_RESULT_SOURCES) say; ``bit`` of ``ambiguous`` is set when one says
        something else than the content judged (:func:`sources_disagree`), cleared otherwise."""
        if bit == AMBIGUOUS_ARGUMENT_SOURCES:
            self._args_others = others
            raw = self._args_raw
        else:
            self._result_others = others
            raw = self._result_raw
        if others is not None and sources_disagree(raw, others):
            self.ambiguous |= bit
        elif self.ambiguous & bit:
            self.ambiguous &= ~bit

    def other_texts(self, bit: int) -> Tuple[Tuple[str, str], ...]:
        """(source, text) of what the other sources of the arguments (``bit``: any bit of
        ARGUMENTS_IN_DOUBT) or result say, as text: what the detectors scan too."""
        others = self._args_others if bit & ARGUMENTS_IN_DOUBT else self._result_others
        if not others:
            return ()
        out = []
        for source, value in others:
            text = content_text(value)
            if text is not None:
                out.append((source, text))
        return tuple(out)

    # -- content, decoded on demand -------------------------------------------------------------
    def _decode_arguments(self) -> None:
        raw = self._args_raw
        fast = _fast_loads
        if fast is not None and type(raw) is str and raw[:1] == "{":
            # An object, the common case: what decode_content gives a text msgspec reads as it is
            # (it reads the text strip() leaves, with msgspec first: JSON's whitespace is some of
            # what strip() removes).
            try:
                value = fast(raw)
            except Exception:  # noqa: BLE001 - msgspec refused it: decode_content decides
                pass
            else:
                if type(value) is dict:
                    self._args, self._args_state, self._args_bound = value, CONTENT_OK, False
                    # At most one colon per key: no key repeated (the common case, one count).
                    if raw.count(":") != len(value) and repeats_keys(raw, value):
                        self.ambiguous |= AMBIGUOUS_ARGUMENTS
                    elif self.ambiguous:
                        self.ambiguous &= ~AMBIGUOUS_ARGUMENTS
                    return
        value, state = decode_content(raw)
        self._note_repeats(AMBIGUOUS_ARGUMENTS, raw, value if state == CONTENT_OK else None)
        bound = None
        if state == CONTENT_OK and not isinstance(value, dict):
            bound = bind_arguments(value, self.params)
        self._args_bound = bound is not None
        self._args, self._args_state = (bound if bound is not None else value), state

    def _note_repeats(self, bit: int, raw: Any, value: Any) -> None:
        """Set ``bit`` of ``ambiguous`` when the recorded text ``raw`` read as ``value`` repeats a key
        with different values (:func:`repeats_keys`), clear it otherwise."""
        if type(raw) is not str:
            raw = bytes(raw).decode("utf-8", "replace") if isinstance(raw, (bytes, bytearray)) else None
        if raw is not None and value is not None and repeats_keys(raw, value):
            self.ambiguous |= bit
        elif self.ambiguous & bit:
            self.ambiguous &= ~bit

    def _decode_result(self) -> None:
        raw = self._result_raw
        value, state = decode_content(raw)
        self._result, self._result_state = value, state
        if type(raw) is str:
            if state != CONTENT_OK:
                pass
            elif type(value) is dict:
                if raw.count(":") == len(value):  # at most one colon per key: none repeated (one count)
                    value = None
            elif type(value) is not list or ":" not in raw:
                value = None
        elif not isinstance(raw, (bytes, bytearray)):
            value = None
        if value is not None or self.ambiguous:
            self._note_repeats(AMBIGUOUS_RESULT, raw, value if state == CONTENT_OK else None)

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
    def arguments_decoded(self) -> bool:
        """Whether the recorded arguments were decoded already (nothing decodes them here)."""
        return self._args_state is not None

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
    def arguments_text(self) -> Optional[str]:
        """The arguments as recorded when they were recorded as text (JSON or not), else None."""
        raw = self._args_raw
        return raw if type(raw) is str else None

    @property
    def result(self) -> Any:
        if self._result_state is None:
            self._decode_result()
        return self._result if self._result_state == CONTENT_OK else MISSING

    @property
    def result_state(self) -> str:
        if self._result_state is None:
            self._decode_result()
        return self._result_state  # type: ignore[return-value]  # decoded just above: a state, never None

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
        """Seconds from start to end; None while the call has not ended, and when its end lies
        before its start (the clock stepped back during the call, or hostile times): its length
        is then unknown, not negative (a negative length would pass any cap)."""
        end = self.end_ns
        if end is None or end < self.start_ns:
            return None
        return (end - self.start_ns) / 1e9

    def __repr__(self) -> str:
        return f"ToolCall({self.name!r}, index={self.index}, span_id={self.span_id!r})"
