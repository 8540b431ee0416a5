"""Front door: re-checking exported OTLP trace files offline (``driver``) and its command (``cli``)."""
from __future__ import annotations

from typing import Any

_EXPORTS = {
    "replay": ("spanassert.replay.driver", "replay"),
    "replay_records": ("spanassert.replay.driver", "replay_records"),
    "replay_paths": ("spanassert.replay.driver", "replay_paths"),
    "replay_many": ("spanassert.replay.driver", "replay_many"),
    "DEFAULT_SETTLE_SPANS": ("spanassert.replay.driver", "DEFAULT_SETTLE_SPANS"),
    "Report": ("spanassert.core.report", "Report"),
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
