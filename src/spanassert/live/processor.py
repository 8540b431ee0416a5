"""The live front door: an OpenTelemetry ``SpanProcessor`` that checks tool calls as they happen.

```python
provider.add_span_processor(
    AssertionSpanProcessor(load_config("rules.yaml"), export=BatchSpanProcessor(OTLPSpanExporter())))
```

Contract (the same as the SDK's own processors): it never raises into the application, every span
handed to ``on_end`` reaches the wrapped processor(s) exactly once (a copy carrying violation events
where the span violated a rule), ``force_flush`` returns a bool within its deadline and propagates,
``shutdown`` is idempotent, keeps its deadline and decides open episodes, and it keeps working
after ``os.fork``.

This module adapts the SDK's span callbacks to the engine: what each span start and end costs the
agent's thread, and what reaches the engine. The rest of the live door, one job per module:
``sdk`` (every read of the SDK's private span fields), ``worker`` (the background queue, its
worker thread, and which span ends go to it), ``runtime`` (the engine lock, threads, flush,
shutdown, fork), ``sink`` (telemetry and the live door's per-trace state), ``remote`` (traces whose
root is in another process), ``annotate`` (where violations go on spans), ``guard`` (decisions
before a call runs), ``configurator`` (zero-code setup).
"""
from __future__ import annotations

import os
import time
import weakref
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple, Union

from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from ..config.model import Config
from ..core.emit import Telemetry
from ..core.engine import Engine, SpanOutcome
from ..core.results import EpisodeResult, Violation
from ..core.spans import INCOMPLETE_VALUE_AT_LIMIT
from ..mapping import ROLE_AGENT, ROLE_OTHER, ROLE_STEP
from ..mapping.conventions import MARKER_KEYS
from ..mapping.mapper import surely_other
from . import sdk
from .annotate import LiveRoots, annotated_copy, not_yet_on
from .remote import OVERFLOW_REMOTE_PARENTS, RemoteParents
from .runtime import Runtime
from .sink import NOTHING, LiveSink
from .worker import ALL, AT_START_AGENT, AT_START_OTHER, AT_START_PLACED, AT_START_STEP

if TYPE_CHECKING:
    from .guard import Guard

PathOrConfig = Union[Config, str, "os.PathLike[str]"]

DEFAULT_MAX_QUEUE_SIZE = 65_536
DEFAULT_MAX_QUEUE_BYTES = 32 * 1024 * 1024
_MAX_POSITIONED = 1 << 20
# spanassert.overflows kind: a trace no episode followed when one of its spans ended having lost
# attributes or events to the SDK's span limits (once per trace). Its GenAI markers may be what was
# lost (an agent run no rule saw; replay and serve then pass nothing: trace_dropped_no_episode);
# an episode that opens for the trace later starts incomplete.
OVERFLOW_DROPPED_BEFORE_EPISODE = "trace_dropped_before_episode"


class AssertionSpanProcessor(Runtime, SpanProcessor):
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
        self._telemetry_args = {"meter_provider": meter_provider, "logger_provider": logger_provider,
                                "on_violation": on_violation, "on_episode": on_episode,
                                "known_tools": _rule_tools(config)}
        self._tick_interval = tick_interval
        self._shutdown_s = max(0.0, shutdown_timeout_millis / 1000.0)
        self._shutdown = False
        self._background = bool(self._export) if background is None else bool(background and self._export)
        self._max_queue = max_queue_size
        self._max_bytes = max_queue_bytes
        self._new_engine()
        self._new_runtime()
        self._new_callbacks()
        if hasattr(os, "register_at_fork"):
            ref = weakref.ref(self)
            # the ignore below: ref() is checked by the `and`
            os.register_at_fork(after_in_child=lambda: (ref() and ref()._after_fork()))  # type: ignore[union-attr]

    def _new_engine(self) -> None:
        """The engine and what hangs on it (also the child's fresh start after ``os.fork``)."""
        self._tracked: Set[int] = set()
        self._last_trace: Tuple[int, str] = (-1, "")
        # Traces with a span here whose parent is in another process: their root is not here.
        self._remote = RemoteParents()
        self._sink = LiveSink(self._tracked, self._remote, **self._telemetry_args)
        self.engine = Engine(self.config, self._sink)
        self._role = self.engine.mapper.role
        # Without mapping rules of the user's, the built-in conventions' one-scan test (surely_other)
        # decides most plain spans before the mapper is asked.
        self._conventions = not self.engine.mapper.has_rules
        # The fast path of on_start and on_end (sdk.fast_callbacks) applies: with an export (without
        # one, a root span is remembered for the events written on it) and the conventions' test.
        self._quick = self._conventions and bool(self._export)
        self._marked_role = self.engine.mapper.marked_role
        self._roots = LiveRoots()  # used only without a wrapped exporter
        self._positioned: Dict[int, int] = {}  # span id -> AT_START_* (background mode)
        # Plain child spans of followed traces the engine has not seen: span id -> parent span id
        # (with an export). Handed to the engine only when a GenAI span starts below one.
        self._links: Dict[int, int] = {}
        self._ends = 0
        # The SDK's attribute value length limit (SpanLimits.max_attribute_length), read at the first
        # span start the quick path does not answer: values it cut make an episode incomplete.
        self._value_limit: Optional[int] = None
        self._limit_read = False

    def _after_fork(self) -> None:
        super()._after_fork()
        self._new_callbacks()

    def _new_callbacks(self) -> None:
        """The instance's own ``on_start``/``on_end`` (``sdk.fast_callbacks``), which answer most spans
        before the methods below (the full path) run: when the fast path applies (``_quick``) and a
        subclass did not replace the methods. Built again after ``os.fork`` (the child's containers
        are new). They hold the processor weakly (as its threads do): no reference cycle."""
        own = vars(self)
        own.pop("on_start", None)
        own.pop("on_end", None)
        cls = type(self)
        if not (self._quick and cls.on_start is AssertionSpanProcessor.on_start
                and cls.on_end is AssertionSpanProcessor.on_end):
            return
        ref = weakref.ref(self)

        def slow_start(span: Span, parent_context: Any, head: Any) -> None:
            me = ref()
            if me is not None:
                AssertionSpanProcessor.on_start(me, span, parent_context, head)

        def slow_end(span: ReadableSpan, head: Any) -> None:
            me = ref()
            if me is not None:
                if head is None:
                    AssertionSpanProcessor.on_end(me, span, None)
                else:
                    AssertionSpanProcessor._end_marked(me, span, head)

        own["on_start"], own["on_end"] = sdk.fast_callbacks(
            slow_start, slow_end, self._tracked, self._links, self._queue.traces, self._background, self._export,
            surely_other, MARKER_KEYS, self._sink.internal_error, _MAX_POSITIONED)

    # -- SpanProcessor ------------------------------------------------------------------------------
    def on_start(self, span: Span, parent_context: Any = None, _head: Any = None) -> None:
        # The full path. Most spans (plain spans of traces no episode follows, plain child spans of
        # followed traces) are answered before it, by the instance's on_start (sdk.fast_callbacks),
        # which passes a span with a marker key on with its fields read (_head: sdk.head(span)).
        items: Optional[List[Any]] = None
        try:
            tid, sid, attrs, name, pid, remote = _head if _head is not None else sdk.head(span)
            if not self._limit_read:
                # The provider's attribute value length limit (one per provider): read once.
                self._value_limit = sdk.value_limit(span)
                self._limit_read = True
            # A span with a marker key (_head given) is surely no plain span: the mapper decides.
            role = (ROLE_OTHER if _head is None and self._conventions and surely_other(name, attrs)
                    else self._marked_role(name, attrs))
            if role == ROLE_OTHER:
                if tid not in self._tracked:
                    if remote:
                        # The trace's root is in another process: remembered for an episode that
                        # may open below this span (see remote).
                        if not self._remote.started(tid):
                            self._sink.overflow(OVERFLOW_REMOTE_PARENTS)
                        if not self._export:
                            self._roots.add(sid, span)
                    elif pid is None and not self._export:
                        self._roots.add(sid, span)
                    return
                if pid is not None and not remote and self._export:
                    self._remember_link(sid, pid)
                    return
            items = self._start_in_engine(span, tid, sid, attrs, name, role, pid, remote)
        except Exception as exc:  # noqa: BLE001 - never raise into the application
            self._sink.internal_error("on_start", exc)
            self._judging_failed(span)
        if items:
            # After the engine lock is released, before start_span returns.
            self._sink.run_deferred(items)

    def _remember_link(self, sid: int, pid: int) -> None:
        """A plain child span of a followed trace (an HTTP call to the model's API, a database
        call): its parent link, for a GenAI span that may start below it, is all the engine would
        keep of it, and only that span needs it."""
        links = self._links
        if len(links) >= _MAX_POSITIONED:
            links.clear()  # spans that never ended; children below them lose their agent
        links[sid] = pid

    def _start_in_engine(self, span: Span, tid: int, sid: int, attrs: Mapping[str, Any], name: str, role: int,
                         pid: Optional[int], remote: bool) -> List[Any]:
        with self._lock:
            self._sink.deferred = []
            if self._queue.barriers and self._queue.has_barrier(tid):
                self._run_queue(tid)
            remote_count = 0
            if remote:
                # Counted in the engine's order (after the queued ends of its trace ran).
                remote_count = self._remote.started(tid)
                if not remote_count:
                    self._sink.overflow(OVERFLOW_REMOTE_PARENTS)
                    remote_count = 1  # at least this one
            elif pid is not None and self._links and pid in self._links:
                self._link(tid, pid)
            # Only without a wrapped exporter are start-time violations written on the span here
            # (with one, they travel on the exported copy); no list is allocated otherwise.
            current: Optional[List[Violation]] = None if self._export else []
            self._sink.current = current
            last = self._last_trace
            trace_hex = last[1] if last[0] == tid else self._trace_hex(tid)
            start, resource = sdk.started(span)
            sid_hex = "%016x" % sid  # noqa: UP031 -- %-format: a third of format()'s cost
            pid_hex = None if pid is None else "%016x" % pid  # noqa: UP031 -- as above
            try:
                positioned = self.engine.start_span(
                    trace_hex, sid_hex, pid_hex, name, attrs, start or time.time_ns(), resource, role,
                    pid is None or remote,
                )
            finally:
                self._sink.current = None
            if remote_count:
                # The trace's root is here (else its episode opened as "root not seen"): this span
                # came back from another process, and replay would count it.
                self.engine.parents_elsewhere(self._trace_hex(tid), remote_count)
            if self._background:
                marks = self._positioned
                if len(marks) >= _MAX_POSITIONED:
                    marks.clear()  # spans that never ended; their ends then count as barriers (safe)
                if role == ROLE_OTHER:
                    marks[sid] = AT_START_OTHER
                elif positioned:
                    marks[sid] = (AT_START_AGENT if role == ROLE_AGENT else
                                  AT_START_STEP if role == ROLE_STEP else AT_START_PLACED)
            if current is not None:
                if role != ROLE_OTHER and (pid is None or remote or
                                           self.engine.by_trace.get(self._trace_hex(tid)) is not None):
                    self._roots.add(sid, span)
                self._roots.write_at_start(span, current)
            items = self._sink.deferred  # as take_deferred
            self._sink.deferred = None
            return items if items else NOTHING

    def _link(self, tid: int, span_id: int) -> None:
        """Under the engine lock: give the engine the plain spans from ``span_id`` up to the
        nearest span it knows (their starts, as plain spans: the parent links only)."""
        links = self._links
        chain: List[Tuple[int, int]] = []
        sid = span_id
        while sid in links and len(chain) < 10_000:
            parent_id = links.pop(sid)
            chain.append((sid, parent_id))
            sid = parent_id
        trace_hex = self._trace_hex(tid)
        marks = self._positioned
        for sid, parent_id in reversed(chain):
            self.engine.start_span(trace_hex, "%016x" % sid, "%016x" % parent_id, "", sdk.EMPTY, 0,  # noqa: UP031 -- as in _start_in_engine
                                   None, ROLE_OTHER, False)
            if self._background:
                marks[sid] = AT_START_OTHER

    def on_end(self, span: ReadableSpan, _head: Any = None) -> None:
        # The full path (see on_start).
        out: Optional[SpanOutcome] = None
        items: Optional[List[Any]] = None
        try:
            links = self._links
            head = _head if _head is not None else sdk.head(span)
            tid, sid, attrs, name, pid, remote = head
            if links and sid in links:
                if self._plain(name, attrs):
                    # A plain child span that no GenAI span started below: the engine never
                    # needed it (its end is no activity of the episode), so it is only exported,
                    # now unless an end of its trace waits to be (the export keeps end order).
                    links.pop(sid, None)
                    if sdk.dropped(span):
                        self._source_dropped(tid)
                    if not (self._background and self._queue.traces.get(tid)):
                        self._forward(span, None)
                        return
                else:
                    # Recognised only now (its markers were set after start): the engine first
                    # gets its start and its ancestry, then its end as for any other span.
                    with self._lock:
                        self._link(tid, sid)
            if (tid in self._tracked or not self._export
                    or not ((self._conventions and surely_other(name, attrs))
                            or self._marked_role(name, attrs) == ROLE_OTHER)):
                inline = self._background and self._end_inline(sid, pid, remote, tid, name, attrs)
                if inline:
                    # A plain child span or a model step of a followed trace, with no end of its
                    # trace queued: its end is cheap to take in here, cheaper than handing it to
                    # the worker (see _end_inline).
                    try:
                        out, items = self._evaluate_unqueued(span, head)
                    finally:
                        self._lock.release()
                else:
                    if self._background:
                        helped: List[Any] = []
                        queued = self._enqueue(span, sid, pid, remote, tid, attrs, name, helped, head)
                        if helped:
                            self._sink.run_deferred(helped)
                        if queued:
                            return
                    out, items = self._evaluate_end_locked(span, head)
            else:
                if sdk.dropped(span):
                    # A plain span of a trace no episode follows (yet) that lost attributes to the
                    # SDK's span limits: it may have been a GenAI span whose markers were evicted,
                    # so an episode that opens for its trace later is incomplete, as replay and
                    # serve say of the whole trace (a bounded note until then).
                    self._source_dropped(tid)
                if remote and (self._remote.traces or self._remote.lost):
                    self._remote.ended(tid, False)  # a trace no episode follows: forget it
        except Exception as exc:  # noqa: BLE001 -- the processor never raises into the application
            self._sink.internal_error("on_end", exc)
            self._judging_failed(span)
        self._forward(span, out)
        if items:
            self._sink.run_deferred(items)

    def _end_marked(self, span: ReadableSpan, head: Any) -> None:
        """``on_end`` of a span with a marker key, its fields read (``head``; see sdk.fast_callbacks).
        A model step positioned at its start, whose end :meth:`_end_inline` would take in on this
        thread, goes straight to the engine here: the same checks and the same work as
        ``on_end`` -> ``_end_inline`` -> ``_evaluate_unqueued`` -> ``_evaluate_end``, without their
        calls (a model step is most of an agent's GenAI spans). Any other span goes to ``on_end``."""
        out: Optional[SpanOutcome] = None
        items: Optional[List[Any]] = None
        try:
            tid, sid, attrs, name, pid, remote = head
            queued = self._queue.traces
            if (pid is None or remote or not self._background or self._positioned.get(sid) != AT_START_STEP
                    or tid not in self._tracked or (self._links and sid in self._links) or queued.get(tid)
                    or not self.engine.by_trace_key):
                AssertionSpanProcessor.on_end(self, span, head)
                return
            lock = self._lock
            if not lock.acquire(blocking=False):  # the worker is judging an end: queue this one behind it
                AssertionSpanProcessor.on_end(self, span, head)
                return
            try:
                if queued.get(tid):  # queued meanwhile by another thread: keep the order
                    lock.release()
                    lock = None
                    AssertionSpanProcessor.on_end(self, span, head)
                    return
                self._positioned.pop(sid, None)
                sink = self._sink
                sink.deferred = []
                try:
                    if tid in self._tracked:
                        out = self._engine_end(span, tid, sid, attrs, name, pid, remote, None, False)
                    else:  # its episode closed meanwhile (a queued root's end ran): as _evaluate_end
                        out = self._evaluate_end(span, head)
                finally:
                    pending = sink.deferred  # as _evaluate_unqueued (lost with the span's judging if it raised)
                    sink.deferred = None
                items = pending
            finally:
                if lock is not None:
                    lock.release()
        except Exception as exc:  # noqa: BLE001 -- the processor never raises into the application
            self._sink.internal_error("on_end", exc)
            self._judging_failed(span)
        self._forward(span, out)
        if items:
            self._sink.run_deferred(items)

    def _source_dropped(self, tid: int) -> None:
        """A plain span of a followed trace whose SDK dropped attributes (span limits: the oldest go
        first, so a GenAI span can lose the markers that made it one): its episode is incomplete,
        as replay and serve say of the exported span. In a trace no episode follows (yet), counted
        once per trace (see :data:`OVERFLOW_DROPPED_BEFORE_EPISODE`)."""
        with self._lock:
            first = self.engine.source_dropped(self._trace_hex(tid))
        if first:
            self._sink.overflow(OVERFLOW_DROPPED_BEFORE_EPISODE)

    def _judging_failed(self, span: ReadableSpan) -> None:
        """After an internal error while judging ``span``: its episode lost that span's evidence, so
        it closes with its evidence incomplete (no rule the span could have broken ends `passed`)."""
        try:
            tid = sdk.head(span)[0]
            with self._lock:
                self.engine.judging_failed(self._trace_hex(tid))
        except Exception as exc:  # noqa: BLE001 -- the processor never raises into the application
            self._sink.internal_error("judging_failed", exc)

    def _plain(self, name: str, attributes: Mapping[str, Any]) -> bool:
        """No GenAI span (by the conventions' quick test, else by the mapper)."""
        return ((self._conventions and surely_other(name, attributes))
                or self._marked_role(name, attributes) == ROLE_OTHER)

    def _forward(self, span: ReadableSpan, out: Optional[SpanOutcome]) -> None:
        to_send: ReadableSpan = span
        if out is not None:
            try:
                to_send = self._deliver(span, out)
            except Exception as exc:  # noqa: BLE001 -- the processor never raises into the application
                self._sink.internal_error("annotate", exc)
                to_send = span
        for p in self._export:
            try:
                p.on_end(to_send)
            except Exception as exc:  # noqa: BLE001, PERF203 -- a failing exporter must not stop the others
                self._sink.internal_error("export", exc)

    def _deliver(self, span: ReadableSpan, out: SpanOutcome) -> ReadableSpan:
        if not self._export:
            ep = self.engine.by_trace.get(self._trace_hex(sdk.head(span)[0]))
            self._roots.write_after_end(span, out.violations, ep.view.root_span_id if ep is not None else None)
            return span
        events = [v for v in out.violations if not v.shadow]
        if events and span.events:
            events = not_yet_on(span, events)  # a guard wrote a decision's events on the span itself
        return annotated_copy(span, events) if events else span

    def _deliver_closed(self, results: List[EpisodeResult]) -> None:
        if results and not self._export:
            self._roots.write_closed(results)

    def _evaluate_end(self, span: ReadableSpan, head: Any = None) -> Optional[SpanOutcome]:
        # head: sdk.head(span), read when the span ended (on_end); an ended span does not change.
        tid, sid, attrs, name, pid, remote = head if head is not None else sdk.head(span)
        if not self._export:
            self._roots.discard(sid)
        if tid not in self._tracked:
            role = self._role(name, attrs)
            if role == ROLE_OTHER:
                if sdk.dropped(span) and self.engine.source_dropped(self._trace_hex(tid)):
                    # As in on_end: an episode that opens later is incomplete; counted once per trace.
                    self._sink.overflow(OVERFLOW_DROPPED_BEFORE_EPISODE)
                if remote:
                    self._remote.ended(tid, False)
                return None
            # Recognised only now (its markers were set after start): position it at its end.
            return self._engine_end(span, tid, sid, attrs, name, pid, remote, role, start_first=True)
        return self._engine_end(span, tid, sid, attrs, name, pid, remote, None, start_first=False)

    def _engine_end(self, span: ReadableSpan, trace_id: int, span_id: int, attrs: Mapping[str, Any], name: str,
                    parent_id: Optional[int], remote: bool, role: Optional[int], start_first: bool,
                    ) -> Optional[SpanOutcome]:
        last = self._last_trace
        tid = last[1] if last[0] == trace_id else self._trace_hex(trace_id)
        sid = "%016x" % span_id  # noqa: UP031 -- %-format: a third of format()'s cost
        pid = "%016x" % parent_id if parent_id is not None else None  # noqa: UP031 -- as above
        start, end, status, events, dropped = sdk.ended(span)
        start = start or 0
        end = end or start
        engine = self.engine
        if start_first:
            engine.start_span(tid, sid, pid, name, attrs, start, sdk.resource_attributes(span), role,
                              parent_id is None or remote)
        if dropped:
            # The SDK's span limits dropped some of what the span recorded (the oldest attributes
            # first: its tool name, its arguments): its episode's evidence is incomplete, as replay
            # and serve say of the exported span. Before its end, which may close the episode.
            engine.source_dropped(tid)
        limit = self._value_limit
        if limit is not None and sdk.values_at_limit(span, limit):
            # A value the SDK may have cut to its length limit, silently (a result's tail unseen).
            engine.source_dropped(tid, INCOMPLETE_VALUE_AT_LIMIT)
        # A local root under a remote parent is no root of its episode: the trace's root is
        # elsewhere, and the episode ends when the trace's last such span here ends (below), as
        # replay ends it after the trace's last span.
        out = engine.end_span(tid, sid, pid, name, attrs, start, end, status, events, parent_id is None)
        if remote and self._remote.ended(trace_id, trace_id in self._tracked):
            closed = engine.end_trace(tid)
            if closed is not None:
                self._deliver_closed([closed])
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
        text = "%032x" % trace_id  # noqa: UP031 -- %-format: a third of format()'s cost
        self._last_trace = (trace_id, text)
        return text

    # -- introspection ----------------------------------------------------------------------------------
    @property
    def telemetry(self) -> Telemetry:
        return self._sink

    # -- guard --------------------------------------------------------------------------------------------
    def guard(self, *, fail_open: Optional[bool] = None, tracer_provider: Any = None) -> Guard:
        """A :class:`~spanassert.live.guard.Guard` deciding calls before they run, from this
        processor's episodes (the same counts, order and data flow its spans built)."""
        from .guard import Guard

        return Guard(self.config, processor=self, fail_open=fail_open, tracer_provider=tracer_provider)

    def _guarded(self, decide: Callable[[Engine], Any]) -> Any:
        """Run a guard's ``decide(engine)`` under the engine lock, after every span end still
        queued (the decision reads the state all earlier spans left); the log records and callbacks
        it produced run after the lock is released, before this returns."""
        items: List[Any] = NOTHING
        try:
            with self._lock:
                self._sink.deferred = []
                try:
                    if self._queue.items:
                        self._run_queue(ALL)
                    return decide(self.engine)
                finally:
                    items = self._sink.take_deferred()
        finally:
            if items:
                self._sink.run_deferred(items)


def _rule_tools(config: Config) -> List[str]:
    """Tool names the rules file mentions (always kept as metric attribute values)."""
    out: List[str] = []
    for t in config.tests:
        for a in t.trace_assertions:
            if a.tools:
                out.extend(a.tools)
    return out


def __getattr__(name: str) -> Any:
    # The configurator moved to spanassert.live.configurator; old imports keep working.
    if name in ("SpanAssertConfigurator", "ENV_CONFIG", "ENV_BACKGROUND"):
        from . import configurator

        return getattr(configurator, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["AssertionSpanProcessor", "DEFAULT_MAX_QUEUE_BYTES", "DEFAULT_MAX_QUEUE_SIZE"]
