"""Front door: judging spans as they end inside the agent's process (an OpenTelemetry SpanProcessor),
and the zero-code configurator."""
from __future__ import annotations

from ..core.exports import lazy_exports

_EXPORTS = {
    "AssertionSpanProcessor": ("spanassert.live.processor", "AssertionSpanProcessor"),
    "SpanAssertConfigurator": ("spanassert.live.processor", "SpanAssertConfigurator"),
}

__all__ = list(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
