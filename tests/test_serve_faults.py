"""An exception while judging one trace does not stop judging; /health tells when the engine
thread is dead or stalled. The faults are injected with a test-only assertion type
(``test_raises``, registered by tests/serve_harness.py), never by a hook in the product."""
from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Dict, List, Tuple

from test_serve_receiver import Serve, json_episode, json_request, post

FAULT_ENV = {"SPANASSERT_TEST_FAULT_TYPE": "1"}


def _rules(fault: str, seconds: float = 0) -> str:
    return f"""\
version: 1
tests:
  - id: no-delete
    assertions:
      - type: trace_must_not_call_tool
        tool: delete_database
  - id: must-search
    assertions:
      - type: trace_must_call_tool
        tool: search
  - id: faulty
    assertions:
      - type: test_raises
        tool: explode
        fault: {fault}
        seconds: {seconds}
"""


def _health(s: Serve) -> Tuple[int, Dict[str, Any]]:
    try:
        with urllib.request.urlopen(s.url + "/health", timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _send(s: Serve, n: int, tools: List[str]) -> int:
    spans = json_episode(n, [(t, None) for t in tools])
    return post(s.url + "/v1/traces", json.dumps(json_request(spans)).encode(), "application/json")[0]


def test_an_exception_judging_one_trace_is_counted_and_every_other_trace_is_judged(tmp_path: Path) -> None:
    s = Serve(tmp_path, "--settle", "0.1", rules=_rules("error"), env=FAULT_ENV)
    plan = {}  # trace id -> tools
    try:
        for n in range(30):
            if n % 5 == 0:
                tools = ["delete_database", "explode", "search"]  # fails before the fault, then raises
            elif n % 5 == 1:
                tools = ["search", "explode"]  # raises; nothing failed before
            elif n % 5 == 2:
                tools = ["search", "delete_database"]
            else:
                tools = ["search"]
            plan[f"{n + 1:032x}"] = tools
            assert _send(s, n, tools) == 200
            time.sleep(0.02)
        s.wait_for(lambda: s.health()["open_episodes"] == 0 and s.health()["buffered_traces"] == 0)
        status, health = _health(s)
        code, out, report = s.stop()
    finally:
        s.kill()
    assert status == 200 and health["status"] == "ok" and health["internal_errors"] == 12
    assert code == 0, s.stderr()
    assert report["receiver"]["internal_errors"] == 12
    assert "12 internal error(s)" in out
    decided = {ep["trace_id"]: ep for ep in report["episodes"]}
    assert set(decided) == set(plan)  # every trace decided, also those after the faults
    for tid, tools in plan.items():
        ep = decided[tid]
        verdicts = {r["test"]: r["verdict"] for r in ep["results"]}
        if "explode" in tools:
            assert ep["close_reason"] == "internal_error"
            # What failed before the fault stands; nothing else passes.
            assert verdicts["no-delete"] == ("failed" if "delete_database" in tools else "inconclusive")
            assert verdicts["must-search"] == "inconclusive"
            assert "passed" not in verdicts.values()
        else:
            assert ep["close_reason"] == "root_ended"
            assert verdicts["no-delete"] == ("failed" if "delete_database" in tools else "passed")
            assert verdicts["must-search"] == "passed"
    assert s.stderr().count("Traceback") <= 1  # logged once per kind, then only counted


def test_health_answers_503_and_intake_refuses_once_the_engine_thread_is_dead(tmp_path: Path) -> None:
    s = Serve(tmp_path, "--settle", "0.1", rules=_rules("exit"), env=FAULT_ENV)
    try:
        assert _health(s)[0] == 200
        assert _send(s, 0, ["search", "explode"]) == 200
        s.wait_for(lambda: _health(s)[0] == 503)
        status, health = _health(s)
        refused = _send(s, 1, ["search"])
        code, _, _ = s.stop()
    finally:
        s.kill()
    assert status == 503 and health["status"] == "engine_dead" and not health["engine_alive"]
    assert refused == 503
    assert code == 1
    assert "the engine thread failed" in s.stderr()


def test_health_answers_503_while_the_engine_thread_is_stalled_and_200_after(tmp_path: Path) -> None:
    s = Serve(tmp_path, "--settle", "0.1", "--engine-stall-timeout", "0.5", rules=_rules("stall", 3.0),
              env=FAULT_ENV)
    try:
        assert _send(s, 0, ["search", "explode"]) == 200
        t0 = time.monotonic()
        s.wait_for(lambda: _health(s)[0] == 503, timeout=10)
        stalled = _health(s)[1]
        s.wait_for(lambda: _health(s)[0] == 200, timeout=15)
        recovered_after = time.monotonic() - t0
        code, _, report = s.stop()
    finally:
        s.kill()
    assert stalled["status"] == "engine_stalled" and stalled["engine_alive"]
    assert recovered_after >= 2.0
    assert code == 0 and len(report["episodes"]) == 1


def test_an_occupied_http_port_after_grpc_started_exits_2_naming_the_option(tmp_path: Path) -> None:
    import socket
    import subprocess
    import sys

    rules = tmp_path / "rules.yaml"
    rules.write_text(_rules("error").split("  - id: faulty")[0])
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    try:
        port = taken.getsockname()[1]
        proc = subprocess.run([sys.executable, "-m", "spanassert.cli", "serve", "--config", str(rules),
                               "--grpc-endpoint", "127.0.0.1:0", "--http-endpoint", f"127.0.0.1:{port}"],
                              capture_output=True, text=True, timeout=60)
    finally:
        taken.close()
    assert proc.returncode == 2, proc.stderr
    assert f"--http-endpoint 127.0.0.1:{port}: cannot listen there" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_backlog_in_the_engine_does_not_split_a_trace_whose_spans_arrived_together(tmp_path: Path) -> None:
    # Two requests carry one trace: A its root and a lookup, B (sent right after A) its search. The
    # engine falls behind between taking A and taking B (judging another trace stalls it for 1.2 s,
    # as a loaded machine would). --settle counts from when a span arrived, not from when the busy
    # engine got to it: the trace is judged whole, not without B's search (a false red, and its
    # search then a late span).
    pause = tmp_path / "pause"
    s = Serve(tmp_path, "--settle", "0.3", "--rootless-wait", "0.3", rules=_rules("stall", 1.2),
              env={**FAULT_ENV, "SPANASSERT_TEST_PAUSE_FILE": str(pause)})
    try:
        assert _send(s, 1, ["explode"]) == 200  # trace 2: its judging stalls the engine
        s.wait_for(lambda: s.health()["queue_depth"] == 0)
        pause.write_text("")
        time.sleep(0.5)  # the engine's pending get has returned; it now waits on the pause file
        whole = json_episode(0, [("lookup", None), ("search", None)])  # trace 1: children, then root
        a = [whole[0], whole[2]]
        b = json_episode(2, [("search", None)]) + [whole[1]]  # trace 3 first, then trace 1's search
        assert post(s.url + "/v1/traces", json.dumps(json_request(a)).encode(), "application/json")[0] == 200
        assert post(s.url + "/v1/traces", json.dumps(json_request(b)).encode(), "application/json")[0] == 200
        pause.unlink()
        s.wait_for(lambda: s.health()["open_episodes"] == 0 and s.health()["buffered_traces"] == 0
                   and s.health()["queue_depth"] == 0)
        code, _, report = s.stop()
    finally:
        s.kill()
    assert code == 0, s.stderr()
    decided = {ep["trace_id"]: ep for ep in report["episodes"]}
    first = decided[f"{1:032x}"]
    assert {r["test"]: r["verdict"] for r in first["results"]}["must-search"] == "passed", first
    assert first["close_reason"] == "root_ended" and not first.get("amended"), first
    assert [line for line in s.violation_lines() if f"trace {1:032x}" in line] == []


def test_a_rule_whose_decision_at_close_raises_is_counted_in_every_report(tmp_path: Path) -> None:
    """A rule whose ``on_close`` raises ends inconclusive (the others are decided); the error is
    counted alike in the metric, /health, the stop summary and --report-json's ``internal_errors``
    (the report once counted only the receiver's own catches: it said 0 here)."""
    s = Serve(tmp_path, "--settle", "0.1", rules=_rules("close"), env=FAULT_ENV)
    try:
        for n in range(4):
            assert _send(s, n, ["search", "explode"]) == 200
        s.wait_for(lambda: s.health()["open_episodes"] == 0 and s.health()["buffered_traces"] == 0
                   and s.health()["internal_errors"] == 4)
        code, out, report = s.stop()
    finally:
        s.kill()
    assert code == 0, s.stderr()
    assert report["receiver"]["internal_errors"] == 4
    assert "4 internal error(s)" in out
    assert len(report["episodes"]) == 4
    for ep in report["episodes"]:
        verdicts = {r["test"]: r["verdict"] for r in ep["results"]}
        assert verdicts == {"no-delete": "passed", "must-search": "passed", "faulty": "inconclusive"}
