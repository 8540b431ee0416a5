"""What the stress tests share: one rules file, the real SDK wired to the processor, and probes
(a counting wrapped processor, metric totals) that keep nothing per span beyond what they count."""
from __future__ import annotations

import collections
import threading
from typing import Any, Dict, Iterable, List, Tuple

from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.id_generator import IdGenerator

from spanassert import AssertionSpanProcessor
from spanassert.config import load_config
from spanassert.config.model import Config

RULES = """\
version: 1
tests:
  - id: no-delete
    assertions:
      - type: trace_must_not_call_tool
        tool: delete_database
  - id: must-lookup
    assertions:
      - type: trace_must_call_tool
        tool: lookup_order
  - id: refund-limit
    assertions:
      - type: trace_args_valid
        tool: refund
        schema:
          type: object
          properties:
            amount: {type: number, maximum: 500}
          required: [amount]
  - id: no-drop-table
    assertions:
      - type: trace_must_not_call_tool
        tool: run_sql
        args_match: {query: "(?i)drop\\\\s+table"}
  - id: lookup-returns-order
    assertions:
      - type: trace_tool_result
        tool: lookup_order
        assert: ["json.id matches /^ord_/"]
  - id: lookup-before-refund
    assertions:
      - type: trace_tool_sequence
        sequence: [lookup_order, refund]
        allow_other_tools: true
"""

TOOLS = ["lookup_order", "refund", "run_sql", "delete_database", "search"]


def rules(episodes: str = "") -> Config:
    """The shared rules file through the real loader, with an optional ``episodes:`` block."""
    return load_config(RULES + (("episodes:\n" + episodes) if episodes else ""))


class CountingProcessor(SpanProcessor):
    """A wrapped processor that counts deliveries per span id (exactly-once checks)."""

    def __init__(self, keep_ids: bool = True) -> None:
        self.keep_ids = keep_ids
        self.seen: "collections.Counter[int]" = collections.Counter()
        self.total = 0
        self.flagged = 0  # spans delivered with a gen_ai.evaluation.result event
        self._lock = threading.Lock()

    def on_end(self, span: ReadableSpan) -> None:
        flagged = any(e.name == "gen_ai.evaluation.result" for e in span.events)
        with self._lock:
            self.total += 1
            self.flagged += flagged
            if self.keep_ids:
                self.seen[span.context.span_id] += 1


class SequentialIds(IdGenerator):
    """Unique ids by construction. The SDK's default draws from the global ``random``, which
    hypothesis reseeds for every example, so its ids repeat across examples."""

    def __init__(self) -> None:
        self._next = 0
        self._lock = threading.Lock()

    def _take(self) -> int:
        with self._lock:
            self._next += 1
            return self._next

    def generate_span_id(self) -> int:
        return self._take()

    def generate_trace_id(self) -> int:
        return (0xABC << 100) | self._take()


class LiveRig:
    """A TracerProvider whose only processor is ours, exporting to ``export``."""

    def __init__(self, config: Config, export: Any, **kwargs: Any) -> None:
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        kwargs.setdefault("tick_interval", 0)
        # Evaluation on the caller's thread unless a test asks for the background worker (the
        # default with an export, checked equal to this in tests/test_processor_background.py):
        # these tests read results right after their spans end.
        kwargs.setdefault("background", False)
        self.processor = AssertionSpanProcessor(config, export=export, meter_provider=self.meter_provider,
                                                **kwargs)
        self.provider = TracerProvider(resource=Resource.create({"service.name": "stress-agent"}),
                                       id_generator=SequentialIds())
        self.provider.add_span_processor(self.processor)
        self.tracer = self.provider.get_tracer("stress")

    def points(self, name: str) -> Dict[Tuple, float]:
        out: Dict[Tuple, float] = {}
        data = self.reader.get_metrics_data()
        if data is None:
            return out
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    if m.name == name:
                        for p in m.data.data_points:
                            out[tuple(sorted((p.attributes or {}).items()))] = getattr(p, "value", None) or getattr(p, "count", 0)
        return out

    def total(self, name: str) -> float:
        return sum(v for v in self.points(name).values() if v)


def tool_attrs(name: str, **extra: Any) -> Dict[str, Any]:
    a: Dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
    a.update(extra)
    return a


def agent_attrs(name: str, **extra: Any) -> Dict[str, Any]:
    a: Dict[str, Any] = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}
    a.update(extra)
    return a


def new_root(tracer: Any, name: str = "support") -> Any:
    """An agent span that starts a new trace (not the current context's)."""
    return tracer.start_span(f"invoke_agent {name}", context=trace.set_span_in_context(trace.INVALID_SPAN),
                             attributes=agent_attrs(name))


def child(tracer: Any, parent: Any, name: str, attributes: Dict[str, Any]) -> Any:
    return tracer.start_span(name, context=trace.set_span_in_context(parent), attributes=attributes)


def verdict_signatures(results: Iterable[Any]) -> Dict[str, List[tuple]]:
    """trace id -> that episode's verdict signature."""
    return {r.trace_id: r.verdict_signature() for r in results}
