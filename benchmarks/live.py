"""Live overhead: the processor wrapping BatchSpanProcessor vs BatchSpanProcessor alone.

Costs are CPU time of the agent's own thread (``time.thread_time``): what the processor adds to the
code path of the application, excluding the exporter's thread (the same in both set-ups) and, by
default, the evaluation worker's (its CPU per span is printed beside the figure). The ratio is the
median of the per-round ratios (each round runs both set-ups back to back; see
common.paired_ratio); the medians and spreads of both are printed as well."""
from __future__ import annotations

import gc
import json
import time
from typing import Any, Dict, List, Optional, Sequence

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from spanassert import AssertionSpanProcessor, load_config

from common import alternate, med, paired_ratio, rules_yaml, spread


class NoopExporter(SpanExporter):
    def export(self, spans: Sequence[Any]) -> SpanExportResult:
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def _provider(with_assert: bool, config: Any, background: Optional[bool] = None) -> TracerProvider:
    tp = TracerProvider()
    batch = BatchSpanProcessor(NoopExporter(), max_queue_size=1 << 20, max_export_batch_size=2048)
    if with_assert:
        tp.add_span_processor(AssertionSpanProcessor(config, export=batch, tick_interval=1.0,
                                                     background=background))
    else:
        tp.add_span_processor(batch)
    return tp


def _plain_spans(tracer: Any, n: int) -> float:
    attrs = {f"http.attr{i}": i for i in range(8)}
    attrs["http.route"] = "/orders/{id}"
    t0 = time.thread_time()
    for _ in range(n // 10):
        with tracer.start_as_current_span("GET /orders", attributes=attrs):
            for _ in range(9):
                with tracer.start_as_current_span("db.query", attributes=attrs):
                    pass
    return (time.thread_time() - t0) / n


def _tool_spans(tracer: Any, n: int) -> float:
    args = json.dumps({"order_id": "ORD-1", "amount": 12.5, "reason": "late delivery"})
    per_episode = 20
    t0 = time.thread_time()
    for e in range(n // per_episode):
        with tracer.start_as_current_span("invoke_agent support", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}):
            for i in range(per_episode - 1):
                name = f"tool_{i}"
                with tracer.start_as_current_span(f"execute_tool {name}", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                        "gen_ai.tool.call.arguments": args}):
                    pass
    return (time.thread_time() - t0) / n


def run(n: int = 12_000) -> List[Dict[str, str]]:
    config = load_config(rules_yaml(20))
    rows = []
    # The default set-up (an export: evaluation on a worker, forbidden tools on the agent's thread),
    # then, for the record, every check on the agent's thread (background=False).
    for label, fn, target, background in [
            ("cost per non-tool span (20 rules)", _plain_spans, 1.05, None),
            ("cost per tool span, JSON arguments (20 rules)", _tool_spans, 1.5, None),
            ("for the record: cost per tool span, background=False (every check on the agent's thread)",
             _tool_spans, None, False)]:
        tps = {True: _provider(True, config, background), False: _provider(False, config)}
        tracers = {k: v.get_tracer("bench") for k, v in tps.items()}
        for k in tracers:  # warm up
            fn(tracers[k], 2000)

        proc = tps[True]._active_span_processor._span_processors[0]
        worker_cpu: List[float] = []

        def a(k: bool = True) -> float:
            gc.collect()
            if not k or proc._worker is None:
                return fn(tracers[k], n)
            # The worker's CPU time for the same spans, for the record (it is not the agent's).
            clock = time.pthread_getcpuclockid(proc._worker.ident)
            w0 = time.clock_gettime(clock)
            cost = fn(tracers[k], n)
            assert proc._drain(60)
            worker_cpu.append((time.clock_gettime(clock) - w0) / n)
            return cost

        ours, base = alternate(lambda: a(True), lambda: a(False), rounds=11)
        ratio = paired_ratio(ours, base)
        for tp in tps.values():
            tp.shutdown()
        if worker_cpu:
            label += f"; the worker's own CPU: {med(worker_cpu) * 1e6:.2f} µs/span"
        rows.append({"figure": label, "ours": f"{med(ours) * 1e6:.2f} µs/span ({spread(ours, 1e6)})",
                     "baseline": f"{med(base) * 1e6:.2f} µs/span ({spread(base, 1e6)}) BatchSpanProcessor alone",
                     "ratio": f"{ratio:.3f}", "target": f"≤ {target}" if target else "—",
                     "met": ("yes" if ratio <= target else "NO") if target else "—"})
    rows.append(_growth(config))
    rows.append(_engine_alone(config))
    return rows


def _engine_alone(config: Any, episodes: int = 400) -> Dict[str, str]:
    """For the record: the engine's own cost per span, fed directly (no SDK, no processor)."""
    from spanassert.core.engine import Engine

    args = json.dumps({"order_id": "ORD-1", "amount": 12.5, "reason": "late delivery"})
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}
    samples = []
    for _ in range(5):
        engine = Engine(config)
        t0 = time.thread_time()
        for e in range(episodes):
            tid, root = f"{e + 1:032x}", f"{e + 1:016x}"
            engine.start_span(tid, root, None, "invoke_agent support", agent, 1)
            for i in range(19):
                sid = f"{(e + 1) * 100 + i:016x}"
                a = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": f"tool_{i}",
                     "gen_ai.tool.call.arguments": args}
                engine.start_span(tid, sid, root, f"execute_tool tool_{i}", a, 2 + i)
                engine.end_span(tid, sid, root, f"execute_tool tool_{i}", a, 2 + i, 3 + i)
            engine.end_span(tid, root, None, "invoke_agent support", agent, 1, 100, is_local_root=True)
        samples.append((time.thread_time() - t0) / (episodes * 20))
    samples.sort()
    return {"figure": "for the record: engine alone per span of those episodes (no SDK, 20 rules)",
            "ours": f"{samples[2] * 1e6:.2f} µs/span", "baseline": "—", "ratio": "—", "target": "—", "met": "—"}


def _growth(config: Any) -> Dict[str, str]:
    """Cost of a tool call at call 10,000 of one episode vs at call 10 (engine path, no exporter).

    Interleaved: one call in a long episode (at calls 10,000 … 10,199), then one at call 10 of a
    fresh episode, and so on, so that both samples of a pair see the same machine state."""
    tp = TracerProvider()
    proc = AssertionSpanProcessor(config, tick_interval=0)
    tp.add_span_processor(proc)
    tracer = tp.get_tracer("bench")
    args = json.dumps({"amount": 5})

    def call(ctx: Any, i: int) -> float:
        name = f"tool_{i % 19}"
        t0 = time.thread_time()
        s = tracer.start_span(f"execute_tool {name}", context=ctx, attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
            "gen_ai.tool.call.arguments": args})
        s.end()
        return time.thread_time() - t0

    def agent() -> Any:
        return tracer.start_span("invoke_agent run", attributes={"gen_ai.operation.name": "invoke_agent"})

    samples_early: List[float] = []
    samples_late: List[float] = []
    for _ in range(5):
        long_root = agent()
        long_ctx = trace.set_span_in_context(long_root)
        for i in range(10_000):
            call(long_ctx, i)
        for i in range(10_000, 10_200):
            # A fresh episode calls tool_0 … tool_18 (so it breaks no rule); its call #10 and the
            # long episode's next call are timed back to back, after the same preceding work.
            short_root = agent()
            short_ctx = trace.set_span_in_context(short_root)
            for j in range(10):
                call(short_ctx, j)
            if i % 2:  # which of the two goes first alternates
                samples_late.append(call(long_ctx, i))
                samples_early.append(call(short_ctx, 10))
            else:
                samples_early.append(call(short_ctx, 10))
                samples_late.append(call(long_ctx, i))
            for j in range(11, 19):
                call(short_ctx, j)
            short_root.end()
        long_root.end()
    tp.shutdown()
    early, late = med(samples_early), med(samples_late)
    ratio = late / early
    return {"figure": "cost per tool call at call 10,000 vs call 10 (one episode)",
            "ours": f"{late * 1e6:.2f} µs at #10,000", "baseline": f"{early * 1e6:.2f} µs at #10",
            "ratio": f"{ratio:.3f}", "target": "≤ 1.1", "met": "yes" if ratio <= 1.1 else "NO"}
