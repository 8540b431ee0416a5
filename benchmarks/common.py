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


KINDS = 14  # the six kinds of the first benchmarks, then the eight of issue 16


def rules_yaml(n_tests: int, seed: int = 7, called: int = 19, calls_required: bool = True) -> str:
    """A deterministic rules file with ``n_tests`` tests mixing the assertion types production users
    write (each of the KINDS kinds in turn). Episodes of the benchmarks call ``tool_0`` …
    ``tool_{called-1}`` in order, so in steady state every rule passes (violations are rare in
    production; their cost is not the hot path). ``calls_required=False``: the three kinds that an
    episode without tool calls fails (must call, a sequence, the final tool) become kinds it passes
    (must not call, a call cap, the allowlist), for episodes of model steps or plain child spans."""
    rng = random.Random(seed)
    lines = ["version: 1", "suite: bench", "tests:"]
    for i in range(n_tests):
        kind = i % KINDS
        if not calls_required:
            kind = {1: 0, 4: 2, 13: 12}.get(kind, kind)
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
        elif kind == 5:
            lines += ["      - type: trace_must_not_call_tool", "        tool: send_email",
                      "        args_match: {to: '@evil\\.com$'}"]
        elif kind == 6:
            lines += ["      - type: trace_no_repeat", "        max: 2", "        window: 10"]
        elif kind == 7:
            lines += ["      - type: trace_max_tokens", "        max: 100000000"]
        elif kind == 8:
            lines += ["      - type: trace_max_cost", "        max: 1000", "        prices:",
                      "          gpt-4o: {input: 2.5, output: 10}", "        default_price: {input: 5, output: 20}"]
        elif kind == 9:
            lines += ["      - type: trace_max_duration", "        max: 1h"]
        elif kind == 10:
            lines += ["      - type: trace_no_sensitive_data", "        detectors: [secrets, credit_card]"]
        elif kind == 11:
            lines += ["      - type: trace_no_flow", f"        from: {{tool: tool_{a}}}", f"        to: {{tool: tool_{b}}}",
                      "        min_length: 8"]
        elif kind == 12:
            lines += ["      - type: trace_only_tools", "        tool_pattern: 'tool_[0-9]+'"]
        else:
            lines += ["      - type: trace_final_tool", f"        tool: tool_{called - 1}"]
    return "\n".join(lines) + "\n"


def build_label() -> str:
    """Which spanassert this process runs: "pure", or "compiled (N modules)" (mypyc, make compiled-venv)."""
    import importlib.machinery
    import os

    import spanassert

    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    root = os.path.dirname(spanassert.__file__)
    n = sum(1 for _, _, files in os.walk(root) for f in files if f.endswith(suffixes) and "__mypyc" not in f)
    return f"compiled ({n} modules)" if n else "pure"


def table(rows: List[Dict[str, str]], cols: Sequence[str]) -> str:
    widths = {c: max([len(c)] + [len(r.get(c, "")) for r in rows]) for c in cols}
    out = ["| " + " | ".join(c.ljust(widths[c]) for c in cols) + " |",
           "|" + "|".join("-" * (widths[c] + 2) for c in cols) + "|"]
    for r in rows:
        out.append("| " + " | ".join(r.get(c, "").ljust(widths[c]) for c in cols) + " |")
    return "\n".join(out)


def compile_bytecode() -> None:
    """Write the package's bytecode, as ``pip install`` does (and Python itself on first import,
    unless PYTHONDONTWRITEBYTECODE is set, as it is on the build machine): otherwise every start
    compiles about 60 modules from source, a cost no installed copy pays (callgrind: a small
    replay's whole CLI run is 1.53 G instructions from source, 0.69 G from bytecode). Every row that
    starts the CLI as a process calls this first."""
    import compileall
    import os

    import spanassert

    compileall.compile_dir(os.path.dirname(spanassert.__file__), quiet=1)
