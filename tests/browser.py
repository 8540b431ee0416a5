"""A real headless Chromium driven over its DevTools protocol on a pipe (``--remote-debugging-pipe``:
NUL-separated JSON on file descriptors 3 and 4), so no driver, websocket library or download is
needed: only Debian's ``chromium`` package (.ci/run installs it).

Collects console errors, uncaught exceptions, log errors (CSP violations among them) and every
network request the page makes, so a test can fail on any of them.
"""
from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

COMMAND_TIMEOUT = 60.0


def find_chromium() -> Optional[str]:
    return (os.environ.get("SPANASSERT_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
            or shutil.which("google-chrome"))


class Browser:
    def __init__(self, binary: str, width: int = 1280, height: int = 900) -> None:
        self._profile = tempfile.mkdtemp(prefix="spanassert-chromium-")
        self._log_path = Path(tempfile.mkdtemp(prefix="spanassert-chromium-log-")) / "chromium.log"
        self._log = open(self._log_path, "wb")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def wire() -> None:  # in the child: its fd 3 reads our commands, fd 4 writes its answers
            a = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10)  # out of the way first: the pipes may be 3 or 4
            b = fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
             "--disable-extensions", "--disable-background-networking", "--disable-sync", "--mute-audio",
             "--disable-component-update", "--hide-scrollbars", f"--window-size={width},{height}",
             f"--user-data-dir={self._profile}", "--remote-debugging-pipe", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._log,
            preexec_fn=wire, pass_fds=(3, 4), close_fds=True)
        os.close(to_child_r)
        os.close(from_child_w)
        self._next_id = 0
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._answers: Dict[int, Dict[str, Any]] = {}
        self.events: List[Dict[str, Any]] = []
        self._closed = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.session: Optional[str] = None

    # -- protocol ---------------------------------------------------------------------------------
    def _read(self) -> None:
        buf = b""
        while True:
            try:
                chunk = os.read(self._from_child, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                with self._cond:
                    self._closed = True
                    self._cond.notify_all()
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                with self._cond:
                    if "id" in msg:
                        self._answers[msg["id"]] = msg
                    else:
                        self.events.append(msg)
                    self._cond.notify_all()

    def send(self, method: str, params: Optional[Dict[str, Any]] = None, *, session: bool = True,
             timeout: float = COMMAND_TIMEOUT) -> Dict[str, Any]:
        with self._lock:
            self._next_id += 1
            mid = self._next_id
        msg: Dict[str, Any] = {"id": mid, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self._to_child, json.dumps(msg).encode("utf-8") + b"\0")
        deadline = time.monotonic() + timeout
        with self._cond:
            while mid not in self._answers:
                left = deadline - time.monotonic()
                if self._closed or left <= 0:
                    raise AssertionError(f"Chromium did not answer {method} within {timeout:.0f}s "
                                         f"(closed={self._closed}); stderr: {self.stderr()}")
                self._cond.wait(min(left, 0.5))
            answer = self._answers.pop(mid)
        if "error" in answer:
            raise AssertionError(f"{method}: {answer['error']}")
        return dict(answer.get("result", {}))

    def wait_event(self, method: str, timeout: float = COMMAND_TIMEOUT) -> Dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for e in self.events:
                    if e.get("method") == method:
                        return e
                left = deadline - time.monotonic()
                if self._closed or left <= 0:
                    raise AssertionError(f"no {method} within {timeout:.0f}s")
                self._cond.wait(min(left, 0.5))

    def stderr(self) -> str:
        try:
            return self._log_path.read_text(encoding="utf-8", errors="replace")[-3000:]
        except OSError:
            return ""

    # -- page -------------------------------------------------------------------------------------
    def open_page(self) -> None:
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True},
                                 session=False)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")

    def navigate(self, url: str, timeout: float = COMMAND_TIMEOUT) -> None:
        with self._lock:
            self.events.clear()
        self.send("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired", timeout)

    def evaluate(self, expression: str, timeout: float = COMMAND_TIMEOUT) -> Any:
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True}, timeout=timeout)
        if "exceptionDetails" in result:
            raise AssertionError(f"page threw: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = COMMAND_TIMEOUT) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"{expression} stayed falsy for {timeout:.0f}s")
            time.sleep(0.05)

    def screenshot(self, path: Path, full_page: bool = False) -> None:
        params: Dict[str, Any] = {"format": "png"}
        if full_page:
            params["captureBeyondViewport"] = True
        data = self.send("Page.captureScreenshot", params)["data"]
        path.write_bytes(base64.b64decode(data))

    def problems(self) -> List[str]:
        """Console errors, uncaught exceptions and error log entries (CSP violations included)."""
        out = []
        for e in list(self.events):
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console.error: " + " ".join(str(a.get("value", a.get("description"))) for a in p.get("args", [])))
            elif m == "Runtime.exceptionThrown":
                out.append("exception: " + json.dumps(p.get("exceptionDetails"))[:2000])
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append("log error: " + p["entry"].get("text", ""))
        return out

    def requests(self) -> List[str]:
        return [e["params"]["request"]["url"] for e in list(self.events)
                if e.get("method") == "Network.requestWillBeSent"]

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                try:
                    self.send("Browser.close", session=False, timeout=10)
                except AssertionError:
                    pass
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=10)
        finally:
            for fd in (self._to_child, self._from_child):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self._log.close()
            shutil.rmtree(self._profile, ignore_errors=True)
            shutil.rmtree(self._log_path.parent, ignore_errors=True)
