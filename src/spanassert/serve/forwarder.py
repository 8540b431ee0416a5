"""Forwarding accepted spans (with violation events) to another OTLP/HTTP receiver."""
from __future__ import annotations

import logging
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from typing import Any, Deque, Optional, Tuple

from .protocol import CT_PROTOBUF, DEFAULT_FORWARD_QUEUE_SPANS, TRACES_PATH

log = logging.getLogger("spanassert.serve")


class Forwarder:
    """Posts protobuf ``ExportTraceServiceRequest``s to ``<url>/v1/traces`` on its own thread, with
    retries on the statuses the OTLP spec calls retryable; its queue is bounded in spans and what
    does not fit (or cannot be delivered) is counted as dropped."""

    RETRYABLE = (429, 502, 503, 504)

    def __init__(self, base_url: str, *, max_spans: int = DEFAULT_FORWARD_QUEUE_SPANS, attempts: int = 5,
                 timeout: float = 10.0) -> None:
        base = base_url.rstrip("/")
        self.url = base if base.endswith(TRACES_PATH) else base + TRACES_PATH
        self.max_spans = max(1, max_spans)
        self.attempts = attempts
        self.timeout = timeout
        self._items: Deque[Tuple[Any, int]] = deque()
        self._cond = threading.Condition()
        self._pending = 0  # spans queued or being sent
        self._stop = threading.Event()
        self.sent = 0
        self.dropped = 0
        self._warned = False
        self._thread = threading.Thread(target=self._run, name="spanassert-forward", daemon=True)
        self._thread.start()

    def submit(self, request: Any, spans: int) -> bool:
        with self._cond:
            if self._stop.is_set() or self._pending + spans > self.max_spans:
                self.dropped += spans
                self._warn(f"forwarding queue full ({self.max_spans} spans): {spans} span(s) dropped")
                return False
            self._items.append((request, spans))
            self._pending += spans
            self._cond.notify()
            return True

    def flush(self, timeout: float, cancel: Optional[threading.Event] = None) -> bool:
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._pending:
                left = deadline - time.monotonic()
                if left <= 0 or (cancel is not None and cancel.is_set()):
                    return False
                self._cond.wait(min(left, 0.1))
        return True

    def stop(self) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        self._thread.join(timeout=5)
        with self._cond:
            for _, n in self._items:
                self.dropped += n
            self._items.clear()

    def _warn(self, text: str) -> None:
        if not self._warned:
            self._warned = True
            log.warning("spanassert serve: %s (further forwarding problems are only counted)", text)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._items and not self._stop.is_set():
                    self._cond.wait(0.5)
                if self._stop.is_set():
                    return
                request, n = self._items.popleft()
            ok = False
            try:
                ok = self._post(request.SerializeToString())
            except Exception as exc:  # noqa: BLE001 - the forwarding thread must survive anything
                self._warn(f"forwarding to {self.url} failed: {exc!r}")
            with self._cond:
                if ok:
                    self.sent += n
                else:
                    self.dropped += n
                self._pending -= n
                self._cond.notify_all()

    def _post(self, body: bytes) -> bool:
        delay = 0.5
        for attempt in range(self.attempts):
            req = urllib.request.Request(self.url, data=body, method="POST",
                                         headers={"Content-Type": CT_PROTOBUF})
            retry_after: Optional[float] = None
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    resp.read()
                    return True
            except urllib.error.HTTPError as exc:
                if exc.code not in self.RETRYABLE:
                    self._warn(f"{self.url} answered HTTP {exc.code}; spans not forwarded")
                    return False
                ra = exc.headers.get("Retry-After") if exc.headers else None
                if ra and ra.strip().isdigit():
                    retry_after = min(float(ra), 30.0)
            except (urllib.error.URLError, OSError) as exc:
                self._warn(f"cannot reach {self.url}: {exc}")
            if attempt + 1 < self.attempts and self._stop.wait(retry_after if retry_after is not None else delay):
                return False
            delay = min(delay * 2, 8.0)
        return False

