"""OTLP/HTTP intake: ``POST /v1/traces`` (protobuf or JSON, optionally gzip) and ``GET /health``."""
from __future__ import annotations

import errno
import json
import socket
import ssl
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from ..core.model import SpanRecord
from .protocol import (
    CODE_INVALID_ARGUMENT,
    CODE_NOT_FOUND,
    CODE_UNAUTHENTICATED,
    CODE_UNAVAILABLE,
    CODE_UNIMPLEMENTED,
    CT_JSON,
    CT_PROTOBUF,
    HEALTH_PATH,
    QUEUE_FULL,
    TRACES_PATH,
    cannot_listen,
    export_response,
    hostport,
    parse_endpoint,
    rejection_message,
    status_message,
)

if TYPE_CHECKING:
    from .receiver import Receiver


class _BodyError(Exception):
    """A request refused with ``status``; ``close``: the connection cannot be reused (the end of
    this request's body is unknown, or it was not read)."""

    def __init__(self, status: int, code: int, message: str, close: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.close = close


# -- request bodies: strict framing (RFC 9112 sections 6 and 7) ------------------------------------
_HEX = frozenset(b"0123456789abcdefABCDEF")
_DIGITS = frozenset(b"0123456789")
MAX_CHUNK_LINE = 4096  # a chunk-size line with its extensions
MAX_TRAILER_BYTES = 16 * 1024


def _framing_error(message: str, status: int = 400) -> _BodyError:
    return _BodyError(status, CODE_INVALID_ARGUMENT, message, close=True)


def _over_limit(limit: int, size: Optional[int] = None) -> _BodyError:
    what = f"is {size} bytes, over" if size is not None else "is over"
    return _BodyError(413, CODE_INVALID_ARGUMENT,
                      f"request body {what} the limit of {limit} bytes (--max-request-bytes)", close=True)


def read_body(rfile: Any, headers: Any, limit: int) -> bytes:
    """The raw body of one request, framed by exactly one of ``Content-Length`` (decimal digits
    only; repeated only with the same value) or ``Transfer-Encoding: chunked`` (nothing else, no
    ``Content-Length`` beside it), never more than ``limit`` bytes read into memory."""
    te = headers.get_all("Transfer-Encoding") or []
    cl = headers.get_all("Content-Length") or []
    if te:
        if cl:
            raise _framing_error("both Transfer-Encoding and Content-Length are set: send one of them")
        codings = [t.strip().lower() for v in te for t in v.split(",")]
        if codings != ["chunked"]:
            raise _framing_error(f"unsupported Transfer-Encoding {', '.join(te)!r}: send chunked or a Content-Length",
                                 501)
        return _read_chunked(rfile, limit)
    if not cl:
        raise _BodyError(411, CODE_INVALID_ARGUMENT, "Content-Length is required", close=True)
    values = {v.strip(" \t") for v in cl}
    if len(values) != 1:
        raise _framing_error(f"Content-Length is set {len(cl)} times with different values")
    text = values.pop()
    raw_text = text.encode("utf-8", "replace")
    if not raw_text or not _DIGITS.issuperset(raw_text):
        raise _framing_error(f"Content-Length {text[:40]!r} is not a decimal number")
    if len(raw_text) > 19 or int(raw_text) > limit:
        raise _over_limit(limit, int(raw_text) if len(raw_text) <= 19 else None)
    n = int(raw_text)
    raw: bytes = rfile.read(n)
    if len(raw) != n:
        raise _framing_error(f"request body ended after {len(raw)} of {n} bytes (Content-Length)")
    return raw


def _read_chunked(rfile: Any, limit: int) -> bytes:
    parts: List[bytes] = []
    total = 0
    while True:
        line = rfile.readline(MAX_CHUNK_LINE + 1)
        if len(line) > MAX_CHUNK_LINE:
            raise _framing_error("chunk-size line too long")
        if not line.endswith(b"\r\n"):
            raise _framing_error("chunked body ended early (a chunk-size line without CRLF)")
        size_text, semi, _ext = line[:-2].partition(b";")
        if semi:
            size_text = size_text.rstrip(b" \t")  # optional whitespace before extensions
        if not size_text or not _HEX.issuperset(size_text):
            raise _framing_error(f"malformed chunk size {size_text[:40]!r}: expected hexadecimal digits only")
        if len(size_text.lstrip(b"0")) > 16:
            raise _over_limit(limit)
        size = int(size_text, 16)
        if size == 0:
            trailer = 0
            while True:  # trailer fields, ignored; bounded
                t = rfile.readline(MAX_CHUNK_LINE + 1)
                trailer += len(t)
                if t == b"\r\n":
                    return b"".join(parts)
                if not t.endswith(b"\r\n") or trailer > MAX_TRAILER_BYTES:
                    raise _framing_error("malformed or oversized chunked trailer")
        total += size
        if total > limit:
            raise _over_limit(limit)
        data = rfile.read(size)
        if len(data) != size:
            raise _framing_error(f"chunked body ended after {len(data)} of {size} bytes of a chunk")
        if rfile.read(2) != b"\r\n":
            raise _framing_error("a chunk is not followed by CRLF")
        parts.append(data)


def _media_type(header: Optional[str]) -> str:
    return (header or "").split(";", 1)[0].strip().lower()


def make_http_handler(receiver: Receiver) -> type:
    limit = receiver.options.max_request_bytes
    security = receiver.options.security

    class OTLPHTTPHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "spanassert"  # the Server header: no version banner (neither ours nor Python's)
        sys_version = ""

        def version_string(self) -> str:
            return self.server_version
        # A client that stalls mid-request (or keeps an idle connection) gives its thread back.
        timeout = 30

        def log_message(self, format: str, *args: Any) -> None:
            pass  # one line per request would drown the violations

        def handle(self) -> None:
            # A client that vanishes mid-request, or fails the TLS handshake (plain HTTP to a TLS
            # port, no or a wrong client certificate), is routine, not a traceback on stderr per
            # connection (socketserver's default), which a hostile client could use to flood the log.
            try:
                if isinstance(self.connection, ssl.SSLSocket):
                    self.connection.do_handshake()  # here, on this connection's thread and timeout
                super().handle()
            except (ConnectionError, ssl.SSLError, socket.timeout):
                self.close_connection = True
            except OSError as exc:
                if exc.errno is None and not isinstance(exc, ssl.SSLError):
                    raise
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
                self._send(status, status_message(code, message).SerializeToString(), CT_PROTOBUF, headers)

        def _path(self) -> str:
            return self.path.split("?", 1)[0]

        # -- methods --
        def _unread_body(self) -> bool:
            """True when the request declares a body this method does not read."""
            cl = (self.headers.get("Content-Length") or "0").strip()
            return cl != "0" or self.headers.get("Transfer-Encoding") is not None

        def do_GET(self) -> None:
            if self._unread_body():
                self.close_connection = True  # its end is unknown: the next request cannot be found
            path = self._path()
            if path == HEALTH_PATH:
                health = receiver.health()
                self._send(200 if health["status"] == "ok" else 503, json.dumps(health).encode(), CT_JSON)
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

        do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _other_method

        def do_POST(self) -> None:
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
            if not security.authorized(self.headers.get("Authorization")):
                self._error(401, CODE_UNAUTHENTICATED, "missing or wrong bearer token (Authorization: Bearer <token>)",
                            (("WWW-Authenticate", 'Bearer realm="spanassert"'),), close=True)
                return
            down = receiver.unavailable()
            if down is not None:
                self._error(503, CODE_UNAVAILABLE, down, (("Retry-After", "1"),), close=True)
                return
            try:
                body = self._body()
                records, errors, wire = self._decode(ctype, body)
            except _BodyError as exc:
                receiver.refused_unreadable()  # its spans are lost: the report passes nothing
                self._error(exc.status, exc.code, exc.message, close=exc.close)
                return
            if not receiver.accept(records, wire, len(errors)):
                self._error(503, CODE_UNAVAILABLE,
                            receiver.unavailable() or QUEUE_FULL,
                            (("Retry-After", "1"),))
                return
            self._success(ctype, errors)

        def _success(self, ctype: str, errors: List[Any]) -> None:
            if ctype == CT_JSON:
                doc: Dict[str, Any] = {}
                if errors:
                    doc["partialSuccess"] = {"rejectedSpans": str(len(errors)),
                                             "errorMessage": rejection_message(errors)}
                self._send(200, json.dumps(doc).encode(), CT_JSON)
                return
            self._send(200, export_response(errors).SerializeToString(), CT_PROTOBUF)

        # -- body --
        def _body(self) -> bytes:
            raw = read_body(self.rfile, self.headers, limit)
            encoding = (self.headers.get("Content-Encoding") or "identity").strip().lower()
            if encoding in ("gzip", "x-gzip"):
                return _gunzip(raw, limit)
            if encoding not in ("identity", ""):
                raise _BodyError(415, CODE_INVALID_ARGUMENT,
                                 f"unsupported Content-Encoding {encoding!r}: send gzip or no encoding")
            return raw

        def _decode(self, ctype: str, body: bytes) -> Tuple[List[SpanRecord], List[Any], Optional[Dict[Any, Any]]]:
            from ..otlp import SpanDecodeError, records_from_json

            source = "otlp-http"
            if ctype == CT_PROTOBUF:
                got = receiver.decode_proto_bytes(body, source)
                if got is not None:
                    return got
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
            except ValueError:  # after its subclasses above: a number past int()'s digit bound
                from ..otlp.formats import number_too_long

                raise _BodyError(400, CODE_INVALID_ARGUMENT, f"JSON body: {number_too_long()}") from None
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
        raise _BodyError(400, CODE_INVALID_ARGUMENT,
                         f"Content-Encoding gzip, but the body is not gzip: {exc}") from None
    if len(out) > limit or d.unconsumed_tail:
        raise _BodyError(413, CODE_INVALID_ARGUMENT,
                         f"gzip body decompresses to over {limit} bytes, the limit (--max-request-bytes)")
    if not d.eof:
        raise _BodyError(400, CODE_INVALID_ARGUMENT, "gzip body is truncated")
    return out



# Connections the kernel may queue before the accept loop takes them (the stdlib's default is 5:
# a burst of parallel connects then waits for SYN retries). Linux caps it at net.core.somaxconn.
LISTEN_BACKLOG = 1024
# Out of descriptors, accept() fails at once while the listening socket stays readable: without a
# pause the accept loop spins a core. It waits, doubling from the first to the last figure.
ACCEPT_BACKOFF = (0.01, 0.5)
_RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nRetry-After: 1\r\n"
         b"Connection: close\r\nContent-Length: 52\r\n\r\nspanassert serve: too many open connections; retry\r\n")


class OTLPHTTPServer(ThreadingHTTPServer):
    """One thread per connection, at most ``max_connections`` at once: a connection beyond that is
    answered 503 + ``Retry-After`` and closed at once (idle or stalled clients cannot take every
    thread and descriptor)."""

    request_queue_size = LISTEN_BACKLOG
    daemon_threads = True
    accept_failures = 0  # accept() calls that failed for want of descriptors or memory
    refused_busy = 0  # connections refused over max_connections

    def __init__(self, address: Tuple[str, int], handler: Any, max_connections: int = 1024) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self._backoff = ACCEPT_BACKOFF[0]
        self.max_connections = max(1, max_connections)
        self._active = 0
        self._active_lock = threading.Lock()
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._active_lock:
            busy = self._active >= self.max_connections
            if not busy:
                self._active += 1
        if busy:
            self.refused_busy += 1
            try:
                request.settimeout(0.2)
                if not isinstance(request, ssl.SSLSocket):  # no handshake here: just close it
                    request.sendall(_BUSY)
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._release()

    def _release(self) -> None:
        with self._active_lock:
            self._active -= 1

    def get_request(self) -> Any:
        try:
            request = super().get_request()
        except OSError as exc:
            if exc.errno in _RESOURCE_ERRNOS:
                self.accept_failures += 1
                time.sleep(self._backoff)  # the pending connection waits in the backlog
                self._backoff = min(self._backoff * 2, ACCEPT_BACKOFF[1])
            raise  # socketserver drops this attempt and goes back to select()
        self._backoff = ACCEPT_BACKOFF[0]
        return request


def start_http(receiver: Receiver, endpoint: str) -> None:
    host, port = parse_endpoint(endpoint, "--http-endpoint")
    handler = make_http_handler(receiver)
    try:
        server = OTLPHTTPServer((host, port), handler, receiver.options.max_connections)
        if receiver.options.security.tls:
            # Handshakes happen on each connection's own thread (handle()), not in the accept loop.
            server.socket = receiver.options.security.http_context().wrap_socket(
                server.socket, server_side=True, do_handshake_on_connect=False)
    except OSError as exc:
        raise cannot_listen("--http-endpoint", endpoint, str(exc.strerror or exc)) from None
    receiver.http_server = server
    receiver.http_address = hostport(host, server.server_address[1])
    t = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, name="spanassert-http",
                         daemon=True)
    t.start()
    receiver._http_thread = t

