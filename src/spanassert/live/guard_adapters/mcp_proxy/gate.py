"""The MCP proxy's decisions and spans, with no I/O: the guard is put each ``tools/call`` request,
a refused call gets MCP's refusal result, and every call gets an ``execute_tool`` span (the pumps
in :mod:`.stdio` feed it)."""
from __future__ import annotations

import json
import sys
import uuid
from typing import Any, Dict, List, Optional, Sequence, Set, TextIO, Tuple

PROTOCOL_VERSION_META_KEY = "io.modelcontextprotocol/protocolVersion"
PROG = "spanassert mcp-proxy"
# Longest tool result written on a span (characters of its JSON); the engine bounds what it keeps
# anyway, this bounds what the exporter sends.
MAX_RESULT_CHARS = 64 * 1024


# -- the decisions and the spans (no I/O: the pumps in stdio.py feed it) ---------------------------------
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
            from ...guard import Guard
            from ...processor import AssertionSpanProcessor

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


