"""`make bench`: every figure the performance issue asks for, each with its baseline measured in the
same run (alternating rounds, medians, min–max spread), on deterministic generated data."""
from __future__ import annotations

import os
import platform
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))

from common import table  # noqa: E402

COLUMNS = ["figure", "ours", "baseline", "ratio", "target", "met"]


def main() -> int:
    only = sys.argv[1:]  # `python benchmarks/run.py startup replay`: just those parts
    import config_bench
    import guard_bench
    import html_bench
    import live
    import mcp_bench
    import memory_bench
    import replay_bench
    import serve_bench
    import startup_bench

    quick = os.environ.get("SPANASSERT_BENCH_QUICK") == "1"
    print(f"spanassert benchmarks — Python {platform.python_version()}, {os.cpu_count()} CPUs, "
          f"{'quick' if quick else 'full'} sizes; rules: benchmarks/common.py rules_yaml(20), data: benchmarks/data.py",
          flush=True)
    rows = []
    t0 = time.time()
    for name, fn in [
        ("live", lambda: live.run(5_000 if quick else 12_000)),
        ("engine", lambda: [live.engine_alone_row()]),
        ("replay", lambda: replay_bench.run(300 if quick else 2_000)),
        ("memory", lambda: memory_bench.run(10_000 if quick else 30_000)),  # tracemalloc over 20 rules: slow
        ("config", lambda: config_bench.run(1_000)),
        ("serve", lambda: serve_bench.run(300 if quick else 2_000)),
        ("html", lambda: html_bench.run(10_000)),
        ("startup", lambda: startup_bench.run(7 if quick else 15)),
        ("mcp", lambda: mcp_bench.run(500 if quick else 2_000)),
        ("guard", lambda: guard_bench.run(2_000 if quick else 10_000)),
    ]:
        if only and name not in only:
            continue
        part = fn()
        rows += part
        print(table(part, COLUMNS), flush=True)
    print(f"\nAll figures ({time.time() - t0:.0f} s):")
    print(table(rows, COLUMNS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
