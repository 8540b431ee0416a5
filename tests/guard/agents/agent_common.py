"""Run inside a framework's env (tests/fwenv.py), beside a scripted agent: the real OpenTelemetry
SDK with spanassert's live processor in front of OpenTelemetry's own OTLP JSON Lines file exporter
(spanassert's writer of the same format where it cannot install: google-adk's SDK 1.44),
the processor's guard, the tools' "did my body run" flags, and the report the test reads.

A scripted agent script is run as ``python <framework>_agent.py RULES OUT.jsonl REPORT.json``.
"""
from __future__ import annotations

import json
import sys
from typing import Any, Dict, List

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from spanassert import AssertionSpanProcessor
from spanassert.config import load_config
from spanassert.otlp.writers import file_span_exporter

# Set by the tools' bodies: a blocked call must leave its flag unset.
RAN: Dict[str, List[Any]] = {"delete_database": [], "refund": [], "lookup_order": []}


class Run:
    def __init__(self, service: str) -> None:
        if len(sys.argv) != 4:
            raise SystemExit(f"usage: {sys.argv[0]} RULES OUT.jsonl REPORT.json")
        self.rules, self.out, self.report_path = sys.argv[1:4]
        self.live: List[Any] = []
        self.processor = AssertionSpanProcessor(
            load_config(self.rules), export=SimpleSpanProcessor(file_span_exporter(self.out)),
            on_episode=self.live.append, background=False, tick_interval=0)
        self.provider = TracerProvider(resource=Resource.create({"service.name": service}))
        self.provider.add_span_processor(self.processor)
        trace.set_tracer_provider(self.provider)
        self.guard = self.processor.guard()
        self.report: Dict[str, Any] = {}

    def finish(self, *, final: Any, requests: List[List[str]]) -> None:
        """Close the episodes (provider shutdown), then write what the test asserts on."""
        self.provider.shutdown()
        self.report.update({
            "final": final,
            "requests": requests,  # per model request after the first: the tool results it was given
            "ran": RAN,
            "live": {ep.key: ep.verdict_signature() for ep in self.live},
            "live_verdicts": {ep.key: {r.test_id: r.verdict.value for r in ep.results} for ep in self.live},
        })
        with open(self.report_path, "w", encoding="utf-8") as f:
            json.dump(self.report, f, default=str)


def lookup_order(order_id: str) -> str:
    """Look an order up."""
    RAN["lookup_order"].append(order_id)
    return f"order {order_id}: 2 items, paid 120.00"


def delete_database(name: str) -> str:
    """Delete a database."""
    RAN["delete_database"].append(name)
    return f"deleted {name}"


def refund(order_id: str, amount: int) -> str:
    """Refund an amount on an order."""
    RAN["refund"].append(amount)
    return f"refunded {amount} on {order_id}"


# The model's script, the same for every framework: look the order up, try a forbidden call, try a
# refund over the cap, make one within it, answer.
SCRIPT = [
    ("lookup_order", {"order_id": "A7"}),
    ("delete_database", {"name": "prod"}),
    ("refund", {"order_id": "A7", "amount": 500}),
    ("refund", {"order_id": "A7", "amount": 20}),
]
FINAL = "Refunded 20.00 on order A7."
