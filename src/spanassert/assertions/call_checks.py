"""Checks on each call's own content: status, duration, arguments against a JSON Schema.

Each is a safety rule: it fails at the offending call as soon as the content it reads is known. The
engine hands a call's content (arguments included) to assertions when its span ends, live and in
replay alike, so that both see the same thing at the same point. It also holds the small helpers the
other recorded-trace families share: how a call is named in a message (:func:`call_ref`), what
counts as an errored call (:func:`call_errored`), the per-episode state of an every-call rule
(:class:`EveryCallState`) and its close verdict, and the one check of recorded content against a
JSON Schema (:func:`schema_failure`).
"""
from __future__ import annotations

import math
from typing import Any, Dict, Final, Optional

from ..core.durations import DURATION_PATTERN, format_seconds, parse_duration
from ..core.model import CONTENT_OK, STATUS_ERROR, STATUS_UNKNOWN, EpisodeView, Failure, Outcome, ToolCall
from ..core.native import mypyc_attr
from .base import (  # call_ref is re-exported
    EVIDENCE_ARGUMENTS,
    NEED_ARGUMENTS,
    NEED_DURATION,
    NEED_STATUS,
    Assertion,
    BuildContext,
    Field,
    call_ref,
)
from .registry import register
from .schema_util import schema_is_vacuous, schema_names_arguments, validation_messages
from .selectors import CallSelector, tool_fields, tool_selector

# -- shared helpers --------------------------------------------------------------------------------




def call_errored(call: ToolCall) -> bool:
    """A call ended in error when its span status is ERROR or an ``error.type`` was recorded."""
    return call.status == STATUS_ERROR or bool(call.error_type)


# Why a call's status cannot be read (see core.toolcall.call_status): a rule that reads it is
# inconclusive for that call, never "no error".
UNKNOWN_STATUS: Final = "its span status code is none of OTLP's UNSET (0), OK (1), ERROR (2)"


def status_unknown(call: ToolCall) -> bool:
    """The call's status is unreadable: a status code OTLP does not define, and no error type."""
    return call.status == STATUS_UNKNOWN


def calls_of(tool: Optional[str]) -> str:
    return f"calls of `{tool}`" if tool else "tool calls"


def unfinished(episode: EpisodeView) -> str:
    """Why an episode's verdict cannot be final: its evidence is incomplete (root not seen, an
    overflow), or it closed before the agent finished."""
    if episode.incomplete:
        return "the evidence is incomplete (" + "; ".join(episode.incomplete) + ")"
    reason = episode.close_reason.value if episode.close_reason is not None else "unknown reason"
    return f"the episode closed before it finished ({reason})"


def settled(seen: str, episode: EpisodeView, so_far: Optional[str] = None) -> Outcome:
    """A safety rule that did not fail, at close: ``passed`` with what it saw, or ``inconclusive``
    ("... so far, but ...", with ``so_far`` in place of ``seen`` when given) when the episode's
    verdict cannot be final."""
    if not episode.decidable:
        return Outcome.inconclusive(f"{so_far or seen} so far, but {unfinished(episode)}")
    return Outcome.passed(seen)


def within_bound(over: bool, seen: str, episode: EpisodeView) -> Outcome:
    """A bound (steps, calls, span time) at close: ``failed`` when it went over, else :func:`settled`."""
    return Outcome.failed(seen) if over else settled(seen, episode)


DURATION_SCHEMA: Final[Dict[str, Any]] = {
    "oneOf": [
        {"type": "number", "minimum": 0},
        {"type": "string", "pattern": DURATION_PATTERN},
    ]
}


def fail_first(state: RareFactsHolder, call: ToolCall, message: str) -> Failure:
    """The failure at ``call``; ``state`` remembers where the first one was (the close verdict
    names it)."""
    if state.first_failure is None:
        state.first_failure = call_ref(call)
    return Failure.at(call, message)


class RareFacts:
    """What a rule's state seldom holds: where it first failed, calls it could not judge (and the
    first of them, and why), calls past a cap. Made at the first such value (see
    :class:`RareFactsHolder`), so that the state of a rule that never meets one holds
    a single place for all of them (an open episode holds a state per rule it touched)."""

    __slots__ = ("first_failure", "undecided", "first_undecided", "overflow", "unknown_sinks")

    def __init__(self) -> None:
        self.first_failure: Optional[str] = None
        self.undecided = 0
        self.first_undecided: Optional[str] = None
        self.overflow = 0
        self.unknown_sinks = 0


NO_FACTS: Final = RareFacts()  # what a close reads for a state without a side record (never written)


class RareFactsHolder:
    """A rule's state that keeps its rare facts (:class:`RareFacts`) in a side record, ``more``, made
    at the first value other than a default: read and written as attributes (properties over the
    record). Each state class sets ``more`` to None in its ``__init__``."""

    __slots__ = ("more",)
    more: Optional[RareFacts]

    def _facts(self) -> RareFacts:
        """The side record, made at its first use."""
        more = self.more
        if more is None:
            more = self.more = RareFacts()
        return more

    # Where the first violation was seen.
    @property
    def first_failure(self) -> Optional[str]:
        more = self.more
        return None if more is None else more.first_failure

    @first_failure.setter
    def first_failure(self, value: Optional[str]) -> None:
        if value is not None or self.more is not None:
            self._facts().first_failure = value

    # Calls that could not be judged (their needed content was not recorded or not readable).
    @property
    def undecided(self) -> int:
        more = self.more
        return 0 if more is None else more.undecided

    @undecided.setter
    def undecided(self, value: int) -> None:
        if value != 0 or self.more is not None:
            self._facts().undecided = value

    # The first such call, and why.
    @property
    def first_undecided(self) -> Optional[str]:
        more = self.more
        return None if more is None else more.first_undecided

    @first_undecided.setter
    def first_undecided(self, value: Optional[str]) -> None:
        if value is not None or self.more is not None:
            self._facts().first_undecided = value

    # Calls or values past the rule's cap (not counted, not followed).
    @property
    def overflow(self) -> int:
        more = self.more
        return 0 if more is None else more.overflow

    @overflow.setter
    def overflow(self, value: int) -> None:
        if value != 0 or self.more is not None:
            self._facts().overflow = value

    # Sink calls whose arguments could not be searched (trace_no_flow).
    @property
    def unknown_sinks(self) -> int:
        more = self.more
        return 0 if more is None else more.unknown_sinks

    @unknown_sinks.setter
    def unknown_sinks(self, value: int) -> None:
        if value != 0 or self.more is not None:
            self._facts().unknown_sinks = value


class EveryCallState(RareFactsHolder):
    """Per-episode state of a rule that judges every selected call on its own: O(1). Its rare facts:
    first_failure, undecided (calls whose needed content was not recorded), first_undecided."""

    __slots__ = ("checked", "open")

    def __init__(self) -> None:
        self.checked = 0  # calls judged at their end
        self.open = 0  # calls started and not yet ended
        self.more = None

    def fail(self, call: ToolCall, message: str) -> Failure:
        return fail_first(self, call, message)

    def undecide(self, call: ToolCall, why: str) -> None:
        """``call`` cannot be judged, because ``why`` (e.g. "its arguments were not recorded")."""
        self.undecided += 1
        if self.first_undecided is None:
            self.first_undecided = f"`{call.name}` at {call_ref(call)}: {why}"


def schema_failure(assertion: Assertion, state: EveryCallState, call: ToolCall, validator: Any, value: Any,
                   kind: str, claim: str) -> Optional[Failure]:
    """The one check of a call's recorded content against a JSON Schema (``trace_args_valid``,
    ``expected: args_valid`` and ``tool_output_valid``): the failure at ``call`` when ``value`` (its
    ``kind``, arguments or result) is invalid, naming the violated keywords and their bounds, and
    the value itself only as the rule's evidence setting allows; None when it is valid."""
    problems = validation_messages(validator, value)
    if not problems:
        return None
    return state.fail(call, f"`{call.name}` {kind} at {call_ref(call)} {claim}: " + "; ".join(problems)
                      + assertion.evidence_note(value, kind))


def every_call_outcome(state: EveryCallState, episode: EpisodeView, subject: str, what: str) -> Outcome:
    """The close verdict of every per-call check ("every call of X must P"), one rule for all of
    them (``trace_args_valid``, ``trace_tool_result``, ``trace_tool_status``, ``trace_tool_duration``,
    ``expected: args_valid`` and ``tool_output_valid``):

    - ``failed`` when some call broke it;
    - ``inconclusive`` when a call had not ended, or could not be judged, or the episode closed
      before it finished (a later call could have broken it);
    - ``not_applicable`` when the episode, complete, has no call to judge: the rule's condition
      ("a call of X") never occurred, as for a conditional rule whose trigger never fired (Assay
      reports such a check "not exercised"; only ``passed`` is a pass);
    - ``passed`` otherwise.

    ``subject`` names the calls ("calls of `x`"), ``what`` the property ("ended without error").
    """
    facts = state.more or NO_FACTS  # its rare fields, read at once
    if facts.first_failure is not None:
        return Outcome.failed(f"not all {subject} {what}: first violation at {facts.first_failure}")
    if state.open:
        return Outcome.inconclusive(f"{state.open} of the {subject} had not ended when the episode closed")
    if facts.undecided:
        first = f"; first: {facts.first_undecided}" if facts.first_undecided else ""
        return Outcome.inconclusive(f"{facts.undecided} of the {subject} could not be judged ({what}){first}")
    if not episode.decidable:
        return Outcome.inconclusive(f"no violation in {state.checked} {subject} seen, but {unfinished(episode)}")
    if not state.checked:
        return Outcome.not_applicable(f"no {subject} in this episode, so none to judge")
    return Outcome.passed(f"all {state.checked} {subject} {what}")


@mypyc_attr(allow_interpreted_subclasses=True)  # subclassed by code that is not compiled (see core.native)
class EveryCallAssertion(Assertion):
    """Base of the rules that judge every selected call on its own ("every call of X must P"):
    ``trace_tool_status``, ``trace_tool_duration``, ``trace_args_valid``, ``trace_tool_result`` and
    ``expected:`` ``args_valid`` / ``tool_output_valid``. The state is an :class:`EveryCallState`; a
    call is open from its start to its end; the close verdict is :func:`every_call_outcome` over
    :meth:`calls_subject` and ``what``."""

    tool: Optional[str] = None  # the tool whose calls are judged (None: every call)
    what = ""  # the property every judged call must have, for the close message

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        self.order_free = True  # a failure at a call depends on that call alone (serve checks it on arrival)
        self.untouched_close_shared = True  # closing it untouched reads only the close (see Assertion)

    def new_state(self) -> EveryCallState:
        return EveryCallState()

    def on_call_start(self, state: EveryCallState, call: ToolCall) -> Optional[Failure]:
        state.open += 1
        return None

    def calls_subject(self) -> str:
        return calls_of(self.tool)

    def on_close(self, state: EveryCallState, episode: EpisodeView) -> Outcome:
        return every_call_outcome(state, episode, self.calls_subject(), self.what)


# -- trace_tool_status -----------------------------------------------------------------------------


class ToolStatusAssertion(EveryCallAssertion):
    type_name = "trace_tool_status"
    what = "ended without error"
    doc = (
        "Every call of `tool` (or every tool call) must end without error: its span status is not "
        "ERROR and no `error.type` was recorded. A safety rule: it fails at the offending call, when "
        "its span ends. Inconclusive when a call had not ended by the time the episode closed, or when "
        "the episode closed before it finished (evicted, timed out, shut down). Not applicable to an "
        "episode with no call to judge."
    )
    fields = {
        **tool_fields("Only calls of this tool (exact name).", required=False),
        "must_succeed": Field(
            {"const": True}, default=True, doc="Must be `true`: every selected call must end without error."
        ),
    }

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        selector = tool_selector(values, ctx, required=False)
        self.tool = selector.name_label if selector is not None else None
        self.select_calls(selector)
        self.needs = frozenset((NEED_STATUS,))

    def on_call_end(self, state: EveryCallState, call: ToolCall) -> Optional[Failure]:
        state.open = max(0, state.open - 1)  # an end whose start was not seen must not go negative
        if status_unknown(call):
            state.undecide(call, UNKNOWN_STATUS)
            return None
        state.checked += 1
        if not call_errored(call):
            return None
        kind = f" ({call.error_type})" if call.error_type else ""
        return state.fail(call, f"`{call.name}` ended in error{kind} at {call_ref(call)}; it must succeed")


register(ToolStatusAssertion)


# -- trace_tool_duration ---------------------------------------------------------------------------


class ToolDurationAssertion(EveryCallAssertion):
    type_name = "trace_tool_duration"
    doc = (
        "Every call of `tool` (or every tool call) must take at most `max` (seconds, or a string "
        "such as \"500ms\", \"2s\", \"1m\"), measured from span start to span end. A safety rule: it "
        "fails at the offending call when its span ends. Inconclusive when a call had not ended by the "
        "time the episode closed (its duration is unknown), or when the episode closed before it "
        "finished. Not applicable to an episode with no call to judge."
    )
    fields = {
        **tool_fields("Only calls of this tool (exact name).", required=False),
        "max": Field(
            DURATION_SCHEMA,
            required=True,
            doc="Longest allowed call: seconds as a number, or a number with a unit (ns, us, ms, s, m, h).",
        ),
    }

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        selector = tool_selector(values, ctx, required=False)
        self.tool = selector.name_label if selector is not None else None
        self.select_calls(selector)
        self.needs = frozenset((NEED_DURATION,))
        self.max_s = math.inf
        try:
            self.max_s = parse_duration(values.get("max", math.inf))
        except ValueError as exc:
            ctx.error("E_CFG_DURATION", str(exc), field="max", hint="e.g. `max: 2.5` or `max: \"500ms\"`")
        self.what = f"took at most {format_seconds(self.max_s)}"

    def ineffective_reason(self) -> Optional[str]:
        if math.isinf(self.max_s):
            return "`max` is infinite, so no call can take longer than it"
        return None

    def on_call_end(self, state: EveryCallState, call: ToolCall) -> Optional[Failure]:
        state.open = max(0, state.open - 1)  # an end whose start was not seen must not go negative
        took = call.duration_s
        if took is None:
            if call.end_ns is not None:  # ended before it started: its length is unknown
                state.undecide(call, "its span ends before it starts (the clock stepped back?)")
            else:
                state.undecided += 1
            return None
        state.checked += 1
        if took <= self.max_s:
            return None
        return state.fail(
            call,
            f"`{call.name}` took {format_seconds(took)} at {call_ref(call)}; max {format_seconds(self.max_s)}",
        )


register(ToolDurationAssertion)


# -- trace_args_valid ------------------------------------------------------------------------------


class ArgsValidAssertion(EveryCallAssertion):
    type_name = "trace_args_valid"
    tool_required = True
    what = "had arguments valid under the schema"
    doc = (
        "Every recorded call of `tool` must have arguments valid under the JSON Schema `schema`. A "
        "safety rule: it fails at the offending call as soon as its arguments are known (at span "
        "start when the instrumentation records them then, else at span end); the message lists the "
        "violated keywords and their bounds, not the values. Arguments recorded as a bare value (not "
        "an object) are bound to the tool's single parameter when its definition was recorded "
        "(`gen_ai.tool.definitions`, OpenInference `llm.tools` / `tool.json_schema`). Inconclusive when "
        "a call's arguments were not recorded, could not be parsed (e.g. truncated), or were a bare "
        "value that could not be bound while the schema names arguments; when a call had not ended by "
        "close; or when the episode closed before it finished. Not applicable to an episode with no "
        "call of `tool`. A schema that accepts everything is refused."
    )
    fields = {
        **tool_fields("Exact name of the tool whose calls are checked.", required=True),
        "schema": Field(
            {"type": ["object", "boolean"]},
            required=True,
            doc="JSON Schema (draft from `$schema`, default the latest) the arguments object must satisfy.",
        ),
    }

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        selector = tool_selector(values, ctx, required=True)
        self.tool = selector.name_label if selector is not None else ""
        self.schema: Any = values.get("schema", True)
        self.select_calls(selector or CallSelector(""))
        self.needs = frozenset((NEED_ARGUMENTS,))
        self.validator = ctx.compile_schema(self.schema, field="schema")
        # A schema on named arguments cannot judge a bare value nobody could bind to a name.
        self.names_arguments = schema_names_arguments(self.schema)

    def ineffective_reason(self) -> Optional[str]:
        if schema_is_vacuous(self.schema):
            return "`schema` accepts every value, so no arguments can violate it"
        return None

    def _check(self, state: EveryCallState, call: ToolCall) -> Optional[Failure]:
        if self.validator is None:
            return None
        return schema_failure(self, state, call, self.validator, call.arguments, EVIDENCE_ARGUMENTS,
                              "violate the schema")

    def _judgeable(self, call: ToolCall) -> bool:
        if call.arguments_state != CONTENT_OK:
            return False
        return call.arguments_named or not self.names_arguments

    def on_call_start(self, state: EveryCallState, call: ToolCall) -> Optional[Failure]:
        state.open += 1
        # With content when the arguments were on the span at its start (the engine reads them then).
        if self._judgeable(call):
            return self._check(state, call)
        return None

    def on_call_end(self, state: EveryCallState, call: ToolCall) -> Optional[Failure]:
        state.open = max(0, state.open - 1)  # an end whose start was not seen must not go negative
        if not self._judgeable(call):
            state.undecide(call, call.arguments_problem or "its arguments could not be read")
            return None
        state.checked += 1
        if call.args_at_start:
            return None  # judged at start, and the end carries the same arguments
        # Checked again: the end may carry the arguments (or newer ones). The engine reports one
        # failure per span, so a call already reported at start is not reported twice.
        return self._check(state, call)


register(ArgsValidAssertion)


__all__ = [
    "ToolStatusAssertion",
    "ToolDurationAssertion",
    "ArgsValidAssertion",
    "EveryCallAssertion",
    "EveryCallState",
    "RareFacts",
    "RareFactsHolder",
    "NO_FACTS",
    "fail_first",
    "schema_failure",
    "call_ref",
    "call_errored",
    "status_unknown",
    "UNKNOWN_STATUS",
    "DURATION_SCHEMA",
    "unfinished",
    "settled",
    "within_bound",
]
