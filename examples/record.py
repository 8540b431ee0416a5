"""Regenerate the recorded telemetry in examples/recorded/ with the real OTLP JSON file exporter.

    python examples/record.py            # rewrites examples/recorded/support-agent.jsonl

The file is what the example agent exports without spanassert in the process: plain spans, one
OTLP ``ExportTraceServiceRequest`` per line (OTLP JSON Lines), one span in each. ``spanassert replay`` checks it::

    spanassert replay examples/recorded/support-agent.jsonl --config examples/rules.yaml
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "recorded" / "support-agent.jsonl"


def record(out: Path) -> int:
    """Run every scenario of the support agent once, exporting its spans to ``out``. Returns the
    number of scenarios run."""
    from spanassert.otlp.writers import file_span_exporter  # OTel's FileSpanExporter where installed
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    sys.path.insert(0, str(HERE))
    from support_agent import SCENARIOS, SupportAgent

    out.parent.mkdir(parents=True, exist_ok=True)
    if out.exists():
        out.unlink()  # the exporter appends
    provider = TracerProvider(resource=Resource.create({"service.name": "support-agent"}))
    # One export request per span, so the file reads (and diffs) one span per line.
    provider.add_span_processor(SimpleSpanProcessor(file_span_exporter(str(out))))
    agent = SupportAgent(provider)
    for scenario in SCENARIOS:
        agent.run(scenario)
    provider.shutdown()
    return len(SCENARIOS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output file (default {DEFAULT_OUT})")
    args = parser.parse_args()
    n = record(args.out)
    print(f"recorded {n} scenarios to {os.path.relpath(args.out)}")


if __name__ == "__main__":
    main()
