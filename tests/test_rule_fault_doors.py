"""An exception raised inside a rule while judging one trace is contained to that trace in every
door: live (inline and background), replay (in-process and the CLI) and serve's in-process
receiver. That trace's episode passes nothing (what failed before the fault stands), the error is
counted, and every other trace of the same input is judged and reported as without the fault.
Before, replay stopped the whole run on it (exit 2, no report) where live and serve went on.

The fault is the test-only assertion type ``test_raises`` (tests/serve_harness.py): a call of
``explode`` raises inside it, or (``fault: close``) deciding it at its episode's close raises."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from typing import Any, Dict

import pytest
from doors import live_run, serve_records
from faults import add_rule_types
from opentelemetry import trace as otel_trace
from serve_harness import FAULT_ENV

from spanassert import Trace, check
from spanassert.config import load_config
from spanassert.otlp.reader import read_spans
from spanassert.otlp.shard import shard_of
from spanassert.replay import replay

HARNESS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "serve_harness.py")


def _rules(fault: str) -> str:
    return f"""\
version: 1
tests:
  - id: no-delete
    assertions: [{{type: trace_must_not_call_tool, tool: delete_database}}]
  - id: must-search
    assertions: [{{type: trace_must_call_tool, tool: search}}]
  - id: faulty
    assertions: [{{type: test_raises, tool: explode, fault: {fault}}}]
"""


# One agent run per trace, in this order in the file; the fault is in the second.
RUNS = [["search"], ["delete_database", "explode", "search"], ["delete_database"], ["search"]]


def _play(tracer: Any) -> None:
    for n, tools in enumerate(RUNS):
        root = tracer.start_span(f"invoke_agent run{n}", attributes={"gen_ai.operation.name": "invoke_agent",
                                                                     "gen_ai.agent.name": f"run{n}"})
        ctx = otel_trace.set_span_in_context(root)
        for tool in tools:
            tracer.start_span(f"execute_tool {tool}", context=ctx, attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}).end()
        root.end()


def _by_run(episodes: Any) -> Dict[str, Dict[str, str]]:
    """{agent: {test: verdict}} over report/episode objects or the JSON report's episode dicts."""
    out: Dict[str, Dict[str, str]] = {}
    for ep in episodes:
        if isinstance(ep, dict):
            out[ep["agent"]] = {r["test"]: r["verdict"] for r in ep["results"]}
        else:
            out[ep.agent] = {r.test_id: r.verdict.value for r in ep.results}
    return out


def _expected_other_runs() -> Dict[str, Dict[str, str]]:
    return {"run0": {"no-delete": "passed", "must-search": "passed", "faulty": "passed"},
            "run2": {"no-delete": "failed", "must-search": "failed", "faulty": "passed"},
            "run3": {"no-delete": "passed", "must-search": "passed", "faulty": "passed"}}


@pytest.mark.parametrize("fault", ["error", "close"])
def test_a_rule_that_raises_is_contained_to_its_trace_in_every_door(fault: str, monkeypatch: Any) -> None:
    add_rule_types(monkeypatch)
    text = _rules(fault)
    config = load_config(text)
    seen: Dict[str, Dict[str, Dict[str, str]]] = {}
    errors: Dict[str, int] = {}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.jsonl")
        for background in (False, True):
            live = live_run(config, _play, path if not background else os.path.join(d, "bg.jsonl"), background)
            seen["live background" if background else "live inline"] = _by_run(live)
        report = replay(config, [path])
        assert not report.input_errors
        seen["replay"] = _by_run(report.episodes)
        errors["replay"] = report.internal_errors
        served = serve_records(config, read_spans([path]), per_request=1)
        seen["serve"] = _by_run(served.episodes)
        errors["serve"] = served.internal_errors
        # The CLI, through the harness that registers `test_raises` and then runs the ordinary CLI.
        rules = os.path.join(d, "rules.yaml")
        with open(rules, "w", encoding="utf-8") as f:
            f.write(text)
        junit = os.path.join(d, "junit.xml")
        env = {k: v for k, v in os.environ.items() if not k.startswith("SPANASSERT_")}
        env[FAULT_ENV] = "1"
        cli = subprocess.run([sys.executable, HARNESS, "replay", "--format", "json", "--junit", junit,
                              "--config", rules, path], capture_output=True, text=True, timeout=120, env=env)
        assert cli.returncode == 2, (cli.returncode, cli.stderr)  # an internal error: never 0, whatever failed
        doc = json.loads(cli.stdout)
        seen["replay CLI"] = _by_run(doc["episodes"])
        errors["replay CLI"] = doc["summary"]["internal_errors"]
        assert "internal error" in cli.stderr
        text_run = subprocess.run([sys.executable, HARNESS, "replay", "--config", rules, path],
                                  capture_output=True, text=True, timeout=120, env=env)
        assert text_run.returncode == 2
        assert f"{errors['replay']} internal error" in text_run.stdout
        assert f"{errors['replay']} internal error(s) while judging" in text_run.stderr
        with open(junit, encoding="utf-8") as f:
            assert 'type="internal_error"' in f.read()
        # check() (the pytest marker's door): no pass while an error kept something from being judged.
        result = check(Trace.from_file(path), config)
        assert not result.passed and "spanassert internal error" in [i.label for i in result.items]
    others = _expected_other_runs()
    if fault == "close":
        # Deciding `faulty` raises at every episode's close: that rule is inconclusive in each, the
        # episode's other rules are decided as without it.
        want = {run: {**verdicts, "faulty": "inconclusive"} for run, verdicts in others.items()}
        want["run1"] = {"no-delete": "failed", "must-search": "passed", "faulty": "inconclusive"}
        assert seen == {door: want for door in seen}, seen
        assert errors == {"replay": 4, "serve": 4, "replay CLI": 4}, errors
        return
    for door, runs in seen.items():
        assert set(runs) == {"run0", "run1", "run2", "run3"}, (door, runs)
        # Every other trace judged as without the fault ("loses nothing else").
        assert {k: v for k, v in runs.items() if k != "run1"} == others, (door, runs)
        # The trace whose judging raised passes nothing; what failed before the fault stands.
        assert "passed" not in runs["run1"].values(), (door, runs["run1"])
        assert runs["run1"]["no-delete"] == "failed", (door, runs["run1"])
        assert runs["run1"]["faulty"] == "inconclusive", (door, runs["run1"])
    assert errors == {"replay": 1, "serve": 1, "replay CLI": 1}, errors


@pytest.mark.parametrize("fault", ["error", "close"])
def test_replay_in_two_processes_counts_every_workers_rule_fault(fault: str, monkeypatch: Any) -> None:
    """``replay --jobs 2``: the traces are judged in two worker processes; a rule fault in either is
    contained to its trace as with one process, the workers' internal errors add up in the summary,
    and the exit code is 2 (an internal error: never 0, whatever failed)."""
    add_rule_types(monkeypatch)
    text = _rules(fault)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.jsonl")
        for attempt in range(50):  # random trace ids: until the faulty trace's shard is not every trace's
            if os.path.exists(path):
                os.remove(path)
            live_run(load_config(text), _play, path)
            one = replay(load_config(text), [path])
            shards = {ep.agent: shard_of(ep.trace_id, 2) for ep in one.episodes}
            if len(set(shards.values())) == 2:
                break
        assert len(set(shards.values())) == 2, shards
        rules = os.path.join(d, "rules.yaml")
        with open(rules, "w", encoding="utf-8") as f:
            f.write(text)
        env = {k: v for k, v in os.environ.items() if not k.startswith("SPANASSERT_")}
        env[FAULT_ENV] = "1"
        cli = subprocess.run([sys.executable, HARNESS, "replay", "--jobs", "2", "--format", "json",
                              "--config", rules, path], capture_output=True, text=True, timeout=120, env=env)
    assert cli.returncode == 2, (cli.returncode, cli.stderr)
    doc = json.loads(cli.stdout)
    # Each shard's faults counted once: 4 closes that raise over both workers, or the one trace's.
    assert doc["summary"]["internal_errors"] == one.internal_errors == (4 if fault == "close" else 1)
    assert _by_run(doc["episodes"]) == _by_run(one.episodes)
    assert "internal error" in cli.stderr
