"""The live front door: an OpenTelemetry ``SpanProcessor`` that checks tool calls as they happen.

```python
provider.add_span_processor(
    AssertionSpanProcessor(load_config("rules.yaml"), export=BatchSpanProcessor(OTLPSpanExporter())))
```

Contract (the same as the SDK's own processors): it never raises into the application, every span
handed to ``on_end`` reaches the wrapped processor(s) exactly once (a copy carrying violation events
where the span violated a rule), ``force_flush`` returns a bool within its deadline and propagates,
``shutdown`` is idempotent and decides open episodes, and it keeps working after ``os.fork``.
"""
from __future__ import annotations

import collections
import os
import threading
import time
import weakref
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple, Union

from opentelemetry.sdk._configuration import _OTelSDKConfigurator
from opentelemetry.sdk.trace import Event, ReadableSpan, Span, SpanProcessor
from opentelemetry.trace import StatusCode

from ..config.model import Config
from ..core.emit import EVENT_NAME, Telemetry, violation_event_attributes
from ..core.engine import Engine, SpanOutcome
from ..core.model import CloseReason
from ..core.results import EpisodeResult, Violation
from ..mapping import ROLE_OTHER, ROLE_TOOL
from ..mapping.mapper import surely_other

PathOrConfig = Union[Config, str, "os.PathLike[str]"]

_EMPTY: Mapping[str, Any] = {}
# Background mode: how long the worker lets spans gather after the agent's thread wakes it.
_GATHER_S = 0.005
_UNSET = StatusCode.UNSET
_ERROR = StatusCode.ERROR


def _never(name: str, attributes: Mapping[str, Any]) -> bool:
    return False


def _attrs(span: Any) -> Mapping[str, Any]:
    # The SDK's own attribute mapping, without the read-only proxy `ReadableSpan.attributes` builds.
    a = getattr(span, "_attributes", None)
    if a is None:
        return _EMPTY
    return a


class _LiveSink(Telemetry):
    """Telemetry plus what only the live door needs: which traces to route to the engine, and the
    violations of the call in progress."""

    def __init__(self, tracked: Set[int], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tracked = tracked
        self.current: Optional[List[Violation]] = None

    def trace_tracked(self, trace_id: str) -> None:
        self.tracked.add(int(trace_id, 16))

    def trace_released(self, trace_id: str) -> None:
        self.tracked.discard(int(trace_id, 16))

    def violation(self, v: Violation) -> None:
        super().violation(v)
        if self.current is not None:
            self.current.append(v)


class AssertionSpanProcessor(SpanProcessor):
    """Checks a rules file against the spans of this process, live.

    Args:
        config: a loaded :class:`Config`, or a path to a rules file.
        export: the processor(s) that export spans (e.g. ``BatchSpanProcessor(exporter)``). Every
            span goes on to them; offending spans go as a copy carrying ``gen_ai.evaluation.result``
            events. Without it, events go on the still-open offending span or episode root.
        meter_provider / logger_provider: where metrics and log records go (global meter provider
            by default; Python ``logging`` when no logger provider is given).
        on_violation: called with each :class:`Violation` of an enforced rule (never raises into
            the app: a failing callback is counted).
        on_episode: called with each closed episode's :class:`EpisodeResult`.
        tick_interval: seconds between idle-timeout checks (a daemon thread).
        background: evaluate on a worker thread, as ``BatchSpanProcessor`` exports on one. The
            default when there is an ``export`` (without one there is nothing to hand spans to, and
            every check runs on the agent's thread). The agent's thread then only queues GenAI
            spans; the worker runs the same engine in the same order (so the same verdicts) and
            hands each span, annotated, to the wrapped processors. A call of a tool that a rule
            forbids by name (``trace_must_not_call_tool`` without ``args_match``,
            ``tool_blocklist``) is still evaluated on the agent's thread, before ``start_span``
            returns: the violation and ``on_violation`` come before the tool runs. Every other
            violation comes moments later, with its callback on the worker. ``False``: every check
            runs on the agent's thread, before the span call returns.
        max_queue_size: spans the background queue holds; when full, the agent's thread waits for
            room (a span is never dropped).
    """

    def __init__(
        self,
        config: PathOrConfig,
        *,
        export: Union[SpanProcessor, Sequence[SpanProcessor], None] = None,
        meter_provider: Any = None,
        logger_provider: Any = None,
        on_violation: Optional[Callable[[Violation], None]] = None,
        on_episode: Optional[Callable[[EpisodeResult], None]] = None,
        tick_interval: float = 1.0,
        background: Optional[bool] = None,
        max_queue_size: int = 65_536,
    ) -> None:
        if not isinstance(config, Config):
            from ..config import load_config

            config = load_config(config)
        self.config = config
        if export is None:
            self._export: List[SpanProcessor] = []
        elif isinstance(export, SpanProcessor):
            self._export = [export]
        else:
            self._export = list(export)
        self._tracked: Set[int] = set()
        self._last_trace: Tuple[int, str] = (-1, "")
        self._telemetry_args = dict(meter_provider=meter_provider, logger_provider=logger_provider,
                                    on_violation=on_violation, on_episode=on_episode)
        self._sink = _LiveSink(self._tracked, **self._telemetry_args)
        self.engine = Engine(config, self._sink)
        self._role = self.engine.mapper.role
        self._surely_other = _never if self.engine.mapper.has_rules else surely_other
        self._marked_role = self.engine.mapper.marked_role
        self._alert_tools = self.engine.start_alert_tools
        self._lock = threading.RLock()
        # Without a wrapped exporter, violations go on live spans: the open episode roots and the
        # local trace roots (span id -> Span), and violations already written on their span.
        self._live_roots: Dict[int, Span] = {}
        self._written: Set[int] = set()
        self._tick_interval = tick_interval
        self._ends = 0
        self._stop = threading.Event()
        self._shutdown = False
        self._thread: Optional[threading.Thread] = None
        self._start_ticker()
        # Background evaluation: (is_start, span) in the order the SDK called us. `_pending` holds the
        # traces of queued GenAI starts until the engine follows them, so that their other spans are
        # queued too (the worker adds a trace to `_tracked` before it leaves `_pending`).
        self._background = bool(self._export) if background is None else bool(background and self._export)
        self._max_queue = max(1, int(max_queue_size))
        self._queue: "collections.deque[Tuple[bool, Any]]" = collections.deque()
        self._pending: Set[int] = set()
        self._wake = threading.Event()
        self._idle = False
        self._draining = 0
        self._busy = False
        self._worker: Optional[threading.Thread] = None
        if self._background:
            self._start_worker()
        if hasattr(os, "register_at_fork"):
            ref = weakref.ref(self)
            os.register_at_fork(after_in_child=lambda: (ref() and ref()._after_fork()))  # type: ignore[union-attr]

    # -- SpanProcessor ------------------------------------------------------------------------------
    def on_start(self, span: Span, parent_context: Any = None) -> None:
        try:
            # The SDK span's own fields, read directly: this runs for every span the app creates.
            ctx = span._context
            attrs = span._attributes
            if attrs is None:
                attrs = _EMPTY
            name = span._name
            role = ROLE_OTHER if self._surely_other(name, attrs) else self._marked_role(name, attrs)
            tid = ctx.trace_id
            if role == ROLE_OTHER and tid not in self._tracked:
                if self._background and tid in self._pending:
                    self._enqueue(True, span)
                    return
                if not self._export:
                    parent = span.parent
                    if parent is None or parent.is_remote:
                        self._live_roots[ctx.span_id] = span
                return
            if self._background:
                alert = self._alert_tools
                if role == ROLE_TOOL and (alert is None or (
                        alert and self.engine.mapper.tool_name(span._name, attrs) in alert)):
                    self._start_now(span, role)
                    return
                if role != ROLE_OTHER:
                    self._pending.add(tid)
                self._enqueue(True, span)
                return
            self._start_in_engine(span, role)
        except Exception as exc:  # noqa: BLE001 - never raise into the application
            self._sink.internal_error("on_start", exc)

    def _start_now(self, span: Span, role: int) -> None:
        """Background mode, a tool a rule forbids by name: evaluate this start on the agent's thread,
        before the tool runs, after everything queued before it (so the engine sees the same order
        and the violation is the same one, call number included)."""
        with self._lock:  # the worker holds it while it runs an item: no item is half-done here
            q = self._queue
            while q:
                self._run_queued(*q.popleft())
            self._start_in_engine(span, role)

    def _start_in_engine(self, span: Span, role: Optional[int] = None) -> None:
        ctx = span._context
        attrs = span._attributes
        if attrs is None:
            attrs = _EMPTY
        tid = ctx.trace_id
        if role is None:  # queued: read the span as it is now
            role = self._role(span._name, attrs)
        parent = span._parent
        with self._lock:
            # Only without a wrapped exporter are start-time violations written on the span here
            # (with one, they travel on the exported copy); no list is allocated otherwise.
            current: Optional[List[Violation]] = None if self._export else []
            self._sink.current = current
            try:
                self.engine.start_span(
                    self._trace_hex(tid), format(ctx.span_id, "016x"),
                    format(parent.span_id, "016x") if parent is not None else None,
                    span._name, attrs, span._start_time or time.time_ns(),
                    _attrs(span._resource), role,
                )
            finally:
                self._sink.current = None
            if current is not None:
                if role != ROLE_OTHER and (parent is None or parent.is_remote or
                                           self.engine.by_trace.get(self._trace_hex(tid)) is not None):
                    self._live_roots[ctx.span_id] = span
                for v in current:
                    if not v.shadow:
                        # The offending span is still open: the event goes right on it.
                        span.add_event(EVENT_NAME, violation_event_attributes(v))
                        self._written.add(id(v))

    def on_end(self, span: ReadableSpan) -> None:
        out: Optional[SpanOutcome] = None
        try:
            # Fast path, inline: a span of a trace we do not follow that is no GenAI span.
            attrs = span._attributes
            tid = span._context.trace_id
            if attrs is None:
                attrs = _EMPTY
            name = span._name
            if (tid in self._tracked or not self._export
                    or (not self._surely_other(name, attrs) and self._marked_role(name, attrs) != ROLE_OTHER)
                    or (self._background and tid in self._pending)):
                if self._background:
                    self._enqueue(False, span)
                    return
                out = self._evaluate_end(span)
        except Exception as exc:  # noqa: BLE001
            self._sink.internal_error("on_end", exc)
        self._forward(span, out)

    def _forward(self, span: ReadableSpan, out: Optional[SpanOutcome]) -> None:
        to_send: ReadableSpan = span
        if out is not None:
            try:
                to_send = self._deliver(span, out)
            except Exception as exc:  # noqa: BLE001
                self._sink.internal_error("annotate", exc)
                to_send = span
        for p in self._export:
            try:
                p.on_end(to_send)
            except Exception as exc:  # noqa: BLE001 - a failing exporter must not stop the others
                self._sink.internal_error("export", exc)

    def _evaluate_end(self, span: ReadableSpan) -> Optional[SpanOutcome]:
        ctx = span._context
        tid = ctx.trace_id
        if not self._export and ctx.span_id in self._live_roots:
            del self._live_roots[ctx.span_id]
        attrs = span._attributes
        if attrs is None:
            attrs = _EMPTY
        if tid not in self._tracked:
            role = self._role(span._name, attrs)
            if role == ROLE_OTHER:
                return None
            # Recognised only now (its markers were set after start): position it at its end.
            with self._lock:
                return self._engine_end(span, ctx, attrs, role, start_first=True)
        with self._lock:
            return self._engine_end(span, ctx, attrs, None, start_first=False)

    def _engine_end(self, span: ReadableSpan, ctx: Any, attrs: Mapping[str, Any], role: Optional[int],
                    start_first: bool) -> Optional[SpanOutcome]:
        # The SDK span's own fields, read directly (its properties copy events and look up enum
        # values: measurable on a path every GenAI span takes).
        parent = span._parent
        tid = self._trace_hex(ctx.trace_id)
        sid = format(ctx.span_id, "016x")
        pid = format(parent.span_id, "016x") if parent is not None else None
        start = span._start_time or 0
        end = span._end_time or start
        name = span._name
        engine = self.engine
        if start_first:
            engine.start_span(tid, sid, pid, name, attrs, start, _attrs(span._resource), role)
        # SDK StatusCode UNSET/OK/ERROR is the OTLP numbering 0/1/2.
        status = span._status
        code = status._status_code if status is not None else _UNSET
        events = span._events
        out = engine.end_span(
            tid, sid, pid, name, attrs, start, end,
            0 if code is _UNSET else (2 if code is _ERROR else 1), events if events else (),
            parent is None or parent.is_remote,
        )
        self._ends += 1
        if not self._ends & 63:  # the idle check between ticker runs, every 64 span ends
            now = time.time_ns()
            if engine.open and next(iter(engine.open.values())).last_ns + engine.idle_ns <= now:
                self._deliver_closed(engine.tick(now))
        return out

    def _trace_hex(self, trace_id: int) -> str:
        # A trace's spans come together: one formatting per run of spans of the same trace.
        last = self._last_trace
        if last[0] == trace_id:
            return last[1]
        text = format(trace_id, "032x")
        self._last_trace = (trace_id, text)
        return text

    def _deliver(self, span: ReadableSpan, out: SpanOutcome) -> ReadableSpan:
        events = [v for v in out.violations if not v.shadow and id(v) not in self._written]
        for v in out.violations:
            self._written.discard(id(v))
        if not events:
            return span
        if not self._export:
            self._write_on_live_root(span, events)
            return span
        when = span.end_time or time.time_ns()
        added = [Event(EVENT_NAME, violation_event_attributes(v), when) for v in events]
        return ReadableSpan(
            name=span.name,
            context=span.get_span_context(),
            parent=span.parent,
            resource=span.resource,
            attributes=_attrs(span),
            events=tuple(span.events) + tuple(added),
            links=span.links,
            kind=span.kind,
            status=span.status,
            start_time=span.start_time,
            end_time=span.end_time,
            instrumentation_info=getattr(span, "_instrumentation_info", None),
            instrumentation_scope=span.instrumentation_scope,
        )

    def _write_on_live_root(self, span: ReadableSpan, violations: List[Violation]) -> None:
        """No wrapped exporter, and the offending span has ended: use the episode's root if it is
        still open (log records carry the violation in every case)."""
        ep = self.engine.by_trace.get(self._trace_hex(span.get_span_context().trace_id))
        target: Optional[Span] = None
        if ep is not None and ep.view.root_span_id:
            target = self._live_roots.get(int(ep.view.root_span_id, 16))
        if target is None:
            tid = span.get_span_context().trace_id
            for s in list(self._live_roots.values()):
                c = s.get_span_context()
                if c.trace_id == tid and (s.parent is None or s.parent.is_remote):
                    target = s
                    break
        if target is None or not target.is_recording():
            return
        for v in violations:
            target.add_event(EVENT_NAME, violation_event_attributes(v))

    def _deliver_closed(self, results: List[EpisodeResult]) -> None:
        if self._export or not results:
            return
        for r in results:
            if r.root_span_id:
                target = self._live_roots.get(int(r.root_span_id, 16))
                if target is not None and target.is_recording():
                    for res in r.results:
                        if res.verdict.value == "failed" and not res.shadow:
                            target.add_event(EVENT_NAME, {
                                "gen_ai.evaluation.name": res.test_id,
                                "gen_ai.evaluation.score.label": "fail",
                                "gen_ai.evaluation.explanation": res.message,
                                "spanassert.assertion.type": res.assertion_type,
                                "spanassert.severity": res.severity,
                                "spanassert.verdict": "failed",
                            })

    # -- background evaluation -------------------------------------------------------------------------
    def _enqueue(self, is_start: bool, span: Any) -> None:
        # deque.append is atomic: the agent's thread takes no lock here, and wakes the worker only
        # when it sleeps (once per batch: the worker gathers one before it runs, see _GATHER_S).
        q = self._queue
        while len(q) >= self._max_queue and self._worker is not None and self._worker.is_alive():
            time.sleep(0.001)  # full: wait for room rather than drop a span
        q.append((is_start, span))
        if self._idle:
            self._idle = False
            self._wake.set()

    def _start_worker(self) -> None:
        ref = weakref.ref(self)
        q = self._queue
        wake = self._wake
        stop = self._stop

        def loop() -> None:
            while True:
                me = ref()
                if me is None:
                    return
                me._busy = True  # before the pop: `_drain` must never see an empty queue mid-item
                # Under the engine lock from pop to done: a forbidden tool's start, evaluated on the
                # agent's thread, first runs what is queued, and must find no item half-run.
                with me._lock:
                    item = q.popleft() if q else None
                    if item is not None:
                        me._run_queued(*item)
                me._busy = False
                if item is not None:
                    del me, item
                    continue
                me._idle = True
                if q:  # appended between the failed pop and the flag: no sleep
                    me._idle = False
                    continue
                if stop.is_set():
                    return
                del me
                wake.wait(0.5)
                wake.clear()
                me = ref()
                if me is None:
                    return
                me._idle = False
                if q and not me._draining and not stop.is_set():
                    # Woken by the agent's first span after a quiet spell: let a batch gather, then
                    # run it in one go. Waking per span would cost the agent's thread a wake-up
                    # (and both threads their caches) for every span.
                    del me
                    time.sleep(_GATHER_S)

        self._worker = threading.Thread(target=loop, name="spanassert-evaluate", daemon=True)
        self._worker.start()

    def _run_queued(self, is_start: bool, span: Any) -> None:
        if is_start:
            try:
                self._start_in_engine(span)
            except Exception as exc:  # noqa: BLE001
                self._sink.internal_error("on_start", exc)
            finally:
                self._pending.discard(span._context.trace_id)  # the engine follows it now, if at all
            return
        out: Optional[SpanOutcome] = None
        try:
            out = self._evaluate_end(span)
        except Exception as exc:  # noqa: BLE001
            self._sink.internal_error("on_end", exc)
        self._forward(span, out)

    def _drain(self, timeout_s: float) -> bool:
        """Wait until the worker has evaluated everything queued so far (True), or the time is up."""
        if not self._background:
            return True
        deadline = time.monotonic() + timeout_s
        self._draining += 1
        try:
            self._wake.set()
            while self._queue or self._busy:
                if time.monotonic() >= deadline or self._worker is None or not self._worker.is_alive():
                    return not self._queue and not self._busy
                time.sleep(0.001)
            return True
        finally:
            self._draining -= 1

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Decide every open episode now (liveness rules become inconclusive), then flush the wrapped
        processors within what is left of the deadline."""
        deadline = time.monotonic() + timeout_millis / 1000.0
        ok = self._drain(timeout_millis / 1000.0)
        try:
            if self._lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
                try:
                    self._deliver_closed(self.engine.close_all(CloseReason.FLUSH))
                finally:
                    self._lock.release()
            else:
                ok = False
        except Exception as exc:  # noqa: BLE001
            self._sink.internal_error("force_flush", exc)
        for p in self._export:
            left = int(max(0.0, deadline - time.monotonic()) * 1000)
            ok = self._flush_within(p, left) and ok
        return ok

    def _flush_within(self, processor: SpanProcessor, timeout_millis: int) -> bool:
        """``processor.force_flush`` bounded by our deadline: the SDK's BatchSpanProcessor ignores
        its timeout and exports on the caller's thread, so a hanging exporter would hang the app."""
        done: List[bool] = []

        def run() -> None:
            try:
                done.append(bool(processor.force_flush(timeout_millis)))
            except Exception as exc:  # noqa: BLE001
                self._sink.internal_error("force_flush", exc)
                done.append(False)

        worker = threading.Thread(target=run, name="spanassert-flush", daemon=True)
        worker.start()
        worker.join(timeout_millis / 1000.0)
        return bool(done) and done[0]

    def shutdown(self) -> None:
        if self._shutdown:
            return
        self._shutdown = True
        self._drain(30.0)
        self._stop.set()
        self._wake.set()
        try:
            with self._lock:
                self._deliver_closed(self.engine.close_all(CloseReason.SHUTDOWN))
        except Exception as exc:  # noqa: BLE001
            self._sink.internal_error("shutdown", exc)
        for p in self._export:
            try:
                p.shutdown()
            except Exception as exc:  # noqa: BLE001
                self._sink.internal_error("shutdown", exc)

    # -- idle timeouts and fork -----------------------------------------------------------------------
    def _start_ticker(self) -> None:
        if self._tick_interval <= 0:
            return
        ref = weakref.ref(self)
        stop = self._stop
        interval = self._tick_interval

        def loop() -> None:
            while not stop.wait(interval):
                me = ref()
                if me is None:
                    return
                try:
                    with me._lock:
                        me._deliver_closed(me.engine.tick(time.time_ns()))
                except Exception as exc:  # noqa: BLE001
                    me._sink.internal_error("tick", exc)
                del me

        self._thread = threading.Thread(target=loop, name="spanassert-idle", daemon=True)
        self._thread.start()

    def _after_fork(self) -> None:
        # The child starts clean, as the SDK's BatchSpanProcessor does: the parent's open episodes
        # belong to the parent.
        self._lock = threading.RLock()
        self._tracked.clear()
        self._live_roots = {}
        self._written = set()
        self._sink = _LiveSink(self._tracked, **self._telemetry_args)
        self.engine = Engine(self.config, self._sink)
        self._role = self.engine.mapper.role
        self._surely_other = _never if self.engine.mapper.has_rules else surely_other
        self._marked_role = self.engine.mapper.marked_role
        self._alert_tools = self.engine.start_alert_tools
        self._stop = threading.Event()
        self._queue = collections.deque()
        self._pending = set()
        self._wake = threading.Event()
        self._idle = False
        self._draining = 0
        self._busy = False
        if not self._shutdown:
            self._start_ticker()
            if self._background:
                self._start_worker()

    # -- introspection ----------------------------------------------------------------------------------
    @property
    def telemetry(self) -> Telemetry:
        return self._sink


ENV_CONFIG = "SPANASSERT_CONFIG"
ENV_BACKGROUND = "SPANASSERT_BACKGROUND"


class SpanAssertConfigurator(_OTelSDKConfigurator):
    """``opentelemetry_configurator`` entry point for zero-code setup.

    ``OTEL_PYTHON_CONFIGURATOR=spanassert SPANASSERT_CONFIG=rules.yaml opentelemetry-instrument …``
    configures the SDK as the default configurator does, with one :class:`AssertionSpanProcessor`
    in front of the exporters that ``OTEL_TRACES_EXPORTER`` selects (each behind its own
    ``BatchSpanProcessor``); with no exporter selected it still checks, and violations go to the
    log and onto the live episode root spans. A rules file that does not load stops the program
    before it runs (exit code 2, every problem on stderr): running unchecked would be a silent pass.
    """

    def _configure(self, **kwargs: Any) -> None:
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        path = os.environ.get(ENV_CONFIG)
        if not path:
            import logging

            logging.getLogger("spanassert").warning(
                "spanassert: %s is not set, so no rules are checked; set it to the path of a rules file",
                ENV_CONFIG)
            super()._configure(**kwargs)
            return
        config = _load_rules(path, exit_on_error="auto_instrumentation_version" in kwargs)
        holder: List[AssertionSpanProcessor] = []

        def export_span_processor(exporter: Any) -> SpanProcessor:
            batch = BatchSpanProcessor(exporter)
            if not holder:
                # Background evaluation unless SPANASSERT_BACKGROUND says no (see the class).
                background = os.environ.get(ENV_BACKGROUND, "").strip().lower() not in ("0", "false", "no")
                holder.append(AssertionSpanProcessor(config, export=[batch], background=background))
                return holder[0]
            # One engine for all exporters: later exporters join the first processor, so each
            # episode is judged once and every exporter gets the same annotated spans.
            holder[0]._export.append(batch)
            return SpanProcessor()

        kwargs.setdefault("export_span_processor", export_span_processor)
        super()._configure(**kwargs)
        if not holder:
            # OTEL_TRACES_EXPORTER=none (or a caller's own export_span_processor): check anyway.
            from opentelemetry import trace

            provider = trace.get_tracer_provider()
            add = getattr(provider, "add_span_processor", None)
            if add is not None:
                add(AssertionSpanProcessor(config))


def _load_rules(path: str, *, exit_on_error: bool) -> Config:
    """The rules file, or (from ``opentelemetry-instrument``) every problem on stderr and exit 2:
    raising there would only be logged and the program would run unchecked."""
    import sys

    from ..config import load_config, require_runnable
    from ..core.model import ConfigError

    try:
        config = load_config(path)
        require_runnable(config)
        return config
    except ConfigError as exc:
        if not exit_on_error:
            raise
        for d in exc.diagnostics:
            sys.stderr.write(d.format() + "\n")
        sys.stderr.write(f"spanassert: {ENV_CONFIG}={path}: the rules file was refused (problems listed above); "
                         f"fix it (`spanassert validate {path}` checks it alone) or unset {ENV_CONFIG}\n")
        sys.stderr.flush()
        sys.stdout.flush()
        # Python is still importing `site`: SystemExit here would end in a fatal-error traceback.
        os._exit(2)
