"""A tool span whose end lies before its start (the system clock stepped back during the call, as
NTP does, or hostile times in a file): its length is unknown, never negative. A negative length
passed any `trace_tool_duration` cap. Live (real SDK, explicit end time), replay (the exported
file, through the CLI) and serve say the same: inconclusive, with the reason."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import pytest
from opentelemetry import trace as api
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from doors import replay_cli, serve_records, verdicts
from spanassert import AssertionSpanProcessor
from spanassert.config import load_config
from spanassert.otlp import read_spans
from spanassert.otlp.writers import write_jsonl

RULES = """
version: 1
tests:
  - id: fast-tools
    assertions: [{type: trace_tool_duration, tool: slow_report, max: 5s}]
"""
WHY = "its span ends before it starts (the clock stepped back?)"


def _live(rules: str, background: bool, agent: Callable[[Any], None], tmp_path: Path) -> Tuple[Dict[str, Any], Path]:
    """``agent(tracer)`` under the live processor: ({test id: (verdict, message)} of its one
    episode, the exported spans as an OTLP JSON Lines file beside a rules file with ``rules``)."""
    episodes: List[Any] = []
    mem = InMemorySpanExporter()
    proc = AssertionSpanProcessor(load_config(rules), export=SimpleSpanProcessor(mem), tick_interval=0,
                                  background=background, on_episode=episodes.append)
    tp = TracerProvider()
    tp.add_span_processor(proc)
    agent(tp.get_tracer("clock"))
    assert proc.force_flush(30_000)
    tp.shutdown()
    assert len(episodes) == 1
    path = tmp_path / "spans.jsonl"
    write_jsonl(list(mem.get_finished_spans()), str(path))
    (tmp_path / "rules.yaml").write_text(rules)
    return {r.test_id: (r.verdict.value, r.message) for r in episodes[0].results}, path


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
def test_a_call_that_ends_before_it_starts_has_no_length_to_pass_a_cap(tmp_path: Path, background: bool) -> None:
    def agent(t: Any) -> None:
        with t.start_as_current_span("invoke_agent support",
                                     attributes={"gen_ai.operation.name": "invoke_agent"}) as root:
            call = t.start_span("execute_tool slow_report", context=api.set_span_in_context(root), attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "slow_report"})
            call.end(end_time=call.start_time - 10_000_000_000)  # the clock went back 10 s during a 20 s call

    live, path = _live(RULES, background, agent, tmp_path)
    # Before: `passed` ("all 1 calls of `slow_report` took at most 5s").
    assert live["fast-tools"][0] == "inconclusive" and WHY in live["fast-tools"][1], live

    ran = replay_cli(tmp_path / "rules.yaml", path, "--fail-on-inconclusive")
    assert ran.returncode == 1, (ran.stdout, ran.stderr)
    assert "? fast-tools trace_tool_duration: inconclusive" in ran.stdout and WHY in ran.stdout, ran.stdout

    served = verdicts(serve_records(load_config(RULES), read_spans([str(path)])), messages=True)
    assert served == live, served


SPAN_TIME_RULES = """
version: 1
tests:
  - id: quick-episode
    assertions: [{type: trace_max_duration, max: 5s}]
"""
SPAN_TIME_WHY = "a span ends before it starts (the clock stepped back?)"


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
def test_an_episode_whose_clock_stepped_back_has_no_span_time_to_pass_a_cap(tmp_path: Path, background: bool) -> None:
    """trace_max_duration measures the earliest to the latest timestamp of the episode's spans: with
    the clock stepped back during a call (its end 4 s before its start, the agent's end 3 s before
    its start) the span time read 4 s, within a 5 s cap, however long the episode ran (review9b;
    before: `passed`)."""
    def agent(t: Any) -> None:
        root = t.start_span("invoke_agent support", attributes={"gen_ai.operation.name": "invoke_agent"})
        call = t.start_span("execute_tool slow_report", context=api.set_span_in_context(root),
                            start_time=root.start_time + 1_000_000_000,
                            attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "slow_report"})
        call.end(end_time=root.start_time - 3_000_000_000)
        root.end(end_time=root.start_time - 2_000_000_000)

    live, path = _live(SPAN_TIME_RULES, background, agent, tmp_path)
    assert live["quick-episode"][0] == "inconclusive" and SPAN_TIME_WHY in live["quick-episode"][1], live

    ran = replay_cli(tmp_path / "rules.yaml", path, "--fail-on-inconclusive")
    assert ran.returncode == 1, (ran.stdout, ran.stderr)
    assert "? quick-episode trace_max_duration: inconclusive" in ran.stdout and SPAN_TIME_WHY in ran.stdout, ran.stdout

    served = verdicts(serve_records(load_config(SPAN_TIME_RULES), read_spans([str(path)])), messages=True)
    # The same verdict and reason (the span time quoted differs: replay orders a span that ends
    # before it starts by its end, live took its start in when it started).
    served = {k: (v, SPAN_TIME_WHY in m) for k, (v, m) in served.items()}
    assert served == {"quick-episode": ("inconclusive", True)}, served
