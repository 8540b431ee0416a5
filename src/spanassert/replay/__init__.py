"""Front door: re-checking exported OTLP trace files offline (``driver``) and its command (``cli``)."""
from __future__ import annotations

import sys
import types
from typing import Any

from ..core.exports import lazy_exports

_EXPORTS = {
    "replay": ("spanassert.replay.driver", "replay"),
    "replay_records": ("spanassert.replay.driver", "replay_records"),
    "replay_paths": ("spanassert.replay.driver", "replay_paths"),
    "replay_many": ("spanassert.replay.driver", "replay_many"),
    "DEFAULT_SETTLE_SPANS": ("spanassert.replay.driver", "DEFAULT_SETTLE_SPANS"),
    "Report": ("spanassert.core.report", "Report"),
}

__all__ = list(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)


class _ReplayPackage(types.ModuleType):
    """``spanassert.replay`` is both this package and the public function :func:`replay`: once any
    module of the package is imported, Python binds the package (not the function) to the name
    ``replay`` of ``spanassert``, so ``from spanassert import replay`` must work on either."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from .driver import replay

        return replay(*args, **kwargs)


sys.modules[__name__].__class__ = _ReplayPackage
