"""Guard decision latency (issue 17): `guard.check()` per pending call, with the 20 rules of
benchmarks/common.py (every test `action: block`), in the live processor's episodes.

Each agent run calls tool_0 … tool_18 with arguments (the rules' steady state: every rule passes),
every call decided first and then written by the "framework" as its `execute_tool` span (which the
engine matches to the decision, so the episode's state is what production builds). One decision is
timed alone, with the garbage collector on, over at least ``n`` decisions: p50, p99 and max.
The baseline column: the same agent's tool span (start + end, no guard) through the processor.
"""
from __future__ import annotations

import json
import os
import sys
import time
from typing import Dict, List

sys.path.insert(0, os.path.dirname(__file__))

from common import rules_yaml, table  # noqa: E402

CALLED = 19
TARGET_P99_US = 100.0


def _blocking_rules() -> str:
    return "\n".join(line + ("\n    action: block" if line.startswith("  - id: ") else "")
                     for line in rules_yaml(20).splitlines()) + "\n"


def _pct(xs: List[int], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] / 1000.0


def run(n: int = 10_000) -> List[Dict[str, str]]:
    from opentelemetry.sdk.trace import TracerProvider

    from spanassert import AssertionSpanProcessor
    from spanassert.config import load_config

    config = load_config(_blocking_rules())
    assert sum(t.action == "block" for t in config.tests) == 20
    processor = AssertionSpanProcessor(config, tick_interval=0)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("bench")
    guard = processor.guard(tracer_provider=provider)
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "bench"}
    decisions: List[int] = []
    spans: List[int] = []
    clock = time.perf_counter_ns
    blocked = 0
    run_no = 0
    while len(decisions) < n:
        run_no += 1
        with tracer.start_as_current_span("invoke_agent bench", attributes=agent):
            for i in range(CALLED):
                tool = f"tool_{i}"
                args = {"amount": (run_no * 7 + i) % 900, "note": "x" * 40}
                call_id = f"call-{run_no}-{i}"
                t0 = clock()
                d = guard.check(tool, args, call_id=call_id)
                decisions.append(clock() - t0)
                blocked += d.blocked
                attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                         "gen_ai.tool.call.id": call_id, "gen_ai.tool.call.arguments": json.dumps(args)}
                t0 = clock()
                with tracer.start_as_current_span(f"execute_tool {tool}", attributes=attrs):
                    pass
                spans.append(clock() - t0)
    # The baseline: the same spans with no guard before them (runs of their own, same processor).
    plain: List[int] = []
    while len(plain) < n:
        run_no += 1
        with tracer.start_as_current_span("invoke_agent bench", attributes=agent):
            for i in range(CALLED):
                tool = f"tool_{i}"
                args = {"amount": (run_no * 7 + i) % 900, "note": "x" * 40}
                attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                         "gen_ai.tool.call.id": f"call-{run_no}-{i}", "gen_ai.tool.call.arguments": json.dumps(args)}
                t0 = clock()
                with tracer.start_as_current_span(f"execute_tool {tool}", attributes=attrs):
                    pass
                plain.append(clock() - t0)
    processor.shutdown()
    assert blocked == 0, f"{blocked} decisions blocked: the steady state must pass"
    p50, p99, worst = _pct(decisions, 0.50), _pct(decisions, 0.99), max(decisions) / 1000.0
    b50, b99 = _pct(plain, 0.50), _pct(plain, 0.99)
    return [{
        "figure": f"guard: decision latency per call (20 block rules, {len(decisions):,} decisions, GC on)",
        "ours": f"p50 {p50:.1f} µs, p99 {p99:.1f} µs, max {worst:.0f} µs",
        "baseline": f"tool span alone p50 {b50:.1f} µs, p99 {b99:.1f} µs",
        "ratio": f"{p99 / b99:.2f}× (p99)" if b99 else "-",
        "target": f"p99 ≤ {TARGET_P99_US:.0f} µs",
        "met": "yes" if p99 <= TARGET_P99_US else "NO",
    }]


if __name__ == "__main__":
    print(table(run(), ["figure", "ours", "baseline", "ratio", "target", "met"]))
