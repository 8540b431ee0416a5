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
                    "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"}):
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
