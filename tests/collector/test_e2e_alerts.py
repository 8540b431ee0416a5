"""The operator's path, end to end with real parts: an agent process makes a forbidden tool call;
the violation is counted (by `spanassert serve` behind the real Collector, or by the live processor
inside the agent); the Collector's prometheus exporter exposes the counter; a real Prometheus
scrapes it and evaluates the shipped alert rule; a real Alertmanager routes it with the shipped
route to a webhook here. The notification must name the test id, severity, agent and tool, carry a
replay command for the rule and a time window around the call (which, run, finds the violation),
and no trace id in any label. The shipped Grafana dashboard's queries run against the same
Prometheus. The time from the call to the webhook is printed with the intervals used.

Prometheus and Alertmanager come from Debian's packages (.ci/run unpacks them); locally without
them the tests skip, under CI=true they fail.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, Optional

import pytest

from collector.alert_stack import (
    EVALUATION_INTERVAL,
    GROUP_WAIT,
    METRIC_EXPORT_INTERVAL_MS,
    SCRAPE_INTERVAL,
    AlertStack,
    dashboard_queries,
    find_binaries,
)
from collector.build import BUILD_TIMEOUT_SECONDS
from collector.conftest import (  # noqa: F401 (fixture used by name)
    CONFIG_DIR,
    NO_SELF_TELEMETRY,
    RunningCollector,
    collector_binary,
    free_port,
    skip_or_fail,
)
from collector.e2e_helpers import SPANASSERT_CLI, ServeProcess, _clean_env

pytestmark = [pytest.mark.collector, pytest.mark.timeout(BUILD_TIMEOUT_SECONDS + 300)]

NOTIFICATION_TIMEOUT = 90.0
LIVE_SERVICE = "refunds-agent"

RULES = """\
version: 1
suite: alert-path
tests:
  - id: never-delete-database
    severity: critical
    tags: [safety]
    assertions:
      - type: trace_must_not_call_tool
        tool: delete_database
  - id: search-first
    severity: warning
    assertions:
      - type: trace_tool_sequence
        sequence: [search, book]
        allow_other_tools: true
"""

AGENT = r'''
"""An agent process: one episode whose second call is forbidden. Mode "collector": plain OTel
SDK, spans to the Collector (spanassert serve judges). Mode "live": the live processor judges in
this process and exports its metrics over OTLP to the Collector. Prints the wall time just before
the forbidden call, then waits for stdin to close (the test's signal; bounded) so that its metric
reader keeps exporting."""
import json
import sys
import time

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

plan = json.loads(sys.argv[1])
resource = Resource.create({"service.name": plan["service"]})
export = BatchSpanProcessor(OTLPSpanExporter(endpoint=plan["otlp_grpc"], insecure=True, timeout=10),
                            schedule_delay_millis=100)
provider = TracerProvider(resource=resource)
meter_provider = None
if plan["mode"] == "live":
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    from spanassert import AssertionSpanProcessor

    meter_provider = MeterProvider(resource=resource, metric_readers=[PeriodicExportingMetricReader(
        OTLPMetricExporter(endpoint=plan["otlp_http"] + "/v1/metrics", timeout=5),
        export_interval_millis=plan["export_ms"])])
    provider.add_span_processor(AssertionSpanProcessor(plan["rules"], export=export, meter_provider=meter_provider))
else:
    provider.add_span_processor(export)
tracer = provider.get_tracer("alert-path-agent")

call_time = None
with tracer.start_as_current_span("invoke_agent " + plan["agent"], attributes={
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": plan["agent"]}) as root:
    for tool in ("search", "delete_database", "book"):
        if tool == "delete_database":
            call_time = time.time()
        with tracer.start_as_current_span("execute_tool " + tool, attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                "gen_ai.tool.call.id": "call-" + tool, "gen_ai.tool.call.arguments": json.dumps({"q": tool})}):
            pass
    trace_id = format(root.get_span_context().trace_id, "032x")
provider.force_flush(10000)
print(json.dumps({"call_time": call_time, "trace_id": trace_id}), flush=True)
deadline = time.monotonic() + 150
while time.monotonic() < deadline and sys.stdin.readline():
    pass
provider.shutdown()
if meter_provider is not None:
    meter_provider.shutdown()
'''


class Stack:
    def __init__(self, workdir: Path, alerts: AlertStack, collector: RunningCollector, serve: ServeProcess,
                 otlp_grpc: str, otlp_http: str, rules: Path, traces: Path) -> None:
        self.workdir = workdir
        self.alerts = alerts
        self.collector = collector
        self.serve = serve
        self.otlp_grpc = otlp_grpc
        self.otlp_http = otlp_http
        self.rules = rules
        self.traces = traces


@pytest.fixture(scope="module")
def stack(collector_binary: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    if not all(find_binaries()):
        skip_or_fail("Prometheus / Alertmanager not found: run .ci/run (it unpacks Debian's `prometheus` and "
                     "`prometheus-alertmanager` into ~/.cache/spanassert/), or set SPANASSERT_PROMETHEUS and "
                     "SPANASSERT_ALERTMANAGER")
    if not Path("/usr/share/prometheus/alertmanager/default.tmpl").exists() and "+b" in str(find_binaries()[1]):
        skip_or_fail("Debian's Alertmanager reads /usr/share/prometheus/alertmanager/default.tmpl, which is missing: "
                     "run .ci/run (it copies the package's templates there)")
    workdir = tmp_path_factory.mktemp("alert-path")
    rules = workdir / "rules.yaml"  # the name the alert's replay command uses
    rules.write_text(RULES, encoding="utf-8")
    traces = workdir / "spanassert-traces.jsonl"  # serve-metrics.yaml's default export file name
    grpc_port, http_port, exporter_port = free_port(), free_port(), free_port()
    otlp_http = f"http://127.0.0.1:{http_port}"
    started: list = []
    try:
        serve = ServeProcess(workdir / "serve", rules, "--settle", "0.2", env={
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": otlp_http + "/v1/metrics",
            "OTEL_METRIC_EXPORT_INTERVAL": str(METRIC_EXPORT_INTERVAL_MS),
        })
        started.append(serve.kill)
        serve.wait_ready()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SPANASSERT_", "OTEL_"))}
        env.update({
            "SPANASSERT_OTLP_GRPC_ENDPOINT": f"127.0.0.1:{grpc_port}",
            "SPANASSERT_OTLP_HTTP_ENDPOINT": f"127.0.0.1:{http_port}",
            "SPANASSERT_SERVE_ENDPOINT": serve.grpc,
            "SPANASSERT_PROMETHEUS_ENDPOINT": f"127.0.0.1:{exporter_port}",
            "SPANASSERT_EXPORT_PATH": str(traces),
        })
        log_path = workdir / "collector.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen([str(collector_binary), "--config", str(CONFIG_DIR / "serve-metrics.yaml"),
                                     "--set", NO_SELF_TELEMETRY], env=env, stdout=log, stderr=subprocess.STDOUT,
                                    cwd=str(workdir))
        collector = RunningCollector(proc, log_path)
        started.append(collector.stop)
        collector.wait_ready([grpc_port, http_port, exporter_port])
        alerts = AlertStack(workdir / "alerting", f"127.0.0.1:{exporter_port}", free_port)
        started.append(alerts.close)
        yield Stack(workdir, alerts, collector, serve, f"127.0.0.1:{grpc_port}", otlp_http, rules, traces)
    finally:
        for stop in reversed(started):
            try:
                stop()
            except Exception:  # noqa: BLE001 - stop the rest too
                pass


def _run_agent(stack: Stack, mode: str, agent: str, service: str) -> "tuple[subprocess.Popen[str], Dict[str, Any]]":
    script = stack.workdir / "agent.py"
    script.write_text(AGENT, encoding="utf-8")
    plan = {"mode": mode, "agent": agent, "service": service, "otlp_grpc": stack.otlp_grpc,
            "otlp_http": stack.otlp_http, "rules": str(stack.rules), "export_ms": METRIC_EXPORT_INTERVAL_MS}
    proc = subprocess.Popen([sys.executable, str(script), json.dumps(plan)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_clean_env(),
                            cwd=str(stack.workdir))
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.kill()
        raise AssertionError(f"agent printed nothing (exit {proc.wait(10)}):\n{proc.stderr.read() if proc.stderr else ''}")
    return proc, dict(json.loads(line))


def _stop_agent(proc: "subprocess.Popen[str]") -> None:
    try:
        proc.communicate(input="", timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def _check_notification(stack: Stack, job: str, agent: str, info: Dict[str, Any], label: str) -> None:
    def ours(doc: Dict[str, Any], alert: Dict[str, Any]) -> bool:
        labels = alert.get("labels", {})
        return (alert.get("status") == "firing" and labels.get("alertname") == "SpanassertCriticalViolation"
                and labels.get("job") == job and labels.get("gen_ai_agent_name") == agent)

    arrived, path, doc, alert = stack.alerts.webhook.wait_for(ours, NOTIFICATION_TIMEOUT)
    elapsed = arrived - info["call_time"]
    print(f"\nalert path ({label}): forbidden call -> webhook {elapsed:.2f} s "
          f"(metric export {METRIC_EXPORT_INTERVAL_MS} ms, scrape {SCRAPE_INTERVAL}, evaluation "
          f"{EVALUATION_INTERVAL}, group_wait {GROUP_WAIT})")

    labels = alert["labels"]
    # The shipped route sent the page to the on-call receiver.
    assert path == "/spanassert/page", path
    assert doc["receiver"] == "agent-oncall"
    assert labels["spanassert_test_id"] == "never-delete-database"
    assert labels["severity"] == "page" and labels["spanassert_severity"] == "critical"
    assert labels["gen_ai_agent_name"] == agent
    assert labels["gen_ai_tool_name"] == "delete_database"
    assert labels["spanassert_assertion_type"] == "trace_must_not_call_tool"
    summary = alert["annotations"]["summary"]
    for word in ("never-delete-database", agent, "delete_database", "critical"):
        assert word in summary, (word, summary)
    # Trace ids belong in span events and log records, not in labels (cardinality).
    everything = json.dumps(doc)
    assert info["trace_id"] not in json.dumps(labels) and info["trace_id"] not in everything

    # The replay command in the notification: this rule, a window around the call; run as written
    # (in the directory where the Collector keeps the spans), it finds the violation.
    command = shlex.split(alert["annotations"]["replay"])
    assert command[:2] == ["spanassert", "replay"], command
    assert command[command.index("--test") + 1] == "never-delete-database"
    since, until = float(command[command.index("--since") + 1]), float(command[command.index("--until") + 1])
    assert since <= info["call_time"] <= until, (since, info["call_time"], until)
    assert until - since <= 3600
    deadline = time.monotonic() + 20
    while True:  # the Collector's file exporter flushes every second
        done = subprocess.run(SPANASSERT_CLI + command[1:] + ["--format", "json"], capture_output=True, text=True,
                              timeout=60, cwd=str(stack.workdir), env=_clean_env(), check=False)
        report = json.loads(done.stdout) if done.stdout.strip().startswith("{") else {}
        hits = [v for v in report.get("violations", []) if v["trace_id"] == info["trace_id"]]
        if hits or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert done.returncode == 1, done.stderr
    assert [(v["test_id"], v["tool"]) for v in hits] == [("never-delete-database", "delete_database")], report
    # Only the chosen rule ran.
    assert {r["test"] for ep in report["episodes"] for r in ep["results"]} == {"never-delete-database"}


def test_forbidden_call_judged_by_serve_pages_through_prometheus_and_alertmanager(stack: Stack) -> None:
    proc, info = _run_agent(stack, "collector", "planner", "checkout-agent")
    try:
        _check_notification(stack, job="spanassert", agent="planner", info=info, label="spanassert serve")
    finally:
        _stop_agent(proc)

    # The dashboard's queries all run; the violation and verdict panels show this episode.
    seen: Dict[str, int] = {}
    for title, expr in dashboard_queries():
        seen[title] = len(stack.alerts.query(expr))
    assert seen["Violations by rule, agent and tool"] >= 1, seen
    assert seen["Episodes by verdict"] >= 1, seen
    assert seen["Rule verdicts (coverage)"] >= 1, seen
    assert seen["Evaluation time per episode (p50, p99)"] >= 1, seen
    violations = stack.alerts.query(dict(dashboard_queries())["Violations by rule, agent and tool"])
    assert any(r["metric"].get("gen_ai_agent_name") == "planner" and r["metric"].get("gen_ai_tool_name") ==
               "delete_database" for r in violations), violations


def test_forbidden_call_judged_by_the_live_processor_pages_too(stack: Stack) -> None:
    proc, info = _run_agent(stack, "live", "refunds", LIVE_SERVICE)
    try:
        _check_notification(stack, job=LIVE_SERVICE, agent="refunds", info=info, label="live processor")
    finally:
        _stop_agent(proc)
