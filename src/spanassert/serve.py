"""``spanassert serve``: an OTLP receiver (gRPC and HTTP) running the same engine as live and replay.

Put it behind an OpenTelemetry Collector (or point SDK exporters at it). Spans arrive after they
ended, in any order, so each trace is held in a :class:`~spanassert.assembly.TraceBuffer` until it
looks complete (``--settle`` seconds after its root arrived; the rules file's idle timeout, capped,
for traces whose root never comes) and then fed with :func:`~spanassert.assembly.feed_trace` —
exactly what replay does, so the verdicts are replay's. Rules whose failure at a call depends on
that call alone (``order_free``) are checked on arrival with :meth:`Engine.precheck`, so a forbidden
call is reported seconds earlier; the later, assembled check does not report it a second time.

Threads: request threads (HTTP, gRPC) decode each request once and put its spans on a bounded
intake queue; one engine thread owns the engine, the trace buffer and the forwarding batches (the
engine is not thread-safe); one forwarding thread posts to ``--forward``. Nothing is unbounded:
the intake queue, the trace buffer, the forwarding queue and the early-report memory all have caps,
and when the intake queue is full senders are told to retry (HTTP 503 + ``Retry-After``, gRPC
``RESOURCE_EXHAUSTED`` + ``RetryInfo``), which the OTLP exporters do.

Test hook: while the file named by ``SPANASSERT_SERVE_TEST_PAUSE_FILE`` exists, the engine thread
takes nothing from the intake queue (to fill it deterministically).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
import zlib
from bisect import bisect_left, insort
from collections import OrderedDict, deque
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Deque, Dict, List, Optional, TextIO, Tuple

from .assembly import TraceBuffer, feed_trace
from .config.model import Config
from .emit import EVENT_NAME, Telemetry, violation_event_attributes
from .engine import ROLE_TOOL, Engine, SpanOutcome
from .model import CloseReason, SpanRecord, Verdict
from .replay import Report, ReportSink
from .results import EpisodeResult, Violation

TRACES_PATH = "/v1/traces"
HEALTH_PATH = "/health"
DEFAULT_GRPC_ENDPOINT = "0.0.0.0:4317"
DEFAULT_HTTP_ENDPOINT = "0.0.0.0:4318"
DEFAULT_MAX_REQUEST_BYTES = 16 * 1024 * 1024
DEFAULT_QUEUE_SPANS = 100_000
DEFAULT_SETTLE_SECONDS = 2.0
# A trace whose root never arrives is judged after the rules file's idle timeout, but a receiver
# should not sit on spans for five minutes by default.
DEFAULT_ROOTLESS_WAIT_CAP = 60.0
DEFAULT_FORWARD_QUEUE_SPANS = 100_000
EARLY_MEMORY = 100_000  # (test, assertion, span) keys of violations reported on arrival
PAUSE_ENV = "SPANASSERT_SERVE_TEST_PAUSE_FILE"

CT_PROTOBUF = "application/x-protobuf"
CT_JSON = "application/json"

# google.rpc.Code
CODE_INVALID_ARGUMENT = 3
CODE_NOT_FOUND = 5
CODE_RESOURCE_EXHAUSTED = 8
CODE_UNIMPLEMENTED = 12
CODE_UNAVAILABLE = 14

log = logging.getLogger("spanassert.serve")


class EndpointError(ValueError):
    """A ``HOST:PORT`` that cannot be used, with how to fix it."""


def parse_endpoint(text: str, option: str) -> Tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` for IPv6); port 0 picks a free port."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdigit():
        raise EndpointError(f"{option} {text!r}: expected HOST:PORT, e.g. 127.0.0.1:4318 (port 0 picks a free port)")
    port = int(port_text)
    if port > 65535:
        raise EndpointError(f"{option} {text!r}: port {port} is out of range 0-65535")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host or "0.0.0.0", port


def _hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


# -- intake ---------------------------------------------------------------------------------------


class Batch:
    """The usable spans of one request, and (when forwarding) their protobuf form."""

    __slots__ = ("records", "wire")

    def __init__(self, records: List[SpanRecord], wire: Optional[Dict[Tuple[str, str], Any]]) -> None:
        self.records = records
        # (trace id, span id) -> (ResourceSpans, ScopeSpans, Span) of a protobuf request; None for JSON.
        self.wire = wire


class IntakeQueue:
    """Requests waiting for the engine thread, bounded by their total number of spans."""

    def __init__(self, max_spans: int) -> None:
        self.max_spans = max(1, max_spans)
        self._items: Deque[Batch] = deque()
        self._cond = threading.Condition()
        self.depth = 0  # spans queued
        self.accepted = 0  # spans ever accepted
        self.closed = False

    def put(self, batch: Batch) -> bool:
        n = len(batch.records)
        with self._cond:
            if self.closed or self.depth + n > self.max_spans:
                return False
            self._items.append(batch)
            self.depth += n
            self.accepted += n
            self._cond.notify()
            return True

    def get(self, timeout: float) -> Optional[Batch]:
        with self._cond:
            if not self._items and not self.closed:
                self._cond.wait(timeout)
            if not self._items:
                return None
            batch = self._items.popleft()
            self.depth -= len(batch.records)
            return batch

    def close(self) -> None:
        """No more puts; what is queued is still handed out."""
        with self._cond:
            self.closed = True
            self._cond.notify_all()

    def drained(self) -> bool:
        with self._cond:
            return self.closed and not self._items


# -- protobuf helpers -----------------------------------------------------------------------------


def _set_any(target: Any, value: Any) -> None:
    if isinstance(value, str):
        target.string_value = value
    elif isinstance(value, bool):
        target.bool_value = value
    elif isinstance(value, int):
        target.int_value = value
    elif isinstance(value, float):
        target.double_value = value
    elif isinstance(value, (bytes, bytearray)):
        target.bytes_value = bytes(value)
    elif isinstance(value, (list, tuple)):
        arr = target.array_value
        arr.SetInParent()
        for item in value:
            _set_any(arr.values.add(), item)
    elif isinstance(value, dict):
        kvl = target.kvlist_value
        kvl.SetInParent()
        for k, item in value.items():
            kv = kvl.values.add()
            kv.key = str(k)
            _set_any(kv.value, item)
    # None: an empty AnyValue


def _set_attributes(target: Any, attributes: Dict[str, Any]) -> None:
    for k, v in attributes.items():
        kv = target.add()
        kv.key = k
        _set_any(kv.value, v)


def _span_from_record(span: Any, r: SpanRecord) -> None:
    """A protobuf Span rebuilt from a decoded record (JSON requests: links and trace state are not
    kept by the decoder, so they are not forwarded)."""
    span.trace_id = bytes.fromhex(r.trace_id)
    span.span_id = bytes.fromhex(r.span_id)
    if r.parent_span_id:
        span.parent_span_id = bytes.fromhex(r.parent_span_id)
    span.name = r.name
    span.kind = r.kind
    span.start_time_unix_nano = r.start_ns
    span.end_time_unix_nano = r.end_ns
    _set_attributes(span.attributes, r.attributes)
    span.status.code = r.status_code
    if r.status_message:
        span.status.message = r.status_message
    for e in r.events:
        ev = span.events.add()
        ev.name = e.name
        ev.time_unix_nano = e.timestamp
        _set_attributes(ev.attributes, dict(e.attributes))


def _add_violation_events(span: Any, violations: List[Violation], time_ns: int) -> None:
    for v in violations:
        ev = span.events.add()
        ev.name = EVENT_NAME
        ev.time_unix_nano = time_ns
        _set_attributes(ev.attributes, violation_event_attributes(v))


def _status_message(code: int, message: str, retry_after_s: Optional[int] = None) -> Any:
    from google.rpc import status_pb2

    st = status_pb2.Status(code=code, message=message)
    if retry_after_s is not None:
        from google.rpc import error_details_pb2

        st.details.add().Pack(error_details_pb2.RetryInfo(retry_delay={"seconds": retry_after_s}))
    return st


def _rejection_message(errors: List[Any]) -> str:
    first = errors[0]
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{len(errors)} span(s) rejected: {first}{more}"


# -- forwarding -----------------------------------------------------------------------------------


class Forwarder:
    """Posts protobuf ``ExportTraceServiceRequest``s to ``<url>/v1/traces`` on its own thread, with
    retries on the statuses the OTLP spec calls retryable; its queue is bounded in spans and what
    does not fit (or cannot be delivered) is counted as dropped."""

    RETRYABLE = (429, 502, 503, 504)

    def __init__(self, base_url: str, *, max_spans: int = DEFAULT_FORWARD_QUEUE_SPANS, attempts: int = 5,
                 timeout: float = 10.0) -> None:
        base = base_url.rstrip("/")
        self.url = base if base.endswith(TRACES_PATH) else base + TRACES_PATH
        self.max_spans = max(1, max_spans)
        self.attempts = attempts
        self.timeout = timeout
        self._items: Deque[Tuple[Any, int]] = deque()
        self._cond = threading.Condition()
        self._pending = 0  # spans queued or being sent
        self._stop = threading.Event()
        self.sent = 0
        self.dropped = 0
        self._warned = False
        self._thread = threading.Thread(target=self._run, name="spanassert-forward", daemon=True)
        self._thread.start()

    def submit(self, request: Any, spans: int) -> bool:
        with self._cond:
            if self._stop.is_set() or self._pending + spans > self.max_spans:
                self.dropped += spans
                self._warn(f"forwarding queue full ({self.max_spans} spans): {spans} span(s) dropped")
                return False
            self._items.append((request, spans))
            self._pending += spans
            self._cond.notify()
            return True

    def flush(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.1))
        return True

    def stop(self) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        self._thread.join(timeout=5)
        with self._cond:
            for _, n in self._items:
                self.dropped += n
            self._items.clear()

    def _warn(self, text: str) -> None:
        if not self._warned:
            self._warned = True
            log.warning("spanassert serve: %s (further forwarding problems are only counted)", text)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._items and not self._stop.is_set():
                    self._cond.wait(0.5)
                if self._stop.is_set():
                    return
                request, n = self._items.popleft()
            ok = False
            try:
                ok = self._post(request.SerializeToString())
            except Exception as exc:  # noqa: BLE001 - the forwarding thread must survive anything
                self._warn(f"forwarding to {self.url} failed: {exc!r}")
            with self._cond:
                if ok:
                    self.sent += n
                else:
                    self.dropped += n
                self._pending -= n
                self._cond.notify_all()

    def _post(self, body: bytes) -> bool:
        delay = 0.5
        for attempt in range(self.attempts):
            req = urllib.request.Request(self.url, data=body, method="POST",
                                         headers={"Content-Type": CT_PROTOBUF})
            retry_after: Optional[float] = None
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    resp.read()
                    return True
            except urllib.error.HTTPError as exc:
                if exc.code not in self.RETRYABLE:
                    self._warn(f"{self.url} answered HTTP {exc.code}; spans not forwarded")
                    return False
                ra = exc.headers.get("Retry-After") if exc.headers else None
                if ra and ra.strip().isdigit():
                    retry_after = min(float(ra), 30.0)
            except (urllib.error.URLError, OSError) as exc:
                self._warn(f"cannot reach {self.url}: {exc}")
            if attempt + 1 < self.attempts and self._stop.wait(retry_after if retry_after is not None else delay):
                return False
            delay = min(delay * 2, 8.0)
        return False


# -- the engine's sink ----------------------------------------------------------------------------


class ServeSink(Telemetry):
    """Telemetry (metrics, logs) plus one stderr line per violation, reported once: a violation
    found on arrival (:meth:`early`) is not reported again when the assembled trace confirms it.
    With a report, also collects what replay's report would (verdicts, violations, coverage)."""

    def __init__(self, *, meter_provider: Any, report: Optional[Report], quiet: bool,
                 out: Optional[TextIO] = None, logger_provider: Any = None) -> None:
        super().__init__(meter_provider=meter_provider, logger_provider=logger_provider)
        self.report_sink = ReportSink(report, None) if report is not None else None
        self.quiet = quiet
        self.out = out
        self._early: "OrderedDict[Tuple[str, int, Optional[str]], None]" = OrderedDict()
        self._count_lock = threading.Lock()
        self.violations_reported = 0
        self.episodes_closed = 0
        self.episodes_failed = 0
        self.episodes_inconclusive = 0

    @staticmethod
    def _key(v: Violation) -> Tuple[str, int, Optional[str]]:
        return (v.test_id, v.assertion_index, v.span_id)

    def early(self, v: Violation) -> None:
        key = self._key(v)
        if key in self._early:
            return
        self._early[key] = None
        while len(self._early) > EARLY_MEMORY:
            self._early.popitem(last=False)
        self._alert(v)

    def violation(self, v: Violation) -> None:
        if self.report_sink is not None:
            self.report_sink.violation(v)
        key = self._key(v)
        if key in self._early:
            del self._early[key]  # confirmed: already reported on arrival
            return
        self._alert(v)

    def _alert(self, v: Violation) -> None:
        with self._count_lock:
            self.violations_reported += 1
        if not self.quiet and not v.shadow:
            out = self.out or sys.stderr
            text = " ".join(v.message.split())
            tool = f" tool={v.tool}" if v.tool else ""
            late = " (late span)" if v.late else ""
            try:
                out.write(f"spanassert: violation [{v.severity}] {v.test_id} {v.assertion_type}#{v.assertion_index}"
                          f"{tool}: {text} (trace {v.trace_id}, span {v.span_id}){late}\n")
                out.flush()
            except (OSError, ValueError):
                pass
        super().violation(v)

    def episode_closed(self, result: EpisodeResult) -> None:
        self.episodes_closed += 1
        verdict = result.verdict
        if verdict is Verdict.FAILED:
            self.episodes_failed += 1
        elif verdict is Verdict.INCONCLUSIVE:
            self.episodes_inconclusive += 1
        if self.report_sink is not None:
            self.report_sink.episode_closed(result)
        super().episode_closed(result)

    def unreadable(self, reason: str, tool: Optional[str]) -> None:
        if self.report_sink is not None:
            self.report_sink.unreadable(reason, tool)
        super().unreadable(reason, tool)

    def late_span(self) -> None:
        if self.report_sink is not None:
            self.report_sink.late_span()
        super().late_span()

    def overflow(self, kind: str) -> None:
        if self.report_sink is not None:
            self.report_sink.overflow(kind)
        super().overflow(kind)


# -- the receiver ---------------------------------------------------------------------------------


class _TraceSide:
    """What the receiver keeps per buffered trace beside the records: span ids seen (retried
    requests repeat spans), tool-call start times (a call's position for early messages) and the
    protobuf spans to forward."""

    __slots__ = ("span_ids", "tool_starts", "wire")

    def __init__(self) -> None:
        self.span_ids: set = set()
        self.tool_starts: List[int] = []
        self.wire: Dict[str, Any] = {}


class ServeOptions:
    __slots__ = ("grpc_endpoint", "http_endpoint", "max_request_bytes", "queue_size", "settle", "rootless_wait",
                 "forward", "forward_queue_size", "report_json", "quiet")

    def __init__(self, *, grpc_endpoint: Optional[str] = DEFAULT_GRPC_ENDPOINT,
                 http_endpoint: Optional[str] = DEFAULT_HTTP_ENDPOINT,
                 max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES, queue_size: int = DEFAULT_QUEUE_SPANS,
                 settle: float = DEFAULT_SETTLE_SECONDS, rootless_wait: Optional[float] = None,
                 forward: Optional[str] = None, forward_queue_size: int = DEFAULT_FORWARD_QUEUE_SPANS,
                 report_json: Optional[str] = None, quiet: bool = False) -> None:
        self.grpc_endpoint = grpc_endpoint
        self.http_endpoint = http_endpoint
        self.max_request_bytes = max_request_bytes
        self.queue_size = queue_size
        self.settle = settle
        self.rootless_wait = rootless_wait
        self.forward = forward
        self.forward_queue_size = forward_queue_size
        self.report_json = report_json
        self.quiet = quiet


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
                              quiet=options.quiet, logger_provider=logger_provider)
        self.engine = Engine(config, self.sink)
        self._precheck = self.engine.has_precheck
        idle = options.rootless_wait
        if idle is None:
            idle = min(float(config.episodes.idle_timeout), DEFAULT_ROOTLESS_WAIT_CAP)
        self.buffer = TraceBuffer(settle=max(0.0, options.settle), idle=max(0.0, idle),
                                  max_traces=max(config.episodes.max_open, 1) * 4)
        self._sides: Dict[str, _TraceSide] = {}
        self.queue = IntakeQueue(options.queue_size)
        self.forwarder = Forwarder(options.forward, max_spans=options.forward_queue_size) if options.forward else None
        self._forward_out: List[Tuple[SpanRecord, Any, Optional[List[Violation]]]] = []
        self.stopping = False
        self._stats_lock = threading.Lock()
        self.requests = 0
        self.spans_rejected = 0
        self.spans_refused = 0  # spans of requests answered 503 / RESOURCE_EXHAUSTED
        self.duplicates = 0
        self.open_episodes = 0
        self.buffered_traces = 0
        self._engine_thread = threading.Thread(target=self._run_engine, name="spanassert-engine", daemon=True)
        self._engine_error: Optional[BaseException] = None
        self.http_server: Optional[ThreadingHTTPServer] = None
        self._http_thread: Optional[threading.Thread] = None
        self.grpc_server: Any = None
        self.http_address: Optional[str] = None
        self.grpc_address: Optional[str] = None

    # -- lifecycle -------------------------------------------------------------------------------
    def _start_grpc(self, endpoint: str) -> None:
        _start_grpc_impl(self, endpoint)

    def _start_http(self, endpoint: str) -> None:
        _start_http_impl(self, endpoint)

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
        self.out.flush()

    def stop(self, timeout: float = 30.0) -> None:
        """Graceful stop: refuse new requests, drain the queue, decide every open episode, flush
        forwarding; then close the ports."""
        self.stopping = True
        self.queue.close()
        self._engine_thread.join(timeout)
        if self.forwarder is not None:
            self.forwarder.flush(timeout=min(timeout, 10.0))
            self.forwarder.stop()
        if self.http_server is not None:
            self.http_server.shutdown()
            self.http_server.server_close()
        if self.grpc_server is not None:
            self.grpc_server.stop(grace=1.0).wait(2.0)

    def summary(self) -> str:
        s = self.sink
        text = (f"spanassert serve: stopped; {self.queue.accepted} span(s) accepted in {self.requests} request(s), "
                f"{self.spans_rejected} rejected, {self.spans_refused} refused (queue full or stopping); "
                f"{s.episodes_closed} episode(s) decided ({s.episodes_failed} failed, "
                f"{s.episodes_inconclusive} inconclusive); {s.violations_reported} violation(s)")
        if self.forwarder is not None:
            text += f"; forwarded {self.forwarder.sent} span(s), dropped {self.forwarder.dropped}"
        return text

    def report_dict(self) -> Dict[str, Any]:
        assert self.report is not None
        self.report.spans_read = self.queue.accepted
        d = self.report.to_dict()
        d["receiver"] = {
            "requests": self.requests,
            "spans_accepted": self.queue.accepted,
            "spans_rejected": self.spans_rejected,
            "spans_refused": self.spans_refused,
            "duplicate_spans": self.duplicates,
            "violations_reported": self.sink.violations_reported,
            "forwarded_spans": self.forwarder.sent if self.forwarder else 0,
            "forward_dropped_spans": self.forwarder.dropped if self.forwarder else 0,
        }
        return d

    def health(self) -> Dict[str, Any]:
        return {
            "status": "stopping" if self.stopping else "ok",
            "open_episodes": self.open_episodes,
            "buffered_traces": self.buffered_traces,
            "queue_depth": self.queue.depth,
            "queue_capacity": self.queue.max_spans,
            "spans_received": self.queue.accepted,
            "spans_rejected": self.spans_rejected,
            "violations": self.sink.violations_reported,
            "engine_alive": self._engine_thread.is_alive() or self.stopping,
        }

    # -- intake (request threads) ------------------------------------------------------------------
    def accept(self, records: List[SpanRecord], wire: Optional[Dict[Tuple[str, str], Any]],
               rejected: int) -> bool:
        """Queue one request's usable spans; False when the queue is full or we are stopping."""
        with self._stats_lock:
            self.requests += 1
            self.spans_rejected += rejected
        if not records:
            return not self.stopping
        if self.stopping or not self.queue.put(Batch(records, wire)):
            with self._stats_lock:
                self.spans_refused += len(records)
            return False
        return True

    def decode_proto(self, request: Any, source: str) -> Tuple[List[SpanRecord], List[Any], Optional[Dict]]:
        from .otlp import records_from_proto

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
        pause = os.environ.get(PAUSE_ENV)
        next_tick = 0.0
        try:
            while True:
                while pause and os.path.exists(pause):
                    time.sleep(0.02)
                batch = self.queue.get(timeout=0.1)
                now = time.monotonic()
                if batch is not None:
                    self._take(batch, now)
                elif self.queue.drained():
                    break
                if now >= next_tick:
                    for trace in self.buffer.due(now):
                        self._feed(trace)
                    # Attribute-keyed episodes (and traces whose root never came) close on the
                    # wall clock, as in the live processor.
                    self.engine.tick(time.time_ns())
                    next_tick = now + 0.1
                self._after_work()
            for trace in self.buffer.drain():
                self._feed(trace)
            self.engine.close_all(CloseReason.SHUTDOWN)
            self._after_work()
        except BaseException as exc:  # noqa: BLE001 - report, never hang the shutdown
            self._engine_error = exc
            self.sink.internal_error("serve_engine_thread", exc)
            raise

    def _after_work(self) -> None:
        self.open_episodes = self.engine.open_count
        self.buffered_traces = len(self.buffer.pending)
        if self._forward_out:
            self._flush_forward()

    def _take(self, batch: Batch, now: float) -> None:
        engine = self.engine
        role_of = engine.mapper.role
        wire = batch.wire
        for r in batch.records:
            side = self._sides.get(r.trace_id)
            if side is None:
                side = self._sides[r.trace_id] = _TraceSide()
            elif r.span_id in side.span_ids:
                self.duplicates += 1  # a retried request: the span is already here
                continue
            side.span_ids.add(r.span_id)
            if self._precheck:
                role = role_of(r.name, r.attributes)
                if role == ROLE_TOOL:
                    starts = side.tool_starts
                    index = bisect_left(starts, r.start_ns)
                    insort(starts, r.start_ns)
                    for v in engine.precheck(r.trace_id, r.span_id, r.parent_span_id, r.name, r.attributes,
                                             r.start_ns, r.end_ns, r.status_code, r.events, role=role,
                                             index=index):
                        self.sink.early(v)
            if self.forwarder is not None:
                side.wire[r.span_id] = wire.get((r.trace_id, r.span_id)) if wire is not None else None
            for trace in self.buffer.add(r, now):
                self._feed(trace)

    def _feed(self, records: List[SpanRecord]) -> None:
        side = self._sides.pop(records[0].trace_id, None)
        if self.forwarder is None:
            feed_trace(self.engine, records)
            return
        marks: Dict[str, List[Violation]] = {}

        def on_outcome(r: SpanRecord, out: SpanOutcome) -> None:
            if out.violations:
                marks[r.span_id] = out.violations

        feed_trace(self.engine, records, on_outcome)
        wire = side.wire if side is not None else {}
        for r in records:
            self._forward_out.append((r, wire.get(r.span_id), marks.get(r.span_id)))

    def _flush_forward(self) -> None:
        """One forwarding request for everything released since the last one, grouped by resource
        and scope; offending spans get a ``gen_ai.evaluation.result`` event per violation."""
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        assert self.forwarder is not None
        items, self._forward_out = self._forward_out, []
        req = ExportTraceServiceRequest()
        groups: Dict[Tuple[int, ...], Any] = {}
        resources: Dict[int, Any] = {}
        for r, w, violations in items:
            if w is not None:
                rs_src, ss_src, span_src = w
                rkey: Tuple[int, ...] = (id(rs_src),)
                rs = resources.get(rkey[0])
                if rs is None:
                    rs = req.resource_spans.add()
                    rs.resource.CopyFrom(rs_src.resource)
                    rs.schema_url = rs_src.schema_url
                    resources[rkey[0]] = rs
                gkey = (id(rs_src), id(ss_src))
                ss = groups.get(gkey)
                if ss is None:
                    ss = rs.scope_spans.add()
                    ss.scope.CopyFrom(ss_src.scope)
                    ss.schema_url = ss_src.schema_url
                    groups[gkey] = ss
                span = ss.spans.add()
                span.CopyFrom(span_src)
            else:
                res_id = id(r.resource)
                rs = resources.get(res_id)
                if rs is None:
                    rs = req.resource_spans.add()
                    _set_attributes(rs.resource.attributes, r.resource)
                    resources[res_id] = rs
                gkey = (res_id, hash(r.scope), 1)
                ss = groups.get(gkey)
                if ss is None:
                    ss = rs.scope_spans.add()
                    ss.scope.name = r.scope
                    groups[gkey] = ss
                span = ss.spans.add()
                _span_from_record(span, r)
            if violations:
                _add_violation_events(span, violations, r.end_ns or time.time_ns())
        self.forwarder.submit(req, len(items))


# -- HTTP -------------------------------------------------------------------------------------------


class _BodyError(Exception):
    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def _media_type(header: Optional[str]) -> str:
    return (header or "").split(";", 1)[0].strip().lower()


def make_http_handler(receiver: Receiver) -> type:
    limit = receiver.options.max_request_bytes

    class OTLPHTTPHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "spanassert"
        # A client that stalls mid-request (or keeps an idle connection) gives its thread back.
        timeout = 30

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
            pass  # one line per request would drown the violations

        def handle(self) -> None:
            # A client that vanishes mid-request is routine, not a traceback on stderr per connection
            # (socketserver's default), which a hostile client could use to flood the log.
            try:
                super().handle()
            except ConnectionError:
                self.close_connection = True

        # -- responses --
        def _send(self, status: int, body: bytes, content_type: str, headers: Tuple[Tuple[str, str], ...] = ()) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for k, v in headers:
                self.send_header(k, v)
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)

        def _wants_json(self) -> bool:
            return _media_type(self.headers.get("Content-Type")) == CT_JSON

        def _error(self, status: int, code: int, message: str, headers: Tuple[Tuple[str, str], ...] = (),
                   close: bool = False) -> None:
            if close:
                self.close_connection = True
            if self._wants_json():
                body = json.dumps({"code": code, "message": message}).encode()
                self._send(status, body, CT_JSON, headers)
            else:
                self._send(status, _status_message(code, message).SerializeToString(), CT_PROTOBUF, headers)

        def _path(self) -> str:
            return self.path.split("?", 1)[0]

        # -- methods --
        def do_GET(self) -> None:  # noqa: N802 - stdlib naming
            path = self._path()
            if path == HEALTH_PATH:
                body = json.dumps(receiver.health()).encode()
                self._send(200 if not receiver.stopping else 503, body, CT_JSON)
            elif path == TRACES_PATH:
                self._error(405, CODE_UNIMPLEMENTED, f"{TRACES_PATH} accepts POST only", (("Allow", "POST"),))
            else:
                self._error(404, CODE_NOT_FOUND, f"no such path {path!r}: OTLP traces go to POST {TRACES_PATH}")

        def _other_method(self) -> None:
            path = self._path()
            if path in (TRACES_PATH, HEALTH_PATH):
                allow = "POST" if path == TRACES_PATH else "GET"
                self._error(405, CODE_UNIMPLEMENTED, f"{path} does not accept {self.command}; use {allow}",
                            (("Allow", allow),), close=True)
            else:
                self._error(404, CODE_NOT_FOUND, f"no such path {path!r}: OTLP traces go to POST {TRACES_PATH}",
                            close=True)

        do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _other_method  # noqa: N815

        def do_POST(self) -> None:  # noqa: N802
            path = self._path()
            if path != TRACES_PATH:
                self._other_method()
                return
            ctype = _media_type(self.headers.get("Content-Type"))
            if ctype not in (CT_PROTOBUF, CT_JSON):
                self._error(415, CODE_INVALID_ARGUMENT,
                            f"unsupported Content-Type {self.headers.get('Content-Type')!r}: send "
                            f"{CT_PROTOBUF} or {CT_JSON}", close=True)
                return
            if receiver.stopping:
                self._error(503, CODE_UNAVAILABLE, "spanassert serve is shutting down", (("Retry-After", "1"),),
                            close=True)
                return
            try:
                body = self._body()
                records, errors, wire = self._decode(ctype, body)
            except _BodyError as exc:
                self._error(exc.status, exc.code, exc.message, close=exc.status == 413 or exc.status == 411)
                return
            if not receiver.accept(records, wire, len(errors)):
                self._error(503, CODE_UNAVAILABLE,
                            "spanassert serve intake queue is full; retry later" if not receiver.stopping
                            else "spanassert serve is shutting down", (("Retry-After", "1"),))
                return
            self._success(ctype, errors)

        def _success(self, ctype: str, errors: List[Any]) -> None:
            if ctype == CT_JSON:
                doc: Dict[str, Any] = {}
                if errors:
                    doc["partialSuccess"] = {"rejectedSpans": str(len(errors)),
                                             "errorMessage": _rejection_message(errors)}
                self._send(200, json.dumps(doc).encode(), CT_JSON)
                return
            from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

            resp = ExportTraceServiceResponse()
            if errors:
                resp.partial_success.rejected_spans = len(errors)
                resp.partial_success.error_message = _rejection_message(errors)
            self._send(200, resp.SerializeToString(), CT_PROTOBUF)

        # -- body --
        def _body(self) -> bytes:
            if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                raw = self._read_chunked()
            else:
                length = self.headers.get("Content-Length")
                if length is None:
                    raise _BodyError(411, CODE_INVALID_ARGUMENT, "Content-Length is required")
                try:
                    n = int(length)
                except ValueError:
                    raise _BodyError(400, CODE_INVALID_ARGUMENT, f"Content-Length {length!r} is not a number") from None
                if n < 0:
                    raise _BodyError(400, CODE_INVALID_ARGUMENT, f"Content-Length {n} is negative")
                if n > limit:
                    raise _BodyError(413, CODE_INVALID_ARGUMENT,
                                     f"request body is {n} bytes, over the limit of {limit} (--max-request-bytes)")
                raw = self.rfile.read(n)
                if len(raw) != n:
                    raise _BodyError(400, CODE_INVALID_ARGUMENT,
                                     f"request body ended after {len(raw)} of {n} bytes (Content-Length)")
            encoding = (self.headers.get("Content-Encoding") or "identity").strip().lower()
            if encoding in ("gzip", "x-gzip"):
                return _gunzip(raw, limit)
            if encoding not in ("identity", ""):
                raise _BodyError(415, CODE_INVALID_ARGUMENT,
                                 f"unsupported Content-Encoding {encoding!r}: send gzip or no encoding")
            return raw

        def _read_chunked(self) -> bytes:
            parts: List[bytes] = []
            total = 0
            while True:
                line = self.rfile.readline(1024)
                try:
                    size = int(line.split(b";", 1)[0].strip() or b"x", 16)
                except ValueError:
                    raise _BodyError(400, CODE_INVALID_ARGUMENT, "malformed chunked encoding") from None
                if size == 0:
                    while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(parts)
                total += size
                if total > limit:
                    raise _BodyError(413, CODE_INVALID_ARGUMENT,
                                     f"request body is over the limit of {limit} bytes (--max-request-bytes)")
                parts.append(self.rfile.read(size))
                self.rfile.readline(8)

        def _decode(self, ctype: str, body: bytes) -> Tuple[List[SpanRecord], List[Any], Optional[Dict]]:
            from .otlp import SpanDecodeError, records_from_json

            source = "otlp-http"
            if ctype == CT_PROTOBUF:
                from google.protobuf.message import DecodeError
                from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

                try:
                    request = ExportTraceServiceRequest.FromString(body)
                except (DecodeError, RecursionError, ValueError) as exc:
                    raise _BodyError(400, CODE_INVALID_ARGUMENT,
                                     f"body is not a protobuf ExportTraceServiceRequest: {exc}") from None
                return receiver.decode_proto(request, source)
            try:
                obj = json.loads(body.decode("utf-8"))
            except UnicodeDecodeError as exc:
                raise _BodyError(400, CODE_INVALID_ARGUMENT, f"JSON body is not UTF-8 (byte {exc.start})") from None
            except json.JSONDecodeError as exc:
                raise _BodyError(400, CODE_INVALID_ARGUMENT,
                                 f"body is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
            except RecursionError:
                raise _BodyError(400, CODE_INVALID_ARGUMENT, "JSON body is nested too deeply") from None
            errors: List[Any] = []
            try:
                records = records_from_json(obj, source, errors=errors)
            except SpanDecodeError as exc:
                raise _BodyError(400, CODE_INVALID_ARGUMENT, f"not an OTLP JSON traces request: {exc}") from None
            return records, errors, None

    return OTLPHTTPHandler


def _gunzip(raw: bytes, limit: int) -> bytes:
    """Decompress with the size limit applied to the output (a gzip bomb stops at ``limit``)."""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = d.decompress(raw, limit + 1)
    except zlib.error as exc:
        raise _BodyError(400, CODE_INVALID_ARGUMENT, f"Content-Encoding gzip, but the body is not gzip: {exc}") from None
    if len(out) > limit or d.unconsumed_tail:
        raise _BodyError(413, CODE_INVALID_ARGUMENT,
                         f"gzip body decompresses to over {limit} bytes, the limit (--max-request-bytes)")
    if not d.eof:
        raise _BodyError(400, CODE_INVALID_ARGUMENT, "gzip body is truncated")
    return out


# -- gRPC ----------------------------------------------------------------------------------------


def _make_grpc_servicer(receiver: Receiver) -> Any:
    import grpc
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
        ExportTraceServiceResponse,
    )

    class TraceService(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request: Any, context: Any) -> Any:  # noqa: N802 - generated name
            if receiver.stopping:
                context.abort(grpc.StatusCode.UNAVAILABLE, "spanassert serve is shutting down")
            records, errors, wire = receiver.decode_proto(request, "otlp-grpc")
            if not receiver.accept(records, wire, len(errors)):
                if receiver.stopping:
                    context.abort(grpc.StatusCode.UNAVAILABLE, "spanassert serve is shutting down")
                from google.rpc import error_details_pb2

                status = _status_message(CODE_RESOURCE_EXHAUSTED, "spanassert serve intake queue is full; retry later", 1)
                context.set_trailing_metadata((
                    ("grpc-status-details-bin", status.SerializeToString()),
                    # The Python OTLP exporter reads this key for its backoff.
                    ("google.rpc.retryinfo-bin",
                     error_details_pb2.RetryInfo(retry_delay={"seconds": 1}).SerializeToString()),
                ))
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "spanassert serve intake queue is full; retry later")
            resp = ExportTraceServiceResponse()
            if errors:
                resp.partial_success.rejected_spans = len(errors)
                resp.partial_success.error_message = _rejection_message(errors)
            return resp

    servicer = TraceService()

    def export_raw(body: bytes, context: Any) -> Any:
        # Parsed here, not by gRPC, so that a malformed request is INVALID_ARGUMENT, not INTERNAL.
        try:
            request = ExportTraceServiceRequest.FromString(body)
        except (DecodeError, RecursionError, ValueError) as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"not a protobuf ExportTraceServiceRequest: {exc}")
        return servicer.Export(request, context)

    handler = grpc.method_handlers_generic_handler(
        "opentelemetry.proto.collector.trace.v1.TraceService",
        {"Export": grpc.unary_unary_rpc_method_handler(
            export_raw, request_deserializer=None, response_serializer=ExportTraceServiceResponse.SerializeToString)},
    )
    return handler


def _start_grpc_impl(receiver: Receiver, endpoint: str) -> None:
    import grpc

    host, port = parse_endpoint(endpoint, "--grpc-endpoint")
    limit = receiver.options.max_request_bytes
    server = grpc.server(
        ThreadPoolExecutor(max_workers=8, thread_name_prefix="spanassert-grpc"),
        options=[("grpc.max_receive_message_length", limit), ("grpc.so_reuseport", 0)],
    )
    server.add_generic_rpc_handlers((_make_grpc_servicer(receiver),))
    try:
        bound = server.add_insecure_port(_hostport(host, port))
    except RuntimeError as exc:
        raise EndpointError(f"--grpc-endpoint {endpoint}: cannot listen there ({exc}); pick another address") from None
    if not bound:
        raise EndpointError(f"--grpc-endpoint {endpoint}: cannot listen there (address in use?); pick another address")
    server.start()
    receiver.grpc_server = server
    receiver.grpc_address = _hostport(host, bound)


def _start_http_impl(receiver: Receiver, endpoint: str) -> None:
    host, port = parse_endpoint(endpoint, "--http-endpoint")
    handler = make_http_handler(receiver)
    try:
        server = ThreadingHTTPServer((host, port), handler)
    except OSError as exc:
        raise EndpointError(f"--http-endpoint {endpoint}: cannot listen there ({exc.strerror or exc}); "
                            "pick another address") from None
    server.daemon_threads = True
    receiver.http_server = server
    receiver.http_address = _hostport(host, server.server_address[1])
    t = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, name="spanassert-http",
                         daemon=True)
    t.start()
    receiver._http_thread = t


# -- metrics ----------------------------------------------------------------------------------------


def _otlp_signal_from_env(signal: str) -> Optional[str]:
    """The OTLP protocol to export ``signal`` ("metrics" or "logs") with, when the standard
    variables ask for it (``OTEL_<SIGNAL>_EXPORTER=otlp`` or an OTLP endpoint); else None."""
    env = os.environ
    exporter = (env.get(f"OTEL_{signal.upper()}_EXPORTER") or "").strip().lower()
    endpoint = env.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if exporter == "none" or (not exporter and not endpoint):
        return None
    if exporter and exporter != "otlp":
        log.warning("spanassert serve: OTEL_%s_EXPORTER=%s is not supported (only otlp); %s are off",
                    signal.upper(), exporter, signal)
        return None
    return (env.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
            or "http/protobuf").strip().lower()


def _resource() -> Any:
    from opentelemetry.sdk.resources import Resource

    env = os.environ
    named = "OTEL_SERVICE_NAME" in env or "service.name=" in env.get("OTEL_RESOURCE_ATTRIBUTES", "")
    return Resource.create({} if named else {"service.name": "spanassert"})


def meter_provider_from_env() -> Any:
    """A MeterProvider exporting over OTLP when the standard variables ask for it, else None."""
    protocol = _otlp_signal_from_env("metrics")
    if protocol is None:
        return None
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
    else:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter  # type: ignore[assignment]
    return MeterProvider(resource=_resource(), metric_readers=[PeriodicExportingMetricReader(OTLPMetricExporter())])


def logger_provider_from_env() -> Any:
    """A LoggerProvider exporting violation log records over OTLP when the standard variables ask
    for it, else None (violations then go to Python logging and stderr)."""
    protocol = _otlp_signal_from_env("logs")
    if protocol is None:
        return None
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor

    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
    else:
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter  # type: ignore[assignment]
    provider = LoggerProvider(resource=_resource())
    provider.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter()))
    return provider


# -- command line -------------------------------------------------------------------------------


def add_serve_command(sub: Any) -> None:
    p = sub.add_parser(
        "serve",
        help="receive OTLP traces (gRPC and HTTP) and check them live",
        description="Run an OTLP receiver (gRPC on 4317, HTTP on 4318) that checks every received trace "
                    "against the rules file with the same engine as the live processor and replay. Put it "
                    "behind an OpenTelemetry Collector's otlp exporter. Violations go to stderr (one line "
                    "each), to metrics/logs, and (with --forward) onto the forwarded spans as "
                    "`gen_ai.evaluation.result` events. SIGTERM/SIGINT stop it gracefully (exit 0).",
    )
    p.add_argument("--config", required=True, metavar="FILE", help="rules file")
    p.add_argument("--grpc-endpoint", default=DEFAULT_GRPC_ENDPOINT, metavar="HOST:PORT",
                   help=f"OTLP/gRPC address (default {DEFAULT_GRPC_ENDPOINT}; port 0 picks a free port; "
                        "'off' disables)")
    p.add_argument("--http-endpoint", default=DEFAULT_HTTP_ENDPOINT, metavar="HOST:PORT",
                   help=f"OTLP/HTTP address (default {DEFAULT_HTTP_ENDPOINT}; port 0 picks a free port; "
                        "'off' disables)")
    p.add_argument("--max-request-bytes", type=int, default=DEFAULT_MAX_REQUEST_BYTES, metavar="N",
                   help="largest request body, also after gzip decompression (default 16 MiB)")
    p.add_argument("--queue-size", type=int, default=DEFAULT_QUEUE_SPANS, metavar="SPANS",
                   help="spans waiting for the engine before senders are told to retry (default 100000)")
    p.add_argument("--settle", type=float, default=DEFAULT_SETTLE_SECONDS, metavar="SECONDS",
                   help="quiet time after a trace's root arrived before the trace is judged (default 2)")
    p.add_argument("--rootless-wait", type=float, default=None, metavar="SECONDS",
                   help="quiet time before a trace whose root never arrived is judged "
                        f"(default: the rules file's episodes.idle_timeout, at most {DEFAULT_ROOTLESS_WAIT_CAP:g})")
    p.add_argument("--forward", metavar="URL",
                   help="send every accepted span on to this OTLP/HTTP base URL (/v1/traces is appended), "
                        "offending spans with a gen_ai.evaluation.result event")
    p.add_argument("--forward-queue-size", type=int, default=DEFAULT_FORWARD_QUEUE_SPANS, metavar="SPANS",
                   help="spans waiting to be forwarded before new ones are dropped (default 100000)")
    p.add_argument("--report-json", metavar="FILE",
                   help="at shutdown, write every verdict and violation (replay's report format) to FILE; "
                        "keeps every episode result in memory, so meant for tests and bounded runs")
    p.add_argument("--quiet", action="store_true", help="do not print violations to stderr")
    p.set_defaults(func=run_serve)


def _options_from_args(args: argparse.Namespace) -> ServeOptions:
    def endpoint(v: Optional[str]) -> Optional[str]:
        return None if v is None or v.strip().lower() in ("off", "none", "") else v

    return ServeOptions(
        grpc_endpoint=endpoint(args.grpc_endpoint), http_endpoint=endpoint(args.http_endpoint),
        max_request_bytes=args.max_request_bytes, queue_size=args.queue_size, settle=args.settle,
        rootless_wait=args.rootless_wait, forward=args.forward, forward_queue_size=args.forward_queue_size,
        report_json=args.report_json, quiet=args.quiet,
    )


def run_serve(args: argparse.Namespace) -> int:
    from .config import ConfigError, load_config

    err = sys.stderr
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        for d in exc.diagnostics:
            err.write(d.format() + "\n")
        err.write(f"spanassert serve: {args.config}: invalid rules file, not started\n")
        return 2
    except OSError as exc:
        err.write(f"spanassert serve: cannot read {args.config}: {exc}\n")
        return 2
    options = _options_from_args(args)
    problems = []
    if options.grpc_endpoint is None and options.http_endpoint is None:
        problems.append("both --grpc-endpoint and --http-endpoint are off: nothing would be received")
    if options.max_request_bytes < 1:
        problems.append(f"--max-request-bytes {options.max_request_bytes}: must be at least 1")
    if options.queue_size < 1:
        problems.append(f"--queue-size {options.queue_size}: must be at least 1")
    if options.settle < 0:
        problems.append(f"--settle {options.settle}: must be >= 0 seconds")
    if options.forward and not options.forward.startswith(("http://", "https://")):
        problems.append(f"--forward {options.forward!r}: expected an http:// or https:// URL")
    for ep, name in ((options.grpc_endpoint, "--grpc-endpoint"), (options.http_endpoint, "--http-endpoint")):
        if ep:
            try:
                parse_endpoint(ep, name)
            except EndpointError as exc:
                problems.append(str(exc))
    if problems:
        for p in problems:
            err.write(f"spanassert serve: {p}\n")
        return 2

    # Violations are printed by the sink; keep the stdlib's last-resort handler from repeating them.
    logging.getLogger("spanassert").addHandler(logging.NullHandler())
    meter_provider = meter_provider_from_env()
    logger_provider = logger_provider_from_env()
    receiver = Receiver(config, options, meter_provider=meter_provider, logger_provider=logger_provider)
    try:
        receiver.start()
    except EndpointError as exc:
        err.write(f"spanassert serve: {exc}\n")
        return 2

    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        while not stop.wait(0.5):
            pass
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    receiver.stop()
    for provider in (meter_provider, logger_provider):
        if provider is not None:
            try:
                provider.shutdown()
            except Exception:  # noqa: BLE001 - an unreachable endpoint must not fail the stop
                pass
    if options.report_json:
        try:
            with open(options.report_json, "w", encoding="utf-8") as fh:
                json.dump(receiver.report_dict(), fh, indent=2, ensure_ascii=False)
        except OSError as exc:
            err.write(f"spanassert serve: cannot write --report-json {options.report_json}: {exc}\n")
    receiver.out.write(receiver.summary() + "\n")
    receiver.out.flush()
    if receiver._engine_error is not None:
        err.write(f"spanassert serve: the engine thread failed: {receiver._engine_error!r}\n")
        return 1
    return 0


__all__ = [
    "Receiver",
    "ServeOptions",
    "ServeSink",
    "IntakeQueue",
    "Forwarder",
    "add_serve_command",
    "run_serve",
    "parse_endpoint",
    "meter_provider_from_env",
    "logger_provider_from_env",
]
