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
from ..mapping import ROLE_AGENT, ROLE_OTHER
from ..mapping.mapper import surely_other

PathOrConfig = Union[Config, str, "os.PathLike[str]"]

DEFAULT_MAX_QUEUE_SIZE = 65_536
DEFAULT_MAX_QUEUE_BYTES = 32 * 1024 * 1024
_SPAN_OVERHEAD_BYTES = 512  # a queued span's own objects, beyond its string attribute values
# How a span's start was taken into account (background mode), read when it ends.
_AT_START_PLACED = 0  # a call, step or folded span, positioned at its start
_AT_START_AGENT = 1  # an agent span: its end may close the episode
_AT_START_OTHER = 2  # not a GenAI span at its start
_MAX_POSITIONED = 1 << 20
_ALL = object()
_NO_BARRIER = object()

_EMPTY: Mapping[str, Any] = {}
_NOTHING: List[Any] = []  # never appended to
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

    def take_deferred(self) -> List[Any]:
        """End a section under the engine lock (begun with ``deferred = []``): the log records and
        user callbacks it produced, to run once the lock is released."""
        d = self.deferred
        self.deferred = None
        return d if d else _NOTHING

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
        on_violation: called with each :class:`Violation` of an enforced rule. Never under the
            engine lock: a violation found when a span starts is passed on the agent's thread
            before ``start_span`` returns; others on the thread that found them. Whatever it
            raises is counted (``spanassert.internal_errors``), never passed on, except
            KeyboardInterrupt on the main thread.
        on_episode: called with each closed episode's :class:`EpisodeResult` (the same way).
        tick_interval: seconds between idle-timeout checks (a daemon thread).
        background: evaluate span ends on a worker thread, as ``BatchSpanProcessor`` exports on
            one. The default when there is an ``export`` (without one there is nothing to hand
            spans to, and every check runs on the agent's thread). Span starts are positioned on
            the agent's thread in both modes, so every violation decidable from a call's name and
            the episode's order so far (a forbidden or blocklisted tool, a count that goes over, a
            deviation from an exact sequence, ``never_after``, a step cap) and every argument rule
            whose arguments are on the span at its start comes before ``start_span`` returns;
            what needs the span's end (results, status, duration, arguments recorded at the end)
            comes moments later, from the worker. ``False``: span ends are evaluated on the agent's
            thread too, before ``end`` returns.
        max_queue_size: span ends the background queue holds; when full, the agent's thread waits
            for room (a span is never dropped).
        max_queue_bytes: the same bound in bytes (the span's string attribute values, plus a fixed
            overhead per span); default 32 MiB.
        shutdown_timeout_millis: how long ``shutdown`` may take (evaluating what is queued, closing
            open episodes, running callbacks, shutting the wrapped processors down). Past it,
            queued spans are still handed on, unevaluated.
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
        max_queue_size: int = DEFAULT_MAX_QUEUE_SIZE,
        max_queue_bytes: int = DEFAULT_MAX_QUEUE_BYTES,
        shutdown_timeout_millis: int = 30_000,
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
        self._telemetry_args = dict(meter_provider=meter_provider, logger_provider=logger_provider,
                                    on_violation=on_violation, on_episode=on_episode,
                                    known_tools=_rule_tools(config))
        self._tick_interval = tick_interval
        self._shutdown_s = max(0.0, shutdown_timeout_millis / 1000.0)
        self._shutdown = False
        self._background = bool(self._export) if background is None else bool(background and self._export)
        self._max_queue = max(1, int(max_queue_size))
        self._max_bytes = max(1, int(max_queue_bytes))
        self._new_engine()
        self._new_runtime()
        if hasattr(os, "register_at_fork"):
            ref = weakref.ref(self)
            os.register_at_fork(after_in_child=lambda: (ref() and ref()._after_fork()))  # type: ignore[union-attr]

    def _new_engine(self) -> None:
        """The engine and what hangs on it (also the child's fresh start after ``os.fork``)."""
        self._tracked: Set[int] = set()
        self._last_trace: Tuple[int, str] = (-1, "")
        self._sink = _LiveSink(self._tracked, **self._telemetry_args)
        self.engine = Engine(self.config, self._sink)
        self._role = self.engine.mapper.role
        self._surely_other = _never if self.engine.mapper.has_rules else surely_other
        self._marked_role = self.engine.mapper.marked_role
        # Without a wrapped exporter, violations go on live spans: the open episode roots and the
        # local trace roots (span id -> Span), and violations already written on their span.
        self._live_roots: Dict[int, Span] = {}
        self._written: Set[int] = set()
        self._ends = 0

    def _new_runtime(self) -> None:
        """Lock, queue and threads (also after ``os.fork``: the parent's threads are not in the child)."""
        self._lock = threading.RLock()  # the engine lock: the engine is not thread-safe
        self._stop = threading.Event()
        # Background evaluation: span ends wait in `_queue` (span, bytes, barrier key) in the order
        # the SDK called us. `_cond` guards the queue and its counters; the worker waits on it.
        self._cond = threading.Condition(threading.Lock())
        self._queue: "collections.deque[Tuple[Any, int, Any]]" = collections.deque()
        self._queued_bytes = 0
        self._inflight = 0  # items taken from the queue whose span was not handed on yet
        self._waiting = 0  # threads waiting on `_cond` for room or for the queue to empty
        self._worker_idle = False
        # Span ends that change how later starts are positioned (an episode's root closing it, a
        # call recognised only at its end): per trace (or None for all traces), how many are
        # queued. A start in such a trace first runs the queue up to them.
        self._barriers: Dict[Any, int] = {}
        self._positioned: Dict[int, int] = {}  # span id -> _AT_START_* (background mode)
        self._worker_gone = False
        self._worker: Optional[threading.Thread] = None
        self._thread: Optional[threading.Thread] = None
        if self._shutdown:
            return
        self._start_ticker()
        if self._background:
            self._start_worker()

    # -- SpanProcessor ------------------------------------------------------------------------------
    def on_start(self, span: Span, parent_context: Any = None) -> None:
        items: Optional[List[Any]] = None
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
                if not self._export:
                    parent = span.parent
                    if parent is None or parent.is_remote:
                        self._live_roots[ctx.span_id] = span
                return
            items = self._start_in_engine(span, role)
        except Exception as exc:  # noqa: BLE001 - never raise into the application
            self._sink.internal_error("on_start", exc)
        if items:
            # After the engine lock is released, before start_span returns.
            self._sink.run_deferred(items)

    def _start_in_engine(self, span: Span, role: int) -> List[Any]:
        ctx = span._context
        attrs = span._attributes
        if attrs is None:
            attrs = _EMPTY
        tid = ctx.trace_id
        parent = span._parent
        with self._lock:
            self._sink.deferred = []
            if self._barriers and (self._barriers.get(tid) or self._barriers.get(None)):
                self._run_queue_until_positioned(tid)
            # Only without a wrapped exporter are start-time violations written on the span here
            # (with one, they travel on the exported copy); no list is allocated otherwise.
            current: Optional[List[Violation]] = None if self._export else []
            self._sink.current = current
            try:
                positioned = self.engine.start_span(
                    self._trace_hex(tid), format(ctx.span_id, "016x"),
                    format(parent.span_id, "016x") if parent is not None else None,
                    span._name, attrs, span._start_time or time.time_ns(),
                    _attrs(span._resource), role,
                )
            finally:
                self._sink.current = None
            if self._background:
                marks = self._positioned
                if len(marks) >= _MAX_POSITIONED:
                    marks.clear()  # spans that never ended; their ends then count as barriers (safe)
                if role == ROLE_OTHER:
                    marks[ctx.span_id] = _AT_START_OTHER
                elif positioned:
                    marks[ctx.span_id] = _AT_START_AGENT if role == ROLE_AGENT else _AT_START_PLACED
            if current is not None:
                if role != ROLE_OTHER and (parent is None or parent.is_remote or
                                           self.engine.by_trace.get(self._trace_hex(tid)) is not None):
                    self._live_roots[ctx.span_id] = span
                for v in current:
                    if not v.shadow:
                        # The offending span is still open: the event goes right on it.
                        span.add_event(EVENT_NAME, violation_event_attributes(v))
                        self._written.add(id(v))
            return self._sink.take_deferred()

    def on_end(self, span: ReadableSpan) -> None:
        out: Optional[SpanOutcome] = None
        items: Optional[List[Any]] = None
        try:
            # Fast path, inline: a span of a trace we do not follow that is no GenAI span.
            attrs = span._attributes
            tid = span._context.trace_id
            if attrs is None:
                attrs = _EMPTY
            name = span._name
            if (tid in self._tracked or not self._export
                    or (not self._surely_other(name, attrs) and self._marked_role(name, attrs) != ROLE_OTHER)):
                if self._background:
                    helped: List[Any] = []
                    queued = self._enqueue(span, tid, attrs, helped)
                    if helped:
                        self._sink.run_deferred(helped)
                    if queued:
                        return
                out, items = self._evaluate_end_locked(span)
        except Exception as exc:  # noqa: BLE001
            self._sink.internal_error("on_end", exc)
        self._forward(span, out)
        if items:
            self._sink.run_deferred(items)

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

    def _evaluate_end_locked(self, span: ReadableSpan) -> Tuple[Optional[SpanOutcome], List[Any]]:
        """Evaluate a span end inline: under the engine lock, after anything still queued."""
        with self._lock:
            self._sink.deferred = []
            if self._queue:
                self._run_queue_until_positioned(_ALL)
            try:
                out = self._evaluate_end(span)
            finally:
                items = self._sink.take_deferred()
        return out, items

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
            return self._engine_end(span, ctx, attrs, role, start_first=True)
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
    def _enqueue(self, span: ReadableSpan, tid: int, attrs: Mapping[str, Any], helped: List[Any]) -> bool:
        """Queue a span end for the worker; False when there is no worker (evaluate inline). The
        callbacks of queued ends this thread ran while it waited for room go to ``helped``."""
        sid = span._context.span_id
        mark = self._positioned.pop(sid, None)
        parent = span._parent
        barrier: Any = _NO_BARRIER
        if (mark == _AT_START_AGENT or parent is None or parent.is_remote
                or (mark != _AT_START_PLACED and self._marked_role(span._name, attrs) != ROLE_OTHER)):
            # This end may close an episode or position a call: later starts of its trace (of any
            # trace, for conversation episodes) must not overtake it.
            barrier = tid if self.engine.by_trace_key else None
        size = _SPAN_OVERHEAD_BYTES
        for v in attrs.values():
            if type(v) is str:
                size += len(v)
        cond = self._cond
        q = self._queue
        while True:
            with cond:
                if not self._worker_alive():
                    return False
                if not q or (len(q) < self._max_queue and self._queued_bytes + size <= self._max_bytes):
                    q.append((span, size, barrier))
                    self._queued_bytes += size
                    if barrier is not _NO_BARRIER:
                        self._barriers[barrier] = self._barriers.get(barrier, 0) + 1
                    if self._worker_idle:
                        self._worker_idle = False
                        cond.notify()
                    return True
                # Full: wait for room (a span is never dropped). Woken when the worker takes an
                # item; the timeout re-checks that it lives.
                self._waiting += 1
                try:
                    full = not cond.wait(0.25)
                finally:
                    self._waiting -= 1
            if full:
                helped.extend(self._help_once())

    def _help_once(self) -> List[Any]:
        """Run one queued span end on this thread if the engine is free (a full queue whose worker
        is slow, or a caller that holds the engine lock itself)."""
        if not self._lock.acquire(blocking=False):
            return _NOTHING
        items: List[Any] = _NOTHING
        self._sink.deferred = []
        try:
            with self._cond:
                item = self._take()
            if item is not None:
                try:
                    self._forward(item[0], self._run_item(item[0]))
                finally:
                    self._done()
            items = self._sink.take_deferred()
        finally:
            self._lock.release()
        return items

    def _worker_alive(self) -> bool:
        w = self._worker
        if w is not None and w.is_alive():
            return True
        if not self._worker_gone and not self._shutdown:
            self._worker_gone = True
            self._sink.internal_error("worker_gone", RuntimeError(
                "the evaluation worker thread is gone; span ends are evaluated on the agent's thread"))
        return False

    def _take(self) -> Optional[Tuple[Any, int, Any]]:
        """The next queued item, or None (call with ``_cond`` held)."""
        q = self._queue
        if not q:
            return None
        item = q.popleft()
        self._queued_bytes -= item[1]
        key = item[2]
        if key is not _NO_BARRIER:
            n = self._barriers.get(key, 0) - 1
            if n > 0:
                self._barriers[key] = n
            else:
                self._barriers.pop(key, None)
        self._inflight += 1
        if self._waiting:
            self._cond.notify_all()
        return item

    def _done(self) -> None:
        with self._cond:
            self._inflight -= 1
            if self._waiting and not self._queue and not self._inflight:
                self._cond.notify_all()

    def _run_item(self, span: ReadableSpan) -> Optional[SpanOutcome]:
        try:
            return self._evaluate_end(span)
        except BaseException as exc:  # noqa: BLE001 - one bad item must not stop the others
            self._sink.internal_error("on_end", exc)
            return None

    def _run_queue_until_positioned(self, tid: Any) -> None:
        """Under the engine lock: run queued span ends in order until none that could change how a
        start of trace ``tid`` (``_ALL``: any) is positioned is left. Their callbacks are left in
        the sink's deferred list for the caller."""
        budget = len(self._queue)
        while budget > 0:
            budget -= 1
            with self._cond:
                if tid is _ALL:
                    if not self._queue:
                        return
                elif not (self._barriers.get(tid) or self._barriers.get(None)):
                    return
                item = self._take()
            if item is None:
                return
            try:
                out = self._run_item(item[0])
                self._forward(item[0], out)
            finally:
                self._done()

    def _start_worker(self) -> None:
        ref = weakref.ref(self)
        cond = self._cond
        stop = self._stop

        def loop() -> None:
            gather = False
            while True:
                me = ref()
                if me is None or (stop.is_set() and not me._queue):
                    return
                try:
                    if gather:
                        # Woken by the agent's first span after a quiet spell: let a batch gather,
                        # then run it in one go (waking per span would cost the agent's thread a
                        # wake-up for every span).
                        gather = False
                        del me
                        stop.wait(_GATHER_S)
                        continue
                    if me._work_once():
                        continue
                    with cond:
                        if me._queue or stop.is_set():
                            continue
                        me._worker_idle = True
                        del me
                        cond.wait(1.0)  # notified by the first span end queued while idle
                    gather = True
                except BaseException as exc:  # noqa: BLE001 - the worker must not die
                    obj = ref()
                    if obj is not None:
                        obj._sink.internal_error("worker", exc)
                    del obj

        self._worker = threading.Thread(target=loop, name="spanassert-evaluate", daemon=True)
        self._worker.start()

    def _work_once(self) -> bool:
        """Worker: evaluate the next queued span end (False when the queue is empty). Under the
        engine lock from taking to evaluating, so that starts on agent threads see every earlier
        end run or none; the span is handed on and callbacks run after the lock is released."""
        with self._lock:
            self._sink.deferred = []
            with self._cond:
                item = self._take()
                if item is None:
                    if self._waiting:
                        self._cond.notify_all()
                    return False
            try:
                out = self._run_item(item[0])
            finally:
                items = self._sink.take_deferred()
        try:
            self._forward(item[0], out)
            self._sink.run_deferred(items)
        except BaseException as exc:  # noqa: BLE001
            self._sink.internal_error("worker", exc)
        finally:
            self._done()
        return True

    def _drain(self, timeout_s: float) -> bool:
        """Wait until everything queued so far was evaluated and handed on (True), or the time is up.
        Without a worker, the calling thread does the work."""
        if not self._background:
            return True
        deadline = time.monotonic() + timeout_s
        with self._cond:
            if self._worker_idle and self._queue:
                self._worker_idle = False
                self._cond.notify()
        while True:
            with self._cond:
                if not self._queue and not self._inflight:
                    return True
                if self._worker_alive():
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    self._waiting += 1
                    try:
                        self._cond.wait(min(left, 0.25))
                    finally:
                        self._waiting -= 1
                    continue
            # No worker: run the queue here.
            if not self._lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
                return False
            self._sink.deferred = []
            try:
                self._run_queue_until_positioned(_ALL)
                items = self._sink.take_deferred()
            finally:
                self._lock.release()
            self._sink.run_deferred(items)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Decide every open episode now (liveness rules become inconclusive), then flush the wrapped
        processors within what is left of the deadline."""
        deadline = time.monotonic() + timeout_millis / 1000.0
        ok = self._drain(timeout_millis / 1000.0)
        items: List[Any] = []
        try:
            if self._lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
                self._sink.deferred = []
                try:
                    self._deliver_closed(self.engine.close_all(CloseReason.FLUSH))
                finally:
                    items = self._sink.take_deferred()
                    self._lock.release()
            else:
                ok = False
        except Exception as exc:  # noqa: BLE001
            self._sink.internal_error("force_flush", exc)
        self._sink.run_deferred(items)
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
                answer = processor.force_flush(timeout_millis)
                # None: SDK < 1.45's base SpanProcessor.force_flush returns nothing (nothing to flush).
                done.append(answer is None or bool(answer))
            except Exception as exc:  # noqa: BLE001
                self._sink.internal_error("force_flush", exc)
                done.append(False)

        _within(run, timeout_millis / 1000.0, "spanassert-flush")
        return bool(done) and done[0]

    def shutdown(self) -> None:
        """Evaluate what is queued, decide open episodes, shut the wrapped processors down: all
        within ``shutdown_timeout_millis``. Past it, queued spans are handed on unevaluated."""
        if self._shutdown:
            return
        self._shutdown = True
        deadline = time.monotonic() + self._shutdown_s

        def left() -> float:
            return max(0.0, deadline - time.monotonic())

        self._drain(left())
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        try:
            if self._lock.acquire(timeout=left()):
                self._sink.deferred = []
                try:
                    if self._queue:  # the worker is stuck (a callback that blocks): evaluate here
                        self._run_queue_until_positioned(_ALL)
                    self._deliver_closed(self.engine.close_all(CloseReason.SHUTDOWN))
                finally:
                    items = self._sink.take_deferred()
                    self._lock.release()
                if items:
                    _within(lambda: self._sink.run_deferred(items), left(), "spanassert-callbacks")
            else:
                self._sink.internal_error("shutdown", TimeoutError("the engine stayed busy past the shutdown deadline"))
        except Exception as exc:  # noqa: BLE001
            self._sink.internal_error("shutdown", exc)
        # Whatever is still queued goes on unevaluated: a span is never dropped.
        while True:
            with self._cond:
                item = self._take()
            if item is None:
                break
            self._forward(item[0], None)
            self._done()
        for p in self._export:
            def stop(p: SpanProcessor = p) -> None:
                try:
                    p.shutdown()
                except Exception as exc:  # noqa: BLE001
                    self._sink.internal_error("shutdown", exc)

            _within(stop, left(), "spanassert-shutdown")

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
                items: List[Any] = []
                try:
                    with me._lock:
                        me._sink.deferred = []
                        try:
                            me._deliver_closed(me.engine.tick(time.time_ns()))
                        finally:
                            items = me._sink.take_deferred()
                    me._sink.run_deferred(items)
                except BaseException as exc:  # noqa: BLE001 - the ticker must not die
                    me._sink.internal_error("tick", exc)
                del me

        self._thread = threading.Thread(target=loop, name="spanassert-idle", daemon=True)
        self._thread.start()

    def _after_fork(self) -> None:
        # The child starts clean, as the SDK's BatchSpanProcessor does: the parent's open episodes,
        # queued spans and threads belong to the parent.
        self._new_engine()
        self._new_runtime()

    # -- introspection ----------------------------------------------------------------------------------
    @property
    def telemetry(self) -> Telemetry:
        return self._sink


def _within(fn: Callable[[], None], timeout_s: float, name: str) -> bool:
    """Run ``fn`` on a daemon thread and wait for it at most ``timeout_s`` (True if it finished)."""
    t = threading.Thread(target=fn, name=name, daemon=True)
    t.start()
    t.join(timeout_s)
    return not t.is_alive()


def _rule_tools(config: Config) -> List[str]:
    """Tool names the rules file mentions (always kept as metric attribute values)."""
    out: List[str] = []
    for t in config.tests:
        for a in t.trace_assertions:
            if a.tools:
                out.extend(a.tools)
    return out


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
