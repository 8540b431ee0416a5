"""Agent episodes written to OTLP JSON Lines by the real SDK, for the replay and report tests.

An episode is a list of tool calls ``(tool, arguments)``; ``arguments=None`` leaves
``gen_ai.tool.call.arguments`` unset (as instrumentations that do not record content do). Spans
follow the OTel GenAI conventions: an ``invoke_agent`` root and ``execute_tool <name>`` children.
"""
from __future__ import annotations

import json
import os
from typing import Any, List, Optional, Sequence, Tuple

from otlp_file_exporter import FileSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanProcessor

Call = Tuple[str, Optional[Any]]


class Written:
    """What was written: per episode, its trace id and the span ids of its calls in call order."""

    def __init__(self) -> None:
        self.trace_ids: List[str] = []
        self.call_span_ids: List[List[str]] = []
        self.root_span_ids: List[str] = []


def run_episodes(provider: TracerProvider, episodes: Sequence[Sequence[Call]], agent: str = "ops") -> Written:
    tracer = provider.get_tracer("replay-tests")
    out = Written()
    for calls in episodes:
        with tracer.start_as_current_span(f"invoke_agent {agent}", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent}) as root:
            out.trace_ids.append(format(root.get_span_context().trace_id, "032x"))
            out.root_span_ids.append(format(root.get_span_context().span_id, "016x"))
            ids = []
            for tool, args in calls:
                with tracer.start_as_current_span(f"execute_tool {tool}", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}) as span:
                    if args is not None:
                        span.set_attribute("gen_ai.tool.call.arguments", json.dumps(args))
                    ids.append(format(span.get_span_context().span_id, "016x"))
            out.call_span_ids.append(ids)
    return out


def write_episodes(path: "os.PathLike[str] | str", episodes: Sequence[Sequence[Call]],
                   processor: Optional[SpanProcessor] = None, agent: str = "ops") -> Written:
    """Run the episodes under a TracerProvider exporting to ``path`` with ``FileSpanExporter``
    (through ``processor`` when given, e.g. the live AssertionSpanProcessor wrapping the export)."""
    if processor is None:
        processor = SimpleSpanProcessor(FileSpanExporter(os.fspath(path)))
    provider = TracerProvider(resource=Resource.create({"service.name": "agent-under-test"}))
    provider.add_span_processor(processor)
    try:
        return run_episodes(provider, episodes, agent)
    finally:
        provider.shutdown()
