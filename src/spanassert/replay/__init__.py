"""Front door: re-checking exported OTLP trace files offline (``driver``) and its command (``cli``)."""
from __future__ import annotations

import sys
import types
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


class _ReplayPackage(types.ModuleType):
    """``spanassert.replay`` is both this package and the public function :func:`replay`: once any
    module of the package is imported, Python binds the package (not the function) to the name
    ``replay`` of ``spanassert``, so ``from spanassert import replay`` must work on either."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from .driver import replay

        return replay(*args, **kwargs)


sys.modules[__name__].__class__ = _ReplayPackage
