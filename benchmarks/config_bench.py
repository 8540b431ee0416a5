"""Loading and validating a 1,000-test rules file vs parsing the YAML alone."""
from __future__ import annotations

import time
from typing import Dict, List

import yaml

from spanassert import load_config

from common import alternate, med, rules_yaml, spread


def run(tests: int = 1000) -> List[Dict[str, str]]:
    text = rules_yaml(tests)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    def ours() -> float:
        t0 = time.perf_counter()
        load_config(text)
        return time.perf_counter() - t0

    def base() -> float:
        t0 = time.perf_counter()
        yaml.load(text, Loader=loader)
        return time.perf_counter() - t0

    xs, ys = alternate(ours, base, rounds=5)
    ratio = med(xs) / med(ys)
    return [{"figure": f"load + validate a {tests:,}-test rules file ({len(text) // 1024} KiB)",
             "ours": f"{med(xs) * 1000:.0f} ms ({spread(xs, 1000, '{:.0f}')})",
             "baseline": f"{med(ys) * 1000:.0f} ms yaml safe_load ({loader.__name__})",
             "ratio": f"{ratio:.2f}", "target": "≤ 3", "met": "yes" if ratio <= 3 else "NO"}]
