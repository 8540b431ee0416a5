"""`make bench`: every figure the performance issue asks for, each with its baseline measured in the
same run (alternating rounds, medians, min–max spread), on deterministic generated data."""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from typing import Dict, List

sys.path.insert(0, os.path.dirname(__file__))

from common import build_label, table  # noqa: E402

COLUMNS = ["figure", "build", "ours", "baseline", "ratio", "target", "met"]
# The parts measured again in the compiled build (SPANASSERT_BENCH_COMPILED: its venv, `make bench`):
# every part whose work runs through compiled modules (a default install with a C compiler is compiled,
# so its live, serve, memory and start-up figures are what users pay); config loading is not compiled.
COMPILED_PARTS = ("live", "engine", "replay", "memory", "serve", "startup", "guard")
ROWS_MARK = "rows-json: "
PARTS = ("live", "engine", "replay", "memory", "config", "serve", "html", "startup", "mcp", "guard")


def compiled_rows(part: str) -> List[Dict[str, str]]:
    """The part's rows measured by the compiled venv's interpreter (a process of its own), or a row
    saying why there are none."""
    venv = os.environ.get("SPANASSERT_BENCH_COMPILED", "")
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(os.path.join(venv, ".complete")):
        return [{"figure": f"{part}: compiled build", "build": "compiled: none",
                 "ours": f"no compiled venv ({venv or 'SPANASSERT_BENCH_COMPILED unset'}): make compiled-venv"}]
    env = {k: v for k, v in os.environ.items() if k != "SPANASSERT_BENCH_COMPILED"}
    done = subprocess.run([python, __file__, "--rows-json", part], env=env, stdout=subprocess.PIPE, text=True)
    rows = [json.loads(line[len(ROWS_MARK):]) for line in done.stdout.splitlines() if line.startswith(ROWS_MARK)]
    if done.returncode != 0 or not rows:
        return [{"figure": f"{part}: compiled build", "build": "compiled", "ours": f"failed (exit {done.returncode})"}]
    out: List[Dict[str, str]] = rows[-1]
    return out


def main() -> int:
    only = sys.argv[1:]  # `python benchmarks/run.py startup replay`: just those parts
    rows_json = "--rows-json" in only  # a compiled build's rows for the pure run that started this one
    only = [a for a in only if a != "--rows-json"]
    if any(a in ("-h", "--help") for a in only):
        print(__doc__.strip() + "\n\nusage: python benchmarks/run.py [PART ...]   (no PART: every part)\nparts: "
              + " ".join(PARTS))
        return 0
    unknown = [a for a in only if a not in PARTS]
    if unknown:
        print(f"run.py: unknown part {', '.join(map(repr, unknown))}; the parts are: {' '.join(PARTS)}", file=sys.stderr)
        return 2
    build = build_label()
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
          f"{'quick' if quick else 'full'} sizes; rules: benchmarks/common.py rules_yaml(20), "
          f"data: benchmarks/data.py; spanassert build: {build}", flush=True)
    rows = []
    t0 = time.time()
    parts = [
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
    ]
    assert tuple(name for name, _ in parts) == PARTS, "PARTS lists the parts in their order"
    for name, fn in parts:
        if only and name not in only:
            continue
        part = fn()
        for row in part:
            row.setdefault("build", build)
        if rows_json:
            print(ROWS_MARK + json.dumps(part), flush=True)
        elif name in COMPILED_PARTS and "SPANASSERT_BENCH_COMPILED" in os.environ:
            part += compiled_rows(name)  # beside the pure figure of the same row
        rows += part
        print(table(part, COLUMNS), flush=True)
    if rows_json:
        return 0
    print(f"\nAll figures ({time.time() - t0:.0f} s):")
    print(table(rows, COLUMNS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
