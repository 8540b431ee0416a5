"""OTLP/gRPC intake: ``TraceService/Export``."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from .protocol import (
    CODE_RESOURCE_EXHAUSTED,
    QUEUE_FULL,
    cannot_listen,
    export_response,
    hostport,
    parse_endpoint,
    status_message,
)

if TYPE_CHECKING:
    from .receiver import Receiver


def _make_grpc_servicer(receiver: Receiver) -> Any:
    import grpc
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
        ExportTraceServiceResponse,
    )

    class TraceService(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request: Any, context: Any) -> Any:
            down = receiver.unavailable()
            if down is not None:
                context.abort(grpc.StatusCode.UNAVAILABLE, down)
            records, errors, wire = receiver.decode_proto(request, "otlp-grpc")
            if not receiver.accept(records, wire, len(errors)):
                down = receiver.unavailable()
                if down is not None:
                    context.abort(grpc.StatusCode.UNAVAILABLE, down)
                from google.rpc import error_details_pb2

                status = status_message(CODE_RESOURCE_EXHAUSTED, QUEUE_FULL, 1)
                context.set_trailing_metadata((
                    ("grpc-status-details-bin", status.SerializeToString()),
                    # The Python OTLP exporter reads this key for its backoff.
                    ("google.rpc.retryinfo-bin",
                     error_details_pb2.RetryInfo(retry_delay={"seconds": 1}).SerializeToString()),
                ))
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, QUEUE_FULL)
            return export_response(errors)

    servicer = TraceService()

    security = receiver.options.security

    def export_raw(body: bytes, context: Any) -> Any:
        if security.token is not None:
            auth = next((v for k, v in context.invocation_metadata() if k == "authorization"), None)
            if not security.authorized(auth if isinstance(auth, str) else None):
                context.abort(grpc.StatusCode.UNAUTHENTICATED,
                              "missing or wrong bearer token (metadata authorization: Bearer <token>)")
        # Parsed here, not by gRPC, so that a malformed request is INVALID_ARGUMENT, not INTERNAL.
        try:
            request = ExportTraceServiceRequest.FromString(body)
        except (DecodeError, RecursionError, ValueError) as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"not a protobuf ExportTraceServiceRequest: {exc}")
        return servicer.Export(request, context)

    return grpc.method_handlers_generic_handler(
        "opentelemetry.proto.collector.trace.v1.TraceService",
        {"Export": grpc.unary_unary_rpc_method_handler(
            export_raw, request_deserializer=None, response_serializer=ExportTraceServiceResponse.SerializeToString)},
    )


def start_grpc(receiver: Receiver, endpoint: str) -> None:
    import grpc

    host, port = parse_endpoint(endpoint, "--grpc-endpoint")
    limit = receiver.options.max_request_bytes
    server = grpc.server(
        ThreadPoolExecutor(max_workers=8, thread_name_prefix="spanassert-grpc"),
        options=[("grpc.max_receive_message_length", limit), ("grpc.so_reuseport", 0)],
    )
    server.add_generic_rpc_handlers((_make_grpc_servicer(receiver),))
    try:
        security = receiver.options.security
        if security.tls:
            bound = server.add_secure_port(hostport(host, port), security.grpc_credentials())
        else:
            bound = server.add_insecure_port(hostport(host, port))
    except RuntimeError as exc:
        raise cannot_listen("--grpc-endpoint", endpoint, str(exc)) from None
    if not bound:
        raise cannot_listen("--grpc-endpoint", endpoint, "address in use?")
    server.start()
    receiver.grpc_server = server
    receiver.grpc_address = hostport(host, bound)

