"""The background evaluation queue and its worker thread.

Span ends wait in an :class:`EndQueue` in the order the SDK called ``on_end``, bounded in spans and
in bytes; one :class:`threading.Condition` guards it, and the worker sleeps on it while the queue
is empty (no polling). A full queue makes the ending thread wait for room: a span is never dropped.

Some span ends change how later starts are positioned (an episode root's end closes it; a call
whose tool name was only set at its end is positioned then). Each is queued with a *barrier* key:
its trace id, or None when it may touch every trace (conversation episodes). A start in a trace
with a pending barrier runs the queue up to it first (see the processor), so the engine sees the
same order as inline evaluation.
"""
from __future__ import annotations

import collections
import threading
import weakref
from typing import Any, Callable, Dict, Optional, Tuple

NO_BARRIER = object()
# How long the worker lets spans gather after the first one wakes it from idle: waking it per span
# would cost the agent's thread a wake-up (and both threads their caches) for every span.
GATHER_S = 0.005
# A waiting thread re-checks on this period that the worker still lives.
RECHECK_S = 0.25

Item = Tuple[Any, int, Any, Any]  # (span, bytes, barrier key or NO_BARRIER, trace id)


class EndQueue:
    """Span ends for the worker (see the module docstring). ``cond`` guards every field."""

    def __init__(self, max_items: int, max_bytes: int) -> None:
        self.cond = threading.Condition(threading.Lock())
        self.items: collections.deque[Item] = collections.deque()
        self.max_items = max(1, int(max_items))
        self.max_bytes = max(1, int(max_bytes))
        self.bytes = 0
        self.inflight = 0  # taken, not yet handed on
        self.waiting = 0  # threads waiting on `cond` for room or for the queue to empty
        self.idle = False  # the worker sleeps on `cond`
        self.barriers: Dict[Any, int] = {}
        # trace id -> span ends of it queued or being judged, not yet handed on (read without `cond`
        # by the processor: a dict read is atomic, and an end queued after the read is a later one)
        self.traces: Dict[Any, int] = {}

    def __len__(self) -> int:
        return len(self.items)

    def has_barrier(self, key: Any) -> bool:
        b = self.barriers
        return bool(b) and bool(b.get(key) or b.get(None))

    def put(self, item: Item, alive: Callable[[], bool]) -> Optional[bool]:
        """Queue ``item``: True; False when there is no worker (``alive()`` is false); None when the
        queue stayed full for a while (the caller may help, then try again)."""
        cond = self.cond
        with cond:
            if not alive():
                return False
            q = self.items
            if q and (len(q) >= self.max_items or self.bytes + item[1] > self.max_bytes):
                # Full: wait for room. Woken when the worker takes an item; the timeout re-checks
                # that it lives.
                self.waiting += 1
                try:
                    cond.wait(RECHECK_S)
                finally:
                    self.waiting -= 1
                if q and (len(q) >= self.max_items or self.bytes + item[1] > self.max_bytes):
                    return None
                if not alive():
                    return False
            q.append(item)
            self.bytes += item[1]
            tid = item[3]
            self.traces[tid] = self.traces.get(tid, 0) + 1
            key = item[2]
            if key is not NO_BARRIER:
                self.barriers[key] = self.barriers.get(key, 0) + 1
            if self.idle:
                self.idle = False
                cond.notify()
            return True

    def take(self) -> Optional[Item]:
        """The next item, or None (call with ``cond`` held; :meth:`done` once it is handed on)."""
        q = self.items
        if not q:
            if self.waiting:
                self.cond.notify_all()
            return None
        item = q.popleft()
        self.bytes -= item[1]
        key = item[2]
        if key is not NO_BARRIER:
            n = self.barriers.get(key, 0) - 1
            if n > 0:
                self.barriers[key] = n
            else:
                self.barriers.pop(key, None)
        self.inflight += 1
        if self.waiting:
            self.cond.notify_all()
        return item

    def take_now(self) -> Optional[Item]:
        with self.cond:
            return self.take()

    def done(self, item: Item) -> None:
        """``item`` (taken) was evaluated and handed on."""
        with self.cond:
            self.inflight -= 1
            tid = item[3]
            n = self.traces.get(tid, 0) - 1
            if n > 0:
                self.traces[tid] = n
            else:
                self.traces.pop(tid, None)
            if self.waiting and not self.items and not self.inflight:
                self.cond.notify_all()

    def wait_empty(self, timeout_s: float, alive: Callable[[], bool]) -> Optional[bool]:
        """Wait until everything queued was handed on: True; False when ``timeout_s`` passed; None
        when there is no worker to wait for."""
        import time

        deadline = time.monotonic() + timeout_s
        cond = self.cond
        with cond:
            if self.idle and self.items:
                self.idle = False
                cond.notify()
            while self.items or self.inflight:
                if not alive():
                    return None
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.waiting += 1
                try:
                    cond.wait(min(left, RECHECK_S))
                finally:
                    self.waiting -= 1
            return True

    def wake(self) -> None:
        with self.cond:
            self.cond.notify_all()


def start_worker(owner: Any, queue: EndQueue, stop: threading.Event) -> threading.Thread:
    """The worker thread: ``owner._work_once()`` until the queue is empty, then sleep on the queue's
    condition. Holds ``owner`` weakly (a dropped processor ends its worker). Never dies of an
    exception: each is counted with ``owner._sink.internal_error``."""
    ref = weakref.ref(owner)
    cond = queue.cond

    def loop() -> None:
        gather = False
        while True:
            me = ref()
            if me is None or (stop.is_set() and not queue.items):
                return
            try:
                if gather:
                    gather = False
                    del me
                    stop.wait(GATHER_S)
                    continue
                if me._work_once():
                    continue
                del me
                with cond:
                    if queue.items or stop.is_set():
                        continue
                    queue.idle = True
                    cond.wait(1.0)  # notified by the first span end queued while idle
                gather = True
            except BaseException as exc:  # noqa: BLE001 - the worker must not die
                obj = ref()
                if obj is not None:
                    obj._sink.internal_error("worker", exc)
                del obj

    t = threading.Thread(target=loop, name="spanassert-evaluate", daemon=True)
    t.start()
    return t


__all__ = ["EndQueue", "NO_BARRIER", "start_worker"]
