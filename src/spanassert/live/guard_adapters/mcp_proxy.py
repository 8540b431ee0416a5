"""``spanassert mcp-proxy [--config rules.yaml] -- <server command...>``: a stdio proxy in front of any
MCP server that refuses the ``tools/call`` requests a rule blocks, before the server sees them.

The MCP client (an IDE, an agent) starts the proxy instead of the server; the proxy starts the server
as its child and passes every JSON-RPC message through both ways, unchanged, over the ``mcp``
package's own stdio transports (``pip install 'spanassert[mcp]'``). A ``tools/call`` request is first
put to the :class:`~spanassert.live.guard.Guard`:

- blocked: the server never sees it; the client gets the answer MCP gives for a refused tool call, a
  result with ``isError: true`` whose text names the rule and its message (the model reads it and
  can carry on), and an ``execute_tool`` span carrying the decision event is written;
- allowed (or only a shadow test would block it): it goes on to the server, and an ``execute_tool``
  span covers the round trip (arguments at the start, the result or error at the end).

Every span of one proxy run is in one trace under a session span (the episode: counts, order and
data-flow rules see all of the session's calls), unless the request carries its client's W3C trace
context in ``params._meta`` (as the ``mcp`` package's clients do when they trace): then the call's
span joins the client's trace, so the episode is the client's agent run. Spans go to the exporters
``OTEL_TRACES_EXPORTER`` selects (default ``otlp``, configured by the standard ``OTEL_EXPORTER_OTLP_*``
variables; ``console`` writes to stderr, never to stdout, which is the wire), or with ``--export
FILE`` to an OTLP JSON Lines file that ``spanassert replay`` reads.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from typing import Any, Dict, List, Optional, Sequence, Set, TextIO, Tuple

ENV_CONFIG = "SPANASSERT_CONFIG"
PROTOCOL_VERSION_META_KEY = "io.modelcontextprotocol/protocolVersion"
PROG = "spanassert mcp-proxy"
# Longest tool result written on a span (characters of its JSON); the engine bounds what it keeps
# anyway, this bounds what the exporter sends.
MAX_RESULT_CHARS = 64 * 1024

EXIT_OK = 0
EXIT_SERVER_GONE = 1
EXIT_CONFIG = 2


# -- command line -----------------------------------------------------------------------------------
def add_mcp_proxy_command(sub: Any) -> None:
    p = sub.add_parser(
        "mcp-proxy",
        help="run an MCP server behind a stdio proxy that refuses the tool calls a rule blocks",
        description="Start the MCP server command given after `--` and pass every message between it and "
                    "this process's stdin/stdout (where the MCP client talks). A tools/call request that a "
                    "test with `action: block` refuses never reaches the server: the client gets a tool "
                    "result with isError=true naming the rule. Each tool call becomes an execute_tool span, "
                    "exported as OTEL_TRACES_EXPORTER / OTEL_EXPORTER_OTLP_* say, or to --export FILE. "
                    "Needs the mcp package: pip install 'spanassert[mcp]'. "
                    "Example: spanassert mcp-proxy --config rules.yaml -- python my_server.py",
    )
    p.add_argument("--config", metavar="RULES",
                   help=f"rules file (default: ${ENV_CONFIG}); without one, calls are traced and none is refused")
    p.add_argument("--export", metavar="FILE",
                   help="write the spans to this OTLP JSON Lines file (for `spanassert replay`) instead of the "
                        "exporters OTEL_TRACES_EXPORTER selects")
    p.add_argument("server", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARG ...]",
                   help="the MCP server's command line (stdio transport), after `--`")
    p.set_defaults(func=run_mcp_proxy)


def server_command(raw: Sequence[str]) -> List[str]:
    """The server's command line from what follows the options (argparse keeps the ``--``)."""
    command = list(raw)
    if command and command[0] == "--":
        command = command[1:]
    return command


def run_mcp_proxy(args: argparse.Namespace) -> int:
    err = sys.stderr
    command = server_command(args.server)
    if not command:
        err.write(f"{PROG}: no server command: give the MCP server's command line after `--`, "
                  f"e.g. `{PROG} --config rules.yaml -- python server.py`\n")
        return EXIT_CONFIG
    try:
        import anyio
        import mcp  # noqa: F401 -- imported first to name the missing extra
    except ImportError as exc:
        err.write(f"{PROG}: the mcp package is not installed ({exc}); install it with "
                  f"`pip install 'spanassert[mcp]'` (Python 3.10+)\n")
        return EXIT_CONFIG
    path = args.config or os.environ.get(ENV_CONFIG) or None
    config = _load_rules(path, err) if path else None
    if path and config is None:
        return EXIT_CONFIG
    try:
        exporters = span_exporters(args.export)
    except ValueError as exc:
        err.write(f"{PROG}: {exc}\n")
        return EXIT_CONFIG
    if config is None:
        err.write(f"{PROG}: no rules file (--config or ${ENV_CONFIG}): tool calls are traced, none is refused\n")
    telemetry = ProxyTelemetry(config, exporters, server=os.path.basename(command[0]))
    import functools

    import anyio

    try:
        return int(anyio.run(functools.partial(serve_stdio, command, telemetry,
                                               exit_when_server_gone=bool(getattr(args, "own_process", False)))))
    finally:
        telemetry.shutdown()


def _load_rules(path: str, err: TextIO) -> Any:
    """The loaded rules, or None after writing every problem (the proxy must not start unguarded)."""
    from ...config import ConfigError, UnitFormFailure, load_config, require_runnable

    try:
        config = load_config(path)
        require_runnable(config)
    except UnitFormFailure as exc:
        for line in exc.lines:
            err.write(line + "\n")
        err.write(f"{PROG}: {path}: unit-test form(s) of the rules file failed (listed above), not started; "
                  f"`spanassert validate {path}` runs them alone\n")
        return None
    except ConfigError as exc:
        for d in exc.diagnostics:
            err.write(d.format() + "\n")
        err.write(f"{PROG}: {path}: invalid rules file (problems listed above), not started; "
                  f"`spanassert validate {path}` checks it alone\n")
        return None
    except OSError as exc:
        err.write(f"{PROG}: cannot read the rules file {path}: {exc}\n")
        return None
    return config


def span_exporters(export_path: Optional[str]) -> List[Any]:
    """``--export FILE``, else what ``OTEL_TRACES_EXPORTER`` names (default ``otlp``; its protocol from
    ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` / ``OTEL_EXPORTER_OTLP_PROTOCOL``, default ``http/protobuf``
    as the specification says; endpoint, headers and TLS are read by the exporter itself)."""
    if export_path:
        from ...otlp.writers import JsonLinesSpanExporter

        return [JsonLinesSpanExporter(export_path)]
    names = [n.strip().lower() for n in os.environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",") if n.strip()]
    exporters: List[Any] = []
    for name in names:
        if name == "none":
            continue
        if name == "otlp":
            protocol = (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf").strip().lower()
            if protocol == "grpc":
                from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
            elif protocol == "http/protobuf":
                # the ignore below: one name for the gRPC or the HTTP exporter
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # type: ignore[assignment]
                    OTLPSpanExporter,
                )
            else:
                raise ValueError(f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r} is not supported here; "
                                 f"use grpc or http/protobuf")
            exporters.append(OTLPSpanExporter())
        elif name == "console":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter

            exporters.append(ConsoleSpanExporter(out=sys.stderr))  # stdout is the MCP wire
        else:
            raise ValueError(f"OTEL_TRACES_EXPORTER names {name!r}: the proxy knows otlp, console and none "
                             f"(or pass --export FILE)")
    return exporters


# -- the decisions and the spans (no I/O: the pumps below feed it) ---------------------------------------
class ProxyTelemetry:
    """The proxy's tracer provider, the assertion processor in front of its exporters, and the guard
    that shares the processor's episode state."""

    def __init__(self, config: Any, exporters: Sequence[Any], *, server: str) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        # OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES still apply (Resource.create reads them).
        self.provider = TracerProvider(resource=Resource.create({"service.name": "spanassert-mcp-proxy"}))
        batches = [BatchSpanProcessor(e) for e in exporters]
        self.processor: Any = None
        self.guard: Any = None
        if config is not None:
            from ..guard import Guard
            from ..processor import AssertionSpanProcessor

            self.processor = AssertionSpanProcessor(config, export=batches, on_episode=self._episode)
            self.provider.add_span_processor(self.processor)
            # Refusal spans go through this provider too: the same processor, the same exporters.
            self.guard = Guard(processor=self.processor, tracer_provider=self.provider)
        else:
            for b in batches:
                self.provider.add_span_processor(b)
        self.tracer = self.provider.get_tracer("spanassert.mcp_proxy")
        self.gate = ToolCallGate(self.tracer, self.guard, server=server)
        self._closed = False

    def _episode(self, result: Any) -> None:
        """Each closed episode's verdicts on stderr (the MCP client's server log), one line."""
        tests = ", ".join(f"{t}: {v.value}" for t, v in sorted(result.test_verdicts().items()))
        amended = " (amended)" if result.amendment else ""
        self.gate._say(f"episode {result.key}: {result.verdict.value}{amended}; {tests or 'no tests'}")

    def shutdown(self) -> None:
        """End the session span, then flush and stop the exporters (once; later calls do nothing)."""
        if self._closed:
            return
        self._closed = True
        self.gate.close()
        self.provider.shutdown()


class ToolCallGate:
    """What the proxy does with each message: the guard's decision on a client's ``tools/call``, and
    the ``execute_tool`` span from the request to the server's answer."""

    def __init__(self, tracer: Any, guard: Any, *, server: str, log: Optional[TextIO] = None) -> None:
        self.tracer = tracer
        self.guard = guard
        self.log = log if log is not None else sys.stderr
        self.session_id = uuid.uuid4().hex
        self.root = tracer.start_span(f"mcp-proxy {server}", attributes={
            "mcp.session.id": self.session_id, "server.address": server})
        self.pending: Dict[Any, Tuple[Any, str]] = {}  # request id -> (span, call key)
        # Calls the server answered with `input_required` (MCP 2026-07-28, SEP-2322): the client
        # retries the same tools/call (new id, same name and arguments, plus inputResponses /
        # requestState). A retry continues the decided call: not decided, nor counted, again.
        self.awaiting_input: Dict[str, List[Any]] = {}
        # The protocol version: stamped on each request's _meta (2026-07-28 on), else the one the
        # initialize handshake agreed.
        self.negotiated_version: Optional[str] = None
        self._initialize_ids: Set[Any] = set()
        self.refused = 0
        self.forwarded = 0

    # A client's request: None to forward it, or the JSON-RPC result to answer with instead.
    def client_request(self, request_id: Any, method: str,
                       params: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
        if method == "initialize":
            self._initialize_ids.add(request_id)
        if method != "tools/call" or not isinstance(params, dict):
            return None
        name = params.get("name")
        if not isinstance(name, str):
            return None  # the server answers a malformed call with its own error
        arguments = params.get("arguments")
        key = call_key(name, arguments)
        if ("inputResponses" in params or "requestState" in params) and self.awaiting_input.get(key):
            span = self.awaiting_input[key].pop(0)
            if not self.awaiting_input[key]:
                del self.awaiting_input[key]
            span.add_event("mcp.input_required.retry", {"jsonrpc.request.id": str(request_id)})
            self.pending[request_id] = (span, key)
            return None
        from opentelemetry import context as otel_context
        from opentelemetry import trace

        ctx = self._parent(params)
        token = otel_context.attach(ctx)
        try:
            decision = self._decide(name, arguments, request_id)
            if decision is not None and not decision.allowed:
                self.guard.refusal_span(name, arguments, decision, call_id=str(request_id))
                self.refused += 1
                self._say(f"refused tools/call {name!r} (request {request_id!r}): {decision.message}")
                return refusal_result(decision.message, self._protocol_version(params))
            if decision is not None and decision.would_block:
                self._say(f"shadow: would refuse tools/call {name!r} (request {request_id!r}): {decision.message}")
            span = self.tracer.start_span(f"execute_tool {name}", kind=trace.SpanKind.INTERNAL,
                                          attributes=self._call_attributes(name, arguments, request_id))
        finally:
            otel_context.detach(token)
        self.pending[request_id] = (span, key)
        self.forwarded += 1
        return None

    def _decide(self, name: str, arguments: Any, request_id: Any) -> Any:
        if self.guard is None:
            return None
        return self.guard.check(name, arguments, call_id=str(request_id))

    def client_cancelled(self, params: Optional[Dict[str, Any]]) -> None:
        """``notifications/cancelled`` from the client: the call's span ends there, as cancelled."""
        if not isinstance(params, dict):
            return
        span, _ = self.pending.pop(params.get("requestId"), (None, ""))
        if span is not None:
            from opentelemetry.trace import Status, StatusCode

            span.set_attribute("error.type", "cancelled")
            span.set_status(Status(StatusCode.ERROR, "cancelled by the client"))
            span.end()

    def server_result(self, request_id: Any, result: Dict[str, Any]) -> None:
        if request_id in self._initialize_ids:
            self._initialize_ids.discard(request_id)
            if isinstance(result.get("protocolVersion"), str):
                self.negotiated_version = result["protocolVersion"]
        span, key = self.pending.pop(request_id, (None, ""))
        if span is None:
            return
        if result.get("resultType") == "input_required":
            self.awaiting_input.setdefault(key, []).append(span)  # the call goes on in a retry
            return
        text = json.dumps(result, ensure_ascii=False, separators=(",", ":"), default=str)
        if len(text) > MAX_RESULT_CHARS:
            text = text[:MAX_RESULT_CHARS]
            span.set_attribute("spanassert.mcp_proxy.result_truncated", True)
        span.set_attribute("gen_ai.tool.call.result", text)
        if result.get("isError") is True:
            from opentelemetry.trace import Status, StatusCode

            span.set_attribute("error.type", "tool_error")
            span.set_status(Status(StatusCode.ERROR, "the tool returned isError"))
        span.end()

    def server_error(self, request_id: Any, code: Any, message: Any) -> None:
        span, _ = self.pending.pop(request_id, (None, ""))
        if span is None:
            return
        from opentelemetry.trace import Status, StatusCode

        span.set_attribute("error.type", str(code))
        span.set_attribute("rpc.jsonrpc.error_code", code if isinstance(code, int) else -1)
        span.set_status(Status(StatusCode.ERROR, str(message)[:500]))
        span.end()

    def close(self) -> None:
        """The session ends: calls still waiting for the server end as unanswered, then the root."""
        from opentelemetry.trace import Status, StatusCode

        unanswered = [span for span, _ in self.pending.values()]
        unanswered += [span for spans in self.awaiting_input.values() for span in spans]
        for span in unanswered:
            span.set_attribute("error.type", "no_response")
            span.set_status(Status(StatusCode.ERROR, "the proxy closed before the server answered"))
            span.end()
        self.pending.clear()
        self.awaiting_input.clear()
        if self.root.is_recording():
            self.root.set_attribute("spanassert.mcp_proxy.refused", self.refused)
            self.root.set_attribute("spanassert.mcp_proxy.forwarded", self.forwarded)
            self.root.end()

    def _protocol_version(self, params: Dict[str, Any]) -> Optional[str]:
        meta = params.get("_meta")
        stamped = meta.get(PROTOCOL_VERSION_META_KEY) if isinstance(meta, dict) else None
        return stamped if isinstance(stamped, str) else self.negotiated_version

    def _parent(self, params: Dict[str, Any]) -> Any:
        """The client's trace context from ``params._meta`` (W3C ``traceparent``), else the session."""
        from opentelemetry import trace

        meta = params.get("_meta")
        if isinstance(meta, dict) and isinstance(meta.get("traceparent"), str):
            from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

            carrier = {k: v for k, v in meta.items() if k in ("traceparent", "tracestate") and isinstance(v, str)}
            ctx = TraceContextTextMapPropagator().extract(carrier)
            if trace.get_current_span(ctx).get_span_context().is_valid:
                return ctx
        return trace.set_span_in_context(self.root)

    def _call_attributes(self, name: str, arguments: Any, request_id: Any) -> Dict[str, Any]:
        attributes: Dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": str(request_id),
            "mcp.method.name": "tools/call",
            "mcp.session.id": self.session_id,
            "jsonrpc.request.id": str(request_id),
        }
        if arguments is not None:
            attributes["gen_ai.tool.call.arguments"] = json.dumps(arguments, ensure_ascii=False,
                                                                  separators=(",", ":"), default=str)
        return attributes

    def _say(self, line: str) -> None:
        try:
            self.log.write(f"{PROG}: {line}\n")
            self.log.flush()
        except (OSError, ValueError):
            pass


def call_key(name: str, arguments: Any) -> str:
    """What identifies a retried call: its tool and its arguments (canonical JSON)."""
    try:
        return name + "\0" + json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        return name + "\0" + repr(arguments)


def refusal_result(message: str, protocol_version: Optional[str]) -> Dict[str, Any]:
    """MCP's answer for a tool call that did not run: a ``CallToolResult`` with ``isError`` set, its
    text the refusal (errors the model should see go in the result, not as a protocol error), in
    the shape of the session's protocol version (2026-07-28 adds ``resultType``)."""
    import mcp_types as types
    from mcp_types.methods import serialize_server_result

    result = types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)
    data: Dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    if protocol_version:
        try:
            return serialize_server_result("tools/call", protocol_version, data)
        except (KeyError, ValueError):
            pass  # a version this mcp package does not know: its newest shape (extra keys are ignored)
    return data


# -- the transport: two pumps over the mcp package's stdio streams --------------------------------------
class PipeLines:
    """The client's side of stdin as lines, read without a worker thread: the ``mcp`` package's
    default stdio streams hand each line read and each write to a thread (three thread hops per
    round trip); a non-blocking pipe read when the loop says it is readable costs none, and can be
    cancelled (so the proxy can stop when the server goes first)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""

    def __aiter__(self) -> PipeLines:
        return self

    async def __anext__(self) -> str:
        import anyio

        while True:
            cut = self.buffer.find(b"\n")
            if cut >= 0:
                line, self.buffer = self.buffer[:cut + 1], self.buffer[cut + 1:]
                return line.decode("utf-8", "replace")
            try:
                chunk = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                await anyio.wait_readable(self.fd)
                continue
            if not chunk:
                if self.buffer:
                    line, self.buffer = self.buffer, b""
                    return line.decode("utf-8", "replace")
                raise StopAsyncIteration
            self.buffer += chunk


class PipeWriter:
    """The client's side of stdout, written without a worker thread (see :class:`PipeLines`)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    async def write(self, text: str) -> None:
        import anyio

        data = memoryview(text.encode("utf-8"))
        while data:
            data = data[self._write(data):]
            if data:
                await anyio.wait_writable(self.fd)

    def _write(self, data: memoryview) -> int:
        try:
            return os.write(self.fd, data)
        except BlockingIOError:
            return 0  # the pipe is full: wait until the client reads

    async def flush(self) -> None:
        return None


class ClaimedStdio:
    """The wire (fds 0 and 1) moved to private descriptors while the proxy serves, fd 0 pointed at
    the null device and fd 1 at stderr, so nothing else in the process can read or write the
    protocol (as the ``mcp`` package's own stdio server does). Pipes and sockets are read and
    written non-blocking (:class:`PipeLines`, :class:`PipeWriter`); for anything else (a terminal, a
    file) ``streams`` is None and the ``mcp`` package's own threaded streams are used."""

    def __init__(self) -> None:
        self.streams: Optional[Tuple[PipeLines, PipeWriter]] = None
        self._saved: List[Tuple[int, int]] = []

    def __enter__(self) -> ClaimedStdio:
        import stat

        try:
            modes = [os.fstat(fd).st_mode for fd in (0, 1)]
        except OSError:
            return self
        if not all(stat.S_ISFIFO(m) or stat.S_ISSOCK(m) for m in modes):
            return self
        wire_in, wire_out = os.dup(0), os.dup(1)
        null = os.open(os.devnull, os.O_RDONLY)
        try:
            os.dup2(null, 0)
            os.dup2(2, 1)
        finally:
            os.close(null)
        self._saved = [(0, wire_in), (1, wire_out)]
        for fd in (wire_in, wire_out):
            os.set_blocking(fd, False)
        self.streams = (PipeLines(wire_in), PipeWriter(wire_out))
        return self

    def __exit__(self, *exc_info: Any) -> None:
        for fd, wire in self._saved:
            _restore(fd, wire)
        self._saved = []


def _restore(fd: int, wire: int) -> None:
    """Point ``fd`` back at the wire (blocking again, as the process was given it)."""
    try:
        os.set_blocking(wire, True)
        os.dup2(wire, fd)
    except OSError:
        pass
    finally:
        os.close(wire)


async def serve_stdio(command: Sequence[str], telemetry: ProxyTelemetry, *, exit_when_server_gone: bool = False) -> int:
    """Serve until the client closes stdin (0) or the server stops answering (1).

    Over a terminal or a file (not a pipe) the ``mcp`` package's threaded stdin reader can only be
    ended by the client's EOF: when the server is gone first, ``exit_when_server_gone`` (the proxy is
    its own process) flushes the spans and ends the process there."""
    with ClaimedStdio() as stdio:
        return await _serve(command, telemetry, stdio.streams, exit_when_server_gone)


async def _serve(command: Sequence[str], telemetry: ProxyTelemetry, streams: Optional[Tuple[PipeLines, PipeWriter]],
                 exit_when_server_gone: bool) -> int:
    import anyio
    import mcp_types as types
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from mcp.server.stdio import stdio_server
    from mcp.shared.message import SessionMessage

    gate = telemetry.gate
    # The server gets the proxy's whole environment: the client configured it for the server.
    params = StdioServerParameters(command=command[0], args=list(command[1:]), env=dict(os.environ))
    outcome: List[int] = []
    stdin, stdout = streams if streams is not None else (None, None)

    with anyio.CancelScope() as everything:
        # the ignore below: mcp annotates narrower streams than anyio's
        async with stdio_server(stdin=stdin, stdout=stdout) as (client_read, client_write):  # type: ignore[arg-type]
            try:
                async with stdio_client(params, errlog=sys.stderr) as (server_read, server_write), \
                        anyio.create_task_group() as tg:

                    async def client_to_server() -> None:
                        async for item in client_read:
                            if isinstance(item, Exception):
                                # Not JSON-RPC: answer as a server would (parse error), keep serving.
                                await client_write.send(SessionMessage(types.JSONRPCError(
                                    jsonrpc="2.0", id=None,
                                    error=types.ErrorData(code=-32700, message=f"parse error: {str(item)[:200]}"))))
                                continue
                            message = item.message
                            if isinstance(message, types.JSONRPCRequest):
                                answer = gate.client_request(message.id, message.method, message.params)
                                if answer is not None:
                                    await client_write.send(SessionMessage(types.JSONRPCResponse(
                                        jsonrpc="2.0", id=message.id, result=answer)))
                                    continue
                            elif isinstance(message, types.JSONRPCNotification) and \
                                    message.method == "notifications/cancelled":
                                gate.client_cancelled(message.params)
                            await server_write.send(item)
                        outcome.append(EXIT_OK)
                        tg.cancel_scope.cancel()

                    async def server_to_client() -> None:
                        async for item in server_read:
                            if isinstance(item, Exception):
                                continue  # the transport logged the unparsable line; the client gets nothing
                            message = item.message
                            if isinstance(message, types.JSONRPCResponse):
                                gate.server_result(message.id, message.result)
                            elif isinstance(message, types.JSONRPCError):
                                gate.server_error(message.id, message.error.code, message.error.message)
                            await client_write.send(item)
                        outcome.append(EXIT_SERVER_GONE)
                        tg.cancel_scope.cancel()

                    tg.start_soon(client_to_server)
                    tg.start_soon(server_to_client)
            except OSError as exc:
                sys.stderr.write(f"{PROG}: cannot start the MCP server {command[0]!r}: {exc}\n")
                outcome.insert(0, EXIT_CONFIG)
            code = outcome[0] if outcome else EXIT_OK
            if code != EXIT_OK:
                if code == EXIT_SERVER_GONE:
                    sys.stderr.write(f"{PROG}: the MCP server {command[0]!r} closed its output; stopping\n")
                if streams is not None:
                    everything.cancel()  # the pipe reader is cancellable: stop reading the client
                elif exit_when_server_gone:
                    telemetry.shutdown()
                    sys.stderr.flush()
                    os._exit(code)
            await client_write.aclose()
    return outcome[0] if outcome else EXIT_OK


__all__ = ["add_mcp_proxy_command", "run_mcp_proxy", "ToolCallGate", "ProxyTelemetry", "refusal_result",
           "span_exporters", "serve_stdio", "ClaimedStdio"]
