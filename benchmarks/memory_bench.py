"""Memory per open episode (tracemalloc), and flatness at the max_open bound."""
from __future__ import annotations

import gc
import tracemalloc
from typing import Dict, List

from spanassert import load_config
from spanassert.core.engine import Engine

from common import rules_yaml


# Span times as exporters write them (nanoseconds since 1970, 2026-12-01): each is an int object
# of its own, as in a live process, not a small int the interpreter shares.
_T0 = 1_764_547_200_000_000_000


def _fill(engine: Engine, episodes: int, calls: int = 10) -> None:
    attrs_agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}
    for e in range(episodes):
        tid = f"{e + 1:032x}"
        root = f"{(e + 1) * 1000:016x}"
        t = _T0 + e * 1_000_000_000
        engine.start_span(tid, root, None, "invoke_agent support", attrs_agent, t + 1)
        for i in range(calls):
            sid = f"{(e + 1) * 1000 + i + 1:016x}"
            a = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": f"tool_{i}",
                 "gen_ai.tool.call.arguments": '{"amount": 3}'}
            engine.start_span(tid, sid, root, f"execute_tool tool_{i}", a, t + 2_000 * (i + 1))
            engine.end_span(tid, sid, root, f"execute_tool tool_{i}", a, t + 2_000 * (i + 1), t + 2_000 * (i + 1) + 1_000)


def _measure(episodes: int, max_open: int) -> int:
    config = load_config(rules_yaml(20) + f"episodes:\n  max_open: {max_open}\n  idle_timeout: 1000000\n")
    gc.collect()
    tracemalloc.start()
    engine = Engine(config)
    base = tracemalloc.get_traced_memory()[0]
    _fill(engine, episodes)
    gc.collect()
    used = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    assert engine.open_count == min(episodes, max_open)
    return used


def run(open_episodes: int = 100_000) -> List[Dict[str, str]]:
    used = _measure(open_episodes, open_episodes)
    per = used / open_episodes
    # The bound is `max_open` open episodes plus `late_window` recently closed ones kept for late
    # spans: once both are full, ten times more episodes must not take more memory.
    bound = open_episodes // 10
    first = _measure(open_episodes // 2, bound)
    last = _measure(open_episodes * 2, bound)
    flat = last / first
    return [
        {"figure": f"memory per open episode, 10 tool calls, {open_episodes:,} open (20 rules)",
         "ours": f"{per:,.0f} B/episode ({used / 2**20:,.1f} MiB)", "baseline": "—", "ratio": "—",
         "target": "≤ 2 KB", "met": "yes" if per <= 2048 else "NO"},
        {"figure": f"memory at max_open={bound:,}: after {open_episodes * 2:,} episodes vs after {open_episodes // 2:,}",
         "ours": f"{last / 2**20:,.1f} MiB", "baseline": f"{first / 2**20:,.1f} MiB",
         "ratio": f"{flat:.3f}", "target": "flat (≤ 1.1)", "met": "yes" if flat <= 1.1 else "NO"},
    ]
