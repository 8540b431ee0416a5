"""Agent-thread CPU per tool span (time.thread_time), the processor in its default background mode
wrapping a BatchSpanProcessor, against the BatchSpanProcessor alone. A quick figure for one change
(`make bench` is the full benchmark):

    python benchmarks/agent_thread_cost.py [episodes]

Prints µs of the agent thread's CPU per tool span for each, and the ratio. Alternates rounds so a
shared machine's drift hits both sides alike; reports medians.
"""
from __future__ import annotations

import json
import statistics
import sys
import time

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from spanassert import AssertionSpanProcessor, load_config

RULES = """\
version: 1
tests:
  - id: no-delete
    assertions: [{type: trace_must_not_call_tool, tool: delete_database}]
  - id: budget
    assertions: [{type: trace_max_tool_calls, max: 50}]
  - id: lookup-first
    assertions: [{type: trace_tool_sequence, sequence: [lookup_order, refund], allow_other_tools: true}]
  - id: refund-cap
    assertions:
      - type: trace_args_valid
        tool: refund
        schema: {type: object, properties: {amount: {type: number, maximum: 500}}, required: [amount]}
  - id: lookup-ok
    assertions: [{type: trace_tool_status, tool: lookup_order, must_succeed: true}]
"""
TOOLS = ["lookup_order", "search", "refund", "search", "lookup_order"]


class Noop(SpanExporter):
    def export(self, spans):  # type: ignore[no-untyped-def]
        return SpanExportResult.SUCCESS


def _round(with_processor: bool, episodes: int) -> float:
    batch = BatchSpanProcessor(Noop(), max_queue_size=1 << 20, max_export_batch_size=2048)
    tp = TracerProvider()
    proc = None
    if with_processor:
        proc = AssertionSpanProcessor(load_config(RULES), export=batch, tick_interval=0)
        tp.add_span_processor(proc)
    else:
        tp.add_span_processor(batch)
    tracer = tp.get_tracer("cost")
    args = [json.dumps({"id": i, "amount": 20, "q": "x" * 64}) for i in range(len(TOOLS))]
    tool_time = 0.0
    for _ in range(episodes):
        root = tracer.start_span("invoke_agent a", context=trace.set_span_in_context(trace.INVALID_SPAN),
                                 attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"})
        ctx = trace.set_span_in_context(root)
        for name, a in zip(TOOLS, args):
            t0 = time.thread_time()
            s = tracer.start_span(f"execute_tool {name}", context=ctx, attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                "gen_ai.tool.call.arguments": a})
            s.set_attribute("gen_ai.tool.call.result", '{"id": "ord_1"}')
            s.end()
            tool_time += time.thread_time() - t0
        root.end()
    if proc is not None:
        proc._drain(60)
    tp.shutdown()
    return tool_time / (episodes * len(TOOLS)) * 1e6


def main() -> None:
    episodes = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    ours, base = [], []
    for _ in range(5):
        ours.append(_round(True, episodes))
        base.append(_round(False, episodes))
    o, b = statistics.median(ours), statistics.median(base)
    print(f"agent-thread CPU per tool span: processor (background) {o:.1f} µs "
          f"[{min(ours):.1f}-{max(ours):.1f}], BatchSpanProcessor alone {b:.1f} µs "
          f"[{min(base):.1f}-{max(base):.1f}], ratio {o / b:.2f}")


if __name__ == "__main__":
    main()
