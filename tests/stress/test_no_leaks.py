"""Secrets in tool arguments and results never leave through spanassert: not in exported span
events, metric attributes, log records (Python logging or an OTel LoggerProvider), callbacks, or any
`spanassert replay` report (JSON, JUnit, SARIF, text) — unless a rule opted in to evidence, and then
only within its truncated excerpt."""
from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from spanassert.assertions.base import EVIDENCE_MAX_CHARS
from spanassert.config import load_config
from spanassert.otlp.writers import write_jsonl

from .report import record
from .rig import RULES, LiveRig, child, new_root, tool_attrs

ARG_SECRET = "sk-live-ARGS-7f3a9c2e"
RESULT_SECRET = "sk-live-RESULT-b81d2e55"
DEEP_SECRET = "sk-live-DEEP-40c1aa"  # placed past the evidence excerpt of the opted-in rule
SECRETS = (ARG_SECRET, RESULT_SECRET, DEEP_SECRET)

# The shared rules (no evidence) plus one rule that opts in to argument evidence.
LEAK_RULES = RULES + """\
  - id: transfer-limit-with-evidence
    assertions:
      - type: trace_args_valid
        tool: transfer
        evidence: arguments
        schema:
          type: object
          properties:
            amount: {type: number, maximum: 100}
"""


def _episodes(tracer: Any) -> int:
    """Episodes whose every violation involves a call carrying a secret."""
    calls = [
        ("refund", {"amount": 9999, "card": ARG_SECRET}, None),
        ("run_sql", {"query": f"DROP TABLE users -- {ARG_SECRET}"}, None),
        ("lookup_order", {"order": ARG_SECRET}, {"id": RESULT_SECRET, "token": RESULT_SECRET}),
        ("delete_database", {"password": ARG_SECRET}, {"ok": RESULT_SECRET}),
        ("transfer", {"amount": 5000, "memo": "m" * 200 + DEEP_SECRET}, None),
        ("lookup_order", f"not json {ARG_SECRET}", f"not json {RESULT_SECRET}"),
    ]
    n = 0
    for tool, args, result in calls:
        root = new_root(tracer)
        span = child(tracer, root, f"execute_tool {tool}", tool_attrs(tool))
        span.set_attribute("gen_ai.tool.call.arguments", args if isinstance(args, str) else json.dumps(args))
        if result is not None:
            span.set_attribute("gen_ai.tool.call.result", result if isinstance(result, str) else json.dumps(result))
        span.end()
        root.end()
        n += 2
    return n


def _leaks(texts: Dict[str, str]) -> List[str]:
    return [f"{secret} in {where}" for where, text in texts.items() for secret in SECRETS if secret in text]


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: List[str] = []

    def emit(self, rec: logging.LogRecord) -> None:
        self.lines.append(rec.getMessage() + " " + repr(rec.__dict__))


def test_secrets_never_reach_span_events_metrics_logs_or_callbacks() -> None:
    config = load_config(LEAK_RULES)
    exporter = InMemorySpanExporter()
    logs = InMemoryLogRecordExporter()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    seen: List[Any] = []
    episodes: List[Any] = []
    otel = LiveRig(config, export=SimpleSpanProcessor(exporter), logger_provider=logger_provider,
                   on_violation=seen.append, on_episode=episodes.append)
    spans = _episodes(otel.tracer)
    # The same again with no logger provider: violations go to Python logging.
    capture = _Capture()
    root_logger = logging.getLogger()
    root_logger.addHandler(capture)
    old_level = root_logger.level
    root_logger.setLevel(logging.DEBUG)
    try:
        plain = LiveRig(config, export=SimpleSpanProcessor(InMemorySpanExporter()))
        spans += _episodes(plain.tracer)
    finally:
        root_logger.removeHandler(capture)
        root_logger.setLevel(old_level)

    events = [dict(e.attributes or {}) for s in exporter.get_finished_spans() for e in s.events]
    metrics = otel.reader.get_metrics_data().to_json() + plain.reader.get_metrics_data().to_json()
    texts = {
        "span events": json.dumps(events, default=str),
        "metrics": metrics,
        "OTel log records": "\n".join(r.to_json() for r in logs.get_finished_logs()),
        "Python logging": "\n".join(capture.lines),
        "on_violation": json.dumps([v.to_dict() for v in seen], default=str),
        "on_episode": json.dumps([r.to_dict() for r in episodes], default=str),
    }
    leaks = _leaks(texts)
    evidence = [v.message.split("; arguments: ", 1)[1] for v in seen if "; arguments: " in v.message]
    record("no leaks: live (events, metrics, logs, callbacks)", inputs=spans, secrets_leaked=len(leaks),
           note=f"{len(seen)} violations, {len(events)} span events, {len(capture.lines)} Python log records; "
                f"opted-in evidence excerpts: {len(evidence)} of <= {max(map(len, evidence), default=0)} chars")
    assert len(seen) >= 6 and events and logs.get_finished_logs() and capture.lines  # every channel was used
    assert leaks == []
    # The opted-in rule shows its excerpt, truncated before the deep secret.
    assert len(evidence) == 1 and evidence[0].startswith("{") and len(evidence[0]) <= EVIDENCE_MAX_CHARS
    # The channels do carry the opted-in excerpt, so finding no secret in them means something.
    for where in ("span events", "OTel log records", "Python logging", "on_violation"):
        assert "m" * 40 in texts[where], where


def test_secrets_never_reach_any_replay_report(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    rig = LiveRig(load_config(LEAK_RULES), export=SimpleSpanProcessor(exporter))
    spans = _episodes(rig.tracer)
    traces = tmp_path / "traces.jsonl"
    write_jsonl(exporter.get_finished_spans(), traces)
    rules = tmp_path / "rules.yaml"
    rules.write_text(LEAK_RULES)
    base = [sys.executable, "-m", "spanassert.cli", "replay", "--config", str(rules)]
    junit, sarif = tmp_path / "report.xml", tmp_path / "report.sarif"
    as_json = subprocess.run(base + ["--format", "json", "--junit", str(junit), "--sarif", str(sarif), str(traces)],
                             capture_output=True, text=True, timeout=120)
    as_text = subprocess.run(base + [str(traces)], capture_output=True, text=True, timeout=120)
    assert as_json.returncode == 1 and as_text.returncode == 1, as_json.stderr + as_text.stderr  # violations found
    report = json.loads(as_json.stdout)
    texts = {"JSON report": as_json.stdout, "JUnit": junit.read_text(), "SARIF": sarif.read_text(),
             "text report": as_text.stdout, "stderr": as_json.stderr + as_text.stderr}
    leaks = _leaks(texts)
    record("no leaks: replay reports (JSON/JUnit/SARIF/text)", inputs=spans, secrets_leaked=len(leaks),
           note=f"{len(report['violations'])} violations in the JSON report")
    assert len(report["violations"]) >= 6
    assert leaks == []
    for where in ("JSON report", "JUnit", "SARIF", "text report"):
        assert "m" * 40 in texts[where], where  # the opted-in excerpt is there; the secrets are not
