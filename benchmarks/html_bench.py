"""The HTML replay report at 10,000 episodes: its size and the time to write it. (Opening it in
Chromium — under 3 s — and a filter — under 200 ms — are measured in the page by
tests/test_report_html.py, which a benchmark run does not need a browser for.)"""
from __future__ import annotations

import os
import tempfile
import time
from typing import Dict, List

from data import write_episodes_jsonl

from spanassert.config import load_config
from spanassert.replay import replay_paths
from spanassert.report.html import render_html

RULES = """\
version: 1
tests:
  - id: no-db-delete
    severity: critical
    assertions:
      - type: trace_must_not_call_tool
        tool: delete_database
  - id: must-search
    assertions:
      - type: trace_must_call_tool
        tool: search
"""


def run(episodes: int = 10_000) -> List[Dict[str, str]]:
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "episodes.jsonl")
        write_episodes_jsonl(path, episodes)
        config = load_config(RULES)
        report = replay_paths([config], [path], timelines=True)[0]
        t0 = time.perf_counter()
        page = render_html(report).encode("utf-8")
        dt = time.perf_counter() - t0
    assert len(report.episodes) == episodes
    return [{"figure": f"HTML report (replay --html), {episodes:,} episodes", "ours": f"{len(page) / 1e6:.2f} MB",
             "baseline": f"written in {dt:.2f} s", "ratio": "—",
             "target": "opens < 3 s, filter < 200 ms (tests/test_report_html.py)", "met": "—"}]


if __name__ == "__main__":
    from common import table

    print(table(run(), ["figure", "ours", "baseline", "ratio", "target", "met"]))
