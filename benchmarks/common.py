"""Shared benchmark plumbing: alternating A/B rounds, medians and spreads, deterministic inputs."""
from __future__ import annotations

import random
import statistics
import time
from typing import Callable, Dict, List, Sequence, Tuple

ROUNDS = 7


def alternate(a: Callable[[], float], b: Callable[[], float], rounds: int = ROUNDS) -> Tuple[List[float], List[float]]:
    """Run A and B alternately (the machine is shared and noisy); each returns seconds (or a rate)."""
    xs: List[float] = []
    ys: List[float] = []
    for i in range(rounds):
        if i % 2 == 0:
            xs.append(a())
            ys.append(b())
        else:
            ys.append(b())
            xs.append(a())
    return xs, ys


def paired_ratio(xs: Sequence[float], ys: Sequence[float]) -> float:
    """The median of the per-round ratios x/y. Each round runs A and B back to back, so a round's
    ratio is measured under one machine state; on a shared machine whose speed drifts by tens of
    percent between rounds, this is steadier than the ratio of the two medians."""
    return statistics.median(x / y for x, y in zip(xs, ys))


def med(xs: Sequence[float]) -> float:
    return statistics.median(xs)


def spread(xs: Sequence[float], scale: float = 1.0, fmt: str = "{:.2f}") -> str:
    return f"{fmt.format(min(xs) * scale)}–{fmt.format(max(xs) * scale)}"


def timed(fn: Callable[[], None]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def rules_yaml(n_tests: int, seed: int = 7, called: int = 19) -> str:
    """A deterministic rules file with ``n_tests`` tests mixing the assertion types production users
    write. Episodes of the benchmarks call ``tool_0`` … ``tool_{called-1}`` in order, so in steady
    state every rule passes (violations are rare in production; their cost is not the hot path)."""
    rng = random.Random(seed)
    lines = ["version: 1", "suite: bench", "tests:"]
    for i in range(n_tests):
        kind = i % 6
        a, b = sorted(rng.sample(range(called), 2))
        lines.append(f"  - id: rule-{i}")
        lines.append("    severity: error")
        lines.append("    assertions:")
        if kind == 0:
            lines += ["      - type: trace_must_not_call_tool", f"        tool: forbidden_{i}"]
        elif kind == 1:
            lines += ["      - type: trace_must_call_tool", f"        tool: tool_{a}"]
        elif kind == 2:
            lines += ["      - type: trace_max_tool_calls", "        max: 100000", f"        tool: tool_{a}"]
        elif kind == 3:
            lines += ["      - type: trace_args_valid", f"        tool: tool_{a}", "        schema:",
                      "          type: object", "          properties:",
                      f"            amount: {{type: number, maximum: {1000 + i}}}"]
        elif kind == 4:
            lines += ["      - type: trace_tool_sequence", f"        sequence: [tool_{a}, tool_{b}]",
                      "        allow_other_tools: true"]
        else:
            lines += ["      - type: trace_must_not_call_tool", "        tool: send_email",
                      "        args_match: {to: '@evil\\.com$'}"]
    return "\n".join(lines) + "\n"


def table(rows: List[Dict[str, str]], cols: Sequence[str]) -> str:
    widths = {c: max(len(c), *(len(r.get(c, "")) for r in rows)) for c in cols}
    out = ["| " + " | ".join(c.ljust(widths[c]) for c in cols) + " |",
           "|" + "|".join("-" * (widths[c] + 2) for c in cols) + "|"]
    for r in rows:
        out.append("| " + " | ".join(r.get(c, "").ljust(widths[c]) for c in cols) + " |")
    return "\n".join(out)
