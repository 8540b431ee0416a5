"""The OTLP JSON Lines writer the tests use: OpenTelemetry's own ``FileSpanExporter`` (a real,
independent writer) where it installs (Python 3.10+), else spanassert's writer on the SDK encoder."""
from __future__ import annotations

try:
    from opentelemetry.exporter.otlp.json.file import FileSpanExporter
except ImportError:  # Python 3.9: the package requires 3.10
    from spanassert.otlp.writers import JsonLinesSpanExporter as FileSpanExporter  # type: ignore[assignment]

__all__ = ["FileSpanExporter"]
