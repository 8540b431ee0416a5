"""Zero-code setup: ``opentelemetry-instrument`` with ``OTEL_PYTHON_CONFIGURATOR=spanassert`` checks
an unmodified agent script. Runs the real launcher in a subprocess, with the real OTLP JSON file
exporter writing to stdout."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

INSTRUMENT = Path(sys.executable).parent / ("opentelemetry-instrument.exe" if os.name == "nt" else "opentelemetry-instrument")

AGENT = '''
import json
from opentelemetry import trace

tracer = trace.get_tracer("tiny-agent")
with tracer.start_as_current_span("invoke_agent tiny", attributes={
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "tiny"}):
    for name, args in [("lookup_customer", {"email": "d@example.com"}), ("delete_customer", {"id": "C1"})]:
        with tracer.start_as_current_span(f"execute_tool {name}", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                "gen_ai.tool.call.arguments": json.dumps(args)}):
            pass
print("agent finished")
'''

RULES = '''version: 1
tests:
  - id: never-delete-customers
    severity: critical
    assertions:
      - type: trace_must_not_call_tool
        tool: delete_customer
'''

pytestmark = pytest.mark.skipif(not INSTRUMENT.exists(), reason="opentelemetry-instrumentation is not installed")


def run_instrumented(tmp_path: Path, rules: str = RULES, **env: str) -> "subprocess.CompletedProcess[str]":
    (tmp_path / "agent.py").write_text(AGENT, encoding="utf-8")
    (tmp_path / "rules.yaml").write_text(rules, encoding="utf-8")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SPANASSERT_"))}
    base.update({
        "OTEL_PYTHON_CONFIGURATOR": "spanassert",
        "SPANASSERT_CONFIG": "rules.yaml",
        "OTEL_TRACES_EXPORTER": "otlp_json_file",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        "OTEL_SERVICE_NAME": "tiny-agent",
    })
    base.update(env)
    return subprocess.run([str(INSTRUMENT), sys.executable, "agent.py"], cwd=tmp_path, env=base,
                          capture_output=True, text=True, timeout=120)


def exported_spans(stdout: str) -> Iterator[Dict[str, Any]]:
    for line in stdout.splitlines():
        if not line.startswith("{"):
            continue
        for rs in json.loads(line).get("resourceSpans", []):
            for ss in rs.get("scopeSpans", []):
                yield from ss.get("spans", [])


def attributes(kvs: List[Dict[str, Any]]) -> Dict[str, Any]:
    return {kv["key"]: next(iter(kv["value"].values())) for kv in kvs}


@pytest.mark.parametrize("background", ["", "0"], ids=["default-background", "inline"])
def test_instrumented_agent_reports_the_violation_and_exports_the_evaluation_event(tmp_path: Path,
                                                                                  background: str) -> None:
    proc = run_instrumented(tmp_path, **({"SPANASSERT_BACKGROUND": background} if background else {}))
    assert proc.returncode == 0, proc.stderr
    assert "agent finished" in proc.stdout
    # The log line, from the `spanassert` logger (Python logging's last-resort handler: stderr).
    assert ("spanassert violation [critical] never-delete-customers (trace_must_not_call_tool): "
            "`delete_customer` called at call #2") in proc.stderr
    spans = {s["name"]: s for s in exported_spans(proc.stdout)}
    assert set(spans) == {"invoke_agent tiny", "execute_tool lookup_customer", "execute_tool delete_customer"}
    events = spans["execute_tool delete_customer"].get("events", [])
    assert [e["name"] for e in events] == ["gen_ai.evaluation.result"]
    event = attributes(events[0]["attributes"])
    assert event["gen_ai.evaluation.name"] == "never-delete-customers"
    assert event["gen_ai.evaluation.score.label"] == "fail"
    assert event["spanassert.severity"] == "critical"
    assert event["gen_ai.tool.name"] == "delete_customer"
    assert not spans["execute_tool lookup_customer"].get("events")


def test_without_an_exporter_the_violation_is_still_reported(tmp_path: Path) -> None:
    proc = run_instrumented(tmp_path, OTEL_TRACES_EXPORTER="none")
    assert proc.returncode == 0, proc.stderr
    assert "spanassert violation [critical] never-delete-customers" in proc.stderr
    assert list(exported_spans(proc.stdout)) == []


def test_a_refused_rules_file_stops_the_program_before_it_runs(tmp_path: Path) -> None:
    typo = RULES.replace("trace_must_not_call_tool", "trace_must_not_call_tol")
    proc = run_instrumented(tmp_path, rules=typo)
    assert proc.returncode == 2
    assert "agent finished" not in proc.stdout
    assert "rules.yaml:6:15: error [E_CFG_UNKNOWN_TYPE]" in proc.stderr
    assert "did you mean `trace_must_not_call_tool`?" in proc.stderr
    assert "SPANASSERT_CONFIG=rules.yaml: the rules file was refused" in proc.stderr
    assert "Traceback" not in proc.stderr
