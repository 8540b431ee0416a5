"""The live processor's threads and its end (a mixin of the processor): the engine lock, the end
queue and the worker (:mod:`.worker`), the idle-timeout ticker, ``force_flush`` and ``shutdown``
within their deadlines, and the fresh start of a child process after ``os.fork``."""
from __future__ import annotations

import threading
import time
import weakref
from typing import TYPE_CHECKING, Any, Callable, List, Optional

from ..core.model import CloseReason
from ..core.results import EpisodeResult
from .sink import NOTHING
from .worker import ALL, EndQueue, QueuedEnds, start_worker

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import SpanProcessor


class Runtime(QueuedEnds):
    """Threads, flush, shutdown and fork (see the module docstring)."""

    _export: List[SpanProcessor]
    _stop: threading.Event
    _thread: Optional[threading.Thread]
    _tick_interval: float
    _shutdown_s: float
    _max_queue: int
    _max_bytes: int

    def _new_engine(self) -> None:
        raise NotImplementedError  # the processor's: the engine and what hangs on it

    def _deliver_closed(self, results: List[EpisodeResult]) -> None:
        raise NotImplementedError  # the processor's: closed episodes' events on root spans

    def _new_runtime(self) -> None:
        """The engine lock, the queue and the threads (also after ``os.fork``: the parent's
        threads are not in the child)."""
        self._lock = threading.RLock()  # the engine is not thread-safe
        self._stop = threading.Event()
        self._queue = EndQueue(self._max_queue, self._max_bytes)
        self._worker_gone = False
        self._worker: Optional[threading.Thread] = None
        self._thread: Optional[threading.Thread] = None
        if self._shutdown:
            return
        self._start_ticker()
        if self._background:
            self._worker = start_worker(self, self._queue, self._stop)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Decide every open episode now (liveness rules become inconclusive), then flush the wrapped
        processors within what is left of the deadline."""
        deadline = time.monotonic() + timeout_millis / 1000.0
        ok = self._drain(timeout_millis / 1000.0)
        items: List[Any] = NOTHING
        try:
            if self._lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
                self._sink.deferred = []
                try:
                    self._deliver_closed(self.engine.close_all(CloseReason.FLUSH))
                finally:
                    items = self._sink.take_deferred()
                    self._lock.release()
            else:
                ok = False
        except Exception as exc:  # noqa: BLE001 -- the processor never raises into the application
            self._sink.internal_error("force_flush", exc)
        self._sink.run_deferred(items)
        for p in self._export:
            left = int(max(0.0, deadline - time.monotonic()) * 1000)
            ok = self._flushwithin(p, left) and ok
        return ok

    def _flushwithin(self, processor: SpanProcessor, timeout_millis: int) -> bool:
        """``processor.force_flush`` bounded by our deadline: the SDK's BatchSpanProcessor ignores
        its timeout and exports on the caller's thread, so a hanging exporter would hang the app."""
        done: List[bool] = []

        def run() -> None:
            try:
                answer = processor.force_flush(timeout_millis)
                # None: SDK < 1.45's base SpanProcessor.force_flush returns nothing (nothing to flush).
                done.append(answer is None or bool(answer))
            except Exception as exc:  # noqa: BLE001 -- the processor never raises into the application
                self._sink.internal_error("force_flush", exc)
                done.append(False)

        within(run, timeout_millis / 1000.0, "spanassert-flush")
        return bool(done) and done[0]

    def shutdown(self) -> None:
        """Evaluate what is queued, decide open episodes, shut the wrapped processors down: all
        within ``shutdown_timeout_millis``. Past it, queued spans are handed on unevaluated."""
        if self._shutdown:
            return
        self._shutdown = True
        deadline = time.monotonic() + self._shutdown_s

        def left() -> float:
            return max(0.0, deadline - time.monotonic())

        self._drain(left())
        self._stop.set()
        self._queue.wake()
        try:
            if self._lock.acquire(timeout=left()):
                self._sink.deferred = []
                try:
                    if self._queue.items:  # the worker is stuck (a callback that blocks): evaluate here
                        self._run_queue(ALL)
                    self._deliver_closed(self.engine.close_all(CloseReason.SHUTDOWN))
                finally:
                    items = self._sink.take_deferred()
                    self._lock.release()
                if items:
                    within(lambda: self._sink.run_deferred(items), left(), "spanassert-callbacks")
            else:
                self._sink.internal_error("shutdown", TimeoutError("the engine stayed busy past the shutdown deadline"))
        except Exception as exc:  # noqa: BLE001 -- the processor never raises into the application
            self._sink.internal_error("shutdown", exc)
        # Whatever is still queued goes on unevaluated: a span is never dropped.
        while True:
            item = self._queue.take_now()
            if item is None:
                break
            try:
                self._hand_on(item, None)
            finally:
                self._queue.done(item)
        try:
            self._hand_on_stranded()  # ends an interrupted thread left waiting (none, normally)
        except Exception as exc:  # noqa: BLE001 -- the processor never raises into the application
            self._sink.internal_error("shutdown", exc)
        for p in self._export:
            def stop(p: SpanProcessor = p) -> None:
                try:
                    p.shutdown()
                except Exception as exc:  # noqa: BLE001 -- the processor never raises into the application
                    self._sink.internal_error("shutdown", exc)

            within(stop, left(), "spanassert-shutdown")

    def _start_ticker(self) -> None:
        if self._tick_interval <= 0:
            return
        ref = weakref.ref(self)
        stop = self._stop
        interval = self._tick_interval

        def loop() -> None:
            while not stop.wait(interval):
                me = ref()
                if me is None:
                    return
                items: List[Any] = NOTHING
                try:
                    with me._lock:
                        me._sink.deferred = []
                        try:
                            me._deliver_closed(me.engine.tick(time.time_ns()))
                        finally:
                            items = me._sink.take_deferred()
                    me._sink.run_deferred(items)
                except BaseException as exc:  # noqa: BLE001 - the ticker must not die
                    me._sink.internal_error("tick", exc)
                del me

        self._thread = threading.Thread(target=loop, name="spanassert-idle", daemon=True)
        self._thread.start()

    def _after_fork(self) -> None:
        # The child starts clean, as the SDK's BatchSpanProcessor does: the parent's open episodes,
        # queued spans and threads belong to the parent.
        self._new_engine()
        self._new_runtime()


def within(fn: Callable[[], None], timeout_s: float, name: str) -> bool:
    """Run ``fn`` on a daemon thread and wait for it at most ``timeout_s`` (True if it finished)."""
    t = threading.Thread(target=fn, name=name, daemon=True)
    t.start()
    t.join(timeout_s)
    return not t.is_alive()


__all__ = ["Runtime", "within"]
