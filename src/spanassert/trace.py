"""Trace queries and ``check()``: understudy's ergonomics, on real OpenTelemetry data.

```python
trace = Trace.from_spans(exporter.get_finished_spans())      # or Trace.from_file("traces.jsonl")
assert trace.called("lookup_order", order_id="ORD-10027")
assert not trace.called("issue_refund")
assert trace.call_sequence() == ["lookup_order", "get_return_policy"]
results = check(trace, "rules.yaml")                          # or an expectations dict
assert results.passed, results.summary()
```

The tool calls come from the same convention mapping as live checking, and ``check`` runs the same
engine over the trace's spans, so a test sees the verdicts production would give. ``check`` and
its results are defined in :mod:`spanassert.trace_check` and import from here too.
"""
from __future__ import annotations

import os
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from .core.assembly import live_order
from .core.model import MISSING, SpanEvent, SpanRecord, ToolCall, call_status
from .core.spans import dropped_count
from .core.toolcall import AMBIGUOUS_ARGUMENTS, ARGUMENTS_IN_DOUBT
from .mapping import ROLE_AGENT, ROLE_STEP, ROLE_TOOL, Mapper
from .trace_check import (
    EXPECTATION_KEYS,
    CheckItem,
    CheckMetric,
    CheckResult,
    check,
    expectations_config,
    plan_expectations,
)


def _from_readable(span: Any) -> SpanRecord:
    """An SDK ``ReadableSpan`` as a :class:`SpanRecord` (the form every reader produces)."""
    ctx = span.get_span_context()
    parent = span.parent
    status = span.status.status_code.value if span.status is not None else 0
    return SpanRecord(
        trace_id=format(ctx.trace_id, "032x"),
        span_id=format(ctx.span_id, "016x"),
        parent_span_id=format(parent.span_id, "016x") if parent is not None else None,
        name=span.name,
        kind=span.kind.value + 1 if span.kind is not None else 1,
        start_ns=span.start_time or 0,
        end_ns=span.end_time or span.start_time or 0,
        attributes=dict(span.attributes or {}),
        status_code=status,
        status_message=(span.status.description or "") if span.status is not None else "",
        events=[SpanEvent(e.name, e.timestamp, dict(e.attributes or {})) for e in span.events],
        resource=dict(span.resource.attributes) if span.resource is not None else {},
        scope=span.instrumentation_scope.name if span.instrumentation_scope is not None else "",
        dropped=dropped_count(getattr(span, "dropped_attributes", 0), getattr(span, "dropped_events", 0),
                              *(getattr(e, "dropped_attributes", 0) for e in span.events)),
    )


class Undecidable(Exception):
    """A query the recorded spans cannot answer (e.g. arguments that were not recorded)."""


class Trace:
    """The tool calls of one or more traces, queryable the way understudy's ``Trace`` is."""

    def __init__(self, records: Sequence[SpanRecord], mapper: Optional[Mapper] = None) -> None:
        self.records: List[SpanRecord] = list(records)
        self.mapper = mapper or Mapper()
        self.tool_calls: List[ToolCall] = self._calls()

    # -- construction ---------------------------------------------------------------------------
    @classmethod
    def from_spans(cls, spans: Iterable[Any], mapper: Optional[Mapper] = None) -> Trace:
        """From SDK ``ReadableSpan``s (e.g. ``InMemorySpanExporter.get_finished_spans()``) or
        :class:`SpanRecord`s."""
        recs = [s if isinstance(s, SpanRecord) else _from_readable(s) for s in spans]
        return cls(recs, mapper)

    @classmethod
    def from_file(cls, *paths: Union[str, os.PathLike[str]], mapper: Optional[Mapper] = None) -> Trace:
        """From exported OTLP files (any form ``spanassert replay`` reads). Bad lines raise."""
        from .otlp import read_spans

        return cls(list(read_spans(list(paths), strict=True)), mapper)

    def _calls(self) -> List[ToolCall]:
        by_id = {r.span_id: r for r in self.records}
        m = self.mapper
        calls: List[ToolCall] = []
        # Tool definitions recorded on model steps and agents that have ended, and the calls whose
        # spans have not: a call's arguments are bound (a bare value to the tool's one parameter)
        # by what is known when its span ends, as the engine does.
        known: Dict[str, Any] = {}
        open_calls: Dict[str, ToolCall] = {}
        for phase, r, _ in live_order(self.records):
            if phase == 1:
                call_open = open_calls.pop(r.span_id, None)
                if call_open is not None:
                    own = m.declared_parameters(call_open.name, r.attributes)
                    call_open.set_params(own if own is not None else known.get(call_open.name))
                elif m.role(r.name, r.attributes) in (ROLE_STEP, ROLE_AGENT):
                    known.update(m.tool_definitions(r.attributes) or {})
                continue
            if m.role(r.name, r.attributes) != ROLE_TOOL:
                continue
            name = m.tool_name(r.name, r.attributes)
            if name is None:
                continue
            agent = None
            cur = by_id.get(r.parent_span_id) if r.parent_span_id else None
            hops = 0
            while cur is not None and hops < 10_000:
                if m.role(cur.name, cur.attributes) == ROLE_AGENT:
                    agent = m.agent_name(cur.name, cur.attributes)
                    break
                cur = by_id.get(cur.parent_span_id) if cur.parent_span_id else None
                hops += 1
            c = ToolCall(name, span_id=r.span_id, trace_id=r.trace_id, parent_span_id=r.parent_span_id,
                         start_ns=r.start_ns, index=len(calls), agent=agent, call_id=m.call_id(r.attributes))
            args, result, err, args_other, result_other = m.call_end(r.attributes, r.events, r.status_code, True, True)
            c.finish(end_ns=r.end_ns, status=call_status(r.status_code, err), error_type=err, arguments_raw=args,
                     result_raw=result, arguments_other=args_other, result_other=result_other)
            calls.append(c)
            open_calls[r.span_id] = c
        return calls

    # -- queries --------------------------------------------------------------------------------
    def called(self, tool: str, **arguments: Any) -> bool:
        """True if some call of ``tool`` has these argument values (equality on the given keys only).

        Never a false answer either way: when no call matched but a call of ``tool`` has arguments
        that cannot be read as named arguments (not recorded, unparsable, or a bare value that could
        not be bound to the tool's parameter) or that are in doubt (a JSON key repeated with
        different values, or recorded twice with different values: no match rests on them), it
        raises :class:`Undecidable`, since that call may be the one asked about (``assert not
        trace.called(...)`` must not pass on it)."""
        unknown: Optional[ToolCall] = None
        problem = ""
        for c in self.calls_to(tool):
            if not arguments:
                return True
            if c.arguments_named and not c.ambiguous & ARGUMENTS_IN_DOUBT:
                if self._args_equal(c, arguments):
                    return True
            elif unknown is None:
                unknown = c
                # Arguments in doubt (read one way, recorded another too): no answer rests on them.
                repeated = c.ambiguous & AMBIGUOUS_ARGUMENTS
                problem = c.arguments_problem or (
                    "its recorded arguments repeat a JSON key with different values" if repeated
                    else "its span records its arguments twice, with different values")
        if unknown is not None:
            raise Undecidable(f"whether `{tool}` was called with {arguments!r} cannot be decided: call #"
                              f"{unknown.index + 1} (span {unknown.span_id}): {problem}")
        return False

    def calls_to(self, tool: str) -> List[ToolCall]:
        return [c for c in self.tool_calls if c.name == tool]

    def call_sequence(self) -> List[str]:
        return [c.name for c in self.tool_calls]

    def agent_called(self, agent: str, tool: str) -> bool:
        return any(c.agent == agent for c in self.calls_to(tool))

    def calls_by_agent(self, agent: str) -> List[ToolCall]:
        """The calls made under agent ``agent`` (understudy's signature: the agent is required)."""
        return [c for c in self.tool_calls if c.agent == agent]

    def agents_invoked(self) -> List[str]:
        """The distinct names of the agents that ran, sorted (a method, as in understudy): every
        agent span's name, and the agent each tool call ran under."""
        seen = set()
        for r in self.records:
            if self.mapper.role(r.name, r.attributes) == ROLE_AGENT:
                name = self.mapper.agent_name(r.name, r.attributes)
                if name:
                    seen.add(name)
        seen.update(c.agent for c in self.tool_calls if c.agent)
        return sorted(seen)

    @property
    def duration(self) -> float:
        """Wall-clock seconds from the first span's start to the last span's end."""
        if not self.records:
            return 0.0
        return (max(r.end_ns for r in self.records) - min(r.start_ns for r in self.records)) / 1e9

    @property
    def terminal_state(self) -> str:
        """``completed`` when every root span ended without error, ``error`` when one ended in error,
        ``incomplete`` when no root span was recorded."""
        roots = [r for r in self.records if r.parent_span_id is None]
        if not roots:
            return "incomplete"
        return "error" if any(r.status_code == 2 for r in roots) else "completed"

    @staticmethod
    def _args_equal(call: ToolCall, expected: Mapping[str, Any]) -> bool:
        if not expected:
            return True
        args = call.arguments
        if args is MISSING or not isinstance(args, dict):
            return False
        return all(k in args and args[k] == v for k, v in expected.items())

    def __len__(self) -> int:
        return len(self.tool_calls)

    def __repr__(self) -> str:
        return f"Trace({len(self.records)} spans, calls={self.call_sequence()})"


# ``check`` and its results live in :mod:`.trace_check`; they import from here as before.
__all__ = ["Trace", "Undecidable", "check", "CheckResult", "CheckItem", "CheckMetric", "EXPECTATION_KEYS",
           "plan_expectations", "expectations_config"]
