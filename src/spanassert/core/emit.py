"""Violations out: span events, metrics and log records — one definition used by every front door.

The processor's own telemetry is declared here and only here (README lists the same table):

| instrument | kind | unit | attributes |
|---|---|---|---|
| `spanassert.violations` | counter | `{violation}` | test id, assertion type, tool, agent, severity |
| `spanassert.shadow_violations` | counter | `{violation}` | same (rules in `mode: shadow`: counted, never alerted) |
| `spanassert.episodes` | counter | `{episode}` | verdict, close reason |
| `spanassert.episodes.amended` | counter | `{episode}` | verdict, close reason (a closed episode's result replaced) |
| `spanassert.assertion.results` | observable counter | `{result}` | test id, assertion type, verdict |
| `spanassert.episodes.open` | up-down counter | `{episode}` | — |
| `spanassert.spans.unreadable` | counter | `{span}` | reason, tool |
| `spanassert.spans.late` | counter | `{span}` | — |
| `spanassert.overflows` | counter | `{event}` | kind |
| `spanassert.internal_errors` | counter | `{error}` | kind |
| `spanassert.guard.decisions` | counter | `{decision}` | decision (allowed, blocked, would_block), error, test id |
| `spanassert.evaluation.duration` | histogram | `s` | — (time spent on one episode's spans) |
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Dict, Iterable, List, Optional, Set, Tuple

from .episode import PENDING_PREFIX, Sink
from .escaping import escape_control
from .model import worst
from .results import EpisodeResult, Violation

EVENT_NAME = "gen_ai.evaluation.result"

ATTR_EVAL_NAME = "gen_ai.evaluation.name"
ATTR_EVAL_LABEL = "gen_ai.evaluation.score.label"
ATTR_EVAL_EXPLANATION = "gen_ai.evaluation.explanation"
ATTR_TEST_ID = "spanassert.test.id"
ATTR_ASSERTION_TYPE = "spanassert.assertion.type"
ATTR_ASSERTION_INDEX = "spanassert.assertion.index"
ATTR_SEVERITY = "spanassert.severity"
ATTR_VERDICT = "spanassert.verdict"
ATTR_SPAN_ID = "spanassert.span_id"
ATTR_EPISODE = "spanassert.episode.key"
ATTR_LATE = "spanassert.late"
ATTR_TOOL = "gen_ai.tool.name"
ATTR_AGENT = "gen_ai.agent.name"
ATTR_CLOSE_REASON = "spanassert.close_reason"
ATTR_REASON = "spanassert.reason"
ATTR_KIND = "spanassert.kind"
ATTR_DECISION = "spanassert.guard.decision"
LABEL_BLOCKED = "blocked"  # gen_ai.evaluation.score.label of a call a guard refused

log = logging.getLogger("spanassert")

# Metric attribute values that come from spans (tool names) are bounded, so that junk names cannot
# use up the SDK's series limit and push a real violation into its overflow series (which carries
# no test id and no severity). The exact name stays in the log record and the span event.
MAX_ATTRIBUTE_VALUE_CHARS = 128
MAX_DISTINCT_SPAN_VALUES = 64
OVERFLOW_VALUE = "_OTHER"


class BoundedValues:
    """Maps a value read from spans to a metric attribute value: itself while short and among the
    first ``limit`` distinct values (or one of ``known``, the names the rules file mentions),
    otherwise :data:`OVERFLOW_VALUE`. Long values are cut to ``max_chars`` (with a trailing ``…``)."""

    __slots__ = ("known", "seen", "limit", "max_chars")

    def __init__(self, known: Any = (), limit: int = MAX_DISTINCT_SPAN_VALUES,
                 max_chars: int = MAX_ATTRIBUTE_VALUE_CHARS) -> None:
        self.known: Set[str] = {k for k in known if isinstance(k, str) and len(k) <= max_chars}
        self.seen: Set[str] = set()
        self.limit = limit
        self.max_chars = max_chars

    def __call__(self, value: str) -> str:
        if value in self.known or value in self.seen:
            return value
        if len(value) > self.max_chars:
            value = value[: self.max_chars - 1] + "…"
            if value in self.seen:
                return value
        if len(self.seen) >= self.limit:
            return OVERFLOW_VALUE
        self.seen.add(value)  # set.add is atomic under the GIL; a race only admits one more value
        return value


def violation_event_attributes(v: Violation) -> Dict[str, Any]:
    """The attributes of the `gen_ai.evaluation.result` span event for one violation."""
    attrs: Dict[str, Any] = {
        ATTR_EVAL_NAME: v.test_id,
        ATTR_EVAL_LABEL: LABEL_BLOCKED if v.blocked else "fail",
        ATTR_EVAL_EXPLANATION: v.message,
        ATTR_TEST_ID: v.test_id,
        ATTR_ASSERTION_TYPE: v.assertion_type,
        ATTR_ASSERTION_INDEX: v.assertion_index,
        ATTR_SEVERITY: v.severity,
        ATTR_VERDICT: "failed",
        ATTR_EPISODE: v.episode_key,
    }
    if v.span_id:
        attrs[ATTR_SPAN_ID] = v.span_id
    if v.tool:
        attrs[ATTR_TOOL] = v.tool
    if v.agent:
        attrs[ATTR_AGENT] = v.agent
    if v.late:
        attrs[ATTR_LATE] = True
    return attrs


def _severity_number(severity: str) -> int:
    # OTel log SeverityNumber: WARN=13, ERROR=17, FATAL=21, INFO=9
    return {"critical": 21, "error": 17, "warning": 13, "info": 9}.get(severity, 17)


class Telemetry(Sink):
    """The engine's sink for every front door: metrics, logs and the user's callbacks.

    Span events are the front door's business (it owns the spans); everything else is here. Never
    raises: a failing callback or exporter is counted as an internal error and logged once per kind.
    """

    def __init__(
        self,
        *,
        meter_provider: Any = None,
        logger_provider: Any = None,
        on_violation: Optional[Callable[[Violation], None]] = None,
        on_episode: Optional[Callable[[EpisodeResult], None]] = None,
        known_tools: Iterable[str] = (),
    ) -> None:
        from opentelemetry import metrics

        mp = meter_provider if meter_provider is not None else metrics.get_meter_provider()
        from .. import __version__

        meter = mp.get_meter("spanassert", __version__)
        self.violations = meter.create_counter(
            "spanassert.violations", unit="{violation}", description="Assertion violations (enforced rules)")
        self.shadow_violations = meter.create_counter(
            "spanassert.shadow_violations", unit="{violation}",
            description="Violations of rules in shadow mode (counted, not alerted)")
        self.episodes = meter.create_counter(
            "spanassert.episodes", unit="{episode}", description="Closed episodes by overall verdict")
        # `spanassert.episodes` counts each episode once, with its verdict at close; a result
        # replaced later (a late span broke a rule) is counted here, with its new verdict.
        self.amended = meter.create_counter(
            "spanassert.episodes.amended", unit="{episode}",
            description="Closed episodes whose result was amended after close, by new overall verdict")
        # Per-rule coverage is counted in-process and observed on collection: one closed episode
        # yields a verdict per rule, too many for synchronous counter calls on the agent's path.
        self._result_counts: Dict[Tuple[Any, ...], int] = {}
        self._episode_attrs: Dict[Tuple[str, str], Dict[str, str]] = {}
        self.results = meter.create_observable_counter(
            "spanassert.assertion.results", callbacks=[self._observe_results], unit="{result}",
            description="Assertion verdicts over closed episodes, per rule")
        self.open = meter.create_up_down_counter(
            "spanassert.episodes.open", unit="{episode}", description="Episodes currently open")
        self.unreadable_spans = meter.create_counter(
            "spanassert.spans.unreadable", unit="{span}", description="Tool spans the mapping could not read")
        self.late_spans = meter.create_counter(
            "spanassert.spans.late", unit="{span}", description="Spans that arrived after their episode closed")
        self.overflows = meter.create_counter(
            "spanassert.overflows", unit="{event}", description="Bounded-memory overflows (evictions, drops)")
        self.internal_errors = meter.create_counter(
            "spanassert.internal_errors", unit="{error}", description="Errors inside spanassert (never raised)")
        self.guard_decisions = meter.create_counter(
            "spanassert.guard.decisions", unit="{decision}",
            description="Calls a guard decided before they ran: allowed, blocked, would_block (shadow)")
        self.duration = meter.create_histogram(
            "spanassert.evaluation.duration", unit="s",
            description="Time spent evaluating the spans of one episode, recorded when it closes")
        self._logger = None
        if logger_provider is not None:
            self._logger = logger_provider.get_logger("spanassert", __version__)
        # The user's callbacks. Read through the `on_violation` / `on_episode` properties, which
        # defer while `deferred` is a list and count whatever the callback raises, whoever calls them.
        self._on_violation = on_violation
        self._on_episode = on_episode
        self._logged_kinds: Set[str] = set()
        self._lock = threading.Lock()
        self.tool_value = BoundedValues(known_tools)
        # Agent names come from spans too: bounded the same way (the first 64 distinct, then _OTHER).
        self.agent_value = BoundedValues()
        # When a list, log records and user callbacks are appended here instead of run: the live
        # processor runs them after it releases the engine lock (see ``run_deferred``).
        self.deferred: Optional[List[Tuple[Callable[..., Any], Any]]] = None
        self.callback_errors = 0

    # -- Sink ---------------------------------------------------------------------------------------
    def violation(self, v: Violation) -> None:
        attrs = {ATTR_TEST_ID: v.test_id, ATTR_ASSERTION_TYPE: v.assertion_type, ATTR_SEVERITY: v.severity}
        if v.tool:
            attrs[ATTR_TOOL] = self.tool_value(v.tool)
        if v.agent:
            attrs[ATTR_AGENT] = self.agent_value(v.agent)
        if v.shadow:
            self.shadow_violations.add(1, attrs)
            return
        self.violations.add(1, attrs)
        if self.deferred is not None:
            self.deferred.append((self._notify_violation, v))
        else:
            self._notify_violation(v)

    def _notify_violation(self, v: Violation) -> None:
        self._log_violation(v)
        if self._on_violation is not None:
            self._call_user("on_violation_callback", self._on_violation, v)

    # -- the user's callbacks -----------------------------------------------------------------------
    @property
    def on_violation(self) -> Optional[Callable[[Violation], None]]:
        """The user's ``on_violation`` as a safe hook (None when there is none): calling it defers
        the call while ``deferred`` is a list and counts whatever the callback raises."""
        return None if self._on_violation is None else self._violation_hook

    @on_violation.setter
    def on_violation(self, fn: Optional[Callable[[Violation], None]]) -> None:
        self._on_violation = fn

    def _violation_hook(self, v: Violation) -> None:
        if self.deferred is not None:
            self.deferred.append((self._call_on_violation, v))
        else:
            self._call_on_violation(v)

    def _call_on_violation(self, v: Violation) -> None:
        if self._on_violation is not None:
            self._call_user("on_violation_callback", self._on_violation, v)

    @property
    def on_episode(self) -> Optional[Callable[[EpisodeResult], None]]:
        """The user's ``on_episode`` as a safe hook (see :attr:`on_violation`); amendments too."""
        return None if self._on_episode is None else self._episode_hook

    @on_episode.setter
    def on_episode(self, fn: Optional[Callable[[EpisodeResult], None]]) -> None:
        self._on_episode = fn

    def _episode_hook(self, result: EpisodeResult) -> None:
        if self.deferred is not None:
            self.deferred.append((self._notify_episode, result))
        else:
            self._notify_episode(result)

    def episode_closed(self, result: EpisodeResult) -> None:
        self.open.add(-1)
        # One pass over the results: the per-rule counts, and the enforced verdict as
        # ``EpisodeResult.verdict`` decides it (``_value_`` is what ``.value`` returns, read without
        # the enum's property).
        counts = self._result_counts
        get = counts.get
        enforced = []
        for r in result.results:
            v = r.verdict
            k = (r.test_id, r.assertion_type, v._value_)
            counts[k] = get(k, 0) + 1
            if not r.shadow:
                enforced.append(v)
        verdict = worst(enforced) if enforced or not result.results else result.verdict
        self.episodes.add(1, self._episode_attributes(verdict._value_, result.close_reason._value_))
        if self._on_episode is not None:
            self._episode_hook(result)

    def _episode_attributes(self, verdict: str, close_reason: str) -> Dict[str, str]:
        """The attributes of ``spanassert.episodes`` for a verdict and a close reason: one dict per
        pair (four verdicts times the close reasons), made once and never changed."""
        key = (verdict, close_reason)
        attrs = self._episode_attrs.get(key)
        if attrs is None:
            attrs = self._episode_attrs[key] = {ATTR_VERDICT: verdict, ATTR_CLOSE_REASON: close_reason}
        return attrs

    def _notify_episode(self, result: EpisodeResult) -> None:
        if self._on_episode is not None:
            self._call_user("on_episode_callback", self._on_episode, result)

    def _call_user(self, kind: str, fn: Callable[[Any], Any], arg: Any) -> None:
        """Run a user callback: whatever it raises (SystemExit included) is counted, never passed
        on, except KeyboardInterrupt on the main thread (the user pressed Ctrl-C)."""
        try:
            fn(arg)
        except KeyboardInterrupt as exc:
            self.callback_errors += 1
            self.internal_error(kind, exc)
            if threading.current_thread() is threading.main_thread():
                raise
        except BaseException as exc:  # noqa: BLE001 - a user callback must never break the agent
            self.callback_errors += 1
            self.internal_error(kind, exc)

    def run_deferred(self, items: List[Tuple[Callable[..., Any], Any]]) -> None:
        """Run what ``deferred`` collected (outside any engine lock). Never raises, except a
        KeyboardInterrupt on the main thread, re-raised once every item has run."""
        interrupted: Optional[KeyboardInterrupt] = None
        for fn, arg in items:
            try:
                fn(arg)
            except KeyboardInterrupt as exc:  # noqa: PERF203 -- each callback on its own: one failing must not stop the rest
                interrupted = exc
            except BaseException as exc:  # noqa: BLE001 -- a user callback must never break the agent
                self.internal_error("callback", exc)
        if interrupted is not None:
            raise interrupted

    def episode_amended(self, result: EpisodeResult) -> None:
        self.amended.add(1, self._episode_attributes(result.verdict._value_, result.close_reason._value_))
        if self.on_episode is not None:
            try:
                self.on_episode(result)
            except Exception as exc:  # noqa: BLE001 -- a user callback must never break the agent
                self.internal_error("on_episode_callback", exc)

    def episode_opened(self) -> None:
        self.open.add(1)

    def unreadable(self, reason: str, tool: Optional[str]) -> None:
        attrs = {ATTR_REASON: reason}
        if tool:
            attrs[ATTR_TOOL] = self.tool_value(tool)
        self.unreadable_spans.add(1, attrs)

    def overflow(self, kind: str) -> None:
        self.overflows.add(1, {ATTR_KIND: kind})

    def late_span(self) -> None:
        self.late_spans.add(1)

    def evaluated(self, seconds: float) -> None:
        self.duration.record(seconds)

    def _observe_results(self, options: Any) -> Any:
        from opentelemetry.metrics import Observation

        return [Observation(n, {ATTR_TEST_ID: t, ATTR_ASSERTION_TYPE: a, ATTR_VERDICT: v})
                for (t, a, v), n in list(self._result_counts.items())]

    def guard_decision(self, decision: str, test_id: Optional[str], error: bool) -> None:
        """Count one guard decision (``allowed``, ``blocked`` or ``would_block``)."""
        attrs: Dict[str, Any] = {ATTR_DECISION: decision, "spanassert.guard.error": error}
        if test_id is not None:
            attrs[ATTR_TEST_ID] = test_id
        self.guard_decisions.add(1, attrs)

    # -- helpers ------------------------------------------------------------------------------------
    def internal_error(self, kind: str, exc: BaseException) -> None:
        """Count an internal error; log it once per kind (never raises)."""
        try:
            self.internal_errors.add(1, {ATTR_KIND: kind})
            with self._lock:
                first = kind not in self._logged_kinds
                self._logged_kinds.add(kind)
            if first:
                log.error("spanassert internal error (%s): %r — further errors of this kind are only counted",
                          kind, exc, exc_info=exc)
        except Exception:  # noqa: BLE001 - last line of defence
            pass

    def _log_violation(self, v: Violation) -> None:
        if self._logger is None:
            level = logging.WARNING if v.severity in ("warning", "info") else logging.ERROR
            if self.on_violation is not None:
                # The caller's callback reports it (the README's quick start prints it): the log
                # record stays, at DEBUG, so an unconfigured logging setup does not print it twice.
                level = logging.DEBUG
            if not log.isEnabledFor(level):
                return  # what `log.log` would do, without building the text and the record's extra
            text = f"[{v.severity}] {v.test_id} ({v.assertion_type}): {v.message}"
            log.log(level, "spanassert violation %s", escape_control(text),
                    extra={"spanassert_violation": v.to_dict()})
            return
        text = f"[{v.severity}] {v.test_id} ({v.assertion_type}): {v.message}"
        try:
            from opentelemetry._logs import LogRecord, SeverityNumber
            from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

            ctx = None
            if v.trace_id and v.span_id and not v.span_id.startswith(PENDING_PREFIX):
                sc = SpanContext(int(v.trace_id, 16), int(v.span_id, 16), is_remote=False,
                                 trace_flags=TraceFlags(TraceFlags.SAMPLED))
                ctx = set_span_in_context(NonRecordingSpan(sc))
            self._logger.emit(LogRecord(
                context=ctx,
                severity_number=SeverityNumber(_severity_number(v.severity)),
                severity_text=v.severity.upper(),
                body=text,
                attributes=violation_event_attributes(v),
                event_name=EVENT_NAME,
            ))
        except Exception as exc:  # noqa: BLE001 -- telemetry must never break the agent
            self.internal_error("log_emit", exc)
