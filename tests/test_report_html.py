"""`spanassert replay ... --html report.html` opened in a real headless Chromium (Debian's
`chromium`, driven over the DevTools protocol on a pipe; see tests/browser.py): the DOM holds the
expected counts and marks, filters work, hostile span text stays text, the page makes no request
beyond its own file and logs no error; a screenshot is kept. At 10,000 episodes it opens in under
3 s and a filter answers in under 200 ms, both measured in the page.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from browser import Browser, find_chromium
from replay_episodes import write_episodes

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

# benchmarks/data.py's 10,000 episodes: every tenth fails, agents take turns among three. Failed -> 1,000;
# and agent 1 -> 333; and rule 0 (the one they fail) -> 333; any verdict -> agent 1's 3,333; any agent -> all.
SHOWN_AFTER_FILTERS = [f"{n} of 10000 episodes match, 50 shown" for n in (1000, 333, 333, 3333, 10000)]
RULES = """\
version: 1
tests:
  - id: no-db-delete
    severity: critical
    assertions:
      - type: trace_must_not_call_tool
        tool: delete_database
  - id: must-search
    severity: warning
    assertions:
      - type: trace_must_call_tool
        tool: search
  - id: no-hostile
    assertions:
      - type: trace_must_not_call_tool
        tool: "<img src=x onerror=window.__pwned=1>"
"""

HOSTILE_TOOL = "<img src=x onerror=window.__pwned=1>"
HOSTILE_AGENT = "</script><script>window.__pwned=2</script>"

# 0: passes all; 1: forbidden call (2nd); 2: never searches; 3: hostile tool name (offending).
EPISODES = [
    [("search", {"q": "refund policy"})],
    [("search", {"q": "db"}), ("delete_database", {"name": "prod", "secret": "hunter2"})],
    [("lookup", {"id": 7})],
    [("search", {"q": "x"}), (HOSTILE_TOOL, {"a": 1})],
]

KEEP_SCREENSHOT = os.environ.get("SPANASSERT_SCREENSHOT_DIR")


def _replay(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SPANASSERT_DEBUG"}
    return subprocess.run([sys.executable, "-m", "spanassert.cli", "replay", *args], capture_output=True, text=True,
                          timeout=300, env=env, check=False)


@pytest.fixture()
def browser() -> Iterator[Browser]:
    binary = find_chromium()
    if not binary:
        pytest.skip("Chromium not found (Debian's `chromium`; .ci/run installs it); a skip fails under CI=true")
    b = Browser(binary)
    try:
        b.open_page()
        yield b
    finally:
        b.close()


def _open(browser: Browser, path: Path) -> float:
    browser.navigate(path.resolve().as_uri())
    browser.wait_for("document.body && document.body.dataset.ready === '1'", timeout=30)
    return float(browser.evaluate("window.__spanassertReadyAt"))


def _no_problems(browser: Browser) -> None:
    assert browser.problems() == [], browser.problems()
    outside = [u for u in browser.requests() if not u.startswith(("file://", "data:"))]
    assert outside == [], f"the report made network requests: {outside}"


def test_html_report_in_chromium_shows_rules_timelines_marks_and_filters(tmp_path: Path, browser: Browser) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES, encoding="utf-8")
    traces = tmp_path / "traces.jsonl"
    write_episodes(traces, EPISODES, agent=HOSTILE_AGENT)
    html = tmp_path / "report.html"
    done = _replay(str(traces), "-c", str(rules), "--html", str(html))
    assert done.returncode == 1, done.stderr
    text = html.read_text(encoding="utf-8")
    # Redacted as everywhere else: no argument value reaches the file.
    assert "hunter2" not in text and "prod" not in text
    assert "<img src=x" not in text and "</script><script>" not in text

    _open(browser, html)
    dom = browser.evaluate("""(() => {
      const q = s => Array.from(document.querySelectorAll(s));
      const row = id => { const r = q('#rules tbody tr').find(tr => tr.cells[0].textContent === id);
                          return r ? Array.from(r.cells).slice(2).map(c => +c.textContent) : null; };
      return {
        episodes: q('.episode').length,
        failedEpisodes: q('.episode[data-verdict=failed]').length,
        rules: q('#rules tbody tr').length,
        noDb: row('no-db-delete'), mustSearch: row('must-search'), hostile: row('no-hostile'),
        offending: q('.call.offending .tool').map(e => e.textContent),
        messages: q('.call.offending .msg').map(e => e.textContent),
        calls: q('.call').length,
        imgs: q('img').length, scripts: q('script').length,
        pwned: window.__pwned === undefined ? null : window.__pwned,
        agents: q('#f-agent option').map(o => o.textContent),
        chartViolations: +(document.getElementById('chart').dataset.violations || 0),
        bars: q('#chart rect.bar').length,
        shown: document.getElementById('shown').textContent,
      };
    })()""")
    assert dom["episodes"] == 4 and dom["rules"] == 3
    # passed, failed, inconclusive, not applicable per rule
    assert dom["noDb"] == [3, 1, 0, 0], dom
    assert dom["mustSearch"] == [3, 1, 0, 0], dom
    assert dom["hostile"] == [3, 1, 0, 0], dom
    assert dom["failedEpisodes"] == 3
    assert sorted(dom["offending"]) == sorted(["delete_database", HOSTILE_TOOL]), dom
    assert any(m.startswith("no-db-delete") and "delete_database" in m for m in dom["messages"]), dom
    assert dom["calls"] == 6
    # Hostile text stayed text: no element was made from it, nothing ran.
    assert dom["imgs"] == 0 and dom["scripts"] == 2 and dom["pwned"] is None
    assert dom["agents"] == ["all", HOSTILE_AGENT]
    assert dom["chartViolations"] == 3 and dom["bars"] >= 1
    assert dom["shown"].startswith("4 of 4 episodes match")

    shot = tmp_path / "report.png"
    browser.screenshot(shot)
    assert shot.stat().st_size > 10_000
    if KEEP_SCREENSHOT:
        shutil.copy(shot, Path(KEEP_SCREENSHOT) / "report-small.png")

    # Filters: by verdict, by rule (+ verdict), by agent.
    def choose(select: str, value: str) -> dict:
        return browser.evaluate(f"""(() => {{
          const s = document.getElementById('{select}'); s.value = {json.dumps(value)};
          s.dispatchEvent(new Event('change'));
          return {{episodes: document.querySelectorAll('.episode').length,
                   verdicts: Array.from(document.querySelectorAll('.episode')).map(e => e.dataset.verdict)}};
        }})()""")

    assert choose("f-verdict", "1") == {"episodes": 3, "verdicts": ["failed"] * 3}
    rule_index = browser.evaluate("Array.from(document.querySelectorAll('#f-rule option'))"
                                  ".find(o => o.textContent.startsWith('no-db-delete')).value")
    assert choose("f-rule", rule_index)["episodes"] == 1
    assert choose("f-verdict", "0")["episodes"] == 3  # no-db-delete passed on the other three
    assert choose("f-rule", "")["episodes"] == 1  # only the passing episode passes every rule
    assert choose("f-agent", "0")["episodes"] == 1  # the agent filter narrows further
    assert choose("f-verdict", "")["episodes"] == 4
    _no_problems(browser)


def test_html_report_of_10000_episodes_opens_and_its_filters_narrow_it(tmp_path: Path, browser: Browser) -> None:
    # How fast it opens (< 3 s) and filters (< 200 ms) is a `make bench` row (benchmarks/html_bench.py):
    # a timed assertion here failed on a loaded machine without saying anything about the page.
    from data import write_episodes_jsonl

    traces = tmp_path / "big.jsonl"
    write_episodes_jsonl(str(traces), 10_000)
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES, encoding="utf-8")
    html = tmp_path / "big.html"
    done = _replay(str(traces), "-c", str(rules), "--html", str(html), "--quiet")
    assert done.returncode == 1, done.stderr
    size = html.stat().st_size
    opened_ms = _open(browser, html)
    counts = browser.evaluate("""(() => ({episodes: document.querySelectorAll('.episode').length,
        shown: document.getElementById('shown').textContent, failed: +document.querySelector('#rules tbody tr')
        .cells[3].textContent}))()""")
    assert counts["shown"].startswith("10000 of 10000 episodes match"), counts
    assert counts["failed"] == 1000, counts
    shown = []
    for select, value in (("f-verdict", "1"), ("f-agent", "1"), ("f-rule", "0"), ("f-verdict", ""), ("f-agent", "")):
        browser.evaluate(f"""(() => {{ const s = document.getElementById('{select}');
          s.value = {json.dumps(value)}; s.dispatchEvent(new Event('change')); }})()""")
        shown.append(browser.evaluate("document.getElementById('shown').textContent"))
    print(f"\nHTML report, 10,000 episodes: {size / 1e6:.2f} MB; opened (ready) {opened_ms:.0f} ms after "
          f"navigation start; after each filter: {shown}")
    shot = tmp_path / "big.png"
    browser.screenshot(shot)
    if KEEP_SCREENSHOT:
        shutil.copy(shot, Path(KEEP_SCREENSHOT) / "report-10000.png")
    assert shown == SHOWN_AFTER_FILTERS, shown
    _no_problems(browser)
