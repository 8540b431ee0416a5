"""The receiver: its servers, the intake queue, the engine thread and the forwarder.

Spans arrive after they ended, in any order, so each trace is held in a
:class:`~spanassert.core.assembly.TraceBuffer` until it looks complete (``--settle`` seconds after its
root arrived; the rules file's idle timeout, capped, for traces whose root never comes) and then fed
with :func:`~spanassert.core.assembly.feed_trace` — exactly what replay does, so the verdicts are
replay's. Rules whose failure at a call depends on that call alone (``order_free``) are checked on
arrival with :meth:`Engine.precheck`, so a forbidden call is reported seconds earlier; the later,
assembled check does not report it a second time, and takes what the early check decoded and scanned
of each span instead of doing it again (kept per trace until the trace is fed, at most one per
buffered span).

Threads: request threads (HTTP, gRPC) decode each request once and put its spans on the bounded
intake queue; one engine thread owns the engine, the trace buffer and the forwarding batches (the
engine is not thread-safe); one forwarding thread posts to ``--forward``.
"""
from __future__ import annotations

import json
import sys
import threading
import time
from bisect import bisect_left
from typing import Any, Callable, Dict, List, Optional, TextIO, Tuple

from ..config.model import Config
from ..core.assembly import TraceBuffer, close_all_contained, judge_trace
from ..core.engine import ROLE_TOOL, Engine, SpanOutcome
from ..core.model import CloseReason, SpanRecord
from ..core.native import mypyc_attr
from ..core.report import Report
from ..core.results import Violation
from ..mapping import ROLE_AGENT
from ..otlp.proto_encode import ForwardItem, export_request
from .forwarder import Forwarder
from .intake import Batch, IntakeQueue
from .protocol import DEFAULT_ROOTLESS_WAIT_CAP, EndpointError, ServeOptions
from .sink import ServeSink

# spanassert.overflows{kind}: a trace judged before it settled (span or time bound per trace).
OVERFLOW_TRACE_RELEASED_EARLY = "trace_released_early"

# How often the engine thread looks for settled traces and closes idle episodes, at the latest.
TICK_SECONDS = 0.1


class _TraceSide:
    """What the receiver keeps per buffered trace beside the records: span ids seen (retried
    requests repeat spans), tool-call start times (a call's position for early messages) and the
    protobuf spans to forward."""

    __slots__ = ("span_ids", "tool_starts", "wire", "others")

    def __init__(self) -> None:
        self.span_ids: Dict[str, SpanRecord] = {}  # span id -> the first span with it
        self.tool_starts: List[int] = []
        self.wire: Dict[int, Any] = {}  # id(record) -> its protobuf span (two spans may share an id)
        # Spans with an id already seen and other content (judged too), by id; made when one comes.
        self.others: Optional[Dict[str, List[SpanRecord]]] = None

    def repeated(self, first: SpanRecord, r: SpanRecord) -> bool:
        """``r`` has the id of ``first``, here already: whether it repeats a span here (a retried
        request), else remember it. A span with an id already seen and other content is another
        span (replay judges both: so does serve); dropping it as a retry would let a copy sent
        first hide a forbidden call."""
        if _same_span(first, r):
            return True
        if self.others is None:
            self.others = {}
        copies = self.others.setdefault(r.span_id, [])
        if any(_same_span(c, r) for c in copies):
            return True
        copies.append(r)
        return False


def _same_span(a: SpanRecord, b: SpanRecord) -> bool:
    """Whether ``b`` repeats ``a`` in everything judging reads (a retried request sends the same)."""
    return (a.name == b.name and a.parent_span_id == b.parent_span_id and a.start_ns == b.start_ns
            and a.end_ns == b.end_ns and a.status_code == b.status_code and a.kind == b.kind
            and a.dropped == b.dropped and a.attributes == b.attributes and a.resource == b.resource
            and a.status_message == b.status_message and a.scope == b.scope
            and [(e.name, e.timestamp, e.attributes) for e in a.events]
            == [(e.name, e.timestamp, e.attributes) for e in b.events])


# Not a native class in the compiled build (its methods are compiled all the same): tests put a spy on one
# receiver's method (rx._feed = ...) or on the class's (Receiver.start), which a native class refuses.
@mypyc_attr(native_class=False)
class Receiver:
    """The OTLP receiver: servers, intake queue, engine thread and forwarder (see module doc)."""

    def __init__(self, config: Config, options: ServeOptions, *, meter_provider: Any = None,
                 out: Optional[TextIO] = None, logger_provider: Any = None) -> None:
        from opentelemetry.metrics import NoOpMeterProvider

        self.config = config
        self.options = options
        self.out = out or sys.stdout
        self.report = Report(config) if options.report_json else None
        self.sink = ServeSink(meter_provider=meter_provider or NoOpMeterProvider(), report=self.report,
                              quiet=options.quiet, logger_provider=logger_provider,
                              json_lines=options.output_format == "json")
        self.engine = Engine(config, self.sink)
        self._precheck = self.engine.has_precheck
        # The early checks keep what they computed for the assembled pass, at most one per buffered span.
        self.engine.max_prechecked = max(1, min(options.max_buffered_spans, self.engine.max_prechecked))
        idle = options.rootless_wait
        if idle is None:
            idle = min(float(config.episodes.idle_timeout), DEFAULT_ROOTLESS_WAIT_CAP)
        # Bounded per trace: a trace that reaches --max-trace-spans (or is still arriving after
        # --max-trace-seconds) is released at once, so the buffer never drops one of its spans.
        self.buffer = TraceBuffer(settle=max(0.0, options.settle), idle=max(0.0, idle),
                                  max_traces=max(config.episodes.max_open, 1) * 4,
                                  max_spans_per_trace=max(1, options.max_trace_spans))
        self.buffered_spans = 0
        self.traces_released_early = 0
        self._sides: Dict[str, _TraceSide] = {}
        self.queue = IntakeQueue(options.queue_size)
        self.forwarder = Forwarder(options.forward, max_spans=options.forward_queue_size) if options.forward else None
        self._forward_out: List[ForwardItem] = []
        self.stopping = False
        # Set by a second signal during the drain: stop judging, decide what is open, write.
        self.cut = threading.Event()
        self.unjudged_spans = 0  # accepted spans left unjudged because the drain was cut short
        self._stats_lock = threading.Lock()
        self.requests = 0
        self.spans_rejected = 0
        self.spans_refused = 0  # spans of requests answered 503 / RESOURCE_EXHAUSTED
        # Requests refused as unreadable (HTTP 400/411/413: a body that is not OTLP, cut short, too
        # large): their spans, if any, were never judged, and a client does not send them again.
        self.requests_unreadable = 0
        self.duplicates = 0
        self.open_episodes = 0
        self.buffered_traces = 0
        # When the engine thread last went round its loop: /health answers 503 once this is older
        # than options.engine_stall_timeout (a trace that takes that long to judge, or a hang).
        self.engine_beat = time.monotonic()
        self._engine_thread = threading.Thread(target=self._run_engine, name="spanassert-engine", daemon=True)
        self._engine_error: Optional[BaseException] = None
        self.http_server: Any = None
        self._http_thread: Optional[threading.Thread] = None
        self.grpc_server: Any = None
        self.http_address: Optional[str] = None
        self.grpc_address: Optional[str] = None

    @property
    def internal_errors(self) -> int:
        """Internal errors so far, as ``spanassert.internal_errors`` counts them: a trace whose
        judging raised (closed inconclusive, the rest judged), a rule whose ``on_close`` raised
        (that rule inconclusive), and any other error caught inside serve."""
        return self.sink.errors_counted

    # -- lifecycle -------------------------------------------------------------------------------
    def _start_grpc(self, endpoint: str) -> None:
        from .grpc_server import start_grpc

        start_grpc(self, endpoint)

    def _start_http(self, endpoint: str) -> None:
        from .http_server import start_http

        start_http(self, endpoint)

    def start(self) -> None:
        """Bind both ports (raises :class:`EndpointError` naming the option on failure) and start."""
        if self.options.grpc_endpoint:
            self._start_grpc(self.options.grpc_endpoint)
        if self.options.http_endpoint:
            try:
                self._start_http(self.options.http_endpoint)
            except EndpointError:
                if self.grpc_server is not None:
                    self.grpc_server.stop(None)
                raise
        self._engine_thread.start()
        if self.grpc_address:
            self.out.write(f"spanassert serve: OTLP/gRPC listening on {self.grpc_address}\n")
        if self.http_address:
            self.out.write(f"spanassert serve: OTLP/HTTP listening on {self.http_address}\n")
        sec = self.options.security
        if sec.tls or sec.token is not None:
            parts = (["TLS" + (" with client certificates (mutual TLS)" if sec.client_ca else "")] if sec.tls else []) \
                + (["a bearer token"] if sec.token is not None else [])
            self.out.write(f"spanassert serve: both ports require {' and '.join(parts)}\n")
        self.out.flush()

    def stop(self, timeout: float = 30.0) -> None:
        """Graceful stop: refuse new requests, drain the queue, decide every open episode, flush
        forwarding; then close the ports."""
        self.stopping = True
        self.queue.close()
        deadline = time.monotonic() + timeout
        thread = self._engine_thread
        while thread.is_alive() and time.monotonic() < deadline and not self.cut.is_set():
            thread.join(0.1)  # in slices: a second signal (self.cut) is noticed at once
        if thread.is_alive() and self.cut.is_set():
            # The engine thread decides what is open and stops; it may be inside one long trace.
            thread.join(max(0.0, min(5.0, deadline - time.monotonic())))
            if thread.is_alive():
                buffered = sum([len(p.records) for p in list(self.buffer.pending.values())])
                self.unjudged_spans += self.queue.depth + buffered
        if self.forwarder is not None:
            self.forwarder.flush(timeout=min(timeout, 10.0), cancel=self.cut)
            self.forwarder.stop()
        if self.http_server is not None:
            self.http_server.shutdown()
            self.http_server.server_close()
        if self.grpc_server is not None:
            self.grpc_server.stop(grace=1.0).wait(2.0)

    def summary_dict(self) -> Dict[str, Any]:
        """What the stop summary says, as data (``--format json`` prints it as one JSON line)."""
        s = self.sink
        d: Dict[str, Any] = {
            "event": "stopped", "spans_accepted": self.queue.accepted, "requests": self.requests,
            "spans_rejected": self.spans_rejected, "spans_refused": self.spans_refused,
            "episodes_decided": s.episodes_closed, "episodes_failed": s.episodes_failed,
            "episodes_inconclusive": s.episodes_inconclusive, "episodes_amended": s.episodes_amended,
            "violations": s.violations_reported, "internal_errors": self.internal_errors,
            "drain_cut": self.cut.is_set(), "spans_not_judged": self.unjudged_spans if self.cut.is_set() else 0,
        }
        if self.forwarder is not None:
            d["forwarded_spans"] = self.forwarder.sent
            d["forward_dropped_spans"] = self.forwarder.dropped
        return d

    def summary(self) -> str:
        d = self.summary_dict()
        if self.options.output_format == "json":
            return json.dumps(d, sort_keys=True)
        text = (f"spanassert serve: stopped; {d['spans_accepted']} span(s) accepted in {d['requests']} request(s), "
                f"{d['spans_rejected']} rejected, {d['spans_refused']} refused (queue full or stopping); "
                f"{d['episodes_decided']} episode(s) decided ({d['episodes_failed']} failed, "
                f"{d['episodes_inconclusive']} inconclusive, {d['episodes_amended']} amended after close by late "
                f"spans); {d['violations']} violation(s)")
        if d["drain_cut"]:
            text += f"; drain cut short by a second signal: {d['spans_not_judged']} span(s) not judged"
        if d["internal_errors"]:
            text += f"; {d['internal_errors']} internal error(s) (see the log)"
        if "forwarded_spans" in d:
            text += f"; forwarded {d['forwarded_spans']} span(s), dropped {d['forward_dropped_spans']}"
        return text

    def report_dict(self) -> Dict[str, Any]:
        assert self.report is not None
        self.report.spans_read = self.queue.accepted
        if self.buffer.overflowed:
            self.report.overflows["spans_per_trace"] = self.buffer.overflowed
        self.report.mark_input_gaps(self.input_gaps())
        d = self.report.to_dict()
        d["receiver"] = {
            "requests": self.requests,
            "spans_accepted": self.queue.accepted,
            "spans_rejected": self.spans_rejected,
            "spans_refused": self.spans_refused,
            "requests_unreadable": self.requests_unreadable,
            "duplicate_spans": self.duplicates,
            "traces_released_early": self.traces_released_early,
            "internal_errors": self.internal_errors,
            "drain_cut": self.cut.is_set(),
            "spans_not_judged": self.unjudged_spans,
            "violations_reported": self.sink.violations_reported,
            "forwarded_spans": self.forwarder.sent if self.forwarder else 0,
            "forward_dropped_spans": self.forwarder.dropped if self.forwarder else 0,
        }
        return d

    def engine_state(self) -> str:
        """``ok``, ``stopping``, ``engine_dead`` (the engine thread has ended) or ``engine_stalled``
        (it has not gone round its loop for ``--engine-stall-timeout`` seconds)."""
        if self.stopping:
            return "stopping"
        if self._engine_thread.ident is not None and not self._engine_thread.is_alive():
            return "engine_dead"
        if time.monotonic() - self.engine_beat > self.options.engine_stall_timeout:
            return "engine_stalled"
        return "ok"

    def unavailable(self) -> Optional[str]:
        """Why requests are refused as unavailable now (503 / UNAVAILABLE), or None."""
        state = self.engine_state()
        if state == "stopping":
            return "spanassert serve is shutting down"
        if state == "engine_dead":
            return "spanassert serve's engine thread has stopped: nothing would be judged (see /health)"
        return None

    def health(self) -> Dict[str, Any]:
        state = self.engine_state()
        return {
            "status": state,
            "open_episodes": self.open_episodes,
            "buffered_traces": self.buffered_traces,
            "buffered_spans": self.buffered_spans,
            "traces_released_early": self.traces_released_early,
            "queue_depth": self.queue.depth,
            "queue_capacity": self.queue.max_spans,
            "spans_received": self.queue.accepted,
            "spans_rejected": self.spans_rejected,
            "violations": self.sink.violations_reported,
            "engine_alive": self._engine_thread.is_alive() or self.stopping,
            "engine_idle_seconds": round(time.monotonic() - self.engine_beat, 3),
            "internal_errors": self.internal_errors,
        }

    # -- intake (request threads) ------------------------------------------------------------------
    def accept(self, records: List[SpanRecord], wire: Optional[Dict[Tuple[str, str], Any]],
               rejected: int) -> bool:
        """Queue one request's usable spans; False when the queue is full, we are stopping or the
        engine thread is gone (:meth:`unavailable` says which)."""
        with self._stats_lock:
            self.requests += 1
            self.spans_rejected += rejected
        if rejected:
            self.sink.input_refused(rejected, 0)
        down = self.unavailable() is not None
        if not records:
            return not down
        if down or not self.queue.put(Batch(records, wire)):
            with self._stats_lock:
                self.spans_refused += len(records)
            return False
        return True

    def refused_unreadable(self) -> None:
        """A request refused because its body could not be read (its spans, if any, are lost)."""
        with self._stats_lock:
            self.requests_unreadable += 1
        self.sink.input_refused(0, 1)

    def input_gaps(self) -> List[str]:
        """What serve could not read, as the report says it (replay's "parts of the input that
        could not be read"): no episode of a report that lost them shows `passed`."""
        whys = []
        if self.spans_rejected:
            whys.append(f"{self.spans_rejected} span(s) were rejected as unreadable (partial success)")
        if self.requests_unreadable:
            whys.append(f"{self.requests_unreadable} request(s) were refused as unreadable")
        return whys

    def decode_proto_bytes(
        self, body: bytes, source: str
    ) -> Optional[Tuple[List[SpanRecord], List[Any], Optional[Dict[Tuple[str, str], Any]]]]:
        """:meth:`decode_proto` from the request's bytes by the compiled build's wire decoder (see
        otlp/proto_wire.py), or None: then parse the request and call :meth:`decode_proto`. None too
        when forwarding, which keeps the runtime's messages."""
        if self.forwarder is not None:
            return None
        from ..otlp.proto_wire import wire_decoder

        fast = wire_decoder()
        records = fast(body, source) if fast is not None else None
        if records is None:
            return None
        return records, [], None

    def decode_proto(self, request: Any,
                     source: str) -> Tuple[List[SpanRecord], List[Any], Optional[Dict[Tuple[str, str], Any]]]:
        from ..otlp import records_from_proto

        errors: List[Any] = []
        records = records_from_proto(request, source, errors=errors)
        wire = None
        if self.forwarder is not None and records:
            wire = {}
            for rs in request.resource_spans:
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        wire[(s.trace_id.hex(), s.span_id.hex())] = (rs, ss, s)
        return records, errors, wire

    # -- the engine thread ---------------------------------------------------------------------------
    def _run_engine(self) -> None:
        """The engine thread. An exception while judging one trace closes that trace's episode
        (:meth:`Engine.abandon`), is counted in ``spanassert.internal_errors``, and the loop goes on
        with the rest; only what escapes that (a ``BaseException``) ends the thread, and then
        /health answers 503 and requests are refused."""
        next_tick = 0.0
        buffer = self.buffer
        try:
            while True:
                self.engine_beat = now = time.monotonic()
                # Wait for a request until the next tick, or until the least recently active trace
                # could be due, whichever comes first: a trace is judged when it settled, not up to
                # a tick later, and a tick that came due while the last one fed traces runs at once.
                wake = next_tick
                front = buffer.next_due()
                if front is not None and buffer.clock < front < wake:
                    wake = front
                batch = self.queue.get(timeout=min(max(0.0, wake - now), TICK_SECONDS))
                now = time.monotonic()
                if self.cut.is_set():
                    if batch is not None:
                        self.unjudged_spans += len(batch.records)
                    self.unjudged_spans += self.queue.discard()
                    break
                # The buffer's clock is arrival time: --settle and the rootless wait count from when
                # spans arrived, not from when a busy engine got to them, so a backlog does not
                # judge a trace before spans that arrived with it are taken in.
                if batch is not None:
                    self._take(batch, min(batch.arrived, now))
                elif self.queue.drained():
                    break
                if now >= wake:
                    for trace in buffer.due(self.queue.horizon(now)):
                        self._feed(trace)
                    if now >= next_tick:
                        # Attribute-keyed episodes (and traces whose root never came) close on the
                        # wall clock, as in the live processor.
                        self._guarded("serve_tick", self.engine.tick, time.time_ns())
                        next_tick = now + TICK_SECONDS
                self._after_work()
            for trace in self.buffer.drain():
                if self.cut.is_set():
                    self.unjudged_spans += len(trace)
                else:
                    self._feed(trace)
            self._close_all()
            self._after_work()
        except BaseException as exc:
            self._engine_error = exc
            self.sink.internal_error("serve_engine_thread", exc)
            raise

    def _guarded(self, kind: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001 - one failure must not stop judging
            self.sink.internal_error(kind, exc)
            return None

    def _close_all(self) -> None:
        """Decide every open episode at shutdown; one whose closing raises is abandoned."""
        close_all_contained(self.engine, CloseReason.SHUTDOWN, "serve")

    def _after_work(self) -> None:
        self.open_episodes = self.engine.open_count
        self.buffered_traces = len(self.buffer.pending)
        if self._forward_out:
            self._flush_forward()

    def _take(self, batch: Batch, now: float) -> None:
        engine = self.engine
        mapper = engine.mapper  # mapper.role(...) below: a native call (a bound method's goes through Python's)
        wire = batch.wire
        buffer = self.buffer
        pending = buffer.pending
        add_many = buffer.add_many
        sides = self._sides
        precheck = self._precheck
        forwarding = self.forwarder is not None
        max_spans = self.options.max_trace_spans
        max_age = self.options.max_trace_seconds
        by_id: Optional[Dict[Tuple[str, str], SpanRecord]] = None
        # Each field of a record and of self read once per span (neither is a native class: every
        # read is an attribute lookup; set only in __init__, except buffered_spans, which _feed changes).
        # The spans buffered here are added to self.buffered_spans once, at the end (_feed subtracts
        # what it releases meanwhile: the sum is the same; health() may read it mid-batch, as it could).
        added = 0
        try:
            for r in batch.records:
                trace_id = r.trace_id
                span_id = r.span_id
                side = sides.get(trace_id)
                if side is None:
                    side = sides[trace_id] = _TraceSide()
                first = side.span_ids.get(span_id)
                if first is None:
                    side.span_ids[span_id] = r
                elif side.repeated(first, r):
                    self.duplicates += 1  # a retried request: the span is already here
                    continue
                if precheck:
                    name = r.name
                    attributes = r.attributes
                    role = mapper.role(name, attributes)
                    if role == ROLE_TOOL:
                        start_ns = r.start_ns
                        starts = side.tool_starts
                        # bisect_left and insort, without their calls when the call starts after those
                        # here (the common case: calls end, so arrive, in the order they start).
                        if not starts or starts[-1] < start_ns:
                            index = len(starts)
                            starts.append(start_ns)
                        else:
                            index = bisect_left(starts, start_ns)
                            starts.insert(index, start_ns)
                        try:
                            found = engine.precheck(trace_id, span_id, r.parent_span_id, name, attributes,
                                                    start_ns, r.end_ns, r.status_code, r.events, role=role,
                                                    index=index, keep=True)
                            if found:
                                # The agent (a metric attribute) is looked for only when there is something to report.
                                if by_id is None:
                                    by_id = {(x.trace_id, x.span_id): x for x in batch.records}
                                agent = _agent_in_batch(engine, r, by_id)
                                for v in found:
                                    v.agent = agent
                                    self.sink.early(v)
                        except Exception as exc:  # noqa: BLE001 - the assembled check judges it again
                            self.sink.internal_error("serve_precheck", exc)
                if forwarding:
                    side.wire[id(r)] = wire.get((trace_id, span_id)) if wire is not None and first is None else None
                added += 1
                for trace in add_many((r,), now):  # add(), without a call per span
                    self._feed(trace)
                p = pending.get(trace_id)
                if p is not None and (len(p.records) >= max_spans or now - p.first_seen_at >= max_age):
                    self._release_early(trace_id)
        finally:
            self.buffered_spans += added
        while self.buffered_spans > self.options.max_buffered_spans and pending:
            self._release_early(next(iter(pending)))  # the least recently active trace

    def _release_early(self, trace_id: str) -> None:
        """Judge a trace now, before it settled: it reached the span or time bound per trace (it
        may go on; what follows is judged in pieces, as late spans once its episode closed)."""
        records = self.buffer.release(trace_id)
        if records:
            self.traces_released_early += 1
            self.sink.overflow(OVERFLOW_TRACE_RELEASED_EARLY)
            self._feed(records)

    def _feed(self, records: List[SpanRecord]) -> None:
        self.buffered_spans -= len(records)
        side = self._sides.pop(records[0].trace_id, None)
        marks: Dict[int, List[Violation]] = {}
        try:
            judge_trace(self.engine, records, "serve", _marking(marks) if self.forwarder is not None else None)
        finally:
            self.engine.forget_precheck(records[0].trace_id)  # what its early checks kept
        if self.forwarder is None:
            return
        wire = side.wire if side is not None else {}
        for r in records:
            self._forward_out.append((r, wire.get(id(r)), marks.get(id(r))))

    def _flush_forward(self) -> None:
        """One forwarding request for everything released since the last one."""
        assert self.forwarder is not None
        items, self._forward_out = self._forward_out, []
        self.forwarder.submit(export_request(items), len(items))


def _marking(marks: Dict[int, List[Violation]]) -> Callable[[SpanRecord, SpanOutcome], None]:
    """What feed_trace calls with each span's outcome when forwarding: its violations, by id(span),
    go into ``marks``. (Not a closure inside Receiver._feed: mypyc cannot compile one in a method
    of a non-native class.)"""

    def on_outcome(r: SpanRecord, out: SpanOutcome) -> None:
        if out.violations:
            marks[id(r)] = out.violations

    return on_outcome


def _agent_in_batch(engine: Engine, record: SpanRecord, by_id: Dict[Tuple[str, str], SpanRecord]) -> Optional[str]:
    """The agent of a tool span judged on arrival: the nearest agent span among its ancestors in
    the same request (the root usually ends, and so is exported, with its calls). None when no
    ancestor is there; the metric then has no agent attribute."""
    parent = record.parent_span_id
    for _ in range(64):  # bounded: a cycle in hostile input must not hang the receiver
        if not parent:
            return None
        up = by_id.get((record.trace_id, parent))
        if up is None:
            return None
        if engine.mapper.role(up.name, up.attributes) == ROLE_AGENT:
            return engine.mapper.agent_name(up.name, up.attributes)
        parent = up.parent_span_id
    return None
