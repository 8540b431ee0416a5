"""What every part of ``spanassert serve`` shares: paths, media types, status codes, defaults,
endpoints and the options."""
from __future__ import annotations

from typing import Any, List, Optional, Tuple

from .tls import Security

TRACES_PATH = "/v1/traces"
HEALTH_PATH = "/health"
# Loopback unless told otherwise (as the Collector's OTLP receiver): `0.0.0.0:4317` listens everywhere.
DEFAULT_GRPC_ENDPOINT = "localhost:4317"
DEFAULT_HTTP_ENDPOINT = "localhost:4318"
DEFAULT_MAX_REQUEST_BYTES = 16 * 1024 * 1024
DEFAULT_QUEUE_SPANS = 100_000
DEFAULT_SETTLE_SECONDS = 2.0
# A trace whose root never arrives is judged after the rules file's idle timeout, but a receiver
# should not sit on spans for five minutes by default.
DEFAULT_ROOTLESS_WAIT_CAP = 60.0
DEFAULT_FORWARD_QUEUE_SPANS = 100_000
# Per-trace bounds: a trace that reaches either is released (judged) at once, in pieces if it goes on.
DEFAULT_MAX_TRACE_SPANS = 10_000
DEFAULT_MAX_TRACE_SECONDS = 300.0
# All buffered traces together; beyond this the least recently active trace is released.
DEFAULT_MAX_BUFFERED_SPANS = 1_000_000
# HTTP connections served at once (a thread each); more are answered 503 and closed.
DEFAULT_MAX_CONNECTIONS = 1024
# /health answers 503 when the engine thread has not gone round its loop for this long.
DEFAULT_ENGINE_STALL_TIMEOUT = 30.0

CT_PROTOBUF = "application/x-protobuf"
CT_JSON = "application/json"

# google.rpc.Code
CODE_INVALID_ARGUMENT = 3
CODE_NOT_FOUND = 5
CODE_RESOURCE_EXHAUSTED = 8
CODE_UNIMPLEMENTED = 12
CODE_UNAVAILABLE = 14
CODE_UNAUTHENTICATED = 16


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


def cannot_listen(option: str, endpoint: str, why: str) -> EndpointError:
    """The refusal when an endpoint that parsed cannot be bound (the same words for each server)."""
    return EndpointError(f"{option} {endpoint}: cannot listen there ({why}); pick another address")


def hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"




def status_message(code: int, message: str, retry_after_s: Optional[int] = None) -> Any:
    from google.rpc import status_pb2

    st = status_pb2.Status(code=code, message=message)
    if retry_after_s is not None:
        from google.rpc import error_details_pb2

        st.details.add().Pack(error_details_pb2.RetryInfo(retry_delay={"seconds": retry_after_s}))
    return st


def rejection_message(errors: List[Any]) -> str:
    first = errors[0]
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{len(errors)} span(s) rejected: {first}{more}"


QUEUE_FULL = "spanassert serve intake queue is full; retry later"


_RESPONSE_CLASS: List[Any] = []  # imported at first use: the protobuf modules load only when serving


def export_response(errors: List[Any]) -> Any:
    """The protobuf ``ExportTraceServiceResponse`` (gRPC, and HTTP with a protobuf body): empty, or a
    partial success naming the rejected spans."""
    if not _RESPONSE_CLASS:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

        _RESPONSE_CLASS.append(ExportTraceServiceResponse)
    resp = _RESPONSE_CLASS[0]()
    if errors:
        resp.partial_success.rejected_spans = len(errors)
        resp.partial_success.error_message = rejection_message(errors)
    return resp


class ServeOptions:
    __slots__ = ("grpc_endpoint", "http_endpoint", "max_request_bytes", "queue_size", "settle", "rootless_wait",
                 "forward", "forward_queue_size", "report_json", "quiet", "engine_stall_timeout", "security",
                 "max_trace_spans", "max_trace_seconds", "max_buffered_spans", "max_connections", "output_format")

    def __init__(self, *, grpc_endpoint: Optional[str] = DEFAULT_GRPC_ENDPOINT,
                 http_endpoint: Optional[str] = DEFAULT_HTTP_ENDPOINT,
                 max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES, queue_size: int = DEFAULT_QUEUE_SPANS,
                 settle: float = DEFAULT_SETTLE_SECONDS, rootless_wait: Optional[float] = None,
                 forward: Optional[str] = None, forward_queue_size: int = DEFAULT_FORWARD_QUEUE_SPANS,
                 report_json: Optional[str] = None, quiet: bool = False,
                 engine_stall_timeout: float = DEFAULT_ENGINE_STALL_TIMEOUT,
                 security: Optional[Security] = None, max_trace_spans: int = DEFAULT_MAX_TRACE_SPANS,
                 max_trace_seconds: float = DEFAULT_MAX_TRACE_SECONDS,
                 max_buffered_spans: int = DEFAULT_MAX_BUFFERED_SPANS,
                 max_connections: int = DEFAULT_MAX_CONNECTIONS, output_format: str = "text") -> None:
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
        self.engine_stall_timeout = engine_stall_timeout
        self.max_trace_spans = max_trace_spans
        self.max_trace_seconds = max_trace_seconds
        self.max_buffered_spans = max_buffered_spans
        self.max_connections = max_connections
        self.output_format = output_format  # "text" or "json": violation lines and the stop summary
        self.security = security or Security()  # TLS material and bearer token; none by default

