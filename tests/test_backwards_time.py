"""A tool span whose end lies before its start (the system clock stepped back during the call, as
NTP does, or hostile times in a file): its length is unknown, never negative. A negative length
passed any `trace_tool_duration` cap. Live (real SDK, explicit end time), replay (the exported
file, through the CLI) and serve say the same: inconclusive, with the reason."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, List

import pytest
from opentelemetry import trace as api
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

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


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
def test_a_call_that_ends_before_it_starts_has_no_length_to_pass_a_cap(tmp_path: Path, background: bool) -> None:
    episodes: List[Any] = []
    mem = InMemorySpanExporter()
    proc = AssertionSpanProcessor(load_config(RULES), export=SimpleSpanProcessor(mem), tick_interval=0,
                                  background=background, on_episode=episodes.append)
    tp = TracerProvider()
    tp.add_span_processor(proc)
    t = tp.get_tracer("clock")
    with t.start_as_current_span("invoke_agent support", attributes={"gen_ai.operation.name": "invoke_agent"}) as root:
        call = t.start_span("execute_tool slow_report", context=api.set_span_in_context(root), attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "slow_report"})
        call.end(end_time=call.start_time - 10_000_000_000)  # the clock went back 10 s during a 20 s call
    assert proc.force_flush(30_000)
    tp.shutdown()
    assert len(episodes) == 1
    live = {r.test_id: (r.verdict.value, r.message) for r in episodes[0].results}
    # Before: `passed` ("all 1 calls of `slow_report` took at most 5s").
    assert live["fast-tools"][0] == "inconclusive" and WHY in live["fast-tools"][1], live

    path = tmp_path / "spans.jsonl"
    write_jsonl(list(mem.get_finished_spans()), str(path))
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPANASSERT_")}
    ran = subprocess.run([sys.executable, "-m", "spanassert", "replay", "--fail-on-inconclusive", "--config",
                          str(rules), str(path)], capture_output=True, text=True, timeout=120, env=env)
    assert ran.returncode == 1, (ran.stdout, ran.stderr)
    assert "? fast-tools trace_tool_duration: inconclusive" in ran.stdout and WHY in ran.stdout, ran.stdout

    from spanassert.serve import Receiver, ServeOptions

    options = ServeOptions(grpc_endpoint=None, http_endpoint=None, report_json="unused", quiet=True, settle=0.0,
                           rootless_wait=0.05)
    rx = Receiver(load_config(RULES), options, out=open(os.devnull, "w"))
    rx.start()
    try:
        assert rx.accept(list(read_spans([str(path)])), None, 0)
    finally:
        rx.stop(timeout=30)
        rx.out.close()
    assert rx.report is not None
    served = {r.test_id: (r.verdict.value, r.message) for ep in rx.report.episodes for r in ep.results}
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
    episodes: List[Any] = []
    mem = InMemorySpanExporter()
    proc = AssertionSpanProcessor(load_config(SPAN_TIME_RULES), export=SimpleSpanProcessor(mem), tick_interval=0,
                                  background=background, on_episode=episodes.append)
    tp = TracerProvider()
    tp.add_span_processor(proc)
    t = tp.get_tracer("clock")
    root = t.start_span("invoke_agent support", attributes={"gen_ai.operation.name": "invoke_agent"})
    call = t.start_span("execute_tool slow_report", context=api.set_span_in_context(root),
                        start_time=root.start_time + 1_000_000_000,
                        attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "slow_report"})
    call.end(end_time=root.start_time - 3_000_000_000)
    root.end(end_time=root.start_time - 2_000_000_000)
    assert proc.force_flush(30_000)
    tp.shutdown()
    assert len(episodes) == 1
    live = {r.test_id: (r.verdict.value, r.message) for r in episodes[0].results}
    assert live["quick-episode"][0] == "inconclusive" and SPAN_TIME_WHY in live["quick-episode"][1], live

    path = tmp_path / "spans.jsonl"
    write_jsonl(list(mem.get_finished_spans()), str(path))
    rules = tmp_path / "rules.yaml"
    rules.write_text(SPAN_TIME_RULES)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPANASSERT_")}
    ran = subprocess.run([sys.executable, "-m", "spanassert", "replay", "--fail-on-inconclusive", "--config",
                          str(rules), str(path)], capture_output=True, text=True, timeout=120, env=env)
    assert ran.returncode == 1, (ran.stdout, ran.stderr)
    assert "? quick-episode trace_max_duration: inconclusive" in ran.stdout and SPAN_TIME_WHY in ran.stdout, ran.stdout

    from spanassert.serve import Receiver, ServeOptions

    options = ServeOptions(grpc_endpoint=None, http_endpoint=None, report_json="unused", quiet=True, settle=0.0,
                           rootless_wait=0.05)
    rx = Receiver(load_config(SPAN_TIME_RULES), options, out=open(os.devnull, "w"))
    rx.start()
    try:
        assert rx.accept(list(read_spans([str(path)])), None, 0)
    finally:
        rx.stop(timeout=30)
        rx.out.close()
    assert rx.report is not None
    served = {r.test_id: (r.verdict.value, r.message) for ep in rx.report.episodes for r in ep.results}
    # The same verdict and reason (the span time quoted differs: replay orders a span that ends
    # before it starts by its end, live took its start in when it started).
    served = {k: (v, SPAN_TIME_WHY in m) for k, (v, m) in served.items()}
    assert served == {"quick-episode": ("inconclusive", True)}, served
