"""Helpers for tests that run the real OpenTelemetry SDK with the processor."""
from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Tuple

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from spanassert.assertions import ASSERTION_TYPES, BuildContext
from spanassert.config.model import Config, EpisodeSettings, TestCase
from spanassert.core.model import Severity


def build_config(tests: List[Dict[str, Any]], episodes: Optional[EpisodeSettings] = None) -> Config:
    """A Config built without the YAML loader: [{id, assertions: [{type, ...}], severity?, mode?}]."""
    out = []
    for t in tests:
        built = []
        for i, spec in enumerate(t["assertions"]):
            spec = dict(spec)
            cls = ASSERTION_TYPES[spec.pop("type")]
            values = {k: (f.default if f.default is not None else None) for k, f in cls.fields.items()}
            from spanassert.core.model import MISSING

            values = {k: (None if v is MISSING else v) for k, v in values.items()}
            values.update(spec)
            ctx = BuildContext()
            a = cls(t["id"], i, values, ctx)
            assert not ctx.errors, ctx.errors
            built.append(a)
        out.append(TestCase(id=t["id"], assertions=built, severity=Severity(t.get("severity", "error")),
                            mode=t.get("mode", "enforce")))
    return Config(tests=out, episodes=episodes or EpisodeSettings())


class Rig:
    """A TracerProvider whose only processor is ours, wrapping a SimpleSpanProcessor to memory
    (evaluating inline unless ``background=True`` is passed)."""

    def __init__(self, config: Config, *, export: bool = True, **kwargs: Any) -> None:
        from spanassert import AssertionSpanProcessor

        self.exporter = InMemorySpanExporter()
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        # Evaluation on the test's own thread unless a test asks for the background worker (the
        # default with an export): these tests read verdicts right after a span ends.
        kwargs.setdefault("background", False)
        self.processor = AssertionSpanProcessor(
            config, export=SimpleSpanProcessor(self.exporter) if export else None,
            meter_provider=self.meter_provider, tick_interval=kwargs.pop("tick_interval", 0), **kwargs)
        self.provider = TracerProvider(resource=Resource.create({"service.name": "agent-under-test"}))
        self.provider.add_span_processor(self.processor)
        self.tracer = self.provider.get_tracer("test-agent")

    def metric(self, name: str) -> Dict[Tuple, float]:
        """{sorted attribute items: value} for a metric, from the in-memory reader."""
        out: Dict[Tuple, float] = {}
        data = self.reader.get_metrics_data()
        if data is None:
            return out
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    if m.name != name:
                        continue
                    for p in m.data.data_points:
                        key = tuple(sorted((p.attributes or {}).items()))
                        out[key] = getattr(p, "value", None) if hasattr(p, "value") else p.count
        return out

    def total(self, name: str) -> float:
        return sum(self.metric(name).values())


def genai_tool(tracer: Any, name: str, arguments: Any = None, result: Any = None, error: bool = False):
    """Start an execute_tool span the way OTel GenAI instrumentations do (name at start)."""
    span = tracer.start_span(f"execute_tool {name}", attributes={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name})
    return span


def finish_tool(span: Any, arguments: Any = None, result: Any = None, error: bool = False) -> None:
    from opentelemetry.trace import Status, StatusCode

    if arguments is not None:
        span.set_attribute("gen_ai.tool.call.arguments",
                           arguments if isinstance(arguments, str) else json.dumps(arguments))
    if result is not None:
        span.set_attribute("gen_ai.tool.call.result", result if isinstance(result, str) else json.dumps(result))
    if error:
        span.set_status(Status(StatusCode.ERROR, "boom"))
        span.set_attribute("error.type", "ToolError")
    span.end()
