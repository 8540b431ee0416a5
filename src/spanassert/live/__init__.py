"""Front door: judging spans inside the agent's process, as the SDK starts and ends them.

- ``processor``: :class:`AssertionSpanProcessor`, the SDK ``SpanProcessor`` adapter to the engine.
- ``sdk``: every read of the SDK's private span fields, each with a public-API fallback.
- ``worker``: the background queue (bounded in spans and bytes) and its worker thread.
- ``annotate``: where violations go on spans (an annotated copy, or the open root).
- ``configurator``: :class:`SpanAssertConfigurator`, zero-code setup for ``opentelemetry-instrument``.
- ``guard``: :class:`Guard`, deciding a tool call before it runs (``action: block`` tests).
"""
from __future__ import annotations

from ..core.exports import lazy_exports

_EXPORTS = {
    "AssertionSpanProcessor": ("spanassert.live.processor", "AssertionSpanProcessor"),
    "SpanAssertConfigurator": ("spanassert.live.configurator", "SpanAssertConfigurator"),
    "Guard": ("spanassert.live.guard", "Guard"),
    "Decision": ("spanassert.live.guard", "Decision"),
    "ToolBlocked": ("spanassert.live.guard", "ToolBlocked"),
}

__all__ = list(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
