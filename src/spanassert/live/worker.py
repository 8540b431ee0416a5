"""The background evaluation queue, its worker thread, and the processor's side of the hand-off.

Span ends wait in an :class:`EndQueue` in the order the SDK called ``on_end``, bounded in spans and
in bytes; one :class:`threading.Condition` guards it, and the worker sleeps on it while the queue
is empty (no polling). A full queue makes the ending thread wait for room: a span is never dropped.

Some span ends change how later starts are positioned (an episode root's end closes it; a call
whose tool name was only set at its end is positioned then). Each is queued with a *barrier* key:
its trace id, or None when it may touch every trace (conversation episodes). A start in a trace
with a pending barrier runs the queue up to it first (see the processor), so the engine sees the
same order as inline evaluation.

:class:`QueuedEnds` (a mixin of the processor) decides which span ends go to the queue and with
which barrier, runs queued ends on the agent's thread when a start needs them or the queue stays
full, is the worker's step, and waits for the queue to empty (flush, shutdown).
"""
from __future__ import annotations

import collections
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ..core.engine import Engine, SpanOutcome
from ..mapping import ROLE_OTHER
from .sink import NOTHING, LiveSink

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

NO_BARRIER = object()
# How long the worker lets spans gather after the first one wakes it from idle: waking it per span
# would cost the agent's thread a wake-up (and both threads their caches) for every span.
GATHER_S = 0.005
# A waiting thread re-checks on this period that the worker still lives.
RECHECK_S = 0.25
# Span ends the worker takes and evaluates under one hold of the engine lock (see _work_once): the
# taking, the lock and the loop cost once per batch, not once per span end.
WORK_BATCH = 16

# (span, bytes, barrier key or NO_BARRIER, trace id, sdk.head(span) as read when it ended: an ended span
# does not change, and the worker then does not read it again)
Item = Tuple[Any, int, Any, Any, Any]
SPAN_OVERHEAD_BYTES = 512  # a queued span's own objects, beyond its string attribute values
# How a span's start was taken into account (background mode), read when it ends.
AT_START_PLACED = 0  # a call, step or folded span, positioned at its start
AT_START_AGENT = 1  # an agent span: its end may close the episode
AT_START_OTHER = 2  # not a GenAI span at its start
AT_START_STEP = 3  # a model step positioned at its start (as AT_START_PLACED; its end may be taken inline)
ALL = object()  # _run_queue: every queued end, whatever its trace


class EndQueue:
    """Span ends for the worker (see the module docstring). ``cond`` guards every field: held as
    ``with lock`` (its lock: ``Condition.__enter__`` is a Python call that only enters it, and every
    queued end takes the lock four or five times), waited on and notified as ``cond``."""

    def __init__(self, max_items: int, max_bytes: int) -> None:
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
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
        # Taken items in the order they were taken, until handed on (see QueuedEnds._hand_on), the
        # outcomes of those evaluated while an earlier one was still being handed on (by id), and
        # whether a thread is handing items on.
        self.order: collections.deque[Item] = collections.deque()
        self.ready: Dict[int, Optional[SpanOutcome]] = {}
        self.handing = False

    def __len__(self) -> int:
        return len(self.items)

    def has_barrier(self, key: Any) -> bool:
        b = self.barriers
        return bool(b) and bool(b.get(key) or b.get(None))

    def put(self, item: Item, alive: Callable[[], bool]) -> Optional[bool]:
        """Queue ``item``: True; False when there is no worker (``alive()`` is false); None when the
        queue stayed full for a while (the caller may help, then try again)."""
        cond = self.cond
        with self.lock:
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
        self.order.append(item)
        if self.waiting:
            self.cond.notify_all()
        return item

    def take_now(self) -> Optional[Item]:
        with self.lock:
            return self.take()

    def take_some(self, n: int) -> List[Item]:
        """Up to ``n`` next items, in order (:meth:`take`, under one hold of ``cond``)."""
        out: List[Item] = []
        with self.lock:
            while len(out) < n:
                item = self.take()
                if item is None:
                    break
                out.append(item)
        return out

    def hold(self, item: Item) -> None:
        """Keep ``item`` counted as taken and its trace as busy until :meth:`done` is called once
        more for it (call with ``cond`` held)."""
        self.inflight += 1
        tid = item[3]
        self.traces[tid] = self.traces.get(tid, 0) + 1

    def done(self, item: Item) -> None:
        """``item`` (taken) was evaluated and handed on."""
        self.done_all((item,))

    def done_all(self, items: Sequence[Item]) -> None:
        """:meth:`done` for each of ``items``, under one hold of the lock."""
        traces = self.traces
        with self.lock:
            self.inflight -= len(items)
            for item in items:
                tid = item[3]
                n = traces.get(tid, 0) - 1
                if n > 0:
                    traces[tid] = n
                else:
                    traces.pop(tid, None)
            if self.waiting and not self.items and not self.inflight:
                self.cond.notify_all()

    def wait_empty(self, timeout_s: float, alive: Callable[[], bool]) -> Optional[bool]:
        """Wait until everything queued was handed on: True; False when ``timeout_s`` passed; None
        when there is no worker to wait for."""
        import time

        deadline = time.monotonic() + timeout_s
        cond = self.cond
        with self.lock:
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
        with self.lock:
            self.cond.notify_all()


def start_worker(owner: Any, queue: EndQueue, stop: threading.Event) -> threading.Thread:
    """The worker thread: ``owner._work_once()`` until the queue is empty, then sleep on the queue's
    condition. Holds ``owner`` weakly (a dropped processor ends its worker). Never dies of an
    exception: each is counted with ``owner._sink.internal_error``."""
    ref = weakref.ref(owner)
    cond, lock = queue.cond, queue.lock

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
                with lock:
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


class QueuedEnds:
    """The processor's side of the hand-off (a mixin of the processor): which span ends go to the
    worker and with which barrier, running queued ends on the agent's thread when a start needs
    them (``_run_queue``) or the queue is full (``_help_once``), the worker's step
    (``_work_once``), and waiting for the queue to empty (``_drain``)."""

    engine: Engine
    _sink: LiveSink
    _lock: Any  # threading.RLock: the engine's lock
    _queue: EndQueue
    _background: bool
    _shutdown: bool
    _worker: Optional[threading.Thread]
    _worker_gone: bool
    _positioned: Dict[int, int]  # span id -> AT_START_* (background mode)
    _marked_role: Callable[[str, Mapping[str, Any]], int]

    def _forward(self, span: ReadableSpan, out: Optional[SpanOutcome]) -> None:
        raise NotImplementedError  # the processor's: hand a span on to the wrapped processors (see _hand_on)

    def _evaluate_end(self, span: ReadableSpan, head: Any = None) -> Optional[SpanOutcome]:
        raise NotImplementedError  # the processor's: give a span end to the engine (head: sdk.head(span))

    def _plain(self, name: str, attributes: Mapping[str, Any]) -> bool:
        raise NotImplementedError  # the processor's: no GenAI span

    def _judging_failed(self, span: ReadableSpan) -> None:
        raise NotImplementedError  # the processor's: the span's episode lost its evidence

    def _enqueue(self, span: ReadableSpan, sid: int, pid: Optional[int], remote: bool, tid: int,
                 attrs: Mapping[str, Any], name: str, helped: List[Any], head: Any = None) -> bool:
        """Queue a span end for the worker; False when there is no worker (evaluate inline). The
        callbacks of queued ends this thread ran while it waited for room go to ``helped``."""
        mark = self._positioned.pop(sid, None)
        barrier: Any = NO_BARRIER
        if (mark == AT_START_AGENT or pid is None or remote
                or (mark != AT_START_PLACED and mark != AT_START_STEP
                    and self._marked_role(name, attrs) != ROLE_OTHER)):
            # This end may close an episode or position a call: later starts of its trace (of any
            # trace, for conversation episodes) must not overtake it.
            barrier = tid if self.engine.by_trace_key else None
        size = SPAN_OVERHEAD_BYTES
        for v in attrs.values():
            if type(v) is str:
                size += len(v)
        item = (span, size, barrier, tid, head)
        while True:
            queued = self._queue.put(item, self._worker_alive)
            if queued is not None:
                return queued
            helped.extend(self._help_once())  # full for a while: run one item here if the engine is free

    def _worker_alive(self) -> bool:
        w = self._worker
        if w is not None and w.is_alive():
            return True
        if not self._worker_gone and not self._shutdown:
            self._worker_gone = True
            self._sink.internal_error("worker_gone", RuntimeError(
                "the evaluation worker thread is gone; span ends are evaluated on the agent's thread"))
        return False

    def _run_item(self, span: ReadableSpan, head: Any = None) -> Optional[SpanOutcome]:
        try:
            return self._evaluate_end(span, head)
        except BaseException as exc:  # noqa: BLE001 - one bad item must not stop the others
            self._sink.internal_error("on_end", exc)
            self._judging_failed(span)
            return None

    def _run_queue(self, tid: Any) -> None:
        """Under the engine lock: run queued span ends in order until none that could change how a
        start of trace ``tid`` (``ALL``: any) is positioned is left. Their callbacks stay in the
        sink's deferred list for the caller."""
        queue = self._queue
        budget = len(queue)
        while budget > 0:
            budget -= 1
            with queue.lock:
                if tid is not ALL and not queue.has_barrier(tid):
                    return
                item = queue.take()
            if item is None:
                return
            try:
                self._hand_on(item, self._run_item(item[0], item[4]))
            finally:
                queue.done(item)

    def _help_once(self) -> List[Any]:
        """Run one queued span end on this thread if the engine is free (a full queue whose worker
        is slow, or a caller that holds the engine lock itself)."""
        if not self._lock.acquire(blocking=False):
            return NOTHING
        self._sink.deferred = []
        try:
            item = self._queue.take_now()
            if item is not None:
                try:
                    self._hand_on(item, self._run_item(item[0], item[4]))
                finally:
                    self._queue.done(item)
        finally:
            items = self._sink.take_deferred()
            self._lock.release()
        return items

    def _work_once(self) -> bool:
        """Worker: evaluate the next queued span ends, up to ``WORK_BATCH`` (False when the queue is
        empty). Under the engine lock from taking to evaluating, so that a start on an agent thread
        sees every earlier end run or none; after the lock is released, the spans are handed on in
        the order taken (every end taken, evaluated or not), then their callbacks run, in the same
        order, and only then are they done (a flush waits for the callbacks too)."""
        queue = self._queue
        sink = self._sink
        taken: List[Item] = []
        outs: List[Optional[SpanOutcome]] = []
        calls: List[List[Any]] = []
        try:
            with self._lock:
                taken = queue.take_some(WORK_BATCH)
                for item in taken:
                    sink.deferred = []
                    try:
                        outs.append(self._run_item(item[0], item[4]))
                    finally:
                        calls.append(sink.take_deferred())
        finally:
            try:
                if taken:
                    self._hand_on_batch(taken, outs)
                # The callbacks after every end of the batch is handed on: one that blocks (a webhook
                # without a timeout) holds no taken end back from the export.
                for deferred in calls:
                    if deferred:
                        try:
                            sink.run_deferred(deferred)
                        except BaseException as exc:  # noqa: BLE001 -- the processor never raises into the application
                            sink.internal_error("worker", exc)
            finally:
                if taken:  # done after the callbacks: a flush returns once they ran
                    queue.done_all(taken)
        return bool(taken)

    def _hand_on_batch(self, taken: List[Item], outs: List[Optional[SpanOutcome]]) -> None:
        """The worker's :meth:`_hand_on` for the ends it took under one hold of the queue's lock
        (``taken``, contiguous in ``order``; ``outs`` their outcomes, fewer when evaluating stopped
        early: None for the rest). When no thread is handing ends on and the first of them is next,
        they are taken out of the order and handed on under one hold of the lock instead of two per
        end; else each goes the general way. Whatever a hand-on raises is counted, and the ends
        after it are still handed on."""
        queue = self._queue
        sink = self._sink
        n = len(taken)
        with queue.lock:
            order = queue.order
            mine = not queue.handing and bool(order) and order[0] is taken[0]
            if mine:
                for _ in range(n):
                    order.popleft()
                queue.handing = True
        if not mine:
            for i, item in enumerate(taken):
                try:
                    self._hand_on(item, outs[i] if i < len(outs) else None)
                except BaseException as exc:  # noqa: BLE001, PERF203 -- the processor never raises into the application
                    sink.internal_error("worker", exc)
            return
        for i, item in enumerate(taken):
            try:
                self._forward(item[0], outs[i] if i < len(outs) else None)
            except BaseException as exc:  # noqa: BLE001, PERF203 -- the processor never raises into the application
                sink.internal_error("worker", exc)
        # Ends other threads took and evaluated meanwhile, parked behind these: handed on next.
        with queue.lock:
            nxt = queue.order
            if not nxt or id(nxt[0]) not in queue.ready:
                queue.handing = False
                return
            item = nxt.popleft()
            out = queue.ready.pop(id(item))
        try:
            self._hand_on_from(item, out, True)
        except BaseException as exc:  # noqa: BLE001 -- the processor never raises into the application
            sink.internal_error("worker", exc)

    def _hand_on(self, item: Item, out: Optional[SpanOutcome]) -> None:
        """Hand a taken, evaluated span end on to the wrapped processors in the order the queue gave
        the ends out, which is the order they ended. The worker hands its end on after releasing the
        engine lock, so an agent's thread may meanwhile take and evaluate later ends (a start that
        needs them): exported first, a span would reach replay and serve after its trace's root,
        and serve would judge the trace without it. An end taken while an earlier one is not yet
        handed on is left (held) for the thread handing that one on, which hands it on next: no
        thread waits for another."""
        queue = self._queue
        with queue.lock:
            if queue.handing or queue.order[0] is not item:
                queue.ready[id(item)] = out
                queue.hold(item)  # released by the thread that hands it on
                first = self._stranded()
                if first is None:
                    return
                item, out = first
                held = True
            else:
                queue.order.popleft()
                held = False
            queue.handing = True
        self._hand_on_from(item, out, held)

    def _stranded(self) -> Optional[Tuple[Item, Optional[SpanOutcome]]]:
        """With ``cond`` held: the first end taken, when it is evaluated and waits to be handed on
        while no thread is handing ends on (taken out of the order; the caller hands it on), else
        None. That happens only after a thread handing ends on was interrupted by an exception no
        exporter catches (a BaseException such as KeyboardInterrupt): the ends it left must not
        wait forever (a span is never dropped, and flush would wait for them)."""
        queue = self._queue
        if queue.handing or not queue.order or id(queue.order[0]) not in queue.ready:
            return None
        item = queue.order.popleft()
        return item, queue.ready.pop(id(item))

    def _hand_on_stranded(self) -> None:
        """Hand on the ends an interrupted thread left waiting (:meth:`_stranded`), if any."""
        queue = self._queue
        with queue.lock:
            first = self._stranded()
            if first is None:
                return
            queue.handing = True
        self._hand_on_from(first[0], first[1], True)

    def _hand_on_from(self, item: Item, out: Optional[SpanOutcome], held: bool) -> None:
        """As the thread handing ends on (``queue.handing`` set by the caller): hand ``item`` on,
        then every end after it that is already evaluated, in order. ``held``: ``item`` was parked
        (:meth:`EndQueue.hold`), so its hold is released here."""
        queue = self._queue
        try:
            while True:
                try:
                    self._forward(item[0], out)
                finally:
                    if held:
                        queue.done(item)
                with queue.lock:
                    order = queue.order
                    if not order or id(order[0]) not in queue.ready:
                        queue.handing = False
                        return
                    item = order.popleft()
                    out = queue.ready.pop(id(item))
                    held = True
        except BaseException:
            with queue.lock:
                queue.handing = False  # the ends left are handed on by the next thread (_stranded)
            raise

    def _drain(self, timeout_s: float) -> bool:
        """Wait until everything queued so far was evaluated and handed on (True), or the time is up.
        Without a worker, the calling thread does the work."""
        if not self._background:
            return True
        self._hand_on_stranded()
        deadline = time.monotonic() + timeout_s
        done = self._queue.wait_empty(timeout_s, self._worker_alive)
        if done is not None:
            return done
        if not self._lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            return False
        self._sink.deferred = []
        try:
            self._run_queue(ALL)
        finally:
            items = self._sink.take_deferred()
            self._lock.release()
        self._sink.run_deferred(items)
        return not self._queue.items

    def _end_inline(self, sid: int, pid: Optional[int], remote: bool, tid: int, name: str,
                    attrs: Mapping[str, Any]) -> bool:
        """Background mode: whether to take this span end in on the agent's thread. True (with the
        engine lock held, for the caller to release) for a span whose parent is in this process (so
        its end closes no episode), of a trace-keyed episode with no end of its trace in the queue,
        while the engine is free, that is either

        - no GenAI span at its start and none now: its end costs the engine a few dictionary
          updates (its parent link, the episode's activity and span time); or
        - a model step positioned at its start: its end gives its usage to the
          rules that read it and its time to the time rules, a few microseconds, about what queueing
          it costs the agent's thread, and the worker's taking and handing it on cost as much again
          (no rule decides anything at a step's end that a later start must wait for: its end is
          no barrier either way).

        Either is taken in its trace's order (no end of the trace is overtaken; ends of other
        traces touch other episodes). A tool call's end stays with the worker: its result rules
        are the agent's latency the background mode saves."""
        if self._queue.traces.get(tid) or not self.engine.by_trace_key:
            return False
        if pid is None or remote:
            return False
        mark = self._positioned.get(sid)
        if mark == AT_START_OTHER:
            if not self._plain(name, attrs):
                return False
        elif mark != AT_START_STEP:
            return False
        if not self._lock.acquire(blocking=False):
            return False  # the worker is judging an end: queue this one behind it
        if self._queue.traces.get(tid):  # queued meanwhile by another thread: keep the order
            self._lock.release()
            return False
        self._positioned.pop(sid, None)
        return True

    def _evaluate_unqueued(self, span: ReadableSpan, head: Any = None) -> Tuple[Optional[SpanOutcome], List[Any]]:
        """Evaluate a span end under the engine lock (held by the caller), leaving the queue alone."""
        self._sink.deferred = []
        try:
            out = self._evaluate_end(span, head)
        finally:
            items = self._sink.take_deferred()
        return out, items

    def _evaluate_end_locked(self, span: ReadableSpan, head: Any = None) -> Tuple[Optional[SpanOutcome], List[Any]]:
        """Evaluate a span end inline: under the engine lock, after anything still queued."""
        with self._lock:
            self._sink.deferred = []
            if self._queue.items:
                self._run_queue(ALL)
            try:
                out = self._evaluate_end(span, head)
            finally:
                items = self._sink.take_deferred()
        return out, items


__all__ = ["ALL", "AT_START_AGENT", "AT_START_OTHER", "AT_START_PLACED", "AT_START_STEP", "NO_BARRIER", "EndQueue",
           "QueuedEnds", "start_worker"]
