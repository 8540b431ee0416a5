"""Deterministic benchmark data: agent episodes encoded as OTLP the way exporters write them."""
from __future__ import annotations

import json
import os
import random
from typing import List

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator


class _SeededIds(RandomIdGenerator):
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def generate_span_id(self) -> int:
        return self.rng.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        return self.rng.getrandbits(128) or 1


def agent_spans(episodes: int, calls: int = 19, seed: int = 11) -> List:
    """``episodes`` GenAI agent episodes: an invoke_agent root, a chat step, ``calls`` tool calls
    with JSON arguments and results (tool_0 … in order, so the benchmark rules pass)."""
    exp = InMemorySpanExporter()
    tp = TracerProvider(resource=Resource.create({"service.name": "bench-agent"}), id_generator=_SeededIds(seed))
    tp.add_span_processor(SimpleSpanProcessor(exp))
    t = tp.get_tracer("bench")
    for e in range(episodes):
        with t.start_as_current_span("invoke_agent support", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support",
                "gen_ai.conversation.id": f"conv-{e}"}):
            with t.start_as_current_span("chat gpt-4o", attributes={
                    "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
                    "gen_ai.usage.input_tokens": 120, "gen_ai.usage.output_tokens": 30}):
                pass
            for i in range(calls):
                with t.start_as_current_span(f"execute_tool tool_{i}", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": f"tool_{i}",
                        "gen_ai.tool.call.id": f"call_{e}_{i}",
                        "gen_ai.tool.call.arguments": json.dumps({"amount": i, "order_id": f"ORD-{e}"}),
                        "gen_ai.tool.call.result": json.dumps({"status": "ok", "items": [i]})}):
                    pass
    spans = list(exp.get_finished_spans())
    tp.shutdown()
    return spans


def batches(spans: List, size: int = 512) -> List[bytes]:
    """Serialized ExportTraceServiceRequests of ``size`` spans, as a BatchSpanProcessor exports."""
    return [encode_spans(spans[i:i + size]).SerializeToString() for i in range(0, len(spans), size)]


def write_files(spans: List, directory: str) -> dict:
    from spanassert.otlp.writers import encode_request_json, frame_messages

    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    os.makedirs(directory, exist_ok=True)
    payloads = batches(spans)
    jsonl = os.path.join(directory, "spans.jsonl")
    with open(jsonl, "w") as f:
        for p in payloads:
            req = ExportTraceServiceRequest()
            req.ParseFromString(p)
            f.write(json.dumps(encode_request_json(req), separators=(",", ":")) + "\n")
    framed = os.path.join(directory, "spans.binpb")
    with open(framed, "wb") as f:
        for chunk in frame_messages(payloads):
            f.write(chunk)
    return {"jsonl": jsonl, "framed": framed, "payloads": payloads, "spans": len(spans)}


def write_episodes_jsonl(path: str, episodes: int, seed: int = 5, per_line: int = 400) -> int:
    """``episodes`` agent episodes as OTLP JSON Lines, written directly (no SDK: fast enough for
    10,000 episodes in a test). Each: an invoke_agent root (one of three agents), a search, a
    lookup; every 10th also calls ``delete_database``. Returns the number of spans."""
    rng = random.Random(seed)
    agents = ["support", "billing", "planner"]
    t = 1_764_500_000_000_000_000
    spans: List[dict] = []
    lines: List[str] = []

    def attr(k: str, v: str) -> dict:
        return {"key": k, "value": {"stringValue": v}}

    def flush() -> None:
        doc = {"resourceSpans": [{"resource": {"attributes": [attr("service.name", "bench-agent")]},
                                  "scopeSpans": [{"scope": {"name": "bench"}, "spans": list(spans)}]}]}
        lines.append(json.dumps(doc, separators=(",", ":")))
        spans.clear()

    n = 0
    for e in range(episodes):
        trace = f"{rng.getrandbits(128):032x}"
        root = f"{rng.getrandbits(64) or 1:016x}"
        agent = agents[e % 3]
        tools = ["search", "lookup"] + (["delete_database"] if e % 10 == 0 else [])
        start = t + e * 2_000_000_000
        for i, tool in enumerate(tools):
            s = start + (i + 1) * 100_000_000
            spans.append({"traceId": trace, "spanId": f"{rng.getrandbits(64) or 1:016x}", "parentSpanId": root,
                          "name": f"execute_tool {tool}", "kind": 1, "startTimeUnixNano": str(s),
                          "endTimeUnixNano": str(s + 50_000_000),
                          "attributes": [attr("gen_ai.operation.name", "execute_tool"), attr("gen_ai.tool.name", tool),
                                         attr("gen_ai.tool.call.id", f"call_{e}_{i}")]})
        spans.append({"traceId": trace, "spanId": root, "name": f"invoke_agent {agent}", "kind": 1,
                      "startTimeUnixNano": str(start), "endTimeUnixNano": str(start + 1_000_000_000),
                      "attributes": [attr("gen_ai.operation.name", "invoke_agent"), attr("gen_ai.agent.name", agent)]})
        n += len(tools) + 1
        if len(spans) >= per_line:
            flush()
    if spans:
        flush()
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return n
