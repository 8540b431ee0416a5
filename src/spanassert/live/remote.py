"""Which traces have a span in this process whose parent is in another process.

Such a span (an MCP server's ``tools/call`` under the client's trace, a sub-agent service's agent
span, an HTTP server span whose parent came in a ``traceparent`` header) means the trace's root is
not here. Replay and serve of this process's exported spans then say "root not seen" (no span of
the trace lacks a parent), so the live processor must too (DESIGN "Evidence that is incomplete"):
an episode that opens in such a trace is incomplete, and it closes when the last of these spans
ends (as replay closes it after the trace's last span), not when its agent span ends.

The remote parent is often on a plain span (the HTTP server span) that the processor's fast path
never gives the engine, so every span start reads its parent and a span with a remote parent is
remembered here, by trace, while it is open: one dictionary entry per such trace, bounded. Past the
bound a span is not remembered but counted (``lost``), and while any such span is open every
episode that opens is marked incomplete: never a silent pass.
"""
from __future__ import annotations

import threading
from typing import Dict, List

# Traces remembered at once: traces with an open span whose parent is remote (requests in flight),
# plus the traces of open or recently closed episodes that had one.
MAX_REMOTE_TRACES = 1 << 16
OVERFLOW_REMOTE_PARENTS = "remote_parent_not_remembered"


class RemoteParents:
    """Per trace (an int id): [spans with a remote parent still open, all such spans so far]."""

    __slots__ = ("traces", "lost", "limit", "_lock")

    def __init__(self, limit: int = MAX_REMOTE_TRACES) -> None:
        self.traces: Dict[int, List[int]] = {}
        # Spans with a remote parent that started past the bound and have not ended: while there is
        # one, the root of any trace may be elsewhere.
        self.lost = 0
        self.limit = max(1, limit)
        self._lock = threading.Lock()  # counts change on the agent's threads and on the worker

    def started(self, trace_id: int) -> int:
        """A span of ``trace_id`` with a remote parent started: how many the trace has had so far
        (0: not remembered, the bound is reached; the caller counts the overflow)."""
        with self._lock:
            e = self.traces.get(trace_id)
            if e is None:
                if len(self.traces) >= self.limit:
                    self.lost += 1
                    return 0
                e = self.traces[trace_id] = [0, 0]
            e[0] += 1
            e[1] += 1
            return e[1]

    def ended(self, trace_id: int, tracked: bool) -> bool:
        """A span of ``trace_id`` with a remote parent ended: True when none of the trace's is open
        any more (then a held episode of the trace closes). A trace the engine does not follow is
        forgotten then; a followed one when the engine lets it go (:meth:`released`), since its
        count still names the episode's incompleteness."""
        with self._lock:
            e = self.traces.get(trace_id)
            if e is None:
                if self.lost:
                    self.lost -= 1
                return False
            e[0] -= 1
            if e[0] > 0:
                return False
            if not tracked:
                del self.traces[trace_id]
            return True

    def guarded(self, trace_id: int) -> None:
        """A guard decided a call under a remote parent (before any span of it started here): the
        episode it opens has its root elsewhere."""
        with self._lock:
            if trace_id not in self.traces and len(self.traces) < self.limit:
                self.traces[trace_id] = [0, 0]

    def released(self, trace_id: int) -> None:
        """The engine no longer follows the trace: forget it unless a span of it is still open."""
        with self._lock:
            e = self.traces.get(trace_id)
            if e is not None and e[0] <= 0:
                del self.traces[trace_id]

    def root_elsewhere(self, trace_id: int) -> bool:
        return trace_id in self.traces or self.lost > 0

    def __len__(self) -> int:
        return len(self.traces)


__all__ = ["MAX_REMOTE_TRACES", "OVERFLOW_REMOTE_PARENTS", "RemoteParents"]
