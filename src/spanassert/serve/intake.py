"""The intake queue between the request threads (HTTP, gRPC) and the engine thread."""
from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any, Deque, Dict, List, Optional, Tuple

from ..core.model import SpanRecord


class Batch:
    """The usable spans of one request, and (when forwarding) their protobuf form."""

    __slots__ = ("records", "wire", "arrived")

    def __init__(self, records: List[SpanRecord], wire: Optional[Dict[Tuple[str, str], Any]]) -> None:
        self.records = records
        # (trace id, span id) -> (ResourceSpans, ScopeSpans, Span) of a protobuf request; None for JSON.
        self.wire = wire
        self.arrived = 0.0  # time.monotonic() when it was queued (set by IntakeQueue.put)


class IntakeQueue:
    """Requests waiting for the engine thread, bounded by their total number of spans."""

    def __init__(self, max_spans: int) -> None:
        self.max_spans = max(1, max_spans)
        self._items: Deque[Batch] = deque()
        self._cond = threading.Condition()
        self.depth = 0  # spans queued
        self.accepted = 0  # spans ever accepted
        self.closed = False

    def put(self, batch: Batch) -> bool:
        n = len(batch.records)
        with self._cond:
            if self.closed or self.depth + n > self.max_spans:
                return False
            batch.arrived = time.monotonic()  # under the lock: arrival order is queue order
            self._items.append(batch)
            self.depth += n
            self.accepted += n
            self._cond.notify()
            return True

    def get(self, timeout: float) -> Optional[Batch]:
        with self._cond:
            if not self._items and not self.closed:
                self._cond.wait(timeout)
            if not self._items:
                return None
            batch = self._items.popleft()
            self.depth -= len(batch.records)
            return batch

    def horizon(self, now: float) -> float:
        """When the oldest queued request arrived (``now`` if none is queued): every span that
        arrived before it has been taken by the engine thread."""
        with self._cond:
            return min(self._items[0].arrived, now) if self._items else now

    def close(self) -> None:
        """No more puts; what is queued is still handed out."""
        with self._cond:
            self.closed = True
            self._cond.notify_all()

    def discard(self) -> int:
        """Drop everything queued (a drain cut short); returns the number of spans dropped."""
        with self._cond:
            n = self.depth
            self._items.clear()
            self.depth = 0
            return n

    def drained(self) -> bool:
        with self._cond:
            return self.closed and not self._items

