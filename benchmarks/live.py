"""Live overhead: the processor wrapping BatchSpanProcessor vs BatchSpanProcessor alone.

Two figures per kind of span, from the same rounds:

- **process CPU** (``time.process_time``: every thread of the process, the evaluation worker and
  the exporter's thread included) from the first span to the moment everything was evaluated and
  exported. In background mode the worker's CPU is the application's CPU too (one process, one
  GIL): this is what a user pays.
- **the agent thread's wall time** per span (``time.perf_counter`` around the spans only): how much
  later the application's own code goes on. This is the latency the processor adds.

Each round runs both set-ups back to back; the ratio is the median of the per-round ratios (see
common.paired_ratio), with the medians and min–max spreads of both printed beside it."""
from __future__ import annotations

import gc
import json
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from spanassert import AssertionSpanProcessor, load_config

from common import med, paired_ratio, rules_yaml, spread

ROUNDS = 7  # per kind of span; five kinds, so `make bench` stays near its old length
CHILDREN = 100  # spans per agent episode, as the issue measured it


class NoopExporter(SpanExporter):
    def export(self, spans: Sequence[Any]) -> SpanExportResult:
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


class _Setup:
    """One TracerProvider: the processor wrapping a BatchSpanProcessor, or the latter alone."""

    def __init__(self, with_assert: bool, config: Any, background: Optional[bool] = None) -> None:
        self.tp = TracerProvider()
        self.batch = BatchSpanProcessor(NoopExporter(), max_queue_size=1 << 20, max_export_batch_size=2048)
        self.proc: Optional[AssertionSpanProcessor] = None
        if with_assert:
            self.proc = AssertionSpanProcessor(config, export=self.batch, tick_interval=1.0, background=background)
            self.tp.add_span_processor(self.proc)
        else:
            self.tp.add_span_processor(self.batch)
        self.tracer = self.tp.get_tracer("bench")

    def settle(self) -> None:
        """Everything handed over so far evaluated (worker) and exported (the batch's thread)."""
        if self.proc is not None:
            assert self.proc._drain(60)
        self.batch.force_flush(60_000)


_HTTP = {f"http.attr{i}": i for i in range(8)}
_HTTP["http.route"] = "/orders/{id}"
_AGENT = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}
_ARGS = json.dumps({"order_id": "ORD-1", "amount": 12.5, "reason": "late delivery"})


def _plain_spans(tracer: Any, n: int) -> None:
    """Non-GenAI spans outside any agent episode (a web request and its database calls)."""
    for _ in range(n // 10):
        with tracer.start_as_current_span("GET /orders", attributes=_HTTP):
            for _ in range(9):
                with tracer.start_as_current_span("db.query", attributes=_HTTP):
                    pass


def _child_spans(tracer: Any, n: int) -> None:
    """Non-GenAI child spans inside agent episodes (HTTP calls to the model API, database calls)."""
    for _ in range(max(1, n // CHILDREN)):
        with tracer.start_as_current_span("invoke_agent support", attributes=_AGENT):
            for _ in range(CHILDREN - 1):
                with tracer.start_as_current_span("POST /v1/chat/completions", attributes=_HTTP):
                    pass


def _chat_spans(tracer: Any, n: int) -> None:
    """Model-step spans inside agent episodes."""
    for _ in range(max(1, n // CHILDREN)):
        with tracer.start_as_current_span("invoke_agent support", attributes=_AGENT):
            for _ in range(CHILDREN - 1):
                with tracer.start_as_current_span("chat gpt-4o", attributes={
                        "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
                        "gen_ai.usage.input_tokens": 120, "gen_ai.usage.output_tokens": 30}):
                    pass


def _tool_spans(tracer: Any, n: int) -> None:
    """Tool spans with JSON arguments, 19 per episode (tool_0 … tool_18: every rule passes)."""
    per_episode = 20
    for _ in range(n // per_episode):
        with tracer.start_as_current_span("invoke_agent support", attributes=_AGENT):
            for i in range(per_episode - 1):
                name = f"tool_{i}"
                with tracer.start_as_current_span(f"execute_tool {name}", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                        "gen_ai.tool.call.arguments": _ARGS}):
                    pass


def _measure(setup: _Setup, fn: Callable[[Any, int], None], n: int,
             worker_cpu: Optional[List[float]] = None) -> Tuple[float, float]:
    """(process CPU per span, including evaluating and exporting them; agent thread's wall per span)."""
    gc.collect()
    w0 = 0.0
    clock = None
    if worker_cpu is not None and setup.proc is not None and setup.proc._worker is not None:
        clock = time.pthread_getcpuclockid(setup.proc._worker.ident)  # type: ignore[arg-type]
        w0 = time.clock_gettime(clock)
    c0 = time.process_time()
    t0 = time.perf_counter()
    fn(setup.tracer, n)
    wall = time.perf_counter() - t0
    setup.settle()
    cpu = time.process_time() - c0
    if clock is not None and worker_cpu is not None:
        worker_cpu.append((time.clock_gettime(clock) - w0) / n)
    return cpu / n, wall / n


def _row(figure: str, xs: List[float], ys: List[float], target: Optional[float], unit: str = "µs/span") -> Dict[str, str]:
    ratio = paired_ratio(xs, ys)
    return {"figure": figure, "ours": f"{med(xs) * 1e6:.2f} {unit} ({spread(xs, 1e6)})",
            "baseline": f"{med(ys) * 1e6:.2f} {unit} ({spread(ys, 1e6)}) BatchSpanProcessor alone",
            "ratio": f"{ratio:.3f}", "target": f"≤ {target}" if target else "—",
            "met": ("yes" if ratio <= target else "NO") if target else "—"}


def _pair(config: Any, fn: Callable[[Any, int], None], n: int, background: Optional[bool],
          rounds: int = ROUNDS) -> Tuple[List[Tuple[float, float]], List[Tuple[float, float]], List[float]]:
    ours, base = _Setup(True, config, background), _Setup(False, config)
    for s in (ours, base):  # warm up
        fn(s.tracer, 2000)
        s.settle()
    xs: List[Tuple[float, float]] = []
    ys: List[Tuple[float, float]] = []
    worker: List[float] = []
    for i in range(rounds):  # alternating which goes first
        if i % 2 == 0:
            xs.append(_measure(ours, fn, n, worker))
            ys.append(_measure(base, fn, n))
        else:
            ys.append(_measure(base, fn, n))
            xs.append(_measure(ours, fn, n, worker))
    ours.tp.shutdown()
    base.tp.shutdown()
    return xs, ys, worker


def run(n: int = 12_000, rounds: int = ROUNDS) -> List[Dict[str, str]]:
    config = load_config(rules_yaml(20))
    # Episodes without tool calls (model steps, plain child spans) would fail the rules that need
    # calls, and violations are not the hot path: their rows use the variant every such episode passes.
    no_calls = load_config(rules_yaml(20, calls_required=False))
    rows = []
    for label, fn, target, wall_target, background, rules in [
            (f"non-GenAI child span inside an agent episode ({CHILDREN} per episode)", _child_spans, 1.10, None, None,
             no_calls),
            ("non-GenAI span outside any episode", _plain_spans, 1.05, None, None, config),
            (f"model-step span (chat) inside an episode ({CHILDREN} per episode)", _chat_spans, 1.25, None, None,
             no_calls),
            ("tool span, JSON arguments, default mode", _tool_spans, 1.40, 1.25, None, config),
            ("for the record: tool span, background=False (every check on the agent's thread)",
             _tool_spans, None, None, False, config)]:
        xs, ys, worker = _pair(rules, fn, n, background, rounds)
        extra = f"; the worker's own CPU: {med(worker) * 1e6:.2f} µs/span" if worker else ""
        kind = "20 rules" if rules is config else "20 rules that need no call"
        rows.append(_row(f"process CPU (all threads), {label}, {kind}{extra}",
                         [x[0] for x in xs], [y[0] for y in ys], target))
        rows.append(_row(f"agent thread's wall latency per span, {label}",
                         [x[1] for x in xs], [y[1] for y in ys], wall_target))
    rows.append(_growth(config))
    return rows


def engine_alone_row() -> Dict[str, str]:
    """`python benchmarks/run.py engine`: the engine alone, its own part (it was a row of `live`)."""
    return _engine_alone(load_config(rules_yaml(20)))


def _engine_alone(config: Any, episodes: int = 400) -> Dict[str, str]:
    """The engine's own cost per span, fed directly (no SDK, no processor): 19 tool spans and an
    agent span per episode, 20 rules."""
    from spanassert.core.engine import Engine

    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}
    samples = []
    for _ in range(7):
        engine = Engine(config)
        gc.collect()
        t0 = time.thread_time()
        for e in range(episodes):
            tid, root = f"{e + 1:032x}", f"{e + 1:016x}"
            engine.start_span(tid, root, None, "invoke_agent support", agent, 1)
            for i in range(19):
                sid = f"{(e + 1) * 100 + i:016x}"
                a = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": f"tool_{i}",
                     "gen_ai.tool.call.arguments": _ARGS}
                engine.start_span(tid, sid, root, f"execute_tool tool_{i}", a, 2 + i)
                engine.end_span(tid, sid, root, f"execute_tool tool_{i}", a, 2 + i, 3 + i)
            engine.end_span(tid, root, None, "invoke_agent support", agent, 1, 100, is_local_root=True)
        samples.append((time.thread_time() - t0) / (episodes * 20))
    m = med(samples)
    return {"figure": "engine alone per span (no SDK, 20 rules; 19 tool spans + the agent span per episode), CPU",
            "ours": f"{m * 1e6:.2f} µs/span ({spread(samples, 1e6)})", "baseline": "—", "ratio": "—",
            "target": "≤ 5 µs", "met": "yes" if m <= 5e-6 else "NO"}


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
        call(long_ctx, 18)  # the long episode ends with tool_18 too (trace_final_tool)
        long_root.end()
    tp.shutdown()
    early, late = med(samples_early), med(samples_late)
    ratio = late / early
    return {"figure": "cost per tool call at call 10,000 vs call 10 (one episode)",
            "ours": f"{late * 1e6:.2f} µs at #10,000", "baseline": f"{early * 1e6:.2f} µs at #10",
            "ratio": f"{ratio:.3f}", "target": "≤ 1.1", "met": "yes" if ratio <= 1.1 else "NO"}


if __name__ == "__main__":  # just these rows: python benchmarks/run.py live
    from common import table

    print(table(run(), ["figure", "ours", "baseline", "ratio", "target", "met"]))
