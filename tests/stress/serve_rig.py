"""`spanassert serve` as a subprocess for the load and fault cases, and OTLP request builders."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from .rig import RULES

SPANASSERT = [sys.executable, "-c", "import sys; from spanassert.cli import main; sys.exit(main())"]
# With a test hook in the environment, serve starts through the harness that installs it.
HARNESS = [sys.executable, str(Path(__file__).resolve().parent.parent / "serve_harness.py")]
HOOKS = ("SPANASSERT_TEST_PAUSE_FILE", "SPANASSERT_TEST_FAULT_TYPE", "SPANASSERT_TEST_NOFILE")
TRACES = "/v1/traces"
_EPOCH = 1_700_000_000_000_000_000


class Serve:
    def __init__(self, tmp: Path, *extra: str, env: Optional[Dict[str, str]] = None, report: bool = True) -> None:
        tmp.mkdir(parents=True, exist_ok=True)
        (tmp / "rules.yaml").write_text(RULES)
        self.report_path = tmp / "report.json"
        self.stderr_path = tmp / "serve.stderr"
        full_env = dict(os.environ)
        full_env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
        full_env.update(env or {})
        self._stderr = open(self.stderr_path, "wb")
        command = HARNESS if any(k in (env or {}) for k in HOOKS) else SPANASSERT
        self.proc = subprocess.Popen(
            command + ["serve", "--config", str(tmp / "rules.yaml"), "--grpc-endpoint", "127.0.0.1:0",
                          "--http-endpoint", "127.0.0.1:0", *(["--report-json", str(self.report_path)] if report else []), "--quiet",
                          *extra],
            stdout=subprocess.PIPE, stderr=self._stderr, env=full_env, cwd=str(tmp))
        self.grpc = self.http = ""
        self.stdout_tail = ""
        deadline = time.monotonic() + 60
        while not (self.grpc and self.http):
            assert time.monotonic() < deadline, "serve did not print its addresses"
            line = self.proc.stdout.readline().decode()  # type: ignore[union-attr]
            assert line, f"serve exited early: {self.stderr()}"
            if "OTLP/gRPC listening on " in line:
                self.grpc = line.rsplit(" ", 1)[1].strip()
            elif "OTLP/HTTP listening on " in line:
                self.http = line.rsplit(" ", 1)[1].strip()

    @property
    def url(self) -> str:
        return f"http://{self.http}{TRACES}"

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def health(self) -> Dict[str, Any]:
        with urllib.request.urlopen(f"http://{self.http}/health", timeout=10) as resp:
            return json.loads(resp.read())

    def stop(self, timeout: float = 60.0) -> Tuple[int, float, str]:
        """SIGTERM; returns (exit code, seconds to exit, raw --report-json text)."""
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=timeout)
        self.stdout_tail = out.decode(errors="replace")
        took = time.monotonic() - t0
        self._stderr.close()
        text = self.report_path.read_text() if self.report_path.exists() else ""
        return self.proc.returncode, took, text

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        if not self._stderr.closed:
            self._stderr.close()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def post(url: str, body: bytes, content_type: str = "application/json", timeout: float = 20) -> Tuple[int, Dict[str, str], bytes]:
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def episode_request(n: int, tools: List[str]) -> Dict[str, Any]:
    """One whole episode (agent root + tool spans) as an OTLP JSON request; trace id = n + 1."""
    trace = f"{n + 1:032x}"
    root = f"{(n + 1) * 100:016x}"
    spans = []
    t = 10
    for i, tool in enumerate(tools):
        spans.append({
            "traceId": trace, "spanId": f"{(n + 1) * 100 + i + 1:016x}", "parentSpanId": root,
            "name": f"execute_tool {tool}", "kind": 1,
            "startTimeUnixNano": str(_EPOCH + t), "endTimeUnixNano": str(_EPOCH + t + 5),
            "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                           {"key": "gen_ai.tool.name", "value": {"stringValue": tool}}]})
        t += 10
    spans.append({"traceId": trace, "spanId": root, "name": "invoke_agent support", "kind": 1,
                  "startTimeUnixNano": str(_EPOCH), "endTimeUnixNano": str(_EPOCH + t + 5),
                  "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}}]})
    return {"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]},
                               "scopeSpans": [{"scope": {"name": "stress"}, "spans": spans}]}]}


def episode_body(n: int, tools: List[str]) -> bytes:
    return json.dumps(episode_request(n, tools)).encode()
