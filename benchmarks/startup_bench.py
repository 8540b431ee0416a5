"""CLI start-up: wall time of `spanassert --help`, `--version` and a small replay, each against
`python -c pass` started the same way in the same rounds (paired per-round ratios)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Dict, List, Sequence

from common import alternate, compile_bytecode, med, paired_ratio, spread

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = [sys.executable, "-c", "import sys; from spanassert.cli import main; sys.exit(main())"]


def _wall(argv: Sequence[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(list(argv), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - t0


def run(rounds: int = 15) -> List[Dict[str, str]]:
    compile_bytecode()
    base = [sys.executable, "-c", "pass"]
    cases = [
        ("`spanassert --help`", ["--help"], 5),
        ("`spanassert --version`", ["--version"], 5),
        ("`spanassert replay --config examples/rules.yaml examples/recorded/support-agent.jsonl`",
         ["replay", "--config", "examples/rules.yaml", "examples/recorded/support-agent.jsonl"], 12),
    ]
    rows = []
    for label, args, target in cases:
        xs, ys = alternate(lambda a=args: _wall(CLI + a), lambda: _wall(base), rounds=rounds)
        ratio = paired_ratio(xs, ys)
        rows.append({"figure": f"CLI start, wall, bytecode compiled: {label}",
                     "ours": f"{med(xs) * 1000:.0f} ms ({spread(xs, 1000, '{:.0f}')})",
                     "baseline": f"{med(ys) * 1000:.0f} ms `python -c pass` ({spread(ys, 1000, '{:.0f}')})",
                     "ratio": f"{ratio:.1f}", "target": f"≤ {target}", "met": "yes" if ratio <= target else "NO"})
    return rows


if __name__ == "__main__":  # just these rows: python benchmarks/run.py startup
    from common import table

    print(table(run(), ["figure", "ours", "baseline", "ratio", "target", "met"]))
