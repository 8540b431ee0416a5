"""The live door's sink: the engine's telemetry (metrics, logs, callbacks) plus what only the
live processor needs: which traces the engine follows (the fast path's check), which traces have
their root in another process (:mod:`.remote`), the violations of the span being started, and the
log records and user callbacks held until the engine lock is released."""
from __future__ import annotations

from typing import Any, List, Optional, Set

from ..core.emit import Telemetry
from ..core.results import Violation
from .remote import RemoteParents

NOTHING: List[Any] = []  # never appended to


class LiveSink(Telemetry):
    """Telemetry plus what only the live door needs: which traces to route to the engine, the
    violations of the call in progress, and callbacks held until the engine lock is released."""

    def __init__(self, tracked: Set[int], remote: RemoteParents, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tracked = tracked
        self.remote = remote
        self.current: Optional[List[Violation]] = None

    def take_deferred(self) -> List[Any]:
        """End a section under the engine lock (begun with ``deferred = []``): the log records and
        user callbacks it produced, to run once the lock is released."""
        d = self.deferred
        self.deferred = None
        return d if d else NOTHING

    def trace_tracked(self, trace_id: str) -> None:
        self.tracked.add(int(trace_id, 16))

    def trace_released(self, trace_id: str) -> None:
        tid = int(trace_id, 16)
        self.tracked.discard(tid)
        if self.remote.traces:
            self.remote.released(tid)

    def root_elsewhere(self, trace_id: str) -> bool:
        remote = self.remote
        return bool(remote.traces) and remote.root_elsewhere(int(trace_id, 16))

    def violation(self, v: Violation) -> None:
        super().violation(v)
        if self.current is not None:
            self.current.append(v)


__all__ = ["NOTHING", "LiveSink"]
