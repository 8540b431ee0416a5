"""spanassert: assertions about AI-agent tool calls, checked from OpenTelemetry spans — live in the
agent process, offline over exported OTLP files, and behind an OpenTelemetry Collector, with the
same verdicts in all three.

The public surface is small: :func:`load_config`, :class:`AssertionSpanProcessor`, :func:`replay`,
:class:`Trace` and :func:`check`, plus the records they return.
"""
from __future__ import annotations

from .core.exports import lazy_exports

__version__ = "0.1.0"

_EXPORTS = {
    "load_config": ("spanassert.config", "load_config"),
    "ConfigError": ("spanassert.core.model", "ConfigError"),
    "Diagnostic": ("spanassert.core.model", "Diagnostic"),
    "Verdict": ("spanassert.core.model", "Verdict"),
    "ToolCall": ("spanassert.core.model", "ToolCall"),
    "AssertionSpanProcessor": ("spanassert.live", "AssertionSpanProcessor"),
    "Violation": ("spanassert.core.results", "Violation"),
    "EpisodeResult": ("spanassert.core.results", "EpisodeResult"),
    "AssertionResult": ("spanassert.core.results", "AssertionResult"),
    "Engine": ("spanassert.core.engine", "Engine"),
    "replay": ("spanassert.replay.driver", "replay"),
    "Report": ("spanassert.core.report", "Report"),
    "Trace": ("spanassert.trace", "Trace"),
    "check": ("spanassert.trace", "check"),
    "Undecidable": ("spanassert.trace", "Undecidable"),
    "Guard": ("spanassert.live.guard", "Guard"),
    "Decision": ("spanassert.live.guard", "Decision"),
    "ToolBlocked": ("spanassert.live.guard", "ToolBlocked"),
}

__all__ = ["__version__", *_EXPORTS]

__getattr__ = lazy_exports(__name__, _EXPORTS)
