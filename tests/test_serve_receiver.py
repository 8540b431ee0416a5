"""`spanassert serve` as a subprocess: real SDK exporters in, verdicts equal to replay, forwarding, OTLP answers."""
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

ROOT = Path(__file__).resolve().parent.parent
SPANASSERT = [sys.executable, "-c", "import sys; from spanassert.cli import main; sys.exit(main())"]
# With a test hook in the environment, serve starts through the harness that installs it.
HARNESS = [sys.executable, str(Path(__file__).resolve().parent / "serve_harness.py")]
HOOKS = ("SPANASSERT_TEST_PAUSE_FILE", "SPANASSERT_TEST_FAULT_TYPE", "SPANASSERT_TEST_NOFILE")

RULES = """\
version: 1
tests:
  - id: no-delete
    assertions:
      - type: trace_must_not_call_tool
        tool: delete_database
  - id: search-first
    assertions:
      - type: trace_must_call_tool
        tool: search
      - type: trace_tool_sequence
        sequence: [search, book]
        allow_other_tools: true
  - id: book-args
    assertions:
      - type: trace_args_valid
        tool: book
        schema:
          type: object
          properties:
            seats: {type: integer, maximum: 4}
          required: [seats]
  - id: tools-succeed
    assertions:
      - type: trace_tool_status
        must_succeed: true
"""


class Serve:
    """One ``spanassert serve`` process: its addresses, stderr and exit."""

    def __init__(self, tmp: Path, *extra: str, rules: str = RULES, env: Optional[Dict[str, str]] = None) -> None:
        self.tmp = tmp
        self.rules = tmp / "rules.yaml"
        self.rules.write_text(rules)
        self.report_path = tmp / "report.json"
        self.stderr_path = tmp / "serve.stderr"
        full_env = dict(os.environ)
        full_env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
        full_env.update(env or {})
        self._stderr = open(self.stderr_path, "wb")
        command = HARNESS if any(k in (env or {}) for k in HOOKS) else SPANASSERT
        self.proc = subprocess.Popen(
            command + ["serve", "--config", str(self.rules), "--grpc-endpoint", "127.0.0.1:0",
                          "--http-endpoint", "127.0.0.1:0", "--report-json", str(self.report_path), *extra],
            stdout=subprocess.PIPE, stderr=self._stderr, env=full_env, cwd=str(tmp),
        )
        self.grpc = self.http = ""
        deadline = time.monotonic() + 30
        while not (self.grpc and self.http):
            assert time.monotonic() < deadline, "serve did not print its addresses"
            line = self.proc.stdout.readline().decode()
            assert line, f"serve exited early: {self.stderr()}"
            if "OTLP/gRPC listening on " in line:
                self.grpc = line.rsplit(" ", 1)[1].strip()
            elif "OTLP/HTTP listening on " in line:
                self.http = line.rsplit(" ", 1)[1].strip()

    @property
    def url(self) -> str:
        return f"http://{self.http}"

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def violation_lines(self) -> List[str]:
        return [line for line in self.stderr().splitlines() if line.startswith("spanassert: violation")]

    def health(self) -> Dict[str, Any]:
        with urllib.request.urlopen(self.url + "/health", timeout=5) as resp:
            return json.loads(resp.read())

    def wait_for(self, predicate: Any, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            assert time.monotonic() < deadline, "condition not reached in time"
            time.sleep(0.05)

    def stop(self, timeout: float = 30.0) -> Tuple[int, str, Dict[str, Any]]:
        """SIGTERM; returns (exit code, stdout after the addresses, the --report-json document)."""
        self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=timeout)
        self._stderr.close()
        report = json.loads(self.report_path.read_text()) if self.report_path.exists() else {}
        return self.proc.returncode, out.decode(), report

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        if not self._stderr.closed:
            self._stderr.close()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def post(url: str, body: bytes, content_type: str, *, encoding: Optional[str] = None,
         method: str = "POST") -> Tuple[int, Dict[str, str], bytes]:
    headers = {"Content-Type": content_type}
    if encoding:
        headers["Content-Encoding"] = encoding
    req = urllib.request.Request(url, data=body if method == "POST" else None, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


# -- episodes ----------------------------------------------------------------------------------------

_EPOCH = 1_700_000_000_000_000_000


def json_span(trace: str, span: str, parent: Optional[str], name: str, start: int, end: int,
              attrs: Dict[str, Any], status: int = 0) -> Dict[str, Any]:
    d: Dict[str, Any] = {
        "traceId": trace, "spanId": span, "name": name, "kind": 1,
        "startTimeUnixNano": str(_EPOCH + start), "endTimeUnixNano": str(_EPOCH + end),
        "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()],
    }
    if parent:
        d["parentSpanId"] = parent
    if status:
        d["status"] = {"code": status}
    return d


def tool_attrs(tool: str, arguments: Optional[Dict[str, Any]] = None) -> Dict[str, str]:
    a = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}
    if arguments is not None:
        a["gen_ai.tool.call.arguments"] = json.dumps(arguments)
    return a


def json_request(spans: List[Dict[str, Any]], service: str = "agent-svc") -> Dict[str, Any]:
    return {"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
        "scopeSpans": [{"scope": {"name": "test"}, "spans": spans}],
    }]}


def json_episode(n: int, tools: List[Tuple[str, Optional[Dict[str, Any]]]], *, root: bool = True) -> List[Dict[str, Any]]:
    """One agent episode as OTLP JSON spans: ``invoke_agent`` root and one ``execute_tool`` per tool."""
    trace = f"{n + 1:032x}"
    root_id = f"{(n + 1) * 1000:016x}"
    spans = []
    t = 10
    for i, (tool, args) in enumerate(tools):
        spans.append(json_span(trace, f"{(n + 1) * 1000 + i + 1:016x}", root_id, f"execute_tool {tool}", t, t + 5,
                               tool_attrs(tool, args)))
        t += 10
    if root:
        spans.append(json_span(trace, root_id, None, "invoke_agent planner", 0, t + 5,
                               {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"}))
    return spans


def sdk_episode(tracer: Any, tools: List[Tuple[str, Optional[Dict[str, Any]], bool]]) -> str:
    """One agent episode through the real SDK; returns its trace id (hex)."""
    from opentelemetry.trace import Status, StatusCode

    with tracer.start_as_current_span("invoke_agent planner", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"}) as root:
        for tool, args, error in tools:
            with tracer.start_as_current_span(f"execute_tool {tool}", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}) as span:
                if args is not None:
                    span.set_attribute("gen_ai.tool.call.arguments", json.dumps(args))
                if error:
                    span.set_status(Status(StatusCode.ERROR, "boom"))
        tid = root.get_span_context().trace_id
    return f"{tid:032x}"


# -- fixtures ------------------------------------------------------------------------------------------

import gzip  # noqa: E402
import threading  # noqa: E402
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture
def serve_factory(tmp_path: Path):
    started: List[Serve] = []

    def start(*extra: str, **kwargs: Any) -> Serve:
        d = tmp_path / f"serve{len(started)}"
        d.mkdir()
        s = Serve(d, *extra, **kwargs)
        started.append(s)
        return s

    yield start
    for s in started:
        s.kill()


def _replay_signatures(records: List[Any]) -> Tuple[Dict[str, List[tuple]], set]:
    from spanassert.config import load_config
    from spanassert.replay import replay_records

    report = replay_records(load_config(RULES), records)
    sigs = {ep.trace_id: ep.verdict_signature() for ep in report.episodes}
    viol = {(v.test_id, v.assertion_index, v.span_id) for v in report.violations}
    return sigs, viol


def _report_signatures(report: Dict[str, Any]) -> Tuple[Dict[str, List[tuple]], set]:
    sigs = {ep["trace_id"]: sorted((r["test"], r["index"], r["verdict"], r["span_id"] or "") for r in ep["results"])
            for ep in report["episodes"]}
    viol = {(v["test_id"], v["assertion_index"], v["span_id"]) for v in report["violations"]}
    return sigs, viol


def _records_of(spans: Any) -> List[Any]:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from spanassert.otlp import records_from_proto

    return records_from_proto(encode_spans(spans), "test")


SDK_EPISODES = [
    [("search", {"q": "paris"}, False), ("book", {"seats": 2}, False)],  # passes
    [("search", {"q": "x"}, False), ("delete_database", {}, False)],  # forbidden tool
    [("book", {"seats": 9}, False), ("search", {"q": "y"}, False)],  # args too big, wrong order
    [("book", {"seats": 1}, False)],  # no search: must_call and sequence fail at close
    [("search", {"q": "z"}, True), ("book", {"seats": 3}, False)],  # errored call
]


# -- tests ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["grpc", "http"])
def test_sdk_exporter_verdicts_equal_replay_of_the_same_spans(serve_factory: Any, transport: str) -> None:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    s = serve_factory("--settle", "0.3")
    if transport == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(endpoint=s.grpc, insecure=True)
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # type: ignore

        exporter = OTLPSpanExporter(endpoint=s.url + "/v1/traces")
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "agent-under-test"}))
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=50))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("agent")
    traces = [sdk_episode(tracer, tools) for tools in SDK_EPISODES]
    assert provider.force_flush(10_000)
    provider.shutdown()
    spans = memory.get_finished_spans()
    s.wait_for(lambda: s.health()["spans_received"] == len(spans))

    code, out, report = s.stop()
    assert code == 0, s.stderr()
    assert "stopped;" in out and f"{len(spans)} span(s) accepted" in out
    got_sigs, got_viol = _report_signatures(report)
    want_sigs, want_viol = _replay_signatures(_records_of(spans))
    assert set(got_sigs) == set(traces)
    assert got_sigs == want_sigs
    assert got_viol == want_viol
    verdicts = {ep["trace_id"]: ep["verdict"] for ep in report["episodes"]}
    assert [verdicts[t] for t in traces] == ["passed", "failed", "failed", "failed", "failed"]
    # Every violation is printed exactly once, including those reported on arrival.
    lines = s.violation_lines()
    assert len(lines) == len(want_viol)
    assert sum("delete_database" in line and "no-delete" in line for line in lines) == 1


def test_forbidden_tool_is_reported_on_arrival_before_its_trace_settles(serve_factory: Any) -> None:
    # A long settle time: the order-dependent rules wait, the forbidden call must not.
    s = serve_factory("--settle", "60")
    spans = json_episode(0, [("search", {"q": "a"}), ("delete_database", None)])
    status, _, _ = post(s.url + "/v1/traces", json.dumps(json_request(spans)).encode(), "application/json")
    assert status == 200
    s.wait_for(lambda: any("delete_database" in line for line in s.violation_lines()), timeout=5)
    # /health's counts are refreshed after the whole request is taken, a moment after the early line.
    s.wait_for(lambda: s.health()["buffered_traces"] == 1, timeout=5)
    h = s.health()
    assert h["buffered_traces"] == 1 and h["open_episodes"] == 0  # the trace itself is still waiting
    line = s.violation_lines()[0]
    assert "no-delete" in line and "trace_must_not_call_tool" in line and f"span {spans[1]['spanId']}" in line

    code, _, report = s.stop()
    assert code == 0
    # Confirmed at shutdown by the assembled trace, and still reported once.
    assert [v["test_id"] for v in report["violations"]].count("no-delete") == 1
    assert sum("no-delete" in line for line in s.violation_lines()) == 1
    assert report["episodes"][0]["close_reason"] == "root_ended"


def test_json_and_gzip_requests_match_replay_and_rejected_spans_are_counted(serve_factory: Any,
                                                                          tmp_path: Path) -> None:
    from spanassert.config import load_config
    from spanassert.replay import replay

    s = serve_factory("--settle", "0.2")
    docs = [json_request(json_episode(i, tools)) for i, tools in enumerate([
        [("search", {"q": 1}), ("book", {"seats": 2})],
        [("book", {"seats": 7})],
        [("delete_database", None)],
    ])]
    bad = json_span("00" * 16, "0000000000000001", None, "execute_tool x", 0, 1, tool_attrs("x"))
    docs[0]["resourceSpans"][0]["scopeSpans"][0]["spans"].append(bad)
    status, headers, body = post(s.url + "/v1/traces", json.dumps(docs[0]).encode(), "application/json")
    assert status == 200 and headers["Content-Type"] == "application/json"
    partial = json.loads(body)["partialSuccess"]
    assert partial["rejectedSpans"] == "1" and "all zeros" in partial["errorMessage"]
    status, _, body = post(s.url + "/v1/traces", gzip.compress(json.dumps(docs[1]).encode()), "application/json",
                           encoding="gzip")
    assert status == 200 and json.loads(body) == {}
    status, _, _ = post(s.url + "/v1/traces", json.dumps(docs[2]).encode(), "application/json; charset=utf-8")
    assert status == 200

    code, _, report = s.stop()
    assert code == 0
    # Replay of the same requests, the rejected span included: a part it cannot read leaves no pass
    # (review10: serve's report once passed what replay called inconclusive here).
    path = tmp_path / "requests.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    replayed = replay(load_config(RULES), [str(path)])
    assert _report_signatures(report) == (
        {ep.trace_id: ep.verdict_signature() for ep in replayed.episodes},
        {(v.test_id, v.assertion_index, v.span_id) for v in replayed.violations})
    assert "passed" not in {r["verdict"] for ep in report["episodes"] for r in ep["results"]}
    assert report["receiver"]["spans_rejected"] == 1


class _Collector:
    """An in-test OTLP/HTTP endpoint that keeps what is forwarded to it."""

    def __init__(self, fail_first: int = 0) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        self.requests: List[Any] = []
        self.paths: List[str] = []
        self.fail_first = fail_first
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.paths.append(self.path)
                if outer.fail_first > 0:
                    outer.fail_first -= 1
                    self.send_response(503)
                    self.send_header("Retry-After", "0")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                outer.requests.append(ExportTraceServiceRequest.FromString(body))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def spans(self) -> Dict[str, Any]:
        return {s.span_id.hex(): s for r in self.requests for rs in r.resource_spans
                for ss in rs.scope_spans for s in ss.spans}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def collector():
    c = _Collector(fail_first=1)
    yield c
    c.close()


def test_forwarded_spans_carry_the_evaluation_event_on_offending_spans(serve_factory: Any, collector: _Collector) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    s = serve_factory("--settle", "0.2", "--forward", collector.url)
    provider = TracerProvider(resource=Resource.create({"service.name": "agent-under-test"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=s.url + "/v1/traces")))
    tracer = provider.get_tracer("agent")
    sdk_episode(tracer, [("search", {"q": "x"}, False), ("delete_database", {}, False)])
    provider.shutdown()
    json_spans = json_episode(7, [("book", {"seats": 9})])  # violates book-args and search-first
    assert post(s.url + "/v1/traces", json.dumps(json_request(json_spans)).encode(), "application/json")[0] == 200
    s.wait_for(lambda: len(collector.spans()) == 5)
    code, out, report = s.stop()
    assert code == 0 and "forwarded 5 span(s), dropped 0" in out
    assert set(collector.paths) == {"/v1/traces"}

    def events(span: Any) -> List[Dict[str, Any]]:
        return [{kv.key: getattr(kv.value, kv.value.WhichOneof("value")) for kv in e.attributes}
                for e in span.events if e.name == "gen_ai.evaluation.result"]

    forwarded = collector.spans()
    by_name = {}
    for sid, span in forwarded.items():
        by_name.setdefault(span.name, []).append(span)
    # SDK (protobuf) input: the forbidden call carries the event; the other tool span does not.
    [delete] = by_name["execute_tool delete_database"]
    [ev] = events(delete)
    assert ev["spanassert.test.id"] == "no-delete" and ev["gen_ai.evaluation.score.label"] == "fail"
    assert "delete_database" in ev["gen_ai.evaluation.explanation"]
    assert all(not events(sp) for sp in by_name["execute_tool search"])
    # JSON input: rebuilt spans keep ids and attributes, and the violations are attached.
    [book] = by_name["execute_tool book"]
    assert book.span_id.hex() == json_spans[0]["spanId"]
    assert [e["spanassert.test.id"] for e in events(book)] == ["book-args"]
    roots = {sp.span_id.hex(): sp for sp in by_name["invoke_agent planner"]}
    json_root = roots[json_spans[-1]["spanId"]]
    # The liveness rules (must_call, sequence) fail at close, on the root.
    assert sorted(e["spanassert.assertion.type"] for e in events(json_root)) == [
        "trace_must_call_tool", "trace_tool_sequence"]
    want = sorted((v["test_id"], v["assertion_index"], v["span_id"]) for v in report["violations"])
    got = sorted((e["spanassert.test.id"], e["spanassert.assertion.index"], sid)
                 for sid, sp in forwarded.items() for e in events(sp))
    assert got == want


def test_http_error_answers(serve_factory: Any) -> None:
    from google.rpc import status_pb2

    s = serve_factory("--max-request-bytes", "4096")
    url = s.url + "/v1/traces"
    status, headers, body = post(url, b"\xff\xff\xff", "application/x-protobuf")
    assert status == 400 and headers["Content-Type"] == "application/x-protobuf"
    st = status_pb2.Status.FromString(body)
    assert st.code == 3 and "not a protobuf ExportTraceServiceRequest" in st.message
    status, headers, body = post(url, b'{"resourceSpans": [', "application/json")
    assert status == 400 and "body is not JSON" in json.loads(body)["message"]
    status, _, body = post(url, b'{"resourceMetrics": []}', "application/json")
    assert status == 400 and "metrics" in json.loads(body)["message"]
    status, _, body = post(url, b"hello", "text/plain")
    assert status == 415 and "unsupported Content-Type" in status_pb2.Status.FromString(body).message
    assert post(url, b"", "application/json", method="GET")[0] == 405
    assert post(s.url + "/v1/metrics", b"{}", "application/json")[0] == 404
    assert post(s.url + "/nope", b"", "application/json", method="GET")[0] == 404
    status, _, body = post(url, b"x" * 5000, "application/x-protobuf")
    assert status == 413 and "4096" in status_pb2.Status.FromString(body).message
    bomb = gzip.compress(b"\0" * 10_000_000)  # ~10 KB on the wire, 10 MB inflated
    status, _, body = post(url, bomb[:4000] if len(bomb) > 4096 else bomb, "application/x-protobuf", encoding="gzip")
    assert status == 413 and "decompresses to over 4096" in status_pb2.Status.FromString(body).message
    status, _, body = post(url, b"not gzip", "application/x-protobuf", encoding="gzip")
    assert status == 400 and "not gzip" in status_pb2.Status.FromString(body).message
    status, _, body = post(url, b"{}", "application/json", encoding="br")
    assert status == 415
    # Still healthy after all that, and nothing was accepted.
    h = s.health()
    assert h["status"] == "ok" and h["spans_received"] == 0
    assert s.stop()[0] == 0


def test_json_numbers_out_of_range_are_specific_answers(serve_factory: Any) -> None:
    s = serve_factory()
    url = s.url + "/v1/traces"
    # fuzz8: a JSON number past int()'s 4300-digit bound raised a plain ValueError in the request
    # thread (no answer, the connection dropped); a time past fixed64 was accepted and overflowed later.
    status, _, body = post(url, b'{"resourceSpans": [], "x": ' + b"9" * 5000 + b"}", "application/json")
    assert status == 400 and json.loads(body)["message"] == (
        "JSON body: a JSON number has more than 4300 digits, too long to read (OTLP integers have at most 20 digits)")
    span = json_span("5b8efff798038103d269b633813fc60c", "00000000000000a1", None, "s", 1, 2, {})
    span["endTimeUnixNano"] = "9" * 400
    status, _, body = post(url, json.dumps(json_request([span])).encode(), "application/json")
    rejected = json.loads(body)["partialSuccess"]
    assert status == 200 and rejected["rejectedSpans"] == "1"
    assert "`endTimeUnixNano` '9999" in rejected["errorMessage"] and "is out of range" in rejected["errorMessage"]
    h = s.health()
    assert h["status"] == "ok" and h["spans_received"] == 0 and h["spans_rejected"] == 1
    assert s.stop()[0] == 0


def test_grpc_malformed_request_is_invalid_argument_and_oversized_is_refused(serve_factory: Any) -> None:
    import grpc

    s = serve_factory("--max-request-bytes", "4096")
    with grpc.insecure_channel(s.grpc) as channel:
        export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
        with pytest.raises(grpc.RpcError) as err:
            export(b"\xff\xff\xff", timeout=10)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "ExportTraceServiceRequest" in err.value.details()
        with pytest.raises(grpc.RpcError) as err:
            export(b"\x0a" + b"\x80\x40" + b"\0" * 8192, timeout=10)
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert s.stop()[0] == 0


def test_full_intake_queue_answers_503_and_resource_exhausted_with_retry_info(serve_factory: Any, tmp_path: Path) -> None:
    import grpc
    from google.rpc import error_details_pb2, status_pb2
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    pause = tmp_path / "pause"
    pause.write_text("")
    s = serve_factory("--queue-size", "3", "--settle", "0.1", env={"SPANASSERT_TEST_PAUSE_FILE": str(pause)})
    url = s.url + "/v1/traces"
    first = json.dumps(json_request(json_episode(0, [("search", None)]))).encode()  # 2 spans
    second = json.dumps(json_request(json_episode(1, [("search", None)]))).encode()
    assert post(url, first, "application/json")[0] == 200
    status, headers, body = post(url, second, "application/json")
    assert status == 503 and headers["Retry-After"] == "1" and "queue is full" in json.loads(body)["message"]
    assert s.health()["queue_depth"] == 2

    proto = ExportTraceServiceRequest()
    rs = proto.resource_spans.add()
    sp = rs.scope_spans.add().spans.add()
    sp.trace_id, sp.span_id, sp.name = bytes(range(1, 17)), bytes(range(1, 9)), "execute_tool search"
    sp2 = rs.scope_spans[0].spans.add()
    sp2.CopyFrom(sp)
    sp2.span_id = bytes(range(2, 10))
    with grpc.insecure_channel(s.grpc) as channel:
        export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                                     request_serializer=ExportTraceServiceRequest.SerializeToString)
        with pytest.raises(grpc.RpcError) as err:
            export(proto, timeout=10)
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    trailers = dict(err.value.trailing_metadata())
    st = status_pb2.Status.FromString(trailers["grpc-status-details-bin"])
    info = error_details_pb2.RetryInfo()
    assert st.details[0].Unpack(info) and info.retry_delay.seconds == 1
    assert error_details_pb2.RetryInfo.FromString(trailers["google.rpc.retryinfo-bin"]).retry_delay.seconds == 1

    pause.unlink()  # the engine catches up; the retried request now fits
    s.wait_for(lambda: s.health()["queue_depth"] == 0)
    assert post(url, second, "application/json")[0] == 200
    code, _, report = s.stop()
    assert code == 0
    assert len(report["episodes"]) == 2 and report["receiver"]["spans_refused"] == 4


def test_sigterm_under_load_exits_zero_with_every_accepted_episode_decided(serve_factory: Any) -> None:
    s = serve_factory("--settle", "5", "--quiet")
    url = s.url + "/v1/traces"
    accepted: List[str] = []
    refused: List[int] = []
    lock = threading.Lock()
    stop = threading.Event()

    def sender(worker: int) -> None:
        i = 0
        while not stop.is_set() and i < 400:
            n = worker * 1000 + i
            body = json.dumps(json_request(json_episode(n, [("search", {"q": n}), ("book", {"seats": 1})]))).encode()
            try:
                status = post(url, body, "application/json")[0]
            except OSError:
                status = -1  # the port closed under us: not accepted
            with lock:
                if status == 200:
                    accepted.append(f"{n + 1:032x}")
                else:
                    refused.append(status)
            i += 1

    workers = [threading.Thread(target=sender, args=(w,)) for w in range(4)]
    for w in workers:
        w.start()
    s.wait_for(lambda: len(accepted) >= 40)
    code, out, report = s.stop()
    stop.set()
    for w in workers:
        w.join(30)
    assert code == 0, s.stderr()
    decided = {ep["trace_id"]: ep for ep in report["episodes"]}
    assert set(accepted) <= set(decided)
    # Settle was 5 s, so most were still buffered at SIGTERM: released whole and judged on their root.
    assert all(decided[t]["verdict"] == "passed" and decided[t]["close_reason"] == "root_ended" for t in accepted)
    assert "stopped;" in out


def test_health_reports_status_queue_and_counts(serve_factory: Any) -> None:
    s = serve_factory("--settle", "30")
    h = s.health()
    assert h["status"] == "ok" and h["queue_depth"] == 0 and h["spans_received"] == 0 and h["open_episodes"] == 0
    doc = json_request(json_episode(0, [("search", None)], root=False))
    body = json.dumps(doc).encode()
    assert post(s.url + "/v1/traces", body, "application/json")[0] == 200
    s.wait_for(lambda: s.health()["buffered_traces"] == 1)
    assert s.health()["spans_received"] == 1
    assert post(s.url + "/health", b"{}", "application/json")[0] == 405
    code, _, report = s.stop()
    assert code == 0
    # A trace whose root never came is released at shutdown and judged as replay judges it.
    from spanassert.otlp import records_from_json

    assert len(report["episodes"]) == 1
    assert _report_signatures(report) == _replay_signatures(records_from_json(doc, "t"))


def test_bad_rules_file_or_endpoint_exits_2_with_a_clear_message(tmp_path: Path) -> None:
    rules = tmp_path / "bad.yaml"
    rules.write_text("version: 1\ntests:\n  - id: x\n    assertions:\n      - type: trace_nope\n")
    r = subprocess.run(SPANASSERT + ["serve", "--config", str(rules), "--grpc-endpoint", "127.0.0.1:0",
                                     "--http-endpoint", "127.0.0.1:0"], capture_output=True, timeout=60)
    assert r.returncode == 2 and b"trace_nope" in r.stderr and b"not started" in r.stderr
    good = tmp_path / "good.yaml"
    good.write_text(RULES)
    r = subprocess.run(SPANASSERT + ["serve", "--config", str(good), "--http-endpoint", "localhost"],
                       capture_output=True, timeout=60)
    assert r.returncode == 2 and b"--http-endpoint 'localhost': expected HOST:PORT" in r.stderr


class _OtlpSink:
    """An in-test OTLP/HTTP endpoint for metrics and logs: keeps the raw requests by path."""

    def __init__(self) -> None:
        self.bodies: Dict[str, List[bytes]] = {}
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.bodies.setdefault(self.path, []).append(body)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_violation_logs_and_metrics_go_out_over_otlp_with_the_standard_variables(serve_factory: Any) -> None:
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

    sink = _OtlpSink()
    try:
        s = serve_factory(env={"OTEL_EXPORTER_OTLP_ENDPOINT": sink.url, "OTEL_METRICS_EXPORTER": "otlp",
                               "OTEL_LOGS_EXPORTER": "otlp", "OTEL_METRIC_EXPORT_INTERVAL": "200"})
        spans = json_episode(7, [("delete_database", None)])
        assert post(s.url + "/v1/traces", json.dumps(json_request(spans)).encode(), "application/json")[0] == 200
        s.wait_for(lambda: any("delete_database" in line for line in s.violation_lines()), timeout=10)
        code, _, _ = s.stop()
        assert code == 0
        logs = [ExportLogsServiceRequest.FromString(b) for b in sink.bodies.get("/v1/logs", [])]
        records = [lr for r in logs for rl in r.resource_logs for sl in rl.scope_logs for lr in sl.log_records]
        by_name = {kv.value.string_value: lr for lr in records for kv in lr.attributes
                   if kv.key == "gen_ai.evaluation.name"}
        assert "no-delete" in by_name
        assert by_name["no-delete"].span_id.hex() == spans[0]["spanId"]  # the delete_database span
        metrics = [ExportMetricsServiceRequest.FromString(b) for b in sink.bodies.get("/v1/metrics", [])]
        seen = {m.name for r in metrics for rm in r.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
        assert "spanassert.violations" in seen and "spanassert.episodes" in seen
    finally:
        sink.close()


def test_format_json_prints_each_violation_and_the_summary_as_one_json_object(serve_factory: Any) -> None:
    """`serve --format json`: one JSON object per violation on stderr (a hostile tool name cannot
    end the line), and the stop summary as one JSON object on stdout."""
    s = serve_factory("--settle", "0.2", "--format", "json",
                      rules=RULES + "  - id: only-search\n    assertions: [{type: trace_only_tools, tools: [search]}]\n")
    hostile = "evil\nspanassert: violation [critical] forged\x1b[2J"
    spans = json_episode(0, [("search", {"q": "a"}), ("delete_database", None), (hostile, None)])
    status, _, _ = post(s.url + "/v1/traces", json.dumps(json_request(spans)).encode(), "application/json")
    assert status == 200
    s.wait_for(lambda: s.health()["violations"] >= 2, timeout=10)
    code, out, _ = s.stop()
    assert code == 0
    lines = [line for line in s.stderr().splitlines() if line.startswith("{")]
    events = [json.loads(line) for line in lines]
    assert [e["event"] for e in events] == ["violation"] * len(events) and len(events) >= 2
    assert not [line for line in s.stderr().splitlines() if "forged" in line and not line.startswith("{")]
    forbidden = [e for e in events if e["test_id"] == "no-delete"]
    assert forbidden and forbidden[0]["tool"] == "delete_database"
    assert forbidden[0]["assertion_type"] == "trace_must_not_call_tool" and forbidden[0]["trace_id"] == f"{1:032x}"
    assert any(e["test_id"] == "only-search" and e["tool"] == hostile for e in events)
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["event"] == "stopped" and summary["violations"] == len(events)
    assert summary["episodes_decided"] == 1 and summary["episodes_failed"] == 1
