"""The HTML replay report at 10,000 episodes: its size, the time to write it, and, where Chromium is
installed (Debian's `chromium`; .ci/run installs it), the time to open it (target under 3 s) and the
slowest of five filter changes (target under 200 ms), measured in the page by the real browser that
tests/test_report_html.py drives (tests/browser.py). The test checks what the page shows; the times
live here, where a run is quiet, not in a unit test."""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from typing import Dict, List, Optional, Tuple

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
        html = os.path.join(d, "report.html")
        with open(html, "wb") as f:
            f.write(page)
        in_browser = open_and_filter(html)
    assert len(report.episodes) == episodes
    rows = [{"figure": f"HTML report (replay --html), {episodes:,} episodes", "ours": f"{len(page) / 1e6:.2f} MB",
             "baseline": f"written in {dt:.2f} s", "ratio": "—", "target": "—", "met": "—"}]
    if in_browser is None:
        rows.append({"figure": "HTML report in Chromium: open / slowest filter", "ours": "no Chromium here",
                     "baseline": "—", "ratio": "—", "target": "opens < 3 s, filter < 200 ms", "met": "not measured"})
    else:
        opened_ms, filters = in_browser
        slowest = max(filters)
        rows.append({"figure": "HTML report in Chromium: open / slowest of 5 filters",
                     "ours": f"{opened_ms:.0f} ms / {slowest:.0f} ms", "baseline": "—", "ratio": "—",
                     "target": "opens < 3 s, filter < 200 ms",
                     "met": "yes" if opened_ms < 3000 and slowest < 200 else "NO"})
    return rows


FILTERS = (("f-verdict", "1"), ("f-agent", "1"), ("f-rule", "0"), ("f-verdict", ""), ("f-agent", ""))


def open_and_filter(html: str) -> Optional[Tuple[float, List[float]]]:
    """Open the report in headless Chromium: ms from navigation start to the page's ready mark, and the
    ms of each filter change including style and layout; None where no Chromium is installed."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "tests"))
    from browser import Browser, find_chromium

    binary = find_chromium()
    if not binary:
        return None
    b = Browser(binary)
    try:
        b.open_page()
        b.navigate("file://" + os.path.abspath(html))
        b.wait_for("document.body && document.body.dataset.ready === '1'", timeout=60)
        opened_ms = float(b.evaluate("window.__spanassertReadyAt"))
        filters = []
        for select, value in FILTERS:
            filters.append(float(b.evaluate(f"""(() => {{
              const s = document.getElementById('{select}'); const t = performance.now();
              s.value = {json.dumps(value)}; s.dispatchEvent(new Event('change'));
              document.body.offsetHeight;  // include style and layout
              return performance.now() - t; }})()""")))
        return opened_ms, filters
    finally:
        b.close()


if __name__ == "__main__":
    from common import table

    print(table(run(), ["figure", "ours", "baseline", "ratio", "target", "met"]))
