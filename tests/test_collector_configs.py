"""The configs in collector-config/ run in a real OpenTelemetry Collector built from the official
Go modules (tests/collector/build.py): each one passes the Collector's own `validate`, the file
export writes the spans the SDK sent as OTLP JSON Lines, the load-balancing routers keep every
trace (or conversation) on one backend, and the alert rules name the metric exactly as the
Collector's Prometheus exporter does.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Dict, List, Set

import pytest
import yaml

from collector.build import BUILD_TIMEOUT_SECONDS
from collector.conftest import (  # noqa: F401 (fixtures are used by name)
    CONFIG_DIR,
    FileExportCollector,
    OTLPHTTPSink,
    collector_binary,
    collector_file_export,
    export_through,
    free_port,
    otlp_http_sink,
    run_collector,
    start_file_export_collector,
)

# The first test to need the Collector pays for its cold build (see BUILD_TIMEOUT_SECONDS).
pytestmark = pytest.mark.timeout(BUILD_TIMEOUT_SECONDS + 180)

COLLECTOR_CONFIGS = sorted(CONFIG_DIR.glob("*.yaml"))
ALERT_RULES = CONFIG_DIR / "alerts" / "spanassert-alerts.yaml"
ALERT_RULES_TEST = CONFIG_DIR / "alerts" / "spanassert-alerts.test.yaml"


def _validate(binary: Path, config: Path, env: Dict[str, str]) -> "subprocess.CompletedProcess[str]":
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SPANASSERT_")}
    clean.update(env)
    return subprocess.run(
        [str(binary), "validate", "--config", str(config)],
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_collector_config_directory_holds_the_documented_configs() -> None:
    names = {p.name for p in COLLECTOR_CONFIGS}
    assert {"file-export.yaml", "load-balancing.yaml", "load-balancing-conversation.yaml"} <= names


@pytest.mark.collector
@pytest.mark.parametrize("config", COLLECTOR_CONFIGS, ids=lambda p: p.name)
def test_shipped_config_passes_collector_validate_with_its_defaults(collector_binary: Path, config: Path) -> None:
    result = _validate(collector_binary, config, {})
    assert result.returncode == 0, f"{config.name}:\n{result.stdout}{result.stderr}"


@pytest.mark.collector
@pytest.mark.parametrize("config", [p for p in COLLECTOR_CONFIGS if "load-balancing" in p.name], ids=lambda p: p.name)
def test_load_balancing_backends_come_from_a_yaml_list_in_the_environment(
    collector_binary: Path, config: Path
) -> None:
    env = {"SPANASSERT_BACKENDS": "[10.0.0.1:4317, 10.0.0.2:4317, 10.0.0.3:4317]"}
    printed = subprocess.run(
        [str(collector_binary), "print-config", "--config", str(config)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert printed.returncode == 0, printed.stderr
    exporter = yaml.safe_load(printed.stdout)["exporters"]["load_balancing"]
    assert exporter["resolver"]["static"]["hostnames"] == ["10.0.0.1:4317", "10.0.0.2:4317", "10.0.0.3:4317"]


@pytest.mark.collector
def test_validate_rejects_routing_attributes_without_the_attributes_routing_key(
    collector_binary: Path, tmp_path: Path
) -> None:
    # Proves `validate` checks component settings, so the passes above mean something.
    config = yaml.safe_load((CONFIG_DIR / "load-balancing-conversation.yaml").read_text())
    config["exporters"]["load_balancing"]["routing_key"] = "traceID"
    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump(config))
    result = _validate(collector_binary, broken, {})
    assert result.returncode != 0
    assert "routing_attributes can only be used when routing_key is" in result.stderr


def test_routers_have_no_processor_that_would_regroup_spans_before_routing() -> None:
    for name in ("load-balancing.yaml", "load-balancing-conversation.yaml"):
        config = yaml.safe_load((CONFIG_DIR / name).read_text())
        pipeline = config["service"]["pipelines"]["traces"]
        assert pipeline.get("processors", []) == [], name
        assert pipeline["exporters"] == ["load_balancing"], name


# -- file export: spans in, JSON Lines out -------------------------------------------------------


def _tool_episode(provider: Any, n_calls: int = 3, conversation: str = "") -> None:
    tracer = provider.get_tracer("spanassert.tests.collector")
    extra = {"gen_ai.conversation.id": conversation} if conversation else {}
    with tracer.start_as_current_span("invoke_agent planner", attributes={"gen_ai.operation.name": "invoke_agent", **extra}):
        for i in range(n_calls):
            with tracer.start_as_current_span(
                f"execute_tool lookup_{i}",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": f"lookup_{i}",
                    "gen_ai.tool.call.arguments": json.dumps({"query": f"q{i}", "limit": i}),
                    **extra,
                },
            ):
                pass


def _jsonl_spans(path: Path) -> List[Dict[str, Any]]:
    """Decode the Collector's file by hand: one TracesData JSON object per line."""
    spans: List[Dict[str, Any]] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        assert line.strip(), f"{path}:{number}: blank line in JSON Lines output"
        data = json.loads(line)
        for rs in data["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                spans.extend(ss["spans"])
    return spans


def _attrs(span: Dict[str, Any]) -> Dict[str, Any]:
    return {a["key"]: next(iter(a["value"].values())) for a in span.get("attributes", [])}


@pytest.mark.collector
@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_file_export_config_writes_every_sdk_span_as_otlp_json_lines(
    collector_file_export: Callable[..., Path], protocol: str
) -> None:
    path = collector_file_export(lambda p: _tool_episode(p, n_calls=3), protocol=protocol)

    spans = _jsonl_spans(path)
    assert sorted(s["name"] for s in spans) == [
        "execute_tool lookup_0",
        "execute_tool lookup_1",
        "execute_tool lookup_2",
        "invoke_agent planner",
    ]
    # OTLP JSON file rules: hex ids, int64 as decimal strings, integer enums.
    assert {len(s["traceId"]) for s in spans} == {32}
    assert all(re.fullmatch(r"[0-9a-f]{16}", s["spanId"]) for s in spans)
    assert all(isinstance(s["startTimeUnixNano"], str) for s in spans)
    assert {s["kind"] for s in spans} == {1}
    root = next(s for s in spans if s["name"] == "invoke_agent planner")
    assert {s.get("parentSpanId") for s in spans if s is not root} == {root["spanId"]}
    tool = next(s for s in spans if s["name"] == "execute_tool lookup_1")
    assert json.loads(_attrs(tool)["gen_ai.tool.call.arguments"]) == {"query": "q1", "limit": 1}


@pytest.mark.collector
def test_collector_written_file_reads_back_through_spanassert_otlp(collector_file_export: Callable[..., Path]) -> None:
    from spanassert.otlp import read_spans

    path = collector_file_export(lambda p: _tool_episode(p, n_calls=2))
    issues: List[Any] = []
    records = list(read_spans([path], on_issue=issues.append))
    assert issues == []
    by_name = {r.name: r for r in records}
    assert set(by_name) == {"invoke_agent planner", "execute_tool lookup_0", "execute_tool lookup_1"}
    root = by_name["invoke_agent planner"]
    assert root.parent_span_id is None
    assert by_name["execute_tool lookup_0"].parent_span_id == root.span_id
    assert by_name["execute_tool lookup_0"].attributes["gen_ai.tool.name"] == "lookup_0"


@pytest.mark.collector
def test_file_export_config_also_forwards_spans_to_the_backend(
    start_file_export_collector: Callable[[], FileExportCollector], otlp_http_sink: OTLPHTTPSink
) -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    collector = start_file_export_collector()
    export_through(collector, lambda p: _tool_episode(p, n_calls=1))
    assert collector.collector.stop() == 0, collector.collector.log()

    forwarded: List[str] = []
    for path, content_type, body in otlp_http_sink.requests:
        assert path == "/v1/traces"
        assert content_type == "application/x-protobuf"
        request = ExportTraceServiceRequest.FromString(body)
        forwarded += [s.name for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    assert sorted(forwarded) == ["execute_tool lookup_0", "invoke_agent planner"]


# -- load balancing: one trace (or conversation) -> one backend ----------------------------------


def _backends(start: Callable[[], FileExportCollector], n: int) -> List[FileExportCollector]:
    return [start() for _ in range(n)]


def _router(run_collector: Any, config_name: str, backends: List[FileExportCollector]) -> FileExportCollector:
    grpc_port, http_port = free_port(), free_port()
    env = {
        "SPANASSERT_OTLP_GRPC_ENDPOINT": f"127.0.0.1:{grpc_port}",
        "SPANASSERT_OTLP_HTTP_ENDPOINT": f"127.0.0.1:{http_port}",
        "SPANASSERT_BACKENDS": "[" + ", ".join(b.grpc_endpoint for b in backends) + "]",
    }
    running = run_collector(CONFIG_DIR / config_name, env=env, wait_ports=(grpc_port, http_port))
    return FileExportCollector(running, Path(os.devnull), grpc_port, http_port)


def _stop_all(router: FileExportCollector, backends: List[FileExportCollector]) -> None:
    # Router first: its shutdown drains the queues into the backends.
    assert router.collector.stop() == 0, router.collector.log()
    for b in backends:
        assert b.collector.stop() == 0, b.collector.log()


@pytest.mark.collector
def test_load_balancing_config_sends_every_span_of_a_trace_to_one_backend(
    run_collector: Any, start_file_export_collector: Callable[[], FileExportCollector]
) -> None:
    backends = _backends(start_file_export_collector, 2)
    router = _router(run_collector, "load-balancing.yaml", backends)

    def many_traces(provider: Any) -> None:
        for _ in range(24):
            _tool_episode(provider, n_calls=2)

    export_through(router, many_traces)
    _stop_all(router, backends)

    backends_of_trace: Dict[str, Set[int]] = defaultdict(set)
    for i, b in enumerate(backends):
        for span in _jsonl_spans(b.path) if b.path.exists() else []:
            backends_of_trace[span["traceId"]].add(i)
    assert len(backends_of_trace) == 24
    assert all(len(where) == 1 for where in backends_of_trace.values()), dict(backends_of_trace)
    used = {i for where in backends_of_trace.values() for i in where}
    assert used == {0, 1}, "24 traces hashed onto a single backend: is the ring using both?"


@pytest.mark.collector
def test_conversation_config_keeps_all_traces_of_a_conversation_on_one_backend(
    run_collector: Any, start_file_export_collector: Callable[[], FileExportCollector]
) -> None:
    backends = _backends(start_file_export_collector, 2)
    router = _router(run_collector, "load-balancing-conversation.yaml", backends)

    def conversations(provider: Any) -> None:
        for turn in range(4):  # each turn is its own trace
            for conv in range(6):
                _tool_episode(provider, n_calls=1, conversation=f"conv-{conv}")

    export_through(router, conversations)
    _stop_all(router, backends)

    backends_of_conversation: Dict[str, Set[int]] = defaultdict(set)
    traces_of_conversation: Dict[str, Set[str]] = defaultdict(set)
    for i, b in enumerate(backends):
        for span in _jsonl_spans(b.path) if b.path.exists() else []:
            conv = _attrs(span)["gen_ai.conversation.id"]
            backends_of_conversation[conv].add(i)
            traces_of_conversation[conv].add(span["traceId"])
    assert set(backends_of_conversation) == {f"conv-{c}" for c in range(6)}
    assert all(len(t) == 4 for t in traces_of_conversation.values())
    assert all(len(where) == 1 for where in backends_of_conversation.values()), dict(backends_of_conversation)


# -- alerts: the rule's metric name is the one the Prometheus exporter serves -------------------


def _alert_rules() -> List[Dict[str, Any]]:
    doc = yaml.safe_load(ALERT_RULES.read_text(encoding="utf-8"))
    return [rule for group in doc["groups"] for rule in group["rules"]]


def _promtool() -> str:
    # Debian ships it in the `prometheus` package; `apt-get download prometheus && dpkg -x` gets
    # the binary without installing (and starting) the server.
    return os.environ.get("SPANASSERT_PROMTOOL") or shutil.which("promtool") or ""


def test_alert_rules_file_is_a_well_formed_prometheus_rule_group() -> None:
    # With promtool: its own checker plus the unit tests beside the rules. Without it (not a
    # Python package; Debian's `prometheus` has it), the structural checks below still run.
    promtool = _promtool()
    for args in (["check", "rules", ALERT_RULES.name], ["test", "rules", ALERT_RULES_TEST.name]) if promtool else ():
        result = subprocess.run(
            [promtool, *args], cwd=ALERT_RULES.parent, capture_output=True, text=True, timeout=60, check=False
        )
        assert result.returncode == 0, result.stdout + result.stderr
    doc = yaml.safe_load(ALERT_RULES.read_text(encoding="utf-8"))
    assert set(doc) == {"groups"}
    for group in doc["groups"]:
        assert set(group) <= {"name", "interval", "limit", "rules"} and group["name"]
        for rule in group["rules"]:
            assert set(rule) <= {"alert", "expr", "for", "keep_firing_for", "labels", "annotations"}, rule
            assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", rule["alert"])
            assert rule["expr"].count("(") == rule["expr"].count(")"), rule["alert"]
            if "for" in rule:
                assert re.fullmatch(r"\d+[smhdwy]", rule["for"])
            for text in rule.get("annotations", {}).values():
                assert text.count("{{") == text.count("}}"), rule["alert"]
    severities = {rule["labels"]["severity"] for rule in _alert_rules()}
    assert severities == {"page", "warning"}


def test_alert_rule_pages_on_critical_and_warns_on_error_or_warning_severity() -> None:
    by_name = {r["alert"]: r for r in _alert_rules()}
    assert 'spanassert_severity="critical"' in by_name["SpanassertCriticalViolation"]["expr"]
    assert "for" not in by_name["SpanassertCriticalViolation"], "one forbidden call must page at once"
    assert 'spanassert_severity=~"error|warning"' in by_name["SpanassertViolationsWarning"]["expr"]


PROMETHEUS_CONFIG = """
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:{otlp_port}
exporters:
  prometheus:
    endpoint: 127.0.0.1:{prom_port}
service:
  pipelines:
    metrics:
      receivers: [otlp]
      exporters: [prometheus]
"""


def _scrape_until(url: str, wanted: str, timeout: float = 20.0) -> str:
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode("utf-8")
        if wanted in text:
            return text
        time.sleep(0.2)
    raise AssertionError(f"{wanted!r} never appeared on {url}:\n{text}")


@pytest.mark.collector
def test_violation_counter_is_scraped_under_the_names_the_alert_rules_use(
    run_collector: Any, tmp_path: Path
) -> None:
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource

    from spanassert.core.emit import Telemetry
    from spanassert.core.results import Violation

    otlp_port, prom_port = free_port(), free_port()
    config = tmp_path / "prometheus.yaml"
    config.write_text(PROMETHEUS_CONFIG.format(otlp_port=otlp_port, prom_port=prom_port))
    collector = run_collector(config, wait_ports=(otlp_port, prom_port))

    reader = PeriodicExportingMetricReader(
        OTLPMetricExporter(endpoint=f"http://127.0.0.1:{otlp_port}/v1/metrics", timeout=10),
        export_interval_millis=60_000,
    )
    provider = MeterProvider(metric_readers=[reader], resource=Resource.create({"service.name": "checkout-agent"}))
    try:
        telemetry = Telemetry(meter_provider=provider)
        telemetry.violation(
            Violation(
                test_id="no-db-deletes",
                assertion_type="tool_forbidden",
                assertion_index=0,
                assertion_name=None,
                severity="critical",
                shadow=False,
                message="`delete_database` called at call #4",
                span_id="5f2c000000000001",
                trace_id="0" * 31 + "1",
                episode_key="t1",
                tool="delete_database",
                call_index=4,
                late=False,
                at_close=False,
                agent="planner",
            )
        )
        assert provider.force_flush(timeout_millis=15000)
    finally:
        provider.shutdown()

    text = _scrape_until(f"http://127.0.0.1:{prom_port}/metrics", "spanassert_violations_total{")
    series = [line for line in text.splitlines() if line.startswith("spanassert_violations_total{")]
    assert len(series) == 1, series
    labels = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"', series[0]))
    assert labels["spanassert_test_id"] == "no-db-deletes"
    assert labels["spanassert_assertion_type"] == "tool_forbidden"
    assert labels["gen_ai_tool_name"] == "delete_database"
    assert labels["gen_ai_agent_name"] == "planner"
    assert labels["spanassert_severity"] == "critical"
    assert labels["job"] == "checkout-agent"
    assert series[0].endswith(" 1")
    assert collector.stop() == 0

    # Every metric and label the alert rules select or group by exists on the scraped series.
    for rule in _alert_rules():
        expr = rule["expr"]
        assert set(re.findall(r"\b(spanassert_[a-z_]+_total)\{", expr)) == {"spanassert_violations_total"}
        used = set(re.findall(r"by \(([^)]*)\)", expr)[0].replace(" ", "").split(","))
        used |= set(re.findall(r"([a-z_]+)=~?\"", expr))
        missing = used - set(labels)
        if rule["alert"] == "SpanassertViolationsWarning":
            missing.discard("gen_ai_tool_name")
            missing.discard("gen_ai_agent_name")
        assert not missing, f"{rule['alert']} uses labels the exporter does not produce: {missing}"


# -- without Go: skip locally, fail under CI -----------------------------------------------------

MISSING_GO_PROBE = """
from collector.conftest import collector_binary

def test_needs_the_collector(collector_binary):
    pass
"""


@pytest.mark.parametrize("ci, outcome", [("", "1 skipped"), ("true", "1 error")])
def test_missing_go_toolchain_skips_locally_but_fails_under_ci(tmp_path: Path, ci: str, outcome: str) -> None:
    (tmp_path / "test_probe.py").write_text(MISSING_GO_PROBE)
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS")}
    env.update(
        SPANASSERT_GO=str(tmp_path / "no-such-go"),
        PYTHONPATH=str(Path(__file__).resolve().parent),
        CI=ci,
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    output = result.stdout + result.stderr
    assert outcome in output, output
    assert "Go toolchain not found" in output
    assert "no-such-go is not an executable file" in output


@pytest.mark.collector
def test_parallel_builders_share_one_build_through_the_lock(collector_binary: Path, tmp_path: Path) -> None:
    # collector_binary warmed Go's build cache, so each build here takes seconds, not minutes.
    env = {**os.environ, "SPANASSERT_COLLECTOR_CACHE": str(tmp_path / "cache")}
    script = str(Path(__file__).resolve().parent / "collector" / "build.py")
    builders = [
        subprocess.Popen([sys.executable, script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    results = [b.communicate(timeout=BUILD_TIMEOUT_SECONDS) for b in builders]
    assert [b.returncode for b in builders] == [0, 0], results
    paths = {out.strip() for out, _ in results}
    assert len(paths) == 1 and Path(paths.pop()).name == collector_binary.name
    assert sum("built OpenTelemetry Collector" in err for _, err in results) == 1, results
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [
        collector_binary.name,
        collector_binary.name + ".lock",
    ]
