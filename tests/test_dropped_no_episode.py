"""Replay: a trace whose spans say the SDK dropped attributes (span limits) but in which no span is
recognised (every GenAI marker was evicted) opens no episode, so nothing in the result said it was
there: the run passed on the other traces. It is now an input gap, as an unreadable part of the
input is: every `passed` becomes `inconclusive` ("... opened no episode ..."), the summary counts it,
and `--fail-on-inconclusive` fails the run (one process and --jobs alike)."""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, List

import pytest
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from doors import replay_cli
from spanassert.otlp.writers import write_jsonl

RULES = """
version: 1
tests:
  - id: no-delete
    assertions: [{type: trace_must_not_call_tool, tool: delete_database}]
"""
WHY = "opened no episode"


def _spans(limit: int, tool: str) -> List[Any]:
    """One agent run calling ``tool``, through the real SDK with ``limit`` attributes per span (0: no
    limit). Each span is created with its markers first, then more attributes than the limit
    keeps: the SDK evicts the markers and counts them dropped."""
    mem = InMemorySpanExporter()
    tp = TracerProvider(span_limits=SpanLimits(max_span_attributes=limit) if limit else None)
    tp.add_span_processor(SimpleSpanProcessor(mem))
    t = tp.get_tracer("limits")
    extra = {"app.a": 1, "app.b": 2}
    with t.start_as_current_span("run", attributes={"gen_ai.operation.name": "invoke_agent", **extra}):
        t.start_span("call", attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                                         **extra}).end()
    tp.shutdown()
    return list(mem.get_finished_spans())


def _replay(tmp_path: Path, path: Path, *flags: str) -> "subprocess.CompletedProcess[str]":
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    return replay_cli(rules, path, *flags)


@pytest.mark.parametrize("jobs", [[], ["--jobs", "2"]], ids=["one-process", "jobs-2"])
def test_a_trace_that_lost_its_markers_and_opened_no_episode_is_no_pass(tmp_path: Path, jobs: List[str]) -> None:
    clean = _spans(0, "lookup")
    lost = _spans(2, "delete_database")
    assert all(s.dropped_attributes for s in lost)
    assert not any(k.startswith("gen_ai.") for s in lost for k in (s.attributes or {}))

    # The clean trace alone passes (the rule can pass).
    path = tmp_path / "clean.jsonl"
    write_jsonl(clean, str(path))
    ran = _replay(tmp_path, path, "--fail-on-inconclusive", *jobs)
    assert ran.returncode == 0 and "1 passed, 0 failed, 0 inconclusive" in ran.stdout, (ran.stdout, ran.stderr)

    # With the trace whose delete_database call the SDK's limit made unrecognisable. Before: the same
    # "1 passed", exit 0 with --fail-on-inconclusive, nothing said of the second trace.
    path = tmp_path / "both.jsonl"
    write_jsonl(clean + lost, str(path))
    ran = _replay(tmp_path, path, *jobs)
    assert ran.returncode == 0, (ran.stdout, ran.stderr)
    assert "0 passed, 0 failed, 1 inconclusive" in ran.stdout, ran.stdout
    assert WHY in ran.stdout and "overflow trace_dropped_no_episode: 1" in ran.stdout, ran.stdout
    ran = _replay(tmp_path, path, "--fail-on-inconclusive", *jobs)
    assert ran.returncode == 1, (ran.stdout, ran.stderr)


def test_a_plain_trace_without_dropped_counts_changes_nothing(tmp_path: Path) -> None:
    """A trace with no GenAI span and nothing dropped is not a gap (plain services' traces)."""
    mem = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(mem))
    with tp.get_tracer("plain").start_as_current_span("GET /health", attributes={"http.method": "GET"}):
        pass
    tp.shutdown()
    path = tmp_path / "mixed.jsonl"
    write_jsonl(_spans(0, "lookup") + list(mem.get_finished_spans()), str(path))
    ran = _replay(tmp_path, path, "--fail-on-inconclusive")
    assert ran.returncode == 0 and "1 passed, 0 failed, 0 inconclusive" in ran.stdout, (ran.stdout, ran.stderr)
    assert WHY not in ran.stdout
