"""Front door: judging spans as they end inside the agent's process (an OpenTelemetry SpanProcessor),
and the zero-code configurator."""
from __future__ import annotations

from typing import Any

_EXPORTS = {
    "AssertionSpanProcessor": ("spanassert.live.processor", "AssertionSpanProcessor"),
    "SpanAssertConfigurator": ("spanassert.live.processor", "SpanAssertConfigurator"),
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    target = _EXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(target[0]), target[1])
    globals()[name] = value
    return value
