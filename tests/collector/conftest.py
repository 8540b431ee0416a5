"""Fixtures that run the reference OpenTelemetry Collector (built by ``build.py``).

- ``collector_binary`` (session): path of the built-or-cached binary. Without Go, or when the
  build fails, tests skip — except under ``CI=true``, where a skip would hide a broken pipeline,
  so they fail.
- ``run_collector``: start a Collector on loopback ports; stopped (SIGTERM, then SIGKILL) at
  teardown.
- ``collector_file_export``: ``fn(spans_fn) -> Path`` sends the spans ``spans_fn`` creates through
  a real Collector running ``collector-config/file-export.yaml`` and returns the JSON Lines file
  the Collector wrote — input for replay round-trip tests.

Test modules outside this directory import the fixtures: ``from collector.conftest import ...``.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import signal
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import pytest

from collector.build import CollectorBuildError, GoNotFoundError, ensure_collector

REPO = Path(__file__).resolve().parents[2]
CONFIG_DIR = REPO / "collector-config"
FILE_EXPORT_CONFIG = CONFIG_DIR / "file-export.yaml"

# The Collector's own metrics endpoint defaults to localhost:8888; turn it off so parallel
# Collectors never fight over that port.
NO_SELF_TELEMETRY = "service::telemetry::metrics::level=none"

STARTUP_TIMEOUT = 30.0
SHUTDOWN_TIMEOUT = 20.0


def under_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def skip_or_fail(reason: str) -> None:
    """Skip locally; under CI a skipped Collector test means the Collector path went untested."""
    if under_ci():
        pytest.fail(f"{reason}\n(CI=true: Collector tests may not be skipped)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def collector_binary() -> Path:
    try:
        return ensure_collector()
    except GoNotFoundError as exc:
        skip_or_fail(f"Go toolchain not found: {exc}")
    except CollectorBuildError as exc:
        skip_or_fail(f"building the OpenTelemetry Collector failed: {exc}\n--- build output (tail) ---\n{exc.tail()}")
    raise AssertionError("unreachable")  # skip/fail raise


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


class RunningCollector:
    """One Collector process; ``log()`` returns what it printed (for failure messages)."""

    def __init__(self, proc: "subprocess.Popen[bytes]", log_path: Path) -> None:
        self.proc = proc
        self.log_path = log_path

    def log(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def wait_ready(self, ports: Sequence[int], timeout: float = STARTUP_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        pending = list(ports)
        while pending:
            if self.proc.poll() is not None:
                raise AssertionError(f"Collector exited with status {self.proc.returncode} at startup:\n{self.log()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"Collector not listening on {pending} after {timeout:.0f}s:\n{self.log()}")
            pending = [p for p in pending if not _port_open(p)]
            if pending:
                time.sleep(0.05)

    def stop(self, timeout: float = SHUTDOWN_TIMEOUT) -> int:
        """Graceful shutdown (flushes processors and exporters); SIGKILL if it hangs."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
                raise AssertionError(f"Collector ignored SIGTERM for {timeout:.0f}s:\n{self.log()}") from None
        return int(self.proc.returncode)


StartCollector = Callable[..., RunningCollector]


@pytest.fixture
def run_collector(collector_binary: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartCollector]:
    """``start(config, env=..., wait_ports=..., sets=...)`` -> a started :class:`RunningCollector`."""
    started: List[RunningCollector] = []

    def start(
        config: Path,
        *,
        env: Optional[Dict[str, str]] = None,
        wait_ports: Sequence[int] = (),
        sets: Sequence[str] = (),
    ) -> RunningCollector:
        log_path = tmp_path_factory.mktemp("collector-log") / "collector.log"
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("SPANASSERT_")}
        full_env.update(env or {})
        args = [str(collector_binary), "--config", str(config), "--set", NO_SELF_TELEMETRY]
        for s in sets:
            args += ["--set", s]
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(args, env=full_env, stdout=log, stderr=subprocess.STDOUT, cwd=log_path.parent)
        running = RunningCollector(proc, log_path)
        started.append(running)
        running.wait_ready(wait_ports)
        return running

    yield start
    for running in reversed(started):
        with contextlib.suppress(AssertionError):
            running.stop()


class OTLPHTTPSink:
    """A loopback stand-in for a tracing backend: records every OTLP/HTTP request it gets."""

    def __init__(self) -> None:
        self.requests: List[Tuple[str, str, bytes]] = []  # (path, content type, body)
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server API)
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":  # the exporter's default
                    body = gzip.decompress(body)
                sink.requests.append((self.path, self.headers.get("Content-Type", ""), body))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def otlp_http_sink() -> Iterator[OTLPHTTPSink]:
    sink = OTLPHTTPSink()
    yield sink
    sink.close()


class FileExportCollector:
    """A running ``file-export.yaml`` Collector: where to send spans, where it writes them."""

    def __init__(self, collector: RunningCollector, path: Path, grpc_port: int, http_port: int) -> None:
        self.collector = collector
        self.path = path
        self.grpc_endpoint = f"127.0.0.1:{grpc_port}"
        self.http_endpoint = f"http://127.0.0.1:{http_port}"


@pytest.fixture
def start_file_export_collector(
    run_collector: StartCollector, otlp_http_sink: OTLPHTTPSink, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[], FileExportCollector]:
    """Start the shipped ``file-export.yaml`` on free loopback ports, forwarding to ``otlp_http_sink``."""

    def start() -> FileExportCollector:
        out = tmp_path_factory.mktemp("collector-export") / "traces.jsonl"
        grpc_port, http_port = free_port(), free_port()
        env = {
            "SPANASSERT_OTLP_GRPC_ENDPOINT": f"127.0.0.1:{grpc_port}",
            "SPANASSERT_OTLP_HTTP_ENDPOINT": f"127.0.0.1:{http_port}",
            "SPANASSERT_EXPORT_PATH": str(out),
            "SPANASSERT_FORWARD_ENDPOINT": otlp_http_sink.endpoint,
        }
        running = run_collector(FILE_EXPORT_CONFIG, env=env, wait_ports=(grpc_port, http_port))
        return FileExportCollector(running, out, grpc_port, http_port)

    return start


SpansFn = Callable[["TracerProvider"], None]  # noqa: F821 (imported lazily below)


def export_through(collector: FileExportCollector, spans_fn: SpansFn, protocol: str = "grpc") -> None:
    """Run ``spans_fn`` against an SDK TracerProvider that exports to ``collector``, then flush."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        exporter = GrpcExporter(endpoint=collector.grpc_endpoint, insecure=True, timeout=10)
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

        exporter = HttpExporter(endpoint=f"{collector.http_endpoint}/v1/traces", timeout=10)
    provider = TracerProvider(resource=Resource.create({"service.name": "spanassert-collector-test"}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    try:
        spans_fn(provider)
        assert provider.force_flush(timeout_millis=15000), "the SDK could not export to the Collector"
    finally:
        provider.shutdown()


@pytest.fixture
def collector_file_export(start_file_export_collector: Callable[[], FileExportCollector]) -> Callable[..., Path]:
    """``collector_file_export(spans_fn, protocol="grpc") -> Path`` of the Collector-written JSONL.

    ``spans_fn(provider)`` creates spans with ``provider.get_tracer(...)``. The Collector is shut
    down before the path is returned, so the file is complete.
    """

    def generate(spans_fn: SpansFn, protocol: str = "grpc") -> Path:
        collector = start_file_export_collector()
        export_through(collector, spans_fn, protocol)
        status = collector.collector.stop()
        assert status == 0, f"Collector exited with {status}:\n{collector.collector.log()}"
        assert collector.path.exists(), f"the Collector wrote no {collector.path}:\n{collector.collector.log()}"
        return collector.path

    return generate
